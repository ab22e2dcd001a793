// Language models in the page: fetch a checkpoint's files (from the models/
// folder served with the site, or the Hugging Face hub), stream them with
// progress, keep them in Cache Storage (the second visit loads offline),
// verify sha256 where models/manifest.json lists one, and hand the bytes to
// the engine (the model worker of model-engine.js, or the wasm bindings
// themselves), which runs the model on WebGPU or on the CPU.

const $ = (id) => document.getElementById(id);
export const CACHE_NAME = "blindspot-models-v1";
/** The sha256 a cached file was verified against (site files the manifest lists). */
const SHA_HEADER = "x-blindspot-sha256";
const HUB = "https://huggingface.co";

let manifestPromise = null;

/** models/manifest.json (written by scripts/fetch_models.py): local folders and sha256 per file. */
export function modelManifest() {
  manifestPromise ??= fetch("models/manifest.json", { cache: "no-cache" })
    .then((r) => (r.ok ? r.json() : {}))
    .catch(() => ({}));
  return manifestPromise;
}

/** Where a model's files come from: its local folder when the manifest has it, else the hub. */
export async function modelSource(id) {
  const manifest = await modelManifest();
  const local = manifest[id];
  if (local) return { base: new URL(`models/${local.dir}/`, location.href).href, files: local.files, where: "this site" };
  if (!/^[\w.-]+(\/[\w.-]+)?$/.test(id)) throw new Error(`"${id}" is not a Hugging Face model id (owner/name)`);
  return { base: `${HUB}/${id}/resolve/main/`, files: {}, where: "the Hugging Face hub" };
}

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Whether a cached copy is known to differ from the file the manifest now
 * lists (`sha256`): the site changed it since (MiniLM's int8 file follows the
 * rounding code), and the old copy would load other numbers.
 */
function changedSince(cached, sha256) {
  const held = cached.headers.get(SHA_HEADER);
  return Boolean(sha256 && held && held !== sha256);
}

/** A file's bytes as cached, with the sha256 they were checked against (if any). */
function verified(bytes, sha256) {
  return new Response(bytes, { headers: { "content-type": "application/octet-stream", ...(sha256 ? { [SHA_HEADER]: sha256 } : {}) } });
}

/** The error of a download the user cancelled (`cancelled: true`). */
const cancelledError = () => Object.assign(new Error("download cancelled"), { cancelled: true });

/**
 * Fetches one file, from Cache Storage when present and still the file the
 * manifest lists. Streams with progress (onBytes(loaded, total)), rejects a
 * short body (truncated download) or a sha256 mismatch, and caches only a
 * verified, complete file. Resolves to { bytes, fromCache } or null for a 404
 * when `optional`; rejects with a `cancelled` error once `signal` aborts.
 */
export async function fetchModelFile(url, { sha256, size, onBytes = () => {}, optional = false, signal } = {}) {
  if (signal?.aborted) throw cancelledError();
  const cache = "caches" in self ? await caches.open(CACHE_NAME) : null;
  const cached = cache && (await cache.match(url));
  if (cached && !changedSince(cached, sha256)) {
    const bytes = new Uint8Array(await cached.arrayBuffer());
    // Cached before copies carried their sha256: checked once, then marked.
    const unmarked = sha256 && !cached.headers.has(SHA_HEADER);
    if (!unmarked || (await sha256Hex(bytes)) === sha256) {
      if (unmarked) await cache.put(url, verified(bytes, sha256));
      onBytes(bytes.length, bytes.length);
      return { bytes, fromCache: true };
    }
  }
  let response;
  try {
    // Revalidated: a copy in the HTTP cache from before a redeploy would fail the sha256 check.
    response = await fetch(url, { cache: "no-cache", signal });
  } catch (err) {
    if (signal?.aborted) throw cancelledError();
    throw new Error(`cannot reach ${new URL(url).host} for ${url.split("/").pop()} (offline, or blocked): ${err.message ?? err}`);
  }
  if (response.status === 404) {
    if (optional) return null;
    throw new Error(`${url} does not exist (404): unknown model id or file`);
  }
  if (response.status === 401 || response.status === 403) {
    throw new Error(`${url}: access denied (${response.status}); gated or private models are not supported`);
  }
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  const total = Number(response.headers.get("content-length")) || size || 0;
  const reader = response.body.getReader();
  const chunks = [];
  let loaded = 0;
  for (;;) {
    let part;
    try {
      part = await reader.read();
    } catch (err) {
      if (signal?.aborted) throw cancelledError();
      throw err;
    }
    const { done, value } = part;
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    onBytes(loaded, total);
  }
  if ((total && loaded < total) || (size && loaded !== size)) {
    throw new Error(`${url.split("/").pop()}: download incomplete (${loaded} of ${size || total} bytes); try again`);
  }
  const bytes = new Uint8Array(loaded);
  let offset = 0;
  for (const c of chunks) {
    bytes.set(c, offset);
    offset += c.length;
  }
  if (sha256 && (await sha256Hex(bytes)) !== sha256) {
    throw new Error(`${url.split("/").pop()}: sha256 does not match the manifest (corrupt or changed file)`);
  }
  if (cache) await cache.put(url, verified(bytes, sha256));
  return { bytes, fromCache: false };
}

