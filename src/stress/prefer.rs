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

use serde::{Deserialize, Serialize};

use super::suite::MetricEntry;
use crate::data::{Damage, Item, KeptError, MenliCase, read_kept};
use crate::inject::{self, Context, Family, InjectError};
use crate::metrics::{Column, Engine, EngineError, MetricSpec, Segment};

/// Passing cases out of all cases.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct Accuracy {
    /// Cases that passed.
    pub passed: usize,
    /// Cases scored.
    pub total: usize,
    /// passed / total (0 when there are no cases).
    pub accuracy: f64,
}

impl Accuracy {
    /// `passed` of `total`, with its share.
    fn of(passed: usize, total: usize) -> Self {
        let accuracy = if total == 0 {
            0.0
        } else {
            passed as f64 / total as f64
        };
        Self {
            passed,
            total,
            accuracy,
        }
    }

    fn add(&mut self, pass: bool) {
        *self = Self::of(self.passed + usize::from(pass), self.total + 1);
    }
}

/// One metric's accuracies.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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

impl PreferenceReport {
    /// Reads a report written as JSON (`blindspot prefer --out`, the page's
    /// download or its kept copy); a damaged one (an accuracy per error type
    /// missing, more passes than cases) is refused.
    pub fn from_json(json: &str) -> Result<Self, KeptError> {
        read_kept(json, "preference report", |r: &Self| {
            let types = r.error_types.len();
            for m in &r.metrics {
                let all = m.ref_based.iter().chain(&m.ref_free);
                let overall = [m.ref_based_overall, m.ref_free_overall];
                if m.ref_based.len() != types || m.ref_free.len() != types {
                    return Err(Damage(format!(
                        "{} has no accuracy for every error type",
                        m.metric.id
                    )));
                }
                let consistent =
                    |a: &Accuracy| a.passed <= a.total && *a == Accuracy::of(a.passed, a.total);
                if !all.chain(&overall).all(consistent) {
                    return Err(Damage(format!(
                        "{}'s accuracies do not match its passed and scored cases",
                        m.metric.id
                    )));
                }
            }
            Ok(())
        })
    }
}

/// Cases scored per engine call when no metric needs the whole set.
const CHUNK: usize = 64;

