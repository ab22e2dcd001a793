//! BLEURT-20 as lucadiliello's PyTorch port (`bleurt-pytorch`) computes it:
//! the reference and the candidate read together as `[CLS] reference [SEP]
//! candidate [SEP]` (segment ids 0 then 1) by a BERT encoder whose narrower
//! embeddings are projected up; the score is the one-logit regression head
//! on the tanh-pooled `[CLS]`. Segment scores are the logits; the system
//! score is their mean.
//!
//! A pair longer than the model's positions is cut as the original BLEURT
//! (and transformers' `longest_first`) cuts it: tokens come off the end of
//! the longer text, one at a time, the candidate's first when both are as
//! long, so when both are cut the reference keeps the odd token.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Engine, EngineError, model_error, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule, each_alone};
use super::{
    CorpusAggregation, MetricError, MetricId, MetricSpec, ModelKind, ModelSlot, Scale, Score,
    Segment, Signature,
};
use crate::models::{ModelConfig, ModelError, PassLimit, Plm, read_back};

/// Pairs per encoder pass.
pub const BATCH: usize = 16;

/// The implementation whose computation is reproduced.
pub const CONVENTIONS: &str = "bleurt-pytorch-0.0.1";

/// One pair's BLEURT score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BleurtScore {
    /// The regression head's output.
    pub value: f64,
    /// The pair was longer than the model reads and was cut.
    pub truncated: bool,
}

/// True for a BLEURT checkpoint (`BleurtForSequenceClassification` with
/// its one-logit regression head).
pub fn is_bleurt(config: &ModelConfig) -> bool {
    config.architecture == "BleurtForSequenceClassification" && config.labels.len() == 1
}

/// The model input of one pair: ids, segment ids, and whether it was cut.
pub fn encode_pair(
    plm: &Plm,
    reference: &str,
    candidate: &str,
) -> Result<(Vec<u32>, Vec<u32>, bool), ModelError> {
    let special = |t: &str| {
        plm.tokenizer.token_id(t).ok_or_else(|| {
            ModelError::Config(format!("{}'s vocabulary has no {t} token", plm.name))
        })
    };
    let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
    let ids = |text: &str| -> Result<Vec<u32>, ModelError> {
        Ok(plm.tokenizer.encode(text)?.iter().map(|t| t.id).collect())
    };
    let (mut a, mut b) = (ids(reference)?, ids(candidate)?);
    let budget = plm.config.max_tokens().saturating_sub(3);
    let truncated = a.len() + b.len() > budget;
    while a.len() + b.len() > budget {
        if a.len() > b.len() {
            a.pop();
        } else {
            b.pop();
        }
    }
    let types = [vec![0; a.len() + 2], vec![1; b.len() + 1]].concat();
    let ids = [vec![cls], a, vec![sep], b, vec![sep]].concat();
    Ok((ids, types, truncated))
}

/// Scores `(reference, candidate)` pairs with the BLEURT model `plm`, in
/// batches of [`BATCH`] sorted by length.
pub async fn score(plm: &Plm, pairs: &[(&str, &str)]) -> Result<Vec<BleurtScore>, ModelError> {
    if !is_bleurt(&plm.config) {
        return Err(ModelError::Unsupported(format!(
            "{} is not a BLEURT checkpoint (config.json names {}; BLEURT-20's names \
             BleurtForSequenceClassification with one label)",
            plm.name, plm.config.architecture
        )));
    }
    let encoded = pairs
        .iter()
        .map(|(r, c)| encode_pair(plm, r, c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| encoded[i].0.len());
    let mut out = vec![None; pairs.len()];
    for chunk in plm.passes(&order, |&i| encoded[i].0.len(), PassLimit::Sequences(BATCH)) {
        let ids: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].0.clone()).collect();
        let types: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].1.clone()).collect();
        let forward = plm.forward_with_types(&ids, Some(&types))?;
        let (values, _) = read_back(plm.class_logits(&forward)?).await?;
        for (&i, v) in chunk.iter().zip(values) {
            out[i] = Some(BleurtScore {
                value: f64::from(v),
                truncated: encoded[i].2,
            });
        }
    }
    Ok(out
        .into_iter()
        .map(|s| s.expect("every pair scored"))
        .collect())
}

/// The signature of BLEURT scores from `model` at `precision`.
pub fn signature(model: &str, precision: &str) -> Signature {
    Signature::new("bleurt")
        .with("model", model)
        .with("conventions", CONVENTIONS)
        .with("precision", precision)
        .versioned()
}

/// BLEURT's options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BleurtOptions {
    /// # Model
    ///
    /// The BLEURT checkpoint (bleurt-pytorch's format); unset: the registry's
    /// default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
}

/// BLEURT's registry entry.
pub struct BleurtMetric;

impl MetricModule for BleurtMetric {
    type Options = BleurtOptions;
    const KIND: KindAbout = KindAbout {
        name: "BLEURT",
        about: "A BERT-style encoder fine-tuned on human judgements reads the reference and \
                the hypothesis together, as one input, and outputs one number. Higher is \
                better; BLEURT-20 scores mostly fall between 0 and 1 (about 1 for a copy of \
                the reference), but the scale is not bounded. The source box is ignored.",
        reference: "bleurt-pytorch 0.0.1 (BLEURT-20)",
        truncated: "the pair was longer than the model reads: the longer text was cut",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Bleurt),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        reads: "[CLS] reference [SEP] hypothesis [SEP], read together",
        ..About::reference_based(
            "BLEURT",
            "learned metric: a fine-tuned encoder reading reference and candidate together",
            Scale::REGRESSION,
        )
    }];
}

impl ModelModule for BleurtMetric {
    fn model_name(o: &BleurtOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&BleurtOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        each_alone(group, async |o| column(engine, o, segments).await).await
    }
}

async fn column(
    engine: &Engine,
    o: &BleurtOptions,
    segments: &[Segment<'_>],
) -> Result<Column, EngineError> {
    let plm = engine.model(ModelSlot::Bleurt, o.model.as_deref())?;
    let id = MetricId::Bleurt;
    let mut pairs = Vec::with_capacity(segments.len());
    for (i, s) in segments.iter().enumerate() {
        match s.refs {
            [] => {
                return Err(MetricError::MissingReference {
                    metric: id.as_str(),
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
    let scored = score(&plm, &pairs).await.map_err(model_error(&plm))?;
    let signature = signature(&plm.name, &plm.precision_label());
    let scores = scored
        .iter()
        .map(|s| Score {
            metric: id.as_str(),
            value: s.value,
            parts: vec![truncated_part(s.truncated)],
            signature: signature.to_string(),
        })
        .collect();
    Ok(Column::new(
        MetricSpec::Bleurt(o.clone()),
        scores,
        signature,
    ))
}
