//! What to score, typed: metric ids, the model slots of `models.toml`, and
//! [`MetricSpec`], one metric with all its options. A spec round-trips
//! through JSON (`{"metric":"bertscore","part":"f","idf":true}`), so the
//! CLI's flags ([`Settings`]) and the page's requests resolve to the same
//! value, and every default is decided here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::menli::{Direction, Formula, Setup, Task};
use super::{Metric, MetricInfo};

/// A value that does not parse: an unknown id, format or option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{value}' (known: {known})")]
pub struct ParseError {
    /// What was parsed (`metric`, `MENLI formula`, `dataset format`...).
    pub what: &'static str,
    /// The text given.
    pub value: String,
    /// The accepted values, comma-separated.
    pub known: String,
}

impl ParseError {
    /// `value` is not one of `known`.
    pub fn new<'a>(
        what: &'static str,
        value: &str,
        known: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Self {
            what,
            value: value.to_owned(),
            known: known.into_iter().collect::<Vec<_>>().join(", "),
        }
    }
}

/// Implements `as_str`, `Display`, `FromStr` and string serde for a
/// C-like enum from its list of `(variant, name)` pairs.
macro_rules! named_enum {
    ($ty:ident, $what:literal, [$(($variant:ident, $name:literal)),+ $(,)?]) => {
        impl $ty {
            /// Every value, in display order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The stable name used by the CLI, the page and result files.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::metrics::spec::ParseError;
            fn from_str(s: &str) -> Result<Self, $crate::metrics::spec::ParseError> {
                let s = s.trim();
                $ty::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::metrics::spec::ParseError::new($what, s, $ty::ALL.iter().map(|v| v.as_str())))
            }
        }

        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as ::serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use named_enum;

/// A registered metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetricId {
    /// sacrebleu BLEU.
    Bleu,
    /// sacrebleu chrF.
    Chrf,
    /// rouge-score ROUGE-1 F.
    Rouge1,
    /// rouge-score ROUGE-2 F.
    Rouge2,
    /// rouge-score ROUGE-L F.
    RougeL,
    /// BERTScore precision.
    BertScoreP,
    /// BERTScore recall.
    BertScoreR,
    /// BERTScore F1.
    BertScoreF,
    /// Negated GPT-2 perplexity.
    GptPpl,
    /// Negated masked-LM pseudo-perplexity.
    MlmPpl,
    /// MENLI's NLI score.
    Menli,
    /// COMET (reference-based estimator).
    Comet,
    /// COMET-QE (reference-free estimator).
    CometQe,
    /// BLEURT-20 (a regressor on the reference-candidate pair).
    Bleurt,
    /// BARTScore precision (reference -> hypothesis).
    BartScoreP,
    /// BARTScore recall (hypothesis -> reference).
    BartScoreR,
    /// BARTScore F: the mean of P and R.
    BartScoreF,
    /// BARTScore faithfulness (source -> hypothesis).
    BartScoreFaithful,
    /// MoverScore (v2): 1 − the Earth mover's distance of token embeddings.
    MoverScore,
    /// MoverScore v1: the paper's, on the last 5 layers, with n-grams.
    MoverScoreV1,
}

named_enum!(
    MetricId,
    "metric",
    [
        (Bleu, "bleu"),
        (Chrf, "chrf"),
        (Rouge1, "rouge1"),
        (Rouge2, "rouge2"),
        (RougeL, "rougeL"),
        (BertScoreP, "bertscore-p"),
        (BertScoreR, "bertscore-r"),
        (BertScoreF, "bertscore-f"),
        (GptPpl, "gpt-ppl"),
        (MlmPpl, "mlm-ppl"),
        (Menli, "menli"),
        (Comet, "comet"),
        (CometQe, "comet-qe"),
        (Bleurt, "bleurt"),
        (BartScoreP, "bartscore-p"),
        (BartScoreR, "bartscore-r"),
        (BartScoreF, "bartscore-f"),
        (BartScoreFaithful, "bartscore-faithful"),
        (MoverScore, "moverscore"),
        (MoverScoreV1, "moverscore-v1"),
    ]
);

