//! Browser bindings of the PLM engine: load a checkpoint from bytes the page
//! fetched (WebGPU or CPU), keep it under a handle, run it asynchronously.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use burn::tensor::Device;
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::gpu;
use crate::metrics::bertscore::TokenEmbeddings;
use crate::models::weights::WeightSource;
use crate::models::{ModelFiles, Plm, Precision, read_back, registry};

thread_local! {
    /// Loaded models by handle.
    static MODELS: RefCell<HashMap<u32, Rc<Plm>>> = RefCell::new(HashMap::new());
    static NEXT_HANDLE: RefCell<u32> = const { RefCell::new(1) };
    /// Recent reference embeddings `(handle, layer, text)`: while the user
    /// edits the hypothesis, the reference is embedded once, not per keystroke.
    static REFERENCE_CACHE: RefCell<Vec<CachedReference>> =
        const { RefCell::new(Vec::new()) };
}

/// A reference's embeddings: model handle, layer, text.
type CachedReference = (u32, usize, String, Rc<TokenEmbeddings>);

/// Reference embeddings kept (a few references, a few layers).
const REFERENCE_CACHE_SIZE: usize = 8;

// Borrows of the cache never span an `await`: another call may run meanwhile.
fn cached_reference(handle: u32, layer: usize, text: &str) -> Option<Rc<TokenEmbeddings>> {
    REFERENCE_CACHE.with(|c| {
        c.borrow()
            .iter()
            .find(|(h, l, t, _)| *h == handle && *l == layer && t == text)
            .map(|e| e.3.clone())
    })
}

fn remember_reference(handle: u32, layer: usize, text: &str, emb: Rc<TokenEmbeddings>) {
    REFERENCE_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.retain(|(h, l, t, _)| !(*h == handle && *l == layer && t == text));
        c.push((handle, layer, text.to_owned(), emb));
        let excess = c.len().saturating_sub(REFERENCE_CACHE_SIZE);
        c.drain(..excess);
    });
}

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

fn model(handle: u32) -> Result<Rc<Plm>, JsError> {
    MODELS
        .with(|m| m.borrow().get(&handle).cloned())
        .ok_or_else(|| JsError::new("this model was unloaded; load it again"))
}

/// The registry of `models.toml` (hub ids, sizes, licences, layers).
#[wasm_bindgen(js_name = modelRegistry)]
pub fn model_registry() -> Result<JsValue, JsError> {
    serde_wasm_bindgen::to_value(&registry::models()).map_err(js_err)
}

/// What the page shows about a loaded model.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModelInfo {
    handle: u32,
    name: String,
    architecture: String,
    layers: usize,
    hidden: usize,
    max_tokens: usize,
    labels: Vec<String>,
    /// Model-based metric ids this checkpoint can run.
    metrics: Vec<&'static str>,
    backend: &'static str,
    precision: Precision,
}

async fn device_for(backend: &str) -> Result<(Device, &'static str), JsError> {
    match backend {
        "webgpu" => Ok((
            gpu::webgpu_device().await.map_err(|e| JsError::new(&e))?,
            "webgpu",
        )),
        "cpu" => Ok((Device::flex(), "cpu")),
        other => Err(JsError::new(&format!(
            "unknown backend `{other}` (webgpu or cpu)"
        ))),
    }
}

