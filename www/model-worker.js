// Runs the language models off the main thread, so typing never waits for a
// model pass. model-engine.js posts {init: {glue, wasm}, methods} once, then
// {id, method, args} per call; the worker answers {id, value} or {id, error}.
// Calls interleave at the engine's awaits (GPU reads), as on the main thread.
//
// An attack may ask for helpers (attackPair's third argument, {workers}):
// score-helper.js workers, each with its own engine and a CPU copy of the
// metric's model, that score shares of each batch of candidates while this
// worker scores its own (wasm runs one thread per worker).

import { connect, startEngine } from "./worker-rpc.js";

/** Engine calls the page may make here (sent with init: model-engine.js's REMOTE list). */
let methods = new Set();
let engine = null;
let progressMarker = null;
let urls = null;

/** Loaded models by handle: the engine's model info ({name, backend, precision, parameters, ...}). */
const loaded = new Map();

/** The helpers' model copies stay within this many bytes in all (f32: 4 bytes a parameter). */
const HELPER_BYTES = 1.5e9;

/** Helpers idle this long (no attack running) are stopped, and their model copies freed. */
const HELPER_IDLE_MS = 120_000;
let idleTimer = null;

/** Started helpers: {worker, rpc, key (its model's, once asked), loading (Promise), ready, loaded, failed}. */
const helpers = [];

/** Why helpers cannot start here (one died before it ever loaded a model): none are started again. */
let helpersBroken = null;

const modelKey = (m) => `${m.name}\u0000${m.precision}`;

function retire(h, why) {
  h.failed ??= why;
  h.rpc.failAll(new Error(h.failed));
  h.worker.terminate();
}

/** Stops helpers from `from` on (the next attack starts them again, loading from the cache). */
function stopHelpers(from = 0) {
  for (const h of helpers.slice(from)) if (h) retire(h, "the scoring helper was stopped");
  helpers.length = Math.min(helpers.length, from);
}

function helper(i) {
  if (helpers[i] && !helpers[i].failed) return helpers[i];
  const worker = new Worker("score-helper.js", { type: "module" });
  const h = { worker, key: null, loading: null, ready: false, loaded: false, failed: null };
  // A helper that dies fails its waiting calls without taking this worker with it.
  h.rpc = connect(worker, {
    contain: true,
    died: (e) => {
      h.failed ??= `a scoring helper stopped: ${e.message ?? "unknown error"}`;
      if (!h.loaded) helpersBroken ??= h.failed;
      worker.terminate();
      return new Error(h.failed);
    },
  });
  worker.postMessage({ init: urls });
  helpers[i] = h;
  return h;
}

/** Has helper `i` hold `model` (one model per helper: loading it frees the one before). */
function withModel(i, model) {
  const h = helper(i);
  const key = modelKey(model);
  if (h.key !== key) {
    h.key = key;
    h.ready = false;
    const loading = h.rpc.call({ load: { name: model.name, precision: model.precision } });
    h.loading = loading;
    // Only the newest load counts: an older one finishing late changes nothing.
    loading.then(
      () => {
        h.loaded = true;
        if (h.loading === loading) h.ready = true;
      },
      () => h.loading === loading && (h.key = null),
    );
  }
  return h.loading;
}

/**
 * The pool an attack on `request` gets with `options.workers` workers in all
 * (this one included), or undefined: helpers only for a model-based metric
 * whose model runs on the CPU here, as many as the memory rule allows (extra
 * helpers are stopped). Their models start loading now; until a helper's is
 * loaded the search scores without it (`size` counts the helpers ready). A
 * score request is posted at once: the search's own share runs without
 * yielding, so a post left to a promise callback would wait for it while the
 * helper idled.
 */
function attackPool(request, options) {
  const wanted = Math.floor(Number(options?.workers) || 1) - 1;
  const name = request?.spec?.model;
  const model = [...loaded.values()].reverse().find((m) => m.name === name);
  const bytes = 4 * (model?.parameters ?? Infinity);
  const count = model?.backend === "cpu" && typeof Worker !== "undefined" ? Math.min(wanted, Math.floor(HELPER_BYTES / bytes)) : 0;
  stopHelpers(Math.max(0, count));
  if (!(count > 0)) return undefined;
  if (helpersBroken) return { size: 0, failure: helpersBroken, score: () => Promise.reject(new Error(helpersBroken)) };
  const key = modelKey(model);
  let failure;
  for (let i = 0; i < count; i++) {
    withModel(i, model).catch((err) => {
      failure ??= `a scoring helper could not load ${model.name}: ${err?.message ?? err}`;
    });
  }
  const ready = () => helpers.filter((h) => h && !h.failed && h.ready && h.key === key);
  return {
    get size() {
      return ready().length;
    },
    get failure() {
      return failure;
    },
    score: (i, spec, texts, refs, source) => {
      const h = ready()[i];
      if (!h) return Promise.reject(new Error("no scoring helper is ready"));
      const scored = h.rpc.call({ score: [spec, texts, refs, source] });
      // A helper whose call failed (a trap leaves its engine unusable) is not asked again.
      scored.catch((err) => retire(h, String(err?.message ?? err)));
      return scored;
    },
  };
}

/** An unloaded model leaves the helpers too. */
function forget(handle) {
  const model = loaded.get(handle);
  loaded.delete(handle);
  if (!model) return;
  for (const h of helpers) {
    if (!h || h.failed || h.key !== modelKey(model)) continue;
    h.key = null;
    h.ready = false;
    h.loading = null;
    h.rpc.call({ unload: true }).catch(() => {});
  }
}

self.onmessage = async ({ data }) => {
  if (data.init) {
    methods = new Set(data.methods);
    progressMarker = data.progress;
    urls = data.init;
    engine = startEngine(data.init);
    engine.catch(() => {}); // reported to each call below
    return;
  }
  const { id, method } = data;
  try {
    if (!engine) throw new Error("the model worker was not started");
    if (!methods.has(method)) throw new Error(`unknown engine call ${method}`);
    const bindings = await engine;
    // The page's progress callback becomes messages back to it (every argument).
    const progress = (...args) => self.postMessage({ id, progress: args });
    const args = data.args.map((a) => (a === progressMarker ? progress : a));
    if (method === "attackPair") {
      clearTimeout(idleTimer);
      args[2] = attackPool(args[0], args[2]);
    }
    if (method === "unloadModel") forget(args[0]);
    // The tagger's weights and GPT-2's vocabulary come as Blobs, read here
    // rather than copied on the page's thread.
    if (method === "loadTagger" && args[0] instanceof Blob) args[0] = new Uint8Array(await args[0].arrayBuffer());
    if (method === "loadGpt2Tokenizer") {
      for (const [i, a] of args.entries()) if (a instanceof Blob) args[i] = await a.text();
    }
    const value = await bindings[method](...args);
    if (method === "loadModel") loaded.set(value.handle, value);
    self.postMessage({ id, value });
  } catch (err) {
    // A trap (a panic, or memory the wasm could not get) leaves this
    // instance's state undefined: the page replaces the whole worker.
    const trapped = err instanceof WebAssembly.RuntimeError;
    self.postMessage({ id, error: String(err?.message ?? err), ...(trapped && { trapped: true }) });
  } finally {
    if (method === "attackPair") {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(stopHelpers, HELPER_IDLE_MS);
    }
  }
};
