// Blindspot playground: wires the text areas to the wasm scoring core.
//
// Every number on the page comes from the wasm module (src/web); this file
// only schedules work, renders results and keeps state across reloads.

import { initSuite, loadInjectionNeeds } from "./suite.js";
import { initAnalyses } from "./analyses.js";
import { downloadSize, hasBertScoreEncoder, initModels, isCached, isNliModel, loadedMaskedLm, loadedModels, loadModels, registrySize } from "./models.js";
import { cardChoices, initPlmScores, modelSpecs, restoreCardChoices } from "./plm-scores.js";
import { startModelEngine } from "./model-engine.js";
import { initMauve } from "./mauve.js";
import { initGenerate } from "./generate.js";
import { initAttentionView } from "./attention-view.js";
import { initAttack } from "./attack.js";
import { initLessons } from "./lessons.js";
import { EXAMPLES } from "./examples.js";
import { initSweep, sweepChart } from "./sweep.js";

const STORAGE_KEY = "blindspot.playground.v1";
/** Links longer than this (characters) get a warning: chat apps and some browsers cut them. */
const LONG_LINK = 32_000;
const $ = (id) => document.getElementById(id);
const fields = { source: $("source"), reference: $("reference"), hypothesis: $("hypothesis") };

/** Resolves in a later task (a message, not a timer: timers may be clamped to 4 ms or more). */
function nextTask() {
  return new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(null);
  });
}

/** Resolves with the wasm bindings once Trunk's loader has initialised them. */
function wasmReady() {
  if (window.wasmBindings) return Promise.resolve(window.wasmBindings);
  return new Promise((resolve) =>
    addEventListener("TrunkApplicationStarted", () => resolve(window.wasmBindings), { once: true }));
}

const state = {
  wasm: null,
  registry: [],
  pinned: null, // { hypothesis }: the original that deltas compare against
  baseline: null, // { key, values: {metricId: value} }: the pinned text's scores for the current inputs
  injections: [],
  familyLabels: {},
  edits: [],    // spans changed by the last injection, UTF-16 offsets into the hypothesis
  undo: [],     // [{ hypothesis, edits }] before each applied injection
  redo: [],
  latest: {},   // metricId -> outcome
  frame: 0,
  modelOffer: null, // { models, cards }: a link's (or the last visit's) models, offered until loaded or dismissed
  models: null, // the model engine (model-worker.js): model passes, and the sweep
};

/**
 * The last visit's playground, or null: a damaged entry (not JSON, not an
 * object, texts that are not strings) loses what does not fit rather than
 * breaking the page's start on every visit.
 */
function loadSaved() {
  let raw;
  try {
    raw = JSON.parse(localStorage.getItem(STORAGE_KEY));
  } catch {
    return null;
  }
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return null;
  const text = (v) => (typeof v === "string" ? v : "");
  return {
    ...raw,
    source: text(raw.source),
    reference: text(raw.reference),
    hypothesis: text(raw.hypothesis),
    example: EXAMPLES.some((e) => e.id === raw.example) ? raw.example : "custom",
    pinned: typeof raw.pinned?.hypothesis === "string" ? { hypothesis: raw.pinned.hypothesis } : null,
  };
}

/**
 * The models and model cards to carry in a link or to the next visit: the
 * loaded ones, or while an offer to load a link's models is open, those.
 */
function modelState() {
  const loaded = loadedModels();
  const offer = state.modelOffer;
  return {
    m: loaded.length || !offer ? loaded : offer.models,
    c: { ...(offer?.cards ?? {}), ...cardChoices() },
  };
}

/**
 * The single-pair state as a URL-safe string: texts, pinned original, marked
 * edits, the ROUGE stemmer, the loaded models (id, backend, precision) and
 * each model card's model and options.
 */
