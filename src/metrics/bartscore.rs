//! BARTScore (Yuan et al. 2021) as neulab/BARTScore's `bart_score.py`
//! computes it: the mean log-likelihood of a target text given a source
//! text under a BART encoder-decoder.
//!
//! Both texts are tokenized with `<s>` and `</s>` and cut at the model's
//! positions (1024). The decoder reads `</s> <s> t1 .. tn` (transformers'
//! `shift_tokens_right` of the labels) and is scored on `<s> t1 .. tn </s>`;
//! the score is the sum of the label log-probabilities divided by the
//! number of label tokens. As in the released code (NLLLoss with
//! `ignore_index = pad`), a literal `<pad>` in a target adds nothing to the
//! sum but still counts in the length.
//!
//! The paper's variants are directions: precision = reference -> hypothesis,
//! recall = hypothesis -> reference, F = (P + R) / 2 (the arithmetic mean,
//! as the released code computes it), faithfulness = source -> hypothesis.
//! With several references, P and R are the mean over the references (the
//! released `multi_ref_score`'s default aggregation).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Detail, Engine, EngineError, model_error, part_of, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::spec::named_enum;
use super::{
    CorpusAggregation, MetricError, MetricId, MetricSpec, ModelKind, ModelSlot, Scale, Score,
    Segment, Signature,
};
use crate::models::{Head, LmToken, ModelError, Plm};

/// The implementation whose computation is reproduced.
pub const CONVENTIONS: &str = "neulab-bartscore";

/// Padded tokens per model pass, counting each pair's longer side (BART-large's
/// logits take 200 KB per target token).
pub const TOKEN_BUDGET: usize = 512;

/// How several references are folded into P and R.
pub const REFERENCE_AGGREGATION: &str = "mean";

/// One target text scored given one source text.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetScore {
    /// The target's tokens as the decoder is scored on them (`<s>` .. `</s>`).
    pub tokens: Vec<LmToken>,
    /// log P(token | source, tokens before it), per target token (nats).
    pub logprob: Vec<f64>,
    /// BARTScore: the summed log-probabilities over the token count.
    pub score: f64,
    /// The source or the target was cut at the model's limit.
    pub truncated: bool,
}

/// True for an encoder-decoder with a language-model head (BART).
pub fn is_bart(plm: &Plm) -> bool {
    plm.config.head == Head::Seq2SeqLm
}

/// Scores each `(source, target)` pair; identical pairs run once. Pairs
/// are batched by length within [`TOKEN_BUDGET`] tokens of the longer side.
pub async fn score(plm: &Plm, pairs: &[(&str, &str)]) -> Result<Vec<TargetScore>, ModelError> {
    if plm.config.decoder().is_none() || !is_bart(plm) {
        return Err(ModelError::Unsupported(format!(
            "{} is not an encoder-decoder with a language-model head (config.json names {}); \
             BARTScore needs a BART checkpoint such as facebook/bart-large-cnn",
            plm.name, plm.config.architecture
        )));
    }
    let pad = plm.config.pad_token_id;
    let mut encoded = Vec::with_capacity(pairs.len());
    for (src, tgt) in pairs {
        let (s, t) = (plm.encode(src)?, plm.encode(tgt)?);
        if s.tokens.is_empty() || t.tokens.is_empty() {
            return Err(ModelError::Unsupported(format!(
                "{}'s tokenizer adds no <s> </s> around a text: it is not a BART tokenizer",
                plm.name
            )));
        }
        encoded.push((s, t));
    }
    let ids: Vec<(Vec<u32>, Vec<u32>)> = encoded.iter().map(|(s, t)| (s.ids(), t.ids())).collect();
    let logprobs = plm.label_logprobs(&ids, 1.0, TOKEN_BUDGET).await?;
    Ok(encoded
        .into_iter()
        .zip(ids.iter().zip(logprobs))
        .map(|((source, target), ((_, labels), logprob))| {
            let sum: f64 = labels
                .iter()
                .zip(&logprob)
                .filter(|(id, _)| **id != pad)
                .map(|(_, lp)| lp)
                .sum();
            TargetScore {
                tokens: target.tokens,
                score: sum / logprob.len() as f64,
                logprob,
                truncated: source.truncated || target.truncated,
            }
        })
        .collect())
}

