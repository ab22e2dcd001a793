//! Perplexity under a language model, reported negated ("higher is better")
//! by the metric registry:
//!
//! - GPT-PPL: `exp(mean NLL)` of each token given the ones before it under a
//!   causal LM (GPT-2 family), as transformers' `model(ids, labels=ids).loss`
//!   computes it: the first token has no context and is not scored unless a
//!   leading `<|endoftext|>` is asked for;
//! - MLM-PPL: pseudo-perplexity (Salazar et al. 2020), every non-special
//!   token masked in turn, `exp(-mean log P(token | the rest))`.
//!
//! Both keep the per-token values (surprisal in nats) for display. Model
//! passes are batched by a token budget and reduced on the device (log-softmax
//! and the target's column), so only one number per token is read back.

use burn::tensor::{Int, Tensor, TensorData, activation};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Detail, Engine, EngineError, model_error, part_of, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule, each_alone};
use super::{
    CorpusAggregation, MetricSpec, ModelKind, ModelSlot, Scale, Score, Segment, Signature,
};
use crate::models::{LmToken, ModelError, PassLimit, Plm, read_back};

/// Token positions per model pass (GPT-2's logits take 200 KB per token).
pub const TOKEN_BUDGET: usize = 512;

/// Perplexity of one text with its per-token surprisal.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Perplexity {
    /// The tokens scored, as the model read them (with `<|endoftext|>` or
    /// `[CLS]`/`[SEP]` where used).
    pub tokens: Vec<LmToken>,
    /// Negative log-probability (nats) of each token; None where a token is
    /// not scored (the first token of a causal LM, special tokens).
    pub surprisal: Vec<Option<f64>>,
    /// `exp(mean surprisal)`; None when no token could be scored (a single
    /// token without a leading `<|endoftext|>`, an empty text).
    pub perplexity: Option<f64>,
    /// The text was cut at the model's limit.
    pub truncated: bool,
}

impl Perplexity {
    fn new(tokens: Vec<LmToken>, surprisal: Vec<Option<f64>>, truncated: bool) -> Self {
        let scored: Vec<f64> = surprisal.iter().flatten().copied().collect();
        let perplexity =
            (!scored.is_empty()).then(|| (scored.iter().sum::<f64>() / scored.len() as f64).exp());
        Self {
            tokens,
            surprisal,
            perplexity,
            truncated,
        }
    }
}

/// `[b, l, 1]` integer tensor of target ids.
fn targets(rows: &[Vec<u32>], l: usize, plm: &Plm) -> Tensor<3, Int> {
    let b = rows.len();
    let mut data = vec![0i64; b * l];
    for (r, row) in rows.iter().enumerate() {
        for (i, &t) in row.iter().enumerate() {
            data[r * l + i] = t as i64;
        }
    }
    Tensor::from_data(TensorData::new(data, [b, l, 1]), &plm.device)
}

/// GPT-PPL of each text under a causal LM. With `bos`, `<|endoftext|>` is
/// put in front so the first token is scored too.
pub async fn causal(plm: &Plm, texts: &[&str], bos: bool) -> Result<Vec<Perplexity>, ModelError> {
    let bos_id = if bos {
        Some(plm.tokenizer.token_id("<|endoftext|>").ok_or_else(|| {
            ModelError::Unsupported(format!("{} has no <|endoftext|> token", plm.name))
        })?)
    } else {
        None
    };
    let limit = plm.config.max_tokens();
    let mut encoded = Vec::with_capacity(texts.len());
    for text in texts {
        let enc = plm.encode(text)?;
        let mut tokens: Vec<LmToken> = bos_id
            .map(|id| LmToken { id, span: 0..0 })
            .into_iter()
            .chain(enc.tokens)
            .collect();
        let truncated = enc.truncated || tokens.len() > limit;
        tokens.truncate(limit);
        encoded.push((tokens, truncated));
    }
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| encoded[i].0.len());
    let mut out: Vec<Option<Perplexity>> = vec![None; texts.len()];
    // Texts with nothing to score skip the model.
    let (empty, scored): (Vec<usize>, Vec<usize>) =
        order.into_iter().partition(|&i| encoded[i].0.len() < 2);
    for i in empty {
        let (tokens, truncated) = encoded[i].clone();
        let n = tokens.len();
        out[i] = Some(Perplexity::new(tokens, vec![None; n], truncated));
    }
    for chunk in plm.passes(
        &scored,
        |&i| encoded[i].0.len(),
        PassLimit::Tokens(TOKEN_BUDGET),
    ) {
        let ids: Vec<Vec<u32>> = chunk
            .iter()
            .map(|&i| encoded[i].0.iter().map(|t| t.id).collect())
            .collect();
        let next: Vec<Vec<u32>> = ids.iter().map(|s| s[1..].to_vec()).collect();
        let forward = plm.forward(&ids)?;
        let [b, l, _] = forward.hidden_states[0].dims();
        let logp = activation::log_softmax(plm.lm_logits(&forward)?, 2);
        let picked = logp.gather(2, targets(&next, l, plm));
        let (values, _) = read_back(picked.reshape([b, l])).await?;
        for (r, &i) in chunk.iter().enumerate() {
            let (tokens, truncated) = encoded[i].clone();
            let n = tokens.len();
            let surprisal = std::iter::once(None)
                .chain((0..n - 1).map(|t| Some(-(values[r * l + t] as f64))))
                .collect();
            out[i] = Some(Perplexity::new(tokens, surprisal, truncated));
        }
    }
    Ok(out
        .into_iter()
        .map(|p| p.expect("every text scored"))
        .collect())
}

