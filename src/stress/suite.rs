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
//! [`ModelScorer`] the caller supplies: the perturbed texts are gathered in
//! the parallel pass, then scored in batches of items (identical texts once),
//! so the model runs batched and the lexical pass stays parallel.

use serde::{Deserialize, Serialize};

use super::{Verdict, verdict};
use crate::data::Item;
use crate::inject::masked_lm::MaskedLm;
use crate::inject::{self, Context, Family, InjectError, Injection};
use crate::metrics::{self, Level, Metric, MetricError, MetricOptions, Segment};
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
}

/// Mean and population standard deviation over seeds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Stat {
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
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
    pub base: Vec<f64>,
    /// One test per injection.
    pub tests: Vec<TestResult>,
}

impl SuiteReport {
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
    /// The progress callback asked to stop.
    #[error("cancelled")]
    Cancelled,
}

impl From<MetricError> for SuiteError {
    fn from(e: MetricError) -> Self {
        SuiteError::Metric(e.to_string())
    }
}

/// How many other gold hypotheses serve as the sample pool (sentence
/// replacement, frequent n-grams): the next ones in the file, cyclically.
const SAMPLE_POOL: usize = 50;

/// Per (test, level, seed): noise sum, applied count, score sums per metric.
#[derive(Clone)]
struct Cell {
    noise: f64,
    applied: usize,
    scores: Vec<f64>,
}

/// Sums over items, merged in item order.
#[derive(Clone)]
struct Sums {
    base: Vec<f64>,
    cells: Vec<Vec<Vec<Cell>>>,
}

impl Sums {
    fn add(&mut self, other: &Sums) {
        for (a, b) in self.base.iter_mut().zip(&other.base) {
            *a += b;
        }
        for (ta, tb) in self.cells.iter_mut().zip(&other.cells) {
            for (la, lb) in ta.iter_mut().zip(tb) {
                for (ca, cb) in la.iter_mut().zip(lb) {
                    ca.noise += cb.noise;
                    ca.applied += cb.applied;
                    for (x, y) in ca.scores.iter_mut().zip(&cb.scores) {
                        *x += y;
                    }
                }
            }
        }
    }
}

/// Progress callback: `(items done, items total)`; return `false` to cancel.
/// Natively it is called from worker threads, so it must be `Sync`.
#[cfg(not(target_arch = "wasm32"))]
pub type Progress<'a> = &'a (dyn Fn(usize, usize) -> bool + Sync);

/// Progress callback: `(items done, items total)`; return `false` to cancel.
#[cfg(target_arch = "wasm32")]
pub type Progress<'a> = &'a dyn Fn(usize, usize) -> bool;

/// A runnable test: the injection, or why it is skipped.
struct Planned {
    injection: &'static dyn Injection,
    skipped: Option<String>,
}

/// Texts a [`ModelScorer`] scores: row `i` is `hyps[i]` against `refs[i]`
/// with source `srcs[i]`.
pub struct ModelRows<'a> {
    /// Hypotheses.
    pub hyps: Vec<&'a str>,
    /// References of each hypothesis.
    pub refs: Vec<Vec<&'a str>>,
    /// Source of each hypothesis.
    pub srcs: Vec<Option<&'a str>>,
}

impl<'a> ModelRows<'a> {
    /// The row of `text` for `item`, added unless `seen` has it.
    fn add(
        &mut self,
        seen: &mut rustc_hash::FxHashMap<&'a str, usize>,
        item: &'a Item,
        text: &'a str,
    ) -> usize {
        *seen.entry(text).or_insert_with(|| {
            self.hyps.push(text);
            self.refs
                .push(item.refs.iter().map(String::as_str).collect());
            self.srcs.push(item.src.as_deref());
            self.hyps.len() - 1
        })
    }
}

/// Model-based scores of a batch of rows: one column per metric asked.
pub struct ModelColumns {
    /// Per metric (in the order asked), one value per row.
    pub values: Vec<Vec<f64>>,
    /// Per metric, its signature.
    pub signatures: Vec<String>,
}

/// Scores the metrics that need a language model; the caller owns the models.
pub trait ModelScorer {
    /// True when this scorer can run metric `id`.
    fn serves(&self, id: &str) -> bool;
    /// Scores every row with each metric of `ids`.
    fn score(&mut self, ids: &[&str], rows: &ModelRows) -> Result<ModelColumns, String>;
}

