//! Evaluation metrics behind one interface, plus the registry that names them.
//!
//! Every metric scores a [`Segment`] (hypothesis, references, optional source)
//! and, where the reference implementation defines one, a corpus. Lexical
//! metrics follow sacrebleu's design: per-segment sufficient statistics, and a
//! corpus score computed from their sum, so a sentence score is the corpus
//! score of one segment (BLEU, chrF). ROUGE has no corpus statistic in
//! rouge-score; its corpus score is the mean of segment scores.
//!
//! All scores are "higher is better"; each carries its breakdown and the
//! metric's signature string, which records every option that changes the
//! number.

pub mod bartscore;
pub mod bertscore;
pub mod bleu;
pub mod bleurt;
pub mod chrf;
pub mod comet;
pub mod engine;
pub mod mauve;
pub mod menli;
pub mod moverscore;
pub mod perplexity;
pub mod rouge;
pub mod signature;
pub mod spec;
pub mod tokenizer_13a;

use serde::Serialize;

pub use bleu::Bleu;
pub use chrf::Chrf;
pub use engine::{Column, Engine, EngineError, ModelStore};
pub use rouge::{Rouge, RougeKind};
pub use signature::Signature;
pub use spec::{MetricId, MetricSpec, ModelSlot, ParseError, Settings};

/// Version written into every signature.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One hypothesis with its references and optional source.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// The text being evaluated.
    pub hyp: &'a str,
    /// One or more references (multi-reference metrics use all of them).
    pub refs: &'a [&'a str],
    /// The source text (translation input, article), for metrics that use it.
    pub src: Option<&'a str>,
}

/// Whether a score describes one segment or a whole corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// One segment (sentence or paragraph).
    Sentence,
    /// A whole test set.
    Corpus,
}

/// The range a metric's values live in, for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// 0 to 100 (sacrebleu's BLEU and chrF).
    Percent,
    /// 0 to 1 (rouge-score, BERTScore).
    Unit,
    /// Negated perplexity (unbounded below, -1 at best).
    NegPerplexity,
    /// A formula of NLI probabilities (-2 to 1).
    Nli,
    /// A learned regressor's output (COMET: about 0 to 1 for wmt22 models,
    /// unbounded z-score-like for wmt20 ones; BLEURT-20: about 0 to 1).
    Regression,
    /// A mean token log-likelihood in nats (at most 0; BARTScore).
    LogLikelihood,
}

/// What the registry knows about a metric before it is run.
#[derive(Debug, Clone, Serialize)]
pub struct MetricInfo {
    /// Stable identifier used by the CLI, the page and result files (`bleu`).
    pub id: &'static str,
    /// Human-readable name (`BLEU`).
    pub name: &'static str,
    /// One-line description for tooltips and `--help`.
    pub description: &'static str,
    /// True when larger values mean better text (all registered metrics).
    pub higher_is_better: bool,
    /// True when the metric cannot run without a reference.
    pub needs_reference: bool,
    /// True when the metric cannot run without a source.
    pub needs_source: bool,
    /// Value range, for display.
    pub scale: Scale,
    /// How the corpus-level score is formed.
    pub corpus: CorpusAggregation,
    /// The kind of model it runs on; `None` for model-free metrics.
    pub model: Option<ModelKind>,
    /// The `models.toml` slot whose default checkpoint it uses.
    pub slot: Option<ModelSlot>,
}

/// How a corpus-level score is built from segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CorpusAggregation {
    /// Score computed from summed segment statistics (sacrebleu).
    SummedStatistics,
    /// Arithmetic mean of the segment scores.
    MeanOfSegments,
}

/// One named component of a score's breakdown (precision, brevity penalty...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScorePart {
    /// Component name (`p1`, `bp`, `recall`...).
    pub name: &'static str,
    /// Its value.
    pub value: f64,
}

/// A computed score with its breakdown and signature.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// Metric id.
    pub metric: &'static str,
    /// The score, higher is better, on the metric's [`Scale`].
    pub value: f64,
    /// Components that explain the value.
    pub parts: Vec<ScorePart>,
    /// sacrebleu-style `key:value|...` string of everything that changes the number.
    pub signature: String,
}

