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

use serde::{Deserialize, Serialize};

use super::{Verdict, verdict};
use crate::data::Item;
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

/// Runs the suite over `items`. `progress(done, total)` is called as items
/// finish (from worker threads natively); returning `false` cancels.
pub fn run_suite(
    dataset: &str,
    items: &[Item],
    config: &SuiteConfig,
    lm_tokenizer: Option<&LmTokenizer>,
    progress: Progress,
) -> Result<SuiteReport, SuiteError> {
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
    let metrics: Vec<Box<dyn Metric>> = config
        .metrics
        .iter()
        .map(|id| metrics::create(id, options))
        .collect::<Result<_, _>>()?;
    let has_sources = items
        .iter()
        .all(|i| i.src.as_deref().is_some_and(|s| !s.trim().is_empty()));
    let plans: Vec<Planned> = config
        .injections
        .iter()
        .map(|id| {
            let injection = inject::create(id)?;
            let info = injection.info();
            let skipped = if info.needs_masked_lm {
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
    let run_item = |index: usize| -> Result<Sums, SuiteError> {
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
                .map(|m| {
                    m.sentence_score(&segment)
                        .map(|s| s.value)
                        .map_err(|e| SuiteError::Metric(format!("item {}: {e}", item.id)))
                })
                .collect()
        };
        let mut sums = empty.clone();
        let base = score(&item.gold)?;
        sums.base.clone_from(&base);
        let samples: Vec<&str> = (1..=SAMPLE_POOL.min(items.len() - 1))
            .map(|k| golds[(index + k) % items.len()])
            .collect();
        let ctx = Context {
            source: item.src.as_deref(),
            samples: &samples,
            masked_lm: None,
            lm_tokenizer,
        };
        for (plan, cells) in plans.iter().zip(sums.cells.iter_mut()) {
            if plan.skipped.is_some() {
                continue;
            }
            let levels = plan.injection.info().default_levels;
            for (&level, seeds) in levels.iter().zip(cells.iter_mut()) {
                for (seed, cell) in seeds.iter_mut().enumerate() {
                    // Each item draws its own stream for each seed.
                    let stream = seed as u64 * 1_000_003 + index as u64;
                    let out = inject::apply(plan.injection, &item.gold, level, stream, &ctx)?;
                    let scores = if out.applied {
                        score(&out.text)?
                    } else {
                        base.clone()
                    };
                    cell.noise = out.noise_ratio;
                    cell.applied = usize::from(out.applied);
                    cell.scores = scores;
                }
            }
        }
        let finished = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if !progress(finished, items.len()) {
            cancelled.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(sums)
    };
    let per_item = map_items(items.len(), &run_item);
    let mut total = empty.clone();
    for sums in per_item {
        total.add(&sums?);
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
    Ok(SuiteReport {
        tool: format!("blindspot {}", env!("CARGO_PKG_VERSION")),
        dataset: dataset.to_owned(),
        items: items.len(),
        config: config.clone(),
        metrics: metrics
            .iter()
            .map(|m| MetricEntry {
                id: m.info().id.to_owned(),
                name: m.info().name.to_owned(),
                signature: signature(m.as_ref()),
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
