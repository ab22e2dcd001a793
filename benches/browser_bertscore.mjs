// Keystroke-to-updated-BERTScore latency in headless Chromium (the built dist/):
// all-MiniLM-L6-v2 loaded from dist/models on the CPU (burn-flex in wasm) and on
// WebGPU (SwiftShader here), a ~30-token pair; types 18 characters, one input
// event at a time, and measures from each event to the moment the BERTScore
// card shows the score of exactly that text. Prints median and p95 (ms), for
// the first keystrokes after the model loads and, given WARM, again after WARM
// more keystrokes (V8's optimizing compiles of the wasm done by then).
//
//   make dist && node benches/browser_bertscore.mjs [cpu|webgpu] [WARM] [f32|q8] [PACE_MS]
//
// (q8: the int8 model; on the CPU its products are integer ones.) By default
// each keystroke follows the moment the previous one's score appears, so the
// page is still drawing that score while the next pass runs (typing about 25
// characters a second). With PACE_MS the next keystroke waits until PACE_MS
// after the previous one (100: 10 characters a second, a fast typist's
// 120 words a minute), when the score comes sooner.
//
// With TRACE=N in the environment it then types N more keystrokes under a
// Chrome trace and prints the main thread's longest tasks: wall time, the
// thread's own CPU time (the rest it waited for a core) and what filled them,
// and the thread's CPU time per keystroke: in all, by kind of work (script,
// style, layout, paint, GC), the elements restyled, and each event's own CPU
// time (less the events nested in it). The typing loop waits for each score
// through a MutationObserver, so it adds no tasks of its own to that thread.

import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const backend = process.argv[2] ?? "cpu";
const warm = Number(process.argv[3] ?? 0);
if (!Number.isInteger(warm) || warm < 0) throw new Error(`WARM must be a whole number of keystrokes, not ${process.argv[3]}`);
const pace = Number(process.argv[5] ?? 0);
if (!Number.isFinite(pace) || pace < 0) throw new Error(`PACE_MS must be a number of milliseconds, not ${process.argv[5]}`);
const { server, url } = await serveDist();
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
const page = await browser.newPage();
await page.goto(url);
await page.waitForSelector("body[data-ready=true]", { timeout: 120_000 });
// The engine's name for the precision asked ("int8" for the CLI's "q8"); it refuses an unknown one.
const precision = await page.evaluate((p) => window.wasmBindings.precisionName(p), process.argv[4] ?? "f32");
await page.selectOption("#example", "custom");
await page.fill("#reference", "The regional council said on Monday that the new bridge across the river will open in the spring, two months later than planned.");
const start = "On Monday the regional council said the new bridge over the river would open in spring";
await page.fill("#hypothesis", start);
await page.selectOption("#model-pick", "sentence-transformers/all-MiniLM-L6-v2");
await page.selectOption("#model-backend", backend);
await page.selectOption("#model-precision", precision);
await page.click("#model-load");
await page.waitForSelector('.card[data-metric="bertscore"][data-scored-hypothesis]', { timeout: 300_000 });
// Loading scrolled the models panel into view; a person typing looks at the
// texts and the scores beside them (panels off screen are not drawn).
await page.focus("#hypothesis");

