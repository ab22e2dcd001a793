//! Stress tests ([BS] §2, SPEC 1.1): apply an injection at each level to a
//! gold hypothesis, score every level, and judge each metric by the rank
//! rule. This module holds the verdict and the single-pair sweep the
//! playground shows; [`suite`] runs whole datasets.

pub mod attack;
pub mod audit;
pub mod html;
pub mod lessons;
pub mod prefer;
pub mod self_eval;
pub mod suite;

use serde::{Deserialize, Deserializer, Serialize};

use crate::inject::{self, Context, InjectError, Injection, InjectionInfo};
use crate::metrics::{Metric, MetricError, MetricInfo, Segment};

/// The rank-rule outcome for one metric and one injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every level scores below the base, and scores fall as the level rises.
    Pass,
    /// Some level's mean score is not lower than the base score.
    Fail,
    /// Below the base throughout, but a higher level scores higher than a lower one.
    NonMonotone,
}

impl Verdict {
    /// Every verdict.
    pub const ALL: [Verdict; 3] = [Verdict::Pass, Verdict::Fail, Verdict::NonMonotone];

    /// What the verdict shows: its id (as serialised), a short label, a mark
    /// for tables and what it means.
    pub fn info(self) -> VerdictInfo {
        let (label, mark, description) = match self {
            Verdict::Pass => (
                "pass",
                "✓ pass",
                "every level scores below the original, and more noise scores lower \
                 (each by more than 1e-5)",
            ),
            Verdict::Fail => (
                "fail",
                "✗ fail",
                "some level does not score below the original by more than 1e-5",
            ),
            Verdict::NonMonotone => (
                "non-monotone",
                "↯ non-monotone",
                "more noise sometimes scores higher (or within 1e-5 of less noise); \
                 variants (positions, prompt strings) are not held to an order",
            ),
        };
        VerdictInfo {
            id: self,
            label,
            mark,
            description,
        }
    }
}

/// How a verdict is shown (the page reads these instead of keeping its own).
#[derive(Debug, Clone, Serialize)]
pub struct VerdictInfo {
    /// The verdict (`pass`, `fail`, `non_monotone`).
    pub id: Verdict,
    /// Short label.
    pub label: &'static str,
    /// Label with a symbol, for tables.
    pub mark: &'static str,
    /// What it means.
    pub description: &'static str,
}

/// How much each score must exceed the next: the released code's
/// `check_rank` passes base, level 1, level 2, ... only when each drop is
/// larger than this, so ties and near-ties fail.
pub const RANK_MARGIN: f64 = 1e-5;

/// Judges level means (ordered by increasing level) against the base score,
/// scores being higher-is-better, with the released code's strict rank rule
/// ([`RANK_MARGIN`]): `Fail` when some level does not fall below the base by
/// more than the margin, `NonMonotone` when all do but some level does not
/// fall below the previous one by more than the margin. Only `graded`
/// levels (amounts of one noise) must fall in order: variants (an error's
/// position, prompt strings) and the frequent n-grams' k need only each
/// fall below the base ([`graded`]). A NaN score fails.
pub fn verdict(base: f64, level_means: &[f64], graded: bool) -> Verdict {
    // `!(a > b)`, not `a <= b`: a NaN difference is no drop.
    let drops = |from: f64, to: f64| from - to > RANK_MARGIN;
    if level_means.iter().any(|&m| !drops(base, m)) {
        Verdict::Fail
    } else if graded && level_means.windows(2).any(|w| !drops(w[0], w[1])) {
        Verdict::NonMonotone
    } else {
        Verdict::Pass
    }
}

/// [`verdict`] over the levels that changed some text: `(mean, applied)`
/// per level, where `applied` is how often the injection changed a text (a
/// count or a share). A level that changed nothing (a text too short for
/// it) says nothing about the metric, so it is left out rather than judged a
/// tie with the base. Scores are oriented first ([`MetricInfo::oriented`]):
/// for a metric where lower is better (TER), noise must raise the score.
pub fn verdict_of_applied(
    metric: &MetricInfo,
    base: f64,
    levels: impl IntoIterator<Item = (f64, f64)>,
    graded: bool,
) -> Verdict {
    let means: Vec<f64> = levels
        .into_iter()
        .filter(|&(_, applied)| applied > 0.0)
        .map(|(mean, _)| metric.oriented(mean))
        .collect();
    verdict(metric.oriented(base), &means, graded)
}

/// The registry's information on a metric a report names, or a
/// higher-is-better stand-in for an id this version does not know (an older
/// report's).
pub fn metric_info(id: &str) -> std::borrow::Cow<'static, MetricInfo> {
    match id.parse::<crate::metrics::MetricId>() {
        Ok(id) => std::borrow::Cow::Borrowed(id.info()),
        Err(_) => std::borrow::Cow::Owned(MetricInfo {
            higher_is_better: true,
            ..crate::metrics::MetricId::ALL[0].info().clone()
        }),
    }
}

