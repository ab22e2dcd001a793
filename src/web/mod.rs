//! Browser bindings (wasm only): convert between JS values and core types.
//!
//! No metric logic lives here: every number comes from [`crate::metrics`].
//! Errors reach JavaScript as `Error` objects with a readable message.

mod attack;
mod gpu;
mod lessons;
mod models;

use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use crate::inject::masked_lm::PlmMaskedLm;
use crate::inject::{self, Context, EditKind};
use crate::models::tokenizer::LmTokenizer;

thread_local! {
    /// The GPT-2 tokenizer positioned errors use, once the page loaded it.
    static LM_TOKENIZER: std::cell::RefCell<Option<std::rc::Rc<LmTokenizer>>> = const { std::cell::RefCell::new(None) };
}

/// Builds GPT-2's tokenizer from the text of `encoder.json` and `vocab.bpe`
/// and keeps it for the injections that corrupt language-model tokens.
#[wasm_bindgen(js_name = loadGpt2Tokenizer)]
pub fn load_gpt2_tokenizer(encoder_json: &str, vocab_bpe: &str) -> Result<(), JsError> {
    let tokenizer =
        LmTokenizer::gpt2(encoder_json, vocab_bpe).map_err(|e| JsError::new(&e.to_string()))?;
    LM_TOKENIZER.with(|t| *t.borrow_mut() = Some(std::rc::Rc::new(tokenizer)));
    Ok(())
}

/// Installs the part-of-speech tagger from the bytes of
/// `tagger/en_core_web_sm.safetensors`, which the page fetches the first time
/// an injection needs it (`needs_tagger`); the wasm does not embed them.
#[wasm_bindgen(js_name = loadTagger)]
pub fn load_tagger(bytes: &[u8]) -> Result<(), JsError> {
    crate::text::tagger::Tagger::install(bytes)
        .map_err(|e| JsError::new(&format!("tagger weights: {e}")))
}

/// Whether the tagger is installed ([`load_tagger`]).
#[wasm_bindgen(js_name = hasTagger)]
pub fn has_tagger() -> bool {
    crate::text::tagger::Tagger::english().is_some()
}

/// Whether [`load_gpt2_tokenizer`] has run.
#[wasm_bindgen(js_name = hasLmTokenizer)]
pub fn has_lm_tokenizer() -> bool {
    LM_TOKENIZER.with(|t| t.borrow().is_some())
}

/// Runs `f` with the loaded LM tokenizer, if any.
fn with_lm_tokenizer<T>(f: impl FnOnce(Option<&LmTokenizer>) -> T) -> T {
    f(lm_tokenizer().as_deref())
}

/// The loaded LM tokenizer, if any, for a job that awaits.
fn lm_tokenizer() -> Option<std::rc::Rc<LmTokenizer>> {
    LM_TOKENIZER.with(|t| t.borrow().clone())
}
use crate::metrics::{self, Engine, MetricSpec, Segment, Settings};

unsafe extern "C" {
    /// Runs the module's static constructors (synthesised by wasm-ld).
    fn __wasm_call_ctors();
}

/// Runs once when the module is instantiated: static constructors, then the
/// panic hook so a bug shows a readable console message.
///
/// A dependency (`inventory`, via cubecl) registers static constructors. If no
/// exported function calls `__wasm_call_ctors`, wasm-ld treats the module as a
/// "command" and re-runs every constructor at the start of each exported call
/// (wasm-bindgen's malloc included), which made each JS-to-wasm call cost about
/// a millisecond. Calling it here, once, opts out of that wrapping; see
/// <https://docs.rs/inventory/latest/inventory/#webassembly-and-constructors>.
#[wasm_bindgen(start)]
pub fn start() {
    // SAFETY: wasm-bindgen calls the start function exactly once, right after
    // instantiation and before any other export.
    unsafe { __wasm_call_ctors() };
    console_error_panic_hook::set_once();
}

/// A bundled sample dataset's text, for the sections that run over a
/// dataset: `kind` is `pairs` (the default: JSONL pairs), `preference`
/// (MENLI CSV) or `audit` (SummEval JSONL); see `bundledSamples`.
#[wasm_bindgen(js_name = bundledSample)]
pub fn bundled_sample(kind: Option<String>) -> Result<String, JsError> {
    let kind = kind.as_deref().unwrap_or("pairs");
    crate::data::bundled_sample(kind)
        .map(|s| s.text.to_owned())
        .ok_or_else(|| JsError::new(&format!("no bundled sample of kind {kind:?}")))
}

/// The bundled samples without their texts: `[{kind, file, about}]`.
#[wasm_bindgen(js_name = bundledSamples)]
pub fn bundled_samples() -> Result<JsValue, JsError> {
    to_js(&crate::data::BUNDLED_SAMPLES)
}

