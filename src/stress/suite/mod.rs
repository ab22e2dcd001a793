//! The blind-spot stress suite over a dataset ([BS] §2, SPEC 1.1).
//!
//! For every selected injection, every level and every seed, each item's gold
//! hypothesis is perturbed and scored (sentence level) against its references;
//! the noised set's mean score per seed is compared with the base (the mean
//! score of the unperturbed gold hypotheses). Reported per level: mean and
//! standard deviation over seeds (population std, as numpy's default) of the
//! score and of the noise ratio, and the share of items the injection changed.
//! Each metric's verdict follows the rank rule ([`super::verdict`]).
//!
//! Items where an injection cannot apply keep their gold text (and its
//! score), as in the papers' noised sets. Natively the items are scored in
//! parallel (rayon); the sums are merged in item order, so results do not
//! depend on the thread count.
//!
//! Model-based metrics (BERTScore, perplexities, MENLI) come from a
//! [`ModelScorer`] the caller supplies (natively the core's
//! [`crate::metrics::Engine`]): the perturbed texts are gathered in the
//! parallel pass, then scored in batches of items (identical texts once),
//! so the model runs batched and the lexical pass stays parallel.
//!
//! A run ([`SuiteRun`], the one runner: blocking natively, asynchronous in
//! the browser) has four steps: plan the tests, then per test perturb every
//! item, score the texts and aggregate; each finished test is reported as
//! it ends. The per-item outcomes ([`SuitePart`]) are what a shard of a run
//! writes (`blindspot stress --shard I/N`); [`merge`] folds the parts in
//! item order, exactly as the unsharded run does, so the merged report
//! equals the unsharded one bit for bit.

mod run;

pub use run::SuiteRun;

use serde::{Deserialize, Serialize};

use super::attack::{AttackEntry, AttackRun};
use super::{Verdict, verdict_of_applied};
use crate::data::Damage;
use crate::data::Item;
use crate::inject::masked_lm::MaskedLm;
use crate::inject::{self, Family, InjectError, Injection};
use crate::metrics::spec::{OptionValue, ParseError};
use crate::metrics::{Metric, MetricError, MetricSpec, Segment, Settings};
use crate::models::tokenizer::LmTokenizer;

/// What to run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SuiteConfig {
    /// Injection ids, in report order.
    pub injections: Vec<String>,
    /// Metric ids, in report order.
    pub metrics: Vec<String>,
    /// Seeds per level (the papers use 5).
    pub seeds: u64,
    /// ROUGE with the Porter stemmer.
    #[serde(default)]
    pub rouge_stemmer: bool,
    /// The gold texts are open-ended generations: sentence switching leaves
    /// their last sentence in place ([`Context::open_ended`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_ended: bool,
}

/// Mean and population standard deviation over seeds (NaN, written to JSON
/// as `null`, where a metric gave one).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Stat {
    /// Mean.
    #[serde(deserialize_with = "super::nan_from_null")]
    pub mean: f64,
    /// Population standard deviation.
    #[serde(deserialize_with = "super::nan_from_null")]
    pub std: f64,
}

impl Stat {
    fn of(values: &[f64]) -> Self {
        let n = values.len().max(1) as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        Self {
            mean,
            std: var.sqrt(),
        }
    }
}

/// One level of one test.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelResult {
    /// The injection level.
    pub level: f64,
    /// Noise ratio (mean over items), over seeds.
    pub noise_ratio: Stat,
    /// Share of (item, seed) pairs the injection changed.
    pub applied: f64,
    /// Mean score over items, over seeds, per metric (report order).
    pub scores: Vec<Stat>,
}

/// One injection's test.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestResult {
    /// Injection id.
    pub injection: String,
    /// Its paper family.
    pub family: Family,
    /// Levels, increasing; empty when skipped.
    pub levels: Vec<LevelResult>,
    /// Rank-rule verdict per metric; empty when skipped.
    pub verdicts: Vec<Verdict>,
    /// Why the test did not run (needs a source, a model...).
    pub skipped: Option<String>,
}

/// A metric as the report names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricEntry {
    /// Metric id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Signature of the sentence-level scores.
    pub signature: String,
}

/// Everything a suite run produced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SuiteReport {
    /// `blindspot X.Y.Z`.
    pub tool: String,
    /// Dataset name (file name).
    pub dataset: String,
    /// Items scored.
    pub items: usize,
    /// What was run.
    pub config: SuiteConfig,
    /// Metrics, in report order.
    pub metrics: Vec<MetricEntry>,
    /// Base score (mean over gold hypotheses) per metric.
    #[serde(deserialize_with = "super::nans_from_nulls")]
    pub base: Vec<f64>,
    /// One test per injection.
    pub tests: Vec<TestResult>,
    /// Attacks run on the same dataset (`blindspot attack`), added to the
    /// report with [`SuiteReport::add_attack`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attacks: Vec<AttackEntry>,
}

