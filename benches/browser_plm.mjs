// PLM engine speed in headless Chromium (the built dist/): all-MiniLM-L6-v2
// forward passes on WebGPU (SwiftShader here: a CPU-emulated GPU, so only the
// ratio to flex on the same machine means anything) and on the CPU (burn-flex
// in wasm), for the same 30-token sentence; and load time fp32 vs int8.
//
//   make build-web && node benches/browser_plm.mjs
//
// Prints medians in milliseconds and the ratios within this one run.

import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const { server, url } = await serveDist();
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
const page = await browser.newPage();
await page.goto(url);
await page.waitForSelector("body[data-ready=true]", { timeout: 120_000 });

const result = await page.evaluate(async () => {
  const models = await import("./models.js");
  const wasm = window.wasmBindings;
  const id = "sentence-transformers/all-MiniLM-L6-v2";
  const text = "The regional council said on Monday that the new bridge across the river will open in the spring.";
  const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];
  const out = {};
  // Warm the cache (the f32 files, and the int8 file where the site has one):
  // load times below exclude the download.
  await models.fetchCheckpoint(id);
  await models.fetchCheckpoint(id, undefined, "int8");
  for (const [backend, precision] of [["cpu", "f32"], ["cpu", "q8"], ["webgpu", "f32"], ["webgpu", "q8"]]) {
    const t0 = performance.now();
    const info = await models.loadModel(wasm, id, { backend, precision });
    const load = performance.now() - t0;
    const first = await wasm.embedText(info.handle, text, 6); // kernel compilation, autotune off
    const times = [];
    for (let i = 0; i < 10; i++) times.push((await wasm.embedText(info.handle, text, 6)).elapsedMs);
    out[`${backend}_${precision}`] = { loadMs: load, firstMs: first.elapsedMs, medianMs: median(times), tokens: first.tokens.length };
    wasm.unloadModel(info.handle);
  }
  return out;
});
for (const [k, v] of Object.entries(result)) {
  console.log(`${k.padEnd(12)} load ${v.loadMs.toFixed(0)} ms, first pass ${v.firstMs.toFixed(0)} ms, median pass ${v.medianMs.toFixed(1)} ms (${v.tokens} tokens)`);
}
console.log(`WebGPU/flex median pass ratio (f32): ${(result.webgpu_f32.medianMs / result.cpu_f32.medianMs).toFixed(2)}`);
console.log(`int8/f32 load ratio (CPU): ${(result.cpu_q8.loadMs / result.cpu_f32.loadMs).toFixed(2)}`);
await browser.close();
server.close();