/// The crate version, shown in the page footer and signatures.
#[wasm_bindgen]
pub fn version() -> String {
    metrics::VERSION.to_string()
}

/// Every registered metric (`MetricInfo` objects), in display order.
#[wasm_bindgen(js_name = metricRegistry)]
pub fn metric_registry() -> Result<JsValue, JsError> {
    to_js(&metrics::registry())
}

/// The metric schema the page builds its cards from: every kind with its
/// description, columns, default spec and options' JSON Schema
/// ([`metrics::registry::KindInfo`]), each metric id's default spec, and how
/// verdicts are shown.
#[wasm_bindgen(js_name = metricChoices)]
pub fn metric_choices() -> Result<JsValue, JsError> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Choices {
        kinds: &'static [metrics::registry::KindInfo],
        /// The ROUGE option the page's stemmer box sets (its title and help).
        rouge_stemmer: serde_json::Value,
        defaults: Vec<MetricSpec>,
        verdicts: Vec<crate::stress::VerdictInfo>,
    }
    to_js(&Choices {
        kinds: metrics::registry::kinds(),
        rouge_stemmer: metrics::rouge::stemmer_schema(),
        defaults: metrics::MetricId::ALL
            .iter()
            .map(|&id| MetricSpec::default_for(id))
            .collect(),
        verdicts: crate::stress::Verdict::ALL
            .iter()
            .map(|v| v.info())
            .collect(),
    })
}

/// The model-free metrics' default specs, in registry order, with the
/// page's ROUGE stemmer applied where a metric has it.
#[wasm_bindgen(js_name = lexicalSpecs)]
pub fn lexical_specs(rouge_stemmer: bool) -> Result<JsValue, JsError> {
    let settings = Settings::default()
        .with(crate::metrics::spec::OptionValue::new(None, "stemmer", rouge_stemmer).lenient());
    let specs = metrics::registry::default_metrics()
        .into_iter()
        .map(|id| settings.spec(id))
        .collect::<Result<Vec<_>, _>>()
        .map_err(js_err)?;
    to_js(&specs)
}

/// The id of the column a spec fills (`{metric: "bertscore", part: "r"}`
/// is `bertscore-r`).
#[wasm_bindgen(js_name = specId)]
pub fn spec_id(spec: JsValue) -> Result<String, JsError> {
    let spec: MetricSpec = serde_wasm_bindgen::from_value(spec)
        .map_err(|e| JsError::new(&format!("invalid metric spec: {e}")))?;
    Ok(spec.id().to_string())
}

/// The references of a reference box (blank-line separated), as every
/// metric on the page reads them.
#[wasm_bindgen(js_name = splitReferences)]
pub fn split_references(text: &str) -> Vec<String> {
    crate::text::references(text)
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// What the page asks to score.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScoreRequest {
    hypothesis: String,
    /// The reference box as typed: several references separated by a blank line.
    references: String,
    #[serde(default)]
    source: Option<String>,
    metrics: Vec<String>,
    #[serde(default)]
    rouge_stemmer: bool,
}

/// One metric's outcome: a score, or the reason there is none.
#[derive(Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
enum ScoreOutcome {
    Ok { score: metrics::Score },
    Error { metric: String, message: String },
}

