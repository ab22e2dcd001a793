// Files the page saves (one download helper for all of them), and charts
// saved as files: every chart of the page (sweep curves, the suite's
// figures, the attack's trajectory, the BERTScore and MoverScore heatmaps,
// MAUVE's divergence curve) is an SVG drawn from the core's numbers (the
// heatmaps' cells are painted into a canvas under theirs, and go into the
// files as rects); its "SVG" and "PNG" buttons save exactly what is on
// screen. The page's stylesheet does not travel with a file, so the computed
// colours, strokes and fonts are written onto the copy as SVG presentation
// attributes.

const SVG_NS = "http://www.w3.org/2000/svg";

/** The computed properties a chart's look depends on. */
const PROPS = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-dasharray", "stroke-opacity",
  "opacity", "font-family", "font-size", "font-weight", "font-style", "text-anchor", "dominant-baseline"];

/** A file name made of the chart's name: letters, digits and dashes. */
function fileName(name, ext) {
  const base = String(name).toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "") || "chart";
  return `blindspot-${base}.${ext}`;
}

/**
 * The chart as a standalone SVG document (text), with its width and height
 * in pixels: computed styles inlined, a white background, elements the page
 * hides left out. `decorate(copy)`, when given, adds to the copy what the
 * page draws beside the SVG (a grid's painted cells) once styles are inlined.
 */
export function standaloneSvg(svg, decorate) {
  const box = svg.getBoundingClientRect();
  const width = Math.round(box.width) || Number(svg.getAttribute("width")) || 600;
  let height = Math.round(box.height) || Number(svg.getAttribute("height")) || 300;
  const copy = svg.cloneNode(true);
  const from = [svg, ...svg.querySelectorAll("*")];
  const to = [copy, ...copy.querySelectorAll("*")];
  const styles = new Map(from.map((el) => [el, getComputedStyle(el)]));
  from.forEach((el, i) => {
    const style = styles.get(el);
    if (style.display === "none" || style.visibility === "hidden") {
      to[i].setAttribute("display", "none");
      return;
    }
    // A value the element inherits from its parent in the copy is not written again.
    const parent = el === svg ? null : styles.get(el.parentElement);
    for (const p of PROPS) {
      const v = style.getPropertyValue(p);
      if (v && (p === "opacity" ? v !== "1" : v !== parent?.getPropertyValue(p))) to[i].setAttribute(p, v);
    }
  });
  const before = copy.getAttribute("viewBox");
  decorate?.(copy);
  // A decoration that grew the viewBox (a heading) grows the file with it, at the chart's scale.
  const after = copy.getAttribute("viewBox");
  if (before && after && before !== after) {
    const [, , w0, h0] = before.split(/[\s,]+/).map(Number);
    const [, , w1, h1] = after.split(/[\s,]+/).map(Number);
    if (w0 === w1 && h0 > 0) height = Math.round((height * h1) / h0);
  }
  copy.setAttribute("xmlns", SVG_NS);
  copy.setAttribute("width", String(width));
  copy.setAttribute("height", String(height));
  if (!copy.hasAttribute("viewBox")) copy.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const [x, y, w, h] = copy.getAttribute("viewBox").split(/[\s,]+/).map(Number);
  const bg = document.createElementNS(SVG_NS, "rect");
  for (const [k, v] of Object.entries({ x, y, width: w, height: h, fill: "#ffffff" })) bg.setAttribute(k, String(v));
  copy.prepend(bg);
  return { text: new XMLSerializer().serializeToString(copy), width, height };
}

/** The chart drawn into a PNG (twice its on-screen size, for print and slides). */
export async function chartPng(svg, decorate, scale = 2) {
  const { text, width, height } = standaloneSvg(svg, decorate);
  const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
  try {
    const img = new Image();
    img.src = url;
    await img.decode();
    const canvas = document.createElement("canvas");
    canvas.width = Math.round(width * scale);
    canvas.height = Math.round(height * scale);
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
    return await new Promise((resolve, reject) =>
      canvas.toBlob((b) => (b ? resolve(b) : reject(new Error("the browser could not encode the PNG"))), "image/png"));
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** Saves `blob` as a file named `name` (the browser's download). */
export function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * "SVG" and "PNG" buttons for the chart found by `find()` when clicked (the
 * chart may be redrawn in between), saved as blindspot-NAME.svg / .png;
 * `decorate` as for `standaloneSvg`.
 */
export function chartTools(name, find, decorate) {
  const tools = document.createElement("span");
  tools.className = "chart-tools";
  tools.dataset.chart = name;
  for (const kind of ["svg", "png"]) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "link";
    b.dataset.export = kind;
    b.textContent = kind.toUpperCase();
    b.title = `Save this chart as ${kind.toUpperCase()}`;
    b.addEventListener("click", async () => {
      const svg = find();
      if (!svg) return;
      try {
        const blob = kind === "svg"
          ? new Blob([standaloneSvg(svg, decorate).text], { type: "image/svg+xml" })
          : await chartPng(svg, decorate);
        download(blob, fileName(name, kind));
      } catch (err) {
        b.title = `Could not save: ${err.message ?? err}`;
      }
    });
    tools.append(b);
  }
  return tools;
}
