// The lessons view in headless Chromium, offline (lexical metrics and the
// bundled MiniLM): every step of every lesson runs, its claim is re-checked
// here on the numbers the table shows, the lexical numbers equal the CLI's
// for the texts shown, a step's link opens that step, arrows move between
// steps, and presentation mode fits a 1280x720 projector.
//
// Run through `make test` (it builds dist/ and the native CLI first).

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, CLI, playground, gpt2Folder } from "./harness.mjs";

const openPage = playground();

/** The CLI's scores of `hyp` against `ref` for lexical metric ids. */
function cli(hyp, ref, metrics) {
  const out = execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl", "--metrics", metrics.join(",")],
    { input: JSON.stringify({ hyp, ref }) + "\n" }).toString();
  return JSON.parse(out.split("\n")[0]);
}

/** The shown table: metric id -> values (raw). */
function table(page) {
  return page.evaluate(() => Object.fromEntries([...document.querySelectorAll("#step-table tr[data-metric]")]
    .map((tr) => [tr.dataset.metric, [...tr.querySelectorAll("td")].map((td) => Number(td.dataset.raw))])));
}

/**
 * The models steps offer, served from tiny random checkpoints (no real model
 * offline): the NLI classifier, GPT-2 (with the real GPT-2 tokenizer),
 * UniEval's T5 and an LLM judge (a Qwen2 with its chat template).
 */