/// Whether `info`'s levels are amounts of one noise, which the rank rule
/// wants falling in order ([`verdict`], [`InjectionInfo::graded`]).
pub fn graded(info: &InjectionInfo) -> bool {
    info.graded
}

/// One level of a sweep: means over seeds.
#[derive(Debug, Clone, Serialize)]
pub struct SweepLevel {
    /// The injection level.
    pub level: f64,
    /// Mean noise ratio over the seeds.
    pub noise_ratio: f64,
    /// Seeds where the injection applied (the rest kept the text unchanged).
    pub applied: usize,
    /// Mean score per metric, in the order of [`Sweep::metrics`].
    pub scores: Vec<f64>,
}

/// A whole sweep of one injection over its default levels.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    /// Injection id.
    pub injection: &'static str,
    /// Metric ids, in order.
    pub metrics: Vec<&'static str>,
    /// Score of the unperturbed hypothesis per metric.
    pub base: Vec<f64>,
    /// One entry per default level, increasing.
    pub levels: Vec<SweepLevel>,
    /// Rank-rule verdict per metric, over the levels that applied.
    pub verdicts: Vec<Verdict>,
    /// Seeds used at each level.
    pub seeds: u64,
}

/// Errors of a sweep.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The injection cannot run (bad context).
    #[error(transparent)]
    Inject(#[from] InjectError),
    /// A metric cannot score (no reference...).
    #[error(transparent)]
    Metric(#[from] MetricError),
    /// The injection changed nothing at any level.
    #[error("{0} did not apply at any level: {1}")]
    NeverApplied(&'static str, String),
}

/// Applies `injection` at each default level with seeds `0..seeds` to `hyp`
/// and scores every result against `refs` with each metric. A masked LM in
/// `ctx` is awaited (so a WebGPU model works), all levels and seeds at once;
/// `between` has a turn after each batch of its queries, and a `false` there
/// stops the sweep ([`InjectError::Stopped`]).
pub async fn sweep(
    injection: &dyn Injection,
    hyp: &str,
    refs: &[&str],
    ctx: &Context<'_>,
    metrics: &[Box<dyn Metric>],
    seeds: u64,
    between: impl AsyncFn() -> bool,
) -> Result<Sweep, SweepError> {
    let info = injection.info();
    let score = |text: &str| -> Result<Vec<f64>, MetricError> {
        let seg = Segment {
            hyp: text,
            refs,
            src: ctx.source,
        };
        metrics
            .iter()
            .map(|m| m.sentence_score(&seg).map(|s| s.value))
            .collect()
    };
    let base = score(hyp)?;
    let jobs: Vec<inject::Job> = info
        .default_levels
        .iter()
        .flat_map(|&level| {
            (0..seeds).map(move |seed| inject::Job {
                text: hyp,
                level,
                seed,
                ctx: *ctx,
            })
        })
        .collect();
    let mut injected = inject::apply_many(injection, &jobs, between)
        .await?
        .into_iter();
    let mut levels = Vec::new();
    let mut last_reason = String::new();
    for &level in info.default_levels {
        let mut sums = vec![0.0; metrics.len()];
        let (mut noise, mut applied) = (0.0, 0);
        for _ in 0..seeds {
            let out = injected.next().expect("one per level and seed");
            if let Some(reason) = &out.reason {
                last_reason.clone_from(reason);
            }
            applied += usize::from(out.applied);
            noise += out.noise_ratio;
            for (sum, v) in sums.iter_mut().zip(score(&out.text)?) {
                *sum += v;
            }
        }
        let n = seeds as f64;
        levels.push(SweepLevel {
            level,
            noise_ratio: noise / n,
            applied,
            scores: sums.iter().map(|s| s / n).collect(),
        });
    }
    if levels.iter().all(|l| l.applied == 0) {
        return Err(SweepError::NeverApplied(info.id, last_reason));
    }
    let verdicts = (0..metrics.len())
        .map(|m| {
            let means = levels.iter().map(|l| (l.scores[m], l.applied as f64));
            verdict_of_applied(metrics[m].info(), base[m], means, graded(info))
        })
        .collect();
    Ok(Sweep {
        injection: info.id,
        metrics: metrics.iter().map(|m| m.info().id).collect(),
        base,
        levels,
        verdicts,
        seeds,
    })
}

/// Reads back an `f64` that JSON wrote as `null`: serde_json and the page
/// write NaN (an undefined correlation) so.
pub(crate) fn nan_from_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// [`nan_from_null`] for every value of a list.
pub(crate) fn nans_from_nulls<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let values = Vec::<Option<f64>>::deserialize(d)?;
    Ok(values.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::create;

    #[test]
    fn rank_rule() {
        assert_eq!(verdict(50.0, &[40.0, 30.0, 20.0], true), Verdict::Pass);
        assert_eq!(verdict(50.0, &[40.0, 50.0], true), Verdict::Fail);
        assert_eq!(verdict(50.0, &[30.0, 40.0], true), Verdict::NonMonotone);
        assert_eq!(verdict(50.0, &[], true), Verdict::Pass);
        // Ties and drops within the margin fail, as check_rank's `> 1e-5`.
        assert_eq!(
            verdict(50.0, &[40.0, 30.0, 30.0], true),
            Verdict::NonMonotone
        );
        assert_eq!(verdict(0.5, &[0.499_995], true), Verdict::Fail);
        assert_eq!(
            verdict(0.5, &[0.499_98, 0.499_975], true),
            Verdict::NonMonotone
        );
        assert_eq!(verdict(0.5, &[0.499_98, 0.499_96], true), Verdict::Pass);
        // Variants (positions, prompt strings) need only fall below the base.
        let prompts = [0.2, 0.3, 0.1, 0.25, 0.15];
        assert_eq!(verdict(0.5, &prompts, true), Verdict::NonMonotone);
        assert_eq!(verdict(0.5, &prompts, false), Verdict::Pass);
        assert_eq!(verdict(0.5, &[0.2, 0.5], false), Verdict::Fail);
        // A NaN score is no drop.
        assert_eq!(verdict(0.5, &[f64::NAN], true), Verdict::Fail);
        assert_eq!(verdict(f64::NAN, &[0.1], false), Verdict::Fail);
        assert_eq!(verdict(0.5, &[0.4, f64::NAN], true), Verdict::Fail);
        let id = |i: &str| inject::create(i).unwrap().info();
        assert!(!graded(id("prompt_injection")) && !graded(id("positioned_shuffle")));
        // k is how many n-grams the text samples from, not an amount of noise.
        assert!(!graded(id("frequent_3gram")) && !graded(id("frequent_4gram")));
        assert!(graded(id("truncation")) && graded(id("repetition")));
    }

    #[test]
    fn truncation_sweep_lowers_rouge_recall_based_scores() {
        let metrics: Vec<_> = ["bleu", "rougeL"]
            .iter()
            .map(|id| create(id, false).unwrap())
            .collect();
        let text = "The council said on Monday that the new bridge over the river will open in the spring of next year.";
        let s = futures::executor::block_on(sweep(
            inject::create("truncation").unwrap(),
            text,
            &[text],
            &Context::default(),
            &metrics,
            5,
            async || true,
        ))
        .unwrap();
        assert_eq!(s.levels.len(), 5);
        assert_eq!(s.verdicts, [Verdict::Pass, Verdict::Pass]);
        assert!(
            s.levels
                .windows(2)
                .all(|w| w[1].noise_ratio > w[0].noise_ratio)
        );
    }

    #[test]
    fn a_masked_lm_sweep_stops_when_asked() {
        let metrics = vec![create("chrf", false).unwrap()];
        let text = "one two three four five six seven eight nine ten";
        let ctx = Context {
            masked_lm: Some(&crate::inject::masked_lm::TwoWords),
            ..Context::default()
        };
        let bert_diverge = inject::create("bert_diverge").unwrap();
        let run = |turns: usize| {
            let left = std::cell::Cell::new(turns);
            futures::executor::block_on(sweep(
                bert_diverge,
                text,
                &[text],
                &ctx,
                &metrics,
                2,
                async || {
                    left.set(left.get().saturating_sub(1));
                    left.get() > 0
                },
            ))
        };
        // 4 levels x 2 seeds, at most 4 of 10 words each: 4 batches.
        assert_eq!(run(usize::MAX).unwrap().levels.len(), 4);
        assert!(matches!(
            run(2),
            Err(SweepError::Inject(InjectError::Stopped))
        ));
    }

    #[test]
    fn a_level_too_small_for_the_text_is_left_out_of_the_verdict() {
        let metrics: Vec<_> = ["bleu", "rougeL"]
            .iter()
            .map(|id| create(id, false).unwrap())
            .collect();
        // 9 words: truncation at 0.1 drops floor(0.9) = 0 of them.
        let text = "The council said on Monday that the bridge opens.";
        let truncation = inject::create("truncation").unwrap();
        let s = futures::executor::block_on(sweep(
            truncation,
            text,
            &[text],
            &Context::default(),
            &metrics,
            5,
            async || true,
        ))
        .unwrap();
        assert_eq!(s.levels[0].applied, 0);
        assert_eq!(s.levels[0].scores, s.base);
        assert!(s.levels[1..].iter().all(|l| l.applied == 5));
        assert_eq!(s.verdicts, [Verdict::Pass, Verdict::Pass]);
    }
}
