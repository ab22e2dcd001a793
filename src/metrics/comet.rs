//! COMET and COMET-QE (unbabel-comet 2.2 conventions): each distinct text
//! (hypothesis, reference, source) is encoded once into a sentence
//! embedding, then the estimator scores the features
//! `[h, r, h*r, |h-r|, h*s, |h-s|]` (COMET-QE: `[h, s, h*s, |h-s|]`).
//! Segment scores are the estimator's outputs as COMET prints them; the
//! system score is their mean.
//!
//! Texts are cut at the encoder's limit as COMET's tokenizer call cuts them
//! (`max_position_embeddings - 4` tokens, special tokens included), each
//! text on its own.

use std::cell::RefCell;
use std::collections::HashMap;

use burn::tensor::{Tensor, TensorData};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Engine, EngineError, model_error, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule, each_alone};
use super::{
    CorpusAggregation, MetricError, MetricId, MetricSpec, ModelKind, ModelSlot, Scale, Score,
    Segment, Signature,
};
use crate::models::comet::{CometKind, CometModel};
use crate::models::{ModelError, Network, PassLimit, Plm, read_back};

/// Texts per encoder pass.
pub const BATCH: usize = 16;

/// unbabel-comet release whose computation is reproduced (its Python
/// `predict` in f32; 2.2.6 turned wmt22's sparsemax into softmax, and the
/// `comet-score` command runs in f16 on stripped lines).
pub const COMET_VERSION: &str = "2.2.7";

/// One segment's COMET score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CometScore {
    /// The estimator's output.
    pub value: f64,
    /// A text of the segment was cut to the encoder's limit.
    pub truncated: bool,
}

/// The texts of one segment.
#[derive(Debug, Clone, Copy)]
pub struct CometInput<'a> {
    /// Hypothesis (COMET's `mt`).
    pub mt: &'a str,
    /// Reference (`ref`); `None` for COMET-QE.
    pub reference: Option<&'a str>,
    /// Source (`src`).
    pub src: &'a str,
}

/// Sentence embeddings of recent texts per model load (a page typing into
/// the hypothesis keeps its reference and source).
#[derive(Default)]
pub struct SentenceCache {
    entries: HashMap<(u64, String), (Vec<f32>, bool)>,
}

impl SentenceCache {
    /// Texts kept before the cache starts over.
    pub const CAPACITY: usize = 4096;

    /// Drops every entry of the load `load` (its model was unloaded).
    pub fn forget(&mut self, load: u64) {
        self.entries.retain(|(k, _), _| *k != load);
    }
}

fn comet_of(plm: &Plm) -> Result<&CometModel, ModelError> {
    match &plm.network {
        Network::Comet(m) => Ok(m),
        _ => Err(ModelError::Unsupported(format!(
            "{} is not a COMET model (a COMET folder holds hparams.yaml and \
             checkpoints/model.ckpt)",
            plm.name
        ))),
    }
}

/// The kind of estimator `plm` holds, or an error naming the model.
pub fn kind_of(plm: &Plm) -> Result<CometKind, ModelError> {
    Ok(comet_of(plm)?.hparams.kind)
}

/// Sentence embeddings (`[width]` each) and truncation flags of `texts`, in
/// batches of [`BATCH`] sorted by length.
async fn embed(
    plm: &Plm,
    model: &CometModel,
    texts: &[&str],
) -> Result<Vec<(Vec<f32>, bool)>, ModelError> {
    let pad_id = plm.tokenizer.pad_id().unwrap_or(plm.config.pad_token_id);
    let encoded = texts
        .iter()
        .map(|t| plm.encode(t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| encoded[i].tokens.len());
    let mut out: Vec<Option<(Vec<f32>, bool)>> = vec![None; texts.len()];
    for chunk in plm.passes(
        &order,
        |&i| encoded[i].tokens.len(),
        PassLimit::Sequences(BATCH),
    ) {
        let ids: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].ids()).collect();
        if ids.iter().any(Vec::is_empty) {
            return Err(ModelError::Input("empty input sequence".into()));
        }
        let batch = plm.batch(&ids, None);
        let pooled = model.sentence_embeddings(&batch, &ids, pad_id);
        let (values, [_, w]) = read_back(pooled).await?;
        for (b, &i) in chunk.iter().enumerate() {
            out[i] = Some((values[b * w..(b + 1) * w].to_vec(), encoded[i].truncated));
        }
    }
    Ok(out
        .into_iter()
        .map(|e| e.expect("every text embedded"))
        .collect())
}

