// Blindspot's side of ../shared/bench/tjs-bench: the same protocol as its
// page/bench.js (transformers.js), on Blindspot's engine. bench.mjs serves the
// built site (make dist) under /burn/ and this folder under /blindspot-bench/:
//
//   node bench.mjs --mount /burn/=PROJECT/dist --mount /blindspot-bench/=PROJECT/benches/tjs-page \
//     --page /blindspot-bench/index.html --runs wasm:fp32,wasm:q8
//
// window.runBench(cfg) loads the engine (the site's wasm) and all-MiniLM-L6-v2
// from the site's models/ folder on the CPU (device wasm) or WebGPU (device
// webgpu), fp32 or int8 (dtype q8; as the page does, from the site's prepared
// int8 file where models/manifest.json lists one, else the f32 safetensors
// rounded at load), and times BERTScore F (layer 6, no idf, no
// rescaling: bert_score's conventions, which tjs-bench's page follows) over the
// same pairs: load, first pair, single-pair latency, batches of `batch` pairs.
// Every score is the engine's (`scorePairs`), nothing is computed here.

const $ = (id) => document.getElementById(id);
const log = (msg) => {
  $("log").textContent += `${msg}\n`;
  console.log(`[bench] ${msg}`);
};
function quantile(xs, q) { // linear interpolation, as tjs-bench (numpy's default)
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q, lo = Math.floor(pos), hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}
const r3 = (x) => Math.round(x * 1000) / 1000;
const SITE = "/burn/";

/** The engine's JS glue and wasm, as the built index.html links them (hashed names). */
async function engineFiles() {
  const html = await (await fetch(`${SITE}index.html`)).text();
  const glue = html.match(/<link rel="modulepreload" href="\/?([^"]+\.js)"/)?.[1];
  const wasm = html.match(/<link rel="preload" href="\/?([^"]+\.wasm)"/)?.[1];
  if (!glue || !wasm) throw new Error(`no engine links in ${SITE}index.html: build the site first (make dist)`);
  return { glue: SITE + glue, wasm: SITE + wasm };
}

async function bytes(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

window.runBench = async function runBench(cfg) {
  const c = { device: "wasm", dtype: "fp32", modelId: "all-MiniLM-L6-v2", nPairs: 200, warmup: 30,
    latencyPairs: 200, throughputPairs: 200, batch: 16, check: 20, ...cfg };
  const backend = c.device === "webgpu" ? "webgpu" : "cpu";
  // transformers.js's dtype names the engine's precision: q8 is an int8 load.
  const precision = c.dtype === "q8" ? "int8" : "f32";
  const res = { tool: "blindspot", device: c.device, dtype: c.dtype, model: c.modelId, backend, precision };
  const T = performance.now();
  const pairs = (await (await fetch("/data/pairs.json")).json()).slice(0, c.nPairs);

  // Load: engine (fetch + compile the wasm), then the checkpoint's files and the model.
  const tl0 = performance.now();
  const files = await engineFiles();
  const engine = await import(files.glue);
  await engine.default({ module_or_path: files.wasm });
  const tl1 = performance.now();
  const dir = `${SITE}models/${c.modelId}/`;
  // The file the page would read (www/models.js decides).
  const { preparedFile } = await import(`${SITE}models.js`);
  const manifest = await fetch(`${SITE}models/manifest.json`, { cache: "no-store" }).then((r) => (r.ok ? r.json() : {}));
  const listed = Object.values(manifest).find((m) => m.dir === c.modelId)?.files ?? {};
  const preparedName = preparedFile(listed, precision);
  let info;
  if (preparedName) {
    res.files = [preparedName];
    const prepared = await bytes(dir + preparedName);
    info = await engine.loadModel(c.modelId, undefined, undefined, [], prepared, backend, precision, undefined, undefined);
  } else {
    res.files = ["config.json", "tokenizer.json", "model.safetensors"];
    const [config, tokenizer, weights] = await Promise.all(res.files.map((f) => bytes(dir + f)));
    info = await engine.loadModel(c.modelId, new TextDecoder().decode(config), tokenizer, [weights],
      undefined, backend, precision, undefined, undefined);
  }
  const tl2 = performance.now();
  res.load_ms = r3(tl2 - tl0);
  res.engine_load_ms = r3(tl1 - tl0);
  res.model_load_ms = r3(tl2 - tl1);
  res.model_info = { backend: info.backend, precision: info.precision, layers: info.layers };
  const spec = { ...engine.metricChoices().defaults.find((d) => d.metric === "bertscore"),
    model: c.modelId, layer: info.layers, idf: false, rescale: false };
  log(`${backend}/${precision}: loaded in ${res.load_ms.toFixed(0)} ms`);

  const score = async (batch) => {
    const t0 = performance.now();
    const out = await engine.scorePairs({ spec, pairs: batch.map((p) => ({ hypothesis: p.hyp.trim(), references: p.ref.trim() })) });
    return { ms: performance.now() - t0, scores: out.scores };
  };
  const parts = (s) => Object.fromEntries(s.parts.map((p) => [p.name, p.value]));

  const first = await score([pairs[0]]);
  res.first_pair_ms = r3(first.ms);
  for (let i = 0; i < c.warmup; i++) await score([pairs[(i + 1) % pairs.length]]);

  const lat = [], P = [], R = [], F = [];
  for (let i = 0; i < Math.min(c.latencyPairs, pairs.length); i++) {
    const r = await score([pairs[i]]);
    lat.push(r.ms);
    const v = parts(r.scores[0]);
    P.push(v.precision); R.push(v.recall); F.push(v.f1);
  }
  res.latency_pairs = lat.length;
  res.pair_latency_samples_ms = lat.map((x) => Math.round(x * 10) / 10);
  res.pair_latency_ms = { median: r3(quantile(lat, 0.5)), p95: r3(quantile(lat, 0.95)),
    mean: r3(lat.reduce((a, b) => a + b, 0) / lat.length), min: r3(Math.min(...lat)), max: r3(Math.max(...lat)) };

  const tp = pairs.slice(0, Math.min(c.throughputPairs, pairs.length));
  await score(tp.slice(0, c.batch));
  const tb0 = performance.now();
  const bF = [];
  for (let i = 0; i < tp.length; i += c.batch) {
    const r = await score(tp.slice(i, i + c.batch));
    for (const s of r.scores) bF.push(parts(s).f1);
  }
  const tb = performance.now() - tb0;
  res.batch = c.batch;
  res.throughput_pairs = tp.length;
  res.throughput_ms = r3(tb);
  res.pairs_per_s = r3(tp.length / (tb / 1000));
  res.batched_vs_single_max_abs_dF1 = Math.max(...bF.map((x, i) => (i < F.length ? Math.abs(x - F[i]) : 0)));
  res.first5_f1 = F.slice(0, 5).map((x) => Math.round(x * 1e6) / 1e6);
  res.check_p = P.slice(0, c.check); res.check_r = R.slice(0, c.check); res.check_f1 = F.slice(0, c.check);
  res.mean_f1 = F.reduce((a, b) => a + b, 0) / F.length;
  res.versions = { blindspot: engine.version(), user_agent: navigator.userAgent };
  res.cross_origin_isolated = self.crossOriginIsolated;
  res.hardware_concurrency = navigator.hardwareConcurrency;
  res.wall_ms = r3(performance.now() - T);
  log(`done: median ${res.pair_latency_ms.median} ms/pair, ${res.pairs_per_s} pairs/s`);
  return res;
};
window.benchReady = true;
