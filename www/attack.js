// The attack panel: searches for edits of the hypothesis that fool a metric
// (the core's stress::attack, run in the model worker so the page stays
// responsive). Goals, strategies and their defaults come from the core's
// registry; the panel only turns its controls into a request, shows the best
// candidate and the score trajectory while the search runs, and can stop it.
// The result can be used as the hypothesis (pinned original kept) like an
// injection, and is kept across a reload.

import { chartTools } from "./export.js";
import { finished, keptReport } from "./kept-report.js";
import { loadedMaskedLm, newestEncoderFirst } from "./models.js";

const $ = (id) => document.getElementById(id);
const STORAGE_KEY = "blindspot.attack.v1";
/** The last finished search, shown again after a reload (read back through the core). */
const kept = keptReport("blindspot.attack-result.v1");

let engine = null;
let page = null;
let registry = null;
let metricRegistry = [];
let lexicalSpecs = null; // the core's model-free specs, with the page's ROUGE stemmer
let specId = null; // the core's id of a spec's column
/** The attack plot's SVG/PNG buttons (shown once it has points). */
let plotTools = null;
let modelSpecs = () => [];
const loaded = new Map(); // handle -> model info
let running = false;
let last = null;
let restoring = false;

function status(text, kind = "muted") {
  const el = $("attack-status");
  el.textContent = text;
  el.className = kind;
}

function saved() {
  try {
    return JSON.parse(localStorage.getItem(STORAGE_KEY)) ?? {};
  } catch {
    return {};
  }
}

/**
 * Whether the metric was chosen since the page loaded. Until then the saved
 * choice stands: a model's metric comes back once the model has reloaded.
 */
let metricPicked = false;
/** Likewise for the fluency model: the saved one is picked again once it has reloaded. */
let fluencyPicked = false;

function save() {
  if (restoring) return;
  const data = {
    metric: metricPicked ? $("attack-metric").value : saved().metric ?? $("attack-metric").value,
    goal: $("attack-goal").value,
    strategy: $("attack-strategy").value,
    budget: $("attack-budget").value,
    seed: $("attack-seed").value,
    workers: $("attack-workers").value,
    fluency: fluencyPicked ? $("attack-fluency").value : saved().fluency ?? $("attack-fluency").value,
  };
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(data));
  } catch {
    // Storage full or disabled: the panel still works.
  }
}

/** The most workers an attack asks for (model-worker.js also caps them by the model's size). */
const MAX_WORKERS = 4;

/** One worker per core, up to MAX_WORKERS: the search's own and its helpers. */
const autoWorkers = () => Math.max(1, Math.min(MAX_WORKERS, navigator.hardwareConcurrency || 1));

/** The metrics on offer: every model-free one, and each model card's live spec. */
function metricOptions() {
  const name = (id) => metricRegistry.find((m) => m.id === id)?.name ?? id;
  const options = lexicalSpecs($("rouge-stemmer").checked).map((spec) => ({
    key: specId(spec),
    label: name(specId(spec)),
    spec,
  }));
  for (const spec of modelSpecs()) {
    const id = specId(spec);
    options.push({ key: `${id}@${spec.model}`, label: `${name(id)} (${spec.model})`, spec });
  }
  return options;
}

function fillMetrics() {
  const select = $("attack-metric");
  const current = select.value;
  const options = metricOptions();
  select.replaceChildren(...options.map((o) => new Option(o.label, o.key)));
  const keep = [metricPicked ? current : saved().metric, current].find((k) => options.some((o) => o.key === k));
  if (keep) select.value = keep;
}

function goal() {
  return registry.goals.find((g) => g.id === $("attack-goal").value);
}

function strategy() {
  return registry.strategies.find((s) => s.id === $("attack-strategy").value);
}

/** The newest loaded model that can serve as `kind` (a plain encoder before an NLI classifier). */
function newest(kind) {
  return newestEncoderFirst([...loaded.values()].filter((m) => m.kinds.includes(kind)));
}

