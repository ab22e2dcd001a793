// The sweep view's charts: SVG drawn by hand, one small multiple per metric.
// Pure rendering: the numbers and verdicts come from the wasm core (src/stress).

import { chartTools } from "./export.js";

/** How verdicts are shown, from the core (src/stress: `metricChoices().verdicts`). */
const verdicts = {};

/** Takes the core's verdict list once the engine is ready. */
export function initSweep(infos) {
  for (const v of infos) verdicts[v.id] = v;
}
const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(name, attrs, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/**
 * One small chart: score against noise ratio, the original as a dashed line,
 * with the rank-rule badge. `fmt` formats a score on the metric's scale;
 * `injection` (its id) names the saved files and heads the saved chart,
 * with the metric and the verdict (the caption is not part of the SVG).
 */
export function sweepChart(info, base, points, verdict, fmt, injection) {
  const [w, h, left, right, top, bottom] = [220, 120, 42, 8, 8, 22];
  const xs = points.map((p) => p.x);
  const ys = [base, ...points.map((p) => p.y)];
  const xMax = Math.max(...xs, 1e-9);
  let [yMin, yMax] = [Math.min(...ys), Math.max(...ys)];
  if (yMax - yMin < 1e-9) [yMin, yMax] = [yMin - 1, yMax + 1];
  const X = (x) => left + (x / xMax) * (w - left - right);
  const Y = (y) => top + (1 - (y - yMin) / (yMax - yMin)) * (h - top - bottom);
  const svg = svgEl("svg", { viewBox: `0 0 ${w} ${h}`, role: "img" });
  svg.setAttribute("aria-label", `${info.name}: ${verdicts[verdict].label.toUpperCase()}. Original ${fmt(base)}; ` +
    points.map((p) => `noise ${p.x.toFixed(2)}: ${fmt(p.y)}`).join("; "));
  svg.append(
    svgEl("line", { class: "axis", x1: left, y1: h - bottom, x2: w - right, y2: h - bottom }),
    svgEl("line", { class: "axis", x1: left, y1: top, x2: left, y2: h - bottom }),
    svgEl("line", { class: "base", x1: left, y1: Y(base), x2: w - right, y2: Y(base) }),
    svgEl("text", { x: left - 3, y: top + 8, "text-anchor": "end" }, fmt(yMax)),
    svgEl("text", { x: left - 3, y: h - bottom, "text-anchor": "end" }, fmt(yMin)),
    svgEl("text", { x: left, y: h - 6 }, "0"),
    svgEl("text", { x: w - right, y: h - 6, "text-anchor": "end" }, `noise ${xMax.toFixed(2)}`),
  );
  // A ±1 std band over seeds, when the points carry one.
  if (points.length && points.every((p) => p.sd !== undefined)) {
    const upper = points.map((p) => `${X(p.x)},${Y(Math.min(yMax, p.y + p.sd))}`);
    const lower = points.map((p) => `${X(p.x)},${Y(Math.max(yMin, p.y - p.sd))}`).reverse();
    svg.append(svgEl("polygon", { class: "band", points: [...upper, ...lower].join(" ") }));
  }
  const all = [{ x: 0, y: base }, ...points];
  svg.append(svgEl("polyline", { class: "curve", points: all.map((p) => `${X(p.x)},${Y(p.y)}`).join(" ") }));
  for (const p of all) svg.append(svgEl("circle", { class: "point", cx: X(p.x), cy: Y(p.y), r: 3 }));
  const figure = document.createElement("figure");
  figure.dataset.metric = info.id;
  figure.dataset.verdict = verdict;
  const caption = document.createElement("figcaption");
  const name = document.createElement("span");
  name.textContent = info.name;
  const badge = document.createElement("span");
  badge.className = `badge ${verdict}`;
  badge.textContent = verdicts[verdict].label.toUpperCase();
  badge.title = verdicts[verdict].description;
  // A saved chart carries its own heading, above the plot.
  const heading = (copy) => {
    const [x, y, vw, vh] = copy.getAttribute("viewBox").split(/[\s,]+/).map(Number);
    copy.setAttribute("viewBox", `${x} ${y - 14} ${vw} ${vh + 14}`);
    copy.append(svgEl("text", { x: x + 2, y: y - 4, "font-size": 8, fill: "#222" },
      `${injection} · ${info.name}: ${verdicts[verdict].label.toUpperCase()}`));
  };
  caption.append(name, badge, chartTools(`${injection}-${info.id}`, () => svg, heading));
  figure.append(caption, svg);
  return figure;
}
