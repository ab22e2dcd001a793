// The site under its Content-Security-Policy (www/_headers): every browser
// test is served with it and fails on a violation (harness.mjs); this file
// checks that the policy is really there and enforced, and walks the parts of
// the page that start workers, compile wasm and fetch files.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { playground } from "./harness.mjs";
import { DIST } from "./static-server.mjs";

const openPage = playground();

test("the page works under the site's CSP, which blocks inline script and style", async () => {
  const { context, page, errors } = await openPage({ clearStorage: true });
  const policy = await page.evaluate(async () =>
    (await fetch(location.href)).headers.get("content-security-policy"));
  assert.match(policy, /script-src 'self' 'wasm-unsafe-eval';/);
  assert.match(policy, /style-src 'self';/);
  // No inline script is left in the built page (Trunk's loader moved to a file).
  const html = readFileSync(join(DIST, "index.html"), "utf8");
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/);
  assert.deepEqual(errors, [], "the page loaded without a violation");

  // Injections that fetch the tagger's weights, on the main thread.
  await page.selectOption("#example", "custom");
  const hyp = "The minister visited Berlin on Monday. She said the new law protects workers and their families.";
  await page.fill("#reference", "The minister went to Berlin on Monday and praised the new law.");
  await page.fill("#hypothesis", hyp);
  await page.selectOption("#injection", "negation");
  await page.selectOption("#level", "1");
  await page.fill("#seed", "0");
  await page.click("#apply-injection");
  await page.waitForFunction((was) => document.querySelector("#hypothesis").value !== was, hyp);
  assert.match(await page.inputValue("#hypothesis"), /did not visit|does not protect/);
  // A model in the worker (its own wasm), with its heatmap drawn: labels as
  // SVG, the cells painted into a canvas placed through CSSOM.
  await page.selectOption("#model-backend", "cpu");
  await page.click("#add-minilm");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  await page.waitForSelector("#bertscore-heatmap svg");
  const canvas = await page.$eval("#bertscore-heatmap canvas", (c) => ({ width: c.width, left: c.style.left }));
  assert.ok(canvas.width > 0 && /^\d+px$/.test(canvas.left), JSON.stringify(canvas));
  assert.deepEqual(errors, []);

  // The policy is enforced: inline script and inline style are refused and reported.
  await page.evaluate(() => {
    const script = document.createElement("script");
    script.textContent = "window.inlineRan = true;";
    document.body.append(script);
    const div = document.createElement("div");
    div.setAttribute("style", "color: red");
    document.body.append(div);
  });
  assert.equal(await page.evaluate(() => window.inlineRan ?? false), false);
  await page.waitForTimeout(100);
  assert.ok(errors.some((e) => /script-src/.test(e)), `inline script reported: ${errors}`);
  assert.ok(errors.some((e) => /style-src/.test(e)), `inline style reported: ${errors}`);
  await context.close();
});