impl MetricId {
    /// What the registry knows about the metric.
    pub fn info(self) -> &'static MetricInfo {
        use super::{bleu, chrf, models_info as m, rouge};
        match self {
            MetricId::Bleu => &bleu::INFO,
            MetricId::Chrf => &chrf::INFO,
            MetricId::Rouge1 => &rouge::ROUGE1_INFO,
            MetricId::Rouge2 => &rouge::ROUGE2_INFO,
            MetricId::RougeL => &rouge::ROUGEL_INFO,
            MetricId::BertScoreP => &m::BERTSCORE_P,
            MetricId::BertScoreR => &m::BERTSCORE_R,
            MetricId::BertScoreF => &m::BERTSCORE_F,
            MetricId::GptPpl => &m::GPT_PPL,
            MetricId::MlmPpl => &m::MLM_PPL,
            MetricId::Menli => &m::MENLI,
            MetricId::Comet => &m::COMET,
            MetricId::CometQe => &m::COMET_QE,
            MetricId::Bleurt => &m::BLEURT,
            MetricId::BartScoreP => &m::BARTSCORE_P,
            MetricId::BartScoreR => &m::BARTSCORE_R,
            MetricId::BartScoreF => &m::BARTSCORE_F,
            MetricId::BartScoreFaithful => &m::BARTSCORE_FAITHFUL,
            MetricId::MoverScore => &m::MOVERSCORE,
            MetricId::MoverScoreV1 => &m::MOVERSCORE_V1,
        }
    }

    /// True when the metric runs on a language model.
    pub fn is_model_based(self) -> bool {
        self.info().model.is_some()
    }
}

/// The metrics `models.toml` names default checkpoints for; a model-based
/// metric takes its model from its slot (`--model bertscore=DIR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ModelSlot {
    /// BERTScore's encoder.
    BertScore,
    /// GPT-PPL's causal LM.
    GptPpl,
    /// MLM-PPL's masked LM.
    MlmPpl,
    /// MENLI's NLI classifier.
    Menli,
    /// MAUVE's featuriser.
    Mauve,
    /// COMET's estimator (reference-based).
    Comet,
    /// COMET-QE's estimator (reference-free).
    CometQe,
    /// BLEURT's regressor.
    Bleurt,
    /// BARTScore's encoder-decoder.
    BartScore,
    /// MoverScore's encoder.
    MoverScore,
    /// MoverScore v1's encoder (the paper's: BERT fine-tuned on MNLI).
    MoverScoreV1,
}

named_enum!(
    ModelSlot,
    "model-based metric",
    [
        (BertScore, "bertscore"),
        (GptPpl, "gpt-ppl"),
        (MlmPpl, "mlm-ppl"),
        (Menli, "menli"),
        (Mauve, "mauve"),
        (Comet, "comet"),
        (CometQe, "comet-qe"),
        (Bleurt, "bleurt"),
        (BartScore, "bartscore"),
        (MoverScore, "moverscore"),
        (MoverScoreV1, "moverscore-v1"),
    ]
);

/// Which BERTScore component a column reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Part {
    /// Precision.
    P,
    /// Recall.
    R,
    /// F1.
    #[default]
    F,
}

named_enum!(Part, "BERTScore part", [(P, "p"), (R, "r"), (F, "f")]);

/// Which BARTScore direction (or their mean) a column reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BartPart {
    /// Precision: log-likelihood of the hypothesis given the reference.
    P,
    /// Recall: of the reference given the hypothesis.
    R,
    /// (P + R) / 2.
    #[default]
    F,
    /// Faithfulness: of the hypothesis given the source.
    Faithful,
}

named_enum!(
    BartPart,
    "BARTScore part",
    [(P, "p"), (R, "r"), (F, "f"), (Faithful, "faithful")]
);

/// BARTScore with its options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BartScoreSpec {
    /// Model (see [`BertScoreSpec::model`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The direction this column reports.
    pub part: BartPart,
}

impl BartScoreSpec {
    /// The spec with `part` unset: specs equal here share their model passes.
    pub fn pass_key(&self) -> Self {
        Self {
            part: BartPart::F,
            ..self.clone()
        }
    }
}

/// BERTScore with its options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BertScoreSpec {
    /// Model (a folder natively, a loaded model's name on the page); `None`:
    /// the registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Layer; `None`: the registry's layer for the model, else its last
    /// ([`super::bertscore::default_layer`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<usize>,
    /// idf weights over all references of the scored set.
    pub idf: bool,
    /// Rescale with the model's baseline (bert_score `rescale_with_baseline`).
    pub rescale: bool,
    /// The component this column reports.
    pub part: Part,
}

impl BertScoreSpec {
    /// The spec with `part` unset: specs equal here share one model pass.
    pub fn pass_key(&self) -> Self {
        Self {
            part: Part::F,
            ..self.clone()
        }
    }
}