/// The signature of a BARTScore part from `model` at `precision`.
pub fn signature(model: &str, part: BartPart, precision: &str) -> Signature {
    let s = Signature::new("bartscore")
        .with("model", model)
        .with("part", part);
    let s = if part == BartPart::Faithful {
        s
    } else {
        s.with("refs", REFERENCE_AGGREGATION)
    };
    s.with("conventions", CONVENTIONS)
        .with("precision", precision)
        .versioned()
}

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
    [
        (P, "p", "P: reference → hypothesis"),
        (R, "r", "R: hypothesis → reference"),
        (F, "f", "F: (P + R) / 2"),
        (Faithful, "faithful", "faithfulness: source → hypothesis")
    ]
);

impl BartPart {
    /// The name of the score part holding this direction's value.
    fn part_name(self) -> &'static str {
        match self {
            BartPart::P => "precision",
            BartPart::R => "recall",
            BartPart::F => "f",
            BartPart::Faithful => "faithful",
        }
    }
}

/// BARTScore's options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BartScoreOptions {
    /// # Model
    ///
    /// The encoder-decoder (BART with its language-model head); unset: the
    /// registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Score
    ///
    /// The direction this column reports (bart_score's precision, recall, F
    /// and faithfulness). Default: F.
    pub part: BartPart,
}

impl BartScoreOptions {
    /// The spec with `part` unset: specs equal here share their model passes.
    pub fn pass_key(&self) -> Self {
        Self {
            part: BartPart::F,
            ..self.clone()
        }
    }
}

/// BARTScore's registry entry.
pub struct BartScoreMetric;

