// The PLM engine in headless Chromium: all-MiniLM-L6-v2 served from dist/models,
// run on WebGPU (SwiftShader) and on the CPU (burn-flex in wasm), against the
// native CLI; the model panel's progress, cache and errors.
//
// Run through `make test` (it builds dist/ and the native CLI first).

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, CLI, playground } from "./harness.mjs";
import { DIST } from "./static-server.mjs";

const MINILM = "sentence-transformers/all-MiniLM-L6-v2";
const TEXT = "The committee approved the new budget after a long debate on Tuesday. Grüße!";

const openPage = playground();

/**
 * The site with the model worker's engine trapping, as a panic or a failed
 * memory request does (a `WebAssembly.RuntimeError`), when a score is asked
 * for a text holding TRAP: like a real async engine call, the trap is thrown
 * from a microtask and the call's promise never settles. Everything else is
 * the built site's.
 */
const TRAP = "TRAP-THE-ENGINE";
const trappingRpc = () => readFileSync(join(DIST, "worker-rpc.js"), "utf8")
  .replace("export async function startEngine(", "async function startEngineAsBuilt(") + `
export async function startEngine(urls) {
  const bindings = await startEngineAsBuilt(urls);
  return new Proxy(bindings, {
    get: (target, key) => key !== "scoreModel" ? target[key] : (...args) => {
      if (JSON.stringify(args).includes(${JSON.stringify(TRAP)})) {
        queueMicrotask(() => { throw new WebAssembly.RuntimeError("unreachable"); });
        return new Promise(() => {});
      }
      return target.scoreModel(...args);
    },
  });
}
`;
const openTrapping = playground({ replace: { "/worker-rpc.js": trappingRpc() } });

/** Loads a model through www/models.js and embeds TEXT; returns { info, embedding } or { error }. */
function loadAndEmbed(page, id, backend, precision = "f32") {
  return page.evaluate(
    async ({ id, backend, precision, text }) => {
      const models = await import("./models.js");
      try {
        const info = await models.loadModel(window.wasmBindings, id, { backend, precision });
        const embedding = await window.wasmBindings.embedText(info.handle, text, 6);
        return { info, embedding };
      } catch (err) {
        return { error: String(err.message ?? err) };
      }
    },
    { id, backend, precision, text: TEXT },
  );
}

/** The native CLI's layer-6 states of TEXT; `options` go before `embed` (`--device cpu-i16`) or after it (`--quant q8`). */
function nativeEmbedding({ device = [], quant = [] } = {}) {
  const out = execFileSync(CLI, [...device, "embed", "--model", join(ROOT, "models", "all-MiniLM-L6-v2"), "--layer", "6", ...quant, TEXT]);
  return JSON.parse(out.toString());
}

function maxDiff(browserEmbedding, native) {
  assert.deepEqual(browserEmbedding.tokens, native.tokens);
  let worst = 0;
  native.hidden.forEach((row, t) =>
    row.forEach((x, j) => {
      worst = Math.max(worst, Math.abs(browserEmbedding.hidden[t * browserEmbedding.width + j] - x));
    }),
  );
  return worst;
}

test("MiniLM on WebGPU and on the CPU in the browser matches the native engine", async () => {
  const { context, page, errors } = await openPage();
  const native = nativeEmbedding();
  const gpu = await loadAndEmbed(page, MINILM, "webgpu");
  assert.equal(gpu.error, undefined, gpu.error);
  assert.equal(gpu.info.backend, "webgpu");
  const cpu = await loadAndEmbed(page, MINILM, "cpu");
  assert.equal(cpu.info.backend, "cpu");
  const dGpu = maxDiff(gpu.embedding, native);
  const dCpu = maxDiff(cpu.embedding, native);
  console.log(`MiniLM layer 6 vs native: WebGPU max |diff| ${dGpu.toExponential(2)}, CPU (flex) ${dCpu.toExponential(2)}`);
  assert.ok(dGpu <= 1e-3, `WebGPU differs by ${dGpu}`);
  assert.ok(dCpu <= 1e-3, `CPU differs by ${dCpu}`);
  // The second load came from Cache Storage.
  assert.equal(cpu.info.fromCache, true);
  // int8 on both devices stays close to fp32 (cosine per token), and follows
  // the native int8 model computed the same way: on the CPU the page's
  // projections are integer products (the native `--device cpu-i16`), on
  // WebGPU f32 products of the int8 values (the native default). The integer
  // kernel gives the same bits in wasm and natively, but rounding each row
  // to integers turns the f32 parts' last-bit differences (wasm against
  // native: ~2e-6) into whole rounding steps now and then: 5.6e-3 at layer
  // 6 here, against 2.0e-2 from the other way of computing int8.
  const nativeInt8 = {
    cpu: nativeEmbedding({ device: ["--device", "cpu-i16"], quant: ["--quant", "q8"] }),
    webgpu: nativeEmbedding({ quant: ["--quant", "q8"] }),
  };
  for (const backend of ["cpu", "webgpu"]) {
  const q8 = await loadAndEmbed(page, MINILM, backend, "q8");
  assert.equal(q8.error, undefined, q8.error);
  const dInt8 = maxDiff(q8.embedding, nativeInt8[backend]);
  const dOther = maxDiff(q8.embedding, nativeInt8[backend === "cpu" ? "webgpu" : "cpu"]);
  console.log(`MiniLM int8 on ${backend} vs the native int8 computed the same way: max |diff| ${dInt8.toExponential(2)} (the other way: ${dOther.toExponential(2)})`);
  assert.ok(dInt8 <= (backend === "cpu" ? 1e-2 : 1e-3), `${backend} int8 differs from the native by ${dInt8}`);
  assert.ok(dInt8 * 2 < dOther, `${backend} int8 is about as close to the other way of computing it (${dOther} against ${dInt8}): did its products run?`);
  const w = q8.embedding.width;
  for (let t = 0; t < native.tokens.length; t++) {
    let dot = 0, na = 0, nb = 0;
    for (let j = 0; j < w; j++) {
      const a = native.hidden[t][j], b = q8.embedding.hidden[t * w + j];
      dot += a * b; na += a * a; nb += b * b;
    }
    assert.ok(dot / Math.sqrt(na * nb) >= 0.99, `${backend} int8 token ${t} cosine ${dot / Math.sqrt(na * nb)}`);
  }
  }
  // q4 on the CPU: the integer products of the 4-bit values, as the native
  // computes them, and farther from int8 than from the native q4.
  const q4 = await loadAndEmbed(page, MINILM, "cpu", "q4");
  assert.equal(q4.error, undefined, q4.error);
  assert.equal(q4.info.precision, "q4");
  const dQ4 = maxDiff(q4.embedding, nativeEmbedding({ device: ["--device", "cpu-i16"], quant: ["--quant", "q4"] }));
  const dQ4Int8 = maxDiff(q4.embedding, nativeInt8.cpu);
  console.log(`MiniLM q4 on cpu vs the native q4: max |diff| ${dQ4.toExponential(2)} (vs int8: ${dQ4Int8.toExponential(2)})`);
  assert.ok(dQ4 <= 1e-2, `cpu q4 differs from the native by ${dQ4}`);
  assert.ok(dQ4 * 2 < dQ4Int8, `q4 is about as close to int8 (${dQ4Int8}) as to the native q4 (${dQ4})`);
  assert.deepEqual(errors, []);
  await context.close();
});

