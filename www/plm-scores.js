// Live model-based scores for the pair being edited, once language models
// are loaded: BERTScore (with a token-alignment heatmap), GPT-PPL (with a
// per-token surprisal bar under the hypothesis), MLM-PPL, MENLI (entailment,
// neutral and contradiction probabilities per direction), COMET, COMET-QE,
// BLEURT and BARTScore (with each target token's log-likelihood). Each card lists the
// loaded models that can run its metric and says where the chosen one runs.
//
// Every number comes from the core's metric engine (`scoreModel`, the same
// engine as the CLI): a card only turns its controls into a metric spec and
// draws the result. The card titles, option lists and defaults come from the
// core's registries. Model passes run in the model worker (model-engine.js),
// so typing stays smooth: each card runs one pass at a time, and when it ends
// only the newest text is scored (stale results are never shown).

import { chartTools } from "./export.js";
import { isNliModel, newestEncoderFirst } from "./models.js";

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";

/** Loaded models by handle (infos from models.js's "blindspot:model" event). */
const models = new Map();
let engine = null;
let choices = null; // the core's metric schema (metricChoices)
let registry = [];  // the core's metric registry (one entry per metric id)
let specId = null;  // the core's id of a spec's column
let pinnedText = () => null;

/**
 * One card per model-based kind of the core's schema, in registry order: a
 * kind that is a version of another (`card.versionOf`) is one of that
 * card's versions. `{kinds: [KindInfo], drawn: detail kind last drawn}`.
 */
const cards = new Map();

/** Per-card pass state: the chosen model, one pass at a time, newest text wins. */
const runs = {};
/** The pinned original's scores per card, by request (recomputed only when it changes). */
const pinnedScores = new Map();

const info = (id) => registry.find((m) => m.id === id);
const kindOf = (tag) => choices.kinds.find((k) => k.kind === tag);

/** The registry entry of the column a kind's default spec fills. */
const defaultInfo = (kind) => info(specId(kind.defaults));

/** Whether a loaded model can run one of the card's kinds. */
const runsOn = (card, model) => card.kinds.some((k) => k.columns.some((id) => model.metrics.includes(id)));

/**
 * Cards whose metric reads any encoder: NLI classifiers qualify, but never
 * alone (loading only an NLI model for MENLI starts no BERTScore or
 * MoverScore passes on it).
 */
const readsAnyEncoder = (card) => card.kinds[0].model === "encoder";

function capable(id) {
  const c = cards.get(id);
  const all = [...models.values()].filter((m) => runsOn(c, m));
  if (readsAnyEncoder(c) && all.every(isNliModel)) return [];
  return all;
}

function card(id) {
  let el = document.querySelector(`.card[data-metric="${id}"]`);
  if (el) return el;
  const kind = cards.get(id).kinds[0];
  const metric = defaultInfo(kind);
  el = document.createElement("article");
  el.className = "card card-wide plm-card";
  el.dataset.metric = id;
  el.title = metric.description;
  el.innerHTML = `
    <header><h3></h3><span class="scale"></span></header>
    <div class="plm-model"><label>Model <select data-role="model"></select></label> <span class="pill" data-role="backend"></span></div>
    <p class="muted plm-about"></p>
    <div class="plm-options" data-role="options"></div>
    <div class="value" data-role="value">–</div>
    <div class="delta" data-role="delta"></div>
    <div class="parts" data-role="parts"></div>
    <div class="plm-detail" data-role="detail"></div>
    <div class="delta message" data-role="message"></div>
    <details><summary>Signature</summary><code data-role="signature"></code></details>`;
  el.querySelector("h3").textContent = kind.name;
  el.querySelector(".scale").textContent = metric.scale_label;
  el.querySelector(".plm-about").textContent = kind.about;
  el.querySelector('[data-role="model"]').addEventListener("change", (e) => {
    runs[id].handle = Number(e.target.value);
    showBackend(id);
    score(id);
  });
  addOptions(id, el.querySelector('[data-role="options"]'));
  $("score-cards").append(el);
  return el;
}

/**
 * The card's option controls, built from its kinds' option schemas: a
 * checkbox per boolean, a select per enum (labels from `x-labels`) or per
 * option with suggested values (`x-choices`), a number field otherwise; an
 * unset optional value reads `x-null-label`. Options the page does not offer
 * (`x-page: false`: the model, which the model picker sets) and the column
 * option of a card that shows every column are left out. A card with
 * versions offers them first; a control a version lacks is disabled.
 */
