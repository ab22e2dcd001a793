// Text generation with a loaded model (GPT-2 continues, BART and T5 read a
// source): the options become the core's GenerateOptions, the worker's
// `generateText` streams the text token by token, Stop ends it after the
// current token. Below it, the self-evaluation test on the loaded causal
// LMs (the worker's `selfEval`). Inputs and options are kept across reloads.

import { fillModelSelect, trackLoadedModels } from "./loaded-models.js";

const $ = (id) => document.getElementById(id);
const STORAGE_KEY = "blindspot-generate-v1";
const FIELDS = [
  "gen-input", "gen-method", "gen-max", "gen-min", "gen-no-repeat", "gen-temperature", "gen-top-k", "gen-top-p", "gen-seed", "gen-beams", "gen-length-penalty",
  "selfeval-paragraphs", "selfeval-kind", "selfeval-dimension", "selfeval-beams", "selfeval-limit", "selfeval-words", "selfeval-max", "selfeval-seed",
];
/** Paragraphs longer than this are not saved (localStorage holds a few MB). */
const SAVE_LIMIT = 500_000;

/** modelName: the model picked last (kept across reloads). */
const view = { engine: null, models: null, running: false, stopping: false, modelName: null, selfEval: null };

/** Models that can write text: a causal LM, or an encoder-decoder with its head. */
const canGenerate = (m) => m.kinds.includes("causal-lm") || m.kinds.includes("seq2-seq-lm");

function status(text, kind = "muted") {
  const el = $("gen-status");
  el.textContent = text;
  el.className = kind;
}

function save() {
  const state = { model: view.modelName };
  for (const id of FIELDS) state[id] = $(id).value;
  if (state["selfeval-paragraphs"].length > SAVE_LIMIT) state["selfeval-paragraphs"] = "";
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(state));
  } catch {
    // Storage full or disabled: the options just are not kept.
  }
}

function restore() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "null");
    if (!saved) return;
    for (const id of FIELDS) if (typeof saved[id] === "string") $(id).value = saved[id];
    if (typeof saved.model === "string") view.modelName = saved.model;
  } catch {
    // A damaged entry: the defaults.
  }
}

function refreshMethod() {
  const method = $("gen-method").value;
  for (const el of document.querySelectorAll(".gen-sample")) el.hidden = method !== "sample";
  for (const el of document.querySelectorAll(".gen-beam")) el.hidden = method !== "beam";
}

function refreshButton() {
  $("gen-run").disabled = view.running || !$("gen-model").value;
  const kind = $("selfeval-kind").value;
  for (const el of document.querySelectorAll(".selfeval-beam")) el.hidden = kind !== "seq2-seq-lm";
  for (const el of document.querySelectorAll(".selfeval-rated")) el.hidden = kind !== "chat-lm";
  for (const el of document.querySelectorAll(".selfeval-words")) el.hidden = kind === "chat-lm";
  const usable = selfEvalModels().length;
  $("selfeval-run").disabled = view.running || usable < 2 || !$("selfeval-paragraphs").value.trim();
  const wanted = { "causal-lm": "causal LMs (GPT-2)", "seq2-seq-lm": "encoder-decoders (BART, T5)", "chat-lm": "instruction models (with a chat template)" }[kind];
  $("selfeval-run").title = usable < 2 ? `Load two or more ${wanted} above` : "";
  const n = $("selfeval-paragraphs").value.split("\n").filter((l) => l.trim()).length;
  $("selfeval-count").textContent = `${n} paragraph${n === 1 ? "" : "s"}`;
}

/** The loaded models of the kind the self-evaluation picks (a run's models read and write alike). */
function selfEvalModels() {
  const kind = $("selfeval-kind").value;
  return [...view.models.values()].filter((m) => m.kinds.includes(kind));
}

function refreshModels() {
  const usable = [...view.models.values()].filter(canGenerate);
  const remembered = usable.filter((m) => m.name === view.modelName).reverse();
  fillModelSelect($("gen-model"), usable, "load a GPT-2, BART or T5 above", remembered);
  refreshButton();
}

/** A whole number from a field, or an error naming it. */
function number(id, name, { min = -Infinity, max = Infinity, integer = false } = {}) {
  const v = Number($(id).value);
  if ($(id).value.trim() === "" || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    const range = max < Infinity ? `${min} to ${max}` : `at least ${min}`;
    throw new Error(`${name} must be ${integer ? "a whole number" : "a number"}, ${range}`);
  }
  return v;
}

