// Runs stress suites off the main thread. The page posts
// {glue, wasm, request}; the worker loads its own copy of the engine and runs
// the whole suite in one call, which reports progress and the report so far
// each time a test finishes; the worker posts
// {type: "progress" | "test" | "done" | "error"}. Cancelling terminates it.

import { startEngine } from "./worker-rpc.js";

let engine = null;

/** The engine, started once (again after a failed start). */
function load(glue, wasm) {
  engine ??= startEngine({ glue, wasm }).catch((err) => {
    engine = null;
    throw err;
  });
  return engine;
}

self.onmessage = async ({ data }) => {
  const { glue, wasm, request, tokenizer, tagger } = data;
  try {
    const bindings = await load(glue, wasm);
    if (tokenizer && !bindings.hasLmTokenizer()) bindings.loadGpt2Tokenizer(tokenizer.encoder, tokenizer.vocab);
    if (tagger && !bindings.hasTagger()) bindings.loadTagger(tagger);
    const started = performance.now();
    const out = await bindings.stressSuite(
      request,
      (done, total) => self.postMessage({ type: "progress", done, total }),
      (report) => self.postMessage({ type: "test", report }),
    );
    self.postMessage({ type: "done", report: out.report, csv: out.csv, millis: performance.now() - started });
  } catch (err) {
    self.postMessage({ type: "error", message: String(err?.message ?? err) });
  }
};