function addOptions(id, box) {
  const { kinds } = cards.get(id);
  const labelled = (control, text) => {
    const l = document.createElement("label");
    if (control.type === "checkbox") {
      l.className = "check";
      l.append(control, ` ${text}`);
    } else {
      l.append(`${text} `, control);
    }
    box.append(l, " ");
    control.addEventListener("change", () => score(id));
    return l;
  };
  if (kinds.length > 1) {
    const version = document.createElement("select");
    version.dataset.role = "version";
    for (const k of kinds) version.append(new Option(k.name, k.kind));
    version.title = kinds.map((k) => `${k.name}: ${defaultInfo(k).description}`).join("\n");
    labelled(version, "Version");
  }
  const controls = new Map();
  for (const k of kinds) {
    for (const [name, p] of Object.entries(k.options.properties ?? {})) {
      if (p["x-page"] === false || (k.card.everyColumn && name === k.columnOption)) continue;
      if (controls.has(name)) {
        controls.get(name).dataset.kinds += ` ${k.kind}`;
        continue;
      }
      const control = optionControl(p, k.defaults[name]);
      control.dataset.role = name;
      control.dataset.option = name;
      control.dataset.kinds = k.kind;
      if (p.description) control.title = p.description;
      const l = labelled(control, p.title ?? name);
      if (p.description) l.title = p.description;
      controls.set(name, control);
    }
  }
}

/** The JSON types an option schema allows. */
const typesOf = (p) => [p.type].flat();

/** One option's control, showing `value` (the kind's default). */
function optionControl(p, value) {
  const types = typesOf(p);
  const nullable = types.includes("null");
  if (types.includes("boolean")) {
    const c = document.createElement("input");
    c.type = "checkbox";
    c.checked = Boolean(value);
    return c;
  }
  const choices = Array.isArray(p.enum)
    ? p.enum.filter((v) => v !== null).map((v, i) => [String(v), p["x-labels"]?.[i] ?? String(v)])
    : Array.isArray(p["x-choices"]) ? p["x-choices"].map((c) => [String(c.value), c.label ?? String(c.value)]) : null;
  if (choices) {
    const c = document.createElement("select");
    if (nullable) c.append(new Option(p["x-null-label"] ?? "default", ""));
    for (const [v, label] of choices) c.append(new Option(label, v));
    c.value = value === null || value === undefined ? "" : String(value);
    return c;
  }
  if (p["x-multiline"]) {
    // A prompt: several lines, edited then applied when the field is left.
    const c = document.createElement("textarea");
    c.rows = 6;
    c.className = "plm-template";
    c.spellcheck = false;
    c.value = value === null || value === undefined ? "" : String(value);
    return c;
  }
  const c = document.createElement("input");
  const numeric = types.includes("integer") || types.includes("number");
  c.type = numeric ? "number" : "text";
  if (numeric) {
    if (p.minimum !== undefined) c.min = String(p.minimum);
    if (p.maximum !== undefined) c.max = String(p.maximum);
    c.step = types.includes("integer") ? "1" : "any";
    c.className = "plm-number";
  }
  if (nullable) c.placeholder = p["x-null-label"] ?? "default";
  c.value = value === null || value === undefined ? "" : String(value);
  return c;
}

/** A control's value as its option's JSON type; `undefined`: unset. */
function readControl(c, p) {
  if (c.type === "checkbox") return c.checked;
  if (c.value === "") return undefined;
  const types = typesOf(p);
  if (types.includes("integer") || types.includes("number")) {
    const n = Number(c.value);
    return Number.isFinite(n) ? n : c.value; // the core says what is wrong with text
  }
  return c.value;
}

/** The kind a card runs now: its version picker's, or its own. */
function cardKind(id, el) {
  const { kinds } = cards.get(id);
  const version = el.querySelector('[data-role="version"]')?.value;
  return kinds.find((k) => k.kind === version) ?? kinds[0];
}

/** The card's metric spec: its kind's defaults, with the card's controls and model. */
function spec(id, el) {
  const kind = cardKind(id, el);
  const base = structuredClone(kind.defaults);
  base.model = models.get(runs[id].handle).name;
  const props = kind.options.properties ?? {};
  for (const c of el.querySelectorAll('[data-role="options"] [data-option]')) {
    const applies = c.dataset.kinds.split(" ").includes(kind.kind);
    c.disabled = !applies;
    if (!applies) continue;
    const value = readControl(c, props[c.dataset.option]);
    if (value === undefined) delete base[c.dataset.option];
    else base[c.dataset.option] = value;
  }
  return base;
}

function showBackend(slot) {
  const el = card(slot);
  const model = models.get(runs[slot].handle);
  const pill = el.querySelector('[data-role="backend"]');
  pill.textContent = model ? (model.backend === "webgpu" ? "runs on WebGPU" : "runs on the CPU") : "";
  el.dataset.backend = model?.backend ?? "";
}

/** Shows a card for every metric some loaded model can run, with its model picker. */
function refreshCards() {
  for (const slot of cards.keys()) {
    const options = capable(slot);
    const existing = document.querySelector(`.card[data-metric="${slot}"]`);
    if (!options.length) {
      existing?.remove();
      clearDrawing(slot);
      runs[slot].handle = null;
      continue;
    }
    const el = card(slot);
    const pick = el.querySelector('[data-role="model"]');
    pick.replaceChildren(...options.map((m) => new Option(`${m.name} (${m.precision})`, String(m.handle))));
    if (!options.some((m) => m.handle === runs[slot].handle)) runs[slot].handle = newestEncoderFirst(options).handle;
    pick.value = String(runs[slot].handle);
    showBackend(slot);
  }
}

