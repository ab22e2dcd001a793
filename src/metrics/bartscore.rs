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

use std::collections::HashMap;

use burn::tensor::{Int, Tensor, TensorData, activation};

use super::Signature;
use super::spec::BartPart;
use crate::models::{Head, LmToken, ModelError, PassLimit, Plm, read_back};

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
    let Some(decoder) = plm.config.decoder.as_ref().filter(|_| is_bart(plm)) else {
        return Err(ModelError::Unsupported(format!(
            "{} is not an encoder-decoder with a language-model head (config.json names {}); \
             BARTScore needs a BART checkpoint such as facebook/bart-large-cnn",
            plm.name, plm.config.architecture
        )));
    };
    let pad = plm.config.pad_token_id;
    let start = decoder.start_token_id;
    let mut distinct: Vec<(&str, &str)> = Vec::new();
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    let slots: Vec<usize> = pairs
        .iter()
        .map(|&pair| {
            *index.entry(pair).or_insert_with(|| {
                distinct.push(pair);
                distinct.len() - 1
            })
        })
        .collect();
    let mut encoded = Vec::with_capacity(distinct.len());
    for (src, tgt) in &distinct {
        let (s, t) = (plm.encode(src)?, plm.encode(tgt)?);
        if s.tokens.is_empty() || t.tokens.is_empty() {
            return Err(ModelError::Unsupported(format!(
                "{}'s tokenizer adds no <s> </s> around a text: it is not a BART tokenizer",
                plm.name
            )));
        }
        encoded.push((s, t));
    }
    let mut order: Vec<usize> = (0..distinct.len()).collect();
    // Batches are bounded by the longer side: a long source costs as much
    // attention memory as a long target.
    let size = |i: usize| encoded[i].0.tokens.len().max(encoded[i].1.tokens.len());
    order.sort_by_key(|&i| size(i));
    let mut scored: Vec<Option<TargetScore>> = vec![None; distinct.len()];
    for chunk in plm.passes(&order, |&i| size(i), PassLimit::Tokens(TOKEN_BUDGET)) {
        let sources: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].0.ids()).collect();
        let labels: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].1.ids()).collect();
        let inputs: Vec<Vec<u32>> = labels
            .iter()
            .map(|l| {
                std::iter::once(start)
                    .chain(l[..l.len() - 1].iter().copied())
                    .collect()
            })
            .collect();
        let logits = plm.seq2seq_logits(&sources, &inputs)?;
        let [b, t, _] = logits.dims();
        let mut wanted = vec![i64::from(pad); b * t];
        for (r, row) in labels.iter().enumerate() {
            for (k, &id) in row.iter().enumerate() {
                wanted[r * t + k] = i64::from(id);
            }
        }
        let wanted: Tensor<3, Int> =
            Tensor::from_data(TensorData::new(wanted, [b, t, 1]), &plm.device);
        let picked = activation::log_softmax(logits, 2).gather(2, wanted);
        let (values, _) = read_back(picked.reshape([b, t])).await?;
        for (r, &i) in chunk.iter().enumerate() {
            let (source, target) = &encoded[i];
            let logprob: Vec<f64> = (0..labels[r].len())
                .map(|k| f64::from(values[r * t + k]))
                .collect();
            let sum: f64 = labels[r]
                .iter()
                .zip(&logprob)
                .filter(|(id, _)| **id != pad)
                .map(|(_, lp)| lp)
                .sum();
            scored[i] = Some(TargetScore {
                tokens: target.tokens.clone(),
                score: sum / logprob.len() as f64,
                logprob,
                truncated: source.truncated || target.truncated,
            });
        }
    }
    Ok(slots
        .into_iter()
        .map(|s| scored[s].clone().expect("every pair scored"))
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