function fillFluency() {
  const select = $("attack-fluency");
  const keep = select.value;
  const lms = [...loaded.values()].filter((m) => m.kinds.includes("causal-lm"));
  select.replaceChildren(new Option("none", ""), ...lms.map((m) => new Option(m.name, m.name)));
  const want = fluencyPicked ? keep : saved().fluency ?? keep;
  if (lms.some((m) => m.name === want)) select.value = want;
}

function describe() {
  const g = goal();
  const s = strategy();
  const encoder = newest("encoder");
  const mlm = loadedMaskedLm();
  const uses = [];
  if (s.needsNeighbours || s.usesModels) uses.push(encoder ? `neighbours from ${encoder.name}'s input embeddings` : "neighbours: load an encoder (e.g. the bundled MiniLM)");
  if (s.needsMaskedLm || s.usesModels) uses.push(mlm ? `masked LM ${mlm.name}` : "masked LM: load one with its MLM head");
  const fluency = $("attack-fluency").value;
  const z = `scores in z units over the ${registry.zPairs} bundled pairs and yours`;
  const constraint = g.id === "raise" ? "" : fluency ? `; ${fluency} perplexity may rise by ${g.defaults.max_ppl_rise}` : "; no fluency constraint (load a GPT-2 to add one)";
  const cap = (t) => t.charAt(0).toUpperCase() + t.slice(1);
  $("attack-description").textContent =
    `${cap(g.description)}. ${cap(s.description)}${uses.length ? ` (${uses.join("; ")})` : ""}. ${cap(z)}${constraint}.`;
}

function onGoalChange() {
  const g = goal();
  $("attack-strategy").value = g.defaultStrategy;
  $("attack-budget").value = String(g.defaults.budget);
  describe();
  save();
}