/// The heavy jobs this instance of the engine ran (sweeps, suites, attacks,
/// model passes): the page's thread reads its own count to show that such
/// work ran in a worker, whatever the host's speed.
static JOBS_RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Counts one heavy job ([`jobs_run`]).
pub(crate) fn count_job() {
    JOBS_RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The heavy jobs this instance ran so far.
#[wasm_bindgen(js_name = jobsRun)]
pub fn jobs_run() -> u32 {
    JOBS_RUN.load(std::sync::atomic::Ordering::Relaxed)
}

/// How many times [`score_pair`] ran: the page's scoring passes, counted by
/// the engine (a pass per keystroke shows here, whatever the host's speed).
static SCORE_PAIR_CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// [`score_pair`]'s calls so far.
#[wasm_bindgen(js_name = scorePairCalls)]
pub fn score_pair_calls() -> u32 {
    SCORE_PAIR_CALLS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Scores one pair with each requested model-free metric.
///
/// Takes `{hypothesis, references, source?, metrics: [ids], rougeStemmer?}`
/// (`references` is the reference box's text) and returns one `{status:
/// "ok", score}` or `{status: "error", metric, message}` per metric, in the
/// requested order.
#[wasm_bindgen(js_name = scorePair)]
pub fn score_pair(request: JsValue) -> Result<JsValue, JsError> {
    SCORE_PAIR_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let request: ScoreRequest = serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid score request: {e}")))?;
    let refs = crate::text::references(&request.references);
    let source = request.source.as_deref().filter(|s| !s.trim().is_empty());
    let segment = Segment {
        hyp: &request.hypothesis,
        refs: &refs,
        src: source,
    };
    let settings = Settings::default().with(
        crate::metrics::spec::OptionValue::new(None, "stemmer", request.rouge_stemmer).lenient(),
    );
    let outcomes: Vec<ScoreOutcome> = request
        .metrics
        .iter()
        .map(|id| {
            let scored = settings
                .specs(std::slice::from_ref(id))
                .map_err(|e| e.to_string())
                .and_then(|specs| {
                    Engine::score_lexical(&specs, std::slice::from_ref(&segment))
                        .map_err(|e| e.to_string())
                });
            match scored {
                Ok(mut columns) => ScoreOutcome::Ok {
                    score: columns.remove(0).scores.remove(0),
                },
                Err(message) => ScoreOutcome::Error {
                    metric: id.clone(),
                    message,
                },
            }
        })
        .collect();
    to_js(&outcomes)
}

/// The injection families in display order: `[{id, label, suiteDefault}]`
/// (`suiteDefault`: a stress suite runs it unless told otherwise).
#[wasm_bindgen(js_name = injectionFamilies)]
pub fn injection_families() -> Result<JsValue, JsError> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct FamilyInfo {
        id: inject::Family,
        label: &'static str,
        suite_default: bool,
    }
    let families: Vec<FamilyInfo> = inject::Family::ALL
        .iter()
        .map(|&id| FamilyInfo {
            id,
            label: id.label(),
            suite_default: inject::Family::SUITE_DEFAULT.contains(&id),
        })
        .collect();
    to_js(&families)
}

/// Every registered injection (`InjectionInfo` objects), grouped by family.
#[wasm_bindgen(js_name = injectionRegistry)]
pub fn injection_registry() -> Result<JsValue, JsError> {
    let infos: Vec<_> = inject::registry().into_iter().map(|i| i.info()).collect();
    to_js(&infos)
}

/// What the page asks to inject.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InjectRequest {
    text: String,
    injection: String,
    level: f64,
    seed: u64,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    samples: Vec<String>,
    /// A loaded model with a masked-LM head, for BERT-diverge.
    #[serde(default)]
    masked_lm: Option<String>,
}

/// A loaded model as BERT-diverge's masked LM (an error when it has no
/// masked-LM head).
pub(crate) fn masked_lm_of(
    plm: Option<&crate::models::Plm>,
) -> Result<Option<PlmMaskedLm<'_>>, JsError> {
    plm.map(PlmMaskedLm::new).transpose().map_err(js_err)
}

/// A changed span in UTF-16 code units, as JavaScript strings index.
#[derive(Serialize)]
pub(crate) struct JsEdit {
    start: usize,
    end: usize,
    kind: EditKind,
}

impl JsEdit {
    /// `edits` of `text` (byte offsets) in UTF-16 code units.
    pub(crate) fn of(text: &str, edits: &[inject::Edit]) -> Vec<JsEdit> {
        edits
            .iter()
            .map(|e| JsEdit {
                start: utf16_offset(text, e.start),
                end: utf16_offset(text, e.end),
                kind: e.kind,
            })
            .collect()
    }
}

/// The injection result with JS string offsets.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InjectResponse {
    text: String,
    applied: bool,
    reason: Option<String>,
    edits: Vec<JsEdit>,
    noise_ratio: f64,
}

/// Converts a byte offset of `text` into a UTF-16 offset.
fn utf16_offset(text: &str, byte: usize) -> usize {
    text[..byte].encode_utf16().count()
}

/// Applies one injection: `{text, injection, level, seed, source?,
/// samples?, maskedLm?}` to `{text, applied, reason, edits: [{start, end,
/// kind}], noiseRatio}`, with offsets in UTF-16 code units. `maskedLm` names
/// a loaded model with its masked-LM head, for BERT-diverge (in the model
/// worker, where the models are). Bad ids, levels or missing context reject.
#[wasm_bindgen(js_name = applyInjection)]
pub async fn apply_injection(request: JsValue) -> Result<JsValue, JsError> {
    let request: InjectRequest = serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid injection request: {e}")))?;
    let injection = inject::create(&request.injection).map_err(|e| JsError::new(&e.to_string()))?;
    let samples: Vec<&str> = request.samples.iter().map(String::as_str).collect();
    let source = request.source.as_deref().filter(|s| !s.trim().is_empty());
    let mlm = request
        .masked_lm
        .as_deref()
        .map(models::loaded)
        .transpose()?;
    let masked_lm = masked_lm_of(mlm.as_deref())?;
    let tokenizer = lm_tokenizer();
    let job = inject::Job {
        text: &request.text,
        level: request.level,
        seed: request.seed,
        ctx: Context {
            source,
            samples: &samples,
            masked_lm: masked_lm.as_ref().map(|m| m as _),
            lm_tokenizer: tokenizer.as_deref(),
            ..Context::default()
        },
    };
    STOP_INJECTION.with(|s| s.set(false));
    let result = inject::apply_many(injection, &[job], until_stopped(&STOP_INJECTION))
        .await
        .map_err(|e| JsError::new(&e.to_string()))?
        .remove(0);
    let edits = JsEdit::of(&result.text, &result.edits);
    to_js(&InjectResponse {
        applied: result.applied,
        reason: result.reason,
        edits,
        noise_ratio: result.noise_ratio,
        text: result.text,
    })
}