/** The core's GenerateOptions from the fields (the core checks them again). */
function options() {
  const method = $("gen-method").value;
  const decoding =
    method === "sample"
      ? {
          method,
          temperature: number("gen-temperature", "Temperature", { min: 1e-6 }),
          top_k: number("gen-top-k", "Top-k", { min: 0, integer: true }),
          top_p: number("gen-top-p", "Top-p", { min: 1e-6, max: 1 }),
          seed: number("gen-seed", "Seed", { min: 0, max: Number.MAX_SAFE_INTEGER, integer: true }),
        }
      : method === "beam"
        ? { method, beams: number("gen-beams", "Beams", { min: 1, max: 64, integer: true }), length_penalty: number("gen-length-penalty", "Length penalty") }
        : { method: "greedy" };
  return {
    max_new_tokens: number("gen-max", "New tokens", { min: 1, max: 1024, integer: true }),
    min_new_tokens: number("gen-min", "At least", { min: 0, max: 1024, integer: true }),
    no_repeat_ngram_size: number("gen-no-repeat", "No repeated n-grams of", { min: 0, max: 64, integer: true }),
    decoding,
    stop_at_eos: true,
  };
}

const ENDS = { eos: "the model ended it", length: "the token limit", "model-limit": "the model's positions ran out", stopped: "stopped" };

async function run() {
  if (view.running) return;
  const handle = Number($("gen-model").value);
  let opts;
  try {
    opts = options();
  } catch (err) {
    status(err.message, "bad");
    return;
  }
  const input = $("gen-input").value;
  view.running = true;
  view.stopping = false;
  refreshButton();
  $("gen-use").disabled = true;
  $("gen-output").value = "";
  const bar = $("gen-progress");
  bar.hidden = false;
  bar.max = opts.max_new_tokens;
  bar.value = 0;
  $("gen-stop").disabled = false;
  const started = performance.now();
  status("Generating…");
  try {
    const out = await view.engine.generateText(handle, input, opts, (text, tokens) => {
      $("gen-output").value = text;
      bar.value = tokens;
      if (!view.stopping) status(`Generating: ${tokens} token${tokens === 1 ? "" : "s"}…`);
    });
    $("gen-output").value = out.text;
    const seconds = (performance.now() - started) / 1000;
    const n = out.tokens.length;
    status(`${n} token${n === 1 ? "" : "s"} in ${seconds.toFixed(1)} s (${(n / Math.max(seconds, 1e-3)).toFixed(1)} tokens/s); ended: ${ENDS[out.end] ?? out.end}; log-probability ${out.log_prob.toFixed(2)}.`);
    $("gen-use").disabled = out.text.trim() === "";
  } catch (err) {
    status(String(err.message ?? err), "bad");
  } finally {
    view.running = false;
    bar.hidden = true;
    $("gen-stop").disabled = true;
    refreshButton();
  }
}

async function stop() {
  if (!view.running) return;
  view.stopping = true;
  $("gen-stop").disabled = true;
  status("Stopping after this token…");
  try {
    await view.engine.stopGeneration();
  } catch (err) {
    status(`Could not stop: ${err.message ?? err}`, "bad");
  }
}

/** The generated text becomes the hypothesis, scored as if typed. */
function useAsHypothesis() {
  const hyp = $("hypothesis");
  hyp.value = $("gen-output").value;
  hyp.dispatchEvent(new Event("input", { bubbles: true }));
  hyp.scrollIntoView({ block: "center" });
}

// --- Self-evaluation ---------------------------------------------------------

function selfEvalStatus(text, kind = "muted") {
  const el = $("selfeval-status");
  el.textContent = text;
  el.className = kind;
}

/** The evaluator x generator table, each evaluator's own texts marked, then the findings. */
function showSelfEval(report) {
  const box = $("selfeval-result");
  const names = report.models.map((m) => m.name);
  const table = document.createElement("table");
  table.className = "matrix";
  const head = table.createTHead().insertRow();
  head.insertCell().textContent = "evaluator \\ generator";
  for (const n of names) head.insertCell().textContent = n;
  const body = table.createTBody();
  report.matrix.forEach((row, e) => {
    const tr = body.insertRow();
    tr.insertCell().textContent = names[e];
    row.forEach((v, g) => {
      const td = tr.insertCell();
      td.textContent = v == null ? "–" : v.toFixed(2);
      if (e === g) td.className = "own";
      td.dataset.raw = v ?? "";
    });
  });
  const caption = table.createCaption();
  // The core says what the matrix holds.
  caption.textContent = `${report.measure}, mean over ${report.prompts.length} prompts (${report.higher_is_better ? "higher" : "lower"} is better; the diagonal is each evaluator's own texts).`;
  const list = document.createElement("ul");
  for (const f of report.findings) {
    const li = document.createElement("li");
    li.dataset.biased = String(f.biased);
    li.textContent = `${names[f.evaluator]} ${f.evaluator_prefers_own ? "prefers" : "does not prefer"} its own texts to ${names[f.larger]}'s; the judge, ${names[f.judge]}, ${f.judge_prefers_larger ? "prefers" : "does not prefer"} ${names[f.larger]}'s${f.biased ? ": self-preference" : ""}.`;
    list.append(li);
  }
  const verdict = document.createElement("p");
  verdict.dataset.role = "verdict";
  verdict.textContent = report.biased
    ? "Verdict: fail. An evaluator prefers its own texts against an independent judge."
    : report.findings.length
      ? "Verdict: pass. No evaluator prefers its own texts against the judge."
      : "No finding: the test needs an evaluator, a larger generator and a third model as the judge.";
  box.replaceChildren(table, list, verdict);
  box.hidden = false;
}