function texts() {
  return {
    hypothesis: $("hypothesis").value,
    references: $("reference").value,
    source: $("source").value,
    pinned: pinnedText(),
  };
}

function setValue(el, value, shown) {
  const v = el.querySelector('[data-role="value"]');
  v.textContent = shown;
  v.dataset.raw = String(value);
}

/** The change against the pinned original, as the lexical cards show it. */
function showDelta(el, value, base, digits) {
  const delta = el.querySelector('[data-role="delta"]');
  if (base === null || base === undefined) {
    delta.textContent = "";
    delta.className = "delta";
    delete delta.dataset.raw;
    return;
  }
  const d = value - base;
  delta.dataset.raw = String(d);
  if (Math.abs(d) < 0.5 * 10 ** -digits) {
    delta.textContent = "±0 vs original";
    delta.className = "delta same";
    return;
  }
  delta.textContent = `${d > 0 ? "▲ +" : "▼ −"}${Math.abs(d).toFixed(digits)} vs original`;
  delta.className = `delta ${d > 0 ? "up" : "down"}`; // every metric here is higher-is-better
}

/** Scores `hypotheses` with the card's spec in the engine. */
function request(s, t, hypotheses) {
  return engine.scoreModel({ spec: s, hypotheses, references: t.references, source: t.source || undefined });
}

/** The pinned original's value for this spec and these texts (scored once, then remembered). */
async function pinnedValue(slot, s, t) {
  if (t.pinned === null || !t.pinned.trim()) return null;
  const key = JSON.stringify([s, t.pinned, t.references, t.source]);
  if (!pinnedScores.has(key)) {
    if (pinnedScores.size > 32) pinnedScores.clear();
    const v = await request(s, t, [t.pinned]);
    pinnedScores.set(key, v.scores[0].score.value);
  }
  return pinnedScores.get(key);
}

async function score(slot) {
  const run = runs[slot];
  if (run.handle === null) return;
  if (run.busy) {
    run.pending = true;
    return;
  }
  run.busy = true;
  const seq = ++run.seq;
  const el = card(slot);
  const t = texts();
  try {
    const s = spec(slot, el);
    const v = await request(s, t, [t.hypothesis]);
    const base = await pinnedValue(slot, s, t).catch(() => null);
    if (seq !== run.seq || run.pending) return; // a newer edit is waiting: do not show stale numbers
    el.classList.remove("unavailable");
    el.dataset.scoredHypothesis = t.hypothesis; // which text the shown numbers belong to
    el.querySelector('[data-role="message"]').textContent = "";
    el.querySelector('[data-role="signature"]').textContent = v.signature;
    draw(slot, el, v, v.scores[0], base);
  } catch (err) {
    if (seq !== run.seq) return;
    el.classList.add("unavailable");
    el.querySelector('[data-role="value"]').textContent = "–";
    delete el.querySelector('[data-role="value"]').dataset.raw;
    showDelta(el, 0, null, 0);
    el.querySelector('[data-role="parts"]').textContent = "";
    el.querySelector('[data-role="detail"]').replaceChildren();
    // No score: no signature (the last one was for other options).
    el.querySelector('[data-role="signature"]').textContent = "";
    el.querySelector('[data-role="message"]').textContent = String(err.message ?? err);
    clearDrawing(slot);
  } finally {
    run.busy = false;
    if (run.pending) {
      run.pending = false;
      score(slot);
    }
  }
}

/**
 * Draws a result by what its detail holds: BERTScore's alignment, a
 * perplexity's surprisal, MENLI's probabilities, MoverScore's transport
 * plan, BARTScore's token log-probabilities; a learned metric has none.
 */
function draw(slot, el, v, scored, base) {
  const kind = kindOf(v.spec.metric);
  const drawn = scored.detail?.kind ?? null;
  if (cards.get(slot).drawn !== drawn) clearDrawing(slot);
  cards.get(slot).drawn = drawn;
  const truncated = (flag) => {
    el.querySelector('[data-role="message"]').textContent = flag ? kind.truncated : "";
  };
  switch (drawn) {
    case "alignment": return drawBertScore(el, v, scored, base, truncated);
    case "surprisal": return drawPerplexity(el, v, scored, base, truncated, kind.model === "causal-lm");
    case "nli": return drawMenli(el, v, scored, base);
    case "flow": return drawMoverScore(el, v, scored, base, truncated);
    case "tokenLogprobs": return drawTokenLogprobs(el, v, scored, base, truncated);
    default: return drawLearned(el, v, scored, base, truncated);
  }
}

/** Hides what a card drew outside itself (BERTScore's heatmap, GPT-PPL's bar). */
function clearDrawing(slot) {
  const c = cards.get(slot);
  const kind = c.kinds[0];
  if (c.drawn === "alignment") $("bertscore-heatmap").hidden = true;
  if (c.drawn === "surprisal" && kind.model === "causal-lm") surprisalBar().hidden = true;
  c.drawn = null;
}

