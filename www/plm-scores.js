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
let choices = null; // the core's option lists (metricChoices)
let registry = [];  // the core's metric registry
let pinnedText = () => null;

/** One card per model slot; `needs` is the metric a model must run for the card. */
const CARDS = {
  bertscore: { needs: "bertscore-f", draw: drawBertScore, clear: () => { $("bertscore-heatmap").hidden = true; } },
  "gpt-ppl": { needs: "gpt-ppl", draw: drawPerplexity(true), clear: () => { surprisalBar().hidden = true; } },
  "mlm-ppl": { needs: "mlm-ppl", draw: drawPerplexity(false), clear: () => {} },
  menli: { needs: "menli", draw: drawMenli, clear: () => {} },
  comet: { needs: "comet", draw: drawLearned, clear: () => {} },
  "comet-qe": { needs: "comet-qe", draw: drawLearned, clear: () => {} },
  bleurt: { needs: "bleurt", draw: drawLearned, clear: () => {} },
  bartscore: { needs: "bartscore-f", draw: drawBartScore, clear: () => {} },
  moverscore: { needs: "moverscore", draw: drawMoverScore, clear: () => {} },
};

/** What a learned metric's number means, shown on its card. */
const ABOUT = {
  comet: "A regressor trained on human judgements reads sentence embeddings of the hypothesis, the reference and the source (needed: fill in the source box). Higher is better; the scale is the checkpoint's (wmt22 models give roughly 0–1, wmt20 ones z-score-like values), so compare scores of one checkpoint only.",
  "comet-qe": "Reference-free: the regressor reads only the hypothesis and the source (needed: fill in the source box); the reference box is ignored. Higher is better, on the checkpoint's own scale.",
  bleurt: "A BERT-style encoder fine-tuned on human judgements reads the reference and the hypothesis together, as one input, and outputs one number. Higher is better; BLEURT-20 scores mostly fall between 0 and 1 (about 1 for a copy of the reference), but the scale is not bounded. The source box is ignored.",
  moverscore: "Each text's tokens become points in the encoder's space; MoverScore is 1 minus the least total cost of moving the reference's points onto the hypothesis's (the Earth mover's distance), so 1 means the same tokens in the same contexts. v2 (moverscore_v2): the last layer and Euclidean costs; subword pieces and punctuation weigh nothing, [CLS] and [SEP] count, as in the released code. v1 (the paper's moverscore.py, made for a BERT fine-tuned on MNLI): each token is the min, mean and max of the last 5 layers, windows of n kept tokens are the points, costs are squared distances. Here every token weighs the same: idf needs a set of texts (the CLI's --idf, in suites too).",
  bartscore: "BART reads one text and scores how likely the other is, token by token: the mean log-probability in nats (0 would be certain; closer to 0 is better). Precision: the hypothesis given the reference; recall: the reference given the hypothesis; F: their plain average (as the released code computes it); faithfulness: the hypothesis given the source (fill in the source box). Several references: P and R are averaged over them.",
};

/** What each learned metric reads, for its card's detail line. */
const READS = {
  comet: "hypothesis + reference + source",
  "comet-qe": "hypothesis + source",
  bleurt: "[CLS] reference [SEP] hypothesis [SEP], read together",
};

/** Per-card pass state: the chosen model, one pass at a time, newest text wins. */
const runs = Object.fromEntries(Object.keys(CARDS).map((id) => [id, { handle: null, busy: false, pending: false, seq: 0 }]));
/** The pinned original's scores per card, by request (recomputed only when it changes). */
const pinnedScores = new Map();

const info = (id) => registry.find((m) => m.id === id);

/** Cards whose metric reads any encoder: NLI classifiers qualify, but never alone. */
const ENCODER_CARDS = new Set(["bertscore", "moverscore"]);

function capable(slot) {
  const all = [...models.values()].filter((m) => m.metrics.includes(CARDS[slot].needs));
  // Loading only an NLI model (for MENLI) does not start BERTScore and MoverScore passes on it.
  if (ENCODER_CARDS.has(slot) && all.every(isNliModel)) return [];
  return all;
}