function encodePair() {
  const data = {
    s: fields.source.value,
    r: fields.reference.value,
    h: fields.hypothesis.value,
    p: state.pinned?.hypothesis ?? null,
    e: state.edits,
    o: { stem: $("rouge-stemmer").checked },
    ...modelState(),
  };
  let bin = "";
  for (const b of new TextEncoder().encode(JSON.stringify(data))) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The state a `#pair=...` link carries, or null. */
function pairFromHash() {
  const value = new URLSearchParams(location.hash.slice(1)).get("pair");
  if (!value) return null;
  try {
    const bin = atob(value.replace(/-/g, "+").replace(/_/g, "/"));
    const data = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
    if (typeof data.h !== "string" || typeof data.r !== "string") return null;
    return data;
  } catch {
    return null;
  }
}

/**
 * A link's edit marks if they fit its hypothesis (in order, within the
 * text, each with a kind), else none: a hand-edited link must not stop the
 * page from starting.
 */
function linkedEdits(edits, text) {
  if (!Array.isArray(edits)) return [];
  let at = 0;
  for (const e of edits) {
    const ok = e && typeof e.kind === "string" && Number.isInteger(e.start) && Number.isInteger(e.end) &&
      at <= e.start && e.start <= e.end && e.end <= text.length;
    if (!ok) return [];
    at = e.end;
  }
  return edits;
}

/**
 * Undo and redo kept across reloads: the last steps, up to about 200 KB of
 * text each way, under a key of their own, written only when they change
 * (not at every keystroke, as the texts are).
 */
const HISTORY_KEPT = { steps: 20, chars: 200_000 };
const HISTORY_KEY = "blindspot.history.v1";

/** The last visit's undo and redo, sound entries only. */
function loadHistory() {
  try {
    const saved = JSON.parse(localStorage.getItem(HISTORY_KEY));
    return { undo: savedHistory(saved?.undo), redo: savedHistory(saved?.redo) };
  } catch {
    return { undo: [], redo: [] };
  }
}

/** The newest entries of a history that fit what is kept. */
function keptHistory(entries) {
  const kept = [];
  let chars = 0;
  for (const e of entries.slice(-HISTORY_KEPT.steps).reverse()) {
    chars += e.hypothesis.length;
    if (chars > HISTORY_KEPT.chars) break;
    kept.unshift(e);
  }
  return kept;
}

/** A saved history's entries that are sound (text a string, marks that fit it); the rest are dropped. */
function savedHistory(value) {
  if (!Array.isArray(value)) return [];
  return value.filter((e) => typeof e?.hypothesis === "string")
    .map((e) => ({ hypothesis: e.hypothesis, edits: linkedEdits(e.edits, e.hypothesis) }));
}

function save() {
  const models = modelState();
  const data = {
    source: fields.source.value,
    reference: fields.reference.value,
    hypothesis: fields.hypothesis.value,
    example: $("example").value,
    rougeStemmer: $("rouge-stemmer").checked,
    pinned: state.pinned,
    edits: state.edits,
    injection: { id: $("injection").value, level: $("level").value, seed: $("seed").value },
    models: models.m,
    cards: models.c,
  };
  state.unsaved = false;
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(data));
  } catch {
    // Storage can be full or disabled (private mode); the page still works.
  }
}

function words(text) {
  const n = text.trim() ? text.trim().split(/\s+/).length : 0;
  return `${n} word${n === 1 ? "" : "s"}`;
}

function formatValue(info, value) {
  return value.toFixed(info.digits);
}

function formatDelta(info, delta) {
  const digits = info.digits;
  const threshold = 0.5 * 10 ** -digits;
  if (Math.abs(delta) < threshold) return { text: "±0 vs original", cls: "same" };
  const better = info.higher_is_better ? delta > 0 : delta < 0;
  const arrow = delta > 0 ? "▲" : "▼";
  const sign = delta > 0 ? "+" : "−";
  return { text: `${arrow} ${sign}${Math.abs(delta).toFixed(digits)} vs original`, cls: better ? "up" : "down" };
}

function partsText(score) {
  return score.parts
    .filter((p) => !["sys_len", "ref_len", "fmeasure"].includes(p.name))
    .map((p) => `${p.name} ${Number.isInteger(p.value) ? p.value : p.value.toFixed(p.value > 1.5 ? 1 : 3)}`)
    .join(" · ");
}

function buildCards() {
  const container = $("score-cards");
  container.replaceChildren();
  for (const info of state.registry) {
    const card = document.createElement("article");
    card.className = "card";
    card.dataset.metric = info.id;
    card.innerHTML = `
      <header><h3></h3><span class="scale"></span></header>
      <div class="value" data-role="value">–</div>
      <div class="delta" data-role="delta"></div>
      <div class="parts" data-role="parts"></div>
      <details><summary>Signature</summary><code data-role="signature"></code></details>`;
    card.querySelector("h3").textContent = info.name;
    card.querySelector(".scale").textContent = info.scale_label;
    card.title = info.description;
    container.append(card);
  }
}

