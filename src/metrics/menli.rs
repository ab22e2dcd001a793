//! MENLI (Chen & Eger 2023): an NLI model's entailment, neutral and
//! contradiction probabilities turned into a score.
//!
//! - Formulas: `e`, `-c`, `e-n`, `e-c`, `e-n-2c`.
//! - Directions: reference as premise (`ref-hyp`), hypothesis as premise
//!   (`hyp-ref`), or `both` (the two probability triples averaged, then the
//!   formula applied); reference-free: the source as premise.
//! - Task defaults (the paper's): MT `e` with both directions; reference-based
//!   summarisation `e-c` with the hypothesis as premise; reference-free
//!   summarisation `-c` with the source as premise.
//! - Combination with another metric M: `w*N + (1-w)*M`, both min-max
//!   rescaled over the scored set (MT w = 0.2, summarisation w = 0.8).
//!
//! Label order differs between checkpoints, so it is read from `id2label`.
//! Several references: the best-scoring reference counts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Detail, Engine, EngineError, model_error, part_of};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule, each_alone};
use super::spec::{SpecError, named_enum};
use super::{
    CorpusAggregation, MetricId, MetricSpec, ModelKind, ModelSlot, Scale, Score, Segment, Signature,
};

use crate::models::{ModelError, PassLimit, Plm, read_back};

/// Pairs per model pass.
pub const BATCH: usize = 16;

/// How the three probabilities become one number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Formula {
    /// `e`.
    E,
    /// `-c`.
    NegC,
    /// `e - n`.
    EMinusN,
    /// `e - c`.
    EMinusC,
    /// `e - n - 2c`.
    EMinusNMinus2C,
}

named_enum!(
    Formula,
    "MENLI formula",
    [
        (E, "e", "e: entailment"),
        (NegC, "-c", "-c: minus contradiction"),
        (EMinusN, "e-n", "e-n: entailment minus neutral"),
        (EMinusC, "e-c", "e-c: entailment minus contradiction"),
        (EMinusNMinus2C, "e-n-2c", "e-n-2c"),
    ]
);

impl Formula {
    /// Applies the formula.
    pub fn apply(self, p: NliProbs) -> f64 {
        match self {
            Formula::E => p.e,
            Formula::NegC => -p.c,
            Formula::EMinusN => p.e - p.n,
            Formula::EMinusC => p.e - p.c,
            Formula::EMinusNMinus2C => p.e - p.n - 2.0 * p.c,
        }
    }
}

/// Which text is the premise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Reference (or source) as premise, hypothesis as hypothesis.
    RefHyp,
    /// Hypothesis as premise.
    HypRef,
    /// Both, probabilities averaged.
    Both,
}

named_enum!(
    Direction,
    "MENLI direction",
    [
        (
            RefHyp,
            "ref-hyp",
            "ref-hyp: reference (or source) as premise"
        ),
        (HypRef, "hyp-ref", "hyp-ref: hypothesis as premise"),
        (Both, "both", "both: the two directions averaged")
    ]
);

/// What is compared with the hypothesis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Premise {
    /// The reference(s) (reference-based).
    Reference,
    /// The source (reference-free).
    Source,
}

/// A complete MENLI configuration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Setup {
    /// Formula.
    pub formula: Formula,
    /// Direction (for a source premise, `ref-hyp` means source -> hypothesis).
    pub direction: Direction,
    /// Reference-based or reference-free.
    pub premise: Premise,
    /// Weight of the NLI score when combined with another metric.
    pub weight: f64,
}

/// The tasks the paper gives defaults for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    /// Machine translation (reference-based).
    Mt,
    /// Summarisation against references.
    Summarization,
    /// Summarisation against the source document.
    SummarizationRefFree,
}

named_enum!(
    Task,
    "MENLI task",
    [
        (Mt, "mt", "mt: e, both, reference as premise"),
        (
            Summarization,
            "summ",
            "summ: e-c, hyp-ref, reference as premise"
        ),
        (
            SummarizationRefFree,
            "summ-free",
            "summ-free: -c, ref-hyp, source as premise"
        )
    ]
);