impl SuiteReport {
    /// Adds an attack run's summary. Refuses a run on another dataset, or a
    /// shard of one.
    pub fn add_attack(&mut self, run: &AttackRun) -> Result<(), SuiteError> {
        let entry = run
            .entry()
            .map_err(|e| SuiteError::Invalid(e.to_string()))?;
        if entry.header.dataset != self.dataset {
            return Err(SuiteError::Invalid(format!(
                "the attack ran on {}, the suite on {}",
                entry.header.dataset, self.dataset
            )));
        }
        // The same items (a run over another `--limit` is another sample).
        if entry.header.items != self.items {
            return Err(SuiteError::Invalid(format!(
                "the attack ran on {} items of {}, the suite on {}",
                entry.header.items, self.dataset, self.items
            )));
        }
        self.attacks.push(entry);
        Ok(())
    }

    /// Reads a report written as JSON (`blindspot stress --out`, the page's
    /// download or the copy it keeps across reloads). A damaged or edited
    /// one is refused, not indexed: see [`SuiteReport::check`].
    pub fn from_json(json: &str) -> Result<Self, SuiteError> {
        Ok(crate::data::read_kept(
            json,
            "stress suite report",
            Self::consistency,
        )?)
    }

    /// Checks that the report's per-metric arrays have one entry per metric
    /// and that each test is what a run gives: a known injection of its
    /// family, levels increasing, shares applied in [0, 1], and each verdict
    /// the rank rule's on the report's own scores (where none is NaN: JSON
    /// writes an infinite score as null too). A report an older version
    /// wrote with other families or levels is refused as well.
    pub fn check(&self) -> Result<(), SuiteError> {
        self.consistency()
            .map_err(|e| SuiteError::Invalid(format!("the stress suite report is damaged: {e}")))
    }

    fn consistency(&self) -> Result<(), Damage> {
        let metrics = self.metrics.len();
        if self.base.len() != metrics {
            return Err(Damage(format!(
                "{} base scores for {metrics} metrics",
                self.base.len()
            )));
        }
        for test in &self.tests {
            // A skipped test has no verdicts; its levels, where it has any
            // (it changed no text), have their scores.
            let verdicts = if test.skipped.is_none() { metrics } else { 0 };
            if test.verdicts.len() != verdicts
                || test.levels.iter().any(|l| l.scores.len() != metrics)
            {
                return Err(Damage(format!(
                    "{}'s verdicts or scores do not match its {metrics} metrics",
                    test.injection
                )));
            }
            let info = inject::create(&test.injection)
                .map_err(|e| Damage(e.to_string()))?
                .info();
            if test.family != info.family
                || test.levels.windows(2).any(|w| w[0].level >= w[1].level)
                || test
                    .levels
                    .iter()
                    .any(|l| !(0.0..=1.0).contains(&l.applied))
            {
                return Err(Damage(format!(
                    "{}'s family or levels are not the injection's",
                    test.injection
                )));
            }
            for (m, &shown) in test.verdicts.iter().enumerate() {
                // JSON writes NaN and ±inf alike as null, read back as NaN:
                // a verdict on an infinite score cannot be derived again.
                let levels = || test.levels.iter().map(|l| (l.scores[m].mean, l.applied));
                if self.base[m].is_nan() || levels().any(|(mean, _)| mean.is_nan()) {
                    continue;
                }
                let metric = super::metric_info(&self.metrics[m].id);
                if shown != verdict_of_applied(&metric, self.base[m], levels(), super::graded(info))
                {
                    return Err(Damage(format!(
                        "{}'s verdict for {} is not the rank rule's on its scores",
                        test.injection, self.metrics[m].id
                    )));
                }
            }
        }
        Ok(())
    }

