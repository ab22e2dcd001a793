// The attack panel in headless Chromium: a DeepWordBug search on chrF equals
// the native CLI's (same z scale: the bundled pairs and the page's pair),
// the result goes into the hypothesis box with the original pinned, a long
// search can be stopped, and MiniLM-BERTScore (CPU, in the model worker) is
// attacked with its claimed score equal to the CLI's on the text found.
//
// Run through `make test` (it builds dist/ and the native CLI first).

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, CLI, playground } from "./harness.mjs";

const openPage = playground();
// A page route does not reach a worker started by a worker: a server of its
// own serves the attack's helper broken.
const openBroken = playground({ replace: { "/score-helper.js": 'throw new Error("this helper is broken");' } });
const MINILM = "sentence-transformers/all-MiniLM-L6-v2";
const REF = "The committee approved the new budget after a long debate on Tuesday.";
const HYP = "After a long debate on Tuesday, the committee passed the new budget.";

/** The CLI's outcome for the page's pair, attacked with the bundled pairs beside it (the page's z scale). */
function cliOutcome(args) {
  const dir = mkdtempSync(join(tmpdir(), "blindspot-attack-"));
  const bundled = readFileSync(join(ROOT, "src", "data", "sample.jsonl"), "utf8").trim();
  const data = join(dir, "pairs.jsonl");
  writeFileSync(data, `${bundled}\n${JSON.stringify({ id: "yours", hyp: HYP, ref: REF })}\n`);
  const out = execFileSync(CLI, ["attack", "--data", data, "--format", "jsonl", ...args], { stdio: ["ignore", "pipe", "ignore"] }).toString();
  const lines = out.trim().split("\n").map((l) => JSON.parse(l));
  return { header: lines[0], outcome: lines.at(-1) };
}

async function setPair(page) {
  await page.selectOption("#example", "custom");
  await page.fill("#reference", REF);
  await page.fill("#hypothesis", HYP);
}

/** Loads MiniLM on the CPU from the model panel and picks its BERTScore F1 to attack, over-penalising with 150 queries. */
async function attackMiniLm(page) {
  await setPair(page);
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  const key = await page.waitForFunction(() =>
    [...document.querySelectorAll("#attack-metric option")].find((o) => o.value.startsWith("bertscore-f@"))?.value);
  await page.selectOption("#attack-metric", await key.jsonValue());
  await page.selectOption("#attack-goal", "over-penalise");
  await page.fill("#attack-budget", "150");
}

async function search(page) {
  await page.click("#attack-run");
  await page.waitForFunction(() => ["done", "error"].includes(document.getElementById("attack-panel").dataset.state), null, { timeout: 240_000 });
  const state = await page.getAttribute("#attack-panel", "data-state");
  assert.equal(state, "done", await page.textContent("#attack-status"));
}