/// MENLI with its options: the task's defaults, overridden where set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MenliSpec {
    /// Model (see [`BertScoreSpec::model`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The task whose defaults apply (mt, summ, summ-free).
    pub task: Task,
    /// Formula, overriding the task's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formula: Option<Formula>,
    /// Direction, overriding the task's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Combine with this metric: w*NLI + (1-w)*M, both min-max rescaled over the set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub combine: Option<Box<MetricSpec>>,
    /// Weight of the NLI score in the combination (default: the task's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

impl Default for MenliSpec {
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

impl MenliSpec {
    /// The complete setup: the task's defaults with this spec's overrides.
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

/// A spec that cannot be scored as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// One metric with every option that changes its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "metric", deny_unknown_fields)]
pub enum MetricSpec {
    /// sacrebleu BLEU (defaults: 13a, exp smoothing, mixed case).
    #[serde(rename = "bleu")]
    Bleu,
    /// sacrebleu chrF (char order 6, word order 0, beta 2).
    #[serde(rename = "chrf")]
    Chrf,
    /// ROUGE-1 F.
    #[serde(rename = "rouge1")]
    Rouge1 {
        /// Porter stemmer (rouge-score `use_stemmer`).
        #[serde(default)]
        stemmer: bool,
    },
    /// ROUGE-2 F.
    #[serde(rename = "rouge2")]
    Rouge2 {
        /// Porter stemmer.
        #[serde(default)]
        stemmer: bool,
    },
    /// ROUGE-L F.
    #[serde(rename = "rougeL")]
    RougeL {
        /// Porter stemmer.
        #[serde(default)]
        stemmer: bool,
    },
    /// BERTScore P, R or F.
    #[serde(rename = "bertscore")]
    BertScore(BertScoreSpec),
    /// Negated GPT-2 perplexity.
    #[serde(rename = "gpt-ppl")]
    GptPpl {
        /// Model (see [`BertScoreSpec::model`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Put `<|endoftext|>` first so the first token is scored too.
        #[serde(default)]
        bos: bool,
    },
    /// Negated pseudo-perplexity under a masked LM.
    #[serde(rename = "mlm-ppl")]
    MlmPpl {
        /// Model (see [`BertScoreSpec::model`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// MENLI.
    #[serde(rename = "menli")]
    Menli(MenliSpec),
    /// COMET: a reference-based estimator checkpoint.
    #[serde(rename = "comet")]
    Comet {
        /// Model (see [`BertScoreSpec::model`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// COMET-QE: a reference-free estimator checkpoint.
    #[serde(rename = "comet-qe")]
    CometQe {
        /// Model (see [`BertScoreSpec::model`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// BLEURT: a BLEURT-20 checkpoint.
    #[serde(rename = "bleurt")]
    Bleurt {
        /// Model (see [`BertScoreSpec::model`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// BARTScore P, R, F or faithfulness.
    #[serde(rename = "bartscore")]
    BartScore(BartScoreSpec),
    /// MoverScore v2 on an encoder's last layer.
    #[serde(rename = "moverscore")]
    MoverScore {
        /// Model (see [`BertScoreSpec::model`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// idf weights over the set (references and hypotheses separately).
        #[serde(default)]
        idf: bool,
    },
    /// MoverScore v1 (`moverscore.py`): the last 5 layers, n-grams of kept tokens.
    #[serde(rename = "moverscore-v1")]
    MoverScoreV1 {
        /// Model (see [`BertScoreSpec::model`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// idf weights over the set (references and hypotheses separately).
        #[serde(default)]
        idf: bool,
        /// Kept tokens per window (1: the paper's MoverScore; 2: its bigram variant).
        #[serde(default = "one")]
        ngram: usize,
    },
}

fn one() -> usize {
    1
}

impl MetricSpec {
    /// The metric's defaults.
    pub fn default_for(id: MetricId) -> Self {
        Settings::default().spec(id)
    }

    /// The id of the column this spec fills.
    pub fn id(&self) -> MetricId {
        match self {
            MetricSpec::Bleu => MetricId::Bleu,
            MetricSpec::Chrf => MetricId::Chrf,
            MetricSpec::Rouge1 { .. } => MetricId::Rouge1,
            MetricSpec::Rouge2 { .. } => MetricId::Rouge2,
            MetricSpec::RougeL { .. } => MetricId::RougeL,
            MetricSpec::BertScore(b) => match b.part {
                Part::P => MetricId::BertScoreP,
                Part::R => MetricId::BertScoreR,
                Part::F => MetricId::BertScoreF,
            },
            MetricSpec::GptPpl { .. } => MetricId::GptPpl,
            MetricSpec::MlmPpl { .. } => MetricId::MlmPpl,
            MetricSpec::Menli(_) => MetricId::Menli,
            MetricSpec::Comet { .. } => MetricId::Comet,
            MetricSpec::CometQe { .. } => MetricId::CometQe,
            MetricSpec::Bleurt { .. } => MetricId::Bleurt,
            MetricSpec::BartScore(b) => match b.part {
                BartPart::P => MetricId::BartScoreP,
                BartPart::R => MetricId::BartScoreR,
                BartPart::F => MetricId::BartScoreF,
                BartPart::Faithful => MetricId::BartScoreFaithful,
            },
            MetricSpec::MoverScore { .. } => MetricId::MoverScore,
            MetricSpec::MoverScoreV1 { .. } => MetricId::MoverScoreV1,
        }
    }

    /// The registry's information.
    pub fn info(&self) -> &'static MetricInfo {
        self.id().info()
    }

    /// The model-free metric, or `None` for one that runs on a model.
    pub fn lexical(&self) -> Option<Box<dyn Metric>> {
        use super::{Bleu, Chrf, Rouge, RougeKind};
        Some(match *self {
            MetricSpec::Bleu => Box::new(Bleu::default()),
            MetricSpec::Chrf => Box::new(Chrf::default()),
            MetricSpec::Rouge1 { stemmer } => Box::new(Rouge::new(RougeKind::N(1), stemmer)),
            MetricSpec::Rouge2 { stemmer } => Box::new(Rouge::new(RougeKind::N(2), stemmer)),
            MetricSpec::RougeL { stemmer } => Box::new(Rouge::new(RougeKind::Lcs, stemmer)),
            _ => return None,
        })
    }

    /// The model slot and the model named (None: the slot's default), for
    /// a model-based metric.
    pub fn model(&self) -> Option<(ModelSlot, Option<&str>)> {
        match self {
            MetricSpec::BertScore(b) => Some((ModelSlot::BertScore, b.model.as_deref())),
            MetricSpec::GptPpl { model, .. } => Some((ModelSlot::GptPpl, model.as_deref())),
            MetricSpec::MlmPpl { model } => Some((ModelSlot::MlmPpl, model.as_deref())),
            MetricSpec::Menli(m) => Some((ModelSlot::Menli, m.model.as_deref())),
            MetricSpec::Comet { model } => Some((ModelSlot::Comet, model.as_deref())),
            MetricSpec::CometQe { model } => Some((ModelSlot::CometQe, model.as_deref())),
            MetricSpec::Bleurt { model } => Some((ModelSlot::Bleurt, model.as_deref())),
            MetricSpec::BartScore(b) => Some((ModelSlot::BartScore, b.model.as_deref())),
            MetricSpec::MoverScore { model, .. } => Some((ModelSlot::MoverScore, model.as_deref())),
            MetricSpec::MoverScoreV1 { model, .. } => {
                Some((ModelSlot::MoverScoreV1, model.as_deref()))
            }
            _ => None,
        }
    }

    /// Why a segment's value depends on the other segments scored with it
    /// (idf, MENLI's min-max combination), or `None` when it does not.
    /// Batches of such specs are scored within their whole set
    /// ([`crate::metrics::Engine::score_within`]), except those that read
    /// the set's scores ([`MetricSpec::reads_set_scores`]).
    pub fn whole_set(&self) -> Option<&'static str> {
        match self {
            MetricSpec::BertScore(b) if b.idf => Some("BERTScore's idf weights"),
            MetricSpec::MoverScore { idf: true, .. }
            | MetricSpec::MoverScoreV1 { idf: true, .. } => Some("MoverScore's idf weights"),
            MetricSpec::Menli(m) if m.combine.is_some() => Some("MENLI's min-max combination"),
            _ => None,
        }
    }

    /// True when the spec reads the hypotheses of the whole set, not only
    /// its references (MoverScore's idf weighs each side by its own texts;
    /// BERTScore's idf reads references only).
    pub fn reads_set_hypotheses(&self) -> bool {
        matches!(
            self,
            MetricSpec::MoverScore { idf: true, .. } | MetricSpec::MoverScoreV1 { idf: true, .. }
        )
    }

    /// True when the spec reads the scores of the whole set (MENLI's min-max
    /// combination), not only its texts: such a spec cannot be scored a
    /// batch at a time even with the set's texts at hand
    /// ([`crate::metrics::Engine::score_within`]).
    pub fn reads_set_scores(&self) -> bool {
        matches!(self, MetricSpec::Menli(m) if m.combine.is_some())
    }

    /// Checks what can be checked before any model is loaded.
    pub fn validate(&self) -> Result<(), SpecError> {
        if let MetricSpec::MoverScoreV1 { ngram: 0, .. } = self {
            return Err(SpecError(
                "MoverScore v1's n-gram must be at least 1 (1: the paper's MoverScore)".into(),
            ));
        }
        if let MetricSpec::Menli(m) = self {
            m.setup()?;
            if let Some(other) = &m.combine {
                if matches!(**other, MetricSpec::Menli(_)) {
                    return Err(SpecError("MENLI cannot be combined with itself".into()));
                }
                other.validate()?;
            }
        }
        Ok(())
    }
}

/// Options applied across metric ids, as the CLI's flags and the page's
/// suite requests give them; [`Settings::spec`] turns an id into its spec.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// ROUGE with the Porter stemmer.
    pub rouge_stemmer: bool,
    /// Model per slot (a folder natively, a loaded model's name on the page).
    pub models: BTreeMap<ModelSlot, String>,
    /// BERTScore layer (default: the registry's for the model, else the last).
    pub layer: Option<usize>,
    /// idf weights over the set: BERTScore's over the references,
    /// MoverScore's over the references and the hypotheses separately.
    pub idf: bool,
    /// BERTScore rescaled with the model's baseline.
    pub rescale: bool,
    /// GPT-PPL with `<|endoftext|>` first.
    pub ppl_bos: bool,
    /// MENLI's task defaults.
    pub menli_task: Option<Task>,
    /// MENLI formula override.
    pub menli_formula: Option<Formula>,
    /// MENLI direction override.
    pub menli_direction: Option<Direction>,
    /// Combine MENLI with this metric.
    pub menli_combine: Option<MetricId>,
    /// MENLI's weight in the combination.
    pub menli_weight: Option<f64>,
    /// MoverScore v1's n-gram (default 1).
    pub moverscore_ngram: Option<usize>,
}

impl Settings {
    fn model(&self, slot: ModelSlot) -> Option<String> {
        self.models.get(&slot).cloned()
    }

