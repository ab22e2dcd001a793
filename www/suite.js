// The stress-suite view: pick a dataset file, injections and metrics, run the
// suite in a Web Worker (progress, ETA, cancel), and read the report card.
// Every number comes from the wasm core (src/stress/suite.rs), the same
// runner as `blindspot stress`.

import { sweepChart } from "./sweep.js";
import { finished, keptReport } from "./kept-report.js";
import { download as save } from "./export.js";
import { lexicalSpecs, modelSpecs } from "./plm-scores.js";
import { isCached, loadedMaskedLm, loadedModel } from "./models.js";

const $ = (id) => document.getElementById(id);
/** The injection families, from the core (`injectionFamilies`), once the panel is built. */
let FAMILIES = [];

/** Where the panel's choices (format, families, seeds, first N) are kept across visits. */
const STORAGE_KEY = "blindspot.suite.v1";

function saveSettings() {
  const settings = {
    format: $("suite-format").value,
    families: FAMILIES.filter((f) => $(`suite-family-${f}`).checked),
    seeds: $("suite-seeds").value,
    limit: $("suite-limit").value,
    openEnded: $("suite-open-ended").checked,
  };
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(settings));
  } catch {
    // Storage full or disabled: the panel still works.
  }
}

/** The last finished run's report, kept across visits. */
const kept = keptReport("blindspot.suite-report.v1");

/** Shows the report the last visit kept, read and checked by the core (`SuiteReport::from_json`). */
function restoreReport() {
  kept.restore(
    (json) => suite.wasm.readSuiteReport(json),
    ({ report, csv }, entry) => {
      suite.report = report;
      suite.csv = csv;
      renderCard();
      $("suite-export").hidden = false;
      setStatus(`The last run's report ${finished(entry, report.tool, suite.wasm.version())}: ${count(report.tests.length, "test")} over ` +
        `${count(report.items, "item")} of ${report.dataset}. Choose a dataset file to run again.`);
    },
    (why) => {
      suite.report = null;
      suite.csv = null;
      $("suite-card").replaceChildren();
      $("suite-export").hidden = true;
      setStatus(`The last run's report could not be read back, and was dropped (${why}). Choose a dataset file.`, "bad");
    },
  );
}

function restoreSettings() {
  let s;
  try {
    s = JSON.parse(localStorage.getItem(STORAGE_KEY));
  } catch {
    return; // a damaged entry: the defaults
  }
  if (!s) return;
  if ([...$("suite-format").options].some((o) => o.value === s.format)) $("suite-format").value = s.format;
  if (Array.isArray(s.families)) for (const f of FAMILIES) $(`suite-family-${f}`).checked = s.families.includes(f);
  // Numbers come back only where the run would take them (a damaged entry keeps the defaults).
  if (typeof s.seeds === "string" && seedsOf(s.seeds) !== null) $("suite-seeds").value = s.seeds;
  if (typeof s.limit === "string" && limitOf(s.limit) !== undefined) $("suite-limit").value = s.limit;
  if (typeof s.openEnded === "boolean") $("suite-open-ended").checked = s.openEnded;
}

const suite = {
  worker: null, modelRun: 0, runs: 0, stopping: false, checking: false, file: null, usable: false, report: null, csv: null, started: 0,
  wasm: null, engine: null, registry: [], lexicalRegistry: [], injections: [], verdicts: {},
};

/** The URLs of the engine's JS glue and wasm, as Trunk linked them. */
export function engineUrls() {
  const glue = document.querySelector('link[rel="modulepreload"][href*="blindspot"]');
  const wasm = document.querySelector('link[rel="preload"][href$=".wasm"]');
  if (!glue || !wasm) throw new Error("cannot find the engine's files in this page to start a worker");
  return { glue: new URL(glue.getAttribute("href"), location.href).href, wasm: new URL(wasm.getAttribute("href"), location.href).href };
}

function setStatus(text, kind = "muted") {
  const el = $("suite-status");
  el.textContent = text;
  el.className = kind;
}

async function readFile(file) {
  try {
    suite.file = { name: file.name, text: await file.text() };
  } catch (err) {
    setStatus(`Could not read ${file.name}: ${err.message ?? err}`, "bad");
    return;
  }
  inspect();
}