impl MetricModule for BartScoreMetric {
    type Options = BartScoreOptions;
    const KIND: KindAbout = KindAbout {
        name: "BARTScore",
        about: "BART reads one text and scores how likely the other is, token by token: \
                the mean log-probability in nats (0 would be certain; closer to 0 is \
                better). Precision: the hypothesis given the reference; recall: the \
                reference given the hypothesis; F: their plain average (as the released \
                code computes it); faithfulness: the hypothesis given the source (fill in \
                the source box). Several references: P and R are averaged over them.",
        reference: "neulab/BARTScore (bart_score.py)",
        truncated: "a text was cut to the model's 1024 positions",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Seq2SeqLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[
        About::reference_based(
            "BARTScore P",
            "BARTScore precision: mean log-likelihood of the hypothesis given the reference under BART",
            Scale::LOG_LIKELIHOOD,
        ),
        About::reference_based(
            "BARTScore R",
            "BARTScore recall: mean log-likelihood of the reference given the hypothesis under BART",
            Scale::LOG_LIKELIHOOD,
        ),
        About::reference_based(
            "BARTScore F",
            "BARTScore F: the arithmetic mean of precision and recall (as the released code computes it)",
            Scale::LOG_LIKELIHOOD,
        ),
        About {
            name: "BARTScore faithfulness",
            description: "BARTScore faithfulness: mean log-likelihood of the hypothesis given the source under BART",
            higher_is_better: true,
            needs_reference: false,
            needs_source: true,
            reads: "hypothesis + source",
            scale: Scale::LOG_LIKELIHOOD,
        },
    ];
    const COLUMN_OPTION: Option<&'static str> = Some("part");

    fn column(o: &BartScoreOptions) -> usize {
        o.part as usize
    }

    fn with_column(o: BartScoreOptions, column: usize) -> BartScoreOptions {
        BartScoreOptions {
            part: BartPart::ALL.get(column).copied().unwrap_or_default(),
            ..o
        }
    }
}

/// Where one segment's BARTScore directions sit among the scored pairs.
struct Directions {
    /// Per reference: (reference -> hypothesis, hypothesis -> reference).
    refs: Vec<(usize, usize)>,
    /// Source -> hypothesis.
    src: Option<usize>,
}

/// The directions `parts` need over `segments`, each pair once in `pairs`.
fn directions<'a>(
    spec: &BartScoreOptions,
    parts: &[BartPart],
    segments: &[Segment<'a>],
    pairs: &mut Vec<(&'a str, &'a str)>,
) -> Result<Vec<Directions>, EngineError> {
    let with_refs = parts.iter().any(|&p| p != BartPart::Faithful);
    let with_src = parts.contains(&BartPart::Faithful);
    let mut slots = Vec::with_capacity(segments.len());
    for (i, s) in segments.iter().enumerate() {
        let mut refs = Vec::new();
        if with_refs {
            if s.refs.is_empty() {
                let part = parts
                    .iter()
                    .copied()
                    .find(|&p| p != BartPart::Faithful)
                    .unwrap_or_default();
                let spec = MetricSpec::BartScore(BartScoreOptions {
                    part,
                    ..spec.clone()
                });
                return Err(MetricError::MissingReference {
                    metric: spec.id().as_str(),
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
    Ok(slots)
}

impl ModelModule for BartScoreMetric {
    fn model_name(o: &BartScoreOptions) -> Option<&str> {
        o.model.as_deref()
    }

    fn pass_key(o: &BartScoreOptions) -> Option<BartScoreOptions> {
        Some(o.pass_key())
    }

    /// Every direction a part needs is scored once (P: each reference ->
    /// hypothesis, R: hypothesis -> each reference, faithfulness: source ->
    /// hypothesis), all in one call.
    async fn score(
        engine: &Engine,
        group: &[&BartScoreOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        let Some(first) = group.first() else {
            return Ok(vec![]);
        };
        let spec = first.pass_key();
        let parts: Vec<BartPart> = group.iter().map(|o| o.part).collect();
        let plm = engine.model(ModelSlot::BartScore, spec.model.as_deref())?;
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        let slots = directions(&spec, &parts, segments, &mut pairs)?;
        let scored = score(&plm, &pairs).await.map_err(model_error(&plm))?;
        let precision = plm.precision_label();
        parts
            .iter()
            .map(|&part| column(engine, &plm, &spec, part, &slots, &scored, &precision))
            .collect()
    }
}

/// One part's column from the scored directions.
fn column(
    engine: &Engine,
    plm: &Plm,
    spec: &BartScoreOptions,
    part: BartPart,
    slots: &[Directions],
    scored: &[TargetScore],
    precision: &str,
) -> Result<Column, EngineError> {
    let mean = |idx: &mut dyn Iterator<Item = usize>| {
        let v: Vec<f64> = idx.map(|k| scored[k].score).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let spec = MetricSpec::BartScore(BartScoreOptions {
        part,
        ..spec.clone()
    });
    let id = spec.id();
    let signature = signature(&plm.name, part, precision);
    let mut scores = Vec::with_capacity(slots.len());
    let mut details = Vec::new();
    for Directions { refs, src } in slots {
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
        let missing = || EngineError::Input {
            metric: id,
            message: "a direction this part reads was not scored".into(),
        };
        let value = values
            .iter()
            .find(|v| v.name == part.part_name())
            .ok_or_else(missing)?
            .value;
        // The token bar: the hypothesis given the first reference (P, F) or
        // the source; the reference given the hypothesis (R).
        let (shown, target) = match part {
            BartPart::Faithful => (src.ok_or_else(missing)?, "hypothesis"),
            BartPart::R => (refs.first().ok_or_else(missing)?.1, "reference"),
            BartPart::P | BartPart::F => (refs.first().ok_or_else(missing)?.0, "hypothesis"),
        };
        let truncated = refs
            .iter()
            .flat_map(|r| [r.0, r.1])
            .chain(*src)
            .any(|k| scored[k].truncated);
        values.push(truncated_part(truncated));
        if engine.details() {
            let t = &scored[shown];
            details.push(Detail::TokenLogprobs {
                target,
                tokens: t
                    .tokens
                    .iter()
                    .zip(&t.logprob)
                    .map(|(tok, &lp)| Ok((plm.tokenizer.decode(&[tok.id])?, lp)))
                    .collect::<Result<_, ModelError>>()
                    .map_err(model_error(plm))?,
                spans: t
                    .tokens
                    .iter()
                    .map(|t| (t.span.start, t.span.end))
                    .collect(),
                truncated,
            });
        }
        scores.push(Score {
            metric: id.as_str(),
            value,
            parts: values,
            signature: signature.to_string(),
        });
    }
    let mut column = Column::new(spec, scores, signature);
    column.details = details;
    Ok(column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_name_the_part_and_the_reference_rule() {
        let s = signature("facebook/bart-large-cnn", BartPart::F, "f32").to_string();
        assert!(
            s.starts_with("bartscore|model:facebook/bart-large-cnn|part:f|refs:mean|"),
            "{s}"
        );
        let s = signature("m", BartPart::Faithful, "int8").to_string();
        assert!(!s.contains("refs:"), "{s}");
    }
}