/// Errors raised while scoring.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricError {
    /// The metric id is not registered.
    #[error(transparent)]
    Unknown(#[from] ParseError),
    /// A model-based metric asked for where only model-free metrics run.
    #[error("'{0}' runs on a language model: give it one (`--model`, or load one on the page)")]
    NeedsModel(MetricId),
    /// The metric needs a reference and the segment has none.
    #[error("{metric} needs at least one reference, but segment {segment} has none")]
    MissingReference {
        /// Metric id.
        metric: &'static str,
        /// 1-based segment number.
        segment: usize,
    },
    /// A corpus score was asked for an empty corpus.
    #[error("{metric}: cannot compute a corpus score over zero segments")]
    EmptyCorpus {
        /// Metric id.
        metric: &'static str,
    },
}

/// The behaviour shared by every metric.
pub trait Metric: Send + Sync {
    /// Registry information (id, name, direction, requirements).
    fn info(&self) -> &'static MetricInfo;
    /// The signature of scores at this level with `nrefs` references
    /// (`None`: the count varies across segments).
    fn signature(&self, level: Level, nrefs: Option<usize>) -> Signature;
    /// Scores one segment.
    fn sentence_score(&self, segment: &Segment) -> Result<Score, MetricError>;
    /// Scores a corpus of segments.
    fn corpus_score(&self, segments: &[Segment]) -> Result<Score, MetricError>;
}

/// Every registered metric, model-based ones included, in display order.
pub fn registry() -> Vec<&'static MetricInfo> {
    MetricId::ALL.iter().map(|id| id.info()).collect()
}

/// What a model-based metric needs from its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Any encoder (or decoder) whose hidden states are read.
    Encoder,
    /// A causal language model (GPT-2).
    CausalLm,
    /// A masked language model (BERT, RoBERTa with their MLM head).
    MaskedLm,
    /// A sequence classifier with entailment/neutral/contradiction labels.
    Nli,
    /// A COMET estimator reading hypothesis, reference and source.
    Comet,
    /// A reference-free COMET estimator (COMET-QE).
    CometQe,
    /// A BLEURT regressor reading the reference-candidate pair.
    Bleurt,
    /// An encoder-decoder with a language-model head (BART).
    Seq2SeqLm,
}

/// The registry entries of the model-based metrics.
mod models_info {
    use super::{CorpusAggregation, MetricInfo, ModelKind, ModelSlot, Scale};

    const fn model(
        id: &'static str,
        name: &'static str,
        description: &'static str,
        needs_reference: bool,
        scale: Scale,
        kind: ModelKind,
        slot: ModelSlot,
    ) -> MetricInfo {
        MetricInfo {
            id,
            name,
            description,
            higher_is_better: true,
            needs_reference,
            needs_source: matches!(kind, ModelKind::Comet | ModelKind::CometQe),
            scale,
            corpus: CorpusAggregation::MeanOfSegments,
            model: Some(kind),
            slot: Some(slot),
        }
    }

