//! Browser bindings of the PLM engine: load a checkpoint from bytes the page
//! fetched (WebGPU or CPU), keep it by handle, and score through the core's
//! [`Engine`] (the same one the CLI runs), asynchronously.

use std::cell::RefCell;
use std::rc::Rc;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use super::{gpu, js_err, to_js};
use crate::metrics::engine::{Detail, EngineError};
use crate::metrics::{Engine, MetricSpec, ModelSlot, ModelStore, Score, Segment};
use crate::models::weights::WeightSource;
use crate::models::{ModelFiles, Plm, Precision, read_back, registry};

thread_local! {
    /// Loaded models, `(handle, model)`, oldest first.
    static MODELS: RefCell<Vec<(u32, Rc<Plm>)>> = const { RefCell::new(Vec::new()) };
    static NEXT_HANDLE: RefCell<u32> = const { RefCell::new(1) };
    /// The page's engine: the loaded models, details for the cards, and
    /// reference embeddings kept between keystrokes.
    static ENGINE: Rc<Engine> = Rc::new(Engine::new(PageModels).with_details());
    /// The engine of long runs over datasets (suites, the preference suite,
    /// the audit): the same models, no per-token details to build and drop.
    static BATCH_ENGINE: Rc<Engine> = Rc::new(Engine::new(PageModels));
}

/// The engine the page scores with (lexical metrics need no model).
pub(super) fn engine() -> Rc<Engine> {
    ENGINE.with(Rc::clone)
}

/// The engine of runs over datasets, whose details nobody reads.
pub(super) fn batch_engine() -> Rc<Engine> {
    BATCH_ENGINE.with(Rc::clone)
}

/// Drops what both engines keep of a model load.
fn forget(load: u64) {
    engine().forget(load);
    batch_engine().forget(load);
}

/// The page's loaded models as the engine's store: a spec names its model
/// by name (the hub id the page loaded); without a name, the newest loaded
/// model that can run the metric.
pub(super) struct PageModels;

impl ModelStore for PageModels {
    fn model(&self, slot: ModelSlot, name: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        MODELS.with(|m| {
            let models = m.borrow();
            let found = models.iter().rev().find(|(_, plm)| match name {
                Some(name) => plm.name == name,
                None => crate::metrics::plm_metrics(plm)
                    .iter()
                    .any(|id| id.info().slot == Some(slot)),
            });
            found.map(|(_, plm)| plm.clone()).ok_or_else(|| {
                EngineError::NoModel(match name {
                    Some(name) => format!("{name} is not loaded: load it in the Models panel"),
                    None => format!("{slot} needs a language model: load one in the Models panel"),
                })
            })
        })
    }
}

/// The newest loaded model called `name`.
pub(super) fn loaded(name: &str) -> Result<Rc<Plm>, JsError> {
    MODELS
        .with(|m| {
            m.borrow()
                .iter()
                .rev()
                .find(|(_, p)| p.name == name)
                .map(|(_, p)| p.clone())
        })
        .ok_or_else(|| {
            JsError::new(&format!(
                "{name} is not loaded: load it in the Models panel"
            ))
        })
}

fn model(handle: u32) -> Result<Rc<Plm>, JsError> {
    MODELS
        .with(|m| {
            m.borrow()
                .iter()
                .find(|(h, _)| *h == handle)
                .map(|(_, p)| p.clone())
        })
        .ok_or_else(|| JsError::new("this model was unloaded; load it again"))
}

/// The registry of `models.toml` (hub ids, sizes, licences, layers).
#[wasm_bindgen(js_name = modelRegistry)]
pub fn model_registry() -> Result<JsValue, JsError> {
    to_js(&registry::models())
}

/// The engine's name for a precision as a link, a saved visit or the CLI
/// spells it (`f32`, `fp32`, `none`, `q8`, `int8`): `f32` or `int8`, the name
/// a loaded model's info gives and the panel's values; an error for any other.
#[wasm_bindgen(js_name = precisionName)]
pub fn precision_name(precision: &str) -> Result<String, JsError> {
    precision
        .parse::<Precision>()
        .map(|p| p.to_string())
        .map_err(js_err)
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
    metrics: Vec<crate::metrics::MetricId>,
    /// What the model can serve as (`encoder`, `causal-lm`, `nli`...).
    kinds: Vec<crate::metrics::ModelKind>,
    backend: &'static str,
    precision: Precision,
    /// The network's parameter count.
    parameters: usize,
    /// The WebGPU warm-up pass at load ([`warm_up`]), in ms.
    warm_up_ms: Option<f64>,
    /// Whether it has a usable chat template (an instruction model a judge
    /// can run on).
    chat_template: bool,
}