/// What the page asks to sweep.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SweepRequest {
    hypothesis: String,
    /// The reference box's text (blank-line separated references).
    references: String,
    #[serde(default)]
    source: Option<String>,
    injection: String,
    metrics: Vec<String>,
    #[serde(default)]
    rouge_stemmer: bool,
    seeds: u64,
    #[serde(default)]
    samples: Vec<String>,
    /// A loaded model with a masked-LM head, for BERT-diverge.
    #[serde(default)]
    masked_lm: Option<String>,
}

/// Applies one injection at each of its default levels (`seeds` seeds per
/// level) and scores every result: the playground's sweep view. Returns the
/// [`crate::stress::Sweep`] (base scores, per-level means, noise ratios and
/// the rank-rule verdict per metric); throws with a readable message when it
/// cannot run.
#[wasm_bindgen(js_name = sweepInjection)]
pub async fn sweep_injection(request: JsValue) -> Result<JsValue, JsError> {
    count_job();
    let r: SweepRequest = serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid sweep request: {e}")))?;
    let err = |e: &dyn std::fmt::Display| JsError::new(&e.to_string());
    let injection = inject::create(&r.injection).map_err(|e| err(&e))?;
    let metrics = r
        .metrics
        .iter()
        .map(|id| metrics::create(id, r.rouge_stemmer))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(&e))?;
    let refs = crate::text::references(&r.references);
    let samples: Vec<&str> = r.samples.iter().map(String::as_str).collect();
    let mlm = r.masked_lm.as_deref().map(models::loaded).transpose()?;
    let masked_lm = masked_lm_of(mlm.as_deref())?;
    let tokenizer = lm_tokenizer();
    let ctx = Context {
        source: r.source.as_deref().filter(|s| !s.trim().is_empty()),
        samples: &samples,
        masked_lm: masked_lm.as_ref().map(|m| m as _),
        lm_tokenizer: tokenizer.as_deref(),
        ..Context::default()
    };
    STOP_INJECTION.with(|s| s.set(false));
    let sweep = crate::stress::sweep(
        injection,
        &r.hypothesis,
        &refs,
        &ctx,
        &metrics,
        r.seeds.clamp(1, 20),
        until_stopped(&STOP_INJECTION),
    )
    .await
    .map_err(|e| err(&e))?;
    to_js(&sweep)
}

/// A progress callback that calls `on_progress(done, total)` in JS; a throw
/// from JS stops the run.
fn js_progress(on_progress: &js_sys::Function) -> impl Fn(usize, usize) -> bool + '_ {
    move |done, total| {
        on_progress
            .call2(
                &JsValue::NULL,
                &JsValue::from(done as u32),
                &JsValue::from(total as u32),
            )
            .is_ok()
    }
}

/// What the page's suite worker asks to run.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SuiteRequest {
    /// File name, for the report.
    dataset: String,
    /// `wmt`, `summeval` or `jsonl`.
    format: String,
    /// The file's text.
    text: String,
    #[serde(default)]
    limit: Option<usize>,
    config: crate::stress::suite::SuiteConfig,
}

impl SuiteRequest {
    fn from_js(request: JsValue) -> Result<Self, JsError> {
        serde_wasm_bindgen::from_value(request)
            .map_err(|e| JsError::new(&format!("invalid suite request: {e}")))
    }

    /// Takes `specs` as the run's metrics (the report names them by id).
    fn use_specs(&mut self, specs: &[MetricSpec]) {
        self.config.metrics = specs.iter().map(|s| s.id().to_string()).collect();
    }

    /// The dataset's items, the first `limit` where it has one.
    fn items(&self) -> Result<Vec<crate::data::Item>, JsError> {
        let mut items = load_items(&self.format, &self.text)?.rows;
        if let Some(n) = self.limit {
            items.truncate(n);
        }
        Ok(items)
    }
}

/// Parses a dataset file with [`crate::data::load_items`].
fn load_items(format: &str, text: &str) -> Result<crate::data::Loaded<crate::data::Item>, JsError> {
    let format: crate::data::DatasetFormat = format.parse().map_err(js_err)?;
    Ok(crate::data::load_items(format, text))
}