    /// The spec of `id` under these settings.
    pub fn spec(&self, id: MetricId) -> MetricSpec {
        let bertscore = |part| {
            MetricSpec::BertScore(BertScoreSpec {
                model: self.model(ModelSlot::BertScore),
                layer: self.layer,
                idf: self.idf,
                rescale: self.rescale,
                part,
            })
        };
        let bartscore = |part| {
            MetricSpec::BartScore(BartScoreSpec {
                model: self.model(ModelSlot::BartScore),
                part,
            })
        };
        match id {
            MetricId::Bleu => MetricSpec::Bleu,
            MetricId::Chrf => MetricSpec::Chrf,
            MetricId::Rouge1 => MetricSpec::Rouge1 {
                stemmer: self.rouge_stemmer,
            },
            MetricId::Rouge2 => MetricSpec::Rouge2 {
                stemmer: self.rouge_stemmer,
            },
            MetricId::RougeL => MetricSpec::RougeL {
                stemmer: self.rouge_stemmer,
            },
            MetricId::BertScoreP => bertscore(Part::P),
            MetricId::BertScoreR => bertscore(Part::R),
            MetricId::BertScoreF => bertscore(Part::F),
            MetricId::GptPpl => MetricSpec::GptPpl {
                model: self.model(ModelSlot::GptPpl),
                bos: self.ppl_bos,
            },
            MetricId::MlmPpl => MetricSpec::MlmPpl {
                model: self.model(ModelSlot::MlmPpl),
            },
            MetricId::Menli => MetricSpec::Menli(MenliSpec {
                model: self.model(ModelSlot::Menli),
                task: self.menli_task.unwrap_or(Task::Mt),
                formula: self.menli_formula,
                direction: self.menli_direction,
                combine: self
                    .menli_combine
                    .filter(|&other| other != MetricId::Menli)
                    .map(|other| Box::new(self.spec(other))),
                weight: self.menli_weight,
            }),
            MetricId::Comet => MetricSpec::Comet {
                model: self.model(ModelSlot::Comet),
            },
            MetricId::CometQe => MetricSpec::CometQe {
                model: self.model(ModelSlot::CometQe),
            },
            MetricId::Bleurt => MetricSpec::Bleurt {
                model: self.model(ModelSlot::Bleurt),
            },
            MetricId::BartScoreP => bartscore(BartPart::P),
            MetricId::BartScoreR => bartscore(BartPart::R),
            MetricId::BartScoreF => bartscore(BartPart::F),
            MetricId::BartScoreFaithful => bartscore(BartPart::Faithful),
            MetricId::MoverScore => MetricSpec::MoverScore {
                model: self.model(ModelSlot::MoverScore),
                idf: self.idf,
            },
            MetricId::MoverScoreV1 => MetricSpec::MoverScoreV1 {
                model: self.model(ModelSlot::MoverScoreV1),
                idf: self.idf,
                ngram: self.moverscore_ngram.unwrap_or(1),
            },
        }
    }

