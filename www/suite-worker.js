// Runs stress suites off the main thread. The page posts
// {glue, wasm, request}; the worker loads its own copy of the engine, runs one
// injection at a time (so finished tests show while the rest run) and posts
// {type: "progress" | "test" | "done" | "error"}. Cancelling terminates it.

let engine = null;

async function load(glue, wasm) {
  if (engine) return engine;
  const bindings = await import(glue);
  await bindings.default({ module_or_path: wasm });
  engine = bindings;
  return engine;
}

self.onmessage = async ({ data }) => {
  const { glue, wasm, request, tokenizer } = data;
  try {
    const bindings = await load(glue, wasm);
    if (request.kind === "prefer" || request.kind === "audit") {
      const started = performance.now();
      const out = request.kind === "prefer"
        ? bindings.preferenceSuite(request, (done, total) =>
          self.postMessage({ type: "progress", test: 0, tests: 1, done, total }))
        : bindings.auditSuite(request);
      self.postMessage({ type: "done", kind: request.kind, ...out, millis: performance.now() - started });
      return;
    }
    if (tokenizer && !bindings.hasLmTokenizer()) bindings.loadGpt2Tokenizer(tokenizer.encoder, tokenizer.vocab);
    const ids = request.config.injections;
    const started = performance.now();
    let report = null;
    const csv = [];
    for (const [k, id] of ids.entries()) {
      const out = bindings.stressSuite(
        { ...request, config: { ...request.config, injections: [id] } },
        (done, total) => self.postMessage({ type: "progress", test: k, tests: ids.length, done, total }),
      );
      if (!report) report = { ...out.report, config: { ...out.report.config, injections: [] }, tests: [] };
      report.config.injections.push(id);
      report.tests.push(out.report.tests[0]);
      csv.push(k === 0 ? out.csv : out.csv.split("\n").slice(1).join("\n"));
      self.postMessage({ type: "test", report });
    }
    self.postMessage({ type: "done", report, csv: csv.join(""), millis: performance.now() - started });
  } catch (err) {
    self.postMessage({ type: "error", message: String(err?.message ?? err) });
  }
};