/// One short pass, read back, right after a WebGPU load: the first pass
/// compiles the shaders, and this way the user's first keystroke does not
/// wait for that. Returns how long it took.
async fn warm_up(plm: &Plm) -> Result<f64, JsError> {
    let start = js_sys::Date::now();
    let ids = plm
        .encode("Blindspot warms the model up.")
        .map_err(js_err)?
        .ids();
    let out = plm.forward(&[ids]).map_err(js_err)?;
    let last = out.hidden_states.last().cloned();
    if let Some(last) = last {
        read_back(last).await.map_err(js_err)?;
    }
    Ok(js_sys::Date::now() - start)
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
/// `tokenizer.json` bytes (or a SentencePiece model: BLEURT-20's `spm.model`,
/// T5's `spiece.model`, with `tokenizer_config.json`; PRISM's `spm.model` with
/// its dictionary, `prism_vocab.json`) and the safetensors shards (one array per
/// file), or a prepared `.bpk` (`prepared`, config and tokenizer inside).
/// `tokenizer_config.json` and `chat_template.jinja` also carry a chat
/// model's template (the second preferred, as in transformers). Resolves
/// to the model's info (with the handle later calls take). A model loaded
/// again under the same name replaces the earlier one.
#[wasm_bindgen(js_name = loadModel)]
// One positional argument per file kind: byte arrays cross the wasm boundary
// without a copy per element this way (a deserialised options object would not).
#[allow(clippy::too_many_arguments)]
pub async fn load_model(
    name: String,
    config_json: Option<String>,
    tokenizer_json: Option<Vec<u8>>,
    shards: Vec<js_sys::Uint8Array>,
    prepared: Option<Vec<u8>>,
    backend: String,
    precision: String,
    sentencepiece: Option<Vec<u8>>,
    tokenizer_config: Option<String>,
    vocab_json: Option<String>,
    chat_template: Option<String>,
) -> Result<JsValue, JsError> {
    let precision: Precision = precision.parse().map_err(js_err)?;
    let tokenizer_json = match (tokenizer_json, sentencepiece) {
        (None, Some(spm)) if vocab_json.is_some() => Some(
            crate::models::weights::vocab_json_tokenizer(
                &spm,
                vocab_json.as_deref().unwrap_or_default(),
                config_json.as_deref().unwrap_or_default(),
            )
            .map_err(js_err)?,
        ),
        (None, Some(spm)) => Some(
            crate::models::weights::sentencepiece_tokenizer_json(
                &spm,
                tokenizer_config.as_deref(),
                config_json.as_deref().unwrap_or_default(),
            )
            .map_err(js_err)?,
        ),
        (tokenizer, _) => tokenizer,
    };
    let files = match prepared {
        Some(bytes) => ModelFiles::from_burnpack(bytes).map_err(js_err)?,
        None => ModelFiles {
            config_json: config_json.ok_or_else(|| JsError::new("config.json is missing"))?,
            tokenizer_json,
            weights: WeightSource::Safetensors(shards.iter().map(|s| s.to_vec()).collect()),
            stored_precision: Precision::F32,
            comet_hparams: None,
            tokenizer_config: match (tokenizer_config, chat_template) {
                (config, Some(template)) => Some(
                    crate::models::chat::with_template(config.as_deref(), &template)
                        .map_err(js_err)?,
                ),
                (config, None) => config,
            },
        },
    };
    // A prepared int8 or q4 file loads at its own precision whatever was
    // asked (its f32 weights are gone).
    let precision = match files.stored_precision {
        Precision::F32 => precision,
        stored => stored,
    };
    let (device, backend) = device_for(&backend).await?;
    let plm = Plm::load(&name, files, &device, precision).map_err(js_err)?;
    let warm_up_ms = if backend == "webgpu" {
        Some(warm_up(&plm).await?)
    } else {
        None
    };
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
        metrics: crate::metrics::plm_metrics(&plm),
        kinds: crate::metrics::plm_kinds(&plm),
        backend,
        precision,
        parameters: plm.parameters(),
        warm_up_ms,
        chat_template: matches!(plm.chat_template, Ok(Some(_))),
    };
    MODELS.with(|m| {
        let mut m = m.borrow_mut();
        for (_, old) in m.iter().filter(|(_, p)| p.name == plm.name) {
            forget(old.load_id);
        }
        m.retain(|(_, p)| p.name != plm.name);
        m.push((handle, Rc::new(plm)));
    });
    to_js(&info)
}