impl Task {
    /// The paper's default setup for the task.
    pub fn setup(self) -> Setup {
        match self {
            Task::Mt => Setup {
                formula: Formula::E,
                direction: Direction::Both,
                premise: Premise::Reference,
                weight: 0.2,
            },
            Task::Summarization => Setup {
                formula: Formula::EMinusC,
                direction: Direction::HypRef,
                premise: Premise::Reference,
                weight: 0.8,
            },
            Task::SummarizationRefFree => Setup {
                formula: Formula::NegC,
                direction: Direction::RefHyp,
                premise: Premise::Source,
                weight: 0.8,
            },
        }
    }
}

/// Entailment, neutral and contradiction probabilities of one pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct NliProbs {
    /// Entailment.
    pub e: f64,
    /// Neutral.
    pub n: f64,
    /// Contradiction.
    pub c: f64,
}

impl NliProbs {
    fn mean(self, other: NliProbs) -> NliProbs {
        NliProbs {
            e: (self.e + other.e) / 2.0,
            n: (self.n + other.n) / 2.0,
            c: (self.c + other.c) / 2.0,
        }
    }
}

/// Output columns of entailment, neutral and contradiction, from the
/// checkpoint's `id2label` (names compared case-insensitively by prefix:
/// `ENTAILMENT`, `entailment`, `contradiction`...).
pub fn label_columns(plm: &Plm) -> Result<[usize; 3], ModelError> {
    let labels = &plm.config.labels;
    let find = |prefix: &str| {
        labels
            .iter()
            .position(|l| l.to_lowercase().starts_with(prefix))
            .ok_or_else(|| {
                ModelError::Unsupported(format!(
                    "{} is not an NLI model: its labels are {labels:?}, with no '{prefix}...'",
                    plm.name
                ))
            })
    };
    Ok([find("entail")?, find("neutral")?, find("contradict")?])
}

/// NLI probabilities of each (premise, hypothesis) pair.
pub async fn probabilities(plm: &Plm, pairs: &[(&str, &str)]) -> Result<Vec<NliProbs>, ModelError> {
    let [e, n, c] = label_columns(plm)?;
    let encoded = pairs
        .iter()
        .map(|(p, h)| Ok(plm.tokenizer.encode_pair_for_model(p, h)?))
        .collect::<Result<Vec<_>, ModelError>>()?;
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| encoded[i].tokens.len());
    let mut out = vec![NliProbs::default(); pairs.len()];
    for chunk in plm.passes(
        &order,
        |&i| encoded[i].tokens.len(),
        PassLimit::Sequences(BATCH),
    ) {
        let ids: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].ids()).collect();
        let types: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].type_ids.clone()).collect();
        let forward = plm.forward_with_types(&ids, Some(&types))?;
        let probs = burn::tensor::activation::softmax(plm.class_logits(&forward)?, 1);
        let (values, [_, k]) = read_back(probs).await?;
        for (r, &i) in chunk.iter().enumerate() {
            let row = &values[r * k..(r + 1) * k];
            out[i] = NliProbs {
                e: row[e] as f64,
                n: row[n] as f64,
                c: row[c] as f64,
            };
        }
    }
    Ok(out)
}

/// One hypothesis's MENLI score with the probabilities behind it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MenliScore {
    /// The formula's value for the best premise.
    pub value: f64,
    /// Premise -> hypothesis probabilities (of the best premise).
    pub forward: NliProbs,
    /// Hypothesis -> premise probabilities (of the best premise).
    pub backward: NliProbs,
    /// Index of the reference that scored best (0 for a source premise).
    pub premise: usize,
}

/// The score of a pair from its two probability triples.
pub fn pair_value(setup: &Setup, forward: NliProbs, backward: NliProbs) -> f64 {
    let probs = match setup.direction {
        Direction::RefHyp => forward,
        Direction::HypRef => backward,
        Direction::Both => forward.mean(backward),
    };
    setup.formula.apply(probs)
}