function render() {
  for (const info of state.registry) {
    const card = document.querySelector(`.card[data-metric="${info.id}"]`);
    const outcome = state.latest[info.id];
    const value = card.querySelector('[data-role="value"]');
    const delta = card.querySelector('[data-role="delta"]');
    const parts = card.querySelector('[data-role="parts"]');
    const signature = card.querySelector('[data-role="signature"]');
    if (!outcome) continue;
    if (outcome.status === "error") {
      card.classList.add("unavailable");
      value.textContent = "–";
      delta.textContent = outcome.message;
      delta.className = "delta message";
      parts.textContent = "";
      signature.textContent = "";
      continue;
    }
    card.classList.remove("unavailable");
    const score = outcome.score;
    value.textContent = formatValue(info, score.value);
    value.dataset.raw = String(score.value);
    const base = baselineValues()?.[info.id];
    if (base === undefined) {
      delta.textContent = "";
      delta.className = "delta";
      delete delta.dataset.raw;
    } else {
      const d = formatDelta(info, score.value - base);
      delta.textContent = d.text;
      delta.className = `delta ${d.cls}`;
      delta.dataset.raw = String(score.value - base);
    }
    parts.textContent = partsText(score);
    signature.textContent = score.signature;
  }
}

/** Every metric's outcome for `hypothesis` against the current reference and source. */
function scoreText(hypothesis) {
  const outcomes = state.wasm.scorePair({
    hypothesis,
    references: fields.reference.value,
    source: fields.source.value,
    metrics: state.registry.map((m) => m.id),
    rougeStemmer: $("rouge-stemmer").checked,
  });
  return Object.fromEntries(outcomes.map((o) => [o.status === "ok" ? o.score.metric : o.metric, o]));
}

/** The pinned original's scores, recomputed only when it or the other inputs change. */
function baselineValues() {
  if (!state.pinned) return null;
  const key = JSON.stringify([state.pinned.hypothesis, fields.reference.value, fields.source.value,
    $("rouge-stemmer").checked]);
  if (state.baseline?.key !== key) {
    const outcomes = scoreText(state.pinned.hypothesis);
    const values = Object.fromEntries(Object.entries(outcomes)
      .filter(([, o]) => o.status === "ok").map(([id, o]) => [id, o.score.value]));
    state.baseline = { key, values };
  }
  return state.baseline.values;
}

function scoreNow() {
  state.frame = 0;
  clearTimeout(state.pause);
  state.pause = 0;
  if (!state.wasm) return;
  const started = performance.now();
  try {
    state.latest = scoreText(fields.hypothesis.value);
  } catch (err) {
    $("timing").textContent = `Scoring failed: ${err.message ?? err}`;
    return;
  }
  render();
  state.passMs = performance.now() - started;
  state.slowPasses = state.passMs > SLOW_PASS_MS ? (state.slowPasses ?? 0) + 1 : 0;
  $("timing").textContent = `scored in ${state.passMs.toFixed(1)} ms` +
    (waitsForPause() ? " (texts this long are scored when typing pauses)" : "");
  for (const [name, el] of Object.entries(fields)) $(`${name}-count`).textContent = words(el.value);
  const references = state.wasm.splitReferences(fields.reference.value).length;
  if (references > 1) $("reference-count").textContent = `${references} references · ${words(fields.reference.value)}`;
  save();
  // Model-based scores follow asynchronously (plm-scores.js).
  document.dispatchEvent(new CustomEvent("blindspot:texts"));
}

/** A scoring pass longer than this (texts of tens of thousands of words) waits for typing to pause. */
const SLOW_PASS_MS = 50;

/**
 * Whether the next pass waits for typing to pause: after two slow passes in
 * a row (texts that long), not after one (a garbage collection or the
 * engine's first passes, which would make short texts wait for no reason).
 */
const waitsForPause = () => (state.slowPasses ?? 0) >= 2;

/**
 * Coalesces edits: at most one scoring pass per animation frame. When the
 * last passes were slow, the next one waits until typing pauses (for as
 * long as a pass takes, within 0.2 to 1 s), so keystrokes are not held up
 * behind a pass each.
 */
function schedule() {
  if (state.frame) return;
  if (waitsForPause()) {
    // Texts this long are saved when the pass runs (and when the page is
    // left, below), not per keystroke: serialising them into localStorage
    // cost the page's thread tens of milliseconds a key.
    clearTimeout(state.pause);
    state.pause = setTimeout(scoreNow, Math.min(1000, Math.max(200, state.passMs)));
    state.unsaved = true;
    return;
  }
  state.frame = requestAnimationFrame(scoreNow);
}

function updatePinInfo() {
  $("restore").disabled = !state.pinned;
  $("pin-info").textContent = state.pinned
    ? `Original pinned (${words(state.pinned.hypothesis)}); deltas compare against it.`
    : "No original pinned: deltas appear once you pin one.";
}

function pin() {
  state.pinned = { hypothesis: fields.hypothesis.value };
  updatePinInfo();
  scoreNow();
}

function restore() {
  if (!state.pinned) return;
  fields.hypothesis.value = state.pinned.hypothesis;
  state.edits = [];
  renderDiff();
  scoreNow();
}

const LEVEL_PREFIX = { portion: "p = ", count: "n = ", copies: "k = ", variant: "variant " };