/** True while a suite runs, in its own worker or in the model worker. */
const running = () => Boolean(suite.worker || suite.modelRun || suite.checking);

function inspect() {
  if (!suite.file) return;
  try {
    const summary = suite.wasm.inspectDataset($("suite-format").value, suite.file.text);
    const skipped = summary.problems.slice(0, 3).map((p) => `line ${p.line}: ${p.message}`).join("; ");
    const more = summary.problems.length > 3 ? ` (and ${summary.problems.length - 3} more)` : "";
    setStatus(`${suite.file.name}: ${count(summary.items, "item")}` +
      (summary.problems.length ? `; ${count(summary.problems.length, "row")} skipped: ${skipped}${more}` : ""),
      summary.problems.length ? "bad" : "muted");
    suite.usable = summary.items > 0;
    suite.items = summary.items;
    // A running suite keeps Run off until it ends (a second run would share the model worker).
    $("suite-run").disabled = !suite.usable || running();
  } catch (err) {
    setStatus(String(err.message ?? err), "bad");
    suite.usable = false;
    $("suite-run").disabled = true;
  }
}

function selectedInjections() {
  const families = FAMILIES.filter((f) => $(`suite-family-${f}`).checked);
  return suite.injections.filter((i) => families.includes(i.family)).map((i) => i.id);
}

/**
 * A file of the site as a Blob, fetched once (the browser caches it too; a
 * failed fetch is retried next time). A Blob goes to a worker without being
 * copied on this thread. `what` names the file in the error.
 */
function siteFile(path, what = path) {
  const files = (siteFile.files ??= new Map());
  if (!files.has(path)) {
    const blob = fetch(path).then(async (response) => {
      if (!response.ok) throw new Error(`could not load ${what} (HTTP ${response.status})`);
      return response.blob();
    });
    blob.catch(() => files.delete(path));
    files.set(path, blob);
  }
  return files.get(path);
}

/** GPT-2's vocabulary files (copied into the site by Trunk) as Blobs: a suite worker reads them itself. */
async function gpt2Blobs() {
  const [encoder, vocab] = await Promise.all([siteFile("tokenizers/gpt2/encoder.json"), siteFile("tokenizers/gpt2/vocab.bpe")]);
  return { encoder, vocab };
}

/**
 * GPT-2's vocabulary files for `engine`: as Blobs for the model worker, which
 * reads them itself (model-worker.js; no 1.5 MB of strings cloned on this
 * thread), as text for the page's own wasm.
 */
export async function gpt2For(engine) {
  const blobs = await gpt2Blobs();
  if (engine.where === "worker") return blobs;
  const [encoder, vocab] = await Promise.all([blobs.encoder.text(), blobs.vocab.text()]);
  return { encoder, vocab };
}

/**
 * Loads GPT-2's tokenizer and the tagger into `engine` (the page's wasm, or
 * the model engine, whose calls return promises) where asked and missing;
 * `say(text)` tells the user what is being loaded.
 */
export async function loadInjectionNeeds(engine, { tokenizer = false, tagger = false }, say = () => {}) {
  if (tokenizer && !(await engine.hasLmTokenizer())) {
    say("Loading the GPT-2 tokenizer…");
    const { encoder, vocab } = await gpt2For(engine);
    await engine.loadGpt2Tokenizer(encoder, vocab);
  }
  if (tagger && !(await engine.hasTagger())) {
    say("Loading the part-of-speech tagger (6.4 MB, once)…");
    // The model worker takes the Blob (model-worker.js reads it there): no 6.4 MB copy on this thread.
    await engine.loadTagger(engine.where === "worker" ? await taggerFile() : await taggerWeights());
  }
}

/** The part-of-speech tagger's weights (spaCy en_core_web_sm, 6.4 MB) as a Blob. */
const taggerFile = () => siteFile("tagger/en_core_web_sm.safetensors", "the tagger's weights");

/** The tagger's weights as bytes. */
async function taggerWeights() {
  return new Uint8Array(await (await taggerFile()).arrayBuffer());
}

/** A dataset's text as a Blob, made once per dataset (a UTF-8 copy of it). */
function datasetBlob(text) {
  if (datasetBlob.text !== text) Object.assign(datasetBlob, { text, blob: new Blob([text]) });
  return datasetBlob.blob;
}