/** A score part's value by name. */
const part = (score, name) => score.parts.find((p) => p.name === name)?.value;

// --- BERTScore -------------------------------------------------------------

function drawBertScore(el, v, scored, base, truncated) {
  const { score, detail } = scored;
  const [p, r, f] = ["precision", "recall", "f1"].map((n) => part(score, n));
  setValue(el, f, f.toFixed(4));
  showDelta(el, f, base, 4);
  el.dataset.p = String(p);
  el.dataset.r = String(r);
  const rescaled = v.spec.rescale;
  el.querySelector('[data-role="parts"]').textContent = `P ${p.toFixed(4)} · R ${r.toFixed(4)} · F ${f.toFixed(4)}${rescaled ? " (rescaled)" : ""} · ${v.elapsedMs.toFixed(0)} ms`;
  truncated(detail.truncated);
  heatmap({ ...detail, idf: v.spec.idf, references: v.references });
}

/** Escapes text for markup. */
function escapeXml(text) {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/**
 * Draws a grid of `g.n` × `g.m` cells into `wrap`: the cells into a
 * <canvas>, their token labels (and BERTScore's outlines) into an SVG laid
 * over it. As one SVG element each, a grid of a thousand cells cost the
 * page's thread about 20 ms of style, layout and paint per keystroke
 * (traced, 2 cores; BENCHMARKS.md); painted, they are one image.
 * A keystroke that keeps the grid (the same token counts and margins)
 * repaints the cells and updates the labels in place. A readout under the
 * grid follows the pointer (`g.describe(i, j)` of the grid last drawn), and
 * the chart's SVG and PNG files hold each cell as a rect with the fill it
 * has on screen and its value.
 *
 * `g`: `n`, `m`, `cell` (px), `left`, `top` (the labels' margins), `cols`
 * and `rows` (`[text, weight]` per label; weight 0 greys it), `key` (the
 * weight's name), `values` (n·m, row-major), `valueName`, `fill(value)`,
 * `best` (an outlined column per row, or none), `aria`, `hint`, `note`,
 * `noteClass`, `name` (the files').
 */
function drawGrid(wrap, g) {
  const { n, m, cell, left, top } = g;
  const shape = `${n}x${m}:${left}:${top}`;
  let view = wrap.querySelector(".grid-view");
  if (!view) {
    // Built once per grid: a new shape replaces the SVG and resizes the canvas.
    view = document.createElement("div");
    view.className = "grid-view";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("aria-hidden", "true");
    const readout = document.createElement("p");
    readout.className = "heatmap-readout";
    canvas.addEventListener("pointermove", (e) => {
      const now = view.__grid;
      const box = canvas.getBoundingClientRect();
      const i = Math.floor((e.clientY - box.top) / now.cell);
      const j = Math.floor((e.clientX - box.left) / now.cell);
      if (i >= 0 && i < now.n && j >= 0 && j < now.m) readout.textContent = now.describe(i, j);
    });
    view.append(canvas, document.createElementNS(SVG_NS, "svg"));
    const note = document.createElement("p");
    note.className = `muted ${g.noteClass}`;
    const grid = view;
    wrap.replaceChildren(view, readout, note,
      chartTools(g.name, () => grid.querySelector("svg"), (copy) => copy.prepend(...cellRects(grid.__grid))));
  }
  const svg = view.querySelector("svg");
  if (svg.dataset.shape === shape) {
    svg.setAttribute("aria-label", g.aria);
    relabel(svg, [...g.cols, ...g.rows], g.key);
    if (g.best) svg.querySelectorAll("rect.best").forEach((el, i) => el.setAttribute("x", String(left + g.best[i] * cell)));
  } else {
    const parts = [];
    const label = (x, y, extra, [text, weight]) =>
      parts.push(`<text x="${x}" y="${y}" ${extra} class="${weight ? "tok" : "tok special"}" data-${g.key}="${weight}">${escapeXml(text)}<title>${g.key} ${weight.toFixed(4)}</title></text>`);
    g.cols.forEach((t, j) => {
      const x = left + j * cell + cell / 2;
      label(x, top - 4, `transform="rotate(-60 ${x} ${top - 4})"`, t);
    });
    g.rows.forEach((t, i) => {
      const y = top + i * cell;
      label(left - 4, y + cell * 0.7, 'text-anchor="end"', t);
      if (g.best) parts.push(`<rect x="${left + g.best[i] * cell}" y="${y}" width="${cell - 1}" height="${cell - 1}" class="best" fill="none"/>`);
    });
    const holder = document.createElement("div");
    holder.innerHTML = `<svg xmlns="${SVG_NS}" width="${left + m * cell + 4}" height="${top + n * cell + 4}" role="img" aria-label="${escapeXml(g.aria)}" data-shape="${shape}">${parts.join("")}</svg>`;
    svg.replaceWith(holder.firstElementChild);
    const canvas = view.querySelector("canvas");
    canvas.style.left = `${left}px`; // CSSOM, allowed by the site's style-src 'self'
    canvas.style.top = `${top}px`;
    wrap.querySelector(".heatmap-readout").textContent = g.hint;
  }
  wrap.querySelector(`.${g.noteClass}`).textContent = g.note;
  view.__grid = g;
  paintCells(view.querySelector("canvas"), g);
}

/** Paints a grid's cells, sharp on high-density screens. */
function paintCells(canvas, g) {
  const { n, m, cell } = g;
  const scale = window.devicePixelRatio || 1;
  const [w, h] = [m * cell, n * cell];
  if (canvas.width !== Math.round(w * scale) || canvas.height !== Math.round(h * scale)) {
    canvas.width = Math.round(w * scale);
    canvas.height = Math.round(h * scale);
    canvas.style.width = `${w}px`;
    canvas.style.height = `${h}px`;
  }
  // A canvas in the page's own memory (`willReadFrequently` asks for one),
  // not one in the GPU process: with the GPU's, the page stalled for
  // 200-840 ms now and then (2 cores, SwiftShader compositing on the CPU),
  // likely when a new grid shape resized it; with this one it has not.
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.clearRect(0, 0, w, h);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      ctx.fillStyle = g.fill(g.values[i * m + j]);
      ctx.fillRect(j * cell, i * cell, cell - 1, cell - 1);
    }
  }
}