function buildPalette() {
  const select = $("injection");
  const groups = {};
  for (const info of state.injections) {
    if (!groups[info.family]) {
      groups[info.family] = document.createElement("optgroup");
      groups[info.family].label = state.familyLabels[info.family] ?? info.family;
      select.append(groups[info.family]);
    }
    const label = info.needs_masked_lm ? `${info.name} (needs a masked LM)` : info.name;
    groups[info.family].append(new Option(label, info.id));
  }
  select.addEventListener("change", fillLevels);
  fillLevels();
}

/** The last visit's injection, level and seed, where this page still offers them. */
function restoreInjection(saved) {
  const has = (select, value) => [...$(select).options].some((o) => o.value === value);
  if (typeof saved?.id !== "string" || !has("injection", saved.id)) return;
  $("injection").value = saved.id;
  fillLevels();
  if (has("level", saved.level)) $("level").value = saved.level;
  if (/^\d+$/.test(saved.seed ?? "")) $("seed").value = saved.seed;
}

function fillLevels() {
  const info = state.injections.find((i) => i.id === $("injection").value);
  const level = $("level");
  level.replaceChildren(...info.default_levels.map((l) => new Option(`${LEVEL_PREFIX[info.level_kind]}${l}`, String(l))));
  $("injection-description").textContent = info.description;
}

/** `text` as DOM nodes with `edits` (UTF-16 spans) marked: changed words in <mark>, ⌫ where words were deleted. */
function markedNodes(text, edits) {
  const nodes = [];
  let at = 0;
  for (const e of edits) {
    nodes.push(document.createTextNode(text.slice(at, e.start)));
    if (e.kind === "deleted") {
      const del = document.createElement("span");
      del.className = "deleted";
      del.textContent = "⌫";
      del.title = "words deleted here";
      del.setAttribute("aria-label", "deleted words");
      nodes.push(del);
    } else {
      const mark = document.createElement("mark");
      mark.textContent = text.slice(e.start, e.end);
      nodes.push(mark);
    }
    at = e.end;
  }
  nodes.push(document.createTextNode(text.slice(at)));
  return nodes;
}

/** Renders the hypothesis with the last injection's changed spans marked. */
function renderDiff() {
  const box = $("hypothesis-diff");
  if (!state.edits.length) {
    box.hidden = true;
    box.replaceChildren();
    return;
  }
  box.replaceChildren(...markedNodes(fields.hypothesis.value, state.edits));
  box.hidden = false;
}

/** Every change of the history ends here: the buttons follow it, and it is kept for the next visit. */
function updateHistoryButtons() {
  $("undo").disabled = !state.undo.length;
  $("redo").disabled = !state.redo.length;
  try {
    localStorage.setItem(HISTORY_KEY, JSON.stringify({ undo: keptHistory(state.undo), redo: keptHistory(state.redo) }));
  } catch {
    // Storage full or off: the history lasts this visit.
  }
}

/**
 * Loads what `info`'s injection needs into `engine` (the page's wasm by
 * default, or the model engine) the first time: GPT-2's tokenizer, the
 * part-of-speech tagger's weights (not inside the wasm).
 */
async function ensureInjectionNeeds(info, engine = state.wasm) {
  const out = $("injection-result");
  await loadInjectionNeeds(engine, { tokenizer: info.needs_lm_tokenizer, tagger: info.needs_tagger }, (text) => {
    out.textContent = text;
    out.className = "muted";
  });
}

/**
 * The loaded model BERT-diverge asks (the newest with a masked-LM head), as
 * `{maskedLm}` for a request, or `{}` when `info` needs none; throws a
 * readable error when it needs one and none is loaded.
 */
function maskedLmFor(info) {
  if (!info.needs_masked_lm) return {};
  const mlm = loadedMaskedLm();
  if (!mlm) throw new Error(`${info.name} needs a masked language model: load one with its MLM head (for example bert-base-uncased or distilroberta-base) in the model panel`);
  return { maskedLm: mlm.name };
}

/** Apply: one at a time (a masked LM's rewrite takes a moment). */
async function applyInjection() {
  const button = $("apply-injection");
  if (button.disabled) return;
  button.disabled = true;
  try {
    await applyChosenInjection();
  } finally {
    button.disabled = false;
  }
}