/**
 * The start message of a suite worker, less its shard: the engine's files,
 * the request without its text, and the dataset's text (a Blob made once
 * per dataset), GPT-2's vocabulary and the tagger's weights as Blobs, which reach a worker
 * without a copy on this thread (posted as a string and an array, 9 MB for
 * WMT21, they took about 30 ms of this thread for two workers).
 */
async function workerStart(request, { needsTokenizer, needsTagger }) {
  const { text, ...rest } = request;
  return {
    ...engineUrls(), request: rest, dataset: datasetBlob(text),
    tokenizer: needsTokenizer ? await gpt2Blobs() : null,
    tagger: needsTagger ? await taggerFile() : null,
  };
}

/** The seeds a field's text asks for (empty: 5), or null where the run would refuse it. */
function seedsOf(text) {
  const t = String(text).trim();
  const n = t === "" ? 5 : Number(t);
  return Number.isInteger(n) && n >= 1 && n <= 20 ? n : null;
}

/** The item limit a field's text asks for (empty: every item, null), or undefined where the run would refuse it. */
function limitOf(text) {
  const t = String(text).trim();
  if (t === "") return null;
  const n = Number(t);
  return Number.isInteger(n) && n >= 1 ? n : undefined;
}

/** "1 item", "3 items". */
export const count = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

async function run() {
  const injections = selectedInjections();
  if (!injections.length) return setStatus("Choose at least one family of injections.", "bad");
  const limit = limitOf($("suite-limit").value);
  if (limit === undefined) {
    return setStatus(`"First N items" must be a whole number from 1 (empty: every item), not ${$("suite-limit").value.trim()}.`, "bad");
  }
  const seeds = seedsOf($("suite-seeds").value);
  if (seeds === null) {
    return setStatus(`Seeds must be a whole number from 1 to 20 (empty: 5), not ${$("suite-seeds").value.trim()}.`, "bad");
  }
  cancel();
  const chosen = suite.injections.filter((i) => injections.includes(i.id));
  const needsTokenizer = chosen.some((i) => i.needs_lm_tokenizer);
  const needsTagger = chosen.some((i) => i.needs_tagger);
  const request = {
    dataset: suite.file.name,
    format: $("suite-format").value,
    text: suite.file.text,
    limit,
    config: {
      injections,
      metrics: suite.lexicalRegistry.map((m) => m.id),
      seeds,
      rouge_stemmer: $("rouge-stemmer").checked,
      open_ended: $("suite-open-ended").checked,
    },
  };
  suite.report = null;
  suite.csv = null;
  kept.forget();
  $("suite-card").replaceChildren();
  $("suite-curves").replaceChildren();
  $("suite-export").hidden = true;
  $("suite-run").disabled = true;
  $("suite-cancel").disabled = false;
  $("suite-progress").hidden = false;
  $("suite-progress").value = 0;
  suite.started = performance.now();
  const models = modelSpecs();
  // BERT-diverge asks the newest loaded masked LM, in the model worker (without one it is skipped, as the card says).
  const mlm = chosen.some((i) => i.needs_masked_lm) ? loadedMaskedLm() : null;
  if (mlm) request.maskedLm = mlm.name;
  const items = Math.min(suite.items ?? 0, limit ?? Infinity);
  if (models.length || mlm) {
    const specs = [...lexicalSpecs(suite.wasm, suite.registry), ...models];
    suite.checking = true;
    const onCpu = mlm ? null : await cpuShards(specs, models, items);
    if (!suite.checking) return; // cancelled while the model cache was checked
    suite.checking = false;
    if (onCpu) {
      await runShards({ ...request, specs }, onCpu.count, { needsTokenizer, needsTagger, tests: injections.length, models: onCpu.models });
      return;
    }
    await runWithModels(request, specs, { needsTokenizer, needsTagger, tests: injections.length, modelMetrics: models.length });
    return;
  }
  const shards = shardCount(items);
  if (shards > 1) {
    await runShards(request, shards, { needsTokenizer, needsTagger, tests: injections.length });
    return;
  }
  setStatus("Starting the engine in a worker…");
  const worker = new Worker("suite-worker.js", { type: "module" });
  suite.worker = worker;
  worker.onmessage = ({ data }) => {
    if (data.type === "progress") {
      showProgress(data.done, data.total, injections.length);
    } else if (data.type === "test") {
      suite.report = data.report;
      renderCard();
    } else if (data.type === "done") {
      done(data.report, data.csv, data.millis);
    } else if (data.type === "error") {
      finish(data.message, "bad");
    }
  };
  worker.onerror = (e) => finish(`The worker failed: ${e.message}`, "bad");
  try {
    worker.postMessage(await workerStart(request, { needsTokenizer, needsTagger }));
  } catch (err) {
    // A fetch that failed after this run was cancelled (and maybe another begun) ends nothing.
    if (suite.worker === worker) finish(String(err.message ?? err), "bad");
  }
}