/// Reads a dataset for the suite view: `{format, text}` to `{items: n,
/// problems: [{line, message}]}` so the page can say what it skipped.
#[wasm_bindgen(js_name = inspectDataset)]
pub fn inspect_dataset(format: &str, text: &str) -> Result<JsValue, JsError> {
    let loaded = load_items(format, text)?;
    #[derive(Serialize)]
    struct Summary<'a> {
        items: usize,
        problems: &'a [crate::data::RowProblem],
    }
    to_js(&Summary {
        items: loaded.rows.len(),
        problems: &loaded.problems,
    })
}

/// Runs the blind-spot suite (the same runner as `blindspot stress`) and
/// returns `{report, csv}`. `on_progress(done, total)` is called as items
/// finish and `on_test(report)` with the report so far each time a test
/// ends; the page runs this in a Web Worker and cancels by terminating it.
#[wasm_bindgen(js_name = stressSuite)]
pub async fn stress_suite(
    request: JsValue,
    on_progress: js_sys::Function,
    on_test: js_sys::Function,
) -> Result<JsValue, JsError> {
    count_job();
    let r = SuiteRequest::from_js(request)?;
    let progress = js_progress(&on_progress);
    let tell = |report: &JsValue| {
        let _ = on_test.call1(&JsValue::NULL, report);
    };
    run_stress_suite(r, None, None, &progress, &tell, async || {}).await
}

/// One shard of [`stress_suite`]'s run (`shard`: `{index, count}`), for the
/// page's workers running side by side: `on_progress(done, total)` as its
/// items finish, and `on_part(json)` with each test as it ends (a part with
/// the shard's items, their base scores and that test, as JSON, the format
/// of `blindspot stress --shard`, which crosses threads faster than
/// objects: the merger worker's [`SuiteMerger`] merges those of every
/// shard test by test). With `request.specs` the metrics are those specs,
/// as [`stress_suite_models`] takes them, model-based ones on the models
/// this worker has loaded.
#[wasm_bindgen(js_name = stressSuiteShard)]
pub async fn stress_suite_shard(
    request: JsValue,
    shard: JsValue,
    on_progress: js_sys::Function,
    on_part: js_sys::Function,
) -> Result<(), JsError> {
    count_job();
    use crate::stress::suite::{ModelScorer, Shard, SuiteModels, SuitePart, SuiteRun};
    #[derive(Deserialize)]
    struct ShardRequest {
        #[serde(flatten)]
        suite: SuiteRequest,
        #[serde(default)]
        specs: Option<Vec<MetricSpec>>,
    }
    let mut r: ShardRequest = serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid suite request: {e}")))?;
    let shard: Shard = serde_wasm_bindgen::from_value(shard)
        .map_err(|e| JsError::new(&format!("invalid shard: {e}")))?;
    if !shard.is_valid() {
        return Err(JsError::new(&format!(
            "invalid shard {} of {}",
            shard.index, shard.count
        )));
    }
    if let Some(specs) = &r.specs {
        r.suite.use_specs(specs);
    }
    let items = r.suite.items()?;
    let tell = |part: &SuitePart| {
        // A failing listener only loses the live view; the part still comes.
        if let Ok(json) = serde_json::to_string(part) {
            let _ = on_part.call1(&JsValue::NULL, &JsValue::from(json));
        }
    };
    let tokenizer = lm_tokenizer();
    let engine = r.specs.is_some().then(models::batch_engine);
    let mut scorer = engine.as_deref();
    let models = SuiteModels {
        lm_tokenizer: tokenizer.as_deref(),
        on_part: Some(&tell),
        scorer: scorer.as_mut().map(|s| s as &mut dyn ModelScorer),
        specs: r.specs,
        ..Default::default()
    };
    let progress = js_progress(&on_progress);
    // Every test went to `on_part`: the part itself is not needed.
    SuiteRun::new(&r.suite.dataset, &items, &r.suite.config)
        .models(models)
        .shard(Some(shard))
        .progress(&progress)
        .run_async(async || {})
        .await
        .map(drop)
        .map_err(|e| JsError::new(&e.to_string()))
}

/// Why a suite with these metric specs cannot run in shards (MoverScore's
/// idf weights), or `undefined` when it can.
#[wasm_bindgen(js_name = suiteShardRefusal)]
pub fn suite_shard_refusal(specs: JsValue) -> Result<Option<String>, JsError> {
    let specs: Vec<MetricSpec> = serde_wasm_bindgen::from_value(specs)
        .map_err(|e| JsError::new(&format!("invalid metric specs: {e}")))?;
    Ok(crate::stress::suite::shard_refusal(&specs).map(|e| e.to_string()))
}

/// The page's merger worker's [`crate::stress::suite::PartMerger`]: the
/// parts of a suite run's shards as their workers send them
/// ([`stress_suite_shard`]), the report so far after each test every shard
/// has finished, and at the end the report the unsharded run gives.
#[wasm_bindgen]
pub struct SuiteMerger(crate::stress::suite::PartMerger);