    pub static BERTSCORE_P: MetricInfo = model(
        "bertscore-p",
        "BERTScore P",
        "BERTScore precision: hypothesis tokens matched to their most similar reference token",
        true,
        Scale::Unit,
        ModelKind::Encoder,
        ModelSlot::BertScore,
    );
    pub static BERTSCORE_R: MetricInfo = model(
        "bertscore-r",
        "BERTScore R",
        "BERTScore recall: reference tokens matched to their most similar hypothesis token",
        true,
        Scale::Unit,
        ModelKind::Encoder,
        ModelSlot::BertScore,
    );
    pub static BERTSCORE_F: MetricInfo = model(
        "bertscore-f",
        "BERTScore F1",
        "BERTScore F1 of precision and recall",
        true,
        Scale::Unit,
        ModelKind::Encoder,
        ModelSlot::BertScore,
    );
    pub static GPT_PPL: MetricInfo = model(
        "gpt-ppl",
        "GPT-PPL",
        "negated perplexity of the hypothesis under a causal language model (GPT-2)",
        false,
        Scale::NegPerplexity,
        ModelKind::CausalLm,
        ModelSlot::GptPpl,
    );
    pub static MLM_PPL: MetricInfo = model(
        "mlm-ppl",
        "MLM-PPL",
        "negated pseudo-perplexity of the hypothesis under a masked language model",
        false,
        Scale::NegPerplexity,
        ModelKind::MaskedLm,
        ModelSlot::MlmPpl,
    );
    pub static MENLI: MetricInfo = model(
        "menli",
        "MENLI",
        "NLI score (entailment, contradiction) of hypothesis and reference or source",
        false,
        Scale::Nli,
        ModelKind::Nli,
        ModelSlot::Menli,
    );
    pub static COMET: MetricInfo = model(
        "comet",
        "COMET",
        "learned MT metric: a regressor on sentence embeddings of hypothesis, reference and source",
        true,
        Scale::Regression,
        ModelKind::Comet,
        ModelSlot::Comet,
    );
    pub static COMET_QE: MetricInfo = model(
        "comet-qe",
        "COMET-QE",
        "reference-free COMET: a regressor on sentence embeddings of hypothesis and source",
        false,
        Scale::Regression,
        ModelKind::CometQe,
        ModelSlot::CometQe,
    );
    pub static BLEURT: MetricInfo = model(
        "bleurt",
        "BLEURT",
        "learned metric: a fine-tuned encoder reading reference and candidate together",
        true,
        Scale::Regression,
        ModelKind::Bleurt,
        ModelSlot::Bleurt,
    );
    pub static BARTSCORE_P: MetricInfo = model(
        "bartscore-p",
        "BARTScore P",
        "BARTScore precision: mean log-likelihood of the hypothesis given the reference under BART",
        true,
        Scale::LogLikelihood,
        ModelKind::Seq2SeqLm,
        ModelSlot::BartScore,
    );
    pub static BARTSCORE_R: MetricInfo = model(
        "bartscore-r",
        "BARTScore R",
        "BARTScore recall: mean log-likelihood of the reference given the hypothesis under BART",
        true,
        Scale::LogLikelihood,
        ModelKind::Seq2SeqLm,
        ModelSlot::BartScore,
    );
    pub static BARTSCORE_F: MetricInfo = model(
        "bartscore-f",
        "BARTScore F",
        "BARTScore F: the arithmetic mean of precision and recall (as the released code computes it)",
        true,
        Scale::LogLikelihood,
        ModelKind::Seq2SeqLm,
        ModelSlot::BartScore,
    );
    pub static MOVERSCORE: MetricInfo = model(
        "moverscore",
        "MoverScore",
        "MoverScore (v2): 1 minus the Earth mover's distance between the reference's and the hypothesis's token embeddings",
        true,
        Scale::Unit,
        ModelKind::Encoder,
        ModelSlot::MoverScore,
    );
    pub static MOVERSCORE_V1: MetricInfo = model(
        "moverscore-v1",
        "MoverScore v1",
        "MoverScore as the paper computes it (moverscore.py): the last 5 layers' min, mean and max per token, n-grams of kept tokens, squared distances",
        true,
        Scale::Unit,
        ModelKind::Encoder,
        ModelSlot::MoverScoreV1,
    );
    pub static BARTSCORE_FAITHFUL: MetricInfo = MetricInfo {
        needs_source: true,
        ..model(
            "bartscore-faithful",
            "BARTScore faithfulness",
            "BARTScore faithfulness: mean log-likelihood of the hypothesis given the source under BART",
            false,
            Scale::LogLikelihood,
            ModelKind::Seq2SeqLm,
            ModelSlot::BartScore,
        )
    };
}