/// Language models a suite may use beyond the lexical metrics.
#[derive(Default)]
pub struct SuiteModels<'a> {
    /// Tokenizer of the positioned errors (GPT-2's BPE...).
    pub lm_tokenizer: Option<&'a LmTokenizer>,
    /// Masked LM of BERT-diverge (natively shared by the worker threads).
    pub masked_lm: Option<&'a (dyn MaskedLm + Sync)>,
    /// Scorer of the metric ids `metrics::create` does not know.
    pub scorer: Option<&'a mut dyn ModelScorer>,
}

/// Items whose perturbed texts go to the model scorer together: enough rows
/// for full batches, few enough that their embeddings stay small.
const MODEL_CHUNK: usize = 4;

/// Runs the suite over `items` with lexical metrics only. `progress(done,
/// total)` is called as items finish (from worker threads natively);
/// returning `false` cancels.
pub fn run_suite(
    dataset: &str,
    items: &[Item],
    config: &SuiteConfig,
    lm_tokenizer: Option<&LmTokenizer>,
    progress: Progress,
) -> Result<SuiteReport, SuiteError> {
    let models = SuiteModels {
        lm_tokenizer,
        ..SuiteModels::default()
    };
    run_suite_with_models(dataset, items, config, models, progress)
}

/// A perturbed text awaiting the model scorer: (test, level, seed) and the
/// text, or `None` when the injection left the gold text unchanged.
type Deferred = (usize, usize, usize, Option<String>);