/**
 * A page whose site manifest lists MiniLM's f32 files and, given `int8Bpk`,
 * the int8 file `make dist` writes (served from that path); returns the
 * page and the MiniLM files it requested.
 */
async function openMiniLmSite(int8Bpk) {
  const requested = [];
  const opened = await openPage({
    beforeLoad: async (page) => {
      page.on("request", (r) => {
        const m = r.url().match(/models\/all-MiniLM-L6-v2\/(.+)$/);
        if (m) requested.push(m[1]);
      });
      await page.route("**/models/manifest.json", async (route) => {
        const real = await (await route.fetch()).json();
        const files = real[MINILM].files;
        delete files["model.int8.bpk"];
        if (int8Bpk) {
          const bytes = readFileSync(int8Bpk);
          files["model.int8.bpk"] = { sha256: createHash("sha256").update(bytes).digest("hex"), size: bytes.length };
        }
        return route.fulfill({ status: 200, body: JSON.stringify(real), headers: { "content-type": "application/json" } });
      });
      if (int8Bpk) {
        await page.route("**/models/all-MiniLM-L6-v2/model.int8.bpk", (route) =>
          route.fulfill({ status: 200, body: readFileSync(int8Bpk), headers: { "content-type": "application/octet-stream" } }));
      }
    },
  });
  return { ...opened, requested };
}

test("an int8 load reads the site's prepared int8 MiniLM: a quarter of the download, the same numbers", async () => {
  const dir = mkdtempSync(join(tmpdir(), "blindspot-int8-"));
  const bpk = join(dir, "model.int8.bpk");
  execFileSync(CLI, ["prepare", join(ROOT, "models", "all-MiniLM-L6-v2"), bpk, "--quant", "q8"]);
  // Without the file: the f32 safetensors, rounded at load.
  const plain = await openMiniLmSite(null);
  const rounded = await loadAndEmbed(plain.page, MINILM, "cpu", "q8");
  assert.equal(rounded.error, undefined, rounded.error);
  assert.ok(plain.requested.includes("model.safetensors"), plain.requested.join(", "));
  assert.deepEqual(plain.errors, []);
  await plain.context.close();
  // With it: only the prepared file, and bit for bit the same states.
  const site = await openMiniLmSite(bpk);
  const { page } = site;
  assert.equal(await page.evaluate(async (id) => (await import("./models.js")).downloadSize(id, "int8"), MINILM),
    `${(readFileSync(bpk).length / 1e6).toFixed(1)} MB`);
  const prepared = await loadAndEmbed(page, MINILM, "cpu", "q8");
  assert.equal(prepared.error, undefined, prepared.error);
  assert.deepEqual(site.requested, ["model.int8.bpk"]);
  assert.equal(prepared.info.precision, rounded.info.precision);
  const states = ({ tokens, width, hidden }) => ({ tokens, width, hidden });
  assert.deepEqual(states(prepared.embedding), states(rounded.embedding));
  // The panel's cache note follows the precision picked: only the int8 file is cached.
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-precision", "int8");
  await page.waitForFunction(() => document.getElementById("model-cache").dataset.cached === "true");
  await page.selectOption("#model-precision", "f32");
  await page.waitForFunction(() => document.getElementById("model-cache").dataset.cached === "false");
  // "int8", the engine's name (the attack's scoring helpers load a model by
  // its info), reads the same file, here from the cache.
  site.requested.length = 0;
  const byInfo = await loadAndEmbed(page, MINILM, "cpu", "int8");
  assert.equal(byInfo.error, undefined, byInfo.error);
  assert.deepEqual(site.requested, []);
  assert.deepEqual(states(byInfo.embedding), states(rounded.embedding));
  // A copy cached before the site's file changed (another sha256) is neither
  // reported as cached nor loaded: the file is fetched again.
  await page.evaluate(async (id) => {
    const { CACHE_NAME, modelSource } = await import("./models.js");
    const { base } = await modelSource(id);
    const stale = new Response(new Uint8Array([1, 2, 3]), { headers: { "x-blindspot-sha256": "0".repeat(64) } });
    await (await caches.open(CACHE_NAME)).put(`${base}model.int8.bpk`, stale);
  }, MINILM);
  await page.selectOption("#model-precision", "int8");
  await page.waitForFunction(() => document.getElementById("model-cache").dataset.cached === "false");
  const refetched = await loadAndEmbed(page, MINILM, "cpu", "q8");
  assert.equal(refetched.error, undefined, refetched.error);
  assert.deepEqual(site.requested, ["model.int8.bpk"]);
  assert.deepEqual(states(refetched.embedding), states(rounded.embedding));
  assert.deepEqual(site.errors, []);
  await site.context.close();
  rmSync(dir, { recursive: true });
});