function card(slot) {
  let el = document.querySelector(`.card[data-metric="${slot}"]`);
  if (el) return el;
  const metric = info(CARDS[slot].needs);
  el = document.createElement("article");
  el.className = "card card-wide plm-card";
  el.dataset.metric = slot;
  el.title = metric.description;
  el.innerHTML = `
    <header><h3></h3><span class="scale"></span></header>
    <div class="plm-model"><label>Model <select data-role="model"></select></label> <span class="pill" data-role="backend"></span></div>
    <div class="plm-options" data-role="options"></div>
    <div class="value" data-role="value">–</div>
    <div class="delta" data-role="delta"></div>
    <div class="parts" data-role="parts"></div>
    <div class="plm-detail" data-role="detail"></div>
    <div class="delta message" data-role="message"></div>
    <details><summary>Signature</summary><code data-role="signature"></code></details>`;
  // BERTScore's and BARTScore's cards show every part: their titles drop the part's letter.
  el.querySelector("h3").textContent = slot === "bertscore" || slot === "bartscore" ? metric.name.replace(/ F1?$/, "") : metric.name;
  el.querySelector(".scale").textContent = { unit: "0–1", negperplexity: "−perplexity", nli: "NLI", regression: "learned", loglikelihood: "log-likelihood" }[metric.scale] ?? metric.scale;
  if (ABOUT[slot]) {
    const about = document.createElement("p");
    about.className = "muted plm-about";
    about.textContent = ABOUT[slot];
    el.querySelector(".plm-model").after(about);
  }
  el.querySelector('[data-role="model"]').addEventListener("change", (e) => {
    runs[slot].handle = Number(e.target.value);
    showBackend(slot);
    score(slot);
  });
  addOptions(slot, el.querySelector('[data-role="options"]'));
  $("score-cards").append(el);
  return el;
}

function addOptions(slot, box) {
  const select = (role, label, options) => {
    const l = document.createElement("label");
    l.textContent = `${label} `;
    const s = document.createElement("select");
    s.dataset.role = role;
    for (const [value, text] of options) s.append(new Option(text, value));
    s.addEventListener("change", () => score(slot));
    l.append(s);
    box.append(l, " ");
  };
  const check = (role, html, title) => {
    const l = document.createElement("label");
    l.className = "check";
    if (title) l.title = title;
    l.innerHTML = `<input type="checkbox" data-role="${role}"> ${html}`;
    l.querySelector("input").addEventListener("change", () => score(slot));
    box.append(l, " ");
  };
  if (slot === "menli") {
    const premise = { reference: "reference as premise", source: "source as premise" };
    select("task", "Task", choices.menliTasks.map((t) =>
      [t.id, `${t.id}: ${t.formula}, ${t.direction}, ${premise[t.premise]}`]));
    select("formula", "Formula", [["", "task default"], ...choices.menliFormulas.map((f) => [f, f])]);
    select("direction", "Direction", [["", "task default"], ...choices.menliDirections.map((d) => [d, d])]);
  } else if (slot === "bertscore") {
    check("idf", "idf over the references", "Weigh tokens by idf ln((M+1)/(df+1)) over the M references (separate references by a blank line)");
    check("rescale", "rescale with baseline", "Rescale P, R and F with the model's baseline, (x − b)/(1 − b), b = the mean score of unrelated sentence pairs at this layer (bert_score's published baselines; Blindspot's own for MiniLM)");
  } else if (slot === "gpt-ppl") {
    check("bos", "score the first token after &lt;|endoftext|&gt;");
  } else if (slot === "moverscore") {
    // The versions are the registry's MoverScore metrics (their names and descriptions).
    const versions = registry.filter((m) => m.slot === "moverscore" || m.slot === "moverscore-v1");
    select("version", "Version", versions.map((m) => [m.id, m.name]));
    box.querySelector('[data-role="version"]').title = versions.map((m) => `${m.name}: ${m.description}`).join("\n");
    select("ngram", "v1 n-gram", [["1", "1 (the paper's MoverScore)"], ["2", "2 (its bigram variant)"]]);
  } else if (slot === "bartscore") {
    const names = { p: "P: reference → hypothesis", r: "R: hypothesis → reference", f: "F: (P + R) / 2", faithful: "faithfulness: source → hypothesis" };
    select("part", "Score", choices.bartscoreParts.map((p) => [p, names[p] ?? p]));
    box.querySelector('[data-role="part"]').value = "f";
  }
}