/// Frees a loaded model.
#[wasm_bindgen(js_name = unloadModel)]
pub fn unload_model(handle: u32) {
    let removed = MODELS.with(|m| {
        let mut m = m.borrow_mut();
        let gone: Vec<u64> = m
            .iter()
            .filter(|(h, _)| *h == handle)
            .map(|(_, p)| p.load_id)
            .collect();
        m.retain(|(h, _)| *h != handle);
        gone
    });
    for load in removed {
        forget(load);
        super::attack::forget(load);
    }
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
    super::count_job();
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
    let (mut hidden, [_, _, width]) = read_back(out.hidden_states[layer].clone())
        .await
        .map_err(js_err)?;
    // A GPU pass is padded (`Plm::pass_length`): keep the real tokens' rows.
    hidden.truncate(ids.len() * width);
    to_js(&Embedding {
        tokens: ids,
        truncated: enc.truncated,
        layer,
        width,
        hidden,
        elapsed_ms: js_sys::Date::now() - start,
    })
}

/// What a card asks to score: one spec, the page's texts.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ModelScoreRequest {
    spec: MetricSpec,
    /// The hypotheses to score (the edited text, then the pinned original).
    hypotheses: Vec<String>,
    /// The reference box as typed (several references: blank-line separated).
    references: String,
    #[serde(default)]
    source: Option<String>,
}

/// One hypothesis's score with what its card draws.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModelScoreView {
    score: Score,
    detail: Option<Detail>,
}

/// The outcome of one card's request.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModelColumnView {
    /// The spec as scored (defaults resolved: BERTScore's layer).
    spec: MetricSpec,
    /// One entry per hypothesis asked.
    scores: Vec<ModelScoreView>,
    signature: String,
    /// How many references the box held.
    references: usize,
    elapsed_ms: f64,
}

/// Scores the page's hypotheses with one metric spec (model-based or not)
/// through the engine: `{spec, hypotheses, references, source?}` to
/// `{spec, scores: [{score, detail}], signature, references, elapsedMs}`.
#[wasm_bindgen(js_name = scoreModel)]
pub async fn score_model(request: JsValue) -> Result<JsValue, JsError> {
    super::count_job();
    let start = js_sys::Date::now();
    let r: ModelScoreRequest = serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid score request: {e}")))?;
    if r.hypotheses.iter().any(|h| h.trim().is_empty()) {
        return Err(JsError::new(&format!(
            "{} needs a hypothesis: type one",
            r.spec.info().name
        )));
    }
    let refs = crate::text::references(&r.references);
    let src = r.source.as_deref().filter(|s| !s.trim().is_empty());
    let segments: Vec<Segment> = r
        .hypotheses
        .iter()
        .map(|hyp| Segment {
            hyp,
            refs: &refs,
            src,
        })
        .collect();
    let engine = engine();
    let column = engine
        .score(std::slice::from_ref(&r.spec), &segments)
        .await
        .map_err(js_err)?
        .remove(0);
    let mut details = column.details.into_iter();
    let view = ModelColumnView {
        signature: column.signature.to_string(),
        scores: column
            .scores
            .into_iter()
            .map(|score| ModelScoreView {
                score,
                detail: details.next(),
            })
            .collect(),
        spec: column.spec,
        references: refs.len(),
        elapsed_ms: js_sys::Date::now() - start,
    };
    to_js(&view)
}

/// Pairs scored each against its own references (`scorePairs`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PairsRequest {
    spec: MetricSpec,
    pairs: Vec<PairInput>,
}

/// One pair: the hypothesis, its references (blank-line separated), a source.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PairInput {
    hypothesis: String,
    references: String,
    #[serde(default)]
    source: Option<String>,
}

/// The scores of [`score_pairs`], one per pair, in order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PairsView {
    spec: MetricSpec,
    scores: Vec<Score>,
    signature: String,
    elapsed_ms: f64,
}