    /// One row per (test, level, metric), with the verdict repeated per test.
    pub fn to_csv(&self) -> String {
        let report = self;
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "tool",
            "dataset",
            "items",
            "seeds",
            "injection",
            "family",
            "level",
            "noise_mean",
            "noise_std",
            "applied",
            "metric",
            "signature",
            "base",
            "mean",
            "std",
            "verdict",
        ])
        .expect("in-memory write");
        for test in &report.tests {
            let family = serde_json::to_value(test.family).expect("serialisable");
            for level in &test.levels {
                for (m, metric) in report.metrics.iter().enumerate() {
                    // A test that never applied has levels but no verdict.
                    let verdict = test
                        .verdicts
                        .get(m)
                        .map_or(serde_json::Value::from("not_applied"), |v| {
                            serde_json::to_value(v).expect("serialisable")
                        });
                    w.write_record([
                        report.tool.clone(),
                        report.dataset.clone(),
                        report.items.to_string(),
                        report.config.seeds.to_string(),
                        test.injection.clone(),
                        family.as_str().unwrap_or_default().to_owned(),
                        level.level.to_string(),
                        level.noise_ratio.mean.to_string(),
                        level.noise_ratio.std.to_string(),
                        level.applied.to_string(),
                        metric.id.clone(),
                        metric.signature.clone(),
                        report.base[m].to_string(),
                        level.scores[m].mean.to_string(),
                        level.scores[m].std.to_string(),
                        verdict.as_str().unwrap_or_default().to_owned(),
                    ])
                    .expect("in-memory write");
                }
            }
        }
        String::from_utf8(w.into_inner().expect("in-memory flush")).expect("CSV of UTF-8 strings")
    }
}

/// Why a suite cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// Unknown injection id or bad level.
    #[error(transparent)]
    Inject(#[from] InjectError),
    /// Unknown metric, or a metric that cannot score an item.
    #[error("{0}")]
    Metric(String),
    /// Nothing to run.
    #[error("{0}")]
    Empty(&'static str),
    /// A configuration that cannot run as given.
    #[error("{0}")]
    Invalid(String),
    /// Shard files that do not belong together.
    #[error("cannot merge: {0}")]
    Merge(String),
    /// The progress callback asked to stop.
    #[error("cancelled")]
    Cancelled,
    /// A report or part read back that no run could have written.
    #[error(transparent)]
    Kept(#[from] crate::data::KeptError),
    /// A model-based metric could not score a batch.
    #[error(transparent)]
    Engine(#[from] crate::metrics::EngineError),
}

impl From<MetricError> for SuiteError {
    fn from(e: MetricError) -> Self {
        SuiteError::Metric(e.to_string())
    }
}

/// How many other gold hypotheses serve as the sample pool (sentence
/// replacement): the next ones in the file, cyclically. The frequent n-grams
/// count the whole dataset instead ([`crate::inject::other::NgramCorpus`]).
const SAMPLE_POOL: usize = 50;

/// Progress callback: `(steps done, steps total)`; return `false` to cancel.
/// A step is one item of one pass (the base scores, then each test; twice
/// over when a model scores). Natively it is called from worker threads, so
/// it must be `Sync`.
#[cfg(not(target_arch = "wasm32"))]
pub type Progress<'a> = &'a (dyn Fn(usize, usize) -> bool + Sync);

/// Progress callback: `(steps done, steps total)`; return `false` to cancel.
#[cfg(target_arch = "wasm32")]
pub type Progress<'a> = &'a dyn Fn(usize, usize) -> bool;

/// Texts a [`ModelScorer`] scores: row `i` is `hyps[i]` against `refs[i]`
/// with source `srcs[i]`.
#[derive(Default)]
pub struct ModelRows<'a> {
    /// Hypotheses.
    pub hyps: Vec<&'a str>,
    /// References of each hypothesis.
    pub refs: Vec<Vec<&'a str>>,
    /// Source of each hypothesis.
    pub srcs: Vec<Option<&'a str>>,
    /// The whole set these rows are a batch of, where a metric reads the
    /// set's texts (idf weights): every item once, with its text of the
    /// same level and seed. The rows are then scored as if the whole set
    /// were ([`crate::metrics::Engine::score_within`]).
    pub set: Option<std::rc::Rc<ModelRows<'a>>>,
}

impl<'a> ModelRows<'a> {
    /// The row of `text` for `item`, added unless `seen` has it.
    fn add(
        &mut self,
        seen: &mut rustc_hash::FxHashMap<&'a str, usize>,
        item: &'a Item,
        text: &'a str,
    ) -> usize {
        *seen.entry(text).or_insert_with(|| self.push(item, text))
    }

    /// Adds the row of `text` for `item`; returns its index.
    fn push(&mut self, item: &'a Item, text: &'a str) -> usize {
        self.hyps.push(text);
        self.refs
            .push(item.refs.iter().map(String::as_str).collect());
        self.srcs.push(item.src.as_deref());
        self.hyps.len() - 1
    }

    /// The rows as segments.
    pub fn segments(&self) -> Vec<Segment<'_>> {
        self.hyps
            .iter()
            .zip(&self.refs)
            .zip(&self.srcs)
            .map(|((hyp, refs), src)| Segment {
                hyp,
                refs,
                src: *src,
            })
            .collect()
    }
}

/// Model-based scores of a batch of rows: one column per metric asked.
pub struct ModelColumns {
    /// Per metric (in the order asked), one value per row.
    pub values: Vec<Vec<f64>>,
    /// Per metric, its signature.
    pub signatures: Vec<String>,
}

/// What [`ModelScorer::score`] returns: model passes read back
/// asynchronously in the browser.
pub type Scored<'a> =
    futures::future::LocalBoxFuture<'a, Result<ModelColumns, crate::metrics::EngineError>>;

/// Scores the metrics that need a language model; the caller owns the models.
pub trait ModelScorer {
    /// Scores every row with each spec.
    fn score<'a>(&'a mut self, specs: &'a [MetricSpec], rows: &'a ModelRows<'a>) -> Scored<'a>;
}

/// The engine scores a suite's model metrics (natively with its model
/// folders, in the browser with the loaded models).
impl ModelScorer for &crate::metrics::Engine {
    fn score<'a>(&'a mut self, specs: &'a [MetricSpec], rows: &'a ModelRows<'a>) -> Scored<'a> {
        let engine: &crate::metrics::Engine = self;
        Box::pin(async move {
            let segments = rows.segments();
            let columns = match &rows.set {
                Some(set) => engine.score_within(specs, &segments, &set.segments()).await,
                None => engine.score(specs, &segments).await,
            }?;
            Ok(ModelColumns {
                values: columns.iter().map(|c| c.values()).collect(),
                signatures: columns.iter().map(|c| c.signature.to_string()).collect(),
            })
        })
    }
}

/// Language models a suite may use beyond the lexical metrics.
#[derive(Default)]
pub struct SuiteModels<'a> {
    /// Tokenizer of the positioned errors (GPT-2's BPE...).
    pub lm_tokenizer: Option<&'a LmTokenizer>,
    /// Masked LM of BERT-diverge (asked about a chunk of items at once).
    pub masked_lm: Option<&'a dyn MaskedLm>,
    /// Scorer of the model-based metrics.
    pub scorer: Option<&'a mut dyn ModelScorer>,
    /// Options of the metrics (model folders, BERTScore layer...); the
    /// config's ROUGE stemmer applies on top.
    pub settings: Settings,
    /// Told the report so far each time a test finishes (whole runs only).
    pub on_test: Option<&'a dyn Fn(&SuiteReport)>,
    /// Told, in a shard, each test as it finishes: a part with the shard's
    /// items, their base scores and that one test, so parts of shards
    /// running side by side can be merged test by test (the page's
    /// workers).
    pub on_part: Option<&'a dyn Fn(&SuitePart)>,
    /// The metrics with their options, one per `config.metrics` id, where
    /// the caller has them as specs (the page's cards); `None`: from
    /// `settings`.
    pub specs: Option<Vec<MetricSpec>>,
}