// Types `chars` one input event at a time; per keystroke, the time until the
// card shows the score of exactly that text, and the engine's own time for the
// pass (the card's "· N ms").
// Also the main thread's long tasks (over 50 ms) while typing.
const type = (chars) => page.evaluate(async ([chars, pace]) => {
  const hyp = document.getElementById("hypothesis");
  const card = document.querySelector('.card[data-metric="bertscore"]');
  const latencies = [];
  const passes = [];
  const longTasks = [];
  const observer = new PerformanceObserver((list) => longTasks.push(...list.getEntries().map((e) => e.duration)));
  observer.observe({ type: "longtask" });
  for (const ch of chars) {
    const t0 = performance.now();
    hyp.value += ch;
    hyp.dispatchEvent(new Event("input"));
    const want = hyp.value;
    // Woken by the card's attribute changing, not by polling: a timer every
    // few ms would add its own tasks to the main thread this measures. The
    // next keystroke then comes in a task of its own after the frame that
    // shows this score, as a real one does (typed in the same task, it would
    // share that frame's style, layout and paint).
    let shown = 0;
    await new Promise((resolve, reject) => {
      const done = () => {
        if (card.dataset.scoredHypothesis !== want) return false;
        shown = performance.now();
        watch.disconnect();
        clearTimeout(timer);
        requestAnimationFrame(() => setTimeout(resolve, 0));
        return true;
      };
      const watch = new MutationObserver(done);
      const timer = setTimeout(() => {
        watch.disconnect();
        reject(new Error(`no score for ${JSON.stringify(want)} within 60 s`));
      }, 60_000);
      watch.observe(card, { attributes: true, attributeFilter: ["data-scored-hypothesis"] });
      done();
    });
    latencies.push(shown - t0);
    passes.push(Number(card.querySelector('[data-role="parts"]').textContent.match(/(\d+) ms/)[1]));
    const next = t0 + pace;
    while (performance.now() < next) await new Promise((r) => setTimeout(r, Math.max(1, next - performance.now())));
  }
  await new Promise((r) => setTimeout(r, 100)); // the last keystroke's drawing
  longTasks.push(...observer.takeRecords().map((e) => e.duration));
  observer.disconnect();
  return { latencies, passes, longTasks };
}, [chars, pace]);
const quantiles = (values) => {
  const v = [...values].sort((a, b) => a - b);
  return (p) => v[Math.min(v.length - 1, Math.floor(p * v.length))];
};
const report = (label, { latencies, passes, longTasks }) => {
  const q = quantiles(latencies), pass = quantiles(passes);
  const blocked = longTasks.length ? `${longTasks.length}, the longest ${Math.max(...longTasks).toFixed(0)} ms` : "none";
  console.log(`BERTScore keystroke latency on ${backend} (${precision}${pace ? `, keystrokes at least ${pace} ms apart` : ", back to back"}), ${label}: median ${q(0.5).toFixed(0)} ms, p95 ${q(0.95).toFixed(0)} ms (${latencies.length} keystrokes); the model pass itself: median ${pass(0.5).toFixed(0)} ms; main-thread tasks over 50 ms: ${blocked}`);
};
const phrase = ", two months late.";
report("first keystrokes after load", await type(phrase));
if (warm > 0) {
  // V8 first runs wasm from its baseline compiler and recompiles hot functions
  // with its optimizing one on background threads, which here share the two
  // cores with the pass. After `warm` more keystrokes that is over.
  const reset = async () => {
    await page.fill("#hypothesis", start);
    await page.waitForFunction(() => document.querySelector('.card[data-metric="bertscore"]').dataset.scoredHypothesis === document.getElementById("hypothesis").value);
  };
  // In rounds of 50 from the same start, so the text stays a sentence long.
  for (let done = 0; done < warm; done += 50) {
    await type(Array.from({ length: Math.min(50, warm - done) }, (_, i) => " and later"[i % 10]).join(""));
    await reset();
  }
  report(`after ${warm} more keystrokes`, await type(phrase));
}
if (process.env.TRACE) {
  const n = Number(process.env.TRACE);
  if (!Number.isInteger(n) || n < 1) throw new Error(`TRACE must be a number of keystrokes, not ${process.env.TRACE}`);
  await browser.startTracing(page, { categories: ["devtools.timeline", "disabled-by-default-devtools.timeline", "toplevel", "v8"] });
  const traced = await type(Array.from({ length: n }, (_, i) => " and later"[i % 10]).join(""));
  const { traceEvents } = JSON.parse(await browser.stopTracing());
  report(`${n} keystrokes, traced`, traced);
  longestTasks(traceEvents, n);
}
await browser.close();
server.close();

