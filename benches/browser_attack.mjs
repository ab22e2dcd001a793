// Adversarial search in headless Chromium (the built dist/): queries per
// second of a MiniLM-BERTScore DeepWordBug search on the CPU (burn-flex in
// wasm), made as the attack panel makes it: in the page's model worker,
// with 1, 2, ... workers in all (the worker and its scoring helpers,
// score-helper.js, one wasm thread each). The goal is set out of reach so
// the search spends its whole budget; a budget-1 run measures the fixed part
// (the z scale over the bundled pairs), which is subtracted. Runs alternate
// between the worker counts. `cargo bench --bench attack` measures the same
// search natively. It also reports the page's own tasks over 50 ms while the
// searches run (the browser test checks only that the page's engine runs none
// of the search).
//
//   make dist && node benches/browser_attack.mjs [budget] [workers, e.g. 1,2] [runs] [f32|q8]
//
// (q8: the int8 model, whose products in the browser are integer ones.)

import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const budget = Number(process.argv[2] ?? 300);
const counts = (process.argv[3] ?? "1,2").split(",").map(Number);
const runs = Number(process.argv[4] ?? 2);
// Any precision the engine takes (f32, int8, the CLI's q8); loadModel refuses others.
const precision = process.argv[5] ?? "f32";
const { server, url } = await serveDist();
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
const page = await browser.newPage();
await page.goto(url);
await page.waitForSelector("body[data-ready=true]", { timeout: 120_000 });
const MINILM = "sentence-transformers/all-MiniLM-L6-v2";
await page.evaluate(async ({ id, precision }) => {
  const models = await import("./models.js");
  const { startModelEngine } = await import("./model-engine.js");
  window.benchEngine = startModelEngine(window.wasmBindings);
  await models.loadModel(window.benchEngine, id, { backend: "cpu", precision });
}, { id: MINILM, precision });
const cores = await page.evaluate(() => navigator.hardwareConcurrency);

const run = (b, workers) => page.evaluate(async ({ b, id, workers }) => {
  const wasm = window.wasmBindings;
  const defaults = wasm.attackRegistry().goals.find((g) => g.id === "over-penalise").defaults;
  const spec = { ...wasm.metricChoices().defaults.find((d) => d.metric === "bertscore"), model: id };
  const t0 = performance.now();
  const out = await window.benchEngine.attackPair({
    spec,
    config: { ...defaults, budget: b, threshold: 1e9 },
    hypothesis: "On Monday the regional council said the new bridge over the river would open in spring, two months late.",
    references: "The regional council said on Monday that the new bridge across the river will open in the spring, two months later than planned.",
  }, () => {}, { workers });
  if (out.poolFailure) throw new Error(`helpers left out: ${out.poolFailure}`);
  return { ms: performance.now() - t0, queries: out.outcome.queries, workers: out.workers };
}, { b, id: MINILM, workers });

// Helpers load their model copies on first use: one short search each first.
for (const w of counts) await run(2, w);
const rates = Object.fromEntries(counts.map((w) => [w, []]));
// The page's own thread while the searches run in workers: its tasks over 50 ms.
await page.evaluate(() => {
  window.longTasks = [];
  new PerformanceObserver((list) => window.longTasks.push(...list.getEntries().map((e) => e.duration)))
    .observe({ type: "longtask" });
});
for (let r = 0; r < runs; r++) {
  for (const w of counts) {
    const fixed = await run(1, w);
    const full = await run(budget, w);
    if (full.workers !== w) throw new Error(`asked for ${w} workers, got ${full.workers}`);
    rates[w].push((full.queries - fixed.queries) / ((full.ms - fixed.ms) / 1000));
    console.log(`run ${r + 1}, ${w} worker(s): ${full.queries} queries in ${full.ms.toFixed(0)} ms, ${fixed.ms.toFixed(0)} ms of it fixed (z scale); ${rates[w].at(-1).toFixed(1)} queries/s`);
  }
}
const span = (v) => `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)}`;
console.log(`MiniLM-BERTScore DeepWordBug in the page's model worker (CPU wasm, ${cores} cores): ` +
  counts.map((w) => `${w} worker(s) ${span(rates[w])} queries/s`).join(", "));
const longTasks = await page.evaluate(() => window.longTasks);
console.log(`the page's thread meanwhile: ${longTasks.length} tasks over 50 ms` +
  (longTasks.length ? `, the longest ${Math.max(...longTasks).toFixed(0)} ms` : ""));
await browser.close();
server.close();