/// The most seeds a run takes.
pub const MAX_SEEDS: u64 = 100;

/// Items whose perturbed texts go to the model scorer together: enough rows
/// for full batches, few enough that their embeddings stay small.
const MODEL_CHUNK: usize = 4;

/// One shard of a run: `index` of `count` (0-based), a contiguous range of items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, `0..count`.
    pub index: usize,
    /// How many shards the run is split into.
    pub count: usize,
}

impl Shard {
    /// Whether `index` is one of `count` shards (`count` at least 1).
    pub fn is_valid(self) -> bool {
        self.index < self.count
    }

    /// The items of this shard among `n`: contiguous, starting on a
    /// multiple of the model scorer's chunk, so a shard batches its texts
    /// for the model exactly as the unsharded run does.
    pub fn range(self, n: usize) -> std::ops::Range<usize> {
        let bound = |k: usize| {
            if k == self.count {
                n
            } else {
                // (In u128: a part read from a file may claim any `n`.)
                ((k as u128 * n as u128 / self.count as u128) as usize) / MODEL_CHUNK * MODEL_CHUNK
            }
        };
        bound(self.index)..bound(self.index + 1)
    }
}

impl std::str::FromStr for Shard {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new("shard", s, ["I/N with 0 <= I < N, e.g. 0/4"]);
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        let shard = Shard { index, count };
        if !shard.is_valid() {
            return Err(bad());
        }
        Ok(shard)
    }
}

/// One item's outcomes in one test: per cell (level-major, then seed) the
/// noise ratio, whether the injection applied, and one score per metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemCells {
    /// Noise ratio per cell.
    pub noise: Vec<f64>,
    /// Whether the injection changed the text, per cell.
    pub applied: Vec<bool>,
    /// Scores, `[cell][metric]` flattened.
    pub scores: Vec<f64>,
}

/// One test's per-item outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestPart {
    /// Injection id.
    pub injection: String,
    /// Why the test was skipped before running.
    pub skipped: Option<String>,
    /// One entry per item of the part (empty when skipped).
    pub items: Vec<ItemCells>,
}