/// Loads a checkpoint from its files' bytes: `config.json` text,
/// `tokenizer.json` bytes and the safetensors shards (one array per file),
/// or a prepared `.bpk` (`prepared`, config and tokenizer inside). Resolves
/// to the model's info (with the handle later calls take).
#[wasm_bindgen(js_name = loadModel)]
pub async fn load_model(
    name: String,
    config_json: Option<String>,
    tokenizer_json: Option<Vec<u8>>,
    shards: Vec<js_sys::Uint8Array>,
    prepared: Option<Vec<u8>>,
    backend: String,
    precision: String,
) -> Result<JsValue, JsError> {
    let precision: Precision = precision.parse().map_err(|e: String| JsError::new(&e))?;
    let files = match prepared {
        Some(bytes) => ModelFiles::from_burnpack(bytes).map_err(js_err)?,
        None => ModelFiles {
            config_json: config_json.ok_or_else(|| JsError::new("config.json is missing"))?,
            tokenizer_json,
            weights: WeightSource::Safetensors(shards.iter().map(|s| s.to_vec()).collect()),
            stored_precision: Precision::F32,
        },
    };
    let (device, backend) = device_for(&backend).await?;
    let plm = Plm::load(&name, files, &device, precision).map_err(js_err)?;
    let handle = NEXT_HANDLE.with(|n| {
        let h = *n.borrow();
        *n.borrow_mut() = h + 1;
        h
    });
    let info = ModelInfo {
        handle,
        name: plm.name.clone(),
        architecture: plm.config.architecture.clone(),
        layers: plm.config.num_layers,
        hidden: plm.config.hidden_size,
        max_tokens: plm
            .tokenizer
            .max_length()
            .unwrap_or(plm.config.max_tokens()),
        labels: plm.config.labels.clone(),
        metrics: crate::metrics::model_metrics_for(&plm.config),
        backend,
        precision,
    };
    MODELS.with(|m| m.borrow_mut().insert(handle, Rc::new(plm)));
    serde_wasm_bindgen::to_value(&info).map_err(js_err)
}

/// Frees a loaded model.
#[wasm_bindgen(js_name = unloadModel)]
pub fn unload_model(handle: u32) {
    MODELS.with(|m| m.borrow_mut().remove(&handle));
    REFERENCE_CACHE.with(|c| c.borrow_mut().retain(|e| e.0 != handle));
}

/// One text's hidden states at one layer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Embedding {
    tokens: Vec<u32>,
    truncated: bool,
    layer: usize,
    width: usize,
    /// Row-major `[tokens, width]`.
    hidden: Vec<f32>,
    /// Milliseconds from the call to the read-back values.
    elapsed_ms: f64,
}

/// Encodes `text` and returns the hidden states of `layer` (default: last).
#[wasm_bindgen(js_name = embedText)]
pub async fn embed_text(
    handle: u32,
    text: String,
    layer: Option<usize>,
) -> Result<JsValue, JsError> {
    let start = js_sys::Date::now();
    let plm = model(handle)?;
    let layers = plm.config.num_layers;
    let layer = layer.unwrap_or(layers);
    if layer > layers {
        return Err(JsError::new(&format!(
            "layer {layer} does not exist (0..={layers})"
        )));
    }
    let enc = plm.encode(&text).map_err(js_err)?;
    let ids: Vec<u32> = enc.tokens.iter().map(|t| t.id).collect();
    let out = plm.forward(std::slice::from_ref(&ids)).map_err(js_err)?;
    let (hidden, [_, _, width]) = read_back(out.hidden_states[layer].clone())
        .await
        .map_err(js_err)?;
    let result = Embedding {
        tokens: ids,
        truncated: enc.truncated,
        layer,
        width,
        hidden,
        elapsed_ms: js_sys::Date::now() - start,
    };
    serde_wasm_bindgen::to_value(&result).map_err(js_err)
}

/// BERTScore of one pair, with what the heatmap draws.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BertScoreView {
    p: f64,
    r: f64,
    f: f64,
    /// Index of the reference that gave the best F (the heatmap shows it).
    best_reference: usize,
    hyp_tokens: Vec<String>,
    ref_tokens: Vec<String>,
    /// Token weights (0 for special tokens).
    hyp_weights: Vec<f32>,
    ref_weights: Vec<f32>,
    /// `[hyp tokens, ref tokens]` cosine similarities, row-major.
    similarity: Vec<f32>,
    hyp_best: Vec<usize>,
    ref_best: Vec<usize>,
    layer: usize,
    truncated: bool,
    signature: String,
    /// P, R and F are rescaled with the model's baseline.
    rescaled: bool,
    elapsed_ms: f64,
}