/// Runs the suite with language models: metric ids `metrics::create` does
/// not know go to `models.scorer`, BERT-diverge draws on `models.masked_lm`.
/// Progress counts items twice when a scorer runs: once for the
/// perturbations and lexical scores, once for the model scores.
pub fn run_suite_with_models(
    dataset: &str,
    items: &[Item],
    config: &SuiteConfig,
    models: SuiteModels,
    progress: Progress,
) -> Result<SuiteReport, SuiteError> {
    let SuiteModels {
        lm_tokenizer,
        masked_lm,
        scorer: models,
    } = models;
    if items.is_empty() {
        return Err(SuiteError::Empty("the dataset has no items"));
    }
    if config.metrics.is_empty() || config.injections.is_empty() || config.seeds == 0 {
        return Err(SuiteError::Empty(
            "choose at least one metric, one injection and one seed",
        ));
    }
    let options = MetricOptions {
        rouge_stemmer: config.rouge_stemmer,
    };
    // Each column: a lexical metric, or `None` for one the model scorer runs.
    let mut metrics: Vec<Option<Box<dyn Metric>>> = Vec::new();
    for id in &config.metrics {
        match metrics::create(id, options) {
            Ok(m) => metrics.push(Some(m)),
            Err(e) => match models.as_deref() {
                Some(scorer) if scorer.serves(id) => metrics.push(None),
                _ if metrics::model_metric(id).is_some() => {
                    return Err(SuiteError::Metric(format!(
                        "{id} needs a language model (pass one for it)"
                    )));
                }
                _ => return Err(e.into()),
            },
        }
    }
    let model_ids: Vec<&str> = config
        .metrics
        .iter()
        .zip(&metrics)
        .filter(|(_, m)| m.is_none())
        .map(|(id, _)| id.as_str())
        .collect();
    let deferring = !model_ids.is_empty();
    let passes = if deferring { 2 } else { 1 };
    let has_sources = items
        .iter()
        .all(|i| i.src.as_deref().is_some_and(|s| !s.trim().is_empty()));
    let plans: Vec<Planned> = config
        .injections
        .iter()
        .map(|id| {
            let injection = inject::create(id)?;
            let info = injection.info();
            let skipped = if info.needs_masked_lm && masked_lm.is_none() {
                Some("needs a masked language model".to_owned())
            } else if info.needs_lm_tokenizer && lm_tokenizer.is_none() {
                Some("needs a language-model tokenizer".to_owned())
            } else if info.needs_source && !has_sources {
                Some("needs a source and the dataset has none for some items".to_owned())
            } else {
                None
            };
            Ok(Planned { injection, skipped })
        })
        .collect::<Result<_, InjectError>>()?;

    let empty = Sums {
        base: vec![0.0; metrics.len()],
        cells: plans
            .iter()
            .map(|p| {
                let levels = if p.skipped.is_some() {
                    0
                } else {
                    p.injection.info().default_levels.len()
                };
                vec![
                    vec![
                        Cell {
                            noise: 0.0,
                            applied: 0,
                            scores: vec![0.0; metrics.len()],
                        };
                        config.seeds as usize
                    ];
                    levels
                ]
            })
            .collect(),
    };
    let done = std::sync::atomic::AtomicUsize::new(0);
    let cancelled = std::sync::atomic::AtomicBool::new(false);
    let golds: Vec<&str> = items.iter().map(|i| i.gold.as_str()).collect();
    let run_item = |index: usize| -> Result<(Sums, Vec<Deferred>), SuiteError> {
        if cancelled.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(SuiteError::Cancelled);
        }
        let item = &items[index];
        let refs: Vec<&str> = item.refs.iter().map(String::as_str).collect();
        let score = |text: &str| -> Result<Vec<f64>, SuiteError> {
            let segment = Segment {
                hyp: text,
                refs: &refs,
                src: item.src.as_deref(),
            };
            metrics
                .iter()
                .map(|m| match m {
                    Some(m) => m
                        .sentence_score(&segment)
                        .map(|s| s.value)
                        .map_err(|e| SuiteError::Metric(format!("item {}: {e}", item.id))),
                    None => Ok(0.0), // filled in by the model pass
                })
                .collect()
        };
        let mut sums = empty.clone();
        let mut deferred: Vec<Deferred> = Vec::new();
        let base = score(&item.gold)?;
        sums.base.clone_from(&base);
        let samples: Vec<&str> = (1..=SAMPLE_POOL.min(items.len() - 1))
            .map(|k| golds[(index + k) % items.len()])
            .collect();
        let ctx = Context {
            source: item.src.as_deref(),
            samples: &samples,
            masked_lm: masked_lm.map(|m| m as &dyn MaskedLm),
            lm_tokenizer,
        };
        for (t, (plan, cells)) in plans.iter().zip(sums.cells.iter_mut()).enumerate() {
            if plan.skipped.is_some() {
                continue;
            }
            let levels = plan.injection.info().default_levels;
            for (l, (&level, seeds)) in levels.iter().zip(cells.iter_mut()).enumerate() {
                for (seed, cell) in seeds.iter_mut().enumerate() {
                    // Each item draws its own stream for each seed.
                    let stream = seed as u64 * 1_000_003 + index as u64;
                    let out = inject::apply(plan.injection, &item.gold, level, stream, &ctx)?;
                    let scores = if out.applied {
                        score(&out.text)?
                    } else {
                        base.clone()
                    };
                    if deferring {
                        deferred.push((t, l, seed, out.applied.then_some(out.text)));
                    }
                    cell.noise = out.noise_ratio;
                    cell.applied = usize::from(out.applied);
                    cell.scores = scores;
                }
            }
        }
        let finished = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if !progress(finished, passes * items.len()) {
            cancelled.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok((sums, deferred))
    };
    let per_item = map_items(items.len(), &run_item);
    let mut total = empty.clone();
    let mut deferred = Vec::with_capacity(if deferring { items.len() } else { 0 });
    for out in per_item {
        let (sums, texts) = out?;
        total.add(&sums);
        if deferring {
            deferred.push(texts);
        }
    }
    let mut model_signatures: Vec<String> = Vec::new();
    if let Some(scorer) = models.filter(|_| deferring) {
        let columns: Vec<usize> = (0..metrics.len())
            .filter(|&m| metrics[m].is_none())
            .collect();
        for (c, chunk) in deferred.chunks(MODEL_CHUNK).enumerate() {
            let first = c * MODEL_CHUNK;
            // One row per distinct text of each item: its gold text first.
            let mut rows = ModelRows {
                hyps: Vec::new(),
                refs: Vec::new(),
                srcs: Vec::new(),
            };
            let mut row_of: Vec<Vec<usize>> = Vec::with_capacity(chunk.len());
            for (k, texts) in chunk.iter().enumerate() {
                let item = &items[first + k];
                let mut seen = rustc_hash::FxHashMap::default();
                let base = rows.add(&mut seen, item, &item.gold);
                let own = texts
                    .iter()
                    .map(|(_, _, _, text)| {
                        text.as_deref()
                            .map_or(base, |t| rows.add(&mut seen, item, t))
                    })
                    .collect::<Vec<usize>>();
                row_of.push(std::iter::once(base).chain(own).collect());
            }
            let scored = scorer
                .score(&model_ids, &rows)
                .map_err(SuiteError::Metric)?;
            if scored.values.len() != model_ids.len()
                || scored.values.iter().any(|v| v.len() != rows.hyps.len())
            {
                return Err(SuiteError::Metric(
                    "the model scorer returned the wrong number of scores".into(),
                ));
            }
            for (k, texts) in chunk.iter().enumerate() {
                let rows = &row_of[k];
                for (column, values) in columns.iter().zip(&scored.values) {
                    total.base[*column] += values[rows[0]];
                    for ((t, l, s, _), &row) in texts.iter().zip(&rows[1..]) {
                        total.cells[*t][*l][*s].scores[*column] += values[row];
                    }
                }
            }
            model_signatures = scored.signatures;
            let finished = items.len() + (first + chunk.len());
            if !progress(finished, 2 * items.len()) {
                return Err(SuiteError::Cancelled);
            }
        }
    }

    let n = items.len() as f64;
    let base: Vec<f64> = total.base.iter().map(|s| s / n).collect();
    let tests = plans
        .iter()
        .zip(&total.cells)
        .map(|(plan, levels)| {
            let info = plan.injection.info();
            let levels: Vec<LevelResult> = info
                .default_levels
                .iter()
                .zip(levels)
                .map(|(&level, seeds)| {
                    let per_seed = |f: &dyn Fn(&Cell) -> f64| -> Vec<f64> {
                        seeds.iter().map(|c| f(c) / n).collect()
                    };
                    LevelResult {
                        level,
                        noise_ratio: Stat::of(&per_seed(&|c| c.noise)),
                        applied: seeds.iter().map(|c| c.applied).sum::<usize>() as f64
                            / (n * seeds.len() as f64),
                        scores: (0..metrics.len())
                            .map(|m| Stat::of(&per_seed(&|c| c.scores[m])))
                            .collect(),
                    }
                })
                .collect();
            let never_applied = plan.skipped.is_none() && levels.iter().all(|l| l.applied == 0.0);
            let skipped = if never_applied {
                Some("did not apply to any item (nothing it can change)".to_owned())
            } else {
                plan.skipped.clone()
            };
            let verdicts = if skipped.is_some() {
                Vec::new()
            } else {
                (0..metrics.len())
                    .map(|m| {
                        let means: Vec<f64> = levels.iter().map(|l| l.scores[m].mean).collect();
                        verdict(base[m], &means)
                    })
                    .collect()
            };
            TestResult {
                injection: info.id.to_owned(),
                family: info.family,
                levels,
                verdicts,
                skipped,
            }
        })
        .collect();
    let nrefs = items[0].refs.len();
    let uniform = items.iter().all(|i| i.refs.len() == nrefs);
    let signature = |m: &dyn Metric| {
        let sig = m.signature(Level::Sentence, nrefs);
        // sacrebleu writes `nrefs:var` when the count varies.
        if uniform {
            sig
        } else {
            sig.replace(&format!("nrefs:{nrefs}"), "nrefs:var")
        }
    };
    let mut model_entries = model_ids.iter().zip(model_signatures).map(|(id, sig)| {
        let name = metrics::model_metric(id).map_or(*id, |m| m.name);
        MetricEntry {
            id: (*id).to_owned(),
            name: name.to_owned(),
            signature: sig,
        }
    });
    Ok(SuiteReport {
        tool: format!("blindspot {}", env!("CARGO_PKG_VERSION")),
        dataset: dataset.to_owned(),
        items: items.len(),
        config: config.clone(),
        metrics: metrics
            .iter()
            .map(|m| match m {
                Some(m) => MetricEntry {
                    id: m.info().id.to_owned(),
                    name: m.info().name.to_owned(),
                    signature: signature(m.as_ref()),
                },
                None => model_entries.next().expect("one entry per model metric"),
            })
            .collect(),
        base,
        tests,
    })
}

/// Runs `f` on every index: in parallel natively, in order in the browser.
#[cfg(not(target_arch = "wasm32"))]
fn map_items<T: Send>(n: usize, f: &(dyn Fn(usize) -> T + Sync)) -> Vec<T> {
    use rayon::prelude::*;
    (0..n).into_par_iter().map(f).collect()
}

/// Runs `f` on every index: in parallel natively, in order in the browser.
#[cfg(target_arch = "wasm32")]
fn map_items<T>(n: usize, f: &dyn Fn(usize) -> T) -> Vec<T> {
    (0..n).map(f).collect()
}