/// The per-item outcomes of a run or of one shard of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuitePart {
    /// `blindspot X.Y.Z`.
    pub tool: String,
    /// Dataset name.
    pub dataset: String,
    /// Items in the whole run.
    pub items: usize,
    /// The shard, or `None` for a whole run.
    pub shard: Option<Shard>,
    /// What was run.
    pub config: SuiteConfig,
    /// Metrics, in report order.
    pub metrics: Vec<MetricEntry>,
    /// Indices of this part's items in the dataset.
    pub indices: Vec<usize>,
    /// Base score per item, `[item][metric]`.
    pub base: Vec<Vec<f64>>,
    /// One entry per test.
    pub tests: Vec<TestPart>,
}

/// A test of the plan: the injection, or why it is skipped.
struct Planned {
    injection: &'static dyn Injection,
    skipped: Option<String>,
}

/// The metrics and tests of a run.
struct Plan {
    specs: Vec<MetricSpec>,
    /// Per metric: the model-free metric, or `None` for the model scorer.
    lexical: Vec<Option<Box<dyn Metric>>>,
    /// Indices of the model-based metrics.
    model_columns: Vec<usize>,
    tests: Vec<Planned>,
    seeds: usize,
    open_ended: bool,
    /// How the model metrics see the dataset as a set.
    set: SetMode,
}

/// How a suite's model metrics read the dataset as a set (idf weights).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SetMode {
    /// None does: batches stand alone.
    Alone,
    /// The set's references only (BERTScore's idf): every batch is scored
    /// within the gold set, whose references every level shares.
    References,
    /// The set's hypotheses too (MoverScore's idf): each level and seed is a
    /// set of its own, as [BS] scores each perturbed system output, and
    /// every item is scored in it, changed or not.
    PerCell,
}

impl Plan {
    fn model_specs(&self) -> Vec<MetricSpec> {
        self.model_columns
            .iter()
            .map(|&m| self.specs[m].clone())
            .collect()
    }

    /// Level-and-seed cells of a test.
    fn cells(&self, injection: &dyn Injection) -> usize {
        injection.info().default_levels.len() * self.seeds
    }

    /// Model passes over the items: the base, then one per runnable test,
    /// or per level and seed of each where the metrics read each cell's set
    /// (a cell that changed no item counts, though it needs no pass).
    fn model_rounds(&self) -> usize {
        if self.model_columns.is_empty() {
            return 0;
        }
        let runnable = self.tests.iter().filter(|t| t.skipped.is_none());
        1 + runnable
            .map(|t| match self.set {
                SetMode::PerCell => self.cells(t.injection),
                SetMode::Alone | SetMode::References => 1,
            })
            .sum::<usize>()
    }
}

/// Why a suite with these metrics cannot run in shards, if it cannot:
/// MoverScore's idf weights read every item's texts at each level and seed.
pub fn shard_refusal(specs: &[MetricSpec]) -> Option<SuiteError> {
    let per_cell = |s: &MetricSpec| s.whole_set().is_some() && s.reads_set_hypotheses();
    specs.iter().any(per_cell).then(no_shards)
}

fn no_shards() -> SuiteError {
    SuiteError::Invalid(
        "MoverScore's idf weights come from the whole dataset's texts at each level and \
         seed, which no shard sees: run this suite without shards"
            .into(),
    )
}