async function applyChosenInjection() {
  const info = state.injections.find((i) => i.id === $("injection").value);
  const out = $("injection-result");
  let withModel;
  try {
    withModel = maskedLmFor(info);
    await ensureInjectionNeeds(info);
  } catch (err) {
    out.textContent = String(err.message ?? err);
    out.className = "bad";
    return;
  }
  const level = Number($("level").value);
  const seed = Math.max(0, Math.floor(Number($("seed").value) || 0));
  const current = new Set([fields.reference.value, fields.hypothesis.value]);
  const samples = EXAMPLES.flatMap((e) => [e.reference, e.hypothesis]).filter((t) => !current.has(t));
  const text = fields.hypothesis.value;
  let result;
  try {
    // A masked LM's rewrite runs in the model worker, where the models are.
    if (withModel.maskedLm) {
      out.textContent = `Asking ${withModel.maskedLm} for replacements…`;
      out.className = "muted";
    }
    const engine = withModel.maskedLm ? state.models : state.wasm;
    if (withModel.maskedLm) showStop(true);
    result = await engine.applyInjection({
      text, injection: info.id, level, seed, source: fields.source.value, samples, ...withModel,
    });
  } catch (err) {
    out.textContent = stoppedOr(info, err);
    out.className = "bad";
    return;
  } finally {
    showStop(false);
  }
  // Edited while the model worked: the result is for the old text.
  if (fields.hypothesis.value !== text) {
    out.textContent = `${info.name}: the hypothesis changed while it ran; apply it again.`;
    out.className = "bad";
    return;
  }
  if (!result.applied) {
    out.textContent = `${info.name} did not apply: ${result.reason}.`;
    out.className = "bad";
    return;
  }
  useText(result.text, result.edits);
  out.textContent = `${info.name} (${LEVEL_PREFIX[info.level_kind]}${level}, seed ${seed}): noise ratio ${result.noiseRatio.toFixed(3)}`;
  out.className = "muted";
  out.dataset.noiseRatio = String(result.noiseRatio);
  $("example").value = "custom";
  afterHistoryChange();
}

/** Shows (or hides) the Stop button of an Apply or sweep that asks a masked LM. */
function showStop(shown) {
  const stop = $("injection-stop");
  stop.hidden = !shown;
  stop.disabled = false;
}

/** A failed Apply or sweep's message: "stopped" when the user stopped it. */
function stoppedOr(info, err) {
  const message = String(err.message ?? err);
  return message === "stopped" ? `${info.name}: stopped; nothing was changed.` : message;
}

/** Asks the masked LM's Apply or sweep to end after its current batch of queries. */
async function stopInjection() {
  const stop = $("injection-stop");
  stop.disabled = true;
  $("injection-result").textContent = "Stopping after this batch…";
  await state.models.stopInjection();
}

/** Puts a perturbed text in the hypothesis box (undoable, the original pinned first). */
function useText(text, edits) {
  if (!state.pinned) pin();
  state.undo.push({ hypothesis: fields.hypothesis.value, edits: state.edits });
  state.redo = [];
  fields.hypothesis.value = text;
  state.edits = edits;
}

/**
 * Sweeps the chosen injection's levels in the model worker (on a long text
 * the 50 perturbed texts and their scores take a few hundred milliseconds,
 * too long for the page's own thread).
 */
async function runSweep() {
  const info = state.injections.find((i) => i.id === $("injection").value);
  const out = $("injection-result");
  const button = $("sweep-injection");
  if (button.disabled) return;
  button.disabled = true;
  let sweep;
  try {
    const withModel = maskedLmFor(info);
    await ensureInjectionNeeds(info, state.models);
    out.textContent = `Sweeping ${info.name}…`;
    out.className = "muted";
    if (withModel.maskedLm) showStop(true);
    sweep = await state.models.sweepInjection({
      ...withModel,
      hypothesis: fields.hypothesis.value,
      references: fields.reference.value,
      source: fields.source.value,
      injection: info.id,
      metrics: state.registry.map((m) => m.id),
      rougeStemmer: $("rouge-stemmer").checked,
      seeds: 5,
      samples: EXAMPLES.flatMap((e) => [e.reference, e.hypothesis]),
    });
  } catch (err) {
    out.textContent = stoppedOr(info, err);
    out.className = "bad";
    return;
  } finally {
    button.disabled = false;
    showStop(false);
  }
  out.textContent = "";
  $("sweep-title").textContent = `Sweep: ${info.name}`;
  $("sweep-note").textContent = `Levels ${sweep.levels.map((l) => LEVEL_PREFIX[info.level_kind] + l.level).join(", ")}; ` +
    `${sweep.seeds} seeds each, means shown. Rank rule ([BS] §2): a metric passes when every level scores below ` +
    (info.graded ? "the original hypothesis and more noise never scores higher." : "the original hypothesis (these levels are not amounts of noise, so they are not held to an order).") +
    notApplied(sweep.levels.filter((l) => l.applied === 0).map((l) => LEVEL_PREFIX[info.level_kind] + l.level));
  const charts = sweep.metrics.map((id, m) => {
    const metric = state.registry.find((r) => r.id === id);
    const points = sweep.levels.map((l) => ({ x: l.noise_ratio, y: l.scores[m] }));
    return sweepChart(metric, sweep.base[m], points, sweep.verdicts[m], (v) => formatValue(metric, v), info.id);
  });
  $("sweep-charts").replaceChildren(...charts);
  $("sweep").hidden = false;
}