/** Workers a run takes at most, and the fewest items each gets (lexical metrics alone, or with models). */
const MAX_WORKERS = 4;
const MIN_SHARD_ITEMS = 16;
const MIN_MODEL_SHARD_ITEMS = 4;

/** Workers for a run over `items` items: one per core, up to MAX_WORKERS, each with `least` items or more. */
function shardCount(items, least = MIN_SHARD_ITEMS) {
  const cores = navigator.hardwareConcurrency || 1;
  return Math.max(1, Math.min(cores, MAX_WORKERS, Math.floor(items / least)));
}

/** The model copies of a suite's shards stay within this many bytes in all. */
const SHARD_MODEL_BYTES = 1.5e9;

/**
 * Shards for a run with model-based metrics over `items` items: where every
 * model its `models` specs name runs on the CPU (the model worker's copy, so
 * each shard's copy computes the same way), is in this browser's model
 * cache (a shard never downloads), the core lets these `specs` shard
 * (MoverScore's idf weights read the whole set), and the copies fit in
 * SHARD_MODEL_BYTES at 4 bytes a parameter (an int8 load keeps its
 * embeddings in f32, and the attack's helpers count so too):
 * `{count, models: [{name, precision}]}`, else null (the run goes to the
 * model worker). WebGPU runs stay in the model worker, which keeps the GPU
 * busy alone.
 */
async function cpuShards(specs, models, items) {
  const names = [...new Set(models.map((m) => m.model))];
  const loaded = names.map(loadedModel);
  if (!loaded.length || loaded.some((m) => m?.backend !== "cpu")) return null;
  try {
    if (suite.wasm.suiteShardRefusal(specs)) return null;
  } catch {
    return null; // specs the core does not read: the model worker says why
  }
  const count = Math.min(shardCount(items, MIN_MODEL_SHARD_ITEMS), Math.floor(SHARD_MODEL_BYTES / loaded.reduce((sum, m) => sum + 4 * m.parameters, 0)));
  if (!(count > 1)) return null;
  const cached = await Promise.all(loaded.map((m) => isCached(m.name, m.precision).catch(() => false)));
  return cached.every(Boolean) ? { count, models: loaded.map((m) => ({ name: m.name, precision: m.precision })) } : null;
}

/**
 * A run in `count` workers side by side, each running one shard of the
 * items (the core's `--shard`), and one more worker that merges their tests
 * (a SuiteMerger) as every shard finishes one, so the card fills as before,
 * and gives at the end the report the unsharded run gives. Each shard sends
 * its tests to the merger on a MessageChannel of its own, past this thread.
 * With `models` ({name, precision}, on the CPU) each worker loads its own
 * copy of them first (from this browser's model cache), for the request's
 * `specs`; model scores then equal the unsharded run's up to rounding (a
 * shard pads other items together in a batch).
 */
