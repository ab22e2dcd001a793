// Runs stress suites off the main thread. The page posts
// {glue, wasm, request, shard}; the worker loads its own copy of the engine
// and runs the whole suite, or with `shard` ({index, count}) that shard of
// its items, in one call, which reports progress and, each time a test
// finishes, the report so far (a shard: that test's part, as JSON, for the
// merger below); the worker posts
// {type: "progress" | "test" | "part" | "done" | "error"}. Cancelling
// terminates it.
//
// A run in shards has one more worker, the merger: the page posts it
// {glue, wasm, merge: count}, then each shard's parts as they come ({part})
// and {finish} once every shard is done; it posts the report so far
// ({type: "test"}) each time every shard has finished one more test, and
// {type: "done", report, csv} at the end. Merging reads every item's
// outcomes, too long a task for the page's own thread.

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

let merger = null;

self.onmessage = async ({ data }) => {
  const { glue, wasm, request, shard, tokenizer, tagger } = data;
  try {
    const bindings = await load(glue, wasm);
    if (data.merge) {
      merger = new bindings.SuiteMerger(data.merge);
      return;
    }
    if (data.part !== undefined) {
      const report = merger.add(data.part);
      if (report) self.postMessage({ type: "test", report });
      return;
    }
    if (data.finish) {
      const out = merger.finish();
      self.postMessage({ type: "done", report: out.report, csv: out.csv });
      return;
    }
    if (tokenizer && !bindings.hasLmTokenizer()) bindings.loadGpt2Tokenizer(tokenizer.encoder, tokenizer.vocab);
    if (tagger && !bindings.hasTagger()) bindings.loadTagger(tagger);
    if (shard) {
      await bindings.stressSuiteShard(
        request,
        shard,
        (done, total) => self.postMessage({ type: "progress", done, total }),
        (json) => self.postMessage({ type: "part", json }),
      );
      self.postMessage({ type: "done" });
      return;
    }
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