test("a DeepWordBug search on chrF equals the CLI's and can be used as the hypothesis", async () => {
  const { context, page, errors } = await openPage({ clearStorage: true });
  await setPair(page);
  await page.selectOption("#attack-metric", "chrf");
  await page.selectOption("#attack-goal", "over-penalise");
  await page.selectOption("#attack-strategy", "deepwordbug");
  await page.fill("#attack-budget", "200");
  await page.fill("#attack-seed", "3");
  assert.match(await page.textContent("#attack-description"), /bundled pairs and yours/);
  await search(page);
  const { header, outcome } = cliOutcome(["--metric", "chrf", "--budget", "200", "--seed", "3"]);
  const shown = await page.evaluate(() => ({ ...document.getElementById("attack-panel").dataset }));
  assert.equal(shown.success, String(outcome.success));
  assert.equal(Number(shown.finalScore), outcome.final_score);
  assert.equal(Number(shown.score), outcome.score);
  assert.equal(Number(shown.queries), outcome.queries);
  assert.equal(shown.text, outcome.text);
  assert.ok(outcome.success, "chrF is over-penalised by a few typos on this pair");
  const status = await page.textContent("#attack-status");
  assert.match(status, /Goal met/);
  assert.ok(status.includes(`std ${header.z.std.toPrecision(3)} over 17 pairs`), status);
  // The changed words are marked; the plot has one point per step.
  assert.ok((await page.locator("#attack-text mark").count()) >= 1);
  assert.equal(Number(await page.getAttribute("#attack-plot", "data-points")), outcome.trajectory.length);
  // A hypothesis typed since the search is not replaced by an edit of the old one.
  await page.fill("#hypothesis", `${HYP} More words.`);
  await page.click("#attack-apply");
  assert.equal(await page.inputValue("#hypothesis"), `${HYP} More words.`);
  assert.match(await page.textContent("#attack-status"), /^The hypothesis changed since this search/);
  await page.fill("#hypothesis", HYP);
  // Into the hypothesis box: the original is pinned, the chrF card shows the found score.
  await page.click("#attack-apply");
  assert.equal(await page.inputValue("#hypothesis"), outcome.text);
  // The attacked text is the pinned original: the chrF card's delta is the attack's drop.
  assert.match(await page.textContent("#pin-info"), new RegExp(`\\(${HYP.split(/\s+/).length} words\\)`));
  await page.waitForFunction(({ score, drop }) => {
    const v = document.querySelector('.card[data-metric="chrf"] [data-role="value"]');
    const d = document.querySelector('.card[data-metric="chrf"] [data-role="delta"]');
    return v && d && Math.abs(Number(v.dataset.raw) - score) < 1e-9 && Math.abs(Number(d.dataset.raw) - drop) < 1e-9;
  }, { score: outcome.final_score, drop: outcome.final_score - outcome.score }, { timeout: 20_000 });
  await page.click("#undo");
  assert.equal(await page.inputValue("#hypothesis"), HYP);
  // The panel's choices survive a reload, and so does the result, read back through the core.
  const text = await page.innerHTML("#attack-text");
  const kept = await page.evaluate(() => localStorage.getItem("blindspot.attack-result.v1"));
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.inputValue("#attack-budget"), "200");
  assert.equal(await page.inputValue("#attack-seed"), "3");
  const restored = await page.textContent("#attack-status");
  assert.match(restored, /^The last search \(finished on .+\) on chrF\. Goal met: /);
  assert.ok(restored.endsWith(`. ${status}`), restored);
  assert.deepEqual(await page.evaluate(() => ({ ...document.getElementById("attack-panel").dataset })), { ...shown, state: "done" });
  assert.equal(await page.innerHTML("#attack-text"), text);
  assert.equal(Number(await page.getAttribute("#attack-plot", "data-points")), outcome.trajectory.length);
  // It can still be used as the hypothesis.
  await page.click("#attack-apply");
  assert.equal(await page.inputValue("#hypothesis"), outcome.text);
  await page.click("#undo");
  // A damaged copy (a score edited by hand) is dropped with the core's reason.
  const damaged = JSON.parse(kept);
  const report = JSON.parse(damaged.report);
  report.outcome.final_score += 1;
  damaged.report = JSON.stringify(report);
  await page.evaluate((json) => localStorage.setItem("blindspot.attack-result.v1", json), JSON.stringify(damaged));
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.textContent("#attack-status"),
    "The last search's result could not be read back, and was dropped (the attack result is damaged: item yours (its change in z is not its score change over the z spread)).");
  assert.equal(await page.isHidden("#attack-result"), true);
  assert.equal(await page.evaluate(() => localStorage.getItem("blindspot.attack-result.v1")), null);
  assert.deepEqual(errors, []);
  await context.close();
});