#[wasm_bindgen]
impl SuiteMerger {
    /// For a run in `count` shards.
    #[wasm_bindgen(constructor)]
    pub fn new(count: usize) -> SuiteMerger {
        SuiteMerger(crate::stress::suite::PartMerger::new(count))
    }

    /// Adds a test a shard finished (`json`, from `stressSuiteShard`'s
    /// `on_part`). Returns the report so far when every shard has now
    /// finished one more test, else `null`.
    pub fn add(&mut self, json: &str) -> Result<JsValue, JsError> {
        let part = serde_json::from_str(json)
            .map_err(|e| JsError::new(&format!("invalid suite part: {e}")))?;
        match self.0.add(part).map_err(|e| JsError::new(&e.to_string()))? {
            Some(report) => to_js(report),
            None => Ok(JsValue::NULL),
        }
    }

    /// `{report, csv}` once every shard has sent every test: the report
    /// the unsharded run gives.
    pub fn finish(&mut self) -> Result<JsValue, JsError> {
        let report = self.0.finish().map_err(|e| JsError::new(&e.to_string()))?;
        report_and_csv(&report)
    }
}

/// What the page asks of a suite with model-based metrics: the suite
/// request, and every metric as a spec (model-based ones name a loaded model).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelSuiteRequest {
    #[serde(flatten)]
    suite: SuiteRequest,
    specs: Vec<MetricSpec>,
    /// A loaded model with a masked-LM head, for BERT-diverge.
    #[serde(default)]
    masked_lm: Option<String>,
}

/// [`stress_suite`] in the model worker, with model-based metrics on the
/// loaded models: `request.specs` are the metrics (`config.metrics` is
/// set from them). Calls
/// `on_event(done, total)` as steps finish and `on_event(null, null,
/// report)` with the report so far each time a test ends. `stopSuite()`
/// ends it after the current batch of model scores, with an error that
/// says so (the tests finished by then were reported).
#[wasm_bindgen(js_name = stressSuiteModels)]
pub async fn stress_suite_models(
    request: JsValue,
    on_event: js_sys::Function,
) -> Result<JsValue, JsError> {
    count_job();
    STOP_SUITE.with(|s| s.set(false));
    let mut r: ModelSuiteRequest = serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid suite request: {e}")))?;
    r.suite.use_specs(&r.specs);
    let told = js_progress(&on_event);
    let progress = |done, total| told(done, total) && !STOP_SUITE.with(std::cell::Cell::get);
    let tell = |report: &JsValue| {
        let _ = on_event.call3(&JsValue::NULL, &JsValue::NULL, &JsValue::NULL, report);
    };
    let engine = models::batch_engine();
    let mlm = r.masked_lm.as_deref().map(models::loaded).transpose()?;
    let masked_lm = masked_lm_of(mlm.as_deref())?;
    run_stress_suite(
        r.suite,
        Some((&engine, r.specs)),
        masked_lm.as_ref().map(|m| m as _),
        &progress,
        &tell,
        async || attack::yield_to_events().await,
    )
    .await
}

/// Ends a running [`stress_suite_models`] after its current batch of model scores.
#[wasm_bindgen(js_name = stopSuite)]
pub fn stop_suite() {
    STOP_SUITE.with(|s| s.set(true));
}

/// Runs a suite request, with the engine and the metrics' specs where it
/// has model-based metrics: `{report, csv}`.
async fn run_stress_suite(
    r: SuiteRequest,
    models: Option<(&Engine, Vec<MetricSpec>)>,
    masked_lm: Option<&dyn inject::masked_lm::MaskedLm>,
    progress: crate::stress::suite::Progress<'_>,
    on_test: &dyn Fn(&JsValue),
    breathe: impl AsyncFn(),
) -> Result<JsValue, JsError> {
    use crate::stress::suite::{ModelScorer, SuiteModels, SuiteReport, SuiteRun};
    let items = r.items()?;
    let tell = |so_far: &SuiteReport| {
        // A failing listener only loses the live view; the report still comes.
        if let Ok(value) = to_js(so_far) {
            on_test(&value);
        }
    };
    let tokenizer = lm_tokenizer();
    let (mut scorer, specs) = match models {
        Some((engine, specs)) => (Some(engine), Some(specs)),
        None => (None, None),
    };
    let suite_models = SuiteModels {
        lm_tokenizer: tokenizer.as_deref(),
        masked_lm,
        on_test: Some(&tell),
        scorer: scorer.as_mut().map(|s| s as &mut dyn ModelScorer),
        specs,
        ..Default::default()
    };
    let report = SuiteRun::new(&r.dataset, &items, &r.config)
        .models(suite_models)
        .progress(progress)
        .run_async(breathe)
        .await
        .and_then(|part| part.report())
        .map_err(|e| JsError::new(&e.to_string()))?;
    report_and_csv(&report)
}

