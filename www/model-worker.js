// Runs the language models off the main thread, so typing never waits for a
// model pass. model-engine.js posts {init: {glue, wasm}, methods} once, then
// {id, method, args} per call; the worker answers {id, value} or {id, error}.
// Calls interleave at the engine's awaits (GPU reads), as on the main thread.

/** Engine calls the page may make here (sent with init: model-engine.js's REMOTE list). */
let methods = new Set();
let engine = null;
let progressMarker = null;

async function load({ glue, wasm }) {
  const bindings = await import(glue);
  await bindings.default({ module_or_path: wasm });
  return bindings;
}

self.onmessage = async ({ data }) => {
  if (data.init) {
    methods = new Set(data.methods);
    progressMarker = data.progress;
    engine = load(data.init);
    engine.catch(() => {}); // reported to each call below
    return;
  }
  const { id, method, args } = data;
  try {
    if (!engine) throw new Error("the model worker was not started");
    if (!methods.has(method)) throw new Error(`unknown engine call ${method}`);
    const bindings = await engine;
    // The page's progress callback becomes messages back to it.
    const progress = (done, total) => self.postMessage({ id, progress: [done, total] });
    const value = await bindings[method](...args.map((a) => (a === progressMarker ? progress : a)));
    self.postMessage({ id, value });
  } catch (err) {
    self.postMessage({ id, error: String(err?.message ?? err) });
  }
};
