// Runs the language models off the main thread, so typing never waits for a
// model pass. model-engine.js posts {init: {glue, wasm}, methods} once, then
// {id, method, args} per call; the worker answers {id, value} or {id, error}.
// Calls interleave at the engine's awaits (GPU reads), as on the main thread.
//
// An attack may ask for helpers (attackPair's third argument, {workers}):
// score-helper.js workers, each with its own engine and a CPU copy of the
// metric's model, that score shares of each batch of candidates while this
// worker scores its own (wasm runs one thread per worker).

/** Engine calls the page may make here (sent with init: model-engine.js's REMOTE list). */
let methods = new Set();
let engine = null;
let progressMarker = null;
let urls = null;

/** What each loaded model was loaded as, by handle: {name, backend, precision, bytes}. */
const loaded = new Map();

/** A model copy for each helper this large in all: the helpers' memory. */
const HELPER_BYTES = 1.5e9;

/** The most helpers an attack gets. */
const MAX_HELPERS = 3;

/** Helpers idle this long (no attack running) are stopped, and their model copies freed. */
const HELPER_IDLE_MS = 120_000;
let idleTimer = null;

/** Stops every helper (the next attack starts them again, loading from the cache). */
function stopHelpers() {
  for (const h of helpers) {
    if (!h) continue;
    for (const call of h.pending.values()) call.reject(new Error("the scoring helper was stopped"));
    h.worker.terminate();
  }
  helpers.length = 0;
}

/** Started helpers: {worker, next, pending, models: Map(key -> Promise), ready: Set(key), failed}. */
const helpers = [];

function helper(i) {
  if (helpers[i] && !helpers[i].failed) return helpers[i];
  const h = { worker: new Worker("score-helper.js", { type: "module" }), next: 1, pending: new Map(), models: new Map(), ready: new Set(), failed: null };
  h.worker.onmessage = ({ data }) => {
    const call = h.pending.get(data.id);
    if (!call) return;
    h.pending.delete(data.id);
    if ("error" in data) call.reject(new Error(data.error));
    else call.resolve(data.value);
  };
  h.worker.onerror = (e) => {
    // A helper that dies (out of memory, a trap) fails its waiting calls; the next attack starts another.
    h.failed = `a scoring helper stopped: ${e.message ?? "unknown error"}`;
    for (const call of h.pending.values()) call.reject(new Error(h.failed));
    h.pending.clear();
    h.worker.terminate();
  };
  h.worker.postMessage({ init: urls });
  helpers[i] = h;
  return h;
}

function ask(h, message) {
  if (h.failed) return Promise.reject(new Error(h.failed));
  return new Promise((resolve, reject) => {
    const id = h.next++;
    h.pending.set(id, { resolve, reject });
    h.worker.postMessage({ id, ...message });
  });
}

/** Helper `i` with `model` loaded (loading it on first use). */
function withModel(i, model) {
  const h = helper(i);
  const key = `${model.name}\u0000${model.precision}`;
  if (!h.models.has(key)) {
    // The helper keeps one copy per name: the newest load replaces it.
    for (const k of [...h.models.keys()]) if (k.startsWith(`${model.name}\u0000`)) h.models.delete(k);
    for (const k of [...h.ready]) if (k.startsWith(`${model.name}\u0000`)) h.ready.delete(k);
    const loading = ask(h, { load: { name: model.name, precision: model.precision } });
    loading.then(() => h.ready.add(key), () => h.models.delete(key));
    h.models.set(key, loading);
  }
  return h.models.get(key).then(() => h);
}

/**
 * The pool an attack on `request` gets with `options.workers` workers in all
 * (this one included), or undefined: helpers only for a model-based metric
 * whose model runs on the CPU here, as many as the memory rule allows. Their
 * models start loading now; until a helper's is loaded the search scores
 * without it (`size` counts the helpers ready). A helper's score request is
 * posted at once: the search's own share runs without yielding, so a post
 * left to a promise callback would wait for it while the helper idled.
 */
function attackPool(request, options) {
  const wanted = Math.min(MAX_HELPERS, Math.floor(Number(options?.workers) || 1) - 1);
  const name = request?.spec?.model;
  const model = [...loaded.values()].reverse().find((m) => m.name === name);
  if (!(wanted > 0) || !model || model.backend !== "cpu" || typeof Worker === "undefined") return undefined;
  const count = Math.min(wanted, Math.floor(HELPER_BYTES / Math.max(1, model.bytes)));
  if (count < 1) return undefined;
  const key = `${model.name}\u0000${model.precision}`;
  let failure;
  for (let i = 0; i < count; i++) {
    withModel(i, model).catch((err) => {
      failure ??= String(err?.message ?? err);
    });
  }
  const ready = () => helpers.slice(0, count).filter((h) => h && !h.failed && h.ready.has(key));
  return {
    get size() {
      return ready().length;
    },
    get failure() {
      return failure;
    },
    score: (i, spec, texts, refs, source) => {
      const h = ready()[i];
      return h ? ask(h, { score: [spec, texts, refs, source] }) : Promise.reject(new Error("no scoring helper is ready"));
    },
  };
}

function forget(handle) {
  const model = loaded.get(handle);
  loaded.delete(handle);
  if (!model) return;
  for (const h of helpers) {
    if (!h || h.failed) continue;
    for (const key of [...h.models.keys()]) if (key.startsWith(`${model.name}\u0000`)) h.models.delete(key);
    for (const key of [...h.ready]) if (key.startsWith(`${model.name}\u0000`)) h.ready.delete(key);
    ask(h, { unload: model.name }).catch(() => {});
  }
}

async function load({ glue, wasm }) {
  const bindings = await import(glue);
  await bindings.default({ module_or_path: wasm });
  return bindings;
}

self.onmessage = async ({ data }) => {
  if (data.init) {
    methods = new Set(data.methods);
    progressMarker = data.progress;
    urls = data.init;
    engine = load(data.init);
    engine.catch(() => {}); // reported to each call below
    return;
  }
  const { id, method } = data;
  try {
    if (!engine) throw new Error("the model worker was not started");
    if (!methods.has(method)) throw new Error(`unknown engine call ${method}`);
    const bindings = await engine;
    // The page's progress callback becomes messages back to it.
    const progress = (done, total) => self.postMessage({ id, progress: [done, total] });
    const args = data.args.map((a) => (a === progressMarker ? progress : a));
    if (method === "attackPair") {
      clearTimeout(idleTimer);
      args[2] = attackPool(args[0], args[2]);
    }
    if (method === "unloadModel") forget(args[0]);
    const value = await bindings[method](...args);
    if (method === "loadModel") {
      const bytes = [...(args[3] ?? []), args[4]].reduce((n, b) => n + (b?.byteLength ?? 0), 0);
      loaded.set(value.handle, { name: value.name, backend: value.backend, precision: args[6], bytes });
    }
    self.postMessage({ id, value });
  } catch (err) {
    self.postMessage({ id, error: String(err?.message ?? err) });
  } finally {
    if (method === "attackPair") {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(stopHelpers, HELPER_IDLE_MS);
    }
  }
};