/// Scores a list of pairs with one metric spec, each hypothesis against its
/// own references, batched as the CLI batches a dataset:
/// `{spec, pairs: [{hypothesis, references, source?}]}` to
/// `{spec, scores, signature, elapsedMs}` (JS callers of the engine, the
/// side-by-side benchmark page in benches/tjs-page). Each call stands alone:
/// no embeddings are kept from one call to the next.
#[wasm_bindgen(js_name = scorePairs)]
pub async fn score_pairs(request: JsValue) -> Result<JsValue, JsError> {
    super::count_job();
    let start = js_sys::Date::now();
    let r: PairsRequest = serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid pairs request: {e}")))?;
    if let Some(i) = r.pairs.iter().position(|p| p.hypothesis.trim().is_empty()) {
        return Err(JsError::new(&format!("pair {i} has an empty hypothesis")));
    }
    let refs: Vec<Vec<&str>> = r
        .pairs
        .iter()
        .map(|p| crate::text::references(&p.references))
        .collect();
    let segments: Vec<Segment> = r
        .pairs
        .iter()
        .zip(&refs)
        .map(|(p, refs)| Segment {
            hyp: &p.hypothesis,
            refs,
            src: p.source.as_deref().filter(|s| !s.trim().is_empty()),
        })
        .collect();
    // A fresh engine: nothing is kept between calls (a dataset's batches do
    // not repeat texts, and a benchmark must not find earlier texts cached).
    let column = Engine::new(PageModels)
        .score(std::slice::from_ref(&r.spec), &segments)
        .await
        .map_err(js_err)?
        .remove(0);
    to_js(&PairsView {
        signature: column.signature.to_string(),
        scores: column.scores,
        spec: column.spec,
        elapsed_ms: js_sys::Date::now() - start,
    })
}

/// MAUVE between two sets of texts, for the page.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MauveView {
    #[serde(flatten)]
    scored: crate::metrics::mauve::MauveScore,
    elapsed_ms: f64,
}

