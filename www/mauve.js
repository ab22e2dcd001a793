// MAUVE between two sets of texts (one per line): pick a loaded model, run
// the computation in the model worker, show MAUVE, the frontier integral,
// MAUVE* and the divergence curve. The two sets are kept across reloads.

import { chartTools } from "./export.js";
import { finished, keptReport } from "./kept-report.js";
import { fillModelSelect, trackLoadedModels } from "./loaded-models.js";

const $ = (id) => document.getElementById(id);
const STORAGE_KEY = "blindspot-mauve-v1";
/** Sets larger than this are not saved (localStorage holds a few MB). */
const SAVE_LIMIT = 500_000;

/** modelName: the model picked last (kept across reloads, picked again once it is loaded). */
const view = { engine: null, wasm: null, models: null, running: false, stopping: false, modelName: null };
/** The last result shown, kept across visits (as the sets are), for the sets and options it was computed on. */
const kept = keptReport("blindspot.mauve-result.v1");

/** The sets and options as they are now, hashed (FNV-1a): a kept result belongs to one such state. */
function setsKey() {
  let h = 0x811c9dc5;
  const text = [$("mauve-hyps").value, $("mauve-refs").value, $("mauve-clusters").value, $("mauve-seed").value || "25"].join("\u0000");
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16);
}

const lines = (text) => text.split("\n").map((l) => l.trim()).filter(Boolean);

function status(text, kind = "muted") {
  const el = $("mauve-status");
  el.textContent = text;
  el.className = kind;
}

function save() {
  const state = { hyps: $("mauve-hyps").value, refs: $("mauve-refs").value, clusters: $("mauve-clusters").value, seed: $("mauve-seed").value, model: view.modelName };
  // Sets too large to keep are left out; the options are kept all the same.
  if (state.hyps.length + state.refs.length > SAVE_LIMIT) Object.assign(state, { hyps: "", refs: "" });
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(state));
  } catch {
    // Storage full or disabled: the sets just are not kept.
  }
}

function refreshCounts() {
  for (const which of ["hyps", "refs"]) {
    const n = lines($(`mauve-${which}`).value).length;
    $(`mauve-${which}-count`).textContent = `${n} text${n === 1 ? "" : "s"}`;
  }
  refreshButton();
}

function refreshButton() {
  const ready = view.models.size > 0 && !view.running;
  $("mauve-run").disabled = !ready;
}

function refreshModels() {
  // Prefer the previous pick, else the model picked before a reload, else a
  // GPT-2 (the paper's featuriser), else the newest.
  const all = [...view.models.values()];
  const remembered = all.filter((m) => m.name === view.modelName).reverse();
  const gpt2 = all.filter((m) => m.kinds.includes("causal-lm")).reverse();
  fillModelSelect($("mauve-model"), all, "load a model above", [...remembered, ...gpt2]);
  refreshButton();
}

/** The divergence curve: x = exp(-c KL(Q|R_λ)), y = exp(-c KL(P|R_λ)); MAUVE is the area under it. */
function curveSvg(curve, mauve) {
  const size = 220, pad = 34;
  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  svg.setAttribute("width", size + pad + 10);
  svg.setAttribute("height", size + pad + 10);
  svg.setAttribute("class", "mauve-curve");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `Divergence curve, area ${mauve.toFixed(3)}`);
  const x = (v) => pad + v * size;
  const y = (v) => 10 + (1 - v) * size;
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(svgNs, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  const points = [...curve].sort((a, b) => a[0] - b[0]);
  const path = points.map(([a, b]) => `${x(a).toFixed(1)},${y(b).toFixed(1)}`).join(" L");
  add("path", { class: "area", d: `M${x(points[0][0])},${y(0)} L${path} L${x(points[points.length - 1][0])},${y(0)} Z` });
  add("path", { class: "line", d: `M${path}` });
  add("line", { class: "axis", x1: x(0), y1: y(0), x2: x(1), y2: y(0) });
  add("line", { class: "axis", x1: x(0), y1: y(0), x2: x(0), y2: y(1) });
  for (const v of [0, 0.5, 1]) {
    add("text", { x: x(v), y: y(0) + 14, "text-anchor": "middle" }, String(v));
    add("text", { x: x(0) - 4, y: y(v) + 4, "text-anchor": "end" }, String(v));
  }
  add("text", { x: x(0.5), y: y(0) + 28, "text-anchor": "middle" }, "exp(−c·KL(Q‖R))");
  add("text", { x: 10, y: y(0.5), transform: `rotate(-90 10 ${y(0.5)})`, "text-anchor": "middle" }, "exp(−c·KL(P‖R))");
  return svg;
}