/**
 * The prepared file (`blindspot prepare`: network, config, tokenizer and
 * COMET's hparams in one .bpk) the site serves for a load at `precision`
 * (the engine's name, `precisionName`), or null: `model.bpk` whatever was
 * asked (it holds its own precision), or `model.<precision>.bpk` beside the
 * f32 files (`make dist` writes `model.int8.bpk` for MiniLM: a quarter of the
 * download, the numbers an int8 load of the f32 files gives).
 */
export function preparedFile(files, precision = "f32") {
  if (files["model.bpk"]) return "model.bpk";
  const named = `model.${precision}.bpk`;
  return files[named] ? named : null;
}

/**
 * True when every file of `id` a load at `precision` (the engine's name)
 * reads that we know of is in Cache Storage.
 */
export async function isCached(id, precision = "f32") {
  if (!("caches" in self)) return false;
  const { base, files } = await modelSource(id);
  const cache = await caches.open(CACHE_NAME);
  const held = async (name) => {
    const cached = await cache.match(base + name);
    return Boolean(cached) && !changedSince(cached, files[name]?.sha256);
  };
  const prepared = preparedFile(files, precision);
  if (prepared) return held(prepared);
  return (await held("config.json")) && (await held("tokenizer.json"));
}

/** Empties the model cache. */
export async function clearModelCache() {
  if ("caches" in self) await caches.delete(CACHE_NAME);
}

/**
 * Fetches a checkpoint's files for a load at `precision` (the engine's name,
 * "f32" or "int8": `precisionName`).
 * onProgress({ file, loaded, total }) reports bytes over all files. Resolves
 * to { config, tokenizer (or spm + tokenizerConfig, + vocab for PRISM), shards, fromCache, where },
 * or { prepared, shards: [], fromCache, where } for a prepared .bpk file.
 */