/// Checks the config and resolves its metrics and tests.
fn plan(
    items: &[Item],
    config: &SuiteConfig,
    models: &SuiteModels,
    has_scorer: bool,
) -> Result<Plan, SuiteError> {
    if items.is_empty() {
        return Err(SuiteError::Empty("the dataset has no items"));
    }
    if config.metrics.is_empty() || config.injections.is_empty() || config.seeds == 0 {
        return Err(SuiteError::Empty(
            "choose at least one metric, one injection and one seed",
        ));
    }
    if config.seeds > MAX_SEEDS {
        return Err(SuiteError::Invalid(format!(
            "{} seeds asked; at most {MAX_SEEDS} (the papers use 5)",
            config.seeds
        )));
    }
    let settings = models
        .settings
        .clone()
        .with(OptionValue::new(None, "stemmer", config.rouge_stemmer).lenient());
    let specs = match &models.specs {
        Some(specs) => {
            let ids: Vec<String> = specs.iter().map(|s| s.id().to_string()).collect();
            if ids != config.metrics {
                return Err(SuiteError::Invalid(format!(
                    "the metrics' options name {} but the configuration {}",
                    ids.join(","),
                    config.metrics.join(",")
                )));
            }
            for spec in specs {
                spec.validate()
                    .map_err(|e| SuiteError::Metric(e.to_string()))?;
            }
            specs.clone()
        }
        None => settings
            .specs(&config.metrics)
            .map_err(|e| SuiteError::Metric(e.to_string()))?,
    };
    let mut lexical = Vec::new();
    let mut model_columns = Vec::new();
    let mut set = SetMode::Alone;
    for (m, spec) in specs.iter().enumerate() {
        if let Some(reason) = spec.whole_set() {
            if spec.reads_set_scores() {
                return Err(SuiteError::Metric(format!(
                    "{reason} depends on the scores of the whole set; suites score texts \
                     in batches, so {} cannot run with that option here",
                    spec.id()
                )));
            }
            set = if spec.reads_set_hypotheses() {
                SetMode::PerCell
            } else {
                set.max(SetMode::References)
            };
        }
        match spec.lexical() {
            Some(metric) => lexical.push(Some(metric)),
            None if has_scorer => {
                lexical.push(None);
                model_columns.push(m);
            }
            None => {
                return Err(SuiteError::Metric(format!(
                    "{} needs a language model (pass one for it)",
                    spec.id()
                )));
            }
        }
    }
    let has_sources = items
        .iter()
        .all(|i| i.src.as_deref().is_some_and(|s| !s.trim().is_empty()));
    let tests = config
        .injections
        .iter()
        .map(|id| {
            let injection = inject::create(id)?;
            let info = injection.info();
            let skipped = if info.needs_masked_lm && models.masked_lm.is_none() {
                Some(
                    "needs a masked language model (`--mlm-model DIR`; on the page, load a \
                     model with its MLM head)"
                        .to_owned(),
                )
            } else if info.needs_lm_tokenizer && models.lm_tokenizer.is_none() {
                Some("needs a language-model tokenizer".to_owned())
            } else if info.needs_tagger && crate::text::tagger::Tagger::english().is_none() {
                Some(format!("needs {}", inject::TAGGER_MISSING))
            } else if info.needs_samples && items.len() < 2 {
                Some("needs other items to draw from and the dataset has one".to_owned())
            } else if info.needs_source && !has_sources {
                Some("needs a source and the dataset has none for some items".to_owned())
            } else {
                None
            };
            Ok(Planned { injection, skipped })
        })
        .collect::<Result<_, InjectError>>()?;
    Ok(Plan {
        specs,
        lexical,
        model_columns,
        tests,
        seeds: config.seeds as usize,
        open_ended: config.open_ended,
        set,
    })
}

/// Combines the parts of a sharded run into the report the unsharded run
/// gives: every item exactly once, folded in item order.
pub fn merge(parts: Vec<SuitePart>) -> Result<SuiteReport, SuiteError> {
    merge_parts(parts, true)
}

/// Merges the parts of shards running side by side as they send them (each
/// test as it finishes, from [`SuiteModels::on_part`]): the report so far
/// after each test every shard has finished, and at the end [`merge`]'s.
/// The page's merger worker holds one.
#[derive(Debug, Default)]
pub struct PartMerger {
    /// Per shard: its items and base scores, with the tests it has sent.
    shards: Vec<Option<SuitePart>>,
    /// The report so far: the tests every shard has finished.
    so_far: Option<SuiteReport>,
}

impl PartMerger {
    /// For a run in `count` shards.
    pub fn new(count: usize) -> Self {
        Self {
            shards: vec![None; count],
            so_far: None,
        }
    }

    /// Adds the tests a shard sent. Returns the report so far when every
    /// shard has now finished one more test, else `None`.
    pub fn add(&mut self, part: SuitePart) -> Result<Option<&SuiteReport>, SuiteError> {
        let index = part
            .shard
            .filter(|s| s.is_valid() && s.count == self.shards.len())
            .map(|s| s.index)
            .ok_or_else(|| SuiteError::Merge("a part from no shard of this run".into()))?;
        match &mut self.shards[index] {
            Some(have) => have.tests.extend(part.tests),
            slot => *slot = Some(part),
        }
        let Some(shards) = self
            .shards
            .iter()
            .map(Option::as_ref)
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        let finished = shards.iter().map(|p| p.tests.len()).min().unwrap_or(0);
        let reported = self.so_far.as_ref().map_or(0, |r| r.tests.len());
        if finished <= reported {
            return Ok(None);
        }
        // Only the tests new since the last report are merged (each test
        // is aggregated on its own, against the whole base).
        let new: Vec<SuitePart> = shards
            .iter()
            .map(|p| SuitePart {
                tool: p.tool.clone(),
                dataset: p.dataset.clone(),
                items: p.items,
                shard: p.shard,
                config: p.config.clone(),
                metrics: p.metrics.clone(),
                indices: p.indices.clone(),
                base: p.base.clone(),
                tests: p.tests[reported..finished].to_vec(),
            })
            .collect();
        let report = merge_parts(new, false)?;
        Ok(Some(match &mut self.so_far {
            Some(so_far) => {
                so_far.tests.extend(report.tests);
                so_far
            }
            slot => slot.insert(report),
        }))
    }