/// MENLI of each hypothesis: against its references (the best one counts)
/// or, reference-free, against its source.
pub async fn score_set(
    plm: &Plm,
    hyps: &[&str],
    refs: &[Vec<&str>],
    srcs: &[Option<&str>],
    setup: &Setup,
) -> Result<Vec<MenliScore>, ModelError> {
    let premises: Vec<Vec<&str>> = match setup.premise {
        Premise::Reference => refs.to_vec(),
        Premise::Source => srcs.iter().map(|s| s.iter().copied().collect()).collect(),
    };
    if let Some(i) = premises.iter().position(Vec::is_empty) {
        let what = match setup.premise {
            Premise::Reference => "reference",
            Premise::Source => "source",
        };
        return Err(ModelError::Input(format!(
            "segment {} has no {what} to use as MENLI's premise",
            i + 1
        )));
    }
    let mut pairs = Vec::new();
    for (h, ps) in hyps.iter().zip(&premises) {
        for p in ps {
            pairs.push((*p, *h));
            pairs.push((*h, *p));
        }
    }
    let probs = probabilities(plm, &pairs).await?;
    let mut next = 0;
    Ok(premises
        .iter()
        .map(|ps| {
            let scores: Vec<MenliScore> = (0..ps.len())
                .map(|k| {
                    let (forward, backward) = (probs[next + 2 * k], probs[next + 2 * k + 1]);
                    MenliScore {
                        value: pair_value(setup, forward, backward),
                        forward,
                        backward,
                        premise: k,
                    }
                })
                .collect();
            next += 2 * ps.len();
            scores
                .into_iter()
                .reduce(|a, b| if b.value > a.value { b } else { a })
                .expect("at least one premise")
        })
        .collect())
}

/// Errors combining MENLI with another metric.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CombineError {
    /// The two score lists differ in length.
    #[error("{0} MENLI scores but {1} scores of the other metric")]
    Lengths(usize, usize),
    /// Min-max rescaling needs a set.
    #[error(
        "combining MENLI with another metric rescales over the scored set: it needs at least 2 segments"
    )]
    TooFew,
}

/// `w*N + (1-w)*M` with both min-max rescaled over the set. A metric that
/// gives every segment the same score contributes 0 to each.
pub fn combine(nli: &[f64], other: &[f64], weight: f64) -> Result<Vec<f64>, CombineError> {
    if nli.len() != other.len() {
        return Err(CombineError::Lengths(nli.len(), other.len()));
    }
    if nli.len() < 2 {
        return Err(CombineError::TooFew);
    }
    let rescale = |xs: &[f64]| -> Vec<f64> {
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        xs.iter()
            .map(|x| if hi > lo { (x - lo) / (hi - lo) } else { 0.0 })
            .collect()
    };
    Ok(rescale(nli)
        .into_iter()
        .zip(rescale(other))
        .map(|(n, m)| weight * n + (1.0 - weight) * m)
        .collect())
}

/// Signature: model, formula, direction, premise, precision, and the
/// metric MENLI is combined with (with its weight) where it is.
pub fn signature(
    model: &str,
    setup: &Setup,
    precision: &str,
    combined_with: Option<&str>,
) -> Signature {
    let sig = Signature::new("menli")
        .with("model", model)
        .with("formula", setup.formula)
        .with("direction", setup.direction)
        .with(
            "premise",
            match setup.premise {
                Premise::Reference => "ref",
                Premise::Source => "src",
            },
        )
        .with("precision", precision);
    match combined_with {
        Some(other) => sig.with("combine", other).with("w", setup.weight),
        None => sig,
    }
    .versioned()
}