/// Scores `hyp` against `refs` with BERTScore at `layer` (default: the last)
/// on a loaded model. Special tokens weigh 0; the others 1, or with `idf`
/// their idf over `refs` (the set of references on the page, as bert_score
/// computes it over a set's references; it needs at least two). `rescale`
/// applies the model's baseline at that layer (an error where none is known).
#[wasm_bindgen(js_name = bertScorePair)]
pub async fn bert_score_pair(
    handle: u32,
    hyp: String,
    refs: Vec<String>,
    layer: Option<usize>,
    idf: Option<bool>,
    rescale: Option<bool>,
) -> Result<JsValue, JsError> {
    use crate::metrics::bertscore;
    let start = js_sys::Date::now();
    let plm = model(handle)?;
    if refs.is_empty() || refs.iter().all(|r| r.trim().is_empty()) {
        return Err(JsError::new("BERTScore needs a reference"));
    }
    if hyp.trim().is_empty() {
        return Err(JsError::new("BERTScore needs a hypothesis"));
    }
    let idf = idf.unwrap_or(false);
    if idf && refs.len() < 2 {
        return Err(JsError::new(
            "idf weights come from a set of references: with one, each of its tokens has df = 1 \
             and weighs ln(2/2) = 0. Add references (separated by a blank line) or turn idf off",
        ));
    }
    let layer = layer.unwrap_or(plm.config.num_layers);
    let baseline = match rescale {
        Some(true) => {
            Some(bertscore::baseline_for(&plm.name, layer).map_err(|e| JsError::new(&e))?)
        }
        _ => None,
    };
    // The hypothesis and any reference not embedded yet, in one pass.
    let known: Vec<Option<Rc<TokenEmbeddings>>> = refs
        .iter()
        .map(|r| cached_reference(handle, layer, r))
        .collect();
    let mut texts: Vec<&str> = vec![hyp.as_str()];
    texts.extend(
        refs.iter()
            .zip(&known)
            .filter(|(_, k)| k.is_none())
            .map(|(r, _)| r.as_str()),
    );
    let mut fresh = bertscore::embed(&plm, &texts, layer)
        .await
        .map_err(js_err)?
        .into_iter();
    let mut emb: Vec<Rc<TokenEmbeddings>> = vec![Rc::new(fresh.next().expect("the hypothesis"))];
    for (r, k) in refs.iter().zip(known) {
        let e = match k {
            Some(e) => e,
            None => {
                let e = Rc::new(fresh.next().expect("one embedding per new reference"));
                remember_reference(handle, layer, r, e.clone());
                e
            }
        };
        emb.push(e);
    }
    let weights = if idf {
        let ids: Vec<&[u32]> = emb[1..].iter().map(|e| e.ids.as_slice()).collect();
        bertscore::Weights::idf(&plm, &ids)
    } else {
        bertscore::Weights::uniform(&plm)
    };
    let pairs: Vec<bertscore::PairScore> = emb[1..]
        .iter()
        .map(|r| bertscore::score_pair(&emb[0], r, &weights))
        .collect();
    let best = (0..pairs.len())
        .max_by(|&a, &b| pairs[a].f.total_cmp(&pairs[b].f))
        .expect("at least one reference");
    let mut total = bertscore::BertScore::best_of(&pairs);
    let mut signature = bertscore::signature(&plm.name, layer, idf, &plm.precision.to_string());
    if let Some(b) = &baseline {
        total = bertscore::rescale(total, b.prf);
        signature.push_str(&b.signature_suffix());
    }
    let tokens = |e: &bertscore::TokenEmbeddings| -> Result<Vec<String>, JsError> {
        e.ids
            .iter()
            .map(|&id| plm.tokenizer.decode(&[id]).map_err(js_err))
            .collect()
    };
    let (h, r) = (&emb[0], &emb[best + 1]);
    let view = BertScoreView {
        p: total.p,
        r: total.r,
        f: total.f,
        best_reference: best,
        hyp_tokens: tokens(h)?,
        ref_tokens: tokens(r)?,
        hyp_weights: h.ids.iter().map(|&id| weights.of(id)).collect(),
        ref_weights: r.ids.iter().map(|&id| weights.of(id)).collect(),
        similarity: pairs[best].similarity.clone(),
        hyp_best: pairs[best].hyp_best.clone(),
        ref_best: pairs[best].ref_best.clone(),
        layer,
        truncated: emb.iter().any(|e| e.truncated),
        signature,
        rescaled: baseline.is_some(),
        elapsed_ms: js_sys::Date::now() - start,
    };
    serde_wasm_bindgen::to_value(&view).map_err(js_err)
}