    /// The specs of `ids` (parsed, trimmed), checked.
    pub fn specs<S: AsRef<str>>(&self, ids: &[S]) -> Result<Vec<MetricSpec>, SpecsError> {
        ids.iter()
            .map(|id| {
                let spec = self.spec(id.as_ref().parse()?);
                spec.validate()?;
                if self.menli_combine == Some(MetricId::Menli) && spec.id() == MetricId::Menli {
                    return Err(SpecError("MENLI cannot be combined with itself".into()).into());
                }
                Ok(spec)
            })
            .collect()
    }
}

/// Why a list of metric ids does not resolve to specs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecsError {
    /// An unknown id.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// An invalid option.
    #[error(transparent)]
    Spec(#[from] SpecError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_unknown_ids_list_the_known_ones() {
        for &id in MetricId::ALL {
            assert_eq!(id.as_str().parse::<MetricId>().unwrap(), id);
            assert_eq!(id.info().id, id.as_str());
        }
        let err = "bleurt-21".parse::<MetricId>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown metric 'bleurt-21' (known: bleu, chrf, rouge1, rouge2, rougeL, bertscore-p, \
             bertscore-r, bertscore-f, gpt-ppl, mlm-ppl, menli, comet, comet-qe, bleurt, \
             bartscore-p, bartscore-r, bartscore-f, bartscore-faithful, moverscore, \
             moverscore-v1)"
        );
    }