/** The sweep note's words for levels that changed the text with no seed. */
function notApplied(levels) {
  if (levels.length === 0) return "";
  return ` Level${levels.length > 1 ? "s" : ""} ${levels.join(", ")} changed nothing in this text with any seed ` +
    `(too short for ${levels.length > 1 ? "them" : "it"}, or nothing to change): shown, but left out of the verdicts.`;
}

function stepHistory(from, to) {
  const entry = from.pop();
  if (!entry) return;
  to.push({ hypothesis: fields.hypothesis.value, edits: state.edits });
  fields.hypothesis.value = entry.hypothesis;
  state.edits = entry.edits;
  afterHistoryChange();
}

function afterHistoryChange() {
  renderDiff();
  updateHistoryButtons();
  scoreNow();
}

/** Puts `{source, reference, hypothesis}` in the boxes as a fresh start (no marks, no history) and pins the hypothesis. */
function startFrom(t) {
  fields.source.value = t.source;
  fields.reference.value = t.reference;
  fields.hypothesis.value = t.hypothesis;
  state.edits = [];
  state.undo = [];
  state.redo = [];
  renderDiff();
  updateHistoryButtons();
  pin();
}

function loadExample(id) {
  const ex = EXAMPLES.find((e) => e.id === id);
  if (ex) startFrom(ex);
}

/**
 * The WebGPU pill: a small matrix product on WebGPU against the CPU, in the
 * model worker (`models`), where model passes run. On the page's own thread
 * its shader compilation blocked typing for 200 ms just after load.
 */
async function checkWebGpu(models) {
  const el = $("gpu-status");
  if (!navigator.gpu) {
    el.textContent = "WebGPU: not available in this browser (lexical metrics need none)";
    el.className = "pill pill-off";
    return;
  }
  try {
    const report = await models.webgpuSelfTest();
    el.textContent = report.ok ? "WebGPU: ready" : "WebGPU: self-test mismatch";
    el.className = `pill ${report.ok ? "pill-ok" : "pill-bad"}`;
    el.title = `burn-wgpu matmul ${report.shape.join("×")} vs CPU: max |diff| ${report.maxAbsDiff.toExponential(2)}`;
    el.dataset.maxAbsDiff = String(report.maxAbsDiff);
  } catch (err) {
    el.textContent = "WebGPU: unavailable (lexical metrics need none)";
    el.className = "pill pill-off";
    el.title = String(err.message ?? err);
  }
}

/**
 * The model list of a link or a saved visit, checked: `[{id, backend,
 * precision}]`, at most 8. Precisions take the engine's name (older links say
 * the CLI's "q8"); one the engine does not know becomes f32, which the offer
 * then shows.
 */
function modelList(value) {
  if (!Array.isArray(value)) return [];
  const precision = (p) => {
    try {
      return state.wasm.precisionName(String(p ?? "f32"));
    } catch {
      return "f32";
    }
  };
  return value.filter((m) => typeof m?.id === "string" && m.id.trim()).slice(0, 8)
    .map((m) => ({ id: m.id.trim(), backend: String(m.backend ?? "auto"), precision: precision(m.precision) }));
}

/**
 * Offers, in one click, the models a link (or the last visit) scored with;
 * their cards' choices are restored as each model loads. Nothing is fetched
 * before the click: a link must not start a download of its own.
 */
async function offerModels(list, cards, why) {
  const box = $("pair-models");
  restoreCardChoices(cards);
  if (!list.length) return;
  state.modelOffer = { models: list, cards: cards && typeof cards === "object" ? cards : {} };
  const close = () => {
    box.hidden = true;
    state.modelOffer = null;
    save();
  };
  const described = await Promise.all(list.map(async (m) => {
    const size = await downloadSize(m.id, m.precision).catch(() => registrySize(m.id));
    const cached = await isCached(m.id, m.precision).catch(() => false);
    const precision = [...$("model-precision").options].find((o) => o.value === m.precision)?.text ?? m.precision;
    return `${m.id} (${precision}, ${size ?? "size unknown"}${cached ? ", in this browser's cache" : ""})`;
  }));
  $("pair-models-text").textContent = `${why}: ${described.join(", ")}.`;
  box.hidden = false;
  const load = $("pair-models-load");
  load.onclick = async () => {
    load.disabled = true;
    $("pair-models-text").textContent = `Loading ${list.map((m) => m.id).join(", ")}…`;
    const failed = await loadModels(list).catch((err) => {
      $("pair-models-text").textContent = String(err.message ?? err);
      return null;
    });
    load.disabled = false;
    if (failed === null) return;
    if (failed.length) {
      $("pair-models-text").textContent = `Could not load ${failed.join(", ")}: the language-model panel says why.`;
    } else {
      close();
    }
  };
  $("pair-models-dismiss").onclick = close;
}