/// Scores `inputs` with the COMET model `plm` (every input of a reference-based
/// model needs its reference; a reference-free one ignores references).
pub async fn score(
    plm: &Plm,
    inputs: &[CometInput<'_>],
    cache: Option<&RefCell<SentenceCache>>,
) -> Result<Vec<CometScore>, ModelError> {
    let model = comet_of(plm)?;
    let kind = model.hparams.kind;
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    // Every distinct text once, cached ones not again.
    let mut texts: Vec<&str> = Vec::new();
    for input in inputs {
        let reference = match kind {
            CometKind::Regression => Some(input.reference.ok_or_else(|| {
                ModelError::Input("a reference-based COMET model needs a reference".into())
            })?),
            CometKind::Referenceless => None,
        };
        texts.extend([input.mt, input.src].into_iter().chain(reference));
    }
    texts.sort_unstable();
    texts.dedup();
    let mut known: HashMap<&str, (Vec<f32>, bool)> = HashMap::new();
    if let Some(cache) = cache {
        let cache = cache.borrow();
        for &t in &texts {
            if let Some(e) = cache.entries.get(&(plm.load_id, t.to_owned())) {
                known.insert(t, e.clone());
            }
        }
    }
    let missing: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| !known.contains_key(t))
        .collect();
    if !missing.is_empty() {
        let embedded = embed(plm, model, &missing).await?;
        if let Some(cache) = cache {
            let mut cache = cache.borrow_mut();
            if cache.entries.len() + missing.len() > SentenceCache::CAPACITY {
                cache.entries.clear();
            }
            for (t, e) in missing.iter().zip(&embedded) {
                cache
                    .entries
                    .insert((plm.load_id, (*t).to_owned()), e.clone());
            }
        }
        known.extend(missing.into_iter().zip(embedded));
    }
    let width = plm.config.hidden_size;
    let k = model.hparams.features();
    let mut features = Vec::with_capacity(inputs.len() * k * width);
    let mut truncated = Vec::with_capacity(inputs.len());
    for input in inputs {
        let (h, th) = &known[input.mt];
        let (s, ts) = &known[input.src];
        let mut cut = *th || *ts;
        match kind {
            CometKind::Regression => {
                let (r, tr) = &known[input.reference.expect("checked above")];
                cut |= *tr;
                features.extend_from_slice(h);
                features.extend_from_slice(r);
                features.extend(h.iter().zip(r).map(|(a, b)| a * b));
                features.extend(h.iter().zip(r).map(|(a, b)| (a - b).abs()));
            }
            CometKind::Referenceless => {
                features.extend_from_slice(h);
                features.extend_from_slice(s);
            }
        }
        features.extend(h.iter().zip(s).map(|(a, b)| a * b));
        features.extend(h.iter().zip(s).map(|(a, b)| (a - b).abs()));
        truncated.push(cut);
    }
    let features = Tensor::<2>::from_data(
        TensorData::new(features, [inputs.len(), k * width]),
        &plm.device,
    );
    let (values, _) = read_back(model.estimate(features)).await?;
    Ok(values
        .into_iter()
        .zip(truncated)
        .map(|(v, truncated)| CometScore {
            value: f64::from(v),
            truncated,
        })
        .collect())
}

/// The signature of COMET scores from `model` (the checkpoint's name) of
/// `kind`, at `precision`.
pub fn signature(model: &str, kind: CometKind, precision: &str) -> Signature {
    Signature::new(match kind {
        CometKind::Regression => "comet",
        CometKind::Referenceless => "comet-qe",
    })
    .with("model", model)
    .with("conventions", format!("unbabel-comet-{COMET_VERSION}"))
    .with("precision", precision)
    .versioned()
}

