//! The preference suite ([MENLI] §3, SPEC 1.2).
//!
//! Reference-based: a case passes when m(ref, paraphrase) > m(ref,
//! adversarial), the adversarial text being the reference with one key error.
//! Reference-free: passes when m(src, ref) > m(src, adversarial), the source
//! standing where the reference would. Strict inequality: ties fail.
//! Accuracy is the share of passing cases, per error type and overall.
//!
//! [`build_cases`] makes such a suite from any dataset with two human texts
//! per item (a gold hypothesis and a reference): the gold text is the
//! paraphrase, and our MENLI attacks applied to the reference give the
//! adversarial texts.

use serde::Serialize;

use super::suite::MetricEntry;
use crate::data::{Item, MenliCase};
use crate::inject::{self, Context, Family, InjectError};
use crate::metrics::{self, Level, Metric, MetricOptions, Segment};

/// Passing cases out of all cases.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct Accuracy {
    /// Cases that passed.
    pub passed: usize,
    /// Cases scored.
    pub total: usize,
    /// passed / total (0 when there are no cases).
    pub accuracy: f64,
}

impl Accuracy {
    fn add(&mut self, pass: bool) {
        self.passed += usize::from(pass);
        self.total += 1;
        self.accuracy = self.passed as f64 / self.total as f64;
    }
}

/// One metric's accuracies.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricPreference {
    /// The metric.
    pub metric: MetricEntry,
    /// Per error type (order of [`PreferenceReport::error_types`]), reference-based.
    pub ref_based: Vec<Accuracy>,
    /// Overall, reference-based.
    pub ref_based_overall: Accuracy,
    /// Per error type, reference-free (source in the reference's place).
    pub ref_free: Vec<Accuracy>,
    /// Overall, reference-free.
    pub ref_free_overall: Accuracy,
}

/// The preference suite's results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PreferenceReport {
    /// `blindspot X.Y.Z`.
    pub tool: String,
    /// Dataset name.
    pub dataset: String,
    /// Cases scored.
    pub cases: usize,
    /// Error types in first-seen order.
    pub error_types: Vec<String>,
    /// One entry per metric.
    pub metrics: Vec<MetricPreference>,
}

/// Runs the preference suite. `progress(done, total)` after each case;
/// returning `false` stops early with the cases scored so far.
pub fn run_preference(
    dataset: &str,
    cases: &[MenliCase],
    metric_ids: &[String],
    options: MetricOptions,
    progress: &dyn Fn(usize, usize) -> bool,
) -> Result<PreferenceReport, metrics::MetricError> {
    let metrics: Vec<Box<dyn Metric>> = metric_ids
        .iter()
        .map(|id| metrics::create(id, options))
        .collect::<Result<_, _>>()?;
    let mut error_types: Vec<String> = Vec::new();
    for c in cases {
        if !error_types.contains(&c.error) {
            error_types.push(c.error.clone());
        }
    }
    let mut results: Vec<MetricPreference> = metrics
        .iter()
        .map(|m| MetricPreference {
            metric: MetricEntry {
                id: m.info().id.to_owned(),
                name: m.info().name.to_owned(),
                signature: m.signature(Level::Sentence, 1),
            },
            ref_based: vec![Accuracy::default(); error_types.len()],
            ref_based_overall: Accuracy::default(),
            ref_free: vec![Accuracy::default(); error_types.len()],
            ref_free_overall: Accuracy::default(),
        })
        .collect();
    let mut scored = 0;
    for (i, c) in cases.iter().enumerate() {
        let e = error_types
            .iter()
            .position(|t| *t == c.error)
            .expect("collected above");
        for (m, r) in metrics.iter().zip(results.iter_mut()) {
            let score = |hyp: &str, against: &str| -> Result<f64, metrics::MetricError> {
                let refs = [against];
                m.sentence_score(&Segment {
                    hyp,
                    refs: &refs,
                    src: Some(&c.source),
                })
                .map(|s| s.value)
            };
            let based = score(&c.paraphrase, &c.reference)?
                > score(&c.adversarial_ref_based, &c.reference)?;
            r.ref_based[e].add(based);
            r.ref_based_overall.add(based);
            let free = score(&c.reference, &c.source)? > score(&c.adversarial_ref_free, &c.source)?;
            r.ref_free[e].add(free);
            r.ref_free_overall.add(free);
        }
        scored += 1;
        if !progress(i + 1, cases.len()) {
            break;
        }
    }
    Ok(PreferenceReport {
        tool: format!("blindspot {}", env!("CARGO_PKG_VERSION")),
        dataset: dataset.to_owned(),
        cases: scored,
        error_types,
        metrics: results,
    })
}

/// The MENLI attacks [`build_cases`] uses by default: every MENLI-family
/// injection except the number-to-words paraphrase (which keeps the
/// meaning), plus `negation` (MENLI's `neg`, registered with consistency).
pub fn default_attacks() -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = inject::registry()
        .into_iter()
        .map(|i| i.info())
        .filter(|i| i.family == Family::Menli && i.id != "number_to_words")
        .map(|i| i.id)
        .collect();
    ids.push("negation");
    ids
}

/// Preference cases from a dataset: per item and attack, reference =
/// the item's first reference, paraphrase = its gold hypothesis, adversarial
/// = the attack applied to the reference (first default level, `seed`), for
/// both settings. Items where an attack cannot apply give no case for it.
pub fn build_cases(
    items: &[Item],
    attacks: &[&str],
    seed: u64,
) -> Result<Vec<MenliCase>, InjectError> {
    let injections = attacks
        .iter()
        .map(|id| inject::create(id))
        .collect::<Result<Vec<_>, _>>()?;
    let mut cases = Vec::new();
    for item in items {
        let (Some(reference), Some(source)) = (item.refs.first(), item.src.as_deref()) else {
            continue;
        };
        let ctx = Context {
            source: Some(source),
            ..Context::default()
        };
        for injection in &injections {
            let info = injection.info();
            let out = inject::apply(*injection, reference, info.default_levels[0], seed, &ctx)?;
            if out.applied {
                cases.push(MenliCase {
                    error: info.id.to_owned(),
                    id: item.id.clone(),
                    source: source.to_owned(),
                    reference: reference.clone(),
                    paraphrase: item.gold.clone(),
                    adversarial_ref_based: out.text.clone(),
                    adversarial_ref_free: out.text,
                });
            }
        }
    }
    Ok(cases)
}