/** Loads the bundled all-MiniLM-L6-v2 through the model panel (its BERTScore card follows). */
/** Loads a registry model through the Models panel with its current backend and weights. */
const loadRegistryModel = (id) => loadModels([{ id }]);
const loadMiniLm = () => loadRegistryModel("sentence-transformers/all-MiniLM-L6-v2");

async function main() {
  const select = $("example");
  for (const ex of EXAMPLES) select.append(new Option(ex.title, ex.id));
  select.append(new Option("Your own text", "custom"));

  const saved = loadSaved();
  // Read before the suite panel applies its link and takes it out of the address.
  const opened = new URLSearchParams(location.hash.slice(1));
  const linkedStemmer = opened.has("suite") && opened.has("stem");
  const wasm = await wasmReady();
  state.wasm = wasm;
  // The page's start runs in a few tasks rather than one (its first wasm
  // calls compile their code): the module's instantiation, the panels in two
  // halves, then the cards, texts and first scores, so that each stays under
  // the 50 ms a long task starts at.
  await nextTask();
  const registry = wasm.metricRegistry();
  // The live cards of this file are the model-free metrics; plm-scores.js adds the others.
  state.registry = registry.filter((m) => !m.model);
  state.injections = wasm.injectionRegistry();
  state.familyLabels = Object.fromEntries(wasm.injectionFamilies().map((f) => [f.id, f.label]));
  buildPalette();
  restoreInjection(saved?.injection);
  const choices = wasm.metricChoices();
  initSweep(choices.verdicts);
  // The page's one ROUGE stemmer switch sets ROUGE's stemmer option: its label and help are the core's.
  $("rouge-stemmer-label").lastElementChild.textContent = `ROUGE: ${choices.rougeStemmer.title}`;
  $("rouge-stemmer-label").title = choices.rougeStemmer.description;
  // Language models run in their own worker; the page only sends texts.
  const models = startModelEngine(wasm);
  state.models = models;
  document.body.dataset.modelEngine = models.where;
  initSuite(wasm, registry, state.injections, models);
  initModels(models).catch((err) => console.error("model panel", err));
  initPlmScores(models, wasm, () => state.pinned?.hypothesis ?? null);
  initAnalyses(wasm, models, registry);
  initMauve(models, wasm);
  initGenerate(models, wasm);
  initAttentionView(models);
  await nextTask();
  initLessons(models, wasm, {
    version: wasm.version(),
    setTexts: (t) => {
      select.value = "custom";
      startFrom(t);
      fields.hypothesis.scrollIntoView({ block: "center" });
    },
    loadMiniLm,
    loadRegistryModel,
    registrySize,
  });
  initAttack(models, wasm, {
    texts: () => ({ source: fields.source.value, reference: fields.reference.value, hypothesis: fields.hypothesis.value }),
    modelSpecs,
    markedNodes,
    useText: (text, edits, original) => {
      // Deltas compare against the text that was attacked.
      if (state.pinned?.hypothesis !== original) {
        state.undo.push({ hypothesis: fields.hypothesis.value, edits: state.edits });
        fields.hypothesis.value = original;
        state.edits = [];
        pin();
      }
      useText(text, edits);
      $("example").value = "custom";
      afterHistoryChange();
    },
  });
  // The cards, the texts and the first scores come in one task: the page says
  // its engine is ready only with the texts in place.
  await nextTask();
  $("version").textContent = wasm.version();
  $("engine-status").textContent = "Engine ready";
  $("engine-status").className = "pill pill-ok";
  buildCards();

  /** Shows a shared pair (a `#pair=` link), then takes it out of the address. */
  const applyShared = (shared) => {
    fields.source.value = typeof shared.s === "string" ? shared.s : "";
    fields.reference.value = shared.r;
    fields.hypothesis.value = shared.h;
    select.value = "custom";
    state.pinned = typeof shared.p === "string" ? { hypothesis: shared.p } : null;
    state.edits = linkedEdits(shared.e, shared.h);
    if (typeof shared.o?.stem === "boolean") $("rouge-stemmer").checked = shared.o.stem;
    renderDiff();
    updatePinInfo();
    offerModels(modelList(shared.m), shared.c, "This link scored with");
    scoreNow();
    // Applied once: a reload keeps the edits made since (saved like any visit).
    const rest = new URLSearchParams(location.hash.slice(1));
    rest.delete("pair");
    history.replaceState(null, "", `${location.pathname}${location.search}${rest.size ? `#${rest}` : ""}`);
  };
  // A link pasted into the address bar of an open page changes only the hash.
  window.addEventListener("hashchange", () => {
    const pasted = pairFromHash();
    if (pasted) applyShared(pasted);
  });
  const shared = pairFromHash();
  if (shared) {
    applyShared(shared);
  } else if (saved) {
    fields.source.value = saved.source;
    fields.reference.value = saved.reference;
    fields.hypothesis.value = saved.hypothesis;
    // A suite link's stemmer (applied already, by the suite panel) wins over the last visit's.
    if (!linkedStemmer) $("rouge-stemmer").checked = Boolean(saved.rougeStemmer);
    select.value = saved.example;
    state.pinned = saved.pinned;
    state.edits = linkedEdits(saved.edits, fields.hypothesis.value);
    ({ undo: state.undo, redo: state.redo } = loadHistory());
    updateHistoryButtons();
    renderDiff();
    updatePinInfo();
    offerModels(modelList(saved.models), saved.cards, "Your last visit used");
    scoreNow();
  } else {
    select.value = EXAMPLES[0].id;
    loadExample(EXAMPLES[0].id);
  }

  for (const el of Object.values(fields)) {
    el.addEventListener("input", () => {
      if (select.value !== "custom" && el !== fields.hypothesis) select.value = "custom";
      if (el === fields.hypothesis && state.edits.length) {
        // Typed edits move the text under the marks: drop them.
        state.edits = [];
        renderDiff();
      }
      // Model passes start now (in their worker); the lexical scores follow in this frame.
      document.dispatchEvent(new CustomEvent("blindspot:texts"));
      schedule();
    });
  }
  // A reload or a closed tab keeps what was typed since the last pass.
  const saveUnsaved = () => {
    if (state.unsaved) save();
  };
  addEventListener("pagehide", saveUnsaved);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") saveUnsaved();
  });
  $("apply-injection").addEventListener("click", applyInjection);
  for (const id of ["injection", "level", "seed"]) $(id).addEventListener("change", save);
  $("seed").addEventListener("input", save);
  $("sweep-injection").addEventListener("click", runSweep);
  $("injection-stop").addEventListener("click", stopInjection);
  $("sweep-close").addEventListener("click", () => { $("sweep").hidden = true; });
  $("undo").addEventListener("click", () => stepHistory(state.undo, state.redo));
  $("redo").addEventListener("click", () => stepHistory(state.redo, state.undo));
  select.addEventListener("change", () => loadExample(select.value));
  $("rouge-stemmer").addEventListener("change", scoreNow);
  $("pin").addEventListener("click", pin);
  $("copy-link").addEventListener("click", async () => {
    const url = `${location.href.split("#")[0]}#pair=${encodePair()}`;
    $("copy-link").dataset.url = url;
    // The texts travel in the address: past about 32 KB chat apps and some
    // browsers cut it, and the link would open other texts.
    const long = url.length > LONG_LINK ? ` It is ${Math.round(url.length / 1024)} KB long: some browsers and chat apps cut addresses past about 32 KB, so share the texts as files instead.` : "";
    // Said at once: the clipboard may wait for the browser's permission.
    $("copy-link-status").textContent = long ? `Copying the link…${long}` : "Copying the link…";
    $("copy-link-status").className = long ? "bad" : "muted";
    try {
      await navigator.clipboard.writeText(url);
      $("copy-link-status").textContent = `Link copied.${long}`;
    } catch {
      $("copy-link-status").textContent = long ? `This link is too long to show here.${long}` : "Copy this link: " + url;
    }
  });
  $("add-minilm").addEventListener("click", loadMiniLm);
  document.addEventListener("blindspot:model", (e) => {
    if (e.detail.kinds.includes("encoder") && !isNliModel(e.detail)) $("add-minilm").hidden = true;
    save();
  });
  document.addEventListener("blindspot:model-unloaded", () => {
    // The offer comes back once no BERTScore encoder is left.
    $("add-minilm").hidden = hasBertScoreEncoder();
    save();
  });
  // A model card's model or option changed: kept for the next visit.
  $("score-cards").addEventListener("change", save);
  $("restore").addEventListener("click", restore);
  document.body.dataset.ready = "true";
  checkWebGpu(models);
}

main().catch((err) => {
  $("engine-status").textContent = `Engine failed to load: ${err.message ?? err}`;
  $("engine-status").className = "pill pill-bad";
});
