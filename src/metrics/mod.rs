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

pub mod bertscore;
pub mod bleu;
pub mod chrf;
pub mod mauve;
pub mod menli;
pub mod perplexity;
pub mod rouge;
pub mod tokenizer_13a;

use serde::Serialize;

pub use bleu::Bleu;
pub use chrf::Chrf;
pub use rouge::{Rouge, RougeKind};

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
    /// 0 to 1 (rouge-score).
    Unit,
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
    #[error("unknown metric '{0}' (known: {known})", known = known_ids())]
    UnknownMetric(String),
    /// A model-based metric asked for where only model-free metrics run.
    #[error("'{0}' runs on a language model: score it with `blindspot score --metrics {0}` or on the page once a model is loaded (here: {known})", known = registry().iter().map(|m| m.id).collect::<Vec<_>>().join(", "))]
    NeedsModel(String),
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
    /// The signature string for scores at this level with `nrefs` references.
    fn signature(&self, level: Level, nrefs: usize) -> String;
    /// Scores one segment.
    fn sentence_score(&self, segment: &Segment) -> Result<Score, MetricError>;
    /// Scores a corpus of segments.
    fn corpus_score(&self, segments: &[Segment]) -> Result<Score, MetricError>;
}

/// Options that change how registered metrics compute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricOptions {
    /// Apply the Porter stemmer before ROUGE matching (rouge-score `use_stemmer`).
    pub rouge_stemmer: bool,
}

/// Every registered metric, in display order.
pub fn registry() -> [&'static MetricInfo; 5] {
    [
        &bleu::INFO,
        &chrf::INFO,
        &rouge::ROUGE1_INFO,
        &rouge::ROUGE2_INFO,
        &rouge::ROUGEL_INFO,
    ]
}

fn known_ids() -> String {
    registry()
        .iter()
        .map(|m| m.id)
        .chain(MODEL_METRICS.iter().map(|m| m.id))
        .collect::<Vec<_>>()
        .join(", ")
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
}

/// A model-based metric: scored through its own module, on a loaded model.
#[derive(Debug, Clone, Serialize)]
pub struct ModelMetricInfo {
    /// Stable identifier (`gpt-ppl`).
    pub id: &'static str,
    /// Human-readable name.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// True when the metric cannot run without a reference (MENLI's
    /// reference-free mode uses the source instead).
    pub needs_reference: bool,
    /// The kind of model it runs on.
    pub model: ModelKind,
    /// The `models.toml` metric name whose default checkpoint it uses.
    pub registry_metric: &'static str,
}

/// Every model-based metric, in display order.
pub const MODEL_METRICS: [ModelMetricInfo; 6] = [
    ModelMetricInfo {
        id: "bertscore-p",
        name: "BERTScore P",
        description: "BERTScore precision: hypothesis tokens matched to their most similar reference token",
        needs_reference: true,
        model: ModelKind::Encoder,
        registry_metric: "bertscore",
    },
    ModelMetricInfo {
        id: "bertscore-r",
        name: "BERTScore R",
        description: "BERTScore recall: reference tokens matched to their most similar hypothesis token",
        needs_reference: true,
        model: ModelKind::Encoder,
        registry_metric: "bertscore",
    },
    ModelMetricInfo {
        id: "bertscore-f",
        name: "BERTScore F1",
        description: "BERTScore F1 of precision and recall",
        needs_reference: true,
        model: ModelKind::Encoder,
        registry_metric: "bertscore",
    },
    ModelMetricInfo {
        id: "gpt-ppl",
        name: "GPT-PPL",
        description: "negated perplexity of the hypothesis under a causal language model (GPT-2)",
        needs_reference: false,
        model: ModelKind::CausalLm,
        registry_metric: "gpt-ppl",
    },
    ModelMetricInfo {
        id: "mlm-ppl",
        name: "MLM-PPL",
        description: "negated pseudo-perplexity of the hypothesis under a masked language model",
        needs_reference: false,
        model: ModelKind::MaskedLm,
        registry_metric: "mlm-ppl",
    },
    ModelMetricInfo {
        id: "menli",
        name: "MENLI",
        description: "NLI score (entailment, contradiction) of hypothesis and reference or source",
        needs_reference: false,
        model: ModelKind::Nli,
        registry_metric: "menli",
    },
];