/// Text from a loaded model, as `blindspot generate` makes it
/// ([`crate::models::generate`]): a causal LM continues `input`, an
/// encoder-decoder reads it as its source. `options` are
/// [`GenerateOptions`](crate::models::generate::GenerateOptions) as JSON
/// (`{maxNewTokens, decoding: {method: "greedy" | "sample" | "beam", ...},
/// stopAtEos}` under their Rust names). `on_step(text so far, tokens so
/// far)` after every token (the best beam's, in beam search), then a turn of
/// the event loop; `stopGeneration()` ends it there. Resolves to the
/// continuation: `{input_tokens, tokens, log_prob, end, text}`.
#[wasm_bindgen(js_name = generateText)]
pub async fn generate_text(
    handle: u32,
    input: String,
    options: JsValue,
    on_step: Option<js_sys::Function>,
) -> Result<JsValue, JsError> {
    use std::ops::ControlFlow;
    super::count_job();
    super::STOP_GENERATION.with(|s| s.set(false));
    let options: crate::models::generate::GenerateOptions = serde_wasm_bindgen::from_value(options)
        .map_err(|e| JsError::new(&format!("invalid generation options: {e}")))?;
    let plm = model(handle)?;
    let out = plm
        .generate(&input, &options, async |tokens: &[u32]| {
            if let Some(f) = &on_step {
                let text = plm.tokenizer.decode_text(tokens).unwrap_or_default();
                let told = f
                    .call2(
                        &JsValue::NULL,
                        &JsValue::from_str(&text),
                        &JsValue::from_f64(tokens.len() as f64),
                    )
                    .is_ok();
                if !(super::until_stopped(&super::STOP_GENERATION)().await && told) {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })
        .await
        .map_err(js_err)?;
    to_js(&out)
}

/// The self-evaluation test's choices, for the page's controls: its
/// measures (`perplexity`, and `judged`, the one instruction models rate
/// each other's summaries by) and G-Eval's dimensions (`{value, label}`).
#[wasm_bindgen(js_name = selfEvalChoices)]
pub fn self_eval_choices() -> Result<JsValue, JsError> {
    use crate::metrics::geval::Dimension;
    use crate::stress::self_eval::Evaluation;
    let dimensions: Vec<serde_json::Value> = Dimension::ALL
        .iter()
        .map(|d| serde_json::json!({"value": d.as_str(), "label": d.label()}))
        .collect();
    to_js(&serde_json::json!({
        "perplexity": Evaluation::Perplexity.as_str(),
        "judged": Evaluation::GEval.as_str(),
        "dimensions": dimensions,
    }))
}

/// The self-evaluation test ([`crate::stress::self_eval`], as `blindspot
/// self-eval` runs it) on loaded models of one kind, causal LMs or
/// encoder-decoders (`handles`, two or more, each a generator and an
/// evaluator): prompts from `paragraphs` (one per line, the
/// first `limit` long enough), `options` as
/// [`SelfEvalOptions`](crate::stress::self_eval::SelfEvalOptions) JSON,
/// `judge` a model's name or none. `on_progress(done, total)` after each
/// text and each evaluator; `stopGeneration()` ends it with an error.
#[wasm_bindgen(js_name = selfEval)]
pub async fn self_eval(
    handles: Vec<u32>,
    paragraphs: String,
    limit: usize,
    options: JsValue,
    judge: Option<String>,
    on_progress: Option<js_sys::Function>,
) -> Result<JsValue, JsError> {
    use crate::stress::self_eval;
    super::count_job();
    super::STOP_GENERATION.with(|s| s.set(false));
    let options: self_eval::SelfEvalOptions = serde_wasm_bindgen::from_value(options)
        .map_err(|e| JsError::new(&format!("invalid self-evaluation options: {e}")))?;
    let plms = handles
        .iter()
        .map(|&h| model(h))
        .collect::<Result<Vec<_>, _>>()?;
    let models: Vec<(&str, &Plm)> = plms.iter().map(|p| (p.name.as_str(), p.as_ref())).collect();
    let prompts: Vec<String> = self_eval::inputs(paragraphs.lines(), &options)
        .into_iter()
        .take(limit)
        .collect();
    let report = self_eval::run(
        &models,
        prompts,
        &options,
        judge.as_deref().filter(|j| !j.is_empty()),
        async |done, total| {
            let go = match &on_progress {
                Some(f) => super::progress_or_stop(f, done, total, &super::STOP_GENERATION).await,
                None => true,
            };
            if go {
                std::ops::ControlFlow::Continue(())
            } else {
                std::ops::ControlFlow::Break(())
            }
        },
    )
    .await
    .map_err(js_err)?;
    to_js(&report)
}

/// Where a loaded model attends, by position in `text`
/// ([`Plm::attention_view`], as `blindspot attention` prints it): the 10 x
/// 10 block matrix and the mass by offset.
#[wasm_bindgen(js_name = attentionView)]
pub async fn attention_view(handle: u32, text: String) -> Result<JsValue, JsError> {
    super::count_job();
    let plm = model(handle)?;
    to_js(&plm.attention_view(&text).await.map_err(js_err)?)
}

/// A MAUVE result the page kept as JSON (across a reload), read and checked
/// by [`crate::metrics::mauve::MauveRecord::from_json`]: `mauveTexts`'s
/// value but its time, or an error for a damaged one.
#[wasm_bindgen(js_name = readMauveResult)]
pub fn read_mauve_result(json: &str) -> Result<JsValue, JsError> {
    to_js(&crate::metrics::mauve::MauveRecord::from_json(json).map_err(js_err)?)
}

/// MAUVE between `hyps` (P) and `refs` (Q), one text per entry, featurised
/// by a loaded model, as `blindspot mauve` computes it
/// ([`crate::metrics::mauve::score_texts`]). `on_progress(texts featurised,
/// texts)` after each model pass (optional); `stopMauve()` ends it there
/// with an error.
#[wasm_bindgen(js_name = mauveTexts)]
pub async fn mauve_texts(
    handle: u32,
    hyps: Vec<String>,
    refs: Vec<String>,
    clusters: Option<usize>,
    seed: Option<u64>,
    on_progress: Option<js_sys::Function>,
) -> Result<JsValue, JsError> {
    super::count_job();
    use crate::metrics::mauve::{self, Options};
    super::STOP_MAUVE.with(|s| s.set(false));
    let start = js_sys::Date::now();
    let plm = model(handle)?;
    let options = Options {
        clusters,
        seed: seed.unwrap_or(Options::default().seed),
        ..Options::default()
    };
    let scored =
        mauve::score_texts(
            &plm,
            &hyps,
            &refs,
            &options,
            async |done, total| match &on_progress {
                Some(f) => super::progress_or_stop(f, done, total, &super::STOP_MAUVE).await,
                // Without a callback nothing yields, so no stop can arrive.
                None => true,
            },
        )
        .await
        .map_err(js_err)?;
    to_js(&MauveView {
        scored,
        elapsed_ms: js_sys::Date::now() - start,
    })
}
