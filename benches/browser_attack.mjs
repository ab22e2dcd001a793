// Adversarial search in headless Chromium (the built dist/): queries per
// second of a MiniLM-BERTScore DeepWordBug search on the CPU (burn-flex in
// wasm, one thread; the same engine call the attack panel makes in its
// model worker, made here on the page's own instance). The goal is set out
// of reach so the search spends its whole budget; a budget-1 run measures
// the fixed part (the z scale over the bundled pairs), which is subtracted.
// `cargo bench --bench attack` measures the same search natively.
//
//   make build-web && node benches/browser_attack.mjs [budget]

import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const budget = Number(process.argv[2] ?? 300);
const { server, url } = await serveDist();
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
const page = await browser.newPage();
await page.goto(url);
await page.waitForSelector("body[data-ready=true]", { timeout: 120_000 });
const MINILM = "sentence-transformers/all-MiniLM-L6-v2";
await page.evaluate(async (id) => {
  const models = await import("./models.js");
  await models.loadModel(window.wasmBindings, id, { backend: "cpu", precision: "f32" });
}, MINILM);

const run = (b) => page.evaluate(async ({ b, id }) => {
  const wasm = window.wasmBindings;
  const defaults = wasm.attackRegistry().goals.find((g) => g.id === "over-penalise").defaults;
  const spec = { ...wasm.metricChoices().defaults.find((d) => d.metric === "bertscore"), model: id };
  const t0 = performance.now();
  const out = await wasm.attackPair({
    spec,
    config: { ...defaults, budget: b, threshold: 1e9 },
    hypothesis: "On Monday the regional council said the new bridge over the river would open in spring, two months late.",
    references: "The regional council said on Monday that the new bridge across the river will open in the spring, two months later than planned.",
  }, () => {});
  return { ms: performance.now() - t0, queries: out.outcome.queries };
}, { b, id: MINILM });
const fixed = await run(1);
const full = await run(budget);
const rate = (full.queries - fixed.queries) / ((full.ms - fixed.ms) / 1000);
console.log(`MiniLM-BERTScore DeepWordBug in the page (CPU wasm, one thread): ${full.queries} queries in ${full.ms.toFixed(0)} ms, ${fixed.ms.toFixed(0)} ms of it fixed (z scale); ${rate.toFixed(0)} queries/s`);
await browser.close();
server.close();