function show(v) {
  const r = v.result;
  const out = $("mauve-result");
  out.hidden = false;
  const values = document.createElement("div");
  values.className = "mauve-values";
  values.innerHTML = `<span>MAUVE <b data-role="mauve"></b></span><span>frontier integral <b data-role="fi"></b></span><span>MAUVE* <b data-role="star"></b></span>`;
  values.querySelector('[data-role="mauve"]').textContent = r.mauve.toFixed(4);
  values.querySelector('[data-role="fi"]').textContent = r.frontier_integral.toFixed(4);
  values.querySelector('[data-role="star"]').textContent = r.mauve_star.toFixed(4);
  out.dataset.mauve = String(r.mauve);
  out.dataset.frontierIntegral = String(r.frontier_integral);
  out.dataset.mauveStar = String(r.mauve_star);
  const note = document.createElement("p");
  note.className = "muted";
  const took = Number.isFinite(v.elapsedMs) ? ` · ${(v.elapsedMs / 1000).toFixed(1)} s` : "";
  note.textContent = `${v.hypotheses} model texts, ${v.references} human texts, ${r.clusters} clusters, ${r.dimensions} PCA dimensions${took}`;
  const sig = document.createElement("p");
  sig.className = "signature";
  sig.textContent = v.signature;
  const curve = curveSvg(r.curve, r.mauve);
  out.replaceChildren(values, curve, chartTools("mauve-curve", () => curve), note, sig);
}

async function run() {
  const handle = Number($("mauve-model").value);
  // One text per line; the core drops blank lines and says when a set is too small.
  const hyps = $("mauve-hyps").value.split("\n"), refs = $("mauve-refs").value.split("\n");
  const count = lines($("mauve-hyps").value).length + lines($("mauve-refs").value).length;
  const clustersText = $("mauve-clusters").value.trim();
  const clusters = clustersText ? Number(clustersText) : undefined;
  if (clusters !== undefined && !(Number.isInteger(clusters) && clusters >= 2)) {
    status("Clusters must be a whole number ≥ 2 (or empty for the default).", "bad");
    return;
  }
  const seed = Number($("mauve-seed").value || 25);
  const key = setsKey();
  view.modelName = view.models.get(handle)?.name ?? view.modelName;
  save();
  view.running = true;
  view.stopping = false;
  refreshButton();
  const bar = $("mauve-progress");
  bar.hidden = false;
  bar.removeAttribute("value");
  $("mauve-stop").disabled = false;
  const started = performance.now();
  const seconds = () => `${((performance.now() - started) / 1000).toFixed(0)} s`;
  // Featurising reports each model pass; clustering (after the last) does not.
  // The core's counts (it drops blank lines its own way) once it reports them.
  let featurised = 0, total = count;
  const say = () => {
    if (view.stopping) return;
    status(featurised < total ? `Featurising: ${featurised} / ${total} texts… ${seconds()}` : `Clustering ${total} texts… ${seconds()}`);
  };
  const tick = setInterval(say, 500);
  say();
  try {
    const v = await view.engine.mauveTexts(handle, hyps, refs, clusters, BigInt(Math.max(0, Math.floor(seed))), (done, all) => {
      featurised = done;
      total = all;
      bar.max = all;
      bar.value = done;
      // Clustering, after the last pass, cannot be stopped.
      if (done >= all) $("mauve-stop").disabled = true;
      say();
    });
    show(v);
    status(kept.keep(v, { elapsedMs: v.elapsedMs, sets: key }).trim());
  } catch (err) {
    $("mauve-result").hidden = true;
    kept.forget();
    const message = String(err.message ?? err);
    // The core's MauveError::Stopped.
    const stopped = view.stopping && /^stopped before/.test(message);
    status(stopped ? "Stopped: no MAUVE (it needs every text featurised)." : message, stopped ? "muted" : "bad");
  } finally {
    clearInterval(tick);
    view.running = false;
    bar.hidden = true;
    $("mauve-stop").disabled = true;
    refreshButton();
  }
}