export async function fetchCheckpoint(id, onProgress = () => {}, precision = "f32", signal = undefined) {
  const source = await modelSource(id);
  const known = (name) => source.files[name] ?? {};
  const done = {};
  const sizes = {};
  const report = (file) => (loaded, total) => {
    done[file] = loaded;
    sizes[file] = Math.max(total, loaded);
    const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
    onProgress({ file, loaded: sum(done), total: sum(sizes) });
  };
  const get = (name, optional = false) =>
    fetchModelFile(source.base + name, { ...known(name), onBytes: report(name), optional, signal });
  // A prepared file where the site's manifest lists one for this precision.
  const preparedName = preparedFile(source.files, precision);
  if (preparedName) {
    const prepared = await get(preparedName);
    return { prepared: prepared.bytes, shards: [], fromCache: prepared.fromCache, where: source.where };
  }
  const cometError = () =>
    new Error(`${id} is a COMET checkpoint (hparams.yaml + checkpoints/model.ckpt, a PyTorch pickle): the browser cannot read PyTorch pickles yet. Convert it once with the CLI (\`blindspot prepare DIR comet.bpk\`, DIR holding the hub files and the encoder's config.json and tokenizer.json) and serve model.bpk from this site's models/ folder`);
  const missing = (name) => new Error(`${source.base + name} does not exist (404): unknown model id or file`);
  // A COMET hub repository has hparams.yaml and a checkpoint, but no config.json.
  const [config, tokenizer] = await Promise.all([get("config.json", true), get("tokenizer.json", true)]);
  if (!config) throw (await get("hparams.yaml", true)) ? cometError() : missing("config.json");
  // BLEURT-20 and some T5 repositories ship their SentencePiece model instead (the engine
  // builds the tokenizer from it).
  const spm = tokenizer ? null : (await get("spm.model", true)) ?? (await get("spiece.model", true));
  if (!tokenizer && !spm) {
    throw new Error((await get("vocab.txt", true))
      ? `${id} has a WordPiece vocab.txt but no tokenizer.json: the browser builds no tokenizer from it. Convert the model once with the CLI (\`blindspot prepare DIR model.bpk\`, DIR holding the hub files) and serve model.bpk from this site's models/ folder`
      : `${id} has neither tokenizer.json nor a SentencePiece model (spm.model, spiece.model) (404)`);
  }
  // Decoder LLMs carry their chat template in tokenizer_config.json or chat_template.jinja.
  const chatModel = ["llama", "qwen2", "qwen3"].includes(modelType(config.bytes));
  const tokenizerConfig = spm || chatModel ? await get("tokenizer_config.json", true) : null;
  const chatTemplate = chatModel ? await get("chat_template.jinja", true) : null;
  // A fairseq model's hub port (PRISM's) numbers its pieces by its dictionary.
  const vocab = spm ? await get("prism_vocab.json", true) : null;
  let shards;
  const single = await get("model.safetensors", true);
  if (single) {
    shards = [single];
  } else {
    const index = await get("model.safetensors.index.json", true);
    if (!index && (await get("hparams.yaml", true))) throw cometError();
    if (!index) throw new Error(`${id} has neither model.safetensors nor model.safetensors.index.json: only safetensors checkpoints load in the browser. A repository with only pytorch_model.bin (BLEURT-20's) can be converted once with the CLI (\`blindspot prepare DIR model.bpk\`) and served from this site's models/ folder (scripts/fetch_models.py --prepared)`);
    const names = [...new Set(Object.values(JSON.parse(new TextDecoder().decode(index.bytes)).weight_map ?? {}))];
    shards = [];
    for (const name of names) shards.push(await get(name));
  }
  const all = [config, tokenizer ?? spm, ...shards];
  return {
    config: new TextDecoder().decode(config.bytes),
    tokenizer: tokenizer?.bytes,
    spm: spm?.bytes,
    tokenizerConfig: tokenizerConfig ? new TextDecoder().decode(tokenizerConfig.bytes) : undefined,
    vocab: vocab ? new TextDecoder().decode(vocab.bytes) : undefined,
    chatTemplate: chatTemplate ? new TextDecoder().decode(chatTemplate.bytes) : undefined,
    shards: shards.map((s) => s.bytes),
    fromCache: all.every((f) => f.fromCache),
    where: source.where,
  };
}

/** config.json's model_type, or "" where the file does not say (the engine reports a bad file). */
function modelType(bytes) {
  try {
    return String(JSON.parse(new TextDecoder().decode(bytes)).model_type ?? "");
  } catch {
    return "";
  }
}

/** Bytes of the largest tensor in safetensors shards (from their JSON headers). */
export function largestTensorBytes(shards) {
  let largest = 0;
  for (const bytes of shards) {
    if (bytes.length < 8) continue;
    const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
    if (n <= 0 || 8 + n > bytes.length) continue;
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
    for (const [name, t] of Object.entries(header)) {
      if (name !== "__metadata__" && Array.isArray(t.data_offsets)) {
        // Loaded as f32 whatever the stored width.
        const count = t.shape.reduce((a, b) => a * b, 1);
        largest = Math.max(largest, count * 4);
      }
    }
  }
  return largest;
}

/**
 * Why this GPU cannot hold the model (its largest tensor exceeds the
 * adapter's buffer limits), or null when it can.
 */