/// MLM pseudo-perplexity of each text: one masked copy per non-special
/// token, batched; the masked-LM head runs only on the masked position.
pub async fn pseudo(plm: &Plm, texts: &[&str]) -> Result<Vec<Perplexity>, ModelError> {
    let mask = plm.tokenizer.mask_id().ok_or_else(|| {
        ModelError::Unsupported(format!("{}'s tokenizer has no mask token", plm.name))
    })?;
    let encoded = texts
        .iter()
        .map(|t| plm.encode(t))
        .collect::<Result<Vec<_>, _>>()?;
    // One row per (text, masked position).
    let rows: Vec<(usize, usize)> = encoded
        .iter()
        .enumerate()
        .flat_map(|(i, e)| {
            e.added
                .iter()
                .enumerate()
                .filter(|(_, added)| !**added)
                .map(move |(p, _)| (i, p))
        })
        .collect();
    let mut logprob: Vec<Vec<Option<f64>>> =
        encoded.iter().map(|e| vec![None; e.tokens.len()]).collect();
    let row_ids: Vec<usize> = (0..rows.len()).collect();
    for chunk in plm.passes(
        &row_ids,
        |&r| encoded[rows[r].0].tokens.len(),
        PassLimit::Tokens(TOKEN_BUDGET),
    ) {
        let ids: Vec<Vec<u32>> = chunk
            .iter()
            .map(|&r| {
                let (i, p) = rows[r];
                let mut s = encoded[i].ids();
                s[p] = mask;
                s
            })
            .collect();
        let forward = plm.forward(&ids)?;
        let [b, l, _] = forward.hidden_states[0].dims();
        // A one-hot row per sequence picks the masked position's state.
        let mut select = vec![0f32; b * l];
        for (k, &r) in chunk.iter().enumerate() {
            select[k * l + rows[r].1] = 1.0;
        }
        let select: Tensor<3> = Tensor::from_data(TensorData::new(select, [b, 1, l]), &plm.device);
        let last = forward
            .hidden_states
            .last()
            .expect("at least the embeddings")
            .clone();
        let logits = plm.mlm_logits(select.matmul(last))?;
        let originals: Vec<Vec<u32>> = chunk
            .iter()
            .map(|&r| vec![encoded[rows[r].0].tokens[rows[r].1].id])
            .collect();
        let picked = activation::log_softmax(logits, 2).gather(2, targets(&originals, 1, plm));
        let (values, _) = read_back(picked.reshape([b])).await?;
        for (k, &r) in chunk.iter().enumerate() {
            let (i, p) = rows[r];
            logprob[i][p] = Some(-(values[k] as f64));
        }
    }
    Ok(encoded
        .into_iter()
        .zip(logprob)
        .map(|(e, s)| Perplexity::new(e.tokens, s, e.truncated))
        .collect())
}

/// Signature of GPT-PPL.
pub fn causal_signature(model: &str, bos: bool, precision: &str) -> Signature {
    Signature::new("gpt-ppl")
        .with("model", model)
        .flag("bos", bos)
        .flag("neg", true)
        .with("precision", precision)
        .versioned()
}

/// Signature of MLM-PPL.
pub fn pseudo_signature(model: &str, precision: &str) -> Signature {
    Signature::new("mlm-ppl")
        .with("model", model)
        .with("mask", "each-token")
        .flag("neg", true)
        .with("precision", precision)
        .versioned()
}