    /// [`merge`] of everything the shards sent, once each has sent every
    /// test: the report the unsharded run gives.
    pub fn finish(&mut self) -> Result<SuiteReport, SuiteError> {
        let parts = std::mem::take(&mut self.shards)
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| SuiteError::Merge("a shard sent no test".into()))?;
        merge(parts)
    }
}

/// [`merge`], or with `complete` false the same tests of every part where
/// those stop short of the run's ([`PartMerger`]).
fn merge_parts(mut parts: Vec<SuitePart>, complete: bool) -> Result<SuiteReport, SuiteError> {
    let Some(first) = parts.first() else {
        return Err(SuiteError::Merge("no parts given".into()));
    };
    let (items, config, dataset) = (first.items, first.config.clone(), first.dataset.clone());
    for p in &parts {
        let json = |c: &SuiteConfig| serde_json::to_string(c).unwrap_or_default();
        let differ = if p.dataset != dataset {
            Some(format!("dataset {} vs {dataset}", p.dataset))
        } else if p.items != items {
            Some(format!("{} items vs {items}", p.items))
        } else if p.config != config {
            Some(format!(
                "configuration {} vs {}",
                json(&p.config),
                json(&config)
            ))
        } else {
            None
        };
        if let Some(differ) = differ {
            return Err(SuiteError::Merge(format!(
                "the parts come from different runs ({differ})"
            )));
        }
        if p.tool != first.tool
            || p.metrics
                .iter()
                .map(|m| &m.id)
                .ne(first.metrics.iter().map(|m| &m.id))
        {
            return Err(SuiteError::Merge(
                "the parts were written by different versions or metric sets".into(),
            ));
        }
        // Model signatures name the model and its options; a part without
        // items has none to compare.
        for (a, b) in p.metrics.iter().zip(&first.metrics) {
            if !a.signature.is_empty() && !b.signature.is_empty() && a.signature != b.signature {
                return Err(SuiteError::Merge(format!(
                    "{} was computed differently in two parts ({} vs {})",
                    a.id, a.signature, b.signature
                )));
            }
        }
        // The same tests, skipped alike (a masked LM or a tokenizer given to some shards only).
        let tests = |p: &SuitePart| -> Vec<(String, Option<String>)> {
            p.tests
                .iter()
                .map(|t| (t.injection.clone(), t.skipped.clone()))
                .collect()
        };
        if tests(p) != tests(first) {
            return Err(SuiteError::Merge(
                "the parts ran different tests, or skipped different ones (give every shard the \
                 same models and tokenizer)"
                    .into(),
            ));
        }
    }
    // In item order; a part without items (more shards than items) last.
    parts.sort_by_key(|p| p.indices.first().copied().unwrap_or(usize::MAX));
    let mut whole = parts.remove(0);
    for p in parts {
        for (a, b) in whole.metrics.iter_mut().zip(&p.metrics) {
            if a.signature.is_empty() {
                a.signature.clone_from(&b.signature);
            }
        }
        whole.indices.extend(p.indices);
        whole.base.extend(p.base);
        for (t, pt) in whole.tests.iter_mut().zip(p.tests) {
            t.items.extend(pt.items);
        }
    }
    let expected: Vec<usize> = (0..items).collect();
    if whole.indices != expected {
        let have: std::collections::BTreeSet<usize> = whole.indices.iter().copied().collect();
        let missing = (0..items).filter(|i| !have.contains(i)).count();
        return Err(SuiteError::Merge(format!(
            "the parts cover {} of {items} items ({missing} missing, {} repeated): give every shard once",
            have.len(),
            whole.indices.len() - have.len()
        )));
    }
    whole.shard = None;
    aggregate_part(&whole, complete)
}

/// Mean over items, summed in item order (the unsharded run's order,
/// whatever the threads or shards).
fn item_mean(values: impl Iterator<Item = f64>, n: usize) -> f64 {
    values.fold(0.0, |a, v| a + v) / n as f64
}

/// The base means of per-item base scores.
fn base_means(base: &[Vec<f64>], metric_count: usize) -> Vec<f64> {
    (0..metric_count)
        .map(|m| item_mean(base.iter().map(|b| b[m]), base.len()))
        .collect()
}

