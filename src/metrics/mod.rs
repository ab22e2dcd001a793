//! Evaluation metrics: one module per metric, listed once.
//!
//! Every metric scores a [`Segment`] (hypothesis, references, optional source).
//! A metric module owns its options (a serde struct: the spec's fields and the
//! option schema the CLI and the page build their controls from), its
//! description ([`registry::About`]) and its scoring: model-free metrics
//! implement [`Metric`] ([`registry::LexicalModule`]), model-based ones
//! [`registry::ModelModule`], which the [`Engine`] calls with the specs that
//! share a pass. The registry below names each module once; [`MetricId`],
//! [`MetricSpec`], [`ModelSlot`], the info table and the exported schema
//! ([`registry::kinds`]) come from it.
//!
//! Lexical metrics follow sacrebleu's design: per-segment sufficient
//! statistics, and a corpus score computed from their sum, so a sentence
//! score is the corpus score of one segment (BLEU, chrF). ROUGE has no corpus
//! statistic in rouge-score; its corpus score is the mean of segment scores,
//! as is every model-based metric's.
//!
//! Each score carries its breakdown and the metric's signature string, which
//! records every option that changes the number. Most metrics are "higher is
//! better" ([`MetricInfo::higher_is_better`] says which are not); suites and
//! searches orient scores through [`MetricInfo::oriented`].

pub mod bartscore;
pub mod bertscore;
pub mod bleu;
pub mod bleurt;
pub mod chrf;
pub mod comet;
pub mod custom_judge;
pub mod detail;
pub mod engine;
pub mod gemba;
pub mod gemba_mqm;
pub mod geval;
pub mod mauve;
pub mod menli;
pub mod moverscore;
pub mod pairwise;
pub mod perplexity;
pub mod prism;
pub mod registry;
pub mod rouge;
pub mod signature;
pub mod spec;
pub mod ter;
pub mod tokenizer_13a;
pub mod unieval;

use serde::Serialize;

pub use bleu::Bleu;
pub use chrf::Chrf;
pub use engine::{Column, Engine, EngineError, ModelStore};
pub use rouge::{Rouge, RougeKind};
pub use signature::Signature;
pub use spec::{ParseError, Settings};

// The one list of metrics: every kind (a spec tag and the module that owns
// it) with the ids of the columns it fills. Adding a metric is a module and
// a line here.
registry::metric_registry! {
    lexical {
        Bleu("bleu") = bleu::BleuMetric [Bleu "bleu"],
        Chrf("chrf") = chrf::ChrfMetric [Chrf "chrf"],
        Ter("ter") = ter::TerMetric [Ter "ter"],
        Rouge1("rouge1") = rouge::Rouge1Metric [Rouge1 "rouge1"],
        Rouge2("rouge2") = rouge::Rouge2Metric [Rouge2 "rouge2"],
        RougeL("rougeL") = rouge::RougeLMetric [RougeL "rougeL"],
    }
    model {
        BertScore("bertscore") = bertscore::BertScoreMetric
            [BertScoreP "bertscore-p", BertScoreR "bertscore-r", BertScoreF "bertscore-f"],
        GptPpl("gpt-ppl") = perplexity::GptPplMetric [GptPpl "gpt-ppl"],
        MlmPpl("mlm-ppl") = perplexity::MlmPplMetric [MlmPpl "mlm-ppl"],
        Menli("menli") = menli::MenliMetric [Menli "menli"],
        Comet("comet") = comet::CometMetric [Comet "comet"],
        CometQe("comet-qe") = comet::CometQeMetric [CometQe "comet-qe"],
        Bleurt("bleurt") = bleurt::BleurtMetric [Bleurt "bleurt"],
        BartScore("bartscore") = bartscore::BartScoreMetric [
            BartScoreP "bartscore-p",
            BartScoreR "bartscore-r",
            BartScoreF "bartscore-f",
            BartScoreFaithful "bartscore-faithful",
        ],
        MoverScore("moverscore") = moverscore::MoverScoreMetric [MoverScore "moverscore"],
        MoverScoreV1("moverscore-v1") = moverscore::MoverScoreV1Metric [MoverScoreV1 "moverscore-v1"],
        UniEval("unieval") = unieval::UniEvalMetric [
            UniEvalCoherence "unieval-coherence",
            UniEvalConsistency "unieval-consistency",
            UniEvalFluency "unieval-fluency",
            UniEvalRelevance "unieval-relevance",
            UniEvalOverall "unieval-overall",
        ],
        UniEvalFact("unieval-fact") = unieval::UniEvalFactMetric [UniEvalFact "unieval-fact"],
        Prism("prism") = prism::PrismMetric [PrismRef "prism-ref", PrismQe "prism-qe"],
        GEval("g-eval") = geval::GEvalMetric [
            GEvalCoherence "g-eval-coherence",
            GEvalConsistency "g-eval-consistency",
            GEvalFluency "g-eval-fluency",
            GEvalRelevance "g-eval-relevance",
        ],
        GembaDa("gemba-da") = gemba::GembaDaMetric [GembaDa "gemba-da", GembaDaRef "gemba-da-ref"],
        GembaMqm("gemba-mqm") = gemba_mqm::GembaMqmMetric [
            GembaMqm "gemba-mqm",
            GembaMqmNorm "gemba-mqm-norm",
        ],
        Pairwise("pairwise") = pairwise::PairwiseMetric [Pairwise "pairwise"],
        CustomJudge("custom-judge") = custom_judge::CustomJudgeMetric [CustomJudge "custom-judge"],
    }
    sets {
        Mauve("mauve"),
    }
}

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