/// Runs the preference suite with any metrics, model-based ones included
/// (the engine's models). `progress(done, total)` after each batch of cases;
/// returning `false` stops early with the cases scored so far (cases go by
/// error type, in first-seen order). The texts that should win and those
/// with the error are scored apart: idf weights come from every case's
/// reference once, batch by batch. MENLI's min-max combination, which reads
/// the set's scores, scores one error type's both sides in one call, as
/// MENLI's released code; the other metrics score as they would without it.
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
    // twice) and each side's hypotheses apart; idf stays over every case
    // (over one error type's, as `adv_test.py`, a type with a single case
    // would have no idf). MENLI's min-max combination, which reads the set's
    // scores, normalises one error type's both texts together, as `combine`
    // does there, in one call per error type; the other metrics are scored
    // in the same steps as they would be without it.
    //
    // Cases go by error type (first-seen order), so that each type is a
    // contiguous run of the sides' lists.
    // Each case with its error type's index.
    let (type_of, by_type): (Vec<usize>, Vec<&MenliCase>) = error_types
        .iter()
        .enumerate()
        .flat_map(|(t, e)| {
            cases
                .iter()
                .filter(move |c| &c.error == e)
                .map(move |c| (t, c))
        })
        .unzip();
    let based: Vec<[&str; 3]> = by_type
        .iter()
        .map(|c| [&c.paraphrase, &c.adversarial_ref_based, &c.reference].map(String::as_str))
        .collect();
    let free: Vec<[&str; 3]> = by_type
        .iter()
        .map(|c| [&c.reference, &c.adversarial_ref_free, &c.source].map(String::as_str))
        .collect();
    // Per setting, per side (should win, with the error): one segment per case.
    let sides: Vec<[Vec<Segment>; 2]> = [&based, &free]
        .iter()
        .map(|setting| {
            [0, 1].map(|side| {
                by_type
                    .iter()
                    .zip(setting.iter())
                    .map(|(c, t)| Segment {
                        hyp: t[side],
                        refs: std::slice::from_ref(&t[2]),
                        src: Some(c.source.as_str()),
                    })
                    .collect()
            })
        })
        .collect();
    let split = Split::of(specs);
    let runs = runs_of(&by_type, &error_types, !split.set_specs.is_empty());
    let mut scored = 0;
    for rows in runs {
        let outcomes = split.score(engine, &sides, rows.clone()).await?;
        for (r, signature) in results.iter_mut().zip(&outcomes.signatures) {
            r.metric.signature.clone_from(signature);
        }
        tally(
            &mut results,
            specs,
            &outcomes.values,
            &type_of[rows.clone()],
        );
        scored += rows.len();
        if !progress(scored, cases.len()).await {
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

/// The specs that read the set's scores (MENLI's min-max combination) and
/// the others, each with their places among the specs.
struct Split {
    set_order: Vec<usize>,
    other_order: Vec<usize>,
    set_specs: Vec<MetricSpec>,
    other_specs: Vec<MetricSpec>,
    count: usize,
}

/// One step's scores: per setting (reference-based, reference-free) and
/// metric, `[should win, with the error]`; and each metric's signature.
struct StepScores {
    values: Vec<Vec<[Vec<f64>; 2]>>,
    signatures: Vec<String>,
}

impl Split {
    fn of(specs: &[MetricSpec]) -> Self {
        let (set_order, other_order): (Vec<usize>, Vec<usize>) =
            (0..specs.len()).partition(|&i| specs[i].reads_set_scores());
        let of = |order: &[usize]| -> Vec<MetricSpec> {
            order.iter().map(|&i| specs[i].clone()).collect()
        };
        Split {
            set_specs: of(&set_order),
            other_specs: of(&other_order),
            set_order,
            other_order,
            count: specs.len(),
        }
    }

    /// Scores the cases `rows` of both settings' sides: the metrics that
    /// read the set's scores on both sides in one call, the others each side
    /// within its whole side.
    async fn score(
        &self,
        engine: &Engine,
        sides: &[[Vec<Segment<'_>>; 2]],
        rows: std::ops::Range<usize>,
    ) -> Result<StepScores, EngineError> {
        let mut values = Vec::with_capacity(sides.len());
        let mut signatures = Vec::new();
        for (k, [wins, errs]) in sides.iter().enumerate() {
            let mut columns: Vec<Option<(Column, [Vec<f64>; 2])>> =
                (0..self.count).map(|_| None).collect();
            if !self.other_specs.is_empty() {
                let w = engine
                    .score_within(&self.other_specs, &wins[rows.clone()], wins)
                    .await?;
                let a = engine
                    .score_within(&self.other_specs, &errs[rows.clone()], errs)
                    .await?;
                for ((&i, w), a) in self.other_order.iter().zip(w).zip(&a) {
                    let v = [w.values(), a.values()];
                    columns[i] = Some((w, v));
                }
            }
            if !self.set_specs.is_empty() {
                let both: Vec<Segment> = wins[rows.clone()]
                    .iter()
                    .chain(&errs[rows.clone()])
                    .copied()
                    .collect();
                let all = engine.score(&self.set_specs, &both).await?;
                for (&i, c) in self.set_order.iter().zip(all) {
                    let v = c.values();
                    let v = [v[..rows.len()].to_vec(), v[rows.len()..].to_vec()];
                    columns[i] = Some((c, v));
                }
            }
            let columns: Vec<(Column, [Vec<f64>; 2])> = columns.into_iter().flatten().collect();
            if k == 0 {
                signatures = columns
                    .iter()
                    .map(|(c, _)| c.signature.to_string())
                    .collect();
            }
            values.push(columns.into_iter().map(|(_, v)| v).collect());
        }
        Ok(StepScores { values, signatures })
    }
}

/// The runs of cases scored per step: one error type each where a metric
/// reads the set's scores, else batches of [`CHUNK`].
fn runs_of(
    by_type: &[&MenliCase],
    error_types: &[String],
    per_type: bool,
) -> Vec<std::ops::Range<usize>> {
    if !per_type {
        return (0..by_type.len())
            .step_by(CHUNK)
            .map(|s| s..(s + CHUNK).min(by_type.len()))
            .collect();
    }
    let mut runs = Vec::with_capacity(error_types.len());
    let mut start = 0;
    for e in error_types {
        let n = by_type[start..]
            .iter()
            .take_while(|c| &c.error == e)
            .count();
        runs.push(start..start + n);
        start += n;
    }
    runs
}

/// Counts each case of a step as passed or not, per metric and setting:
/// "prefers" in the metric's own direction (lower TER is better).
fn tally(
    results: &mut [MetricPreference],
    specs: &[MetricSpec],
    outcomes: &[Vec<[Vec<f64>; 2]>],
    types: &[usize],
) {
    for (m, r) in results.iter_mut().enumerate() {
        let [bw, ba] = &outcomes[0][m];
        let [fw, fa] = &outcomes[1][m];
        let info = specs[m].info();
        let prefers = |a: f64, b: f64| info.oriented(a) > info.oriented(b);
        for (i, &e) in types.iter().enumerate() {
            let based = prefers(bw[i], ba[i]);
            r.ref_based[e].add(based);
            r.ref_based_overall.add(based);
            let free = prefers(fw[i], fa[i]);
            r.ref_free[e].add(free);
            r.ref_free_overall.add(free);
        }
    }
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
