//! The metric engine: every metric, model-free or model-based, scored
//! through one call.
//!
//! [`Engine::score`] takes resolved [`MetricSpec`]s and a batch of
//! [`Segment`]s and returns one [`Column`] per spec: a score per segment
//! (with its parts), a corpus score (sacrebleu's from summed statistics for
//! BLEU and chrF, the mean of the segment scores otherwise) and the
//! signature. The engine holds only what metrics share: the dispatch to each
//! metric's module (grouping the specs that share a model pass, such as
//! BERTScore's P, R and F), the caches (reference embeddings, sentence
//! embeddings, weights counted over a whole set) and the models, which come
//! from a [`ModelStore`]: folders natively, the page's loaded models in the
//! browser. Model passes are asynchronous (WebGPU reads are). The CLI, the
//! page, the suites, the preference suite and the audit all score here.

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

use serde::Serialize;

pub use super::detail::Detail;

use super::bertscore::EmbeddingCache;
use super::comet::SentenceCache;
use super::spec::SpecError;
use super::{
    Level, MetricError, MetricId, MetricSpec, ModelSlot, Score, ScorePart, Segment, Signature,
    uniform_nrefs,
};
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
    /// A store could not load a model (a folder natively).
    #[error("{model}: {message}")]
    Load {
        /// The model (folder or name).
        model: String,
        /// Why, as the store says it.
        message: String,
    },
    /// A model failed to run (or to load inside the engine).
    #[error("{model}: {source}")]
    Model {
        /// The model (folder or name).
        model: String,
        /// What went wrong.
        #[source]
        source: ModelError,
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

/// Wraps a model's error with the model's name.
pub(crate) fn model_error(plm: &Plm) -> impl Fn(ModelError) -> EngineError + '_ {
    |source| EngineError::Model {
        model: plm.name.clone(),
        source,
    }
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

    /// A model-based metric's column: its corpus score is the mean of the
    /// segment scores.
    pub(crate) fn new(spec: MetricSpec, scores: Vec<Score>, signature: Signature) -> Self {
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

/// Scores metric specs over segments with models from a [`ModelStore`].
pub struct Engine {
    store: Box<dyn ModelStore>,
    details: bool,
    reference_cache: bool,
    cache: RefCell<EmbeddingCache>,
    sentences: RefCell<SentenceCache>,
    /// Weights counted over the last sets scored within, per metric.
    set_weights: RefCell<Vec<Kept>>,
}

/// How many sets' weights an engine keeps per metric: the preference suite
/// alternates four sets per batch (two settings, each side apart).
const SETS_KEPT: usize = 4;

/// Weights counted over a whole set ([`Engine::score_within`]), kept so a
/// suite scoring a set's batches one after another counts them once, not
/// once per batch.
struct Kept {
    /// Whose weights (a metric's name for them).
    owner: &'static str,
    key: SetKey,
    weights: Rc<dyn Any>,
}

/// What set weights were counted over: the model load and the set's
/// references, and its hypotheses where the weights read them.
struct SetKey {
    load: u64,
    hyps: Option<Vec<String>>,
    refs: Vec<Vec<String>>,
}

impl SetKey {
    fn is(&self, load: u64, set: &[Segment<'_>], read_hyps: bool) -> bool {
        self.load == load
            && self.hyps.is_some() == read_hyps
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

    fn of(load: u64, set: &[Segment<'_>], read_hyps: bool) -> Self {
        SetKey {
            load,
            hyps: read_hyps.then(|| set.iter().map(|s| s.hyp.to_owned()).collect()),
            refs: set
                .iter()
                .map(|s| s.refs.iter().map(|r| (*r).to_owned()).collect())
                .collect(),
        }
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
            set_weights: RefCell::default(),
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

    /// True when scores come with their [`Detail`]s.
    pub fn details(&self) -> bool {
        self.details
    }

    /// The token embeddings kept between calls, when the engine keeps them.
    pub(crate) fn embedding_cache(&self) -> Option<&RefCell<EmbeddingCache>> {
        self.reference_cache.then_some(&self.cache)
    }

    /// COMET's sentence embeddings kept between calls.
    pub(crate) fn sentence_cache(&self) -> &RefCell<SentenceCache> {
        &self.sentences
    }

    /// `owner`'s weights of `set` on the model load `load`: kept ones when
    /// the set (its references, and its hypotheses where `read_hyps`) was
    /// counted before, else `count`ed and kept (the least recently used of
    /// the owner's go past [`SETS_KEPT`]).
    pub(crate) fn set_weights<T: 'static, E>(
        &self,
        owner: &'static str,
        load: u64,
        set: &[Segment<'_>],
        read_hyps: bool,
        count: impl FnOnce() -> Result<T, E>,
    ) -> Result<Rc<T>, E> {
        {
            let mut kept = self.set_weights.borrow_mut();
            if let Some(i) = kept
                .iter()
                .position(|k| k.owner == owner && k.key.is(load, set, read_hyps))
            {
                let entry = kept.remove(i);
                let weights = entry.weights.clone();
                kept.push(entry);
                if let Ok(weights) = weights.downcast::<T>() {
                    return Ok(weights);
                }
            }
        }
        let weights = Rc::new(count()?);
        let mut kept = self.set_weights.borrow_mut();
        kept.push(Kept {
            owner,
            key: SetKey::of(load, set, read_hyps),
            weights: weights.clone(),
        });
        let owned = kept.iter().filter(|k| k.owner == owner).count();
        if owned > SETS_KEPT {
            let mut excess = owned - SETS_KEPT;
            kept.retain(|k| {
                let drop = excess > 0 && k.owner == owner;
                excess -= usize::from(drop);
                !drop
            });
        }
        Ok(weights)
    }

    /// Forgets cached embeddings of a model load (`Plm::load_id`, unloaded).
    pub fn forget(&self, load: u64) {
        self.cache.borrow_mut().forget(load);
        self.sentences.borrow_mut().forget(load);
        // A set's weights keep copies of its texts: gone with the model.
        self.set_weights.borrow_mut().retain(|k| k.key.load != load);
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
    /// suite scores a dataset in batches this way. Options that read the
    /// set's scores (MENLI's min-max combination) are refused unless the
    /// batch is the whole set (the same slice).
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
                message: format!(
                    "{} reads the scores of the whole set, so it cannot be scored a batch \
                     at a time",
                    spec.whole_set().unwrap_or("this option")
                ),
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
            // Specs that share a model pass (BERTScore's parts on one
            // model) are scored together, in one call.
            let group: Vec<usize> = std::iter::once(i)
                .chain((i + 1..specs.len()).filter(|&j| spec.shares_pass(&specs[j])))
                .collect();
            let members: Vec<&MetricSpec> = group.iter().map(|&j| &specs[j]).collect();
            let columns = MetricSpec::score_group(self, &members, segments, set).await?;
            for (j, column) in group.into_iter().zip(columns) {
                out[j] = Some(column);
            }
        }
        out.into_iter()
            .zip(specs)
            .map(|(column, spec)| {
                column.ok_or_else(|| EngineError::Input {
                    metric: spec.id(),
                    message: "its module returned no column for it".into(),
                })
            })
            .collect()
    }

    /// One spec's column over `segments` (for a metric that reads another
    /// one's scores, as MENLI's combination does).
    pub(crate) async fn column(
        &self,
        spec: &MetricSpec,
        segments: &[Segment<'_>],
    ) -> Result<Column, EngineError> {
        MetricSpec::score_group(self, &[spec], segments, None)
            .await?
            .pop()
            .ok_or_else(|| EngineError::Input {
                metric: spec.id(),
                message: "its module returned no column".into(),
            })
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
}

/// A named part of a score's breakdown.
pub(crate) fn part_of(name: &'static str, value: f64) -> ScorePart {
    ScorePart { name, value }
}

/// The `truncated` part: 1 when a text was cut to the model's limit.
pub(crate) fn truncated_part(truncated: bool) -> ScorePart {
    part_of("truncated", f64::from(u8::from(truncated)))
}

/// The first segment without a reference, as the error a reference-based
/// metric gives.
pub(crate) fn require_references(
    id: MetricId,
    segments: &[Segment<'_>],
) -> Result<(), EngineError> {
    Ok(super::require_references(id.as_str(), segments)?)
}

/// A model-free metric's column: sentence scores and sacrebleu's corpus score.
pub(crate) fn lexical_column(
    spec: &MetricSpec,
    segments: &[Segment<'_>],
) -> Result<Column, EngineError> {
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
        let engine = Engine::lexical();
        let counted = std::cell::Cell::new(0);
        let weights = |owner: &'static str, set: &[Segment<'_>], read_hyps: bool| {
            *engine
                .set_weights(owner, 1, set, read_hyps, || {
                    counted.set(counted.get() + 1);
                    Ok::<_, ()>(counted.get())
                })
                .unwrap()
        };
        let sets = [&wins, &errs, &wins2, &errs2];
        let first: Vec<usize> = sets.iter().map(|s| weights("a", s, true)).collect();
        for _ in 0..3 {
            let again: Vec<usize> = sets.iter().map(|s| weights("a", s, true)).collect();
            assert_eq!(again, first);
        }
        assert_eq!(counted.get(), 4);
        // Another owner's weights of the same sets are its own, and do not
        // push the first owner's out.
        weights("b", &wins, true);
        assert_eq!(counted.get(), 5);
        assert_eq!(weights("a", &wins, true), first[0]);
        // Weights of the references alone are another entry, and the fifth
        // set pushes out the least recently used (the second side's).
        weights("a", &wins, false);
        assert_eq!(counted.get(), 6);
        assert_eq!(weights("a", &wins, false), 6);
        assert_eq!(weights("a", &errs, true), 7, "counted again");
    }
}