/** A grid's cells as SVG rects, for its saved files: the painted fills, and each cell's value. */
function cellRects(g) {
  const rects = [];
  for (let i = 0; i < g.n; i++) {
    for (let j = 0; j < g.m; j++) {
      const value = g.values[i * g.m + j];
      const r = document.createElementNS(SVG_NS, "rect");
      const attrs = { x: g.left + j * g.cell, y: g.top + i * g.cell, width: g.cell - 1, height: g.cell - 1, fill: g.fill(value), "data-i": i, "data-j": j, [`data-${g.valueName}`]: value };
      for (const [k, v] of Object.entries(attrs)) r.setAttribute(k, String(v));
      rects.push(r);
    }
  }
  return rects;
}

/** Sequential blue scale (colour-blind safe) for `t` in 0..1: darker = more. */
function blue(t) {
  const shade = Math.round(255 - 200 * Math.max(0, Math.min(1, t)));
  return `rgb(${shade},${Math.min(255, shade + 20)},255)`;
}

/**
 * In-place update of a grid's token labels (`text.tok`, in drawing order):
 * each label's text, its `<title>` and `data-<key>` from its value, greyed
 * when the value is 0.
 */
function relabel(svg, labels, key) {
  svg.querySelectorAll("text.tok").forEach((el, k) => {
    const [text, value] = labels[k];
    if (el.firstChild.nodeType === Node.TEXT_NODE) el.firstChild.textContent = text;
    else el.prepend(text);
    el.lastChild.textContent = `${key} ${value.toFixed(4)}`;
    el.dataset[key] = String(value);
    el.setAttribute("class", value ? "tok" : "tok special");
  });
}

function heatmap(v) {
  const wrap = $("bertscore-heatmap");
  wrap.hidden = false;
  const cell = 18;
  // With idf each token's label carries its weight (uniform weights are 0 or 1).
  const label = (t, w) => (v.idf ? `${t} ·${w.toFixed(2)}` : t);
  const hypLabels = v.hypTokens.map((t, i) => label(t, v.hypWeights[i]));
  const refLabels = v.refTokens.map((t, j) => label(t, v.refWeights[j]));
  const n = v.hypTokens.length, m = v.refTokens.length;
  drawGrid(wrap, {
    n, m, cell,
    left: 8 + 7 * Math.max(...hypLabels.map((t) => t.length), 4),
    top: 8 + 7 * Math.max(...refLabels.map((t) => t.length), 4),
    cols: refLabels.map((t, j) => [t, v.refWeights[j]]),
    rows: hypLabels.map((t, i) => [t, v.hypWeights[i]]),
    key: "weight",
    values: v.similarity,
    valueName: "similarity",
    fill: blue, // darker = more similar
    best: v.hypBest,
    aria: `BERTScore similarity of ${n} hypothesis tokens to ${m} reference tokens`,
    hint: "Point at a cell to read its similarity.",
    describe: (i, j) => `${v.hypTokens[i]} ~ ${v.refTokens[j]}: ${v.similarity[i * m + j].toFixed(3)}`,
    note: `Layer ${v.layer}. Rows: hypothesis tokens, columns: reference${v.bestReference ? ` ${v.bestReference + 1}` : ""} tokens; outlined: each hypothesis token's best match (precision). Grey tokens ([CLS], [SEP]) weigh 0; ${v.idf ? `the others weigh their idf over the ${v.references} references (shown after each token)` : "the others weigh 1"}.`,
    noteClass: "heatmap-note",
    name: "bertscore-heatmap",
  });
}

// --- Perplexities --------------------------------------------------------

function surprisalBar() {
  let bar = $("surprisal-bar");
  if (!bar) {
    bar = document.createElement("div");
    bar.id = "surprisal-bar";
    bar.className = "surprisal";
    bar.hidden = true;
    $("hypothesis-diff").after(bar);
  }
  return bar;
}