/** Asks the running MAUVE computation to end after its current model pass. */
async function stop() {
  if (!view.running) return;
  view.stopping = true;
  $("mauve-stop").disabled = true;
  status("Stopping after this model pass…");
  try {
    await view.engine.stopMauve();
  } catch (err) {
    status(`Could not stop: ${err.message ?? err}`, "bad");
  }
}

/** The sets or options changed: the result shown (and kept) is no longer theirs. */
function changed() {
  if (view.running || $("mauve-result").hidden) return;
  $("mauve-result").hidden = true;
  kept.forget();
  status("The sets or options changed: compute MAUVE again.");
}

async function loadFile(input, target) {
  const file = input.files?.[0];
  if (!file) return;
  try {
    target.value = await file.text();
  } catch (err) {
    status(`Could not read ${file.name}: ${err.message ?? err}`, "bad");
    return;
  }
  refreshCounts();
  save();
  changed();
}

/** Shows the result the last visit kept, read and checked by the core (`MauveRecord::from_json`). */
function restoreResult() {
  kept.restore(
    (json) => view.wasm.readMauveResult(json),
    (record, entry) => {
      // Only for the sets and options it was computed on (sets too large to keep come back empty).
      if (entry.sets !== setsKey()) return kept.forget();
      show({ ...record, elapsedMs: entry.elapsedMs });
      const version = /\|v:([^|]+)$/.exec(record.signature)?.[1];
      status(`The last MAUVE result ${finished(entry, version && `blindspot ${version}`, view.wasm.version())}, for these sets.`);
    },
    (why) => status(`The last MAUVE result could not be read back, and was dropped (${why}).`, "bad"),
  );
}

/** Wires the MAUVE section to the model engine (models come from models.js's events); `wasm` is the page's engine. */
export function initMauve(engine, wasm) {
  view.engine = engine;
  view.wasm = wasm;
  try {
    const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "null");
    if (saved) {
      $("mauve-hyps").value = typeof saved.hyps === "string" ? saved.hyps : "";
      $("mauve-refs").value = typeof saved.refs === "string" ? saved.refs : "";
      if (typeof saved.clusters === "string") $("mauve-clusters").value = saved.clusters;
      if (typeof saved.seed === "string" && saved.seed !== "") $("mauve-seed").value = saved.seed;
      if (typeof saved.model === "string") view.modelName = saved.model;
    }
  } catch {
    // A damaged entry: start empty.
  }
  for (const which of ["hyps", "refs"]) {
    $(`mauve-${which}`).addEventListener("input", () => {
      refreshCounts();
      save();
      changed();
    });
    $(`mauve-${which}-file`).addEventListener("change", (e) => loadFile(e.target, $(`mauve-${which}`)));
  }
  view.models = trackLoadedModels(refreshModels);
  for (const id of ["mauve-clusters", "mauve-seed"]) {
    $(id).addEventListener("input", () => {
      save();
      changed();
    });
  }
  // A pick the user makes is remembered by the model's name.
  $("mauve-model").addEventListener("change", () => {
    view.modelName = view.models.get(Number($("mauve-model").value))?.name ?? view.modelName;
    save();
  });
  $("mauve-run").addEventListener("click", run);
  $("mauve-stop").addEventListener("click", stop);
  refreshCounts();
  restoreResult();
}