/// `{report, csv}`: what the page holds of a finished suite.
fn report_and_csv(report: &crate::stress::suite::SuiteReport) -> Result<JsValue, JsError> {
    #[derive(Serialize)]
    struct Out<'a> {
        report: &'a crate::stress::suite::SuiteReport,
        csv: String,
    }
    to_js(&Out {
        csv: report.to_csv(),
        report,
    })
}

/// A suite report the page kept as JSON (across a reload), read and checked
/// by [`SuiteReport::from_json`](crate::stress::suite::SuiteReport::from_json):
/// `{report, csv}`, or an error for a damaged one.
#[wasm_bindgen(js_name = readSuiteReport)]
pub fn read_suite_report(json: &str) -> Result<JsValue, JsError> {
    let report = crate::stress::suite::SuiteReport::from_json(json).map_err(js_err)?;
    report_and_csv(&report)
}

/// What the page asks of the preference suite or the audit.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DatasetMetricsRequest {
    dataset: String,
    text: String,
    /// The metrics with their options (model-based ones name a loaded model).
    specs: Vec<MetricSpec>,
    /// The audit: a loaded GPT-2 whose perplexity of each summary is one
    /// more correlate.
    #[serde(default)]
    ppl_model: Option<String>,
}

fn dataset_request(request: JsValue, what: &str) -> Result<DatasetMetricsRequest, JsError> {
    serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid {what} request: {e}")))
}

/// A stop request for one kind of long job in the model worker.
type StopFlag = std::thread::LocalKey<std::cell::Cell<bool>>;

thread_local! {
    /// Set by `stopAnalysis`, read after each batch of a preference suite or audit.
    static STOP_ANALYSIS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set by `stopMauve`, read after each model pass of MAUVE's featurising.
    static STOP_MAUVE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set by `stopGeneration`, read after each token of a generation.
    static STOP_GENERATION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set by `stopSuite`, read after each batch of a suite's model scores.
    static STOP_SUITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set by `stopInjection`, read after each batch of a masked LM's queries
    /// (the playground's Apply and sweep of BERT-diverge).
    static STOP_INJECTION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A turn of the event loop (so a stop request can arrive), then whether to
/// go on: `false` once `stop` is set.
fn until_stopped(stop: &'static StopFlag) -> impl AsyncFn() -> bool {
    async move || {
        attack::yield_to_events().await;
        !stop.with(std::cell::Cell::get)
    }
}

/// Ends the running Apply or sweep of an injection driven by a masked LM
/// after its current batch of queries; it then rejects with "stopped".
#[wasm_bindgen(js_name = stopInjection)]
pub fn stop_injection() {
    STOP_INJECTION.with(|s| s.set(true));
}

/// A long job's progress: `on_progress(done, total)`, then a turn of the
/// event loop so that a stop request can arrive (a CPU pass never yields by
/// itself). `false` (stop) once `stop` is set, or once the callback throws.
async fn progress_or_stop(
    on_progress: &js_sys::Function,
    done: usize,
    total: usize,
    stop: &'static StopFlag,
) -> bool {
    let told = js_progress(on_progress)(done, total);
    until_stopped(stop)().await && told
}

/// What a preference suite or audit returns: the report, the rows skipped,
/// and whether `stopAnalysis` ended it early (the report then covers what
/// was scored by then).
#[derive(Serialize)]
struct AnalysisOut<'a, R: Serialize> {
    report: &'a R,
    problems: &'a [crate::data::RowProblem],
    stopped: bool,
}

/// Runs the MENLI preference suite on a MENLI-format CSV (the same runner
/// as `blindspot prefer`) with any metrics, model-based ones on the loaded
/// models: `{report, problems, stopped}`. Rows that do not parse are listed
/// by line and skipped; `on_progress(done, total)` after each batch of
/// cases; `stopAnalysis()` ends it after the current batch, with the
/// accuracies over the cases scored.
#[wasm_bindgen(js_name = preferenceSuite)]
pub async fn preference_suite(
    request: JsValue,
    on_progress: js_sys::Function,
) -> Result<JsValue, JsError> {
    count_job();
    STOP_ANALYSIS.with(|s| s.set(false));
    let r = dataset_request(request, "preference")?;
    if r.ppl_model.is_some() {
        return Err(JsError::new(
            "invalid preference request: pplModel is the audit's perplexity correlate",
        ));
    }
    let loaded = crate::data::load_menli_csv(&r.text)
        .map_err(|p| JsError::new(&format!("line {}: {}", p.line, p.message)))?;
    if loaded.rows.is_empty() {
        // Accuracies over no case would read 0%.
        let why = match loaded.problems.first() {
            Some(p) => format!(
                "every row was skipped (line {}: {}{})",
                p.line,
                p.message,
                if loaded.problems.len() > 1 {
                    format!(", and {} more", loaded.problems.len() - 1)
                } else {
                    String::new()
                }
            ),
            None => "the file has no rows after its header".to_owned(),
        };
        return Err(JsError::new(&format!("no preference case: {why}")));
    }
    let report = crate::stress::prefer::run_preference(
        &r.dataset,
        &loaded.rows,
        &r.specs,
        &models::batch_engine(),
        async |done, total| progress_or_stop(&on_progress, done, total, &STOP_ANALYSIS).await,
    )
    .await
    .map_err(js_err)?;
    to_js(&AnalysisOut {
        stopped: report.cases < loaded.rows.len(),
        report: &report,
        problems: &loaded.problems,
    })
}