/// COMET's and COMET-QE's options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CometOptions {
    /// # Model
    ///
    /// The estimator checkpoint (a COMET folder: hparams.yaml and
    /// checkpoints/model.ckpt, or a `.bpk`); unset: the registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
}

/// COMET's registry entry (a reference-based estimator).
pub struct CometMetric;

/// COMET-QE's registry entry (a reference-free estimator).
pub struct CometQeMetric;

impl MetricModule for CometMetric {
    type Options = CometOptions;
    const KIND: KindAbout = KindAbout {
        name: "COMET",
        about: "A regressor trained on human judgements reads sentence embeddings of the \
                hypothesis, the reference and the source (needed: fill in the source box). \
                Higher is better; the scale is the checkpoint's (wmt22 models give roughly \
                0–1, wmt20 ones z-score-like values), so compare scores of one checkpoint \
                only.",
        reference: "unbabel-comet 2.2.7",
        truncated: "a text was cut to the encoder's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Comet),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        name: "COMET",
        description: "learned MT metric: a regressor on sentence embeddings of hypothesis, reference and source",
        higher_is_better: true,
        needs_reference: true,
        needs_source: true,
        reads: "hypothesis + reference + source",
        scale: Scale::REGRESSION,
    }];
}

impl MetricModule for CometQeMetric {
    type Options = CometOptions;
    const KIND: KindAbout = KindAbout {
        name: "COMET-QE",
        about: "Reference-free: the regressor reads only the hypothesis and the source \
                (needed: fill in the source box); the reference box is ignored. Higher is \
                better, on the checkpoint's own scale.",
        reference: "unbabel-comet 2.2.7",
        truncated: "a text was cut to the encoder's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::CometQe),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        name: "COMET-QE",
        description: "reference-free COMET: a regressor on sentence embeddings of hypothesis and source",
        higher_is_better: true,
        needs_reference: false,
        needs_source: true,
        reads: "hypothesis + source",
        scale: Scale::REGRESSION,
    }];
}

impl ModelModule for CometMetric {
    fn model_name(o: &CometOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&CometOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        each_alone(group, async |o| {
            let spec = MetricSpec::Comet(o.clone());
            column(engine, spec, ModelSlot::Comet, o, segments).await
        })
        .await
    }
}

impl ModelModule for CometQeMetric {
    fn model_name(o: &CometOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&CometOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        each_alone(group, async |o| {
            let spec = MetricSpec::CometQe(o.clone());
            column(engine, spec, ModelSlot::CometQe, o, segments).await
        })
        .await
    }
}

/// The segments as COMET's inputs, checked against the checkpoint's kind.
fn inputs<'a>(
    plm: &Plm,
    id: MetricId,
    kind: CometKind,
    segments: &[Segment<'a>],
) -> Result<Vec<CometInput<'a>>, EngineError> {
    let input = |message: String| EngineError::Input {
        metric: id,
        message,
    };
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
                        metric: id.as_str(),
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
    Ok(inputs)
}

async fn column(
    engine: &Engine,
    spec: MetricSpec,
    slot: ModelSlot,
    o: &CometOptions,
    segments: &[Segment<'_>],
) -> Result<Column, EngineError> {
    let plm = engine.model(slot, o.model.as_deref())?;
    let id = spec.id();
    let kind = kind_of(&plm).map_err(model_error(&plm))?;
    let inputs = inputs(&plm, id, kind, segments)?;
    let scored = score(&plm, &inputs, Some(engine.sentence_cache()))
        .await
        .map_err(model_error(&plm))?;
    let signature = signature(&plm.name, kind, &plm.precision_label());
    let scores = scored
        .iter()
        .map(|s| Score {
            metric: id.as_str(),
            value: s.value,
            parts: vec![truncated_part(s.truncated)],
            signature: signature.to_string(),
        })
        .collect();
    Ok(Column::new(spec, scores, signature))
}