test("the set-up script drops the site's int8 file once the rounding code changed after it was written, and unlists a removed one", () => {
  // scripts/fetch_models.py in a scratch tree (it finds the tree from its own
  // path), with MiniLM's files in place so nothing is downloaded.
  const root = mkdtempSync(join(tmpdir(), "blindspot-stale-"));
  const minilm = join(root, "models", "all-MiniLM-L6-v2");
  for (const dir of ["scripts", "src/models", "models/all-MiniLM-L6-v2/1_Pooling"]) mkdirSync(join(root, dir), { recursive: true });
  copyFileSync(join(ROOT, "scripts", "fetch_models.py"), join(root, "scripts", "fetch_models.py"));
  for (const name of ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "vocab.txt", "modules.json", "1_Pooling/config.json"]) writeFileSync(join(minilm, name), "{}");
  const int8 = join(minilm, "model.int8.bpk");
  const rounding = join(root, "src", "models", "weights.rs");
  writeFileSync(join(root, "Cargo.lock"), "");
  writeFileSync(rounding, "");
  writeFileSync(int8, "int8");
  const listed = () => Object.keys(JSON.parse(readFileSync(join(root, "models", "manifest.json"), "utf8"))[MINILM].files);
  const script = join(root, "scripts", "fetch_models.py");
  const setUp = () => execFileSync("python3", [script]); // what scripts/setup.sh runs
  // Written after the code, and listed (as `make dist` does): kept.
  const written = new Date();
  const before = new Date(+written - 60_000);
  utimesSync(rounding, before, before);
  utimesSync(join(root, "Cargo.lock"), before, before);
  utimesSync(int8, written, written);
  execFileSync("python3", [script, "--manifest"]);
  setUp();
  assert.ok(existsSync(int8));
  assert.ok(listed().includes("model.int8.bpk"), listed().join(", "));
  // The rounding code changed since: removed, and no longer listed, by the
  // check Trunk runs before each build too.
  const after = new Date(+written + 60_000);
  utimesSync(rounding, after, after);
  execFileSync("python3", [script, "--drop-stale"]);
  assert.ok(!existsSync(int8));
  assert.deepEqual(listed(), ["config.json", "tokenizer.json", "model.safetensors"]);
  // A listed file removed by hand is no longer listed after the set-up.
  writeFileSync(int8, "int8");
  execFileSync("python3", [script, "--manifest"]);
  assert.ok(listed().includes("model.int8.bpk"));
  rmSync(int8);
  setUp();
  assert.deepEqual(listed(), ["config.json", "tokenizer.json", "model.safetensors"]);
  rmSync(root, { recursive: true });
});

test("the model panel shows progress, where the model runs, and the cache", async () => {
  const { context, page, errors } = await openPage();
  await page.selectOption("#model-pick", MINILM);
  assert.equal(await page.textContent("#model-cache"), "not cached yet");
  await page.selectOption("#model-backend", "auto");
  await page.click("#model-load");
  await page.waitForFunction(() => document.getElementById("model-status").className !== "muted", null, { timeout: 120_000 });
  const status = await page.textContent("#model-status");
  assert.match(status, /BertModel, 6 layers × 384, f32, runs on WebGPU; loaded from this site/);
  assert.equal(await page.textContent("#model-backend-pill"), "Model: WebGPU");
  // The bar moved many times and ended at 100% of the bytes.
  assert.ok(Number(await page.getAttribute("#model-progress", "data-updates")) > 10);
  assert.equal(await page.getAttribute("#model-progress", "data-fraction"), "1");
  assert.equal(await page.textContent("#model-cache"), "in this browser's cache");
  await page.click("#model-probe-run");
  // One pass on SwiftShader (a CPU-emulated GPU) takes 15 s or more on a busy machine.
  await page.waitForFunction(() => /tokens, layer 6/.test(document.getElementById("model-probe-out").textContent), null, { timeout: 180_000 });
  // CPU fallback is said out loud when WebGPU is unavailable.
  await page.evaluate(() => Object.defineProperty(navigator, "gpu", { value: undefined }));
  await page.click("#model-load");
  await page.waitForFunction(() => /loaded from the browser cache/.test(document.getElementById("model-status").textContent), null, { timeout: 120_000 });
  assert.match(await page.textContent("#model-status"), /runs on the CPU \(WebGPU unavailable: WebGPU is not available in this browser\)/);
  await page.click("#model-clear-cache");
  await page.waitForFunction(() => document.getElementById("model-cache").textContent === "not cached yet");
  // Unloading the last BERTScore encoder offers the bundled MiniLM again, and
  // a double click on that offer loads it once, not twice side by side.
  await page.click("#model-unload");
  await page.waitForSelector("#add-minilm:not([hidden])");
  await page.evaluate(() => {
    window.loadsSeen = 0;
    document.addEventListener("blindspot:model", () => { window.loadsSeen += 1; });
  });
  await page.dblclick("#add-minilm");
  await page.waitForFunction(() => window.loadsSeen > 0, null, { timeout: 120_000 });
  // A second load would follow the first at once (queued) and take about a second from the cache.
  await page.waitForTimeout(4000);
  assert.equal(await page.evaluate(() => window.loadsSeen), 1);
  // "Run on" and "Weights" are kept for the next visit.
  await page.selectOption("#model-backend", "cpu");
  await page.selectOption("#model-precision", "int8");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.deepEqual([await page.inputValue("#model-backend"), await page.inputValue("#model-precision")], ["cpu", "int8"]);
  assert.deepEqual(errors, []);
  await context.close();
});