const OFFERS = {
  "cross-encoder/nli-distilroberta-base": { size: "329 MB", dir: () => join(ROOT, "tests", "fixtures", "plm", "roberta_cls"), needs: /NLI model/ },
  gpt2: { size: "548 MB", dir: gpt2Folder, needs: /causal language model/ },
  "MingZhong/unieval-sum": { size: "3.1 GB", dir: () => join(ROOT, "tests", "fixtures", "t5", "tiny"), needs: /UniEval's evaluator/ },
  "Qwen/Qwen2.5-0.5B-Instruct": { size: "988 MB", dir: () => join(ROOT, "tests", "fixtures", "llm", "qwen2"), needs: /LLM judge/ },
};
const serveOffers = (page) => Promise.all(Object.entries(OFFERS).map(([id, offer]) => {
  const dir = offer.dir();
  return page.route(`https://huggingface.co/${id}/resolve/main/**`, (route) => {
    const file = join(dir, route.request().url().split("/resolve/main/")[1]);
    if (!existsSync(file)) return route.fulfill({ status: 404, body: "not found" });
    return route.fulfill({ status: 200, body: readFileSync(file), headers: { "content-type": "application/octet-stream" } });
  });
}));

test("every lesson step runs offline and its claim holds on the numbers shown", async () => {
  const { context, page, errors } = await openPage({ clearStorage: true, viewport: { width: 1280, height: 900 }, beforeLoad: serveOffers });
  await context.grantPermissions(["clipboard-read", "clipboard-write"]).catch(() => {});
  const lessons = await page.evaluate(() => window.wasmBindings.lessonRegistry());
  assert.ok(lessons.length >= 6);
  mkdirSync(join(ROOT, "test-artifacts"), { recursive: true });
  await page.click('#lesson-picker button[data-lesson="truncation"]');
  // BERTScore needs a model: the step says so and offers the bundled MiniLM.
  await page.click("#step-run");
  await page.waitForSelector("#step-load:not([hidden])", { timeout: 30_000 });
  assert.match(await page.textContent("#step-status"), /MiniLM/);
  // On the CPU: SwiftShader's WebGPU here is an emulation, far too slow for a search.
  await page.selectOption("#model-backend", "cpu");
  await page.click("#step-load");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  const loaded = new Set();
  for (const lesson of lessons) {
    await page.click(`#lesson-picker button[data-lesson="${lesson.id}"]`);
    for (let i = 0; i < lesson.steps.length; i++) {
      const step = lesson.steps[i];
      assert.equal(await page.getAttribute("#lesson-step", "data-step"), String(i));
      // A step that needs a model first asks for it and offers the registry's small one with its size.
      const offer = step.modelOffer;
      if (offer && !loaded.has(offer)) {
        await page.click("#step-run");
        await page.waitForSelector("#step-load:not([hidden])", { timeout: 30_000 });
        assert.equal(await page.textContent("#step-load"), `Load ${offer} (${OFFERS[offer].size})`);
        assert.match(await page.textContent("#step-status"), OFFERS[offer].needs);
        await page.click("#step-load");
        await page.waitForFunction((id) => document.getElementById("model-loaded").textContent.includes(id), offer, { timeout: 120_000 });
        loaded.add(offer);
      }
      await page.click("#step-run");
      await page.waitForFunction(() => document.getElementById("step-result").dataset.held !== undefined
        || document.getElementById("step-status").className === "bad", null, { timeout: 240_000 });
      // A random NLI classifier or GPT-2 stands in for a real one: its verdict is checked, not required.
      if (!offer) assert.equal(await page.getAttribute("#step-result", "data-held"), "true", `${lesson.id} ${i}: ${await page.textContent("#step-status")}`);
      else assert.notEqual(await page.getAttribute("#step-result", "data-held"), null, `${lesson.id} ${i}: ${await page.textContent("#step-status")}`);
      const values = await table(page);
      const texts = await page.$$eval("#step-texts p", (ps) => ps.map((p) => p.childNodes[1].textContent));
      texts.labels = await page.$$eval("#step-texts p .label", (ls) => ls.map((l) => l.textContent.replace(/:$/, "")));
      // The claim, re-checked on the shown numbers.
      const c = step.claim;
      const v = values[c.metric];
      const held = {
        barely: () => v[c.a] - v[c.b] <= c.slack,
        higher: () => v[c.a] > v[c.b],
        dropsMore: () => v[0] - v[c.a] > v[0] - v[c.b],
        highest: () => v.every((x, k) => k === c.a || v[c.a] > x),
        lowest: () => v.every((x, k) => k === c.a || v[c.a] < x),
        tracksMore: () => Math.abs(v[texts.labels.indexOf(c.correlate)]) > Math.abs(v[texts.labels.indexOf(c.human)]),
        baseline: () => true,
        attackMet: () => true,
      }[c.kind]();
      assert.equal(String(held), await page.getAttribute("#step-result", "data-held"), `${lesson.id} ${i}: ${JSON.stringify(values)}`);
      if (c.kind === "attackMet") assert.match(await page.textContent("#step-claim"), /met its goal/);
      assert.equal(texts.length, values[step.metrics[0]].length);
      // Lexical numbers equal the CLI's for the texts shown (an audit's "texts" are its columns).
      const lexical = step.action.kind === "audit" ? [] : step.metrics.filter((m) => ["bleu", "chrf", "rougeL"].includes(m));
      if (step.action.kind === "audit") {
        assert.deepEqual(texts.labels, ["coherence", "consistency", "fluency", "relevance", "length", "coverage", "density"]);
        assert.equal(await page.isVisible("#step-open"), false);
        assert.match(texts[3], /demonstration/);
      }
      if (lexical.length) texts.forEach((t, j) => {
        const native = cli(t, step.texts.reference, lexical);
        // Equal to the last bits that wasm's and the native libm's exp/ln may differ in.
        for (const m of lexical) assert.ok(Math.abs(values[m][j] - native[m]) <= 1e-9, `${lesson.id} ${i} ${m} text ${j}: ${values[m][j]} vs ${native[m]}`);
      });
      if (lesson.id === "truncation" && i === 1) {
        // The step's results as JSON: the numbers shown, the claim and the signatures.
        const [download] = await Promise.all([page.waitForEvent("download"), page.click("#step-export")]);
        const data = JSON.parse(readFileSync(await download.path(), "utf8"));
        assert.equal(data.lesson, "truncation");
        assert.equal(data.step, 2);
        assert.equal(data.claim.held, true);
        assert.deepEqual(Object.fromEntries(data.rows.map((r) => [r.metric, r.values])), values);
        assert.ok(data.rows.every((r) => r.signature.includes("|v:")));
      }
      if (i === lesson.steps.length - 1) await page.locator("#lessons").screenshot({ path: join(ROOT, "test-artifacts", `lesson-${lesson.id}.png`) });
      if (i < lesson.steps.length - 1) await page.click("#step-next");
    }
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test("a step's link opens it, arrows move between steps, presentation mode fits 1280x720", async () => {
  const { context, page, errors } = await openPage({ clearStorage: true, viewport: { width: 1280, height: 720 } });
  const url = page.url().split("#")[0];
  await page.goto(`${url}#lesson=small-edits&step=2`);
  await page.waitForSelector("body[data-ready=true]");
  await page.waitForSelector("#lesson-step:not([hidden])");
  assert.equal(await page.getAttribute("#lesson-step", "data-lesson"), "small-edits");
  assert.equal(await page.getAttribute("#lesson-step", "data-step"), "1");
  assert.equal(await page.textContent("#step-title"), "Let the search find a typo");
  // A step number that is not a whole number opens the lesson's first step.
  await page.evaluate(() => { location.hash = "lesson=small-edits&step=1.5"; });
  await page.waitForFunction(() => document.getElementById("lesson-step").dataset.step === "0");
  await page.evaluate(() => { location.hash = "lesson=small-edits&step=2"; });
  await page.waitForFunction(() => document.getElementById("lesson-step").dataset.step === "1");
  await page.focus("#lesson-step");
  await page.keyboard.press("ArrowLeft");
  assert.equal(await page.getAttribute("#lesson-step", "data-step"), "0");
  assert.ok(page.url().endsWith("#lesson=small-edits&step=1"), page.url());
  await page.keyboard.press("ArrowLeft");
  // Back across the lesson boundary to the previous lesson's last step.
  assert.equal(await page.getAttribute("#lesson-step", "data-lesson"), "paraphrase");
  await page.keyboard.press("ArrowRight");
  assert.equal(await page.getAttribute("#lesson-step", "data-lesson"), "small-edits");
  // Arrows typed in a text box stay there.
  await page.focus("#hypothesis");
  await page.keyboard.press("ArrowRight");
  assert.equal(await page.getAttribute("#lesson-step", "data-step"), "0");
  // So do arrows with the focus outside the lessons (they scroll the page).
  await page.evaluate(() => document.activeElement.blur());
  await page.keyboard.press("ArrowRight");
  assert.equal(await page.getAttribute("#lesson-step", "data-step"), "0");
  // Presentation: only the lesson, large type, the step fits the screen.
  await page.click("#lesson-present");
  assert.ok(await page.evaluate(() => document.body.classList.contains("presenting")));
  assert.equal(await page.isVisible("#hypothesis"), false);
  const box = await page.locator("#lesson-step").boundingBox();
  assert.ok(box.width <= 1280 && box.y + Math.min(box.height, 400) <= 720, JSON.stringify(box));
  await page.keyboard.press("ArrowRight");
  assert.equal(await page.getAttribute("#lesson-step", "data-step"), "1");
  await page.screenshot({ path: join(ROOT, "test-artifacts", "lesson-presenting.png") });
  // Enter on a focused button presses that button, not Run.
  await page.focus("#step-prev");
  await page.keyboard.press("Enter");
  assert.equal(await page.getAttribute("#lesson-step", "data-step"), "0");
  assert.equal(await page.isHidden("#step-result"), true, "the step did not run");
  await page.focus("#lesson-step");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("Escape");
  assert.equal(await page.evaluate(() => document.body.classList.contains("presenting")), false);
  // "Open in the playground" puts the step's texts in the boxes, pinned.
  await page.click("#step-open");
  const lessons = await page.evaluate(() => window.wasmBindings.lessonRegistry());
  const step = lessons.find((l) => l.id === "small-edits").steps[1];
  assert.equal(await page.inputValue("#hypothesis"), step.texts.hypothesis);
  assert.equal(await page.inputValue("#reference"), step.texts.reference);
  assert.deepEqual(errors, []);
  await context.close();
});

test("the single-pair state round-trips through its link, models and card options included; the bundled MiniLM is one click away", async () => {
  const { context, page, errors } = await openPage({ clearStorage: true });
  await page.selectOption("#example", "custom");
  await page.fill("#source", "Der Zug hatte zwei Stunden Verspätung.");
  await page.fill("#reference", "The train was two hours late.");
  await page.fill("#hypothesis", "The train was delayed by two hours – große Verspätung.");
  await page.click("#pin");
  await page.selectOption("#injection", "char_swap");
  await page.click("#apply-injection");
  const injected = await page.inputValue("#hypothesis");
  assert.notEqual(injected, "The train was delayed by two hours – große Verspätung.");
  await page.click("#copy-link");
  const url = await page.getAttribute("#copy-link", "data-url");
  assert.match(url, /#pair=[A-Za-z0-9_-]+$/);
  const { context: other, page: fresh, errors: otherErrors } = await openPage({ clearStorage: true });
  // A fresh load of the link (a goto within the page would only change the hash).
  await fresh.goto("about:blank");
  await fresh.goto(url);
  await fresh.waitForSelector("body[data-ready=true]");
  assert.equal(await fresh.inputValue("#hypothesis"), injected);
  assert.equal(await fresh.inputValue("#reference"), "The train was two hours late.");
  assert.equal(await fresh.inputValue("#source"), "Der Zug hatte zwei Stunden Verspätung.");
  assert.match(await fresh.textContent("#pin-info"), /\(10 words\)/);
  assert.equal(await fresh.isVisible("#hypothesis-diff mark"), true);
  // The deltas against the shared pinned original are the ones the first page shows.
  const delta = (p) => p.getAttribute('.card[data-metric="chrf"] [data-role="delta"]', "data-raw");
  await fresh.waitForSelector('.card[data-metric="chrf"] [data-role="delta"][data-raw]');
  assert.equal(await delta(fresh), await delta(page));
  await other.close();
  // A hand-edited link whose marks do not fit its text still opens, unmarked.
  const pair = JSON.parse(Buffer.from(url.split("#pair=")[1], "base64url").toString("utf8"));
  const bad = Buffer.from(JSON.stringify({ ...pair, e: [null, { start: 5 }] })).toString("base64url");
  const { context: fifth, page: badPage, errors: badErrors } = await openPage({ clearStorage: true });
  // A fresh load of the link (a goto within the page would only change the hash).
  await badPage.goto("about:blank");
  await badPage.goto(`${url.split("#")[0]}#pair=${bad}`);
  await badPage.waitForSelector("body[data-ready=true]");
  assert.equal(await badPage.inputValue("#hypothesis"), injected);
  assert.equal(await badPage.locator("#hypothesis-diff mark").count(), 0);
  assert.deepEqual(badErrors, []);
  await fifth.close();
  // A sample dataset for the suite without bringing a file.
  await page.click("#suite-sample");
  assert.match(await page.textContent("#suite-status"), /blindspot-sample\.jsonl: 16 items/);
  assert.equal(await page.isEnabled("#suite-run"), true);
  // First visit: BERTScore is one click from the scores panel.
  assert.equal(await page.isVisible("#add-minilm"), true);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#add-minilm");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  assert.equal(await page.isVisible("#add-minilm"), false);
  // Its heatmap saves as SVG or PNG.
  assert.equal(await page.isVisible('#bertscore-heatmap .chart-tools button[data-export="png"]'), true);

  // The link also carries the models (id, backend, precision), each card's
  // options and the ROUGE stemmer; the models load only on a click.
  const value = (p) => p.getAttribute('.card[data-metric="bertscore"] [data-role="value"]', "data-raw");
  const plain = await value(page);
  await page.check('.card[data-metric="bertscore"] [data-role="rescale"]');
  await page.waitForFunction((before) =>
    document.querySelector('.card[data-metric="bertscore"] [data-role="value"]').dataset.raw !== before, plain);
  const rescaled = await value(page);
  await page.check("#rouge-stemmer");
  await page.click("#copy-link");
  const link = await page.getAttribute("#copy-link", "data-url");
  const { context: third, page: linked, errors: linkedErrors } = await openPage({ clearStorage: true });
  // A fresh load of the link (a goto within the page would only change the hash).
  await linked.goto("about:blank");
  await linked.goto(link);
  await linked.waitForSelector("body[data-ready=true]");
  await linked.waitForSelector("#pair-models:not([hidden])");
  assert.match(await linked.textContent("#pair-models-text"),
    /^This link scored with: sentence-transformers\/all-MiniLM-L6-v2 \(fp32, [\d.]+ MB/);
  // A link naming int8 is offered, and loaded, as int8; older links spell it
  // as the CLI does ("q8"), which the engine's name replaces.
  const carried = JSON.parse(Buffer.from(link.split("#pair=")[1], "base64url").toString("utf8"));
  carried.m = carried.m.map((m) => ({ ...m, precision: "q8" }));
  const int8Link = `${link.split("#")[0]}#pair=${Buffer.from(JSON.stringify(carried)).toString("base64url")}`;
  const { context: fourth, page: int8Page, errors: int8Errors } = await openPage({ clearStorage: true });
  // A fresh load of the link (a goto within the page would only change the hash).
  await int8Page.goto("about:blank");
  await int8Page.goto(int8Link);
  await int8Page.waitForSelector("#pair-models:not([hidden])");
  assert.match(await int8Page.textContent("#pair-models-text"), /all-MiniLM-L6-v2 \(int8, [\d.]+ MB/);
  await int8Page.click("#pair-models-load");
  await int8Page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  assert.equal(await int8Page.inputValue("#model-precision"), "int8");
  assert.match(await int8Page.textContent("#model-status"), /all-MiniLM-L6-v2: .*, int8, /);
  assert.deepEqual(int8Errors, []);
  await fourth.close();
  assert.equal(await linked.isChecked("#rouge-stemmer"), true);
  assert.equal(await linked.locator('.card[data-metric="bertscore"]').count(), 0, "nothing loads before the click");
  assert.doesNotMatch(linked.url(), /#pair=/, "the link is applied once: a reload keeps later edits");
  await linked.click("#pair-models-load");
  await linked.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  assert.equal(await linked.isChecked('.card[data-metric="bertscore"] [data-role="rescale"]'), true);
  assert.equal(await linked.getAttribute('.card[data-metric="bertscore"]', "data-backend"), "cpu");
  await linked.waitForFunction((want) =>
    document.querySelector('.card[data-metric="bertscore"] [data-role="value"]').dataset.raw === want, rescaled);
  assert.equal(await linked.isHidden("#pair-models"), true);
  // A reload offers the models of the last visit again, with the card's options.
  await linked.reload();
  await linked.waitForSelector("#pair-models:not([hidden])");
  assert.match(await linked.textContent("#pair-models-text"), /^Your last visit used: sentence-transformers\/all-MiniLM-L6-v2/);
  await linked.click("#pair-models-load");
  await linked.waitForFunction((want) =>
    document.querySelector('.card[data-metric="bertscore"] [data-role="value"]')?.dataset.raw === want, rescaled, { timeout: 120_000 });
  assert.deepEqual([...errors, ...otherErrors, ...linkedErrors], []);
  await third.close();
  await context.close();
});