function drawSurprisal(v) {
  const bar = surprisalBar();
  const scored = v.tokens.map(([, s]) => s).filter((s) => s !== null && s !== undefined);
  const top = Math.max(...scored, 1);
  const spans = v.tokens.map(([text, s]) => {
    const span = document.createElement("span");
    span.className = "tok";
    span.textContent = text;
    if (s === null || s === undefined) {
      span.classList.add("unscored");
      span.title = `${JSON.stringify(text)}: not scored (no context before it)`;
    } else {
      // Sequential orange scale (colour-blind safe): darker = more surprising.
      const a = Math.max(0.05, s / top);
      span.style.background = `rgba(230, 159, 0, ${a.toFixed(3)})`;
      span.dataset.surprisal = String(s);
      span.title = `${JSON.stringify(text)}: ${s.toFixed(2)} nats (p = ${Math.exp(-s).toPrecision(2)})`;
    }
    return span;
  });
  const label = document.createElement("span");
  label.className = "muted surprisal-label";
  label.textContent = "GPT-PPL surprisal per token (darker = less expected):";
  bar.replaceChildren(label, ...spans);
  bar.hidden = false;
}

function drawPerplexity(el, v, scored, base, truncated, causal) {
  const { score, detail } = scored;
  const ppl = part(score, "perplexity");
  setValue(el, score.value, score.value.toPrecision(5));
  showDelta(el, score.value, base, 2);
  el.querySelector('[data-role="parts"]').textContent = `perplexity ${ppl.toPrecision(5)} over ${part(score, "tokens_scored")} tokens · ${v.elapsedMs.toFixed(0)} ms`;
  truncated(detail.truncated);
  if (causal) drawSurprisal(detail);
}

// --- MENLI ---------------------------------------------------------------

function probsRow(label, p) {
  const row = document.createElement("div");
  row.className = "nli-row";
  const name = document.createElement("span");
  name.className = "nli-dir";
  name.textContent = label;
  row.append(name);
  for (const [k, title] of [["e", "entailment"], ["n", "neutral"], ["c", "contradiction"]]) {
    const cell = document.createElement("span");
    cell.className = `nli-prob nli-${k}`;
    cell.dataset.label = k;
    cell.dataset.value = String(p[k]);
    cell.title = `${title} ${p[k].toFixed(4)}`;
    const letter = document.createElement("b");
    letter.textContent = k;
    const bar = document.createElement("span");
    bar.className = "nli-bar";
    bar.style.width = `${(40 * p[k]).toFixed(1)}px`; // CSSOM, allowed by the site's style-src 'self'
    cell.append(letter, " ", bar, ` ${p[k].toFixed(3)}`);
    row.append(cell);
  }
  return row;
}

function drawMenli(el, v, scored, base) {
  const { score, detail } = scored;
  setValue(el, score.value, score.value.toFixed(4));
  showDelta(el, score.value, base, 4);
  const { formula, direction } = detail;
  const premise = detail.premiseKind === "source" ? "source" : `reference${v.references > 1 ? ` ${detail.premise + 1}` : ""}`;
  el.querySelector('[data-role="parts"]').textContent = `${formula}, ${direction === "both" ? "both directions averaged" : direction === "ref-hyp" ? `${premise} → hypothesis` : `hypothesis → ${premise}`} · ${v.elapsedMs.toFixed(0)} ms`;
  el.querySelector('[data-role="detail"]').replaceChildren(
    probsRow(`${premise} → hyp`, detail.forward),
    probsRow(`hyp → ${premise}`, detail.backward),
  );
}

// --- COMET, COMET-QE, BLEURT, UniEval -----------------------------------------

function drawLearned(el, v, scored, base, truncated) {
  const { score } = scored;
  setValue(el, score.value, score.value.toFixed(4));
  showDelta(el, score.value, base, 4);
  // The parts the core lists (UniEval's dimensions and sentence count), then
  // what it read and, for an LLM judge, what it cost.
  const cost = ["tokens", "decoded"];
  const listed = score.parts
    .filter((p) => p.name !== "truncated" && !cost.includes(p.name))
    .map((p) => `${p.name} ${Number.isInteger(p.value) ? p.value : p.value.toFixed(4)}`);
  const tokens = part(score, "tokens");
  const run = tokens === undefined ? [] : [`${tokens} prompt tokens, ${part(score, "decoded")} run (the rest from the prefix cache)`];
  el.querySelector('[data-role="parts"]').textContent = [...listed, info(score.metric).reads, ...run, `${v.elapsedMs.toFixed(0)} ms`].join(" · ");
  truncated(part(score, "truncated"));
}

// --- MoverScore ------------------------------------------------------------