test("bad model sources give clear errors, never a panic", async () => {
  const { context, page, errors } = await openPage();
  // Unknown hub id (the hub answered 404).
  await page.route("https://huggingface.co/**", (route) => route.fulfill({ status: 404, body: "not found" }));
  let r = await loadAndEmbed(page, "nobody/no-such-model", "cpu");
  assert.match(r.error, /does not exist \(404\): unknown model id/);
  r = await loadAndEmbed(page, "not a model id!", "cpu");
  assert.match(r.error, /is not a Hugging Face model id/);
  // A precision the engine does not know: refused before any download, by
  // loadModel and by the panel (which keeps its own choice).
  r = await loadAndEmbed(page, MINILM, "cpu", "q3");
  assert.match(r.error, /unknown precision `q3` \(f32, q8 or q4\)/);
  const panelFailed = await page.evaluate(async (id) =>
    (await import("./models.js")).loadModels([{ id, backend: "cpu", precision: "fp16" }]), MINILM);
  assert.deepEqual(panelFailed, [MINILM]);
  assert.match(await page.textContent("#model-status"), /all-MiniLM-L6-v2: unknown precision `fp16`/);
  assert.equal(await page.inputValue("#model-precision"), "f32");
  // Truncated download and a corrupt file (sizes and sha256 from models/manifest.json).
  const weights = "**/models/all-MiniLM-L6-v2/tokenizer.json";
  await page.route(weights, async (route) => {
    const response = await route.fetch();
    const body = await response.body();
    await route.fulfill({ response, body: body.subarray(0, body.length >> 1) });
  });
  r = await loadAndEmbed(page, MINILM, "cpu");
  assert.match(r.error, /download incomplete/);
  await page.unroute(weights);
  await page.route(weights, async (route) => {
    const response = await route.fetch();
    const body = Buffer.from(await response.body());
    body[100] ^= 0x01;
    await route.fulfill({ response, body });
  });
  r = await loadAndEmbed(page, MINILM, "cpu");
  assert.match(r.error, /sha256 does not match/);
  await page.unroute(weights);
  // A checkpoint of an unsupported architecture.
  await page.route("https://huggingface.co/**", (route) =>
    route.fulfill({ status: 200, body: route.request().url().endsWith("config.json") ? '{"model_type":"llama"}' : "{}" }));
  r = await loadAndEmbed(page, "meta-llama/Llama-3.2-1B", "cpu");
  assert.match(r.error, /`llama` is not supported/);
  // A config.json whose sizes the model code cannot run with: refused at load, naming the field.
  const hostile = JSON.parse(readFileSync(join(ROOT, "tests", "fixtures", "plm", "bert_cls", "config.json"), "utf8"));
  hostile.num_attention_heads = 5;
  await page.route("https://huggingface.co/**", (route) =>
    route.fulfill({ status: 200, body: route.request().url().endsWith("config.json") ? JSON.stringify(hostile) : "{}" }));
  r = await loadAndEmbed(page, "test/hostile-heads", "cpu");
  assert.match(r.error, /num_attention_heads \(5\) does not divide hidden_size \(32\)/);
  // A GPU whose buffers are too small for the model: said before trying.
  const limits = await page.evaluate(async () => {
    const models = await import("./models.js");
    const bytes = new Uint8Array(await (await fetch("models/all-MiniLM-L6-v2/model.safetensors")).arrayBuffer());
    const largest = models.largestTensorBytes([bytes]);
    return {
      largest,
      small: models.adapterLimitProblem(largest, { maxStorageBufferBindingSize: 16 << 20, maxBufferSize: 256 << 20 }),
      fine: models.adapterLimitProblem(largest, { maxStorageBufferBindingSize: 128 << 20, maxBufferSize: 256 << 20 }),
    };
  });
  assert.equal(limits.largest, 30522 * 384 * 4, "word embeddings are MiniLM's largest tensor");
  assert.equal(limits.small, "the model's largest tensor (47 MB) exceeds this GPU's buffer limit (17 MB)");
  assert.equal(limits.fine, null);
  assert.deepEqual(errors, []);
  await context.close();
});