/// One test's result from its per-item outcomes over all items.
fn aggregate_test(
    test: &TestPart,
    metrics: &[MetricEntry],
    base: &[f64],
    seeds: usize,
) -> Result<TestResult, SuiteError> {
    let info = inject::create(&test.injection)?.info();
    let metric_count = base.len();
    let n = test.items.len();
    let levels: Vec<LevelResult> = if test.skipped.is_some() {
        vec![]
    } else {
        info.default_levels
            .iter()
            .enumerate()
            .map(|(l, &level)| {
                let cells = || (0..seeds).map(move |s| l * seeds + s);
                let per_seed = |f: &dyn Fn(&ItemCells, usize) -> f64| -> Vec<f64> {
                    cells()
                        .map(|c| item_mean(test.items.iter().map(|i| f(i, c)), n))
                        .collect()
                };
                let applied: usize = test
                    .items
                    .iter()
                    .map(|i| cells().filter(|&c| i.applied[c]).count())
                    .sum();
                LevelResult {
                    level,
                    noise_ratio: Stat::of(&per_seed(&|i, c| i.noise[c])),
                    applied: applied as f64 / (n * seeds) as f64,
                    scores: (0..metric_count)
                        .map(|m| Stat::of(&per_seed(&|i, c| i.scores[c * metric_count + m])))
                        .collect(),
                }
            })
            .collect()
    };
    let never_applied = test.skipped.is_none() && levels.iter().all(|l| l.applied == 0.0);
    let skipped = if never_applied {
        Some("did not apply to any item (nothing it can change)".to_owned())
    } else {
        test.skipped.clone()
    };
    let verdicts = if skipped.is_some() {
        Vec::new()
    } else {
        (0..metric_count)
            .map(|m| {
                let means = levels.iter().map(|l| (l.scores[m].mean, l.applied));
                let metric = metrics
                    .get(m)
                    .map_or_else(|| super::metric_info(""), |e| super::metric_info(&e.id));
                verdict_of_applied(&metric, base[m], means, super::graded(info))
            })
            .collect()
    };
    Ok(TestResult {
        injection: info.id.to_owned(),
        family: info.family,
        levels,
        verdicts,
        skipped,
    })
}

/// Checks that a part's per-item arrays have the sizes its configuration
/// implies (a truncated or edited file is refused, not indexed).
fn check_shape(part: &SuitePart, complete: bool) -> Result<(), SuiteError> {
    let metrics = part.metrics.len();
    let seeds = usize::try_from(part.config.seeds).unwrap_or(usize::MAX);
    let bad = |what: String| Err(SuiteError::Merge(format!("a part is damaged: {what}")));
    if part.items == 0 {
        return bad("it has no items".into());
    }
    if part.base.len() != part.indices.len() || part.base.iter().any(|b| b.len() != metrics) {
        return bad("its base scores do not match its items and metrics".into());
    }
    if complete && part.tests.len() != part.config.injections.len()
        || part.tests.len() > part.config.injections.len()
    {
        return bad("it does not have one test per injection".into());
    }
    for test in &part.tests {
        let levels = inject::create(&test.injection)?.info().default_levels.len();
        let cells = levels.saturating_mul(seeds);
        let expected_items = if test.skipped.is_some() {
            0
        } else {
            part.indices.len()
        };
        let fits = |i: &ItemCells| {
            i.noise.len() == cells
                && i.applied.len() == cells
                && i.scores.len() == cells.saturating_mul(metrics)
        };
        if test.items.len() != expected_items || !test.items.iter().all(fits) {
            return bad(format!(
                "{}'s outcomes do not match its levels and seeds",
                test.injection
            ));
        }
    }
    Ok(())
}

/// The report of a whole run's per-item outcomes.
pub fn aggregate(part: &SuitePart) -> Result<SuiteReport, SuiteError> {
    aggregate_part(part, true)
}

/// [`aggregate`]; with `complete` false, of a part whose tests may stop
/// short of the run's.
fn aggregate_part(part: &SuitePart, complete: bool) -> Result<SuiteReport, SuiteError> {
    if part.indices.len() != part.items {
        return Err(SuiteError::Merge(format!(
            "a shard ({} of {} items) is not a report: merge every shard",
            part.indices.len(),
            part.items
        )));
    }
    check_shape(part, complete)?;
    let base = base_means(&part.base, part.metrics.len());
    let tests = part
        .tests
        .iter()
        .map(|t| aggregate_test(t, &part.metrics, &base, part.config.seeds as usize))
        .collect::<Result<_, _>>()?;
    Ok(SuiteReport {
        tool: part.tool.clone(),
        dataset: part.dataset.clone(),
        items: part.items,
        config: part.config.clone(),
        metrics: part.metrics.clone(),
        base,
        tests,
        attacks: Vec::new(),
    })
}