async function runSelfEval() {
  if (view.running) return;
  const kind = $("selfeval-kind").value;
  const seq2seq = kind === "seq2-seq-lm";
  const handles = selfEvalModels().map((m) => m.handle);
  let options, limit;
  try {
    limit = number("selfeval-limit", "Prompts", { min: 1, max: 500, integer: true });
    options = {
      prompt_words: number("selfeval-words", "Prompt words", { min: 1, integer: true }),
      max_new_tokens: number("selfeval-max", "New tokens", { min: 1, max: 1024, integer: true }),
      top_k: 50,
      seed: number("selfeval-seed", "Seed", { min: 0, max: Number.MAX_SAFE_INTEGER, integer: true }),
      beams: seq2seq ? number("selfeval-beams", "Beams", { min: 1, max: 64, integer: true }) : 5,
      evaluation: kind === "chat-lm" ? view.selfEval.judged : view.selfEval.perplexity,
      dimension: $("selfeval-dimension").value,
    };
  } catch (err) {
    selfEvalStatus(err.message, "bad");
    return;
  }
  view.running = true;
  view.stopping = false;
  refreshButton();
  const bar = $("selfeval-progress");
  bar.hidden = false;
  bar.removeAttribute("value");
  $("selfeval-stop").disabled = false;
  selfEvalStatus("Generating…");
  try {
    const report = await view.engine.selfEval(handles, $("selfeval-paragraphs").value, limit, options, null, (done, total) => {
      bar.max = total;
      bar.value = done;
      if (!view.stopping) selfEvalStatus(`Generating and scoring: ${done} / ${total}…`);
    });
    showSelfEval(report);
    selfEvalStatus(`${report.models.length} models, ${report.prompts.length} prompts, ${report.texts.length} texts.`);
  } catch (err) {
    const message = String(err.message ?? err);
    selfEvalStatus(view.stopping && /stopped/.test(message) ? "Stopped: no matrix (it needs every text scored)." : message, view.stopping ? "muted" : "bad");
  } finally {
    view.running = false;
    bar.hidden = true;
    $("selfeval-stop").disabled = true;
    refreshButton();
  }
}

async function stopSelfEval() {
  if (!view.running) return;
  view.stopping = true;
  $("selfeval-stop").disabled = true;
  selfEvalStatus("Stopping…");
  await view.engine.stopGeneration();
}

/** Wires the Generate section to the model engine (models come from models.js's events). */
export function initGenerate(engine, wasm) {
  view.engine = engine;
  // The test's measures and G-Eval's dimensions, as the core lists them.
  view.selfEval = wasm.selfEvalChoices();
  for (const d of view.selfEval.dimensions) $("selfeval-dimension").append(new Option(d.label, d.value));
  view.models = trackLoadedModels(refreshModels);
  restore();
  refreshMethod();
  for (const id of FIELDS) {
    $(id).addEventListener("input", save);
    $(id).addEventListener("change", save);
  }
  $("gen-method").addEventListener("change", refreshMethod);
  $("gen-model").addEventListener("change", () => {
    view.modelName = view.models.get(Number($("gen-model").value))?.name ?? view.modelName;
    save();
  });
  $("gen-run").addEventListener("click", run);
  $("gen-stop").addEventListener("click", stop);
  $("gen-use").addEventListener("click", useAsHypothesis);
  $("selfeval-paragraphs").addEventListener("input", refreshButton);
  $("selfeval-kind").addEventListener("change", refreshButton);
  $("selfeval-file").addEventListener("change", async (e) => {
    const file = e.target.files?.[0];
    if (!file) return;
    try {
      $("selfeval-paragraphs").value = await file.text();
    } catch (err) {
      selfEvalStatus(`Could not read ${file.name}: ${err.message ?? err}`, "bad");
      return;
    }
    save();
    refreshButton();
  });
  $("selfeval-run").addEventListener("click", runSelfEval);
  $("selfeval-stop").addEventListener("click", stopSelfEval);
  refreshButton();
}
