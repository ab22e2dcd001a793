//! The metric engine: every metric, model-free or model-based, scored
//! through one call.
//!
//! [`Engine::score`] takes resolved [`MetricSpec`]s and a batch of
//! [`Segment`]s and returns one [`Column`] per spec: a score per segment
//! (with its parts), a corpus score (sacrebleu's from summed statistics for
//! BLEU and chrF, the mean of the segment scores otherwise) and the
//! signature. Model passes are asynchronous (WebGPU reads are); each
//! distinct text is run once, and BERTScore P, R and F on the same model,
//! layer and weights share one pass. The models come from a [`ModelStore`]:
//! folders natively, the page's loaded models in the browser. The CLI, the
//! page, the suites, the preference suite and the audit all score here.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use serde::Serialize;

use super::bartscore;
use super::bertscore::{self, EmbeddingCache};
use super::bleurt;
use super::comet::{self, CometInput, SentenceCache};
use super::menli::{self, NliProbs, Premise};
use super::moverscore;
use super::perplexity;
use super::spec::{
    BartPart, BartScoreSpec, BertScoreSpec, MetricId, MetricSpec, ModelSlot, Part, SpecError,
};
use super::{Level, MetricError, Score, ScorePart, Segment, Signature, uniform_nrefs};
use crate::models::{ModelError, Plm};

/// Where the engine gets its models.
pub trait ModelStore {
    /// The model of `slot`: the one `name` gives (a folder natively, a
    /// loaded model's name on the page), or the slot's default when `None`.
    fn model(&self, slot: ModelSlot, name: Option<&str>) -> Result<Rc<Plm>, EngineError>;
}

/// A store without models: model-based specs are refused with a message.
pub struct NoModels;

impl ModelStore for NoModels {
    fn model(&self, slot: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Err(EngineError::NoModel(format!(
            "{slot} runs on a language model and none is available here"
        )))
    }
}

/// Why scoring failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A model-free metric refused its input.
    #[error(transparent)]
    Metric(#[from] MetricError),
    /// An option that cannot be used.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// No model for a model-based metric.
    #[error("{0}")]
    NoModel(String),
    /// A model failed to load or run.
    #[error("{model}: {message}")]
    Model {
        /// The model (folder or name).
        model: String,
        /// What went wrong.
        message: String,
    },
    /// The input cannot be scored by this metric.
    #[error("{metric}: {message}")]
    Input {
        /// The metric.
        metric: MetricId,
        /// What is wrong with the input.
        message: String,
    },
}

fn model_error(plm: &Plm) -> impl Fn(ModelError) -> EngineError + '_ {
    |e| EngineError::Model {
        model: plm.name.clone(),
        message: e.to_string(),
    }
}

/// What a model-based score shows beyond its value (the page draws it).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Detail {
    /// BERTScore's greedy alignment with the best reference.
    #[serde(rename_all = "camelCase")]
    Alignment {
        /// Index of the reference with the best F.
        best_reference: usize,
        /// Hypothesis tokens as text.
        hyp_tokens: Vec<String>,
        /// The best reference's tokens as text.
        ref_tokens: Vec<String>,
        /// Token weights (0 for special tokens; idf where on).
        hyp_weights: Vec<f32>,
        /// Reference token weights.
        ref_weights: Vec<f32>,
        /// `[hyp tokens, ref tokens]` cosine similarities, row-major.
        similarity: Vec<f32>,
        /// Each hypothesis token's best reference token.
        hyp_best: Vec<usize>,
        /// Each reference token's best hypothesis token.
        ref_best: Vec<usize>,
        /// The layer read.
        layer: usize,
        /// A text was cut to the model's limit.
        truncated: bool,
    },
    /// Per-token surprisal of a perplexity.
    Surprisal {
        /// Each token's text and surprisal in nats (None: not scored).
        tokens: Vec<(String, Option<f64>)>,
        /// Byte span of each token in the text (empty for added tokens).
        spans: Vec<(usize, usize)>,
        /// The text was cut to the model's limit.
        truncated: bool,
    },
    /// BARTScore's per-token log-likelihoods of the target text shown.
    TokenLogprobs {
        /// `hypothesis` or `reference`: the text scored given the other.
        target: &'static str,
        /// Each target token's text and log-probability in nats.
        tokens: Vec<(String, f64)>,
        /// Byte span of each token in the target (empty for `<s>`, `</s>`).
        spans: Vec<(usize, usize)>,
        /// A text was cut to the model's limit.
        truncated: bool,
    },
    /// MoverScore's transport plan.
    #[serde(rename_all = "camelCase")]
    Flow {
        /// Reference tokens as the tokenizer spells them.
        ref_tokens: Vec<String>,
        /// Hypothesis tokens.
        hyp_tokens: Vec<String>,
        /// Each reference token's mass (0: removed).
        ref_mass: Vec<f64>,
        /// Each hypothesis token's mass.
        hyp_mass: Vec<f64>,
        /// Mass moved, row-major `[ref tokens, hyp tokens]`.
        flow: Vec<f64>,
        /// A text was cut to the model's limit.
        truncated: bool,
    },
    /// MENLI's probabilities for the best premise.
    #[serde(rename_all = "camelCase")]
    Nli {
        /// Premise -> hypothesis.
        forward: NliProbs,
        /// Hypothesis -> premise.
        backward: NliProbs,
        /// Index of the reference that scored best.
        premise: usize,
        /// `reference` or `source`.
        premise_kind: Premise,
    },
}