/// A text's perplexity with each token's surprisal, for the page.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PerplexityView {
    /// Perplexity (the metric reports it negated); None: nothing to score.
    perplexity: Option<f64>,
    /// Each token's text and its surprisal in nats (None: not scored).
    tokens: Vec<(String, Option<f64>)>,
    /// Byte span of each token in the text (empty for added tokens).
    spans: Vec<(usize, usize)>,
    truncated: bool,
    signature: String,
    elapsed_ms: f64,
}

/// GPT-PPL (`kind` "causal", `bos` puts `<|endoftext|>` first) or MLM
/// pseudo-perplexity (`kind` "masked") of `text` on a loaded model.
#[wasm_bindgen(js_name = perplexityText)]
pub async fn perplexity_text(
    handle: u32,
    text: String,
    kind: String,
    bos: bool,
) -> Result<JsValue, JsError> {
    use crate::metrics::perplexity;
    let start = js_sys::Date::now();
    let plm = model(handle)?;
    if text.trim().is_empty() {
        return Err(JsError::new("perplexity needs a hypothesis"));
    }
    let (result, signature) = match kind.as_str() {
        "causal" => (
            perplexity::causal(&plm, &[text.as_str()], bos).await,
            perplexity::causal_signature(&plm.name, bos, &plm.precision.to_string()),
        ),
        "masked" => (
            perplexity::pseudo(&plm, &[text.as_str()]).await,
            perplexity::pseudo_signature(&plm.name, &plm.precision.to_string()),
        ),
        other => {
            return Err(JsError::new(&format!(
                "unknown perplexity kind `{other}` (causal or masked)"
            )));
        }
    };
    let p = result.map_err(js_err)?.remove(0);
    let tokens = p
        .tokens
        .iter()
        .zip(&p.surprisal)
        .map(|(t, s)| Ok((plm.tokenizer.decode(&[t.id]).map_err(js_err)?, *s)))
        .collect::<Result<Vec<_>, JsError>>()?;
    let view = PerplexityView {
        perplexity: p.perplexity,
        spans: p
            .tokens
            .iter()
            .map(|t| (t.span.start, t.span.end))
            .collect(),
        tokens,
        truncated: p.truncated,
        signature,
        elapsed_ms: js_sys::Date::now() - start,
    };
    serde_wasm_bindgen::to_value(&view).map_err(js_err)
}

/// MENLI for the page: the value and the probabilities behind it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MenliView {
    value: f64,
    /// Premise -> hypothesis and hypothesis -> premise (e, n, c).
    forward: crate::metrics::menli::NliProbs,
    backward: crate::metrics::menli::NliProbs,
    /// Which reference scored best.
    premise: usize,
    formula: &'static str,
    direction: &'static str,
    premise_kind: &'static str,
    signature: String,
    elapsed_ms: f64,
}

