// The full stress suite in headless Chromium, against the native CLI on the
// same machine: WMT21 (1000 items), fluency + consistency, 5 seeds, all
// lexical metrics.
//
//   make dist && cargo build --release --bin blindspot && node benches/browser_suite.mjs
//
// (BLINDSPOT_DIST=dist-dev after `make build-web` runs the development build.)
// The page runs a lexical suite in one worker per core (at most 4, each with
// 16 items or more); WORKERS=N makes the page see N cores.
//
// Prints the browser time (one Web Worker, wasm) and the native time (all
// cores), and their ratio, then checks that the page's report is the CLI's
// (numbers within 1e-9 relative: wasm's libm and glibc's may differ in the
// last bit), so a fast run is never one that skipped work.
//
// MODEL=1 loads the site's MiniLM on the CPU first, so BERTScore and
// MoverScore join the suite (in the model worker, or with 2 cores or more
// in a shard per core, each with its own copy of MiniLM); LIMIT=N (first N
// items), SEEDS=N and FAMILIES=a,b (default fluency,consistency) size the
// run. Model scores are compared within 1e-5 (the page's CPU kernels and
// the CLI's are not the same code).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const ROOT = resolve(import.meta.dirname, "..");
const DATA = resolve(ROOT, "tests", "data", "wmt21_de_en.jsonl");
const CLI = process.env.BLINDSPOT_BIN ??
  join(process.env.CARGO_TARGET_DIR ?? join(process.env.HOME, ".cache/blindspot/target"), "release", "blindspot");

const { server, url } = await serveDist();
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
const page = await browser.newPage();
if (process.env.WORKERS) {
  const cores = Number(process.env.WORKERS);
  await page.addInitScript((n) => Object.defineProperty(navigator, "hardwareConcurrency", { get: () => n }), cores);
}
await page.goto(url);
await page.waitForSelector("body[data-ready=true]", { timeout: 120_000 });
const MODEL = process.env.MODEL === "1";
const SEEDS = process.env.SEEDS ?? "5";
const LIMIT = process.env.LIMIT ?? "";
const FAMILIES = (process.env.FAMILIES ?? "fluency,consistency").split(",");
if (MODEL) {
  await page.selectOption("#model-pick", "sentence-transformers/all-MiniLM-L6-v2");
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 300_000 });
}
await page.setInputFiles("#suite-file", DATA);
await page.waitForFunction(() => document.querySelector("#suite-status").textContent.includes("1000 items"));
await page.fill("#suite-seeds", SEEDS);
await page.fill("#suite-limit", LIMIT);
for (const f of ["fluency", "consistency", "menli", "character", "other"]) await page.setChecked(`#suite-family-${f}`, FAMILIES.includes(f));
// The page's main thread while the suite runs: its tasks over 50 ms.
await page.evaluate(() => {
  window.longTasks = [];
  new PerformanceObserver((list) => window.longTasks.push(...list.getEntries().map((e) => e.duration)))
    .observe({ type: "longtask" });
});
const clicked = performance.now();
await page.click("#suite-run");
await page.waitForFunction(() => document.querySelector("#suite-status").textContent.startsWith("Done"), null,
  { timeout: 1_800_000, polling: 100 });
// From the click, the workers' start included (the page's own figure starts
// once one worker has its engine, or, for several, when the files are sent).
const wallMs = performance.now() - clicked;
const browserMs = Number(await page.getAttribute("#suite-result", "data-millis"));
const status = await page.textContent("#suite-status");
const longTasks = await page.evaluate(() => window.longTasks);
const [saved] = await Promise.all([page.waitForEvent("download"), page.click("#suite-json")]);
const fromPage = JSON.parse(readFileSync(await saved.path(), "utf8"));
await browser.close();
server.close();

const t0 = performance.now();
const dir = mkdtempSync(join(tmpdir(), "blindspot-suite-"));
const out = join(dir, "cli.json");
const ids = fromPage.metrics.map((m) => m.id);
const minilm = join(ROOT, "models", "all-MiniLM-L6-v2");
execFileSync(CLI, ["stress", "--data", DATA, "--format", "wmt", "--seeds", SEEDS, "--injections", FAMILIES.join(","),
  ...(LIMIT ? ["--limit", LIMIT] : []),
  ...(MODEL ? ["--metrics", ids.join(","), "--model-dir", minilm, "--model", `moverscore=${minilm}`] : []),
  "--out", out], { stdio: "ignore" });
const nativeMs = performance.now() - t0;
const workers = Number(/\((\d+) workers side by side\)/.exec(status)?.[1] ?? 1);
console.log(`browser (${workers} worker${workers > 1 ? "s" : ""}, wasm): ${(browserMs / 1000).toFixed(1)} s (from the click: ${(wallMs / 1000).toFixed(1)} s)`);
console.log(`main-thread tasks over 50 ms during the run: ${longTasks.length}` +
  (longTasks.length ? ` (longest ${Math.max(...longTasks).toFixed(0)} ms)` : ""));
console.log(`native CLI (release, all cores): ${(nativeMs / 1000).toFixed(1)} s`);
console.log(`ratio browser / native: ${(browserMs / nativeMs).toFixed(2)}`);
const fromCli = JSON.parse(readFileSync(out, "utf8"));
rmSync(dir, { recursive: true });
fromCli.dataset = fromPage.dataset;
if (MODEL) {
  // The model's name in the signatures: the hub id on the page, the folder's name for the CLI.
  for (const m of fromCli.metrics) m.signature = m.signature.replace("model:all-MiniLM-L6-v2|", "model:sentence-transformers/all-MiniLM-L6-v2|");
}
let numbers = 0;
(function close(a, b, path) {
  if (typeof a === "number" && typeof b === "number") {
    numbers += 1;
    const tolerance = MODEL ? 1e-5 : 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
    assert.ok(Math.abs(a - b) <= tolerance, `${path}: ${a} vs ${b}`);
  } else if (a && typeof a === "object") {
    assert.deepEqual(Object.keys(a), Object.keys(b), `${path}: keys`);
    for (const k of Object.keys(a)) close(a[k], b[k], `${path}.${k}`);
  } else {
    assert.equal(a, b, path);
  }
})(fromPage, fromCli, "report");
console.log(`the page's report is the CLI's: ${fromPage.tests.length} tests over ${fromPage.items} items, ${numbers} numbers`);
