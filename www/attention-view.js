// Attention by position for the hypothesis under a loaded model: the
// worker's `attentionView` (the core's view), drawn as a 10 x 10 heatmap of
// tenths of the text and a curve of the mass at each distance.

import { fillModelSelect, trackLoadedModels } from "./loaded-models.js";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

const view = { engine: null, models: null, running: false };

/** Models the view reads (the core refuses the others, saying why). */
const canShow = (m) => ["encoder", "causal-lm", "seq2-seq-lm"].some((k) => m.kinds.includes(k));

function status(text, kind = "muted") {
  const el = $("attention-status");
  el.textContent = text;
  el.className = kind;
}

function refresh() {
  const usable = [...view.models.values()].filter(canShow);
  fillModelSelect($("attention-model"), usable, "load an encoder, GPT-2, BART or T5 above");
  $("attention-run").disabled = view.running || !$("attention-model").value;
}

function el(name, attrs = {}) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

/** The tenths as a heatmap: darker = more attention; each cell's value in its title and data-raw. */
function heatmap(blocks) {
  const cell = 22, pad = 34;
  const svg = el("svg", { width: pad + 10 * cell + 4, height: pad + 10 * cell + 4, role: "img", "aria-label": "Attention between tenths of the text" });
  const most = Math.max(...blocks.flat().filter((v) => v != null), 1e-12);
  blocks.forEach((row, q) => row.forEach((v, k) => {
    const r = el("rect", { x: pad + k * cell, y: pad + q * cell, width: cell - 1, height: cell - 1, class: "block" });
    r.setAttribute("fill", v == null ? "#f2f2f2" : `rgba(0, 90, 181, ${(0.08 + 0.92 * v / most).toFixed(3)})`);
    r.dataset.raw = v ?? "";
    const title = el("title");
    title.textContent = v == null ? "no token here" : `tokens in tenth ${q + 1} → tenth ${k + 1}: ${v.toFixed(3)}`;
    r.append(title);
    svg.append(r);
  }));
  const label = (x, y, text, extra = {}) => {
    const t = el("text", { x, y, "font-size": 10, ...extra });
    t.textContent = text;
    svg.append(t);
  };
  label(pad, 12, "attends to → (tenths of the text)");
  label(4, pad + 5 * cell, "reading ↓", { transform: `rotate(-90 10 ${pad + 5 * cell})` });
  return svg;
}

/** Mass by offset (key minus query position): a curve with the reading token at 0. */
function offsetsChart(offsets) {
  const w = 320, h = 160, pad = 28;
  const svg = el("svg", { width: w, height: h, role: "img", "aria-label": "Attention by distance from the reading token" });
  const lo = offsets[0][0], hi = offsets[offsets.length - 1][0];
  const most = Math.max(...offsets.map(([, m]) => m), 1e-12);
  const x = (d) => pad + ((d - lo) / Math.max(hi - lo, 1)) * (w - 2 * pad);
  const y = (m) => h - pad - (m / most) * (h - 2 * pad);
  svg.append(el("line", { x1: pad, y1: h - pad, x2: w - pad, y2: h - pad, stroke: "#999" }));
  svg.append(el("line", { x1: x(0), y1: pad / 2, x2: x(0), y2: h - pad, stroke: "#d55e00", "stroke-dasharray": "3 3" }));
  svg.append(el("polyline", { points: offsets.map(([d, m]) => `${x(d).toFixed(1)},${y(m).toFixed(1)}`).join(" "), fill: "none", stroke: "#005ab5", "stroke-width": 1.5 }));
  for (const [d, anchor] of [[lo, "start"], [0, "middle"], [hi, "end"]]) {
    const t = el("text", { x: x(d), y: h - pad + 14, "font-size": 10, "text-anchor": anchor });
    t.textContent = d === 0 ? "0: the token itself" : String(d);
    svg.append(t);
  }
  return svg;
}

async function run() {
  if (view.running) return;
  const handle = Number($("attention-model").value);
  const text = $("hypothesis").value;
  view.running = true;
  refresh();
  status("Reading…");
  try {
    const v = await view.engine.attentionView(handle, text);
    const box = $("attention-result");
    const note = document.createElement("p");
    note.className = "muted";
    note.textContent = `${v.model}: ${v.tokens.length} tokens, ${v.layers} layers × ${v.heads} heads averaged.`;
    box.replaceChildren(heatmap(v.blocks), offsetsChart(v.offsets), note);
    box.dataset.model = v.model;
    box.dataset.offsets = JSON.stringify(v.offsets);
    box.hidden = false;
    status("");
  } catch (err) {
    status(String(err.message ?? err), "bad");
  } finally {
    view.running = false;
    refresh();
  }
}

/** Wires the section to the model engine (models come from models.js's events). */
export function initAttentionView(engine) {
  view.engine = engine;
  view.models = trackLoadedModels(refresh);
  $("attention-model").addEventListener("change", refresh);
  $("attention-run").addEventListener("click", run);
}
