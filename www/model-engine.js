// The language-model engine the page talks to. Model passes run in a Web
// Worker (model-worker.js) with its own copy of the wasm engine, so a 200 ms
// BERTScore pass never blocks typing; each call returns a promise. Where a
// worker cannot start, the same calls run on the main thread.

import { engineUrls } from "./suite.js";
import { connect } from "./worker-rpc.js";

/** Calls that go to the worker (the only ones it accepts); every other engine function stays local. */
const REMOTE = ["loadModel", "unloadModel", "embedText", "scoreModel", "mauveTexts", "preferenceSuite", "auditSuite", "attackPair", "stopAttack", "stopAnalysis", "stopMauve", "generateText", "stopGeneration", "selfEval", "attentionView", "runLessonStep", "loadGpt2Tokenizer", "stressSuiteModels", "stopSuite", "hasLmTokenizer", "hasTagger", "loadTagger", "sweepInjection", "applyInjection", "stopInjection", "webgpuSelfTest"];

/** Stands for a progress callback in a call to the worker (functions cannot be posted). */
const PROGRESS = "blindspot:progress-callback";

/**
 * Starts the model engine. `wasm` is the page's own engine (for the
 * registry, and the fallback). Returns an object with the engine's model
 * calls (all returning promises), the page's own `modelRegistry()` and
 * `precisionName(p)` (synchronous), and `where`: "worker" or "main thread".
 */
export function startModelEngine(wasm) {
  const here = { modelRegistry: () => wasm.modelRegistry(), precisionName: (p) => wasm.precisionName(p) };
  let worker;
  const spawn = () => {
    worker = new Worker("model-worker.js", { type: "module" });
    worker.postMessage({ init: engineUrls(), methods: REMOTE, progress: PROGRESS });
  };
  try {
    spawn();
  } catch (err) {
    console.warn("model worker unavailable, models run on the main thread:", err);
    const local = { where: "main thread", ...here };
    for (const name of REMOTE) local[name] = async (...args) => wasm[name](...args);
    // Scoring helpers are the model worker's: here the attack runs alone.
    local.attackPair = async (request, progress) => wasm.attackPair(request, progress);
    return local;
  }
  /**
   * After a trap in the worker's engine (a panic, or memory the wasm could
   * not get) nothing it holds can be trusted: a fresh worker replaces it,
   * and `blindspot:models-reset` tells the page its models are gone. A
   * synchronous engine call's trap comes back as its error (`trapped`); an
   * async one's (a model pass) is thrown from a microtask in the worker,
   * never settles its call, and arrives as the worker's error event.
   */
  const restart = (why) => {
    const old = rpc;
    worker.terminate();
    spawn();
    rpc = attach();
    old.failAll(Object.assign(new Error("the model engine was restarted"), { restarted: true }));
    const reason = `the model engine stopped (${why}: out of memory, or a bug the browser console shows) and was restarted; its models were unloaded`;
    document.dispatchEvent(new CustomEvent("blindspot:models-reset", { detail: { reason } }));
  };
  // An uncaught error in the worker fails every waiting call, and replaces the worker.
  const attach = () => {
    // Handled here (the worker is replaced and the page told), so not
    // reported again as the page's own uncaught error.
    const own = connect(worker, {
      contain: true,
      died: (e) => {
        queueMicrotask(() => own === rpc && restart(e.message ?? "an uncaught error"));
        return new Error(`the model worker stopped: ${e.message ?? "unknown error"}`);
      },
    });
    return own;
  };
  let rpc = attach();
  const engine = { where: "worker", ...here };
  for (const name of REMOTE) {
    engine[name] = (...args) => {
      // A function argument (a progress callback) stays here; the worker calls back by message.
      const onProgress = args.find((a) => typeof a === "function");
      const from = rpc;
      return from.call({ method: name, args: args.map((a) => (typeof a === "function" ? PROGRESS : a)) }, onProgress)
        .catch((err) => {
          if (err.trapped && from === rpc) restart(err.message);
          throw err;
        });
    };
  }
  return engine;
}