/// MENLI of `hyp` on a loaded NLI model. `task` (mt, summ, summ-free) picks
/// the paper's defaults; `formula` and `direction` override them.
#[wasm_bindgen(js_name = menliPair)]
pub async fn menli_pair(
    handle: u32,
    hyp: String,
    refs: Vec<String>,
    src: Option<String>,
    task: String,
    formula: Option<String>,
    direction: Option<String>,
) -> Result<JsValue, JsError> {
    use crate::metrics::menli::{self, Premise, Task};
    let start = js_sys::Date::now();
    let plm = model(handle)?;
    let task: Task = task.parse().map_err(|e: String| JsError::new(&e))?;
    let mut setup = task.setup();
    if let Some(f) = formula.filter(|f| !f.is_empty()) {
        setup.formula = f.parse().map_err(|e: String| JsError::new(&e))?;
    }
    if let Some(d) = direction.filter(|d| !d.is_empty()) {
        setup.direction = d.parse().map_err(|e: String| JsError::new(&e))?;
    }
    if hyp.trim().is_empty() {
        return Err(JsError::new("MENLI needs a hypothesis"));
    }
    let refs: Vec<&str> = refs
        .iter()
        .map(String::as_str)
        .filter(|r| !r.trim().is_empty())
        .collect();
    let src = src.filter(|s| !s.trim().is_empty());
    let scores = menli::score_set(&plm, &[hyp.as_str()], &[refs], &[src.as_deref()], &setup)
        .await
        .map_err(js_err)?;
    let s = &scores[0];
    let view = MenliView {
        value: s.value,
        forward: s.forward,
        backward: s.backward,
        premise: s.premise,
        formula: setup.formula.name(),
        direction: setup.direction.name(),
        premise_kind: match setup.premise {
            Premise::Reference => "reference",
            Premise::Source => "source",
        },
        signature: menli::signature(&plm.name, &setup, &plm.precision.to_string()),
        elapsed_ms: js_sys::Date::now() - start,
    };
    serde_wasm_bindgen::to_value(&view).map_err(js_err)
}

/// MAUVE between two sets of texts, for the page.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MauveView {
    mauve: f64,
    frontier_integral: f64,
    mauve_star: f64,
    /// Cluster histograms of P and Q.
    p_hist: Vec<f64>,
    q_hist: Vec<f64>,
    /// Divergence curve points.
    curve: Vec<(f64, f64)>,
    clusters: usize,
    /// PCA dimensions kept.
    dimensions: usize,
    hypotheses: usize,
    references: usize,
    signature: String,
    elapsed_ms: f64,
}

/// MAUVE between `hyps` (P) and `refs` (Q), one text per entry (blank
/// entries dropped), featurised by a loaded model: last-token final-layer
/// features, then PCA, k-means (`clusters`, default max(2, round(n/10)),
/// `seed`) and the divergence curve, as `blindspot mauve`.
#[wasm_bindgen(js_name = mauveTexts)]
pub async fn mauve_texts(
    handle: u32,
    hyps: Vec<String>,
    refs: Vec<String>,
    clusters: Option<usize>,
    seed: Option<u64>,
) -> Result<JsValue, JsError> {
    use crate::metrics::mauve::{self, MauveError, Options};
    let start = js_sys::Date::now();
    let plm = model(handle)?;
    let keep = |texts: &[String]| -> Vec<String> {
        texts
            .iter()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect()
    };
    let (hyps, refs) = (keep(&hyps), keep(&refs));
    if hyps.len() < 2 || refs.len() < 2 {
        return Err(js_err(MauveError::TooFew {
            p: hyps.len(),
            q: refs.len(),
        }));
    }
    let (p_texts, q_texts): (Vec<&str>, Vec<&str>) = (
        hyps.iter().map(String::as_str).collect(),
        refs.iter().map(String::as_str).collect(),
    );
    let p = mauve::features(&plm, &p_texts).await.map_err(js_err)?;
    let q = mauve::features(&plm, &q_texts).await.map_err(js_err)?;
    let options = Options {
        clusters,
        seed: seed.unwrap_or(Options::default().seed),
        ..Options::default()
    };
    let result = mauve::compute(&p, &q, &options).map_err(js_err)?;
    let view = MauveView {
        mauve: result.mauve,
        frontier_integral: result.frontier_integral,
        mauve_star: result.mauve_star,
        p_hist: result.p_hist,
        q_hist: result.q_hist,
        curve: result.curve,
        clusters: result.clusters,
        dimensions: result.dimensions,
        hypotheses: hyps.len(),
        references: refs.len(),
        signature: mauve::signature(&plm.name, &options, &plm.precision.to_string()),
        elapsed_ms: js_sys::Date::now() - start,
    };
    serde_wasm_bindgen::to_value(&view).map_err(js_err)
}