/// The kinds of model-based metric a checkpoint with this head can run.
pub fn model_kinds(config: &crate::models::ModelConfig) -> Vec<ModelKind> {
    use crate::models::Head;
    match config.head {
        Head::CausalLm => vec![ModelKind::CausalLm],
        Head::MaskedLm => vec![ModelKind::Encoder, ModelKind::MaskedLm],
        Head::None => vec![ModelKind::Encoder],
        Head::SequenceClassification => {
            let has = |p: &str| {
                config
                    .labels
                    .iter()
                    .any(|l| l.to_lowercase().starts_with(p))
            };
            if has("entail") && has("neutral") && has("contradict") {
                vec![ModelKind::Nli]
            } else {
                vec![]
            }
        }
    }
}

/// Ids of the model-based metrics a checkpoint can run (`gpt-ppl` for
/// GPT-2, BERTScore and `mlm-ppl` for a masked LM...).
pub fn model_metrics_for(config: &crate::models::ModelConfig) -> Vec<&'static str> {
    let kinds = model_kinds(config);
    MODEL_METRICS
        .iter()
        .filter(|m| kinds.contains(&m.model))
        .map(|m| m.id)
        .collect()
}

/// The model-based metric registered under `id`.
pub fn model_metric(id: &str) -> Option<&'static ModelMetricInfo> {
    MODEL_METRICS.iter().find(|m| m.id == id)
}

/// Builds the metric registered under `id`.
pub fn create(id: &str, options: MetricOptions) -> Result<Box<dyn Metric>, MetricError> {
    Ok(match id {
        "bleu" => Box::new(Bleu::default()),
        "chrf" => Box::new(Chrf::default()),
        "rouge1" => Box::new(Rouge::new(RougeKind::N(1), options.rouge_stemmer)),
        "rouge2" => Box::new(Rouge::new(RougeKind::N(2), options.rouge_stemmer)),
        "rougeL" => Box::new(Rouge::new(RougeKind::Lcs, options.rouge_stemmer)),
        other if model_metric(other).is_some() => {
            return Err(MetricError::NeedsModel(other.to_string()));
        }
        other => return Err(MetricError::UnknownMetric(other.to_string())),
    })
}

/// The number of references when every segment has the same count.
fn uniform_nrefs(segments: &[Segment]) -> Option<usize> {
    let first = segments.first()?.refs.len();
    segments
        .iter()
        .all(|s| s.refs.len() == first)
        .then_some(first)
}

/// The `nrefs` signature field: the count, or `var` when it varies (sacrebleu).
fn nrefs_label(nrefs: Option<usize>) -> String {
    nrefs.map_or("var".to_string(), |n| n.to_string())
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

/// Counts items into a map (Python's `collections.Counter`). FxHash: n-gram
/// keys are short and numerous, and SipHash dominated the profile.
fn count<K: std::hash::Hash + Eq>(
    items: impl IntoIterator<Item = K>,
) -> rustc_hash::FxHashMap<K, u32> {
    let mut counts = rustc_hash::FxHashMap::default();
    for item in items {
        *counts.entry(item).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_ids_are_unique_and_creatable() {
        let ids: Vec<_> = registry().iter().map(|m| m.id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
        for id in ids {
            let metric = create(id, MetricOptions::default()).unwrap();
            assert_eq!(metric.info().id, id);
            assert!(metric.signature(Level::Corpus, 1).contains("|v:"));
        }
    }

    #[test]
    fn unknown_metric_lists_known_ids() {
        let err = create("bleurt", MetricOptions::default()).err().unwrap();
        assert_eq!(
            err.to_string(),
            "unknown metric 'bleurt' (known: bleu, chrf, rouge1, rouge2, rougeL, bertscore-p, \
             bertscore-r, bertscore-f, gpt-ppl, mlm-ppl, menli)"
        );
        let err = create("gpt-ppl", MetricOptions::default()).err().unwrap();
        assert!(
            err.to_string().contains("runs on a language model"),
            "{err}"
        );
    }

    #[test]
    fn missing_reference_is_an_error_not_a_zero() {
        for info in registry() {
            let metric = create(info.id, MetricOptions::default()).unwrap();
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