/** Draws the best score after each step against the queries used. */
function plot(points, base) {
  const svg = $("attack-plot");
  plotTools.hidden = !points.length;
  if (!points.length) {
    svg.replaceChildren();
    return;
  }
  const w = 320;
  const h = 120;
  const pad = 28;
  const xs = points.map((p) => p.queries);
  const ys = [base, ...points.map((p) => p.score)];
  const [x0, x1] = [0, Math.max(1, ...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (y1 - y0 < 1e-12) [y0, y1] = [y0 - 0.5, y1 + 0.5];
  const X = (x) => pad + ((x - x0) / (x1 - x0)) * (w - pad - 8);
  const Y = (y) => h - pad + 8 - ((y - y0) / (y1 - y0)) * (h - pad - 8);
  const line = [[0, base], ...points.map((p) => [p.queries, p.score])]
    .map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" ");
  const fmt = (v) => (Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(3));
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.innerHTML =
    `<line x1="${pad}" y1="${Y(base)}" x2="${w - 8}" y2="${Y(base)}" class="base"><title>original ${fmt(base)}</title></line>` +
    `<polyline points="${line}" class="trajectory"/>` +
    `<text x="2" y="${Y(y1) + 4}" class="axis">${fmt(y1)}</text>` +
    `<text x="2" y="${Y(y0)}" class="axis">${fmt(y0)}</text>` +
    `<text x="${w - 8}" y="${h - 4}" text-anchor="end" class="axis">${x1} queries</text>`;
  svg.dataset.points = String(points.length);
}

/** The status line of a finished search `out` (attackPair's value): its text and kind. */
function verdict(out) {
  const o = out.outcome;
  const ended = o.success ? "Goal met" : { budget: "Budget used up", time: "Time budget used up", exhausted: "No edit left to try", stopped: "Stopped" }[o.stop];
  const rate = out.searchMs > 0 ? ` · ${(o.queries / (out.searchMs / 1000)).toFixed(0)} queries/s` : "";
  return [
    `${ended}: ${o.score.toPrecision(4)} → ${o.final_score.toPrecision(4)} (${o.change_z >= 0 ? "+" : ""}${o.change_z.toFixed(2)} z, std ${out.z.std.toPrecision(3)} over ${out.z.count} pairs)` +
      `${o.self_drop_z != null ? `, against itself −${o.self_drop_z.toFixed(2)} z` : ""}` +
      `${o.ppl ? `, perplexity ${o.ppl[0].toFixed(1)} → ${o.ppl[1].toFixed(1)}` : ""}` +
      ` · ${o.words_changed} words changed (${(100 * o.perturbation).toFixed(0)}%) · ${o.queries} queries${rate}` +
      `${out.workers > 1 ? ` on ${out.workers} workers` : ""}` +
      `${out.poolFailure ? ` · helpers left out (${out.poolFailure}), their shares scored here` : ""}`,
    o.success ? "ok" : "warn",
  ];
}

/** Shows a finished search `out` (attackPair's value, or a kept one read back): text, plot, signature; returns its status line. */
function show(out) {
  last = out;
  const o = out.outcome;
  const panel = $("attack-panel");
  plot(o.trajectory, o.score);
  $("attack-result").hidden = false;
  $("attack-text").replaceChildren(...page.markedNodes(o.text, out.edits));
  panel.dataset.state = "done";
  panel.dataset.success = String(o.success);
  panel.dataset.finalScore = String(o.final_score);
  panel.dataset.text = o.text;
  panel.dataset.score = String(o.score);
  panel.dataset.queries = String(o.queries);
  panel.dataset.workers = String(out.workers);
  $("attack-signature").textContent = `${out.signature}${out.tools.length ? ` · ${out.tools.join(" · ")}` : ""}`;
  $("attack-apply").disabled = o.text === o.original;
  return verdict(out);
}

async function run() {
  if (running) return;
  const option = metricOptions().find((o) => o.key === $("attack-metric").value);
  if (!option) return status("Choose a metric.", "bad");
  const t = page.texts();
  if (!t.hypothesis.trim()) return status("Type a hypothesis to attack.", "bad");
  const g = goal();
  const s = strategy();
  const config = {
    ...structuredClone(registry.goals.find((x) => x.id === g.id).defaults),
    strategy: s.id,
    budget: Math.max(1, Math.floor(Number($("attack-budget").value) || g.defaults.budget)),
    seed: Math.max(0, Math.floor(Number($("attack-seed").value) || 0)),
  };
  const request = {
    spec: option.spec,
    config,
    hypothesis: t.hypothesis,
    references: t.reference,
    source: t.source || undefined,
  };
  const encoder = newest("encoder");
  const mlm = loadedMaskedLm();
  if (encoder && (s.needsNeighbours || s.usesModels)) request.neighbours = encoder.name;
  if (mlm && (s.needsMaskedLm || s.usesModels)) request.maskedLm = mlm.name;
  if ($("attack-fluency").value && g.id !== "raise") request.fluency = $("attack-fluency").value;
  running = true;
  last = null;
  kept.forget();
  $("attack-run").disabled = true;
  $("attack-stop").disabled = false;
  $("attack-apply").disabled = true;
  const bar = $("attack-progress");
  bar.hidden = false;
  bar.value = 0;
  const points = [];
  status(`Searching with ${option.label}…`);
  const panel = $("attack-panel");
  for (const k of ["success", "finalScore", "score", "text", "workers"]) delete panel.dataset[k];
  panel.dataset.queries = "0";
  panel.dataset.state = "running";
  try {
    const workers = Math.max(1, Math.min(MAX_WORKERS, Math.floor(Number($("attack-workers").value)) || autoWorkers()));
    const out = await engine.attackPair(request, (p) => {
      points.push(p);
      bar.value = Math.min(1, p.queries / p.budget);
      plot(points, p.base);
      $("attack-result").hidden = false;
      $("attack-text").textContent = p.text;
      status(`Step ${p.steps}: ${p.queries} of ${p.budget} queries, best ${p.score.toPrecision(4)} (${p.objective >= 0 ? "+" : ""}${p.objective.toFixed(2)} z toward the goal), noise ${p.noise.toFixed(2)}`);
      panel.dataset.queries = String(p.queries);
    }, { workers });
    status(...show(out));
    const note = kept.keep(out, { metric: option.label });
    if (note) $("attack-status").textContent += note;
  } catch (err) {
    status(String(err.message ?? err), "bad");
    panel.dataset.state = "error";
  } finally {
    running = false;
    bar.hidden = true;
    $("attack-run").disabled = false;
    $("attack-stop").disabled = true;
  }
}

export function initAttack(modelEngine, wasm, hooks) {
  engine = modelEngine;
  page = hooks;
  plotTools = chartTools("attack-trajectory", () => $("attack-plot"));
  $("attack-plot").after(plotTools);
  registry = wasm.attackRegistry();
  metricRegistry = wasm.metricRegistry();
  lexicalSpecs = wasm.lexicalSpecs;
  specId = wasm.specId;
  modelSpecs = hooks.modelSpecs;
  $("attack-goal").replaceChildren(...registry.goals.map((g) => new Option(g.id, g.id)));
  $("attack-strategy").replaceChildren(...registry.strategies.map((s) => new Option(s.id, s.id)));
  const s = saved();
  restoring = true;
  fillMetrics();
  if (s.goal && registry.goals.some((g) => g.id === s.goal)) $("attack-goal").value = s.goal;
  onGoalChange();
  if (s.strategy && registry.strategies.some((x) => x.id === s.strategy)) $("attack-strategy").value = s.strategy;
  // Saved numbers come back only where they are valid (a damaged entry keeps the defaults).
  const whole = (v, min, max = Infinity) => /^\d+$/.test(String(v)) && Number(v) >= min && Number(v) <= max;
  if (whole(s.budget, 1)) $("attack-budget").value = s.budget;
  if (whole(s.seed, 0)) $("attack-seed").value = s.seed;
  $("attack-workers").placeholder = String(autoWorkers());
  if (whole(s.workers, 1, 4)) $("attack-workers").value = s.workers;
  restoring = false;
  describe();
  $("attack-goal").addEventListener("change", onGoalChange);
  $("attack-fluency").addEventListener("change", () => { fluencyPicked = true; });
  for (const id of ["attack-strategy", "attack-fluency"]) $(id).addEventListener("change", () => { describe(); save(); });
  $("attack-metric").addEventListener("change", () => { metricPicked = true; });
  for (const id of ["attack-metric", "attack-budget", "attack-seed", "attack-workers"]) $(id).addEventListener("change", save);
  $("attack-run").addEventListener("click", run);
  kept.restore(
    (json) => wasm.readAttackResult(json),
    (out, entry) => {
      const [line, kind] = show(out);
      const on = typeof entry.metric === "string" ? ` on ${entry.metric}` : "";
      status(`The last search ${finished(entry)}${on}. ${line}`, kind);
    },
    (why) => status(`The last search's result could not be read back, and was dropped (${why}).`, "bad"),
  );
  $("attack-stop").addEventListener("click", () => {
    status("Stopping after this step…");
    Promise.resolve(engine.stopAttack()).catch((err) => status(`Could not stop the search: ${err.message ?? err}`, "bad"));
  });
  $("attack-apply").addEventListener("click", () => {
    if (!last) return;
    // The result is an edit of the text searched: not of a hypothesis typed since.
    if (page.texts().hypothesis !== last.outcome.original) {
      status("The hypothesis changed since this search: run it again to attack the new text (or undo your edits to use this result).", "bad");
      return;
    }
    page.useText(last.outcome.text, last.edits, last.outcome.original);
  });
  const refresh = () => { fillMetrics(); fillFluency(); describe(); };
  document.addEventListener("blindspot:model", (e) => {
    for (const [handle, m] of loaded) if (m.name === e.detail.name) loaded.delete(handle);
    loaded.set(e.detail.handle, e.detail);
    // The model cards settle their specs first.
    setTimeout(refresh, 0);
  });
  document.addEventListener("blindspot:model-unloaded", (e) => {
    loaded.delete(e.detail.handle);
    setTimeout(refresh, 0);
  });
  $("attack-metric").addEventListener("focus", fillMetrics);
}