test("BERTScore updates as the user types, draws its heatmap, and equals the native CLI", async () => {
  const { context, page, errors } = await openPage();
  await page.selectOption("#example", "custom");
  const ref = "The committee approved the new budget after a long debate on Tuesday.";
  await page.fill("#reference", ref);
  await page.fill("#hypothesis", "The committee approved the budget on Tuesday.");
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  const first = Number(await page.getAttribute('.card[data-metric="bertscore"] [data-role="value"]', "data-raw"));
  // Model passes run in the model worker: while the user types, the page's
  // own engine runs none (benches/browser_bertscore.mjs reports its tasks).
  assert.equal(await page.getAttribute("body", "data-model-engine"), "worker");
  // The engine counts the heavy jobs it runs: the page's own must run none.
  const jobsBefore = await page.evaluate(() => window.wasmBindings.jobsRun());
  // Type a negation: the score changes, the newest text wins.
  const hyp = "The committee did not approve the budget on Tuesday.";
  await page.fill("#hypothesis", "");
  await page.type("#hypothesis", hyp, { delay: 10 });
  const input = JSON.stringify({ hyp, ref }) + "\n";
  const native = JSON.parse(execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl", "--metrics", "bertscore-f"], { input }).toString().split("\n")[0])["bertscore-f"];
  // The card settles on the newest text's score (no stale value left behind).
  await page.waitForFunction(
    (want) => Math.abs(Number(document.querySelector('.card[data-metric="bertscore"] [data-role="value"]').dataset.raw) - want) <= 1e-3,
    native, { timeout: 60_000 });
  const shown = Number(await page.getAttribute('.card[data-metric="bertscore"] [data-role="value"]', "data-raw"));
  assert.notEqual(shown, first);
  assert.equal(await page.evaluate(() => window.wasmBindings.jobsRun()), jobsBefore);
  // One outlined best match per hypothesis token; [CLS]/[SEP] greyed (2 rows + 2 columns).
  const label = await page.getAttribute("#bertscore-heatmap svg", "aria-label");
  const rows = Number(label.match(/similarity of (\d+) hypothesis/)[1]);
  assert.equal(rows, 12, label);
  assert.equal(await page.locator("#bertscore-heatmap rect.best").count(), rows);
  assert.equal(await page.locator("#bertscore-heatmap text.special").count(), 4);
  // Pointing at a cell (painted, 18 px a side) reads out its pair of tokens and their similarity.
  const cellAt = (i, j) => ({ position: { x: j * 18 + 9, y: i * 18 + 9 } });
  await page.hover("#bertscore-heatmap canvas", cellAt(1, 1));
  assert.match(await page.textContent("#bertscore-heatmap .heatmap-readout"), /^the ~ the: 0\.\d{3}$/);
  // A keystroke that keeps the grid updates the map in place, and draws
  // exactly what a map built afresh for the same text draws: labels and
  // painted cells.
  const heatmapHas = (token) => page.waitForFunction(
    (t) => [...document.querySelectorAll("#bertscore-heatmap text.tok")].some((e) => e.firstChild.textContent === t),
    token, { timeout: 60_000 });
  await page.evaluate(() => { document.querySelector("#bertscore-heatmap svg").kept = true; });
  const monday = "The committee did not approve the budget on Monday.";
  await page.fill("#hypothesis", monday);
  await heatmapHas("monday");
  const updated = await page.evaluate(() => {
    const svg = document.querySelector("#bertscore-heatmap svg");
    return { kept: svg.kept === true, html: svg.outerHTML, cells: document.querySelector("#bertscore-heatmap canvas").toDataURL() };
  });
  assert.ok(updated.kept, "the map was built again, not updated");
  await page.fill("#hypothesis", hyp);
  await heatmapHas("tuesday");
  await page.evaluate(() => { document.getElementById("bertscore-heatmap").replaceChildren(); });
  await page.fill("#hypothesis", monday);
  await heatmapHas("monday");
  assert.equal(await page.evaluate(() => document.querySelector("#bertscore-heatmap svg").outerHTML), updated.html);
  assert.equal(await page.evaluate(() => document.querySelector("#bertscore-heatmap canvas").toDataURL()), updated.cells);
  await page.hover("#bertscore-heatmap canvas", cellAt(9, 1));
  assert.match(await page.textContent("#bertscore-heatmap .heatmap-readout"), /^monday ~ the: 0\.\d{3}$/);
  // Tokens that are markup characters are drawn as text.
  await page.fill("#hypothesis", "a < b & c");
  await page.waitForFunction(() => /similarity of 7 hypothesis/.test(document.querySelector("#bertscore-heatmap svg")?.getAttribute("aria-label")), null, { timeout: 60_000 });
  const drawn = await page.$$eval("#bertscore-heatmap text.tok", (els) => els.map((e) => e.firstChild.textContent));
  assert.ok(drawn.includes("<") && drawn.includes("&"), drawn.join(" "));
  await page.fill("#hypothesis", hyp);
  // Rescaled with MiniLM's baseline: the CLI's --rescale-with-baseline.
  const nativeRescaled = JSON.parse(execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl", "--metrics", "bertscore-f", "--rescale-with-baseline"], { input }).toString().split("\n")[0])["bertscore-f"];
  await page.check('.card[data-metric="bertscore"] [data-role="rescale"]');
  await page.waitForFunction(
    (want) => Math.abs(Number(document.querySelector('.card[data-metric="bertscore"] [data-role="value"]').dataset.raw) - want) <= 1e-3,
    nativeRescaled, { timeout: 60_000 });
  assert.match(await page.textContent('.card[data-metric="bertscore"] [data-role="signature"]'), /\|rescale:blindspot\|/);
  assert.match(await page.textContent('.card[data-metric="bertscore"] [data-role="parts"]'), /\(rescaled\)/);
  await page.uncheck('.card[data-metric="bertscore"] [data-role="rescale"]');
  // idf over the references on the page: the CLI's --idf over the same set.
  const ref2 = "On Tuesday the committee passed the budget after a long debate.";
  const idfInput = JSON.stringify({ hyp, ref: [ref, ref2] }) + "\n";
  const nativeIdf = JSON.parse(execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl", "--metrics", "bertscore-f", "--idf"], { input: idfInput }).toString().split("\n")[0])["bertscore-f"];
  await page.fill("#reference", `${ref}\n\n${ref2}`);
  await page.check('.card[data-metric="bertscore"] [data-role="idf"]');
  await page.waitForFunction(
    (want) => Math.abs(Number(document.querySelector('.card[data-metric="bertscore"] [data-role="value"]').dataset.raw) - want) <= 1e-3,
    nativeIdf, { timeout: 60_000 });
  assert.match(await page.textContent('.card[data-metric="bertscore"] [data-role="signature"]'), /\|idf:yes\|/);
  const weights = await page.$$eval("#bertscore-heatmap text.tok:not(.special)", (els) => els.map((e) => Number(e.dataset.weight)));
  assert.ok(weights.some((w) => w !== 1 && w > 0), `idf weights ${weights}`);
  // With one reference idf is degenerate: said, not computed.
  await page.fill("#reference", ref);
  await page.waitForFunction(() => /idf weights come from a set of references/.test(document.querySelector('.card[data-metric="bertscore"] [data-role="message"]').textContent), null, { timeout: 60_000 });
  assert.deepEqual(errors, []);
  await context.close();
});

test("a card's controls come from the core's option schema, and an option set on a card reaches the engine", async () => {
  const { context, page, errors } = await openPage();
  await page.selectOption("#example", "custom");
  const ref = "The committee approved the new budget after a long debate on Tuesday.";
  const hyp = "The committee approved the budget on Tuesday.";
  await page.fill("#reference", ref);
  await page.fill("#hypothesis", hyp);
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  await page.waitForSelector('.card[data-metric="moverscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  // Every option the schema offers for a card's kinds has its control, with
  // the schema's label, type and default; the card has no other control.
  const cards = await page.evaluate(() => {
    const { kinds } = window.wasmBindings.metricChoices();
    return [...document.querySelectorAll(".card.plm-card")].map((card) => {
      const mine = kinds.filter((k) => k.kind === card.dataset.metric || k.card.versionOf === card.dataset.metric);
      const wanted = [];
      for (const k of mine) {
        for (const [name, p] of Object.entries(k.options.properties)) {
          if (p["x-page"] === false || (k.card.everyColumn && name === k.columnOption)) continue;
          const c = card.querySelector(`[data-role="options"] [data-option="${name}"]`);
          const types = [p.type].flat();
          const value = c && (c.type === "checkbox" ? c.checked : c.value);
          const shown = k.defaults[name] ?? "";
          wanted.push({
            kind: k.kind, name, found: Boolean(c), disabled: c?.disabled,
            label: c?.closest("label")?.textContent.includes(p.title) ?? false,
            control: c && (types.includes("boolean") ? c.type === "checkbox" : c.tagName === "SELECT" || c.type === "number"),
            default: c?.dataset.kinds.split(" ")[0] !== k.kind || value === (typeof shown === "boolean" ? shown : String(shown)),
          });
        }
      }
      const controls = [...card.querySelectorAll('[data-role="options"] [data-option]')].map((c) => c.dataset.option);
      return { card: card.dataset.metric, wanted, controls, versions: [...card.querySelectorAll('[data-role="version"] option')].map((o) => o.value) };
    });
  });
  assert.deepEqual(cards.map((c) => c.card).sort(), ["bertscore", "moverscore"]);
  for (const c of cards) {
    for (const w of c.wanted) assert.deepEqual([w.found, w.label, w.control, w.default], [true, true, true, true], `${c.card}: ${JSON.stringify(w)}`);
    assert.deepEqual([...new Set(c.controls)].sort(), [...new Set(c.wanted.map((w) => w.name))].sort(), c.card);
  }
  // MoverScore's card offers its kinds as versions; an option only v1 has is off for v2.
  const mover = cards.find((c) => c.card === "moverscore");
  assert.equal(mover.versions.length, 2);
  const onlyV1 = mover.wanted.filter((w) => w.kind === mover.versions[1] && !mover.wanted.some((o) => o.kind === mover.versions[0] && o.name === w.name));
  assert.ok(onlyV1.length >= 1 && onlyV1.every((w) => w.disabled), JSON.stringify(onlyV1));
  // A layer typed on the BERTScore card is the CLI's --opt bertscore.layer=3.
  const card = '.card[data-metric="bertscore"]';
  await page.fill(`${card} [data-option="layer"]`, "3");
  await page.dispatchEvent(`${card} [data-option="layer"]`, "change");
  await page.waitForFunction((sel) => document.querySelector(`${sel} [data-role="signature"]`).textContent.includes("|layer:3|"), card);
  const native = JSON.parse(execFileSync(CLI, ["score", "--input", "-", "--format", "jsonl", "--metrics", "bertscore-f", "--opt", "bertscore.layer=3"],
    { input: JSON.stringify({ hyp, ref }) + "\n" }).toString().split("\n")[0])["bertscore-f"];
  await page.waitForFunction(({ sel, want }) => Math.abs(Number(document.querySelector(`${sel} [data-role="value"]`).dataset.raw) - want) <= 1e-5,
    { sel: card, want: native });
  assert.deepEqual(errors, []);
  await context.close();
});

test("MAUVE between two sets of texts in the model worker equals the native CLI", async () => {
  const { context, page, errors } = await openPage();
  const read = (name, from) =>
    readFileSync(join(ROOT, "tests", "data", name), "utf8").split("\n").filter((l) => l.trim())
      // Each paragraph's first sentence keeps the wasm featurising short.
      .slice(from, from + 12).map((l) => l.split(". ")[0].trim() + ".");
  const hyps = read("wikitext_a.txt", 0), refs = read("wikitext_b.txt", 0);
  const dir = mkdtempSync(join(tmpdir(), "blindspot-mauve-"));
  writeFileSync(join(dir, "p.txt"), hyps.join("\n") + "\n");
  writeFileSync(join(dir, "q.txt"), refs.join("\n") + "\n");
  const native = JSON.parse(execFileSync(CLI, ["mauve", "--hyps", join(dir, "p.txt"), "--refs", join(dir, "q.txt"), "--model", join(ROOT, "models", "all-MiniLM-L6-v2"), "--seed", "7", "--json"]).toString());
  // Too few texts: a clear message, nothing computed.
  await page.fill("#mauve-hyps", hyps[0]);
  await page.fill("#mauve-refs", refs.join("\n"));
  assert.equal(await page.isDisabled("#mauve-run"), true, "no model loaded yet");
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForFunction(() => !document.getElementById("mauve-run").disabled, null, { timeout: 120_000 });
  await page.click("#mauve-run");
  await page.waitForFunction(() => /at least 2 texts/.test(document.getElementById("mauve-status").textContent));
  // The sets and options survive a reload (kept in localStorage); then compute
  // (with the CLI's cluster count and seed typed in, so the numbers stay comparable).
  await page.fill("#mauve-hyps", hyps.join("\n"));
  await page.fill("#mauve-clusters", String(native.result.clusters));
  await page.fill("#mauve-seed", "7");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  assert.equal(await page.textContent("#mauve-hyps-count"), "12 texts");
  assert.equal(await page.inputValue("#mauve-clusters"), String(native.result.clusters));
  assert.equal(await page.inputValue("#mauve-seed"), "7");
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForFunction(() => !document.getElementById("mauve-run").disabled, null, { timeout: 120_000 });
  await page.click("#mauve-run");
  await page.waitForFunction(() => document.getElementById("mauve-result").dataset.mauve || document.getElementById("mauve-status").className === "bad", null, { timeout: 300_000 });
  assert.notEqual(await page.getAttribute("#mauve-status", "class"), "bad", await page.textContent("#mauve-status"));
  const shown = await page.evaluate(() => ({ ...document.getElementById("mauve-result").dataset }));
  console.log(`MAUVE page ${Number(shown.mauve).toFixed(6)} vs CLI ${native.result.mauve.toFixed(6)} (${native.result.clusters} clusters)`);
  for (const [key, want] of [["mauve", native.result.mauve], ["frontierIntegral", native.result.frontier_integral], ["mauveStar", native.result.mauve_star]]) {
    assert.ok(Math.abs(Number(shown[key]) - want) <= 1e-3, `${key}: page ${shown[key]} vs CLI ${want}`);
  }
  assert.equal(await page.locator("#mauve-result svg.mauve-curve").count(), 1);
  assert.match(await page.textContent("#mauve-result .signature"), /all-MiniLM-L6-v2/);
  // The result is kept across a reload (no model loaded then), read back through the core.
  const drawn = await page.locator("#mauve-result").innerHTML();
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  assert.match(await page.textContent("#mauve-status"), /^The last MAUVE result \(finished on .+\), for these sets\.$/);
  assert.equal(await page.locator("#mauve-result").innerHTML(), drawn);
  assert.deepEqual(await page.evaluate(() => ({ ...document.getElementById("mauve-result").dataset })), shown);
  // Another seed: the result is no longer this state's, so it goes, kept copy included.
  await page.fill("#mauve-seed", "8");
  assert.equal(await page.isHidden("#mauve-result"), true);
  assert.equal(await page.textContent("#mauve-status"), "The sets or options changed: compute MAUVE again.");
  assert.equal(await page.evaluate(() => localStorage.getItem("blindspot.mauve-result.v1")), null);
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForFunction(() => !document.getElementById("mauve-run").disabled, null, { timeout: 120_000 });
  // Stop after the first model pass (clicked from inside the page as soon as it shows).
  await page.evaluate(() => {
    const el = document.getElementById("mauve-status");
    const watch = new MutationObserver(() => {
      if (/^Featurising: [1-9]\d* \/ 24 texts/.test(el.textContent)) {
        watch.disconnect();
        document.getElementById("mauve-stop").click();
      }
    });
    watch.observe(el, { childList: true, characterData: true, subtree: true });
  });
  await page.click("#mauve-run");
  await page.waitForFunction(() => !document.getElementById("mauve-run").disabled, null, { timeout: 300_000 });
  assert.equal(await page.textContent("#mauve-status"), "Stopped: no MAUVE (it needs every text featurised).");
  assert.equal(await page.isHidden("#mauve-result"), true);
  assert.equal(await page.isDisabled("#mauve-stop"), true);
  // A stopped run forgets the kept result; a damaged copy is dropped with a message.
  assert.equal(await page.evaluate(() => localStorage.getItem("blindspot.mauve-result.v1")), null);
  // The core reads what the CLI's --json writes; a copy with MAUVE out of range is refused.
  assert.equal(await page.evaluate((json) => window.wasmBindings.readMauveResult(json).result.mauve, JSON.stringify(native)), native.result.mauve);
  const damaged = { ...native, result: { ...native.result, mauve: 2 } };
  await page.evaluate((report) => localStorage.setItem("blindspot.mauve-result.v1", JSON.stringify({ finished: 0, report })), JSON.stringify(damaged));
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  assert.match(await page.textContent("#mauve-status"), /^The last MAUVE result could not be read back, and was dropped \(the MAUVE result is damaged: its values are out of range\)\.$/);
  assert.equal(await page.isHidden("#mauve-result"), true);
  assert.deepEqual(errors, []);
  await context.close();
});

/** Waits for the suite run just started (Run is off while it runs) to end. */
const suiteEnded = (page) => page.waitForFunction(() => !document.getElementById("suite-run").disabled, null, { timeout: 300_000 });

test("a stress suite with the model cards showing runs in the model worker, equal to the CLI; Cancel stops it", async () => {
  const { context, page, errors } = await openPage();
  const dir = mkdtempSync(join(tmpdir(), "blindspot-suite-models-"));
  const file = join(dir, "wmt4.jsonl");
  writeFileSync(file, readFileSync(join(ROOT, "tests", "data", "wmt21_de_en.jsonl"), "utf8").split("\n").slice(0, 4).join("\n") + "\n");
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  await page.setInputFiles("#suite-file", file);
  await page.waitForFunction(() => document.querySelector("#suite-status").textContent.includes("4 items"));
  await page.selectOption("#suite-format", "wmt");
  await page.uncheck("#suite-family-consistency");
  await page.fill("#suite-seeds", "1");
  await page.click("#suite-run");
  await suiteEnded(page);
  assert.match(await page.textContent("#suite-status"), /^Done/);
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#suite-json")]);
  const fromPage = JSON.parse(readFileSync(await download.path(), "utf8"));
  const ids = fromPage.metrics.map((m) => m.id);
  assert.ok(ids.includes("bertscore-f") && ids.includes("bleu"), ids.join(","));
  // The CLI on the same items with the same metrics on the same MiniLM.
  const minilm = join(ROOT, "models", "all-MiniLM-L6-v2");
  const out = join(dir, "cli.json");
  execFileSync(CLI, ["stress", "--data", file, "--format", "wmt", "--injections", "fluency", "--seeds", "1", "--metrics", ids.join(","),
    "--model-dir", minilm, "--model", `moverscore=${minilm}`, "--out", out], { stdio: "pipe" });
  const fromCli = JSON.parse(readFileSync(out, "utf8"));
  assert.deepEqual(fromCli.metrics.map((m) => m.id), ids);
  const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-5, `${what}: page ${a} vs CLI ${b}`);
  fromPage.base.forEach((v, k) => close(v, fromCli.base[k], `base ${ids[k]}`));
  assert.equal(fromPage.tests.length, fromCli.tests.length);
  fromPage.tests.forEach((t, i) => {
    const c = fromCli.tests[i];
    assert.equal(t.injection, c.injection);
    assert.deepEqual(t.verdicts, c.verdicts, t.injection);
    t.levels.forEach((l, j) => l.scores.forEach((s, k) => close(s.mean, c.levels[j].scores[k].mean, `${t.injection} ${l.level} ${ids[k]}`)));
  });
  assert.equal(await page.locator("#suite-card thead th").count(), 1 + ids.length);
  // The BERTScore card's idf: each batch within the whole file's references, as the CLI's --idf.
  await page.check('.card[data-metric="bertscore"] [data-role="idf"]');
  await page.click("#suite-run");
  await suiteEnded(page);
  assert.match(await page.textContent("#suite-status"), /^Done/);
  const [idfDownload] = await Promise.all([page.waitForEvent("download"), page.click("#suite-json")]);
  const withIdf = JSON.parse(readFileSync(await idfDownload.path(), "utf8"));
  const f = withIdf.metrics.findIndex((m) => m.id === "bertscore-f");
  assert.match(withIdf.metrics[f].signature, /\|idf:yes\|/);
  const idfOut = join(dir, "cli-idf.json");
  execFileSync(CLI, ["stress", "--data", file, "--format", "wmt", "--injections", "fluency", "--seeds", "1", "--metrics", "bertscore-f",
    "--model-dir", minilm, "--idf", "--out", idfOut], { stdio: "pipe" });
  const cliIdf = JSON.parse(readFileSync(idfOut, "utf8"));
  close(withIdf.base[f], cliIdf.base[0], "base bertscore-f with idf");
  assert.ok(Math.abs(withIdf.base[f] - fromPage.base[f]) > 1e-3, "idf changes BERTScore");
  withIdf.tests.forEach((t, i) => t.levels.forEach((l, j) => close(l.scores[f].mean, cliIdf.tests[i].levels[j].scores[0].mean, `${t.injection} ${l.level} idf`)));
  await page.uncheck('.card[data-metric="bertscore"] [data-role="idf"]');
  // Cancel at the first progress: the run ends after its current batch.
  await page.evaluate(() => {
    const el = document.getElementById("suite-status");
    const watch = new MutationObserver(() => {
      if (/tests done/.test(el.textContent)) {
        watch.disconnect();
        document.getElementById("suite-cancel").click();
      }
    });
    watch.observe(el, { childList: true, characterData: true, subtree: true });
  });
  await page.check("#suite-family-consistency");
  await page.click("#suite-run");
  await suiteEnded(page);
  assert.match(await page.textContent("#suite-status"), /^Cancelled(\.| after \d+ finished tests? \(shown\)\.)$/);
  assert.equal(await page.isDisabled("#suite-run"), false);
  assert.equal(await page.isDisabled("#suite-cancel"), true);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a suite with a CPU model runs in a shard per core, each with its own copy of the model, equal to the CLI", async () => {
  // Two cores whatever the machine: two shards of 8 items (a model run shards from 4 items a shard) and the merger.
  const { context, page, errors } = await openPage({
    beforeLoad: (p) => p.addInitScript(() => Object.defineProperty(navigator, "hardwareConcurrency", { get: () => 2 })),
  });
  const dir = mkdtempSync(join(tmpdir(), "blindspot-suite-shards-"));
  const file = join(dir, "wmt16.jsonl");
  writeFileSync(file, readFileSync(join(ROOT, "tests", "data", "wmt21_de_en.jsonl"), "utf8").split("\n").slice(0, 16).join("\n") + "\n");
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
  await page.setInputFiles("#suite-file", file);
  await page.waitForFunction(() => document.querySelector("#suite-status").textContent.includes("16 items"));
  await page.selectOption("#suite-format", "wmt");
  for (const f of ["fluency", "consistency"]) await page.uncheck(`#suite-family-${f}`);
  await page.check("#suite-family-character");
  await page.fill("#suite-seeds", "1");
  await page.click("#suite-run");
  // Once the page has checked that the model is in this browser's cache.
  await page.waitForFunction(() => document.querySelector("#suite-status").textContent.startsWith("Starting"));
  assert.match(await page.textContent("#suite-status"), /^Starting the engine in 2 workers, each with its own copy of .*all-MiniLM-L6-v2 on the CPU…$/);
  const suiteWorkers = () => page.workers().filter((w) => w.url().endsWith("suite-worker.js")).length;
  for (let i = 0; i < 50 && suiteWorkers() < 3; i++) await page.waitForTimeout(100);
  assert.equal(suiteWorkers(), 3, "2 shards and the merger");
  await suiteEnded(page);
  assert.match(await page.textContent("#suite-status"), /^Done: 4 tests over 16 items in [\d.]+ s \(2 workers side by side\)\.$/);
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#suite-json")]);
  const fromPage = JSON.parse(readFileSync(await download.path(), "utf8"));
  const ids = fromPage.metrics.map((m) => m.id);
  assert.ok(ids.includes("bertscore-f") && ids.includes("moverscore"), ids.join(","));
  // The CLI, unsharded, on the same items and metrics with the same MiniLM.
  const minilm = join(ROOT, "models", "all-MiniLM-L6-v2");
  const out = join(dir, "cli.json");
  execFileSync(CLI, ["stress", "--data", file, "--format", "wmt", "--injections", "character", "--seeds", "1", "--metrics", ids.join(","),
    "--model-dir", minilm, "--model", `moverscore=${minilm}`, "--out", out], { stdio: "pipe" });
  const fromCli = JSON.parse(readFileSync(out, "utf8"));
  assert.deepEqual(fromCli.metrics.map((m) => m.id), ids);
  // The same metrics and options: the signatures but for the model's name (the hub id here, the folder's for the CLI).
  const named = (sig) => sig.replace("model:all-MiniLM-L6-v2|", "model:sentence-transformers/all-MiniLM-L6-v2|");
  assert.deepEqual(fromCli.metrics.map((m) => named(m.signature)), fromPage.metrics.map((m) => m.signature));
  const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-5, `${what}: page ${a} vs CLI ${b}`);
  fromPage.base.forEach((v, k) => close(v, fromCli.base[k], `base ${ids[k]}`));
  assert.equal(fromPage.tests.length, 4);
  fromPage.tests.forEach((t, i) => {
    const c = fromCli.tests[i];
    assert.equal(t.injection, c.injection);
    assert.deepEqual(t.verdicts, c.verdicts, t.injection);
    t.levels.forEach((l, j) => l.scores.forEach((s, k) => close(s.mean, c.levels[j].scores[k].mean, `${t.injection} ${l.level} ${ids[k]}`)));
  });
  rmSync(dir, { recursive: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("a trap in the model engine restarts it: its models are unloaded, the page says so, and they load again", async () => {
  const { context, page, errors } = await openTrapping({ clearStorage: true });
  await page.fill("#hypothesis", TEXT);
  await page.selectOption("#model-pick", MINILM);
  await page.selectOption("#model-backend", "cpu");
  await page.click("#model-load");
  const card = '.card[data-metric="bertscore"] [data-role="value"][data-raw]';
  await page.waitForSelector(card, { timeout: 120_000 });
  await page.fill("#hypothesis", `The committee ${TRAP} the budget.`);
  await page.waitForFunction(() => /was restarted/.test(document.getElementById("model-status").textContent), null, { timeout: 60_000 });
  assert.match(await page.textContent("#model-status"), /stopped \(.*unreachable: out of memory, or a bug .*\) and was restarted; its models were unloaded: load them again/);
  assert.equal(await page.locator('.card[data-metric="bertscore"]').count(), 0);
  assert.equal(await page.textContent("#model-loaded"), "No model loaded.");
  // The new worker loads and scores as before.
  await page.fill("#hypothesis", TEXT);
  await page.click("#model-load");
  await page.waitForSelector(card, { timeout: 120_000 });
  assert.deepEqual(errors, []);
  await context.close();
});