/// MENLI's options: the task's defaults, overridden where set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MenliOptions {
    /// # Model
    ///
    /// The NLI classifier (entailment, neutral and contradiction labels);
    /// unset: the registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Task
    ///
    /// Whose defaults apply: mt (e, both directions, the reference as
    /// premise), summ (e-c, the hypothesis as premise), summ-free (-c, the
    /// source as premise). Default: mt.
    pub task: Task,
    /// # Formula
    ///
    /// How the probabilities become one number (MENLI's `formula`); unset:
    /// the task's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-null-label" = "task default"))]
    pub formula: Option<Formula>,
    /// # Direction
    ///
    /// Which text is the premise (MENLI's `direction`); unset: the task's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-null-label" = "task default"))]
    pub direction: Option<Direction>,
    /// # Combine with
    ///
    /// Another metric M (an id): the score becomes w*NLI + (1-w)*M, both
    /// min-max rescaled over the scored set (MENLI's combination with
    /// BERTScore or MoverScore). Unset: NLI alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>", extend("x-metric" = true, "x-page" = false))]
    pub combine: Option<Box<MetricSpec>>,
    /// # NLI weight
    ///
    /// The weight w of the NLI score in the combination, 0 to 1; unset: the
    /// task's (MT 0.2, summarisation 0.8).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0), extend("x-page" = false))]
    pub weight: Option<f64>,
}

impl Default for MenliOptions {
    fn default() -> Self {
        Self {
            model: None,
            task: Task::Mt,
            formula: None,
            direction: None,
            combine: None,
            weight: None,
        }
    }
}

impl MenliOptions {
    /// The complete setup: the task's defaults with these overrides.
    pub fn setup(&self) -> Result<Setup, SpecError> {
        let task = self.task.setup();
        let setup = Setup {
            formula: self.formula.unwrap_or(task.formula),
            direction: self.direction.unwrap_or(task.direction),
            weight: self.weight.unwrap_or(task.weight),
            ..task
        };
        if !(0.0..=1.0).contains(&setup.weight) {
            return Err(SpecError(format!(
                "MENLI's combination weight must be between 0 and 1, not {}",
                setup.weight
            )));
        }
        Ok(setup)
    }
}

/// MENLI's registry entry.
pub struct MenliMetric;

impl MetricModule for MenliMetric {
    type Options = MenliOptions;
    const KIND: KindAbout = KindAbout {
        name: "MENLI",
        about: "An NLI classifier reads the reference (or, reference-free, the source) and \
                the hypothesis as premise and hypothesis, in one or both directions; the \
                entailment, neutral and contradiction probabilities become one number by \
                the task's formula. Several references: the best one counts.",
        reference: "MENLI (Chen & Eger 2023)",
        truncated: "a text was cut to the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Nli),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        name: "MENLI",
        description: "NLI score (entailment, contradiction) of hypothesis and reference or source",
        higher_is_better: true,
        needs_reference: false,
        needs_source: false,
        reads: "hypothesis + references (or the source, reference-free)",
        scale: Scale::NLI,
    }];

    fn validate(o: &MenliOptions) -> Result<(), SpecError> {
        o.setup()?;
        if let Some(other) = &o.combine {
            if matches!(**other, MetricSpec::Menli(_)) {
                return Err(SpecError("MENLI cannot be combined with itself".into()));
            }
            other.validate()?;
        }
        Ok(())
    }

    fn whole_set(o: &MenliOptions) -> Option<&'static str> {
        o.combine.is_some().then_some("MENLI's min-max combination")
    }

    fn reads_set_scores(o: &MenliOptions) -> bool {
        o.combine.is_some()
    }
}

impl ModelModule for MenliMetric {
    fn model_name(o: &MenliOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&MenliOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        each_alone(group, async |o| column(engine, o, segments).await).await
    }
}

