// Greedy generation speed in headless Chromium, Blindspot's engine (the
// production build's wasm, burn-flex, one thread) against transformers.js
// (onnxruntime-web's wasm, one thread) on the same model and prompt
// (GPT-2-small-shaped, or SmolLM2-135M-shaped), fp32, int8 (q8) and 4-bit
// (q4: transformers.js's MatMulNBits file, Blindspot's q4), with
// their key/value caches: tokens per second after the first token (the
// decoding steps), the prompt's pass (first token; prefill tokens/s), load
// time. The two tools alternate, a fresh browser each; both must generate
// the same token ids at fp32 (same weights, greedy). With KEYSTROKES > 0,
// then Blindspot's live judge: a custom judge's score of a ~300-token prompt
// cold and per keystroke, the prefix cached (each precision).
//
//   make dist
//   (cd ../shared/bench/tjs-bench && npm ci)
//   ~/.cache/onnx-venv/bin/python scripts/generate_bench_model.py [gpt2|smollm2-135m]
//   [DTYPES=fp32,q8,q4] node benches/browser_generate.mjs [ROUNDS] [NEW_TOKENS] [MODEL] [PROMPT_WORDS] [KEYSTROKES]
//
// MODEL: gpt2-small-random (default) or smollm2-135m-random; PROMPT_WORDS:
// words of the prompt (default: the 17-token sentence). Prints one JSON line
// per run and a summary (median decode tokens/s per tool and precision, and
// Blindspot / transformers.js per round).

import { createServer } from "node:http";
import { readFile, stat } from "node:fs/promises";
import { join, resolve, extname } from "node:path";
import { tmpdir } from "node:os";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";

const ROOT = resolve(import.meta.dirname, "..");
const rounds = Number(process.argv[2] ?? 2);
const newTokens = Number(process.argv[3] ?? 64);
const modelId = process.argv[4] ?? "gpt2-small-random";
const promptWords = Number(process.argv[5] ?? 0);
const keystrokes = Number(process.argv[6] ?? 0);
// Precisions, transformers.js's names (Blindspot's: f32, int8, q4).
const DTYPES = (process.env.DTYPES ?? "fp32,q8,q4").split(",");
// Longer prompts are WMT21 references (tests/data), joined.
const wmt = (await readFile(join(ROOT, "tests", "data", "wmt21_de_en.jsonl"), "utf8")).trim().split("\n").map((l) => JSON.parse(l).ref_a);
const words = (n) => wmt.join(" ").split(/\s+/).slice(0, n).join(" ");
const prompt = promptWords > 0 ? words(promptWords) : undefined;
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

async function run(cfg, entry = "runBench") {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => window.benchReady === true);
    const result = await page.evaluate(({ c, entry }) => window[entry](c), { c: cfg, entry });
    return { ...result, page_errors: errors, chromium: browser.version() };
  } finally {
    await browser.close();
  }
}

// Blindspot loads `model.<precision>.bpk` where the model's folder has one.
const ENGINE_PRECISION = { fp32: "f32", q8: "int8", q4: "q4" };
const prepared = async (dtype) => stat(join(MODELS, modelId, `model.${ENGINE_PRECISION[dtype]}.bpk`)).then(() => true, () => false);

const results = [];
try {
  for (let r = 0; r < rounds; r++) {
    for (const dtype of DTYPES) {
      for (const tool of r % 2 ? ["tjs", "blindspot"] : ["blindspot", "tjs"]) {
        const res = { round: r + 1, ...(await run({ tool, dtype, newTokens, modelId, prepared: await prepared(dtype), ...(prompt ? { prompt } : {}) })) };
        results.push(res);
        console.log(JSON.stringify(res));
      }
    }
  }
  for (let k = 0; keystrokes > 0 && k < rounds; k++) {
    for (const dtype of DTYPES) {
      // A ~200-word reference: with the instructions, about 300 tokens.
      const res = await run({ dtype, modelId, keystrokes, prepared: await prepared(dtype), reference: words(200), hypothesis: "The committee approved the budget after a long debate" }, "runKeystrokes");
      console.log(JSON.stringify(res));
      console.error(`keystroke ${dtype}: ${res.prompt_tokens}-token prompt, cold ${res.cold_ms.toFixed(0)} ms (${res.cold_decoded} tokens run), keystroke median ${res.keystroke_ms.toFixed(0)} ms (${res.keystroke_decoded} tokens run)`);
    }
  }
} finally {
  server.close();
}

const of = (tool, dtype) => results.filter((x) => x.tool === tool && x.dtype === dtype);
for (const dtype of DTYPES) {
  const ours = of("blindspot", dtype), theirs = of("tjs", dtype);
  const ratios = ours.map((o, i) => o.decode_tokens_per_s / theirs[i].decode_tokens_per_s);
  const same = ours.every((o, i) => JSON.stringify(o.tokens) === JSON.stringify(theirs[i].tokens));
  console.error(`${dtype}: Blindspot ${ours.map((o) => o.decode_tokens_per_s.toFixed(1)).join(", ")} tokens/s ` +
    `(first token ${ours.map((o) => o.first_token_ms.toFixed(0)).join(", ")} ms, prefill ${ours.map((o) => o.prefill_tokens_per_s.toFixed(0)).join(", ")} tokens/s of ${ours[0]?.prompt_tokens}, load ${ours.map((o) => o.load_ms.toFixed(0)).join(", ")} ms); ` +
    `transformers.js ${theirs.map((o) => o.decode_tokens_per_s.toFixed(1)).join(", ")} tokens/s ` +
    `(first token ${theirs.map((o) => o.first_token_ms.toFixed(0)).join(", ")} ms, prefill ${theirs.map((o) => o.prefill_tokens_per_s.toFixed(0)).join(", ")} tokens/s of ${theirs[0]?.prompt_tokens}, load ${theirs.map((o) => o.load_ms.toFixed(0)).join(", ")} ms); ` +
    `ratio per round ${ratios.map((x) => x.toFixed(2)).join(", ")}; same tokens: ${same}`);
}