/// The kinds of model-based metric a checkpoint with this head can run.
pub fn model_kinds(config: &crate::models::ModelConfig) -> Vec<ModelKind> {
    use crate::models::Head;
    match config.head {
        Head::CausalLm => vec![ModelKind::CausalLm],
        Head::MaskedLm => vec![ModelKind::Encoder, ModelKind::MaskedLm],
        Head::None => vec![ModelKind::Encoder],
        Head::Comet(crate::models::comet::CometKind::Regression) => vec![ModelKind::Comet],
        Head::Comet(crate::models::comet::CometKind::Referenceless) => vec![ModelKind::CometQe],
        Head::Seq2SeqLm => vec![ModelKind::Seq2SeqLm],
        Head::SequenceClassification => {
            let has = |p: &str| {
                config
                    .labels
                    .iter()
                    .any(|l| l.to_lowercase().starts_with(p))
            };
            // A classifier's encoder is an encoder too: bert_score's
            // recommended model and MoverScore v1's are MNLI classifiers.
            if has("entail") && has("neutral") && has("contradict") {
                vec![ModelKind::Nli, ModelKind::Encoder]
            } else if bleurt::is_bleurt(config) {
                vec![ModelKind::Bleurt]
            } else {
                vec![ModelKind::Encoder]
            }
        }
    }
}

/// The model-based metrics a checkpoint can run (`gpt-ppl` for GPT-2,
/// BERTScore and `mlm-ppl` for a masked LM...).
pub fn model_metrics_for(config: &crate::models::ModelConfig) -> Vec<MetricId> {
    let kinds = model_kinds(config);
    MetricId::ALL
        .iter()
        .copied()
        .filter(|id| id.info().model.is_some_and(|k| kinds.contains(&k)))
        .collect()
}

/// Builds the model-free metric registered under `id`, with its defaults
/// and the ROUGE stemmer as given.
pub fn create(id: &str, rouge_stemmer: bool) -> Result<Box<dyn Metric>, MetricError> {
    let id: MetricId = id.parse()?;
    let settings = Settings {
        rouge_stemmer,
        ..Settings::default()
    };
    settings
        .spec(id)
        .lexical()
        .ok_or(MetricError::NeedsModel(id))
}

/// The number of references when every segment has the same count.
pub(crate) fn uniform_nrefs(segments: &[Segment]) -> Option<usize> {
    let first = segments.first()?.refs.len();
    segments
        .iter()
        .all(|s| s.refs.len() == first)
        .then_some(first)
}

/// Checks that every segment has a reference; returns the first offender.
fn require_references(metric: &'static str, segments: &[Segment]) -> Result<(), MetricError> {
    match segments.iter().position(|s| s.refs.is_empty()) {
        Some(i) => Err(MetricError::MissingReference {
            metric,
            segment: i + 1,
        }),
        None => Ok(()),
    }
}

/// The most items [`count`] makes room for up front.
const COUNT_ROOM: usize = 1024;

/// Counts items into a map (Python's `collections.Counter`). FxHash: n-gram
/// keys are short and numerous, and SipHash dominated the profile.
fn count<K: std::hash::Hash + Eq>(
    items: impl IntoIterator<Item = K>,
) -> rustc_hash::FxHashMap<K, u32> {
    let items = items.into_iter();
    // Room for a sentence's items up front (growing the table rehashes what
    // it holds); a document's repeat, and a table sized for all of them
    // would be mostly empty, and slower to fill.
    let room = items.size_hint().0.min(COUNT_ROOM);
    let mut counts = rustc_hash::FxHashMap::with_capacity_and_hasher(room, Default::default());
    for item in items {
        *counts.entry(item).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_ids_are_unique_and_lexical_ones_creatable() {
        let ids: Vec<_> = registry().iter().map(|m| m.id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
        for info in registry() {
            match create(info.id, false) {
                Ok(metric) => {
                    assert!(info.model.is_none());
                    assert_eq!(metric.info().id, info.id);
                    let sig = metric.signature(Level::Corpus, Some(1)).to_string();
                    assert!(sig.contains("|v:"), "{sig}");
                }
                Err(e) => {
                    assert!(info.model.is_some() && info.slot.is_some(), "{e}");
                    assert!(e.to_string().contains("runs on a language model"), "{e}");
                }
            }
        }
    }

    #[test]
    fn missing_reference_is_an_error_not_a_zero() {
        for info in registry().into_iter().filter(|i| i.model.is_none()) {
            let metric = create(info.id, false).unwrap();
            let seg = Segment {
                hyp: "a cat",
                refs: &[],
                src: None,
            };
            assert!(matches!(
                metric.sentence_score(&seg),
                Err(MetricError::MissingReference { segment: 1, .. })
            ));
        }
    }
}
