// A scoring helper of the model worker (model-worker.js): its own copy of the
// wasm engine, the metric's model loaded on the CPU from this browser's model
// cache, and one call: a share of an attack's batch of candidates, scored
// exactly as the search scores its own share (attackScores). wasm runs one
// thread per worker, so helpers are how a search uses more than one core.
// The model worker posts {init: {glue, wasm}} once, then
// {id, load: {name, precision}}, {id, score: [spec, texts, refs, source]} or
// {id, unload: name}; the helper answers {id, value} or {id, error}.

import { fetchCheckpoint } from "./models.js";

let engine = null;
/** Loaded models: name -> engine handle. */
const handles = new Map();

async function start({ glue, wasm }) {
  const bindings = await import(glue);
  await bindings.default({ module_or_path: wasm });
  return bindings;
}

async function load(bindings, { name, precision }) {
  const f = await fetchCheckpoint(name);
  unload(bindings, name);
  const info = await bindings.loadModel(name, f.config, f.tokenizer, f.shards, f.prepared, "cpu", precision, f.spm, f.tokenizerConfig);
  handles.set(name, info.handle);
  return true;
}

function unload(bindings, name) {
  if (handles.has(name)) bindings.unloadModel(handles.get(name));
  handles.delete(name);
  return true;
}

self.onmessage = async ({ data }) => {
  if (data.init) {
    engine = start(data.init);
    engine.catch(() => {}); // reported to each call below
    return;
  }
  const { id } = data;
  try {
    if (!engine) throw new Error("the scoring helper was not started");
    const bindings = await engine;
    let value;
    if (data.load) value = await load(bindings, data.load);
    else if (data.unload) value = unload(bindings, data.unload);
    else if (data.score) value = await bindings.attackScores(...data.score);
    else throw new Error("unknown scoring helper call");
    self.postMessage({ id, value });
  } catch (err) {
    self.postMessage({ id, error: String(err?.message ?? err) });
  }
};