test("MiniLM-BERTScore in the worker: the attack's claim is the CLI's score of the text it found; a long search stops", async () => {
  const { context, page, errors } = await openPage({ clearStorage: true });
  await attackMiniLm(page);
  // The engine counts the heavy jobs it runs: the page's own must run none.
  const jobsBefore = await page.evaluate(() => window.wasmBindings.jobsRun());
  await search(page);
  const shown = await page.evaluate(() => ({ ...document.getElementById("attack-panel").dataset }));
  const text = shown.text;
  const score = (hyp) => JSON.parse(execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl", "--metrics", "bertscore-f"],
    { input: JSON.stringify({ hyp, ref: REF }) + "\n" }).toString().split("\n")[0])["bertscore-f"];
  assert.ok(Math.abs(Number(shown.finalScore) - score(text)) <= 1e-4, `${shown.finalScore} vs ${score(text)}`);
  assert.ok(Math.abs(Number(shown.score) - score(HYP)) <= 1e-4);
  assert.equal(shown.success, "true", await page.textContent("#attack-status"));
  assert.ok(Number(shown.finalScore) < Number(shown.score));
  const status = await page.textContent("#attack-status");
  const rate = Number(status.match(/(\d+) queries\/s/)[1]);
  // The search ran in workers: the page's own engine ran no job of it (how
  // long the page's tasks take is benches/browser_attack.mjs's to report).
  assert.equal(await page.evaluate(() => window.wasmBindings.jobsRun()), jobsBefore);
  // One worker per core (up to 4) by default: helpers load their copies of the
  // model while the search runs (this short one may end first) ...
  const cores = await page.evaluate(() => navigator.hardwareConcurrency || 1);
  assert.ok(Number(shown.workers) >= 1 && Number(shown.workers) <= Math.min(4, cores), shown.workers);
  assert.doesNotMatch(status, /helpers left out/);
  // ... and score shares of each batch once loaded: the same search again,
  // until they have joined (their copies come from the model cache, which on
  // a busy machine can take longer than a short search).
  let pooled, pooledStatus;
  const deadline = Date.now() + 90_000;
  do {
    await search(page);
    pooled = await page.evaluate(() => ({ ...document.getElementById("attack-panel").dataset }));
    pooledStatus = await page.textContent("#attack-status");
  } while (Number(pooled.workers) < Math.min(4, cores) && Date.now() < deadline);
  assert.equal(Number(pooled.workers), Math.min(4, cores), pooledStatus);
  assert.doesNotMatch(pooledStatus, /helpers left out/);
  if (cores > 1) assert.match(pooledStatus, new RegExp(`queries/s on ${Math.min(4, cores)} workers`));
  // The same search on one worker finds the same text with the same queries and scores.
  await page.fill("#attack-workers", "1");
  await search(page);
  const alone = await page.evaluate(() => ({ ...document.getElementById("attack-panel").dataset }));
  const aloneRate = Number((await page.textContent("#attack-status")).match(/(\d+) queries\/s/)[1]);
  assert.equal(alone.workers, "1");
  for (const other of [shown, pooled]) {
    assert.deepEqual([alone.text, alone.queries, alone.success], [other.text, other.queries, other.success]);
    assert.ok(Math.abs(Number(alone.finalScore) - Number(other.finalScore)) <= 1e-6);
  }
  const pooledRate = Number(pooledStatus.match(/(\d+) queries\/s/)[1]);
  console.log(`MiniLM-BERTScore attack in the page (CPU, dev build): ${shown.queries} queries; ${rate} queries/s (first run), ${pooledRate} on ${pooled.workers} workers, ${aloneRate} on one`);
  // A raising search with a large budget: stopped by the user, the best so far kept.
  await page.selectOption("#attack-goal", "raise");
  await page.fill("#attack-budget", "100000");
  await page.click("#attack-run");
  await page.waitForFunction(() => Number(document.getElementById("attack-panel").dataset.queries ?? 0) > 0, null, { timeout: 120_000 });
  await page.click("#attack-stop");
  await page.waitForFunction(() => document.getElementById("attack-panel").dataset.state !== "running", null, { timeout: 120_000 });
  assert.match(await page.textContent("#attack-status"), /^Stopped/);
  assert.ok(Number(await page.getAttribute("#attack-panel", "data-queries")) < 100000);
  mkdirSync(join(ROOT, "test-artifacts"), { recursive: true });
  await page.locator("#attack-panel").screenshot({ path: join(ROOT, "test-artifacts", "attack-panel.png") });
  assert.deepEqual(errors, []);
  await context.close();
});

