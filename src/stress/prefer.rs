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
//! paraphrase (the number tests' is the reference with its numbers spelled
//! out, as MENLI's), and our MENLI attacks applied to the reference give the
//! adversarial texts.

use serde::Serialize;

use super::suite::MetricEntry;
use crate::data::{Item, MenliCase};
use crate::inject::{self, Context, Family, InjectError};
use crate::metrics::{Column, Engine, EngineError, MetricSpec, Segment};

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

/// Cases scored per engine call when no metric needs the whole set.
const CHUNK: usize = 64;

/// Runs the preference suite with any metrics, model-based ones included
/// (the engine's models). `progress(done, total)` after each batch of cases;
/// returning `false` stops early with the cases scored so far. The texts
/// that should win and those with the error are scored apart: idf weights
/// come from every case's reference once, batch by batch. MENLI's min-max
/// combination, which reads the set's scores, scores one error type's both
/// sides in one call, as MENLI's released code.
pub async fn run_preference(
    dataset: &str,
    cases: &[MenliCase],
    specs: &[MetricSpec],
    engine: &Engine,
    progress: impl AsyncFn(usize, usize) -> bool,
) -> Result<PreferenceReport, EngineError> {
    let mut error_types: Vec<String> = Vec::new();
    for c in cases {
        if !error_types.contains(&c.error) {
            error_types.push(c.error.clone());
        }
    }
    let mut results: Vec<MetricPreference> = specs
        .iter()
        .map(|spec| MetricPreference {
            metric: MetricEntry {
                id: spec.id().to_string(),
                name: spec.info().name.to_owned(),
                signature: String::new(),
            },
            ref_based: vec![Accuracy::default(); error_types.len()],
            ref_based_overall: Accuracy::default(),
            ref_free: vec![Accuracy::default(); error_types.len()],
            ref_free_overall: Accuracy::default(),
        })
        .collect();
    // Each setting's two texts (the one that should score higher, the one
    // with the error) are scored in calls of their own, as MENLI's released
    // `adv_test.py` does, so that idf sees each case's reference once (not
    // twice) and each side's hypotheses apart. MENLI's min-max combination,
    // which reads the set's scores, normalises one error type's both texts
    // together, as `combine` does there: then each error type is one call.
    // (idf stays over every case: over one error type's, as `adv_test.py`,
    // a type with a single case would have no idf.)
    let whole = specs.iter().any(MetricSpec::reads_set_scores);
    let groups: Vec<Vec<&MenliCase>> = if whole {
        error_types
            .iter()
            .map(|e| cases.iter().filter(|c| &c.error == e).collect())
            .collect()
    } else {
        vec![cases.iter().collect()]
    };
    let mut scored = 0;
    'groups: for group in &groups {
        // Per setting: [should win, with the error, compared with].
        let based: Vec<[&str; 3]> = group
            .iter()
            .map(|c| [&c.paraphrase, &c.adversarial_ref_based, &c.reference].map(String::as_str))
            .collect();
        let free: Vec<[&str; 3]> = group
            .iter()
            .map(|c| [&c.reference, &c.adversarial_ref_free, &c.source].map(String::as_str))
            .collect();
        // Per setting, both sides in one list: the texts that should win,
        // then those with the error.
        let settings: Vec<Vec<Segment>> = [&based, &free]
            .iter()
            .map(|setting| {
                (0..2)
                    .flat_map(|side| {
                        group.iter().zip(setting.iter()).map(move |(c, t)| Segment {
                            hyp: t[side],
                            refs: std::slice::from_ref(&t[2]),
                            src: Some(c.source.as_str()),
                        })
                    })
                    .collect()
            })
            .collect();
        let n = group.len();
        let chunk = if whole { n.max(1) } else { CHUNK };
        for start in (0..n).step_by(chunk) {
            let rows = start..(start + chunk).min(n);
            // Per setting and metric: the batch's [should win, with the error] scores.
            let mut outcomes: Vec<Vec<[Vec<f64>; 2]>> = Vec::with_capacity(2);
            for (k, set) in settings.iter().enumerate() {
                let (wins, errs) = set.split_at(n);
                let (first, columns): (Vec<Column>, Vec<[Vec<f64>; 2]>) = if whole {
                    let all = engine.score(specs, set).await?;
                    let split = all
                        .iter()
                        .map(|c| {
                            let v = c.values();
                            [v[..n].to_vec(), v[n..].to_vec()]
                        })
                        .collect();
                    (all, split)
                } else {
                    let w = engine
                        .score_within(specs, &wins[rows.clone()], wins)
                        .await?;
                    let a = engine
                        .score_within(specs, &errs[rows.clone()], errs)
                        .await?;
                    let both = w
                        .iter()
                        .zip(&a)
                        .map(|(w, a)| [w.values(), a.values()])
                        .collect();
                    (w, both)
                };
                if k == 0 {
                    for (r, c) in results.iter_mut().zip(&first) {
                        r.metric.signature = c.signature.to_string();
                    }
                }
                outcomes.push(columns);
            }
            for (m, r) in results.iter_mut().enumerate() {
                let [bw, ba] = &outcomes[0][m];
                let [fw, fa] = &outcomes[1][m];
                for (i, c) in group[rows.clone()].iter().enumerate() {
                    let e = error_types
                        .iter()
                        .position(|t| *t == c.error)
                        .expect("collected above");
                    let based = bw[i] > ba[i];
                    r.ref_based[e].add(based);
                    r.ref_based_overall.add(based);
                    let free = fw[i] > fa[i];
                    r.ref_free[e].add(free);
                    r.ref_free_overall.add(free);
                }
            }
            scored += rows.len();
            if !progress(scored, cases.len()).await {
                break 'groups;
            }
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
/// the item's first reference, paraphrase = its gold hypothesis (for
/// `number_error`, as MENLI: the reference with its numbers spelled out), adversarial
/// = the attack applied to the reference (first default level, `seed`;
/// negation at p = 1), for both settings. Items where an attack cannot apply give no case for it.
pub fn build_cases(
    items: &[Item],
    attacks: &[&str],
    seed: u64,
) -> Result<Vec<MenliCase>, InjectError> {
    let injections = attacks
        .iter()
        .map(|id| inject::create(id))
        .collect::<Result<Vec<_>, _>>()?;
    let number_to_words = inject::create("number_to_words")?;
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
            // Negation's first level (p = 0.5) would leave half of the
            // one-sentence references unchanged and give them no case: MENLI
            // negates each reference, so every sentence is negated here.
            let level = if info.id == "negation" {
                1.0
            } else {
                info.default_levels[0]
            };
            let out = inject::apply(*injection, reference, level, seed, &ctx)?;
            if !out.applied {
                continue;
            }
            // MENLI's number tests pair the error with the reference's numbers
            // spelled out as words (SPEC 2.4), not with the other human text.
            let paraphrase = if info.id == "number_error" {
                let words = inject::apply(number_to_words, reference, 1.0, seed, &ctx)?;
                if !words.applied {
                    continue;
                }
                words.text
            } else {
                item.gold.clone()
            };
            cases.push(MenliCase {
                error: info.id.to_owned(),
                id: item.id.clone(),
                source: source.to_owned(),
                reference: reference.clone(),
                paraphrase,
                adversarial_ref_based: out.text.clone(),
                adversarial_ref_free: out.text,
            });
        }
    }
    Ok(cases)
}