    #[test]
    fn specs_round_trip_through_json() {
        let settings = Settings {
            idf: true,
            layer: Some(6),
            menli_combine: Some(MetricId::BertScoreF),
            menli_formula: Some(Formula::EMinusC),
            ..Settings::default()
        };
        for &id in MetricId::ALL {
            let spec = settings.spec(id);
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(
                serde_json::from_str::<MetricSpec>(&json).unwrap(),
                spec,
                "{json}"
            );
            assert_eq!(spec.id(), id);
        }
        let bs: MetricSpec = serde_json::from_str(
            r#"{"metric":"bertscore","model":"m","layer":6,"idf":false,"rescale":true,"part":"f"}"#,
        )
        .unwrap();
        assert_eq!(bs.id(), MetricId::BertScoreF);
        let menli: MetricSpec = serde_json::from_str(
            r#"{"metric":"menli","formula":"e-c","direction":"both","task":"mt"}"#,
        )
        .unwrap();
        assert_eq!(
            menli,
            MetricSpec::Menli(MenliSpec {
                formula: Some(Formula::EMinusC),
                direction: Some(Direction::Both),
                ..MenliSpec::default()
            })
        );
        assert_eq!(
            serde_json::from_str::<MetricSpec>(r#"{"metric":"bleu"}"#).unwrap(),
            MetricSpec::Bleu
        );
        let typo = serde_json::from_str::<MetricSpec>(r#"{"metric":"bertscore","lyer":6}"#);
        assert!(typo.unwrap_err().to_string().contains("lyer"));
    }

    #[test]
    fn whole_set_specs_say_why() {
        let s = Settings {
            idf: true,
            ..Settings::default()
        };
        assert!(s.spec(MetricId::BertScoreF).whole_set().is_some());
        assert!(
            Settings::default()
                .spec(MetricId::BertScoreF)
                .whole_set()
                .is_none()
        );
        let bad = Settings {
            menli_combine: Some(MetricId::Menli),
            ..Settings::default()
        };
        assert!(bad.specs(&["menli"]).is_err());
        let heavy = Settings {
            menli_weight: Some(1.5),
            ..Settings::default()
        };
        assert!(
            heavy
                .specs(&["menli"])
                .unwrap_err()
                .to_string()
                .contains("between 0 and 1")
        );
    }
}