async function runShards(request, count, { needsTokenizer, needsTagger, tests, models = [] }) {
  const copies = models.length ? `, each with its own copy of ${models.map((m) => m.name).join(" and ")} on the CPU` : "";
  setStatus(`Starting the engine in ${count} workers${copies}…`);
  const workers = Array.from({ length: count }, () => new Worker("suite-worker.js", { type: "module" }));
  const merger = new Worker("suite-worker.js", { type: "module" });
  const group = {
    terminate() {
      for (const w of [...workers, merger]) w.terminate();
    },
  };
  suite.worker = group;
  const fail = (message) => suite.worker === group && finish(message, "bad");
  const progress = workers.map(() => ({ done: 0, total: 0 }));
  let started;
  workers.forEach((worker, index) => {
    worker.onmessage = ({ data }) => {
      if (suite.worker !== group) return;
      if (data.type === "progress") {
        progress[index] = { done: data.done, total: data.total };
        // Every shard's total is known once each has reported.
        if (progress.every((p) => p.total > 0)) {
          showProgress(progress.reduce((a, p) => a + p.done, 0), progress.reduce((a, p) => a + p.total, 0), tests);
        }
      } else if (data.type === "error") {
        fail(data.message);
      }
    };
    worker.onerror = (e) => fail(`A worker failed: ${e.message ?? "it could not start"}`);
  });
  merger.onmessage = ({ data }) => {
    if (suite.worker !== group) return;
    if (data.type === "test") {
      suite.report = data.report;
      renderCard();
    } else if (data.type === "done") {
      done(data.report, data.csv, performance.now() - started, count);
    } else if (data.type === "error") {
      fail(data.message);
    }
  };
  merger.onerror = (e) => fail(`The merging worker failed: ${e.message ?? "it could not start"}`);
  const channels = workers.map(() => new MessageChannel());
  const ports = channels.map((c) => c.port2);
  merger.postMessage({ ...engineUrls(), merge: ports }, ports);
  try {
    const message = await workerStart(request, { needsTokenizer, needsTagger });
    if (suite.worker !== group) return; // cancelled while the files came
    started = performance.now();
    workers.forEach((w, index) => {
      const port = channels[index].port1;
      w.postMessage({ ...message, models, shard: { index, count }, port }, [port]);
    });
  } catch (err) {
    fail(String(err.message ?? err));
  }
}

/**
 * The run with every metric as `specs` (`modelMetrics` of them the
 * model-based ones whose cards are showing), or with BERT-diverge's masked
 * LM (`request.maskedLm`): in the model worker, where
 * the models are (the suite's own worker has none). Cancel asks it to stop
 * after its current batch.
 */
async function runWithModels(request, specs, { needsTokenizer, needsTagger, tests, modelMetrics }) {
  const engine = suite.engine;
  // This run's number: whatever a run that ended before reports is ignored.
  const run = ++suite.runs;
  suite.modelRun = run;
  suite.stopping = false;
  const current = () => suite.modelRun === run;
  const uses = [
    ...(modelMetrics ? [count(modelMetrics, "model-based metric")] : []),
    ...(request.maskedLm ? [`BERT-diverge's masked LM ${request.maskedLm}`] : []),
  ];
  const what = `Running with ${uses.join(" and ")} in the model worker…`;
  try {
    await loadInjectionNeeds(engine, { tokenizer: needsTokenizer, tagger: needsTagger }, (text) => current() && !suite.stopping && setStatus(text));
    // Cancelled while the tokenizer or tagger loaded: nothing started.
    if (suite.stopping) return finish("Cancelled.");
    setStatus(what);
    const out = await engine.stressSuiteModels({ ...request, specs }, (doneSteps, total, report) => {
      if (!current()) return;
      if (report) {
        suite.report = report;
        renderCard();
      } else if (!suite.stopping) {
        showProgress(doneSteps, total, tests);
      }
    });
    if (current()) done(out.report, out.csv, performance.now() - suite.started);
  } catch (err) {
    if (!current()) return;
    if (suite.stopping && err.message === "cancelled") {
      finish(cancelled());
    } else {
      finish(String(err.message ?? err), "bad");
    }
  }
}

function showProgress(doneSteps, total, tests) {
  const fraction = doneSteps / total;
  $("suite-progress").value = fraction;
  const elapsed = (performance.now() - suite.started) / 1000;
  const eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : NaN;
  const finished = suite.report?.tests.length ?? 0;
  setStatus(`${finished} of ${tests} tests done · ${(100 * fraction).toFixed(0)}%` +
    ` · ${elapsed.toFixed(0)} s elapsed${Number.isFinite(eta) ? ` · about ${eta.toFixed(0)} s left` : ""}`);
}

