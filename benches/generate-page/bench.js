// Both tools' side of benches/browser_generate.mjs, one page: window.runBench(cfg)
// loads the model with one tool (cfg.tool: "blindspot", the production build's
// engine served under /burn/; "tjs", transformers.js under /tjs/ with
// onnxruntime-web under /ort/) at one precision (cfg.dtype: fp32, or q8 =
// Blindspot's int8 / transformers.js's model_quantized.onnx), then generates
// cfg.newTokens tokens greedily after cfg.prompt, cfg.runs times (the first is
// a warm-up), timing each new token as the tool hands it over. The model is
// served under /models/{cfg.modelId}/ in both tools' layouts
// (scripts/generate_bench_model.py). Every token is the tool's own.

const $ = (id) => document.getElementById(id);
const log = (msg) => {
  $("log").textContent += `${msg}\n`;
  console.log(`[bench] ${msg}`);
};
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = (s.length - 1) / 2;
  return (s[Math.floor(m)] + s[Math.ceil(m)]) / 2;
};
const r3 = (x) => Math.round(x * 1000) / 1000;
const SITE = "/burn/";

async function bytes(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/** One generation's timing from the instants each new token arrived. */
function timing(start, arrivals) {
  const first = arrivals[0] - start;
  const rest = arrivals[arrivals.length - 1] - arrivals[0];
  return { first_token_ms: first, decode_tokens_per_s: (arrivals.length - 1) / (rest / 1000), total_ms: arrivals[arrivals.length - 1] - start };
}

/** Blindspot: the engine's wasm as the built site links it, loadModel + generateText. */
async function blindspot(c) {
  const html = await (await fetch(`${SITE}index.html`)).text();
  const glue = html.match(/<link rel="modulepreload" href="\/?([^"]+\.js)"/)?.[1];
  const wasm = html.match(/<link rel="preload" href="\/?([^"]+\.wasm)"/)?.[1];
  if (!glue || !wasm) throw new Error(`no engine links in ${SITE}index.html: build the site first (make dist)`);
  const engine = await import(SITE + glue);
  await engine.default({ module_or_path: SITE + wasm });
  const dir = `/models/${c.modelId}/`;
  const [config, tokenizer, weights] = await Promise.all(["config.json", "tokenizer.json", "model.safetensors"].map((f) => bytes(dir + f)));
  const precision = c.dtype === "q8" ? "int8" : "f32";
  const info = await engine.loadModel(c.modelId, new TextDecoder().decode(config), tokenizer, [weights],
    undefined, "cpu", precision, undefined, undefined, undefined);
  const options = { max_new_tokens: c.newTokens, decoding: { method: "greedy" }, stop_at_eos: false };
  return {
    precision: info.precision,
    async generate() {
      const arrivals = [];
      const start = performance.now();
      const out = await engine.generateText(info.handle, c.prompt, options, () => { arrivals.push(performance.now()); });
      return { ...timing(start, arrivals), tokens: out.tokens ?? out.generation?.tokens, out };
    },
  };
}

/** transformers.js: AutoTokenizer + AutoModelForCausalLM, generate with a streamer. */
async function tjs(c) {
  const t = await import("/tjs/transformers.js");
  t.env.allowRemoteModels = false;
  t.env.allowLocalModels = true;
  t.env.localModelPath = "/models/";
  t.env.useBrowserCache = false;
  t.env.useWasmCache = false;
  t.env.backends.onnx.wasm.wasmPaths = "/ort/";
  t.env.backends.onnx.wasm.numThreads = 1;
  const tokenizer = await t.AutoTokenizer.from_pretrained(c.modelId);
  const model = await t.AutoModelForCausalLM.from_pretrained(c.modelId, { device: "wasm", dtype: c.dtype });
  return {
    precision: c.dtype,
    async generate() {
      const inputs = tokenizer(c.prompt);
      const arrivals = [];
      let prompt = true;
      const streamer = { put() { if (prompt) { prompt = false; return; } arrivals.push(performance.now()); }, end() {} };
      const start = performance.now();
      const out = await model.generate({ ...inputs, max_new_tokens: c.newTokens, min_new_tokens: c.newTokens, do_sample: false, streamer });
      const ids = Array.from(out.tolist()[0], Number);
      return { ...timing(start, arrivals), tokens: ids.slice(inputs.input_ids.dims[1]) };
    },
  };
}

window.runBench = async function runBench(cfg) {
  const c = { tool: "blindspot", dtype: "fp32", modelId: "gpt2-small-random", newTokens: 64, runs: 4,
    prompt: "The committee met on Tuesday and, after a long debate about the new budget, decided that", ...cfg };
  const res = { tool: c.tool, dtype: c.dtype, model: c.modelId, new_tokens: c.newTokens, prompt: c.prompt };
  const t0 = performance.now();
  const tool = await (c.tool === "tjs" ? tjs(c) : blindspot(c));
  res.load_ms = r3(performance.now() - t0);
  res.precision = tool.precision;
  log(`${c.tool} ${c.dtype}: loaded in ${res.load_ms.toFixed(0)} ms`);
  const runs = [];
  for (let i = 0; i < c.runs; i++) {
    const r = await tool.generate();
    if (r.tokens?.length !== c.newTokens) throw new Error(`${c.tool} generated ${r.tokens?.length} tokens, not ${c.newTokens}`);
    runs.push(r);
    log(`run ${i + 1}: first token ${r.first_token_ms.toFixed(0)} ms, ${r.decode_tokens_per_s.toFixed(2)} tokens/s`);
  }
  const timed = runs.slice(1);
  res.first_token_ms = r3(median(timed.map((r) => r.first_token_ms)));
  res.decode_tokens_per_s = r3(median(timed.map((r) => r.decode_tokens_per_s)));
  res.decode_tokens_per_s_runs = timed.map((r) => r3(r.decode_tokens_per_s));
  res.tokens = runs[runs.length - 1].tokens.map(Number);
  res.wall_ms = r3(performance.now() - t0);
  return res;
};
window.benchReady = true;