export function adapterLimitProblem(largestBytes, limits) {
  const cap = Math.min(limits.maxStorageBufferBindingSize ?? Infinity, limits.maxBufferSize ?? Infinity);
  if (largestBytes <= cap) return null;
  return `the model's largest tensor (${(largestBytes / 1e6).toFixed(0)} MB) exceeds this GPU's buffer limit (${(cap / 1e6).toFixed(0)} MB)`;
}

async function webgpuProblem(shards) {
  if (!navigator.gpu) return "WebGPU is not available in this browser";
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return "no WebGPU adapter";
  return adapterLimitProblem(largestTensorBytes(shards), adapter.limits);
}

/**
 * Loads model `id` into the engine. backend: "auto" (WebGPU, else the CPU,
 * saying why), "webgpu" or "cpu"; precision any spelling the engine takes
 * ("f32", "int8", or the CLI's "q8"; an unknown one is refused before a
 * download). Resolves to the engine's model info plus { fromCache, where,
 * fallback }.
 */
export async function loadModel(wasm, id, { backend = "auto", precision = "f32", onProgress, onFetched, signal } = {}) {
  precision = wasm.precisionName(precision);
  const files = await fetchCheckpoint(id, onProgress, precision, signal);
  // A cancel that came while the last file was checked or cached still counts.
  if (signal?.aborted) throw cancelledError();
  onFetched?.();
  // A prepared file holds its own precision: int8 files load at int8.
  const load = (b) => wasm.loadModel(id, files.config, files.tokenizer, files.shards, files.prepared, b, precision, files.spm, files.tokenizerConfig, files.vocab, files.chatTemplate);
  let fallback = null;
  let info;
  const problem = backend === "cpu" ? null : await webgpuProblem(files.shards);
  if (backend === "webgpu" && problem) throw new Error(`cannot run on WebGPU: ${problem}`);
  if (backend === "auto") {
    if (problem) {
      fallback = problem;
      info = await load("cpu");
    } else {
      try {
        info = await load("webgpu");
      } catch (err) {
        if (err.restarted) throw err; // the engine, not WebGPU, failed
        fallback = String(err.message ?? err);
        info = await load("cpu");
      }
    }
  } else {
    info = await load(backend);
  }
  return { ...info, fromCache: files.fromCache, where: files.where, fallback };
}

/** Where the panel's "Run on" and "Weights" choices are kept. */
const CHOICES_KEY = "blindspot.models.choices.v1";

/** The panel's loaded models by registry/hub id (several can be loaded: one per metric). */
// loaded: id -> the engine's info on the model ({handle, name, metrics...}), in load order.
const panel = { wasm: null, handle: null, loaded: new Map(), asked: new Map() };

/** What was asked for each loaded model, in load order: `[{id, backend, precision}]` (links, reloads). */
export function loadedModels() {
  return [...panel.asked.entries()].map(([id, a]) => ({ id, ...a }));
}

/** The loaded model named `name` (its info: backend, precision, parameters...), or null. */
export function loadedModel(name) {
  return [...panel.loaded.values()].reverse().find((m) => m.name === name) ?? null;
}

/** The newest loaded model with a masked-LM head (BERT-diverge's and the attacks'), or null. */
export function loadedMaskedLm() {
  return [...panel.loaded.values()].reverse().find((m) => m.kinds.includes("masked-lm")) ?? null;
}

/** Whether a loaded model serves BERTScore as a plain encoder (not an NLI classifier). */
export function hasBertScoreEncoder() {
  return [...panel.loaded.values()].some((m) => m.kinds.includes("encoder") && !isNliModel(m));
}

/** The newest loaded causal language model (a GPT-2: the audit's perplexity correlate), or null. */
export function loadedCausalLm() {
  return [...panel.loaded.values()].reverse().find((m) => m.kinds.includes("causal-lm")) ?? null;
}

/**
 * NLI classifiers run the encoder metrics too (BERTScore, MoverScore read
 * their encoder), but they are loaded for MENLI: pickers take a plain
 * encoder first and never switch to a classifier on their own.
 */
export const isNliModel = (m) => m.kinds.includes("nli");

/** The newest of `list` (in load order), a plain encoder before an NLI classifier, or null. */
export function newestEncoderFirst(list) {
  const newestFirst = [...list].reverse();
  return newestFirst.find((m) => !isNliModel(m)) ?? newestFirst[0] ?? null;
}

