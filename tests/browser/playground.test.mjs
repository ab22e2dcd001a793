// End-to-end tests of the built playground (dist/) in Debian's headless
// Chromium, driven by playwright-core. WebGPU comes from SwiftShader via
// --enable-unsafe-webgpu, so the burn-wgpu path runs without a GPU.
//
// Run through `make test` (it builds dist/ and the native CLI first).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { execFileSync } from "node:child_process";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "./static-server.mjs";

const ROOT = resolve(import.meta.dirname, "..", "..");
const ARTIFACTS = join(ROOT, "test-artifacts");
const CLI = process.env.BLINDSPOT_BIN ?? join(ROOT, "target", "debug", "blindspot");

let server;
let baseUrl;
let browser;

/** The native CLI's sentence-level scores for one pair. */
function nativeScores(hyp, ref) {
  const input = JSON.stringify({ hyp, ref }) + "\n";
  const out = execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl"], { input });
  return JSON.parse(out.toString().split("\n")[0]);
}

async function openPage({ fresh = true } = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(baseUrl);
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  if (fresh) {
    await page.evaluate(() => localStorage.clear());
  }
  return { context, page, errors };
}

async function setText(page, id, text) {
  await page.fill(`#${id}`, "");
  await page.type(`#${id}`, text, { delay: 5 });
  // One animation frame runs the scoring pass.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

const cardValue = (page, id) => page.getAttribute(`.card[data-metric="${id}"] [data-role="value"]`, "data-raw");
const cardDelta = (page, id) => page.getAttribute(`.card[data-metric="${id}"] [data-role="delta"]`, "data-raw");

before(async () => {
  ({ server, url: baseUrl } = await serveDist());
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: CHROMIUM_ARGS,
  });
  await mkdir(ARTIFACTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  server?.close();
});

test("typing updates BLEU to the native value, pinning shows deltas", async () => {
  const { context, page, errors } = await openPage();
  const ref = "The committee approved the new budget after a long debate on Tuesday.";
  const first = "The committee did not approve the budget after a debate on Tuesday.";
  const second = "The committee approved the new budget after a debate on Tuesday.";
  await page.selectOption("#example", "custom");
  await page.fill("#source", "");
  await setText(page, "reference", ref);
  await setText(page, "hypothesis", first);

  const native1 = nativeScores(first, ref);
  for (const id of ["bleu", "chrf", "rouge1", "rouge2", "rougeL"]) {
    const shown = Number(await cardValue(page, id));
    assert.ok(Math.abs(shown - native1[id]) < 1e-9, `${id}: page ${shown} vs native ${native1[id]}`);
  }
  const bleuText = await page.textContent('.card[data-metric="bleu"] [data-role="value"]');
  assert.equal(bleuText, native1.bleu.toFixed(2));

  await page.click("#pin");
  assert.equal(await page.isDisabled("#restore"), false);
  await setText(page, "hypothesis", second);
  const native2 = nativeScores(second, ref);
  const delta = Number(await cardDelta(page, "bleu"));
  assert.ok(Math.abs(delta - (native2.bleu - native1.bleu)) < 1e-9, `delta ${delta}`);
  assert.ok(delta > 0, "fixing the negation must raise BLEU");
  const deltaText = await page.textContent('.card[data-metric="bleu"] [data-role="delta"]');
  assert.equal(deltaText, `▲ +${(native2.bleu - native1.bleu).toFixed(2)} vs original`);

  await page.screenshot({ path: join(ARTIFACTS, "playground.png"), fullPage: true });

  await page.click("#restore");
  assert.equal(await page.inputValue("#hypothesis"), first);
  assert.equal(Number(await cardDelta(page, "bleu")), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test("texts and the pinned original survive a reload", async () => {
  const { context, page } = await openPage();
  await page.selectOption("#example", "swap");
  await setText(page, "hypothesis", "Daniel sent the contract to Maria.");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.inputValue("#hypothesis"), "Daniel sent the contract to Maria.");
  assert.match(await page.inputValue("#reference"), /^Maria sent the signed contract/);
  assert.notEqual(await cardDelta(page, "bleu"), null, "pinned original kept: a delta is shown");
  await context.close();
});

test("an empty reference explains itself instead of showing a score", async () => {
  const { context, page } = await openPage();
  await page.selectOption("#example", "custom");
  await page.fill("#reference", "");
  await setText(page, "hypothesis", "Anything at all.");
  const text = await page.textContent('.card[data-metric="bleu"] [data-role="delta"]');
  assert.match(text, /needs at least one reference/);
  assert.equal(await page.textContent('.card[data-metric="bleu"] [data-role="value"]'), "–");
  await context.close();
});

test("burn-wgpu runs a matmul on WebGPU and matches the CPU", async () => {
  const { context, page } = await openPage();
  const hasGpu = await page.evaluate(() => Boolean(navigator.gpu));
  assert.ok(hasGpu, "navigator.gpu missing: Chromium was not started with WebGPU");
  const report = await page.evaluate(() => window.wasmBindings.webgpuSelfTest());
  assert.equal(report.ok, true, JSON.stringify(report));
  assert.ok(report.maxAbsDiff <= 1e-4);
  assert.deepEqual(report.shape, [37, 96, 29]);
  await page.waitForFunction(() => document.getElementById("gpu-status").textContent === "WebGPU: ready");
  await context.close();
});
