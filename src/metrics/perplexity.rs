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
use serde::Serialize;

use super::Signature;
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
