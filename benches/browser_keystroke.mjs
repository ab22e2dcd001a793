// Keystroke-to-updated-scores latency in headless Chromium (the built dist/).
//
//   make dist && node benches/browser_keystroke.mjs
//   make dist && LONG=40000 node benches/browser_keystroke.mjs
//
// Types 120 characters into the hypothesis of a 30-word pair, one input event
// at a time, and measures from the event to the end of the animation frame in
// which the scores were re-rendered. Prints median and p95 in milliseconds and
// the scoring call alone, so results can be compared as ratios within a run.
//
// With LONG=N, both texts hold N words (texts that long are scored once
// typing pauses): types 17 characters with real key presses, 30 ms apart,
// and reports the page thread's tasks over 50 ms while typing (their
// durations), the scoring passes the engine counted, and the pass once
// typing paused. A person judges these figures: the browser test checks only
// that no pass runs per keystroke.

import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const { server, url } = await serveDist();
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: CHROMIUM_ARGS,
});
const page = await browser.newPage();
await page.goto(url);
await page.waitForSelector("body[data-ready=true]", { timeout: 120_000 });

if (process.env.LONG) {
  const words = Number(process.env.LONG);
  const long = Array.from({ length: words }, (_, i) => `w${i % 997}`).join(" ");
  await page.selectOption("#example", "custom");
  await page.fill("#reference", long);
  await page.fill("#hypothesis", long);
  await page.waitForFunction(() => /when typing pauses/.test(document.getElementById("timing").textContent), null, { timeout: 120_000 });
  const before = await page.evaluate(() => {
    window.longTasks = [];
    new PerformanceObserver((list) => window.longTasks.push(...list.getEntries().map((e) => e.duration)))
      .observe({ type: "longtask" });
    return window.wasmBindings.scorePairCalls();
  });
  await page.focus("#hypothesis");
  await page.keyboard.press("End");
  const t0 = Date.now();
  await page.keyboard.type(" extra words here", { delay: 30 });
  const typedMs = Date.now() - t0;
  await page.waitForFunction((n) => window.wasmBindings.scorePairCalls() > n, before, { timeout: 120_000 });
  await page.waitForTimeout(500);
  const out = await page.evaluate((n) => ({
    long_tasks_ms: window.longTasks.map((d) => Math.round(d)),
    passes: window.wasmBindings.scorePairCalls() - n,
    timing: document.getElementById("timing").textContent,
  }), before);
  console.log(JSON.stringify({ words_a_side: words, keystrokes: 17, typed_ms: typedMs, ...out }, null, 2));
  await browser.close();
  server.close();
  process.exit(0);
}

const result = await page.evaluate(async () => {
  const ref = "The regional council said on Monday that the new bridge across the river will open in the spring, " +
    "two months later than planned, because of flooding.";
  const hyp = "On Monday the regional council said the new bridge over the river would open in spring, two months late";
  const addition = " because floods delayed the construction work for several weeks in a row this year, officials said.";
  const refEl = document.getElementById("reference");
  const hypEl = document.getElementById("hypothesis");
  refEl.value = ref;
  hypEl.value = hyp;
  hypEl.dispatchEvent(new Event("input"));
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const latencies = [];
  for (const ch of addition) {
    const t0 = performance.now();
    hypEl.value += ch;
    hypEl.dispatchEvent(new Event("input"));
    // The page's scoring callback was queued first, so it runs before this one.
    await new Promise((r) => requestAnimationFrame(r));
    latencies.push(performance.now() - t0);
  }
  const calls = [];
  const metrics = window.wasmBindings.metricRegistry().map((m) => m.id);
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    window.wasmBindings.scorePair({ hypothesis: hyp + addition.slice(0, i % 60), references: ref, metrics });
    calls.push(performance.now() - t0);
  }
  return { latencies, calls };
});

const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
console.log(JSON.stringify({
  keystroke_to_render_ms: { median: q(result.latencies, 0.5), p95: q(result.latencies, 0.95), n: result.latencies.length },
  score_pair_all_lexical_ms: { median: q(result.calls, 0.5), p95: q(result.calls, 0.95), n: result.calls.length },
}, null, 2));
await browser.close();
server.close();