/// GPT-PPL's options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GptPplOptions {
    /// # Model
    ///
    /// The causal LM (GPT-2 family); unset: the registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # score the first token after <|endoftext|>
    ///
    /// Put `<|endoftext|>` first so the text's first token is scored too (as
    /// lm-evaluation-harness does); default: off, as transformers'
    /// `model(ids, labels=ids).loss` leaves the first token unscored.
    pub bos: bool,
}

/// MLM-PPL's options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MlmPplOptions {
    /// # Model
    ///
    /// The masked LM (BERT or RoBERTa with its MLM head); unset: the
    /// registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
}

/// GPT-PPL's registry entry.
pub struct GptPplMetric;

/// MLM-PPL's registry entry.
pub struct MlmPplMetric;

impl MetricModule for GptPplMetric {
    type Options = GptPplOptions;
    const KIND: KindAbout = KindAbout {
        name: "GPT-PPL",
        about: "The perplexity of the hypothesis under a causal language model: exp of the \
                mean negative log-likelihood of each token given the ones before it, \
                reported negated so that higher is better (-1 at best). The reference \
                and the source are not read.",
        reference: "transformers (GPT-2 `labels=ids` loss)",
        truncated: "the hypothesis was cut to the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::CausalLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        needs_reference: false,
        reads: "hypothesis",
        ..About::reference_based(
            "GPT-PPL",
            "negated perplexity of the hypothesis under a causal language model (GPT-2)",
            Scale::NEG_PERPLEXITY,
        )
    }];
}

impl ModelModule for GptPplMetric {
    fn model_name(o: &GptPplOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&GptPplOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::GptPpl, o.model.as_deref())?;
            let spec = MetricSpec::GptPpl(o.clone());
            column(engine, spec, &plm, segments, Some(o.bos)).await
        })
        .await
    }
}

impl MetricModule for MlmPplMetric {
    type Options = MlmPplOptions;
    const KIND: KindAbout = KindAbout {
        name: "MLM-PPL",
        about: "The pseudo-perplexity of the hypothesis under a masked language model: \
                every token masked in turn, exp of the mean negative log-probability of \
                the masked token, reported negated so that higher is better.",
        reference: "Salazar et al. 2020 (pseudo-log-likelihood)",
        truncated: "the hypothesis was cut to the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::MaskedLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        needs_reference: false,
        reads: "hypothesis",
        ..About::reference_based(
            "MLM-PPL",
            "negated pseudo-perplexity of the hypothesis under a masked language model",
            Scale::NEG_PERPLEXITY,
        )
    }];
}

impl ModelModule for MlmPplMetric {
    fn model_name(o: &MlmPplOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&MlmPplOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::MlmPpl, o.model.as_deref())?;
            let spec = MetricSpec::MlmPpl(o.clone());
            column(engine, spec, &plm, segments, None).await
        })
        .await
    }
}

/// A perplexity column: GPT-PPL's (`causal_bos` set) or MLM-PPL's.
async fn column(
    engine: &Engine,
    spec: MetricSpec,
    plm: &Plm,
    segments: &[Segment<'_>],
    causal_bos: Option<bool>,
) -> Result<Column, EngineError> {
    let id = spec.id();
    let texts: Vec<&str> = segments.iter().map(|s| s.hyp).collect();
    let precision = plm.precision_label();
    let (result, signature) = match causal_bos {
        Some(bos) => (
            causal(plm, &texts, bos).await,
            causal_signature(&plm.name, bos, &precision),
        ),
        None => (
            pseudo(plm, &texts).await,
            pseudo_signature(&plm.name, &precision),
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
            metric: id.as_str(),
            value: -ppl,
            parts: vec![
                part_of("perplexity", ppl),
                part_of("tokens_scored", scored),
                truncated_part(p.truncated),
            ],
            signature: signature.to_string(),
        });
    }
    let mut column = Column::new(spec, scores, signature);
    if engine.details() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perplexity_is_exp_of_mean_surprisal_over_scored_tokens() {
        let t = |id| LmToken { id, span: 0..1 };
        let p = Perplexity::new(
            vec![t(1), t(2), t(3)],
            vec![None, Some(1.0), Some(3.0)],
            false,
        );
        assert!((p.perplexity.unwrap() - 2f64.exp()).abs() < 1e-12);
        assert_eq!(
            Perplexity::new(vec![t(1)], vec![None], false).perplexity,
            None
        );
    }
}
