// Greedy generation speed in headless Chromium, Blindspot's engine (the
// production build's wasm, burn-flex, one thread) against transformers.js
// (onnxruntime-web's wasm, one thread) on the same GPT-2-small-shaped model
// and prompt, fp32 and int8 (q8), with their key/value caches: tokens per
// second after the first token (the decoding steps), the first token's time
// (the prompt's pass), load time. The two tools alternate, a fresh browser
// each; both must generate the same token ids at fp32 (same weights, greedy).
//
//   make dist
//   (cd ../shared/bench/tjs-bench && npm ci)
//   ~/.cache/blindspot-py/bin/python scripts/generate_bench_model.py   # $TMPDIR/gen-bench-model
//   node benches/browser_generate.mjs [ROUNDS] [NEW_TOKENS]
//
// Prints one JSON line per run and a summary (median decode tokens/s per
// tool and precision, and Blindspot / transformers.js per round).

import { createServer } from "node:http";
import { readFile, stat } from "node:fs/promises";
import { join, resolve, extname } from "node:path";
import { tmpdir } from "node:os";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const ROOT = resolve(import.meta.dirname, "..");
const rounds = Number(process.argv[2] ?? 2);
const newTokens = Number(process.argv[3] ?? 64);
const TJS = resolve(ROOT, "..", "shared", "bench", "tjs-bench", "node_modules");
const MODELS = join(process.env.TMPDIR ?? tmpdir(), "gen-bench-model");
const mounts = {
  "/burn/": join(ROOT, "dist"),
  "/bench/": join(ROOT, "benches", "generate-page"),
  "/tjs/": join(TJS, "@huggingface", "transformers", "dist"),
  "/ort/": join(TJS, "onnxruntime-web", "dist"),
  "/models/": MODELS,
};
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };

const server = createServer(async (req, res) => {
  const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  const prefix = Object.keys(mounts).find((p) => path.startsWith(p));
  const file = prefix && resolve(mounts[prefix], path.slice(prefix.length));
  try {
    if (!file || !file.startsWith(mounts[prefix]) || !(await stat(file)).isFile()) throw new Error("not found");
    res.writeHead(200, {
      "content-type": TYPES[extname(file)] ?? "application/octet-stream",
      "cache-control": "no-store",
      "cross-origin-opener-policy": "same-origin",
      "cross-origin-embedder-policy": "require-corp",
    });
    res.end(await readFile(file));
  } catch {
    res.writeHead(404).end("not found");
  }
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const url = `http://127.0.0.1:${server.address().port}/bench/index.html`;

async function run(cfg) {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => window.benchReady === true);
    const result = await page.evaluate((c) => window.runBench(c), cfg);
    return { ...result, page_errors: errors, chromium: browser.version() };
  } finally {
    await browser.close();
  }
}

const results = [];
try {
  for (let r = 0; r < rounds; r++) {
    for (const dtype of ["fp32", "q8"]) {
      for (const tool of r % 2 ? ["tjs", "blindspot"] : ["blindspot", "tjs"]) {
        const res = { round: r + 1, ...(await run({ tool, dtype, newTokens })) };
        results.push(res);
        console.log(JSON.stringify(res));
      }
    }
  }
} finally {
  server.close();
}

const of = (tool, dtype) => results.filter((x) => x.tool === tool && x.dtype === dtype);
for (const dtype of ["fp32", "q8"]) {
  const ours = of("blindspot", dtype), theirs = of("tjs", dtype);
  const ratios = ours.map((o, i) => o.decode_tokens_per_s / theirs[i].decode_tokens_per_s);
  const same = ours.every((o, i) => JSON.stringify(o.tokens) === JSON.stringify(theirs[i].tokens));
  console.error(`${dtype}: Blindspot ${ours.map((o) => o.decode_tokens_per_s.toFixed(1)).join(", ")} tokens/s ` +
    `(first token ${ours.map((o) => o.first_token_ms.toFixed(0)).join(", ")} ms, load ${ours.map((o) => o.load_ms.toFixed(0)).join(", ")} ms); ` +
    `transformers.js ${theirs.map((o) => o.decode_tokens_per_s.toFixed(1)).join(", ")} tokens/s ` +
    `(first token ${theirs.map((o) => o.first_token_ms.toFixed(0)).join(", ")} ms, load ${theirs.map((o) => o.load_ms.toFixed(0)).join(", ")} ms); ` +
    `ratio per round ${ratios.map((x) => x.toFixed(2)).join(", ")}; same tokens: ${same}`);
}