function drawMoverScore(el, v, scored, base, truncated) {
  const { score, detail } = scored;
  setValue(el, score.value, score.value.toFixed(4));
  showDelta(el, score.value, base, 4);
  const refs = part(score, "references");
  el.querySelector('[data-role="parts"]').textContent = refs > 1
    ? `mean over ${refs} references (the released examples' rule) · the plan below is against the first · ${v.elapsedMs.toFixed(0)} ms`
    : `transport cost ${(1 - score.value).toFixed(4)} · ${v.elapsedMs.toFixed(0)} ms`;
  truncated(part(score, "truncated"));
  drawPlan(el, v, detail);
}

/**
 * The transport plan: rows are reference tokens (or windows), columns the
 * hypothesis's; darker = more mass moved. Drawn like BERTScore's heatmap
 * (`drawGrid`): the plan is redrawn on every keystroke, right after
 * BERTScore's card.
 */
function drawPlan(el, v, detail) {
  const box = el.querySelector('[data-role="detail"]');
  let wrap = box.querySelector('[data-role="flow"]');
  if (!wrap) {
    wrap = document.createElement("div");
    wrap.className = "heatmap";
    wrap.dataset.role = "flow";
    box.replaceChildren(wrap);
  }
  const moved = detail.flow.reduce((a, b) => a + b, 0);
  const n = detail.refTokens.length, m = detail.hypTokens.length;
  const most = Math.max(...detail.flow, 1e-12);
  drawGrid(wrap, {
    n, m, cell: 16,
    left: 8 + 7 * Math.max(...detail.refTokens.map((t) => t.length), 4),
    top: 8 + 7 * Math.max(...detail.hypTokens.map((t) => t.length), 4),
    cols: detail.hypTokens.map((t, j) => [t, detail.hypMass[j]]),
    rows: detail.refTokens.map((t, i) => [t, detail.refMass[i]]),
    key: "mass",
    values: detail.flow,
    valueName: "flow",
    fill: (f) => blue(f / most), // darker = more mass moved
    best: null,
    aria: `MoverScore transport plan: ${n} reference tokens by ${m} hypothesis tokens`,
    hint: "Point at a cell to read the mass it moves.",
    describe: (i, j) => `${detail.refTokens[i]} → ${detail.hypTokens[j]}: ${detail.flow[i * m + j].toFixed(4)}`,
    note: v.spec.ngram !== undefined
      ? `Transport plan: rows are the reference's windows of ${v.spec.ngram} kept token${v.spec.ngram > 1 ? "s" : ""}, columns the hypothesis's (subword pieces and punctuation are dropped first); darker cells move more mass (${moved.toFixed(3)} in all; the released code divides each side's weights by their sum + 1e-5). Grey windows weigh nothing (idf 0).`
      : `Transport plan: rows are reference tokens, columns hypothesis tokens; darker cells move more mass (${moved.toFixed(3)} in all). Grey tokens weigh nothing (subword pieces, punctuation).`,
    noteClass: "plan-note",
    name: "moverscore-flow",
  });
}

// --- BARTScore -------------------------------------------------------------

function drawTokenLogprobs(el, v, scored, base, truncated) {
  const { score, detail } = scored;
  setValue(el, score.value, score.value.toFixed(4));
  showDelta(el, score.value, base, 4);
  // The parts the core lists (BARTScore's directions under their short names, PRISM's as named).
  const short = { precision: "P", recall: "R", f: "F", faithful: "faithfulness" };
  const shown = score.parts
    .filter((p) => p.name !== "truncated")
    .map((p) => `${short[p.name] ?? p.name} ${p.value.toFixed(4)}`);
  el.querySelector('[data-role="parts"]').textContent = `${shown.join(" · ")} · ${v.elapsedMs.toFixed(0)} ms`;
  truncated(part(score, "truncated"));
  // The target's tokens, shaded by how unlikely the model found each (sequential orange, colour-blind safe).
  const worst = Math.max(...detail.tokens.map(([, lp]) => -lp), 1);
  const given = { hypothesis: info(score.metric).needs_source ? "the source" : "the reference", reference: "the hypothesis" }[detail.target];
  const label = document.createElement("span");
  label.className = "muted surprisal-label";
  label.textContent = `log-probability of each ${detail.target} token given ${given}${v.references > 1 && detail.target !== "hypothesis" ? " (reference 1)" : ""} (darker = less expected):`;
  const chips = detail.tokens.map(([text, lp]) => {
    const span = document.createElement("span");
    span.className = "tok";
    span.textContent = text;
    span.dataset.logprob = String(lp);
    span.style.background = `rgba(230, 159, 0, ${Math.max(0.05, -lp / worst).toFixed(3)})`;
    span.title = `${JSON.stringify(text)}: ${lp.toFixed(2)} nats (p = ${Math.exp(lp).toPrecision(2)})`;
    return span;
  });
  const bar = document.createElement("div");
  bar.className = "surprisal";
  bar.dataset.role = "token-logprobs";
  bar.replaceChildren(label, ...chips);
  el.querySelector('[data-role="detail"]').replaceChildren(bar);
}

