// The lessons view: the core's lessons (stress::lessons) as guided steps.
// A step runs in the model worker (runLessonStep): the core sets up the
// texts, applies the injection or runs the search, scores the metrics and
// checks the step's claim on those numbers; this file only shows them.
// Each step has its own link (#lesson=ID&step=N); arrows move between steps
// and "Present" shows one step per screen in large type.

import { download } from "./export.js";
import { newestEncoderFirst } from "./models.js";
import { gpt2For } from "./suite.js";

const $ = (id) => document.getElementById(id);

let engine = null;
let hooks = null;
let lessons = [];
let current = { lesson: -1, step: 0 };
let lastResult = null;
let workerHasGpt2Tokenizer = null; // a promise once the worker is given GPT-2's vocabulary
const loaded = new Map(); // handle -> model info

function lesson() {
  return lessons[current.lesson];
}

function step() {
  return lesson()?.steps[current.step];
}

function status(text, kind = "muted") {
  $("step-status").textContent = text;
  $("step-status").className = kind;
}

/** The address's hash with this step's lesson and step (other keys, e.g. a pair link, stay). */
function link() {
  const l = lesson();
  const params = new URLSearchParams(location.hash.slice(1));
  if (l) {
    params.set("lesson", l.id);
    params.set("step", String(current.step + 1));
  }
  return params.size ? `#${params}` : "";
}

function show() {
  const l = lesson();
  const s = step();
  for (const b of $("lesson-picker").children) b.setAttribute("aria-pressed", String(b.dataset.lesson === l?.id));
  if (!l) {
    $("lesson-step").hidden = true;
    return;
  }
  $("lesson-step").hidden = false;
  $("lesson-step").dataset.lesson = l.id;
  $("lesson-step").dataset.step = String(current.step);
  $("lesson-paper").textContent = `${l.paper} · step ${current.step + 1} of ${l.steps.length}` +
    (l.paperModel ? ` · the paper used ${l.paperModel}; offline the steps use ${offlineMetrics(l)}${offlineNote(l)}` : "");
  $("lesson-finding").textContent = l.finding;
  $("step-title").textContent = s.title;
  $("step-explain").textContent = s.explain;
  $("step-prev").disabled = current.step === 0 && current.lesson === 0;
  $("step-next").disabled = current.lesson === lessons.length - 1 && current.step === l.steps.length - 1;
  // A button disabled under the focus would drop it, and the arrows with it.
  if (document.activeElement?.disabled) $("lesson-step").focus({ preventScroll: true });
  $("step-result").hidden = true;
  // An audit step scores the bundled sample, not one pair: nothing to open.
  $("step-open").hidden = s.action.kind === "audit";
  $("step-load").hidden = true;
  $("step-export").disabled = true;
  lastResult = null;
  delete $("step-result").dataset.held;
  status("");
  history.replaceState(null, "", link());
}

/** Which of a lesson's steps need a model that is not bundled (each such step offers one). */
/** What the lesson's steps score with, in words (the core's `runsWith`). */
const offlineMetrics = (l) => l.runsWith;

function offlineNote(l) {
  const offers = l.steps.filter((st) => st.modelOffer);
  if (!offers.length) return "";
  return ` (${offers.length === 1 ? "one step needs" : `${offers.length} steps need`} ${offers[0].modelOffer})`;
}

function go(lessonIndex, stepIndex) {
  current = { lesson: lessonIndex, step: stepIndex };
  show();
}

function move(delta) {
  const l = lesson();
  if (!l) return go(0, 0);
  let { lesson: li, step: si } = current;
  si += delta;
  if (si < 0) {
    if (li === 0) return;
    li -= 1;
    si = lessons[li].steps.length - 1;
  } else if (si >= l.steps.length) {
    if (li === lessons.length - 1) return;
    li += 1;
    si = 0;
  }
  go(li, si);
}

/**
 * The newest loaded model BERTScore can run on, an encoder before an NLI
 * classifier (whose encoder runs BERTScore too, but is loaded for MENLI).
 */
function bertscoreModel() {
  return newestEncoderFirst([...loaded.values()].filter((m) => m.kinds.includes("encoder")))?.name;
}

/** The newest loaded NLI model. */
function nliModel() {
  return [...loaded.values()].reverse().find((m) => m.kinds.includes("nli"))?.name;
}