/** A registry size in MB as people read it: "90.9 MB", "1.4 GB". */
const sizeText = (mb) => (mb >= 1000 ? `${(mb / 1000).toFixed(1)} GB` : `${mb} MB`);

/** A model's size as the registry lists it ("90.9 MB"), or null for a hub id it does not list. */
export function registrySize(id) {
  const m = panel.wasm.modelRegistry().find((r) => r.id === id);
  return m ? sizeText(m.size_mb) : null;
}

/**
 * What a load of `id` at `precision` (the engine's name) downloads ("26.0
 * MB"): the prepared file's size where the site serves one, else the
 * registry's size, or null.
 */
export async function downloadSize(id, precision = "f32") {
  const { files } = await modelSource(id);
  const prepared = preparedFile(files, precision);
  if (prepared && files[prepared].size) return mb(files[prepared].size);
  return registrySize(id);
}

/** The engine's name for `precision`, or null where it has none. */
function safePrecisionName(precision) {
  try {
    return panel.wasm.precisionName(precision);
  } catch {
    return null;
  }
}

/** The panel's choice for `precision` (any spelling the engine takes), or an error saying why there is none. */
function precisionChoice(precision) {
  const name = panel.wasm.precisionName(precision);
  if (![...$("model-precision").options].some((o) => o.value === name)) throw new Error(`the panel has no ${name} load`);
  return name;
}

/** The loads asked through `loadModels`, one after another (a double click asks twice). */
let loadQueue = Promise.resolve();

/**
 * Loads models one after another through the panel, as if picked there:
 * `[{id, backend, precision}]` (left out, the panel's precision stays).
 * A list asked while another loads waits for it, and a model already loaded
 * as asked is not loaded again. Resolves to the ids that failed (the panel
 * says why).
 */
export function loadModels(list) {
  const run = loadQueue.then(() => loadEach(list));
  loadQueue = run.catch(() => {});
  return run;
}

async function loadEach(list) {
  const failed = [];
  for (const [i, { id, backend, precision }] of list.entries()) {
    const had = panel.asked.get(id);
    const same = had && panel.loaded.has(id) && (backend === undefined || backend === had.backend) &&
      (precision === undefined || safePrecisionName(precision) === had.precision);
    if (same) continue;
    if (precision !== undefined) {
      try {
        $("model-precision").value = precisionChoice(precision);
      } catch (err) {
        status(`${id}: ${err.message ?? err}`, "bad");
        failed.push(id);
        continue;
      }
    }
    const listed = [...$("model-pick").options].some((o) => o.value === id);
    $("model-pick").value = listed ? id : $("model-pick").value;
    $("model-custom").value = listed ? "" : id;
    if (["auto", "webgpu", "cpu"].includes(backend)) $("model-backend").value = backend;
    refreshLoadedNote();
    const loaded = await onLoad();
    if (loaded === "cancelled") {
      // The user stopped the downloads: the rest of the list is not started.
      failed.push(...list.slice(i).map((m) => m.id));
      break;
    }
    if (!loaded) failed.push(id);
  }
  return failed;
}

/** Unloads `id`; `replacing`: a new copy of it is about to load (the load's own status follows). */
function unload(id, { replacing = false } = {}) {
  const handle = panel.loaded.get(id)?.handle;
  if (handle === undefined) return;
  Promise.resolve(panel.wasm.unloadModel(handle)).catch((err) => console.warn(`unloading ${id}:`, err));
  panel.loaded.delete(id);
  panel.asked.delete(id);
  if (panel.handle === handle) panel.handle = null;
  // The probe runs the last model loaded; the pill and the status speak of loaded models.
  $("model-probe-run").disabled = panel.handle === null;
  $("model-backend-pill").hidden = panel.loaded.size === 0;
  if (!replacing) status(panel.loaded.size ? `${id} unloaded.` : `${id} unloaded: no model is loaded.`);
  document.dispatchEvent(new CustomEvent("blindspot:model-unloaded", { detail: { handle, name: id } }));
}