/// Runs the spurious-correlate audit on SummEval-format JSONL (the same as
/// `blindspot audit`) with any metrics: `{report, problems, stopped}`.
/// `on_progress(documents done, documents)` after each few documents;
/// `stopAnalysis()` ends it there, with the audit of the documents scored.
#[wasm_bindgen(js_name = auditSuite)]
pub async fn audit_suite(
    request: JsValue,
    on_progress: js_sys::Function,
) -> Result<JsValue, JsError> {
    count_job();
    STOP_ANALYSIS.with(|s| s.set(false));
    let r = dataset_request(request, "audit")?;
    let loaded = crate::data::load_summeval(&r.text);
    if loaded.rows.is_empty() {
        return Err(JsError::new("no SummEval documents in the file"));
    }
    let summaries = crate::stress::audit::summaries(&loaded.rows).len();
    let report = crate::stress::audit::run_audit(
        &r.dataset,
        &loaded.rows,
        &r.specs,
        &models::batch_engine(),
        r.ppl_model.as_deref(),
        async |done, total| progress_or_stop(&on_progress, done, total, &STOP_ANALYSIS).await,
    )
    .await
    .map_err(js_err)?;
    to_js(&AnalysisOut {
        stopped: report.examples < summaries,
        report: &report,
        problems: &loaded.problems,
    })
}

/// A preference (`kind` "prefer") or audit ("audit") report the page kept as
/// JSON (across a reload), read and checked by the report's `from_json`; an
/// error for a damaged one.
#[wasm_bindgen(js_name = readAnalysisReport)]
pub fn read_analysis_report(kind: &str, json: &str) -> Result<JsValue, JsError> {
    use crate::stress::{audit::AuditReport, prefer::PreferenceReport};
    match kind {
        "prefer" => to_js(&PreferenceReport::from_json(json).map_err(js_err)?),
        "audit" => to_js(&AuditReport::from_json(json).map_err(js_err)?),
        _ => Err(JsError::new(&format!(
            "unknown analysis {kind:?} (prefer or audit)"
        ))),
    }
}

/// Ends the running preference suite or audit after its current batch.
#[wasm_bindgen(js_name = stopAnalysis)]
pub fn stop_analysis() {
    STOP_ANALYSIS.with(|s| s.set(true));
}

/// Ends the running MAUVE computation after its current model pass.
#[wasm_bindgen(js_name = stopMauve)]
pub fn stop_mauve() {
    STOP_MAUVE.with(|s| s.set(true));
}

/// Ends the running generation after its current token; it resolves with
/// what was generated by then (`end: "stopped"`).
#[wasm_bindgen(js_name = stopGeneration)]
pub fn stop_generation() {
    STOP_GENERATION.with(|s| s.set(true));
}

/// The self-contained HTML report (the same as `blindspot stress --html`)
/// for a suite report the page holds.
#[wasm_bindgen(js_name = suiteHtml)]
pub fn suite_html(report: JsValue) -> Result<String, JsError> {
    let report: crate::stress::suite::SuiteReport = serde_wasm_bindgen::from_value(report)
        .map_err(|e| JsError::new(&format!("invalid suite report: {e}")))?;
    report.check().map_err(js_err)?;
    Ok(crate::stress::html::suite_html(&report))
}

/// Runs a small matrix product on WebGPU through burn-wgpu and checks it
/// against the same product on the CPU. Resolves to
/// `{ok, backend, maxAbsDiff, shape, millis}` or rejects with the reason
/// WebGPU is unavailable.
#[wasm_bindgen(js_name = webgpuSelfTest)]
pub async fn webgpu_self_test() -> Result<JsValue, JsError> {
    let report = gpu::matmul_self_test()
        .await
        .map_err(|e| JsError::new(&e))?;
    to_js(&report)
}

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, JsError> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| JsError::new(&format!("cannot convert result: {e}")))
}