function done(report, csv, millis, workers = 1) {
  suite.report = report;
  suite.csv = csv;
  renderCard();
  const where = workers > 1 ? ` (${workers} workers side by side)` : "";
  finish(`Done: ${count(report.tests.length, "test")} over ${count(report.items, "item")} in ${(millis / 1000).toFixed(1)} s${where}.${kept.keep(report)}`);
  $("suite-export").hidden = false;
  $("suite-result").dataset.millis = String(millis);
}

function finish(message, kind = "muted") {
  if (suite.worker) suite.worker.terminate();
  suite.worker = null;
  suite.modelRun = 0;
  // Run again only on a file that can run (it may have been changed during the run).
  $("suite-run").disabled = !suite.usable;
  $("suite-cancel").disabled = true;
  $("suite-progress").hidden = true;
  setStatus(message, kind);
}

/** What a cancelled run says: the tests it finished stay on the card. */
function cancelled() {
  const finished = suite.report?.tests.length ?? 0;
  return finished ? `Cancelled after ${count(finished, "finished test")} (shown).` : "Cancelled.";
}

function cancel() {
  if (suite.checking) {
    suite.checking = false;
    finish("Cancelled.");
  }
  if (suite.worker) finish(cancelled());
  if (suite.modelRun && !suite.stopping) {
    suite.stopping = true;
    $("suite-cancel").disabled = true;
    setStatus("Cancelling after the current batch…");
    const run = suite.modelRun;
    suite.engine.stopSuite().catch((err) => suite.modelRun === run && setStatus(`Could not cancel: ${err.message ?? err}`, "bad"));
  }
}

/** The report card: one row per injection, one column per metric. */
function renderCard() {
  const report = suite.report;
  const table = document.createElement("table");
  table.className = "card-grid";
  const head = table.createTHead().insertRow();
  head.append(Object.assign(document.createElement("th"), { textContent: "injection" }));
  for (const m of report.metrics) head.append(Object.assign(document.createElement("th"), { textContent: m.name, title: m.signature }));
  const body = table.createTBody();
  for (const test of report.tests) {
    const row = body.insertRow();
    row.dataset.injection = test.injection;
    row.append(Object.assign(document.createElement("th"), { textContent: test.injection, scope: "row" }));
    if (test.skipped) {
      const cell = row.insertCell();
      cell.colSpan = report.metrics.length;
      cell.className = "skipped";
      cell.textContent = `skipped: ${test.skipped}`;
      continue;
    }
    report.metrics.forEach((m, k) => {
      const cell = row.insertCell();
      const button = document.createElement("button");
      button.type = "button";
      button.className = `verdict ${test.verdicts[k]}`;
      button.textContent = suite.verdicts[test.verdicts[k]].mark;
      button.dataset.metric = m.id;
      button.title = `${test.injection} · ${m.name}: show the curve`;
      // Screen readers hear the test and the metric, not only the mark.
      button.setAttribute("aria-label", `${test.injection}, ${m.name}: ${suite.verdicts[test.verdicts[k]].mark}; show the curve`);
      button.addEventListener("click", () => showCurve(test, k));
      cell.append(button);
    });
  }
  $("suite-card").replaceChildren(table);
}

function showCurve(test, k) {
  const report = suite.report;
  const metric = report.metrics[k];
  const info = suite.registry.find((m) => m.id === metric.id) ?? { id: metric.id, name: metric.name };
  const fmt = (v) => v.toFixed(info.digits ?? 4);
  const points = test.levels.map((l) => ({ x: l.noise_ratio.mean, y: l.scores[k].mean, sd: l.scores[k].std }));
  const figure = sweepChart(info, report.base[k], points, test.verdicts[k], fmt, test.injection);
  const note = document.createElement("p");
  note.className = "muted";
  note.textContent = `${test.injection}: levels ${test.levels.map((l) => l.level).join(", ")}; ` +
    `${report.config.seeds} seeds; shaded band: ±1 std over seeds.`;
  $("suite-curves").replaceChildren(figure, note);
}

const download = (name, type, text) => save(new Blob([text], { type }), name);

/** The hash parameters a suite link sets (the rest of the hash, e.g. a lesson, stays). */
const SUITE_KEYS = ["suite", "format", "families", "seeds", "limit", "open", "stem", "sample", "data", "run"];