/** The engine restarted (model-engine.js): every loaded model is gone. */
function forgetAll(reason) {
  // Cleared first, as `unload` does: the events' listeners save the visit.
  const gone = [...panel.loaded].map(([id, info]) => [id, info.handle]);
  panel.loaded.clear();
  panel.asked.clear();
  panel.handle = null;
  for (const [id, handle] of gone) {
    document.dispatchEvent(new CustomEvent("blindspot:model-unloaded", { detail: { handle, name: id } }));
  }
  $("model-probe-run").disabled = true;
  $("model-backend-pill").hidden = true;
  refreshLoadedNote();
  status(`${reason}: load them again.`, "bad");
}

function refreshLoadedNote() {
  const ids = [...panel.loaded.keys()];
  $("model-loaded").textContent = ids.length ? `Loaded: ${ids.join(", ")}` : "No model loaded.";
  $("model-unload").disabled = !panel.loaded.has(chosenId());
}

function status(text, kind = "muted") {
  const el = $("model-status");
  el.textContent = text;
  el.className = kind;
}

const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

/** Registry models this large get a warning before they are fetched. */
const LARGE_MB = 1000;

/** Warns about a large registry model (its download and memory). */
function refreshSizeWarning() {
  const m = panel.wasm.modelRegistry().find((r) => r.id === chosenId());
  const el = $("model-size-warning");
  el.hidden = !(m && m.size_mb >= LARGE_MB);
  if (!el.hidden) el.textContent = `${m.id} is a large download (about ${sizeText(m.size_mb)}) and needs about as much memory: a smaller model scores far faster in a browser.`;
}

async function refreshCacheNote() {
  refreshSizeWarning();
  const id = chosenId();
  const cached = await isCached(id, $("model-precision").value).catch(() => false);
  $("model-cache").textContent = cached ? "in this browser's cache" : "not cached yet";
  $("model-cache").dataset.cached = String(cached);
}

/** The model the panel acts on: a typed hub id, else the registry pick. */
const chosenId = () => $("model-custom").value.trim() || $("model-pick").value;

/** Loads the model the panel shows; resolves to whether it loaded ("cancelled" when the user cancelled the download). */
async function onLoad() {
  const id = chosenId();
  const asked = { backend: $("model-backend").value, precision: $("model-precision").value };
  const bar = $("model-progress");
  $("model-load").disabled = true;
  bar.hidden = false;
  bar.value = 0;
  bar.dataset.updates = "0";
  status(`Fetching ${id}…`);
  let replaced = false;
  // The download can be cancelled; loading the files into the engine cannot.
  const download = new AbortController();
  const cancel = $("model-cancel");
  cancel.hidden = false;
  cancel.disabled = false;
  cancel.onclick = () => {
    cancel.disabled = true;
    download.abort();
  };
  try {
    const started = performance.now();
    const info = await loadModel(panel.wasm, id, {
      backend: $("model-backend").value,
      precision: $("model-precision").value,
      signal: download.signal,
      // Loading again replaces it (another backend or precision): once the
      // files are here, so a failed download keeps the working copy, but
      // before the engine loads them, so two copies never share the memory.
      onFetched: () => {
        cancel.hidden = true;
        replaced = panel.loaded.has(id);
        unload(id, { replacing: true });
      },
      onProgress: ({ loaded, total }) => {
        bar.max = total || 1;
        bar.value = loaded;
        bar.dataset.updates = String(Number(bar.dataset.updates ?? 0) + 1);
        bar.dataset.fraction = String(total ? loaded / total : 0);
        const pct = total ? ` (${Math.floor((100 * loaded) / total)}%)` : "";
        status(`Downloading ${id}: ${mb(loaded)}${total ? ` of ${mb(total)}` : ""}${pct}`);
      },
    });
    panel.handle = info.handle;
    panel.loaded.set(id, info);
    panel.asked.set(id, asked);
    const where = info.backend === "webgpu" ? "runs on WebGPU" : "runs on the CPU";
    const why = info.fallback ? ` (WebGPU unavailable: ${info.fallback})` : "";
    const from = info.fromCache ? "from the browser cache" : `from ${info.where}`;
    const secs = ((performance.now() - started) / 1000).toFixed(1);
    status(`${info.name}: ${info.architecture}, ${info.layers} layers × ${info.hidden}, ${info.precision}, ${where}${why}; loaded ${from} in ${secs} s`, info.fallback ? "warn" : "ok");
    const el = $("model-backend-pill");
    el.textContent = info.backend === "webgpu" ? "Model: WebGPU" : "Model: CPU";
    el.hidden = false;
    document.body.dataset.modelBackend = info.backend;
    $("model-probe-run").disabled = false;
    document.dispatchEvent(new CustomEvent("blindspot:model", { detail: info }));
    return true;
  } catch (err) {
    if (err.cancelled) {
      const kept = panel.loaded.has(id) ? ` (the copy loaded before is still loaded)` : "";
      status(`Download of ${id} cancelled: nothing new was loaded${kept}; files already complete stay in the browser cache.`);
      return "cancelled";
    }
    const gone = replaced ? ` (the copy loaded before was unloaded to make room: load it again)` : "";
    status(String(err.message ?? err) + gone, "bad");
    return false;
  } finally {
    cancel.hidden = true;
    cancel.onclick = null;
    bar.hidden = true;
    $("model-load").disabled = false;
    refreshCacheNote();
    refreshLoadedNote();
  }
}

