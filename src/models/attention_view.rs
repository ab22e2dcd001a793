//! Where a model looks, by position ([BS] §5.1, Appendix C.2): why
//! MAUVE on GPT-2 features misses an error early in a text. GPT-2 attends to
//! the near history; RoBERTa spreads its attention and returns to fixed
//! positions (its `<s>` and `</s>`).
//!
//! An encoder-decoder (BART, T5) shows its encoder's self-attention;
//! DeBERTa's include its relative-position terms (the probabilities its
//! layers apply).
//!
//! For one text as the model reads it (special tokens included), every
//! layer's and head's attention distribution of every query is averaged
//! two ways: by blocks of 10% of the text (query block x key block: the
//! mass a query in one tenth of the text puts on each tenth), and by offset
//! (key position minus query position, in tokens: the mass at each
//! distance).

use serde::Serialize;

use super::network::{Architecture, with_network};
use super::{ModelError, Plm, read_back};

/// Blocks the text is cut into (Appendix C.2's 10%).
pub const BLOCKS: usize = 10;

/// A text's attention by position under one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttentionView {
    /// The model.
    pub model: String,
    /// The tokens as the model read them.
    pub tokens: Vec<String>,
    /// Layers averaged.
    pub layers: usize,
    /// Heads per layer averaged.
    pub heads: usize,
    /// `blocks[q][k]`: the mean mass a query in the q-th tenth of the text
    /// puts on keys in the k-th tenth (each row sums to 1; `None` for a
    /// tenth that holds no token, in texts under ten tokens).
    pub blocks: Vec<Vec<Option<f64>>>,
    /// `(offset, mass)`: key position minus query position, and the mean
    /// attention on the key at that offset over the queries that have one.
    pub offsets: Vec<(i64, f64)>,
}

/// The tenth of a text of `len` tokens position `p` falls in.
fn block(p: usize, len: usize) -> usize {
    (p * BLOCKS / len).min(BLOCKS - 1)
}

impl Plm {
    /// The attention view of `text` (cut at the model's limit).
    pub async fn attention_view(&self, text: &str) -> Result<AttentionView, ModelError> {
        let encoding = self.tokenizer.encode_for_model(text)?;
        let ids = encoding.ids();
        if ids.is_empty() {
            return Err(ModelError::Input("the text has no tokens".into()));
        }
        self.check_ids(std::iter::once(&ids))?;
        let batch = self.batch(std::slice::from_ref(&ids), None);
        let maps = with_network!(&self.network, m => m.attention_probabilities(&batch))
            .ok_or_else(|| {
                ModelError::Unsupported(format!(
                    "{} ({}) does not show its attention here: the view reads BERT-family \
                     encoders (BERT, RoBERTa, DistilBERT, ELECTRA), DeBERTa, GPT-2, and the \
                     encoders of BART and T5",
                    self.name, self.config.architecture
                ))
            })?;
        let len = ids.len();
        let layers = maps.len();
        let mut heads = 0;
        // Sums over layers and heads of each (query, key) weight.
        let mut sum = vec![0.0f64; len * len];
        for map in maps {
            let (values, [_, h, q, k]) = read_back(map).await?;
            heads = h;
            for head in 0..h {
                for i in 0..len {
                    for j in 0..len {
                        sum[i * len + j] += f64::from(values[(head * q + i) * k + j]);
                    }
                }
            }
        }
        let n = (layers * heads).max(1) as f64;
        let a = |i: usize, j: usize| sum[i * len + j] / n;
        let mut blocks = vec![vec![None; BLOCKS]; BLOCKS];
        for (qb, row) in blocks.iter_mut().enumerate() {
            let queries: Vec<usize> = (0..len).filter(|&i| block(i, len) == qb).collect();
            if queries.is_empty() {
                continue;
            }
            for (kb, cell) in row.iter_mut().enumerate() {
                let keys: Vec<usize> = (0..len).filter(|&j| block(j, len) == kb).collect();
                if keys.is_empty() {
                    continue;
                }
                let mass: f64 = queries
                    .iter()
                    .map(|&i| keys.iter().map(|&j| a(i, j)).sum::<f64>())
                    .sum();
                *cell = Some(mass / queries.len() as f64);
            }
        }
        let last = len as i64 - 1;
        let offsets = (-last..=last)
            .map(|d| {
                let pairs: Vec<f64> = (0..len as i64)
                    .filter(|i| (0..len as i64).contains(&(i + d)))
                    .map(|i| a(i as usize, (i + d) as usize))
                    .collect();
                (d, pairs.iter().sum::<f64>() / pairs.len() as f64)
            })
            .collect();
        let tokens = ids
            .iter()
            .map(|&id| self.tokenizer.decode(&[id]))
            .collect::<Result<_, _>>()?;
        Ok(AttentionView {
            model: self.name.clone(),
            tokens,
            layers,
            heads,
            blocks,
            offsets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_fall_in_tenths() {
        assert_eq!(block(0, 25), 0);
        assert_eq!(block(24, 25), 9);
        assert_eq!(block(12, 25), 4);
        // Fewer than ten tokens leave some tenths empty.
        let used: std::collections::BTreeSet<usize> = (0..4).map(|p| block(p, 4)).collect();
        assert_eq!(used.into_iter().collect::<Vec<_>>(), [0, 2, 5, 7]);
    }
}