/**
 * The suite's configuration as URL hash parameters, every setting that
 * changes its numbers included (an empty item limit means all items); the
 * dataset travels as a URL if it has one, or as `sample=1` for the bundled
 * sample. Other parameters of the hash are kept.
 */
function configToHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  for (const key of SUITE_KEYS) params.delete(key);
  params.set("suite", "1");
  params.set("format", $("suite-format").value);
  params.set("families", FAMILIES.filter((f) => $(`suite-family-${f}`).checked).join(","));
  params.set("seeds", $("suite-seeds").value);
  params.set("limit", $("suite-limit").value);
  params.set("stem", $("rouge-stemmer").checked ? "1" : "0");
  if ($("suite-open-ended").checked) params.set("open", "1");
  if (suite.file?.url) params.set("data", suite.file.url);
  else if (suite.file?.sample) params.set("sample", "1");
  return `#${params}`;
}

/** Fetches a linked dataset, then runs the suite when `run` is set. */
async function fetchLinked(data, andRun) {
  try {
    setStatus(`Fetching ${data}…`);
    const response = await fetch(data);
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const name = data.startsWith("data:") ? "linked-dataset" : decodeURIComponent(new URL(data, location.href).pathname.split("/").pop());
    suite.file = { name, text: await response.text(), url: data };
    inspect();
    if (andRun && !$("suite-run").disabled) run();
  } catch (err) {
    // A refused address (the site's CSP, CORS, no network) is a TypeError without detail.
    const why = err instanceof TypeError
      ? "; the page may fetch only from this site, huggingface.co and data: links, and the server must allow it (CORS)"
      : "";
    setStatus(`Could not fetch the dataset from the link (${err.message ?? err}${why}).`, "bad");
  }
}

/**
 * Applies a configuration from the URL hash. A linked dataset (`data`) is
 * fetched, and run when `run=1`, only after the user confirms: the page says
 * which address it would fetch and what it would run first, so a link never
 * starts work by itself.
 */
function configFromHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (!params.has("suite")) return;
  const problems = [];
  if (params.has("format")) {
    const format = params.get("format");
    if ([...$("suite-format").options].some((o) => o.value === format)) $("suite-format").value = format;
    else problems.push(`unknown format "${format}"`);
  }
  if (params.has("families")) {
    const chosen = params.get("families").split(",");
    for (const f of FAMILIES) $(`suite-family-${f}`).checked = chosen.includes(f);
  }
  // Numbers the run would refuse stay as they were, and the status says so.
  const seeds = params.get("seeds");
  if (seeds !== null) {
    if (seedsOf(seeds) !== null) $("suite-seeds").value = seeds;
    else problems.push(`seeds "${seeds}" (1 to 20)`);
  }
  const limit = params.get("limit");
  if (limit !== null) {
    if (limitOf(limit) !== undefined) $("suite-limit").value = limit;
    else problems.push(`limit "${limit}" (a whole number from 1, or empty for all)`);
  }
  $("suite-open-ended").checked = params.get("open") === "1";
  if (params.has("stem")) {
    $("rouge-stemmer").checked = params.get("stem") === "1";
    $("rouge-stemmer").dispatchEvent(new Event("change"));
  }
  // Applied once, as a pair link is: the settings are kept as the panel's,
  // and a reload keeps the changes made since.
  saveSettings();
  const rest = new URLSearchParams(params);
  for (const key of SUITE_KEYS) rest.delete(key);
  history.replaceState(null, "", `${location.pathname}${location.search}${rest.size ? `#${rest}` : ""}`);
  const ignored = problems.length ? ` (ignored: ${problems.join(", ")})` : "";
  // The bundled sample: its status line says what was loaded.
  if (params.get("sample") === "1") return loadSample();
  const data = params.get("data");
  if (!data) return setStatus(`Configuration loaded from the link${ignored}; choose the dataset file.`, problems.length ? "bad" : "muted");
  const andRun = params.get("run") === "1";
  let where;
  try {
    where = data.startsWith("data:") ? "a dataset inside the link itself" : new URL(data, location.href).href;
  } catch {
    return setStatus(`The link names a dataset address that is not valid: ${data}`, "bad");
  }
  const box = $("suite-link-confirm");
  const families = FAMILIES.filter((f) => $(`suite-family-${f}`).checked).join(", ") || "no families";
  box.querySelector('[data-role="what"]').textContent =
    `This link asks to fetch ${where}` + (andRun
      ? ` and run the stress suite on it (${families}; ${$("suite-seeds").value} seeds${$("suite-limit").value ? `, first ${$("suite-limit").value} items` : ""}${$("suite-open-ended").checked ? ", open-ended texts" : ""}).`
      : " and load it as the suite's dataset.");
  const go = box.querySelector('[data-role="go"]');
  go.textContent = andRun ? "Fetch and run" : "Fetch";
  go.onclick = () => {
    box.hidden = true;
    fetchLinked(data, andRun);
  };
  box.querySelector('[data-role="dismiss"]').onclick = () => {
    box.hidden = true;
    setStatus("Linked dataset not fetched; choose a dataset file.");
  };
  box.hidden = false;
  setStatus("A link asks to fetch a dataset: confirm above.");
}