/** The renderer main thread's longest tasks in a trace, with what filled each. */
function longestTasks(events, keystrokes) {
  const main = events.find((e) => e.ph === "M" && e.name === "thread_name" && e.args.name === "CrRendererMain");
  if (!main) throw new Error("the trace names no renderer main thread (CrRendererMain): nothing to report");
  const own = events.filter((e) => e.ph === "X" && e.pid === main.pid && e.tid === main.tid);
  const tasks = own.filter((e) => e.name === "ThreadControllerImpl::RunTask").sort((a, b) => b.dur - a.dur);
  if (!tasks.length) throw new Error("the trace holds no main-thread tasks (ThreadControllerImpl::RunTask): a Chromium that names them otherwise?");
  const ms = (us) => (us / 1000).toFixed(1);
  console.log(`main-thread tasks: ${tasks.length}; over 50 ms: ${tasks.filter((t) => t.dur > 50_000).length}; the most CPU time of any: ${ms(Math.max(...tasks.map((t) => t.tdur ?? 0)))} ms`);
  // Per keystroke: the thread's CPU time in all, and in the events that fill
  // it (script can hold a forced style recalc or layout, so these overlap).
  const cpu = (es) => es.reduce((a, e) => a + (e.tdur ?? 0), 0) / keystrokes / 1000;
  const named = ["FunctionCall", "UpdateLayoutTree", "Layout", "PrePaint", "Paint", "Layerize", "MajorGC", "MinorGC"]
    .map((name) => `${name} ${cpu(own.filter((e) => e.name === name)).toFixed(2)}`);
  const styled = own.filter((e) => e.name === "UpdateLayoutTree").reduce((a, e) => a + (e.args?.elementCount ?? 0), 0) / keystrokes;
  console.log(`main-thread CPU per keystroke: ${cpu(tasks).toFixed(2)} ms in all; ${named.join(", ")} ms; elements restyled: ${styled.toFixed(0)}`);
  const selfTime = [...ownCpu(own)].sort((a, b) => b[1] - a[1]).slice(0, 10)
    .map(([name, us]) => `${name} ${(us / keystrokes / 1000).toFixed(2)}`);
  console.log(`  its own CPU per keystroke by event (nested events not counted twice): ${selfTime.join(", ")} ms`);
  for (const t of tasks.slice(0, 6)) {
    const parts = new Map();
    for (const e of own) {
      if (e === t || e.name.includes("RunTask") || e.ts < t.ts || e.ts + e.dur > t.ts + t.dur) continue;
      parts.set(e.name, (parts.get(e.name) ?? 0) + e.dur);
    }
    const top = [...parts].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([name, d]) => `${name} ${ms(d)}`);
    console.log(`  ${ms(t.dur)} ms wall, ${ms(t.tdur ?? 0)} ms CPU: ${top.join(", ")}`);
  }
}

/**
 * Each event name's own CPU time on one thread: an event's `tdur` less that of
 * the events nested in it, so a task's time falls to the work that filled it.
 */
function ownCpu(events) {
  // Outer events first; Chrome writes a complete event when it ends, so of
  // two with the same start and length the later one written holds the other.
  const sorted = events.map((e, i) => [e, i]).filter(([e]) => e.tdur !== undefined)
    .sort(([a, i], [b, j]) => a.ts - b.ts || b.dur - a.dur || b.tdur - a.tdur || j - i).map(([e]) => e);
  const totals = new Map();
  const stack = [];
  const close = (e) => totals.set(e.name, (totals.get(e.name) ?? 0) + e.tdur - e.nested);
  for (const e of sorted) {
    while (stack.length && stack.at(-1).ts + stack.at(-1).dur <= e.ts) close(stack.pop());
    const node = { name: e.name, ts: e.ts, dur: e.dur, tdur: e.tdur, nested: 0 };
    if (stack.length) stack.at(-1).nested += e.tdur;
    stack.push(node);
  }
  while (stack.length) close(stack.pop());
  return totals;
}