async function onProbe() {
  if (!panel.handle) return;
  try {
    const e = await panel.wasm.embedText(panel.handle, $("model-probe-text").value, undefined);
    const norms = [];
    for (let t = 0; t < e.tokens.length; t++) {
      let s = 0;
      for (let j = 0; j < e.width; j++) s += e.hidden[t * e.width + j] ** 2;
      norms.push(Math.sqrt(s));
    }
    const mean = norms.reduce((a, b) => a + b, 0) / norms.length;
    $("model-probe-out").textContent = `${e.tokens.length} tokens${e.truncated ? " (cut to the model's limit)" : ""}, layer ${e.layer}: mean hidden-state norm ${mean.toFixed(4)}, ${e.elapsedMs.toFixed(0)} ms`;
  } catch (err) {
    $("model-probe-out").textContent = String(err.message ?? err);
  }
}

/** Wires the "Language models" panel. */
export async function initModels(wasm) {
  panel.wasm = wasm;
  const pick = $("model-pick");
  for (const m of wasm.modelRegistry()) {
    const opt = new Option(`${m.id} (${sizeText(m.size_mb)}, ${m.licence}; ${m.metrics.join(", ")})`, m.id);
    pick.append(opt);
  }
  pick.addEventListener("change", () => {
    refreshCacheNote();
    refreshLoadedNote();
  });
  $("model-custom").addEventListener("input", () => {
    refreshLoadedNote();
    refreshCacheNote();
  });
  // "Run on" and "Weights" are kept across visits (a machine whose WebGPU is broken keeps the CPU).
  try {
    const kept = JSON.parse(localStorage.getItem(CHOICES_KEY)) ?? {};
    for (const [id, value] of [["model-backend", kept.backend], ["model-precision", kept.precision]]) {
      if ([...$(id).options].some((o) => o.value === value)) $(id).value = value;
    }
  } catch {
    // A damaged entry: the defaults.
  }
  const keep = () => {
    try {
      localStorage.setItem(CHOICES_KEY, JSON.stringify({ backend: $("model-backend").value, precision: $("model-precision").value }));
    } catch {
      // Storage full or off: the choices last this visit.
    }
  };
  $("model-backend").addEventListener("change", keep);
  $("model-precision").addEventListener("change", () => {
    keep();
    refreshCacheNote();
  });
  $("model-unload").addEventListener("click", () => {
    unload(chosenId());
    refreshLoadedNote();
  });
  refreshLoadedNote();
  $("model-load").addEventListener("click", onLoad);
  document.addEventListener("blindspot:models-reset", (e) => forgetAll(e.detail.reason));
  $("model-probe-run").addEventListener("click", onProbe);
  $("model-clear-cache").addEventListener("click", async () => {
    try {
      await clearModelCache();
      status("Model cache cleared.");
    } catch (err) {
      status(`Could not clear the model cache: ${err.message ?? err}`, "bad");
    }
    refreshCacheNote();
  });
  await refreshCacheNote();
}