/** Takes the bundled sample of pairs as the suite's dataset. */
function loadSample() {
  const sample = suite.wasm.bundledSamples().find((s) => s.kind === "pairs");
  suite.file = { name: sample.file, text: suite.wasm.bundledSample("pairs"), sample: true };
  $("suite-format").value = "jsonl";
  inspect();
}

/** Wires the suite view once the engine is ready. */
export function initSuite(wasm, registry, injections, engine) {
  // One checkbox per injection family of the core; its default families checked.
  const families = wasm.injectionFamilies();
  FAMILIES = families.map((f) => f.id);
  $("suite-families").replaceChildren(...families.flatMap((f) => {
    const label = document.createElement("label");
    label.className = "check";
    const box = document.createElement("input");
    box.type = "checkbox";
    box.id = `suite-family-${f.id}`;
    box.checked = f.suiteDefault;
    label.append(box, ` ${f.label}`);
    return [label, " "];
  }));
  // How verdicts are shown comes from the core (src/stress).
  const verdicts = Object.fromEntries(wasm.metricChoices().verdicts.map((v) => [v.id, v]));
  Object.assign(suite, { wasm, engine, registry, lexicalRegistry: registry.filter((m) => !m.model), injections, verdicts });
  $("suite-file").addEventListener("change", (e) => e.target.files[0] && readFile(e.target.files[0]));
  const sample = wasm.bundledSamples().find((s) => s.kind === "pairs");
  $("suite-sample").title = sample.about;
  $("suite-sample").addEventListener("click", loadSample);
  const drop = $("suite-drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer.files[0]) readFile(e.dataTransfer.files[0]);
  });
  $("suite-format").addEventListener("change", inspect);
  $("suite-run").addEventListener("click", run);
  $("suite-cancel").addEventListener("click", cancel);
  $("suite-json").addEventListener("click", () =>
    download("blindspot-suite.json", "application/json", JSON.stringify(suite.report, null, 2)));
  $("suite-csv").addEventListener("click", () => download("blindspot-suite.csv", "text/csv", suite.csv));
  $("suite-link").addEventListener("click", async () => {
    const hash = configToHash();
    history.replaceState(null, "", hash);
    // The copied link is the suite's alone (not the lesson open here).
    const own = new URLSearchParams(hash.slice(1));
    for (const key of [...own.keys()]) if (!SUITE_KEYS.includes(key)) own.delete(key);
    try {
      await navigator.clipboard.writeText(`${location.href.split("#")[0]}#${own}`);
      setStatus("Link to this configuration copied (also in the address bar).");
    } catch {
      setStatus("The address bar now holds a link to this configuration.");
    }
  });
  restoreSettings();
  restoreReport();
  for (const id of ["suite-format", "suite-seeds", "suite-limit", "suite-open-ended", ...FAMILIES.map((f) => `suite-family-${f}`)]) {
    $(id).addEventListener("change", saveSettings);
  }
  configFromHash();
  // A link pasted into the address bar of an open page changes only the hash.
  window.addEventListener("hashchange", configFromHash);
  $("suite-html").addEventListener("click", () =>
    download("blindspot-report.html", "text/html", suite.wasm.suiteHtml(suite.report)));
}