test("a scoring helper that cannot start is left out: the search runs alone with the same result and says so", async () => {
  const { context, page, errors } = await openBroken({ clearStorage: true });
  await attackMiniLm(page);
  await page.fill("#attack-workers", "2");
  // The helper dies as it starts, during the first search or after it; from
  // then on every search says why it ran alone.
  let status = "";
  for (let i = 0; i < 4 && !/helpers left out/.test(status); i++) {
    await search(page);
    status = await page.textContent("#attack-status");
  }
  assert.match(status, /helpers left out \(a scoring helper stopped: .*this helper is broken\)/);
  const broken = await page.evaluate(() => ({ ...document.getElementById("attack-panel").dataset }));
  assert.equal(broken.workers, "1");
  await search(page);
  assert.match(await page.textContent("#attack-status"), /helpers left out/);
  await page.fill("#attack-workers", "1");
  await search(page);
  const alone = await page.evaluate(() => ({ ...document.getElementById("attack-panel").dataset }));
  assert.deepEqual([broken.text, broken.queries, broken.finalScore], [alone.text, alone.queries, alone.finalScore]);
  // The model worker lived on: the cards still score a new hypothesis.
  const before = await page.getAttribute('.card[data-metric="bertscore"] [data-role="value"]', "data-raw");
  await page.fill("#hypothesis", "The committee passed the budget.");
  await page.waitForFunction((b) => document.querySelector('.card[data-metric="bertscore"] [data-role="value"]')?.dataset.raw !== b, before);
  // A model's metric chosen for the attack comes back after a reload, once
  // the model does (the page offers the last visit's models in one click),
  // though choices made before that save the panel.
  const picked = await page.inputValue("#attack-metric");
  assert.match(picked, /^bertscore-f@/);
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  await page.fill("#attack-budget", "120");
  await page.dispatchEvent("#attack-budget", "change");
  await page.click("#pair-models-load");
  await page.waitForFunction((k) => document.getElementById("attack-metric").value === k, picked, { timeout: 120_000 });
  assert.deepEqual(errors, []);
  await context.close();
});

test("CLARE on WebGPU: a masked LM loaded from the hub proposes the edits, and the claimed chrF is the CLI's", async () => {
  const fixture = join(ROOT, "tests", "fixtures", "plm", "bert_mlm");
  const { context, page, errors } = await openPage({
    clearStorage: true,
    beforeLoad: (p) =>
      p.route("https://huggingface.co/test/**", (route) => {
        const m = route.request().url().match(/huggingface\.co\/test\/tiny-mlm\/resolve\/main\/(.+)$/);
        const file = m && join(fixture, m[1]);
        if (!file || !existsSync(file)) return route.fulfill({ status: 404, body: "not found" });
        return route.fulfill({ status: 200, body: readFileSync(file), headers: { "content-type": "application/octet-stream" } });
      }),
  });
  await setPair(page);
  await page.fill("#model-custom", "test/tiny-mlm");
  await page.selectOption("#model-backend", "webgpu");
  await page.click("#model-load");
  await page.waitForFunction(() => document.getElementById("model-loaded").textContent.includes("test/tiny-mlm"), null, { timeout: 120_000 });
  await page.selectOption("#attack-metric", "chrf");
  await page.selectOption("#attack-goal", "over-penalise");
  await page.selectOption("#attack-strategy", "clare");
  await page.fill("#attack-budget", "120");
  assert.match(await page.textContent("#attack-description"), /masked LM test\/tiny-mlm/);
  await search(page);
  const shown = await page.evaluate(() => ({ ...document.getElementById("attack-panel").dataset }));
  const text = shown.text;
  assert.notEqual(text, HYP);
  assert.match(await page.textContent("#attack-signature"), /masked-lm:test\/tiny-mlm/);
  const native = JSON.parse(execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl", "--metrics", "chrf"],
    { input: JSON.stringify({ hyp: text, ref: REF }) + "\n" }).toString().split("\n")[0]).chrf;
  assert.equal(Number(shown.finalScore), native);
  assert.ok(Number(shown.queries) <= 120);
  assert.deepEqual(errors, []);
  await context.close();
});