/// The range a metric's values live in, for display: a few shared ones
/// below, and a metric module may define its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Stable name (`percent`), what result files and the page read.
    pub id: &'static str,
    /// The short label shown beside a value (`0–100`).
    pub label: &'static str,
    /// Decimal places a value is shown with (sacrebleu prints BLEU and chrF
    /// with 2; 0-1 scores need 4 to show a small change).
    pub digits: usize,
}

impl Scale {
    /// 0 to 100 (sacrebleu's BLEU and chrF).
    pub const PERCENT: Scale = Scale {
        id: "percent",
        label: "0–100",
        digits: 2,
    };
    /// 0 to 1 (rouge-score, BERTScore).
    pub const UNIT: Scale = Scale {
        id: "unit",
        label: "0–1",
        digits: 4,
    };
    /// Negated perplexity (unbounded below, -1 at best).
    pub const NEG_PERPLEXITY: Scale = Scale {
        id: "negperplexity",
        label: "−perplexity",
        digits: 4,
    };
    /// A formula of NLI probabilities (-2 to 1).
    pub const NLI: Scale = Scale {
        id: "nli",
        label: "NLI",
        digits: 4,
    };
    /// A learned regressor's output (COMET: about 0 to 1 for wmt22 models,
    /// unbounded z-score-like for wmt20 ones; BLEURT-20: about 0 to 1).
    pub const REGRESSION: Scale = Scale {
        id: "regression",
        label: "learned",
        digits: 4,
    };
    /// A judge's rating from 1 to 5 (G-Eval).
    pub const RATING5: Scale = Scale {
        id: "rating5",
        label: "1–5",
        digits: 4,
    };
    /// A judge's rating from 1 to 3 (G-Eval's fluency).
    pub const RATING3: Scale = Scale {
        id: "rating3",
        label: "1–3",
        digits: 4,
    };
    /// A mean token log-likelihood in nats (at most 0; BARTScore).
    pub const LOG_LIKELIHOOD: Scale = Scale {
        id: "loglikelihood",
        label: "log-likelihood",
        digits: 4,
    };
}

impl Serialize for Scale {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id)
    }
}

/// What the registry knows about a metric column before it is run: built
/// from its module's [`registry::About`] and the registry's id.
#[derive(Debug, Clone, Serialize)]
pub struct MetricInfo {
    /// Stable identifier used by the CLI, the page and result files (`bleu`).
    pub id: &'static str,
    /// The kind (spec tag) whose module fills it (`bertscore` for `bertscore-f`).
    pub kind: &'static str,
    /// Human-readable name (`BLEU`).
    pub name: &'static str,
    /// One line: what the number means (tooltips, `blindspot metrics`).
    pub description: &'static str,
    /// True when larger values mean better text.
    pub higher_is_better: bool,
    /// True when the metric cannot run without a reference.
    pub needs_reference: bool,
    /// True when the metric cannot run without a source.
    pub needs_source: bool,
    /// What it reads, for people (`hypothesis + reference + source`).
    pub reads: &'static str,
    /// Value range, for display.
    pub scale: Scale,
    /// The scale's label ([`Scale::label`]).
    pub scale_label: &'static str,
    /// Decimal places values are shown with ([`Scale::digits`]).
    pub digits: usize,
    /// How the corpus-level score is formed.
    pub corpus: CorpusAggregation,
    /// The kind of model it runs on; `None` for model-free metrics.
    pub model: Option<ModelKind>,
    /// The `models.toml` slot whose default checkpoint it uses.
    pub slot: Option<ModelSlot>,
}

impl MetricSpec {
    /// The registry's information on the column this spec fills.
    pub fn info(&self) -> &'static MetricInfo {
        self.id().info()
    }
}

impl MetricInfo {
    /// `value` oriented so that larger is better (negated where smaller is
    /// better): what the rank rule, the preference test and the searches
    /// compare. Reports keep the metric's own values.
    pub fn oriented(&self, value: f64) -> f64 {
        if self.higher_is_better { value } else { -value }
    }
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

/// Every registered metric column, model-based ones included, in display order.
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
    /// A causal LM with a chat template: an instruction model an LLM judge
    /// runs on (a base model, GPT-2, is not offered to judges).
    ChatLm,
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
    metrics_of_kinds(&model_kinds(config))
}

/// The kinds a loaded model can serve as: its head's
/// ([`model_kinds`]), and an instruction model's ([`ModelKind::ChatLm`])
/// where a causal LM has a chat template.
pub fn plm_kinds(plm: &crate::models::Plm) -> Vec<ModelKind> {
    let mut kinds = model_kinds(&plm.config);
    if kinds.contains(&ModelKind::CausalLm) && matches!(plm.chat_template, Ok(Some(_))) {
        kinds.push(ModelKind::ChatLm);
    }
    kinds
}

/// The model-based metrics a loaded model can run ([`plm_kinds`]).
pub fn plm_metrics(plm: &crate::models::Plm) -> Vec<MetricId> {
    metrics_of_kinds(&plm_kinds(plm))
}

fn metrics_of_kinds(kinds: &[ModelKind]) -> Vec<MetricId> {
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
    let mut spec = MetricSpec::default_for(id);
    if let MetricSpec::Rouge1(o) | MetricSpec::Rouge2(o) | MetricSpec::RougeL(o) = &mut spec {
        o.stemmer = rouge_stemmer;
    }
    spec.lexical().ok_or(MetricError::NeedsModel(id))
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