/** Scores live once models are loaded (the "blindspot:model" event of models.js). */
export function initPlmScores(modelEngine, wasm, pinned) {
  engine = modelEngine;
  choices = wasm.metricChoices();
  registry = wasm.metricRegistry();
  specId = wasm.specId;
  pinnedText = pinned;
  for (const k of choices.kinds) {
    if (!k.model) continue;
    const owner = k.card.versionOf ?? k.kind;
    if (!cards.has(owner)) cards.set(owner, { kinds: [], drawn: null });
    cards.get(owner).kinds.push(k);
    runs[owner] ??= { handle: null, busy: false, pending: false, seq: 0 };
  }
  const scoreAll = () => { for (const slot of cards.keys()) score(slot); };
  document.addEventListener("blindspot:model", (e) => {
    const model = e.detail;
    for (const [handle, m] of models) if (m.name === model.name) models.delete(handle); // reloaded
    models.set(model.handle, model);
    pinnedScores.clear();
    // A newly loaded model becomes the pick of every metric it can run (an NLI
    // classifier only of MENLI's: the encoder cards keep their encoder).
    for (const [slot, c] of cards) {
      if (runsOn(c, model) && !(readsAnyEncoder(c) && isNliModel(model))) runs[slot].handle = model.handle;
    }
    refreshCards();
    applyWanted(false);
    scoreAll();
  });
  document.addEventListener("blindspot:model-unloaded", (e) => {
    models.delete(e.detail.handle);
    pinnedScores.clear();
    refreshCards();
  });
  // Every scoring pass of the page (typing, injections, examples, pinning)
  // announces itself. The page announces an edit at once (before its own frame)
  // and again after scoring; a pass starts only when the texts differ from the
  // last ones announced.
  // (Compared field by field: serialising 40,000-word texts on every
  // keystroke cost the page's thread milliseconds a key.)
  let announced = {};
  document.addEventListener("blindspot:texts", () => {
    const now = texts();
    if (Object.keys(now).every((k) => now[k] === announced[k])) return;
    announced = now;
    scoreAll();
  });
}

/** Card choices from a link or the last visit, applied once their model is loaded. */
let wanted = {};

/**
 * The cards' choices, for links and reloads: per card, the model's name and
 * each option control's value (`{slot: {model, options: {role: value}}}`).
 */
export function cardChoices() {
  const out = {};
  for (const slot of cards.keys()) {
    const el = document.querySelector(`.card[data-metric="${slot}"]`);
    const model = models.get(runs[slot].handle);
    if (!el || !model) continue;
    const options = {};
    for (const c of el.querySelectorAll('[data-role="options"] [data-role]')) {
      options[c.dataset.role] = c.type === "checkbox" ? c.checked : c.value;
    }
    out[slot] = { model: model.name, options };
  }
  return out;
}

/** Applies what `wanted` asks of the cards whose model is loaded now (the rest waits). */
function applyWanted(rescore = true) {
  for (const [slot, want] of Object.entries(wanted)) {
    const el = document.querySelector(`.card[data-metric="${slot}"]`);
    const model = el && capable(slot).find((m) => m.name === want.model);
    if (!model) continue;
    runs[slot].handle = model.handle;
    el.querySelector('[data-role="model"]').value = String(model.handle);
    for (const [role, value] of Object.entries(want.options ?? {})) {
      const c = el.querySelector(`[data-role="options"] [data-role="${role}"]`);
      if (!c) continue;
      if (c.type === "checkbox") c.checked = Boolean(value);
      else if (c.tagName === "SELECT") {
        if ([...c.options].some((o) => o.value === value)) c.value = value;
      } else if (typeof value === "string" || typeof value === "number") c.value = String(value);
    }
    showBackend(slot);
    delete wanted[slot];
    if (rescore) score(slot);
  }
}

/** Restores cards' choices (from `cardChoices`) now or when their models load. */
export function restoreCardChoices(choices) {
  wanted = {};
  for (const [slot, want] of Object.entries(choices && typeof choices === "object" ? choices : {})) {
    if (cards.has(slot) && typeof want?.model === "string") wanted[slot] = want;
  }
  applyWanted();
}

/**
 * The model-free metrics' specs: the core's defaults with the page's ROUGE
 * stemmer (`wasm.lexicalSpecs`), in registry order.
 */
export function lexicalSpecs(wasm) {
  return wasm.lexicalSpecs(document.getElementById("rouge-stemmer").checked);
}

/**
 * The specs of the model-based metrics the cards show now (the chosen model
 * and options), for the stress suite, the preference suite and the audit:
 * a card that shows every column of its pass (BERTScore's P, R and F) gives
 * one spec per column.
 */
export function modelSpecs() {
  const out = [];
  for (const slot of cards.keys()) {
    const el = document.querySelector(`.card[data-metric="${slot}"]`);
    if (!el || runs[slot].handle === null) continue;
    const s = spec(slot, el);
    const kind = kindOf(s.metric);
    const columns = kind.card.everyColumn && kind.columnOption
      ? kind.options.properties[kind.columnOption]?.enum ?? []
      : [];
    if (columns.length) for (const c of columns) out.push({ ...s, [kind.columnOption]: c });
    else out.push(s);
  }
  return out;
}