/** The newest loaded encoder-decoder (UniEval's evaluator). */
function seq2seqModel() {
  return [...loaded.values()].reverse().find((m) => m.kinds.includes("seq2-seq-lm"))?.name;
}

/** The newest loaded causal language model (GPT-PPL, MAUVE's GPT-2 features). */
function causalLmModel() {
  return [...loaded.values()].reverse().find((m) => m.kinds.includes("causal-lm"))?.name;
}

/** The newest loaded instruction model (a causal LM with a chat template): the LLM judges'. */
function judgeModel() {
  return [...loaded.values()].reverse().find((m) => m.kinds.includes("chat-lm"))?.name;
}

/** Shows the button that loads what the step misses: the bundled MiniLM, or the step's own offer. */
function offerLoad(message) {
  const button = $("step-load");
  const offer = /NLI model|causal language model|UniEval's evaluator|LLM judge/.test(message) ? step().modelOffer : /BERTScore model/.test(message) ? "minilm" : null;
  if (!offer) return;
  button.dataset.offer = offer;
  const size = offer === "minilm" ? null : hooks.registrySize(offer);
  button.textContent = offer === "minilm" ? "Load the bundled MiniLM" : `Load ${offer}${size ? ` (${size})` : ""}`;
  button.hidden = false;
}

/** A row's numbers with one precision: 2 decimals where any is 10 or more (BLEU, chrF), else 4. */
const rowFormat = (values) => {
  const digits = values.some((v) => Math.abs(v) >= 10) ? 2 : 4;
  return (v) => v.toFixed(digits);
};

function render(result) {
  const texts = $("step-texts");
  texts.replaceChildren(...result.texts.map(([label, text]) => {
    const p = document.createElement("p");
    const b = document.createElement("span");
    b.className = "label";
    b.textContent = `${label}:`;
    p.append(b, document.createTextNode(text));
    return p;
  }));
  const table = $("step-table");
  const head = document.createElement("tr");
  head.append(Object.assign(document.createElement("th"), { textContent: "metric" }));
  for (const [label] of result.texts) head.append(Object.assign(document.createElement("th"), { textContent: label }));
  const rows = result.rows.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.metric = r.metric;
    tr.append(Object.assign(document.createElement("th"), { textContent: r.name, title: r.signature }));
    const fmt = rowFormat(r.values);
    r.values.forEach((v) => {
      const td = document.createElement("td");
      td.textContent = fmt(v);
      td.dataset.raw = String(v);
      tr.append(td);
    });
    return tr;
  });
  table.replaceChildren(head, ...rows);
  const claim = $("step-claim");
  // Capitalised, unless it starts with a name spelt with capitals inside (chrF, BERTScore).
  const statement = result.claim.statement;
  const first = statement.split(/\s/, 1)[0];
  claim.textContent = /[A-Z]/.test(first) ? statement : statement.charAt(0).toUpperCase() + statement.slice(1);
  claim.className = `claim ${result.claim.held ? "held" : "not-held"}`;
  $("step-why").textContent = step().why;
  $("step-result").dataset.held = String(result.claim.held);
  $("step-result").hidden = false;
}

async function run() {
  const l = lesson();
  // One run at a time (Enter in presentation mode, a double click).
  if (!l || $("step-run").disabled) return;
  const at = { ...current };
  $("step-run").disabled = true;
  $("step-load").hidden = true;
  status({ attack: "Searching…", audit: "Auditing…" }[step().action.kind] ?? "Scoring…");
  try {
    // Positioned errors corrupt GPT-2 tokens: the worker gets GPT-2's vocabulary once.
    if (step().action.kind.startsWith("positioned")) {
      workerHasGpt2Tokenizer ??= gpt2For(engine).then(({ encoder, vocab }) => engine.loadGpt2Tokenizer(encoder, vocab));
      await workerHasGpt2Tokenizer.catch((err) => {
        workerHasGpt2Tokenizer = null;
        throw err;
      });
    }
    const result = await engine.runLessonStep(l.id, at.step, bertscoreModel(), nliModel(), causalLmModel(), seq2seqModel(), judgeModel());
    if (at.lesson !== current.lesson || at.step !== current.step) return; // moved on meanwhile
    render(result);
    lastResult = { at, result };
    $("step-export").disabled = false;
    status(result.claim.held ? "" : "On these numbers the claim does not hold.", result.claim.held ? "muted" : "warn");
  } catch (err) {
    if (at.lesson !== current.lesson || at.step !== current.step) return; // moved on meanwhile
    const message = String(err.message ?? err);
    status(message, "bad");
    offerLoad(message);
  } finally {
    $("step-run").disabled = false;
  }
}

function fromHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const id = params.get("lesson");
  const i = lessons.findIndex((l) => l.id === id);
  if (i < 0) return false;
  // A step number from a link: a whole number within the lesson, else its first step.
  const asked = Number(params.get("step"));
  const n = Number.isInteger(asked) ? Math.max(1, Math.min(lessons[i].steps.length, asked)) : 1;
  go(i, n - 1);
  // The arrows step through it from here on (they act where the lessons have the focus).
  $("lesson-step").focus({ preventScroll: true });
  return true;
}

function setPresenting(on) {
  document.body.classList.toggle("presenting", on);
  $("lesson-present").textContent = on ? "Leave presentation" : "Present";
  if (on && !lesson()) go(0, 0);
  if (on) $("lesson-step").focus();
}

export function initLessons(modelEngine, wasm, pageHooks) {
  engine = modelEngine;
  hooks = pageHooks;
  lessons = wasm.lessonRegistry();
  $("lesson-picker").replaceChildren(...lessons.map((l, i) => {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.lesson = l.id;
    b.textContent = `${i + 1}. ${l.title}`;
    b.addEventListener("click", () => go(i, 0));
    return b;
  }));
  $("step-prev").addEventListener("click", () => move(-1));
  $("step-next").addEventListener("click", () => move(1));
  $("step-run").addEventListener("click", run);
  $("step-open").addEventListener("click", () => {
    const t = step()?.texts;
    if (t) hooks.setTexts(t);
  });
  $("step-link").addEventListener("click", async () => {
    const url = location.href.split("#")[0] + link();
    try {
      await navigator.clipboard.writeText(url);
      status("Link copied.");
    } catch {
      status(url);
    }
  });
  $("step-load").addEventListener("click", (e) => {
    const offer = e.currentTarget.dataset.offer;
    if (offer === "minilm") hooks.loadMiniLm();
    else if (offer) hooks.loadRegistryModel(offer);
  });
  $("step-export").addEventListener("click", () => {
    if (!lastResult) return;
    const l = lessons[lastResult.at.lesson];
    const s = l.steps[lastResult.at.step];
    const data = {
      tool: `blindspot ${hooks.version}`,
      lesson: l.id,
      step: lastResult.at.step + 1,
      title: s.title,
      paper: l.paper,
      action: s.action,
      ...lastResult.result,
    };
    download(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }),
      `blindspot-lesson-${l.id}-step-${lastResult.at.step + 1}.json`);
  });
  $("lesson-present").addEventListener("click", () => setPresenting(!document.body.classList.contains("presenting")));
  document.addEventListener("keydown", (e) => {
    if (e.target.closest?.("input, textarea, select, [contenteditable]") || e.altKey || e.ctrlKey || e.metaKey) return;
    // Outside presentation mode only where the lessons have the focus: the
    // arrows elsewhere scroll the page's wide tables and maps.
    if (!document.body.classList.contains("presenting") && !(lesson() && e.target.closest?.("#lessons"))) return;
    if (e.key === "ArrowRight") move(1);
    else if (e.key === "ArrowLeft") move(-1);
    // Enter on a focused button presses it; elsewhere it runs the step, unless a run is going.
    else if (e.key === "Enter" && document.body.classList.contains("presenting") && !e.target.closest?.("button, a")) {
      if (!$("step-run").disabled) run();
    }
    else if (e.key === "Escape") setPresenting(false);
    else return;
    e.preventDefault();
  });
  document.addEventListener("blindspot:model", (e) => {
    for (const [handle, m] of loaded) if (m.name === e.detail.name) loaded.delete(handle);
    loaded.set(e.detail.handle, e.detail);
  });
  document.addEventListener("blindspot:model-unloaded", (e) => loaded.delete(e.detail.handle));
  // A restarted model engine has not been given GPT-2's vocabulary.
  document.addEventListener("blindspot:models-reset", () => { workerHasGpt2Tokenizer = null; });
  window.addEventListener("hashchange", fromHash);
  if (fromHash()) $("lessons").scrollIntoView();
}
