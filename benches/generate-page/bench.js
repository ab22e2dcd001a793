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
  const precision = { q8: "int8", q4: "q4" }[c.dtype] ?? "f32";
  // A prepared file (`model.<precision>.bpk`, written by `blindspot prepare`)
  // where the runner found one: a model too large to load from f32 files.
  const weightsFile = c.prepared ? `model.${precision}.bpk` : "model.safetensors";
  const [config, tokenizer, weights] = await Promise.all(["config.json", "tokenizer.json", weightsFile].map((f) => bytes(dir + f)));
  const info = await engine.loadModel(c.modelId, new TextDecoder().decode(config), tokenizer, c.prepared ? [] : [weights],
    c.prepared ? weights : undefined, "cpu", precision, undefined, undefined, undefined);
  const options = { max_new_tokens: c.newTokens, decoding: { method: "greedy" }, stop_at_eos: false };
  return {
    precision: info.precision,
    async generate(prompt) {
      const arrivals = [];
      const start = performance.now();
      const out = await engine.generateText(info.handle, prompt, options, () => { arrivals.push(performance.now()); });
      return { ...timing(start, arrivals), tokens: out.tokens ?? out.generation?.tokens, prompt_tokens: out.input_tokens?.length };
    },
    /** A custom judge's score of `hypothesis` (the page's scoreModel), timed. */
    async judge(template, reference, hypothesis) {
      const kind = engine.metricChoices().kinds.find((k) => k.kind === "custom-judge");
      const spec = { ...kind.defaults, model: c.modelId, template, input: "plain" };
      const start = performance.now();
      const out = await engine.scoreModel({ spec, hypotheses: [hypothesis], references: reference });
      const ms = performance.now() - start;
      const part = (name) => out.scores[0].score.parts.find((p) => p.name === name)?.value;
      return { ms, value: out.scores[0].score.value, prompt_tokens: part("tokens"), decoded: part("decoded") };
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
    async generate(prompt) {
      const inputs = tokenizer(prompt);
      const arrivals = [];
      let first = true; // the streamer's first put is the prompt
      const streamer = { put() { if (first) { first = false; return; } arrivals.push(performance.now()); }, end() {} };
      const start = performance.now();
      const out = await model.generate({ ...inputs, max_new_tokens: c.newTokens, min_new_tokens: c.newTokens, do_sample: false, streamer });
      const ids = Array.from(out.tolist()[0], Number);
      return { ...timing(start, arrivals), tokens: ids.slice(inputs.input_ids.dims[1]), prompt_tokens: inputs.input_ids.dims[1] };
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
  // Each run's prompt starts with its own word: no run reads another's from
  // a cache (Blindspot keeps a model's last text for prefix reuse), so the
  // first token times a whole prompt pass in both tools.
  const openers = ["First", "Second", "Third", "Fourth", "Fifth", "Sixth", "Seventh", "Eighth"];
  for (let i = 0; i < c.runs; i++) {
    const r = await tool.generate(`${openers[i % openers.length]}: ${c.prompt}`);
    if (r.tokens?.length !== c.newTokens) throw new Error(`${c.tool} generated ${r.tokens?.length} tokens, not ${c.newTokens}`);
    runs.push(r);
    log(`run ${i + 1}: first token ${r.first_token_ms.toFixed(0)} ms, ${r.decode_tokens_per_s.toFixed(2)} tokens/s`);
  }
  const timed = runs.slice(1);
  res.first_token_ms = r3(median(timed.map((r) => r.first_token_ms)));
  res.decode_tokens_per_s = r3(median(timed.map((r) => r.decode_tokens_per_s)));
  res.decode_tokens_per_s_runs = timed.map((r) => r3(r.decode_tokens_per_s));
  res.tokens = runs[runs.length - 1].tokens.map(Number);
  res.prompt_tokens = runs[0].prompt_tokens;
  res.prefill_tokens_per_s = r3(res.prompt_tokens / (res.first_token_ms / 1000));
  res.wall_ms = r3(performance.now() - t0);
  return res;
};

/**
 * Blindspot's live judge: a custom judge (plain text) reads a prompt of
 * cfg.referenceWords words of reference and a hypothesis, first cold, then
 * once per keystroke as cfg.keystrokes characters are typed onto the
 * hypothesis; the prefix cache keeps the instructions and the reference.
 */
window.runKeystrokes = async function runKeystrokes(cfg) {
  const c = { tool: "blindspot", dtype: "fp32", modelId: "smollm2-135m-random", keystrokes: 12, ...cfg };
  const tool = await blindspot(c);
  const template = "You are grading a machine translation. Read the reference translation and the candidate, then rate how well the candidate conveys the meaning of the reference, from 1 (not at all) to 5 (completely). Penalise omissions, additions and mistranslations; ignore small differences of style.\n\nReference: {reference}\n\nCandidate: {hypothesis}\n\nAnswer with a single number from 1 to 5.\nRating:";
  const reference = c.reference;
  let hypothesis = c.hypothesis;
  const cold = await tool.judge(template, reference, hypothesis);
  const typed = [];
  for (let i = 0; i < c.keystrokes; i++) {
    hypothesis += " and the budget"[i % 15];
    typed.push(await tool.judge(template, reference, hypothesis));
  }
  return {
    tool: "blindspot", dtype: c.dtype, precision: tool.precision, model: c.modelId,
    prompt_tokens: cold.prompt_tokens, cold_ms: r3(cold.ms), cold_decoded: cold.decoded,
    keystroke_ms: r3(median(typed.map((t) => t.ms))), keystroke_ms_runs: typed.map((t) => r3(t.ms)),
    keystroke_decoded: median(typed.map((t) => t.decoded)),
  };
};
window.benchReady = true;