/// One metric's scores over a batch of segments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Column {
    /// The spec scored, with defaults resolved where a model decides them
    /// (BERTScore's layer).
    pub spec: MetricSpec,
    /// One score per segment.
    pub scores: Vec<Score>,
    /// Details per segment, when the engine was asked for them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Detail>,
    /// The corpus score.
    pub corpus: Score,
    /// The sentence-level signature.
    pub signature: Signature,
}

impl Column {
    /// The segment values.
    pub fn values(&self) -> Vec<f64> {
        self.scores.iter().map(|s| s.value).collect()
    }

    fn new(spec: MetricSpec, scores: Vec<Score>, signature: Signature) -> Self {
        let id = spec.id();
        let mean = scores.iter().map(|s| s.value).sum::<f64>() / scores.len().max(1) as f64;
        Column {
            corpus: Score {
                metric: id.info().id,
                value: mean,
                parts: vec![],
                signature: signature.to_string(),
            },
            spec,
            scores,
            details: vec![],
            signature,
        }
    }
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Scores metric specs over segments with models from a [`ModelStore`].
pub struct Engine {
    store: Box<dyn ModelStore>,
    details: bool,
    reference_cache: bool,
    cache: RefCell<EmbeddingCache>,
    sentences: RefCell<SentenceCache>,
    /// BERTScore's idf weights over the last sets scored within.
    set_bertscore: SetWeights<bertscore::Weights>,
    /// MoverScore's idf weights over the last sets scored within.
    set_moverscore: SetWeights<moverscore::IdfWeights>,
}

/// Weights counted over the last whole sets that batches were scored within
/// ([`Engine::score_within`]), the most recently used last: a suite scores a
/// set's batches one after another, so each set is counted once, not once
/// per batch. The preference suite alternates four sets per batch (two
/// settings, each side apart), so [`SETS_KEPT`] are kept.
type SetWeights<T> = RefCell<Vec<(SetKey, Rc<T>)>>;

/// How many sets' weights an engine keeps per metric.
const SETS_KEPT: usize = 4;

/// What set weights were counted over: the model load and the set's
/// references, and its hypotheses where the weights read them.
struct SetKey {
    load: u64,
    hyps: Option<Vec<String>>,
    refs: Vec<Vec<String>>,
}

impl SetKey {
    fn is(&self, load: u64, set: &[Segment<'_>]) -> bool {
        self.load == load
            && self.refs.len() == set.len()
            && set
                .iter()
                .zip(&self.refs)
                .all(|(s, refs)| s.refs == refs.as_slice())
            && self
                .hyps
                .as_ref()
                .is_none_or(|hyps| set.iter().zip(hyps).all(|(s, hyp)| s.hyp == hyp))
    }

    /// The weights of `set` from `slot` when one of the sets kept there is it
    /// (its references, and its hypotheses where `read_hyps`), else
    /// `count`ed and kept there (the least recently used goes past
    /// [`SETS_KEPT`]). `slot` is not borrowed while `count` runs.
    fn cached<T, E>(
        slot: &SetWeights<T>,
        load: u64,
        set: &[Segment<'_>],
        read_hyps: bool,
        count: impl FnOnce() -> Result<T, E>,
    ) -> Result<Rc<T>, E> {
        {
            let mut kept = slot.borrow_mut();
            if let Some(i) = kept
                .iter()
                .position(|(key, _)| key.is(load, set) && key.hyps.is_some() == read_hyps)
            {
                let entry = kept.remove(i);
                let weights = entry.1.clone();
                kept.push(entry);
                return Ok(weights);
            }
        }
        let weights = Rc::new(count()?);
        let key = SetKey {
            load,
            hyps: read_hyps.then(|| set.iter().map(|s| s.hyp.to_owned()).collect()),
            refs: set
                .iter()
                .map(|s| s.refs.iter().map(|r| (*r).to_owned()).collect())
                .collect(),
        };
        let mut kept = slot.borrow_mut();
        kept.push((key, weights.clone()));
        let excess = kept.len().saturating_sub(SETS_KEPT);
        kept.drain(..excess);
        Ok(weights)
    }
}

impl Engine {
    /// An engine drawing its models from `store`.
    pub fn new(store: impl ModelStore + 'static) -> Self {
        Self {
            store: Box::new(store),
            details: false,
            reference_cache: false,
            cache: RefCell::new(EmbeddingCache::default()),
            sentences: RefCell::new(SentenceCache::default()),
            set_bertscore: RefCell::default(),
            set_moverscore: RefCell::default(),
        }
    }

    /// An engine for model-free metrics only.
    pub fn lexical() -> Self {
        Self::new(NoModels)
    }

    /// Also returns each model-based score's [`Detail`] (the page's heatmap,
    /// surprisal bar and NLI bars), and keeps recent reference embeddings.
    pub fn with_details(mut self) -> Self {
        self.details = true;
        self.reference_cache = true;
        self
    }

    /// Keeps recent reference embeddings between calls (no details): for
    /// callers that score many hypotheses against the same references one
    /// batch at a time (the attack search, lessons).
    pub fn with_reference_cache(mut self) -> Self {
        self.reference_cache = true;
        self
    }

    /// The model of `slot` from the engine's store (`name` as in a spec's
    /// `model`): for callers that run a model directly, as MAUVE's set-level
    /// featurising does.
    pub fn model(&self, slot: ModelSlot, name: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        self.store.model(slot, name)
    }

    /// Forgets cached embeddings of a model load (`Plm::load_id`, unloaded).
    pub fn forget(&self, load: u64) {
        self.cache.borrow_mut().forget(load);
        self.sentences.borrow_mut().forget(load);
        // A set's weights keep copies of its texts: gone with the model.
        self.set_bertscore
            .borrow_mut()
            .retain(|(key, _)| key.load != load);
        self.set_moverscore
            .borrow_mut()
            .retain(|(key, _)| key.load != load);
    }

    /// Scores every segment with each spec, in the order given.
    pub async fn score(
        &self,
        specs: &[MetricSpec],
        segments: &[Segment<'_>],
    ) -> Result<Vec<Column>, EngineError> {
        self.score_in(specs, segments, None).await
    }

    /// Scores `segments`, a batch of the larger `set`, as if the whole set
    /// were scored in one call: options that read the set's texts (BERTScore's
    /// and MoverScore's idf, [`MetricSpec::whole_set`]) read `set`'s. A
    /// suite scores a dataset in batches this way. MENLI's min-max
    /// combination reads the set's scores, not its texts: it is refused
    /// unless the batch is the whole set (the same slice).
    pub async fn score_within(
        &self,
        specs: &[MetricSpec],
        segments: &[Segment<'_>],
        set: &[Segment<'_>],
    ) -> Result<Vec<Column>, EngineError> {
        if std::ptr::eq(segments, set) {
            return self.score_in(specs, segments, None).await;
        }
        if let Some(spec) = specs.iter().find(|s| s.reads_set_scores()) {
            return Err(EngineError::Input {
                metric: spec.id(),
                message: "MENLI's min-max combination reads the scores of the whole set, \
                          so it cannot be scored a batch at a time"
                    .into(),
            });
        }
        self.score_in(specs, segments, Some(set)).await
    }

    async fn score_in(
        &self,
        specs: &[MetricSpec],
        segments: &[Segment<'_>],
        set: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        let mut out: Vec<Option<Column>> = specs.iter().map(|_| None).collect();
        for (i, spec) in specs.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            spec.validate()?;
            if let MetricSpec::BertScore(b) = spec {
                // Every BERTScore part on the same pass comes from one run.
                let key = b.pass_key();
                let group: Vec<(usize, Part)> = specs
                    .iter()
                    .enumerate()
                    .filter_map(|(j, s)| match s {
                        MetricSpec::BertScore(o) if o.pass_key() == key => Some((j, o.part)),
                        _ => None,
                    })
                    .collect();
                let parts: Vec<Part> = group.iter().map(|g| g.1).collect();
                let columns = self.bertscore(&key, &parts, segments, set).await?;
                for ((j, _), column) in group.into_iter().zip(columns) {
                    out[j] = Some(column);
                }
            } else if let MetricSpec::BartScore(b) = spec {
                // BARTScore's parts on one model share their passes.
                let key = b.pass_key();
                let group: Vec<(usize, BartPart)> = specs
                    .iter()
                    .enumerate()
                    .filter_map(|(j, s)| match s {
                        MetricSpec::BartScore(o) if o.pass_key() == key => Some((j, o.part)),
                        _ => None,
                    })
                    .collect();
                let parts: Vec<BartPart> = group.iter().map(|g| g.1).collect();
                let columns = self.bartscore(&key, &parts, segments).await?;
                for ((j, _), column) in group.into_iter().zip(columns) {
                    out[j] = Some(column);
                }
            } else {
                out[i] = Some(self.column(spec, segments, set).await?);
            }
        }
        Ok(out
            .into_iter()
            .map(|c| c.expect("every spec scored"))
            .collect())
    }

    /// Scores with model-free metrics only, synchronously.
    pub fn score_lexical(
        specs: &[MetricSpec],
        segments: &[Segment<'_>],
    ) -> Result<Vec<Column>, EngineError> {
        specs
            .iter()
            .map(|spec| lexical_column(spec, segments))
            .collect()
    }

    fn column<'a>(
        &'a self,
        spec: &'a MetricSpec,
        segments: &'a [Segment<'a>],
        set: Option<&'a [Segment<'a>]>,
    ) -> Boxed<'a, Result<Column, EngineError>> {
        Box::pin(async move {
            match spec {
                MetricSpec::BertScore(b) => Ok(self
                    .bertscore(&b.pass_key(), &[b.part], segments, set)
                    .await?
                    .remove(0)),
                MetricSpec::GptPpl { model, bos } => {
                    let plm = self.store.model(ModelSlot::GptPpl, model.as_deref())?;
                    self.perplexity(spec, &plm, segments, Some(*bos)).await
                }
                MetricSpec::MlmPpl { model } => {
                    let plm = self.store.model(ModelSlot::MlmPpl, model.as_deref())?;
                    self.perplexity(spec, &plm, segments, None).await
                }
                MetricSpec::Menli(m) => {
                    let plm = self.store.model(ModelSlot::Menli, m.model.as_deref())?;
                    self.menli(spec, &plm, segments).await
                }
                MetricSpec::Comet { model } | MetricSpec::CometQe { model } => {
                    let slot = spec.info().slot.expect("COMET metrics have a model slot");
                    let plm = self.store.model(slot, model.as_deref())?;
                    self.comet(spec, &plm, segments).await
                }
                MetricSpec::Bleurt { model } => {
                    let plm = self.store.model(ModelSlot::Bleurt, model.as_deref())?;
                    self.bleurt(spec, &plm, segments).await
                }
                MetricSpec::MoverScore { model, idf } => {
                    let plm = self.store.model(ModelSlot::MoverScore, model.as_deref())?;
                    self.moverscore(spec, &plm, moverscore::Version::V2, *idf, segments, set)
                        .await
                }
                MetricSpec::MoverScoreV1 { model, idf, ngram } => {
                    let plm = self
                        .store
                        .model(ModelSlot::MoverScoreV1, model.as_deref())?;
                    let version = moverscore::Version::V1 { ngram: *ngram };
                    self.moverscore(spec, &plm, version, *idf, segments, set)
                        .await
                }
                MetricSpec::BartScore(b) => Ok(self
                    .bartscore(&b.pass_key(), &[b.part], segments)
                    .await?
                    .remove(0)),
                lexical => lexical_column(lexical, segments),
            }
        })
    }

    async fn bertscore(
        &self,
        spec: &BertScoreSpec,
        parts: &[Part],
        segments: &[Segment<'_>],
        set: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        let plm = self
            .store
            .model(ModelSlot::BertScore, spec.model.as_deref())?;
        let layer = spec
            .layer
            .unwrap_or_else(|| bertscore::default_layer(&plm.name, plm.config.num_layers));
        let input = |message: String| EngineError::Input {
            metric: MetricId::BertScoreF,
            message,
        };
        let baseline = if spec.rescale {
            Some(bertscore::baseline_for(&plm.name, layer).map_err(input)?)
        } else {
            None
        };
        if let Some(i) = segments.iter().position(|s| s.refs.is_empty()) {
            return Err(MetricError::MissingReference {
                metric: MetricId::BertScoreF.info().id,
                segment: i + 1,
            }
            .into());
        }
        let hyps: Vec<&str> = segments.iter().map(|s| s.hyp).collect();
        let refs: Vec<Vec<&str>> = segments.iter().map(|s| s.refs.to_vec()).collect();
        let cache = self.reference_cache.then_some(&self.cache);
        // Within a larger set, idf comes from the set's references.
        let set_weights = match set.filter(|_| spec.idf) {
            Some(set) => Some(
                SetKey::cached(&self.set_bertscore, plm.load_id, set, false, || {
                    let refs: Vec<Vec<&str>> = set.iter().map(|s| s.refs.to_vec()).collect();
                    bertscore::idf_over(&plm, &refs)
                })
                .map_err(model_error(&plm))?,
            ),
            None => None,
        };
        let idf = match &set_weights {
            Some(weights) => bertscore::Idf::Given(weights),
            None => spec.idf.into(),
        };
        let (scored, weights) = bertscore::score_texts(&plm, &hyps, &refs, layer, idf, cache)
            .await
            .map_err(model_error(&plm))?;
        let signature = bertscore::signature(
            &plm.name,
            layer,
            spec.idf,
            baseline.as_ref(),
            &plm.precision_label(),
        );
        let totals: Vec<bertscore::BertScore> = scored
            .iter()
            .map(|s| match &baseline {
                Some(b) => bertscore::rescale(s.score, b.prf),
                None => s.score,
            })
            .collect();
        let details = if self.details {
            scored
                .iter()
                .map(|s| alignment(&plm, s, &weights, layer))
                .collect::<Result<Vec<_>, _>>()
                .map_err(model_error(&plm))?
        } else {
            vec![]
        };
        Ok(parts
            .iter()
            .map(|&part| {
                let spec = MetricSpec::BertScore(BertScoreSpec {
                    layer: Some(layer),
                    part,
                    ..spec.clone()
                });
                let id = spec.id().info().id;
                let scores = totals
                    .iter()
                    .map(|t| Score {
                        metric: id,
                        value: match part {
                            Part::P => t.p,
                            Part::R => t.r,
                            Part::F => t.f,
                        },
                        parts: vec![
                            part_of("precision", t.p),
                            part_of("recall", t.r),
                            part_of("f1", t.f),
                        ],
                        signature: signature.to_string(),
                    })
                    .collect();
                let mut column = Column::new(spec, scores, signature.clone());
                column.details.clone_from(&details);
                column
            })
            .collect())
    }

    async fn perplexity(
        &self,
        spec: &MetricSpec,
        plm: &Plm,
        segments: &[Segment<'_>],
        causal_bos: Option<bool>,
    ) -> Result<Column, EngineError> {
        let id = spec.id();
        let texts: Vec<&str> = segments.iter().map(|s| s.hyp).collect();
        let precision = plm.precision_label();
        let (result, signature) = match causal_bos {
            Some(bos) => (
                perplexity::causal(plm, &texts, bos).await,
                perplexity::causal_signature(&plm.name, bos, &precision),
            ),
            None => (
                perplexity::pseudo(plm, &texts).await,
                perplexity::pseudo_signature(&plm.name, &precision),
            ),
        };
        let result = result.map_err(model_error(plm))?;
        let mut scores = Vec::with_capacity(result.len());
        for (i, p) in result.iter().enumerate() {
            let ppl = p.perplexity.ok_or_else(|| EngineError::Input {
                metric: id,
                message: format!(
                    "segment {} has no token to score{}",
                    i + 1,
                    match causal_bos {
                        Some(false) =>
                            " (one token has no context: score it after <|endoftext|> (--ppl-bos, \
                             or the card's first-token switch), or add text)",
                        _ => " (it is empty)",
                    }
                ),
            })?;
            let scored = p.surprisal.iter().flatten().count() as f64;
            scores.push(Score {
                metric: id.info().id,
                value: -ppl,
                parts: vec![
                    part_of("perplexity", ppl),
                    part_of("tokens_scored", scored),
                    part_of("truncated", f64::from(u8::from(p.truncated))),
                ],
                signature: signature.to_string(),
            });
        }
        let mut column = Column::new(spec.clone(), scores, signature);
        if self.details {
            column.details = result
                .iter()
                .map(|p| {
                    Ok(Detail::Surprisal {
                        tokens: p
                            .tokens
                            .iter()
                            .zip(&p.surprisal)
                            .map(|(t, s)| Ok((plm.tokenizer.decode(&[t.id])?, *s)))
                            .collect::<Result<_, ModelError>>()?,
                        spans: p
                            .tokens
                            .iter()
                            .map(|t| (t.span.start, t.span.end))
                            .collect(),
                        truncated: p.truncated,
                    })
                })
                .collect::<Result<_, ModelError>>()
                .map_err(model_error(plm))?;
        }
        Ok(column)
    }

    async fn menli(
        &self,
        spec: &MetricSpec,
        plm: &Plm,
        segments: &[Segment<'_>],
    ) -> Result<Column, EngineError> {
        let MetricSpec::Menli(m) = spec else {
            unreachable!("called for MENLI specs")
        };
        let setup = m.setup()?;
        let hyps: Vec<&str> = segments.iter().map(|s| s.hyp).collect();
        let refs: Vec<Vec<&str>> = segments.iter().map(|s| s.refs.to_vec()).collect();
        let srcs: Vec<Option<&str>> = segments.iter().map(|s| s.src).collect();
        let nli = menli::score_set(plm, &hyps, &refs, &srcs, &setup)
            .await
            .map_err(model_error(plm))?;
        let combined = match &m.combine {
            None => None,
            Some(other) => {
                let other_values = self.column(other, segments, None).await?.values();
                let nli_values: Vec<f64> = nli.iter().map(|s| s.value).collect();
                let mixed =
                    menli::combine(&nli_values, &other_values, setup.weight).map_err(|e| {
                        EngineError::Input {
                            metric: MetricId::Menli,
                            message: e.to_string(),
                        }
                    })?;
                Some((other.id(), other_values, mixed))
            }
        };
        let signature = menli::signature(
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
                    metric: MetricId::Menli.info().id,
                    value,
                    parts,
                    signature: signature.to_string(),
                }
            })
            .collect();
        let mut column = Column::new(spec.clone(), scores, signature);
        if self.details {
            column.details = nli
                .iter()
                .map(|s| Detail::Nli {
                    forward: s.forward,
                    backward: s.backward,
                    premise: s.premise,
                    premise_kind: setup.premise,
                })
                .collect();
        }
        Ok(column)
    }
}

impl Engine {
    async fn comet(
        &self,
        spec: &MetricSpec,
        plm: &Plm,
        segments: &[Segment<'_>],
    ) -> Result<Column, EngineError> {
        use crate::models::comet::CometKind;
        let id = spec.id();
        let input = |message: String| EngineError::Input {
            metric: id,
            message,
        };
        let kind = comet::kind_of(plm).map_err(model_error(plm))?;
        let wanted = match id {
            MetricId::CometQe => CometKind::Referenceless,
            _ => CometKind::Regression,
        };
        if kind != wanted {
            return Err(input(format!(
                "{} is a {} checkpoint; {id} needs a {} one",
                plm.name,
                match kind {
                    CometKind::Regression => "reference-based COMET",
                    CometKind::Referenceless => "reference-free (COMET-QE)",
                },
                match wanted {
                    CometKind::Regression => "reference-based (e.g. Unbabel/wmt22-comet-da)",
                    CometKind::Referenceless => "reference-free (e.g. Unbabel/wmt20-comet-qe-da)",
                }
            )));
        }
        let mut inputs = Vec::with_capacity(segments.len());
        for (i, s) in segments.iter().enumerate() {
            // An empty source is scored, as COMET scores `<s></s>`; none is an error.
            let src = s.src.ok_or_else(|| {
                input(format!(
                    "segment {} has no source: COMET reads the source sentence too",
                    i + 1
                ))
            })?;
            let reference = match kind {
                CometKind::Referenceless => None,
                CometKind::Regression => match s.refs {
                    [] => {
                        return Err(MetricError::MissingReference {
                            metric: id.info().id,
                            segment: i + 1,
                        }
                        .into());
                    }
                    [one] => Some(*one),
                    many => {
                        return Err(input(format!(
                            "segment {} has {} references; COMET scores against one \
                             (unbabel-comet has no multi-reference mode): score each \
                             reference separately",
                            i + 1,
                            many.len()
                        )));
                    }
                },
            };
            inputs.push(CometInput {
                mt: s.hyp,
                reference,
                src,
            });
        }
        let scored = comet::score(plm, &inputs, Some(&self.sentences))
            .await
            .map_err(model_error(plm))?;
        let signature = comet::signature(&plm.name, kind, &plm.precision_label());
        let scores = scored
            .iter()
            .map(|s| Score {
                metric: id.info().id,
                value: s.value,
                parts: vec![part_of("truncated", f64::from(u8::from(s.truncated)))],
                signature: signature.to_string(),
            })
            .collect();
        Ok(Column::new(spec.clone(), scores, signature))
    }
}

impl Engine {
    async fn bleurt(
        &self,
        spec: &MetricSpec,
        plm: &Plm,
        segments: &[Segment<'_>],
    ) -> Result<Column, EngineError> {
        let id = spec.id();
        let mut pairs = Vec::with_capacity(segments.len());
        for (i, s) in segments.iter().enumerate() {
            match s.refs {
                [] => {
                    return Err(MetricError::MissingReference {
                        metric: id.info().id,
                        segment: i + 1,
                    }
                    .into());
                }
                [one] => pairs.push((*one, s.hyp)),
                many => {
                    return Err(EngineError::Input {
                        metric: id,
                        message: format!(
                            "segment {} has {} references; BLEURT scores against one: \
                             score each reference separately",
                            i + 1,
                            many.len()
                        ),
                    });
                }
            }
        }
        let scored = bleurt::score(plm, &pairs).await.map_err(model_error(plm))?;
        let signature = bleurt::signature(&plm.name, &plm.precision_label());
        let scores = scored
            .iter()
            .map(|s| Score {
                metric: id.info().id,
                value: s.value,
                parts: vec![part_of("truncated", f64::from(u8::from(s.truncated)))],
                signature: signature.to_string(),
            })
            .collect();
        Ok(Column::new(spec.clone(), scores, signature))
    }
}

impl Engine {
    async fn moverscore(
        &self,
        spec: &MetricSpec,
        plm: &Plm,
        version: moverscore::Version,
        idf: bool,
        segments: &[Segment<'_>],
        set: Option<&[Segment<'_>]>,
    ) -> Result<Column, EngineError> {
        let id = spec.id();
        // Several references: the hypothesis is scored against each and the
        // scores averaged, as the released examples do (example.py's
        // `sentence_score`, run_summarization.py).
        let mut pairs = Vec::new();
        let mut first = Vec::with_capacity(segments.len());
        for (i, s) in segments.iter().enumerate() {
            if s.refs.is_empty() {
                return Err(MetricError::MissingReference {
                    metric: id.info().id,
                    segment: i + 1,
                }
                .into());
            }
            first.push(pairs.len());
            pairs.extend(s.refs.iter().map(|r| (*r, s.hyp)));
        }
        // idf as the released usages build it: with one reference per
        // segment, over the references as listed (the README's
        // `get_idf_dict(references)`, a repeated reference counting again);
        // with several, over each distinct reference once
        // (run_summarization.py: an article's references, however many
        // summaries share them). Hypotheses: each segment's once.
        // Within a larger set, the set's texts count instead (its weights
        // counted once for all its batches).
        let weights_of = |counted: &[Segment<'_>]| {
            let single = counted.iter().all(|s| s.refs.len() == 1);
            let mut seen = std::collections::HashSet::new();
            let texts = moverscore::IdfTexts {
                references: counted
                    .iter()
                    .flat_map(|s| s.refs.iter().copied())
                    .filter(|r| single || seen.insert(*r))
                    .collect(),
                hypotheses: counted.iter().map(|s| s.hyp).collect(),
            };
            moverscore::idf_weights(plm, &texts)
        };
        let weights = match (idf, set) {
            (false, _) => None,
            (true, None) => Some(Rc::new(weights_of(segments).map_err(model_error(plm))?)),
            (true, Some(set)) => Some(
                SetKey::cached(&self.set_moverscore, plm.load_id, set, true, || {
                    weights_of(set)
                })
                .map_err(model_error(plm))?,
            ),
        };
        let cache = self.reference_cache.then_some(&self.cache);
        let scored = moverscore::score(plm, &pairs, version, weights.as_deref(), &[], cache)
            .await
            .map_err(model_error(plm))?;
        let signature = moverscore::signature(version, &plm.name, idf, &plm.precision_label());
        let scores = segments
            .iter()
            .zip(&first)
            .map(|(s, &k)| {
                let mine = &scored[k..k + s.refs.len()];
                let value = mine.iter().map(|m| m.value).sum::<f64>() / mine.len() as f64;
                let truncated = mine.iter().any(|m| m.truncated);
                Score {
                    metric: id.info().id,
                    value,
                    parts: vec![
                        part_of("truncated", f64::from(u8::from(truncated))),
                        part_of("references", mine.len() as f64),
                    ],
                    signature: signature.to_string(),
                }
            })
            .collect();
        let mut column = Column::new(spec.clone(), scores, signature);
        if self.details {
            // The plan against each segment's first reference.
            let mut plans: Vec<Option<moverscore::MoverScore>> =
                scored.into_iter().map(Some).collect();
            column.details = first
                .iter()
                .map(|&k| {
                    let m = plans[k]
                        .take()
                        .expect("each segment has its own first pair");
                    Detail::Flow {
                        ref_tokens: m.ref_tokens,
                        hyp_tokens: m.hyp_tokens,
                        ref_mass: m.ref_mass,
                        hyp_mass: m.hyp_mass,
                        flow: m.flow,
                        truncated: m.truncated,
                    }
                })
                .collect();
        }
        Ok(column)
    }
}

/// Where one segment's BARTScore directions sit among the scored pairs.
struct Directions {
    /// Per reference: (reference -> hypothesis, hypothesis -> reference).
    refs: Vec<(usize, usize)>,
    /// Source -> hypothesis.
    src: Option<usize>,
}

impl Engine {
    /// BARTScore's `parts` over `segments`: every direction a part needs is
    /// scored once (P: each reference -> hypothesis, R: hypothesis -> each
    /// reference, faithfulness: source -> hypothesis), all in one call.
    async fn bartscore(
        &self,
        spec: &BartScoreSpec,
        parts: &[BartPart],
        segments: &[Segment<'_>],
    ) -> Result<Vec<Column>, EngineError> {
        let plm = self
            .store
            .model(ModelSlot::BartScore, spec.model.as_deref())?;
        let with_refs = parts.iter().any(|&p| p != BartPart::Faithful);
        let with_src = parts.contains(&BartPart::Faithful);
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        let mut slots: Vec<Directions> = Vec::new();
        for (i, s) in segments.iter().enumerate() {
            let mut refs = Vec::new();
            if with_refs {
                if s.refs.is_empty() {
                    let part = parts.iter().find(|&&p| p != BartPart::Faithful);
                    let spec = MetricSpec::BartScore(BartScoreSpec {
                        part: *part.expect("a reference-based part was asked for"),
                        ..spec.clone()
                    });
                    return Err(MetricError::MissingReference {
                        metric: spec.id().info().id,
                        segment: i + 1,
                    }
                    .into());
                }
                for &r in s.refs {
                    pairs.push((r, s.hyp));
                    pairs.push((s.hyp, r));
                    refs.push((pairs.len() - 2, pairs.len() - 1));
                }
            }
            let src = if with_src {
                let src = s.src.ok_or_else(|| EngineError::Input {
                    metric: MetricId::BartScoreFaithful,
                    message: format!(
                        "segment {} has no source: faithfulness scores the hypothesis given \
                         the source",
                        i + 1
                    ),
                })?;
                pairs.push((src, s.hyp));
                Some(pairs.len() - 1)
            } else {
                None
            };
            slots.push(Directions { refs, src });
        }
        let scored = bartscore::score(&plm, &pairs)
            .await
            .map_err(model_error(&plm))?;
        let mean = |idx: &mut dyn Iterator<Item = usize>| {
            let v: Vec<f64> = idx.map(|k| scored[k].score).collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        let precision = plm.precision_label();
        let mut columns = Vec::with_capacity(parts.len());
        for &part in parts {
            let spec = MetricSpec::BartScore(BartScoreSpec {
                part,
                ..spec.clone()
            });
            let id = spec.id();
            let signature = bartscore::signature(&plm.name, part, &precision);
            let mut scores = Vec::with_capacity(segments.len());
            let mut details = Vec::new();
            for Directions { refs, src } in &slots {
                let mut values = Vec::new();
                if !refs.is_empty() {
                    let p = mean(&mut refs.iter().map(|r| r.0));
                    let r = mean(&mut refs.iter().map(|r| r.1));
                    values.extend([
                        part_of("precision", p),
                        part_of("recall", r),
                        part_of("f", (p + r) / 2.0),
                    ]);
                }
                if let Some(k) = src {
                    values.push(part_of("faithful", scored[*k].score));
                }
                let name = match part {
                    BartPart::P => "precision",
                    BartPart::R => "recall",
                    BartPart::F => "f",
                    BartPart::Faithful => "faithful",
                };
                let value = values
                    .iter()
                    .find(|v| v.name == name)
                    .expect("the part's direction was scored")
                    .value;
                // The token bar: the hypothesis given the first reference
                // (P, F) or the source; the reference given the hypothesis (R).
                let (shown, target) = match part {
                    BartPart::Faithful => (src.expect("faithfulness has a source"), "hypothesis"),
                    BartPart::R => (refs[0].1, "reference"),
                    BartPart::P | BartPart::F => (refs[0].0, "hypothesis"),
                };
                let truncated = refs
                    .iter()
                    .flat_map(|r| [r.0, r.1])
                    .chain(*src)
                    .any(|k| scored[k].truncated);
                values.push(part_of("truncated", f64::from(u8::from(truncated))));
                if self.details {
                    let t = &scored[shown];
                    details.push(Detail::TokenLogprobs {
                        target,
                        tokens: t
                            .tokens
                            .iter()
                            .zip(&t.logprob)
                            .map(|(tok, &lp)| Ok((plm.tokenizer.decode(&[tok.id])?, lp)))
                            .collect::<Result<_, ModelError>>()
                            .map_err(model_error(&plm))?,
                        spans: t
                            .tokens
                            .iter()
                            .map(|t| (t.span.start, t.span.end))
                            .collect(),
                        truncated,
                    });
                }
                scores.push(Score {
                    metric: id.info().id,
                    value,
                    parts: values,
                    signature: signature.to_string(),
                });
            }
            let mut column = Column::new(spec, scores, signature);
            column.details = details;
            columns.push(column);
        }
        Ok(columns)
    }
}

fn part_of(name: &'static str, value: f64) -> ScorePart {
    ScorePart { name, value }
}

/// A model-free metric's column: sentence scores and sacrebleu's corpus score.
fn lexical_column(spec: &MetricSpec, segments: &[Segment<'_>]) -> Result<Column, EngineError> {
    let metric = spec.lexical().ok_or(MetricError::NeedsModel(spec.id()))?;
    let scores = segments
        .iter()
        .map(|s| metric.sentence_score(s))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Column {
        spec: spec.clone(),
        scores,
        details: vec![],
        corpus: metric.corpus_score(segments)?,
        signature: metric.signature(Level::Sentence, uniform_nrefs(segments)),
    })
}

/// The heatmap's view of one segment's alignment.
fn alignment(
    plm: &Plm,
    s: &bertscore::SegmentScore,
    weights: &bertscore::Weights,
    layer: usize,
) -> Result<Detail, ModelError> {
    let tokens = |ids: &[u32]| -> Result<Vec<String>, ModelError> {
        ids.iter()
            .map(|&id| Ok(plm.tokenizer.decode(&[id])?))
            .collect()
    };
    Ok(Detail::Alignment {
        best_reference: s.best,
        hyp_tokens: tokens(&s.hyp.ids)?,
        ref_tokens: tokens(&s.reference.ids)?,
        hyp_weights: s.hyp.ids.iter().map(|&id| weights.of(id)).collect(),
        ref_weights: s.reference.ids.iter().map(|&id| weights.of(id)).collect(),
        similarity: s.pair.similarity.clone(),
        hyp_best: s.pair.hyp_best.clone(),
        ref_best: s.pair.ref_best.clone(),
        layer,
        truncated: s.hyp.truncated || s.reference.truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Settings;

    fn segments<'a>(refs: &'a [&'a str]) -> Vec<Segment<'a>> {
        vec![
            Segment {
                hyp: "the cat sat on the mat",
                refs,
                src: None,
            },
            Segment {
                hyp: "a dog barked",
                refs,
                src: None,
            },
        ]
    }

    #[test]
    fn lexical_columns_equal_the_metrics_and_model_specs_need_a_model() {
        let refs = ["the cat is on the mat"];
        let segs = segments(&refs);
        let specs = Settings::default().specs(&["bleu", "rougeL"]).unwrap();
        let cols = futures::executor::block_on(Engine::lexical().score(&specs, &segs)).unwrap();
        let bleu = crate::metrics::create("bleu", false).unwrap();
        assert_eq!(cols[0].scores[1], bleu.sentence_score(&segs[1]).unwrap());
        assert_eq!(cols[0].corpus, bleu.corpus_score(&segs).unwrap());
        assert_eq!(cols[1].spec.id(), MetricId::RougeL);
        let specs = Settings::default().specs(&["bertscore-f"]).unwrap();
        let err = futures::executor::block_on(Engine::lexical().score(&specs, &segs)).unwrap_err();
        assert!(err.to_string().contains("none is available here"), "{err}");
    }

    #[test]
    fn set_weights_are_counted_once_per_set_while_four_alternate() {
        // The preference suite's batches: two settings, each side apart.
        let (r1, r2) = (["the cat is on the mat"], ["die Katze"]);
        let wins = segments(&r1);
        let mut errs = segments(&r1);
        errs[0].hyp = "the cat sat not on the mat";
        let (wins2, errs2) = (segments(&r2), {
            let mut e = segments(&r2);
            e[1].hyp = "a dog";
            e
        });
        let slot: SetWeights<usize> = RefCell::default();
        let counted = std::cell::Cell::new(0);
        let weights = |set: &[Segment<'_>], read_hyps: bool| {
            *SetKey::cached(&slot, 1, set, read_hyps, || {
                counted.set(counted.get() + 1);
                Ok::<_, ()>(counted.get())
            })
            .unwrap()
        };
        let sets = [&wins, &errs, &wins2, &errs2];
        let first: Vec<usize> = sets.iter().map(|s| weights(s, true)).collect();
        for _ in 0..3 {
            let again: Vec<usize> = sets.iter().map(|s| weights(s, true)).collect();
            assert_eq!(again, first);
        }
        assert_eq!(counted.get(), 4);
        // Weights of the references alone are another entry, and the fifth
        // set pushes out the least recently used (the first side's).
        weights(&wins, false);
        assert_eq!(counted.get(), 5);
        assert_eq!(weights(&errs, true), first[1]);
        assert_eq!(weights(&wins, true), 6, "counted again");
    }
}
