// First visit to the built site in headless Chromium: from navigation to the
// page's first paint and to ready (`body[data-ready]`: the engine compiled and
// started, the registries read, the first scores shown), each in a fresh
// browser context (empty HTTP cache). Files go out gzip-compressed, as a
// static host sends them. Two links: loopback, and an emulated 50 Mbit/s,
// 20 ms link (Chrome DevTools network emulation).
//
//   make dist && node benches/browser_load.mjs [runs]
//
// MODEL=q8 (or f32) then also loads all-MiniLM-L6-v2 at that precision on the
// CPU as the page's panel does (www/models.js: the site's int8 file where the
// manifest lists one), cache empty: time from the call to the loaded model,
// and the bytes it transferred.

import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const runs = Number(process.argv[2] ?? 5);
const { server, url } = await serveDist({ gzip: true });
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const model = process.env.MODEL;

for (const link of [null, { name: "50 Mbit/s, 20 ms", mbit: 50, latency: 20 }]) {
  const paint = [], ready = [], bytes = [], modelMs = [], modelBytes = [];
  for (let i = 0; i < runs; i++) {
    const context = await browser.newContext();
    const page = await context.newPage();
    let received = 0;
    page.on("requestfinished", async (r) => {
      const sizes = await r.sizes();
      received += sizes.responseBodySize + sizes.responseHeadersSize;
    });
    if (link) {
      const cdp = await context.newCDPSession(page);
      await cdp.send("Network.enable");
      const perSecond = (link.mbit * 1e6) / 8;
      await cdp.send("Network.emulateNetworkConditions", {
        offline: false, latency: link.latency, downloadThroughput: perSecond, uploadThroughput: perSecond,
      });
    }
    await page.goto(url, { waitUntil: "commit" });
    const readyAt = await (await page.waitForFunction(() => document.body?.dataset.ready === "true" && performance.now(),
      null, { timeout: 300_000, polling: 10 })).jsonValue();
    const fcp = await page.evaluate(() => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? NaN);
    paint.push(fcp);
    ready.push(readyAt);
    bytes.push(received);
    if (model) {
      // Requests still finishing from the page's load count for the page.
      await page.waitForTimeout(500);
      const before = received;
      const ms = await page.evaluate(async (precision) => {
        const models = await import("./models.js");
        const t0 = performance.now();
        await models.loadModel(window.wasmBindings, "sentence-transformers/all-MiniLM-L6-v2", { backend: "cpu", precision });
        return performance.now() - t0;
      }, model);
      await page.waitForTimeout(200);
      modelMs.push(ms);
      modelBytes.push(received - before);
    }
    await context.close();
  }
  console.log(`first visit over ${link ? link.name : "loopback"} (${runs} cold loads): first paint median ${median(paint).toFixed(0)} ms, ready median ${median(ready).toFixed(0)} ms (min ${Math.min(...ready).toFixed(0)}, max ${Math.max(...ready).toFixed(0)}); ${(median(bytes) / 1e6).toFixed(1)} MB transferred`);
  if (model) {
    console.log(`  then MiniLM at ${model} on the CPU, cache empty: loaded in median ${median(modelMs).toFixed(0)} ms (min ${Math.min(...modelMs).toFixed(0)}, max ${Math.max(...modelMs).toFixed(0)}); ${(median(modelBytes) / 1e6).toFixed(1)} MB transferred`);
  }
}
await browser.close();
server.close();
