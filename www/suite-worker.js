// Runs stress suites off the main thread. The page posts
// {glue, wasm, request, dataset, tokenizer, tagger, shard, port, models}
// (models: [{name, precision}] a shard loads on the CPU for the request's
// specs, model-based metrics included); the worker
// loads its own copy of the engine and runs the whole suite, or with `shard`
// ({index, count}) that shard of its items, in one call, which reports
// progress and, each time a test finishes, the report so far (a shard: that
// test's part, as JSON, sent on `port` to the merger below); the worker posts
// {type: "progress" | "test" | "done" | "error"}. Cancelling terminates it.
// The dataset's text, GPT-2's vocabulary and the tagger's weights come as
// Blobs, which the page hands over without copying them on its own thread.
//
// A run in shards has one more worker, the merger: the page posts it
// {glue, wasm, merge: ports}, one MessagePort per shard, on which each shard
// sends its parts ({part}) and then {done}: the parts never pass through the
// page's thread. The merger posts the report so far ({type: "test"}) each
// time every shard has finished one more test, and {type: "done", report,
// csv} once every shard is done. Merging reads every item's outcomes, too
// long a task for the page's own thread.

import { loadModel } from "./models.js";
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

const fail = (err) => self.postMessage({ type: "error", message: String(err?.message ?? err) });

/** Merges what the shards send on `ports`, in the order each sends it. */
function merge(bindings, ports) {
  const merger = new bindings.SuiteMerger(ports.length);
  let ended = 0;
  for (const port of ports) {
    port.onmessage = ({ data }) => {
      try {
        if (data.part !== undefined) {
          const report = merger.add(data.part);
          if (report) self.postMessage({ type: "test", report });
        } else if (data.done && ++ended === ports.length) {
          const out = merger.finish();
          self.postMessage({ type: "done", report: out.report, csv: out.csv });
        }
      } catch (err) {
        fail(err);
      }
    };
  }
}

self.onmessage = async ({ data }) => {
  const { glue, wasm, dataset, shard, port, tokenizer, tagger, models = [] } = data;
  try {
    const bindings = await load(glue, wasm);
    if (data.merge) return merge(bindings, data.merge);
    const request = { ...data.request, text: await dataset.text() };
    if (tokenizer && !bindings.hasLmTokenizer()) {
      const [encoder, vocab] = await Promise.all([tokenizer.encoder.text(), tokenizer.vocab.text()]);
      bindings.loadGpt2Tokenizer(encoder, vocab);
    }
    if (tagger && !bindings.hasTagger()) bindings.loadTagger(new Uint8Array(await tagger.arrayBuffer()));
    // A shard with model-based metrics: its own CPU copy of each model (from the browser's model cache).
    for (const m of models) {
      await loadModel(bindings, m.name, { backend: "cpu", precision: m.precision }).catch((err) => {
        throw new Error(`a suite worker could not load its copy of ${m.name}: ${err?.message ?? err}`);
      });
    }
    const progress = (done, total) => self.postMessage({ type: "progress", done, total });
    if (shard) {
      await bindings.stressSuiteShard(request, shard, progress, (json) => port.postMessage({ part: json }));
      port.postMessage({ done: true });
      return;
    }
    const started = performance.now();
    const out = await bindings.stressSuite(request, progress, (report) => self.postMessage({ type: "test", report }));
    self.postMessage({ type: "done", report: out.report, csv: out.csv, millis: performance.now() - started });
  } catch (err) {
    fail(err);
  }
};