async fn column(
    engine: &Engine,
    m: &MenliOptions,
    segments: &[Segment<'_>],
) -> Result<Column, EngineError> {
    let plm = engine.model(ModelSlot::Menli, m.model.as_deref())?;
    let setup = m.setup()?;
    let hyps: Vec<&str> = segments.iter().map(|s| s.hyp).collect();
    let refs: Vec<Vec<&str>> = segments.iter().map(|s| s.refs.to_vec()).collect();
    let srcs: Vec<Option<&str>> = segments.iter().map(|s| s.src).collect();
    let nli = score_set(&plm, &hyps, &refs, &srcs, &setup)
        .await
        .map_err(model_error(&plm))?;
    let combined = match &m.combine {
        None => None,
        Some(other) => {
            let other_values = engine.column(other, segments).await?.values();
            let nli_values: Vec<f64> = nli.iter().map(|s| s.value).collect();
            let mixed = combine(&nli_values, &other_values, setup.weight).map_err(|e| {
                EngineError::Input {
                    metric: MetricId::Menli,
                    message: e.to_string(),
                }
            })?;
            Some((other.id(), other_values, mixed))
        }
    };
    let signature = signature(
        &plm.name,
        &setup,
        &plm.precision_label(),
        combined.as_ref().map(|(id, ..)| id.as_str()),
    );
    let scores = nli
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut parts = vec![
                part_of("nli", s.value),
                part_of("e", s.forward.e),
                part_of("n", s.forward.n),
                part_of("c", s.forward.c),
                part_of("e_backward", s.backward.e),
                part_of("n_backward", s.backward.n),
                part_of("c_backward", s.backward.c),
            ];
            let value = match &combined {
                Some((_, other, mixed)) => {
                    parts.push(part_of("other", other[i]));
                    mixed[i]
                }
                None => s.value,
            };
            Score {
                metric: MetricId::Menli.as_str(),
                value,
                parts,
                signature: signature.to_string(),
            }
        })
        .collect();
    let mut column = Column::new(MetricSpec::Menli(m.clone()), scores, signature);
    if engine.details() {
        column.details = nli
            .iter()
            .map(|s| Detail::Nli {
                forward: s.forward,
                backward: s.backward,
                premise: s.premise,
                premise_kind: setup.premise,
                formula: setup.formula,
                direction: setup.direction,
            })
            .collect();
    }
    Ok(column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: NliProbs = NliProbs {
        e: 0.6,
        n: 0.3,
        c: 0.1,
    };

    #[test]
    fn formulas_follow_the_paper() {
        let values: Vec<f64> = Formula::ALL.iter().map(|f| f.apply(P)).collect();
        let expected = [0.6, -0.1, 0.3, 0.5, 0.1];
        for (v, e) in values.iter().zip(expected) {
            assert!((v - e).abs() < 1e-12, "{values:?}");
        }
        for &f in Formula::ALL {
            assert_eq!(f.as_str().parse::<Formula>().unwrap(), f);
        }
        assert!("x".parse::<Formula>().is_err());
    }

    #[test]
    fn both_directions_average_before_the_formula() {
        let back = NliProbs {
            e: 0.2,
            n: 0.2,
            c: 0.6,
        };
        let setup = Setup {
            formula: Formula::EMinusNMinus2C,
            ..Task::Mt.setup()
        };
        // mean (0.4, 0.25, 0.35): 0.4 - 0.25 - 0.7
        assert!((pair_value(&setup, P, back) - (-0.55)).abs() < 1e-12);
    }

    #[test]
    fn combination_rescales_both_over_the_set() {
        let out = combine(&[0.0, 0.5, 1.0], &[10.0, 30.0, 20.0], 0.2).unwrap();
        let expected = [0.0, 0.2 * 0.5 + 0.8, 0.2 + 0.8 * 0.5];
        for (o, e) in out.iter().zip(expected) {
            assert!((o - e).abs() < 1e-12, "{out:?}");
        }
        assert_eq!(combine(&[1.0], &[1.0], 0.2), Err(CombineError::TooFew));
        assert_eq!(
            combine(&[1.0, 2.0], &[1.0], 0.2),
            Err(CombineError::Lengths(2, 1))
        );
        assert_eq!(
            combine(&[1.0, 1.0], &[1.0, 2.0], 0.5).unwrap(),
            vec![0.0, 0.5]
        );
    }

    #[test]
    fn task_defaults_are_the_papers() {
        assert_eq!(Task::Mt.setup().formula, Formula::E);
        assert_eq!(Task::Mt.setup().direction, Direction::Both);
        assert_eq!(Task::Summarization.setup().formula, Formula::EMinusC);
        assert_eq!(Task::Summarization.setup().direction, Direction::HypRef);
        assert_eq!(Task::SummarizationRefFree.setup().premise, Premise::Source);
        assert_eq!(Task::SummarizationRefFree.setup().formula, Formula::NegC);
    }
}
