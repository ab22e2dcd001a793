// A scoring helper of the model worker (model-worker.js): its own copy of the
// wasm engine, one model loaded on the CPU (from this browser's model cache,
// else fetched as the model panel fetched it), and one call: a share of an
// attack's batch of candidates, scored exactly as the search scores its own
// share (attackScores). wasm runs one thread per worker, so helpers are how a
// search uses more than one core. The model worker posts {init: {glue, wasm}}
// once, then {id, load: {name, precision}}, {id, score: [spec, texts, refs,
// source]} or {id, unload: true}; the helper answers {id, value} or {id, error}.

import { loadModel } from "./models.js";
import { startEngine } from "./worker-rpc.js";

let engine = null;
/** The loaded model's engine handle, or null. */
let handle = null;
/** Loads and unloads, one after another, so the last one asked is what stays. */
let models = Promise.resolve();

function unload(bindings) {
  if (handle !== null) bindings.unloadModel(handle);
  handle = null;
  return true;
}

/** One model at a time: loading one frees the one before. */
async function load(bindings, { name, precision }) {
  unload(bindings);
  handle = (await loadModel(bindings, name, { backend: "cpu", precision })).handle;
  return true;
}

function queued(work) {
  const done = models.then(work);
  models = done.catch(() => {});
  return done;
}

self.onmessage = async ({ data }) => {
  if (data.init) {
    engine = startEngine(data.init);
    engine.catch(() => {}); // reported to each call below
    return;
  }
  const { id } = data;
  try {
    if (!engine) throw new Error("the scoring helper was not started");
    const bindings = await engine;
    let value;
    if (data.load) value = await queued(() => load(bindings, data.load));
    else if (data.unload) value = await queued(() => unload(bindings));
    else if (data.score) value = await bindings.attackScores(...data.score);
    else throw new Error("unknown scoring helper call");
    self.postMessage({ id, value });
  } catch (err) {
    self.postMessage({ id, error: String(err?.message ?? err) });
  }
};