/** The card's metric spec: the core's default, with the card's controls and model. */
function spec(slot, el) {
  const get = (role) => el.querySelector(`[data-role="${role}"]`);
  // MoverScore's card runs either version; v1 has its own metric id and default.
  const metric = slot === "moverscore" ? get("version").value : slot;
  const base = structuredClone(choices.defaults.find((d) => d.metric === metric));
  base.model = models.get(runs[slot].handle).name;
  if (slot === "bertscore") Object.assign(base, { idf: get("idf").checked, rescale: get("rescale").checked });
  if (slot === "gpt-ppl") base.bos = get("bos").checked;
  if (slot === "bartscore") base.part = get("part").value;
  if (slot === "moverscore") {
    get("ngram").disabled = metric !== "moverscore-v1";
    if (metric === "moverscore-v1") base.ngram = Number(get("ngram").value);
  }
  if (slot === "menli") {
    base.task = get("task").value;
    if (get("formula").value) base.formula = get("formula").value;
    if (get("direction").value) base.direction = get("direction").value;
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
  for (const slot of Object.keys(CARDS)) {
    const options = capable(slot);
    const existing = document.querySelector(`.card[data-metric="${slot}"]`);
    if (!options.length) {
      existing?.remove();
      CARDS[slot].clear();
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
    CARDS[slot].draw(el, v, v.scores[0], base);
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
    CARDS[slot].clear();
  } finally {
    run.busy = false;
    if (run.pending) {
      run.pending = false;
      score(slot);
    }
  }
}

/** A score part's value by name. */
const part = (score, name) => score.parts.find((p) => p.name === name)?.value;

// --- BERTScore -------------------------------------------------------------

function drawBertScore(el, v, scored, base) {
  const { score, detail } = scored;
  const [p, r, f] = ["precision", "recall", "f1"].map((n) => part(score, n));
  setValue(el, f, f.toFixed(4));
  showDelta(el, f, base, 4);
  el.dataset.p = String(p);
  el.dataset.r = String(r);
  const rescaled = v.spec.rescale;
  el.querySelector('[data-role="parts"]').textContent = `P ${p.toFixed(4)} · R ${r.toFixed(4)} · F ${f.toFixed(4)}${rescaled ? " (rescaled)" : ""} · ${v.elapsedMs.toFixed(0)} ms`;
  el.querySelector('[data-role="message"]').textContent = detail.truncated ? "a text was cut to the model's limit" : "";
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
 * (traced, 2 cores; README, Engine speed); painted, they are one image.
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

function drawPerplexity(causal) {
  return (el, v, scored, base) => {
    const { score, detail } = scored;
    const ppl = part(score, "perplexity");
    setValue(el, score.value, score.value.toPrecision(5));
    showDelta(el, score.value, base, 2);
    el.querySelector('[data-role="parts"]').textContent = `perplexity ${ppl.toPrecision(5)} over ${part(score, "tokens_scored")} tokens · ${v.elapsedMs.toFixed(0)} ms`;
    el.querySelector('[data-role="message"]').textContent = detail.truncated ? "the hypothesis was cut to the model's limit" : "";
    if (causal) drawSurprisal(detail);
  };
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
  const task = choices.menliTasks.find((t) => t.id === v.spec.task);
  const formula = v.spec.formula ?? task.formula;
  const direction = v.spec.direction ?? task.direction;
  const premise = detail.premiseKind === "source" ? "source" : `reference${v.references > 1 ? ` ${detail.premise + 1}` : ""}`;
  el.querySelector('[data-role="parts"]').textContent = `${formula}, ${direction === "both" ? "both directions averaged" : direction === "ref-hyp" ? `${premise} → hypothesis` : `hypothesis → ${premise}`} · ${v.elapsedMs.toFixed(0)} ms`;
  el.querySelector('[data-role="detail"]').replaceChildren(
    probsRow(`${premise} → hyp`, detail.forward),
    probsRow(`hyp → ${premise}`, detail.backward),
  );
}

// --- COMET, COMET-QE and BLEURT -------------------------------------------

function drawLearned(el, v, scored, base) {
  const { score } = scored;
  setValue(el, score.value, score.value.toFixed(4));
  showDelta(el, score.value, base, 4);
  el.querySelector('[data-role="parts"]').textContent = `${READS[v.spec.metric]} · ${v.elapsedMs.toFixed(0)} ms`;
  el.querySelector('[data-role="message"]').textContent = part(score, "truncated")
    ? v.spec.metric === "bleurt" ? "the pair was longer than the model reads: the longer text was cut" : "a text was cut to the encoder's limit"
    : "";
}

// --- MoverScore ------------------------------------------------------------

function drawMoverScore(el, v, scored, base) {
  const { score, detail } = scored;
  setValue(el, score.value, score.value.toFixed(4));
  showDelta(el, score.value, base, 4);
  const refs = part(score, "references");
  el.querySelector('[data-role="parts"]').textContent = refs > 1
    ? `mean over ${refs} references (the released examples' rule) · the plan below is against the first · ${v.elapsedMs.toFixed(0)} ms`
    : `transport cost ${(1 - score.value).toFixed(4)} · ${v.elapsedMs.toFixed(0)} ms`;
  el.querySelector('[data-role="message"]').textContent = part(score, "truncated") ? "a text was cut to the model's limit" : "";
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
    note: v.spec.metric === "moverscore-v1"
      ? `Transport plan: rows are the reference's windows of ${v.spec.ngram} kept token${v.spec.ngram > 1 ? "s" : ""}, columns the hypothesis's (subword pieces and punctuation are dropped first); darker cells move more mass (${moved.toFixed(3)} in all; the released code divides each side's weights by their sum + 1e-5). Grey windows weigh nothing (idf 0).`
      : `Transport plan: rows are reference tokens, columns hypothesis tokens; darker cells move more mass (${moved.toFixed(3)} in all). Grey tokens weigh nothing (subword pieces, punctuation).`,
    noteClass: "plan-note",
    name: "moverscore-flow",
  });
}

// --- BARTScore -------------------------------------------------------------

function drawBartScore(el, v, scored, base) {
  const { score, detail } = scored;
  setValue(el, score.value, score.value.toFixed(4));
  showDelta(el, score.value, base, 4);
  const shown = [["precision", "P"], ["recall", "R"], ["f", "F"], ["faithful", "faithfulness"]]
    .filter(([n]) => part(score, n) !== undefined)
    .map(([n, label]) => `${label} ${part(score, n).toFixed(4)}`);
  el.querySelector('[data-role="parts"]').textContent = `${shown.join(" · ")} · ${v.elapsedMs.toFixed(0)} ms`;
  el.querySelector('[data-role="message"]').textContent = part(score, "truncated") ? "a text was cut to the model's 1024 positions" : "";
  // The target's tokens, shaded by how unlikely BART found each (sequential orange, colour-blind safe).
  const worst = Math.max(...detail.tokens.map(([, lp]) => -lp), 1);
  const given = { hypothesis: v.spec.part === "faithful" ? "the source" : "the reference", reference: "the hypothesis" }[detail.target];
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
  pinnedText = pinned;
  const scoreAll = () => { for (const slot of Object.keys(CARDS)) score(slot); };
  document.addEventListener("blindspot:model", (e) => {
    const model = e.detail;
    for (const [handle, m] of models) if (m.name === model.name) models.delete(handle); // reloaded
    models.set(model.handle, model);
    pinnedScores.clear();
    // A newly loaded model becomes the pick of every metric it can run (an NLI
    // classifier only of MENLI's: the encoder cards keep their encoder).
    for (const slot of Object.keys(CARDS)) {
      if (model.metrics.includes(CARDS[slot].needs) && !(ENCODER_CARDS.has(slot) && isNliModel(model))) runs[slot].handle = model.handle;
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
  let announced = "";
  document.addEventListener("blindspot:texts", () => {
    const key = JSON.stringify(texts());
    if (key === announced) return;
    announced = key;
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
  for (const slot of Object.keys(CARDS)) {
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
      else if ([...c.options].some((o) => o.value === value)) c.value = value;
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
    if (Object.hasOwn(CARDS, slot) && typeof want?.model === "string") wanted[slot] = want;
  }
  applyWanted();
}

/**
 * The model-free metrics' specs: the core's defaults (`wasm.metricChoices()`,
 * in `registry` order) with the page's ROUGE stemmer.
 */
export function lexicalSpecs(wasm, registry) {
  const defaults = wasm.metricChoices().defaults;
  return registry.map((m, i) => [m, defaults[i]]).filter(([m]) => !m.model)
    .map(([, d]) => ("stemmer" in d ? { ...d, stemmer: document.getElementById("rouge-stemmer").checked } : { ...d }));
}

/**
 * The specs of the model-based metrics the cards show now (the chosen model
 * and options), for the stress suite, the preference suite and the audit:
 * BERTScore gives its F1, P and R.
 */
export function modelSpecs() {
  const out = [];
  for (const slot of Object.keys(CARDS)) {
    const el = document.querySelector(`.card[data-metric="${slot}"]`);
    if (!el || runs[slot].handle === null) continue;
    const s = spec(slot, el);
    if (slot === "bertscore") for (const p of choices.bertscoreParts) out.push({ ...s, part: p });
    else out.push(s);
  }
  return out;
}
