//! Injections driven by a masked language model: BERT-diverge ([BS] Table 16).
//! [`MaskedLm`] is the generator interface; [`PlmMaskedLm`] implements it
//! with a masked-LM checkpoint of the PLM engine (`src/models`). Without one
//! these injections report what is missing instead of falling back to a rule.

use rand::Rng;
use rand::seq::index::sample;

use super::{
    Context, Family, InjectRng, Injection, InjectionInfo, LevelKind, NotApplicable, info, join,
};
use crate::text::words::words;

/// Predictions for one masked word position.
pub trait MaskedLm {
    /// Model name, for messages and signatures.
    fn name(&self) -> &str;
    /// The `k` most likely replacements for `words[position]` given the other
    /// words, most likely first, with their probabilities.
    fn top_k(&self, words: &[&str], position: usize, k: usize) -> Vec<(String, f32)>;
}

/// Candidates the replacement is sampled from ([BS]: top-10).
pub const TOP_K: usize = 10;

/// A masked-LM checkpoint (BERT, RoBERTa, DistilBERT with their MLM head)
/// as a [`MaskedLm`]: the words are joined with spaces, the word at the
/// position replaced by the mask token, and the head's distribution at the
/// mask read. Candidates are whole-word vocabulary entries (no special
/// tokens, no `##` continuation pieces, no punctuation-only tokens), with
/// their probabilities. Runs on the CPU (a WebGPU read cannot block).
pub struct PlmMaskedLm<'a> {
    plm: &'a crate::models::Plm,
}

impl<'a> PlmMaskedLm<'a> {
    /// Wraps a loaded model; errors when it has no masked-LM head or mask token.
    pub fn new(plm: &'a crate::models::Plm) -> Result<Self, crate::models::ModelError> {
        use crate::models::{Head, ModelError};
        if plm.config.head != Head::MaskedLm {
            return Err(ModelError::Unsupported(format!(
                "{} has no masked-LM head",
                plm.name
            )));
        }
        if plm.tokenizer.mask_id().is_none() {
            return Err(ModelError::Unsupported(format!(
                "{}'s tokenizer has no mask token",
                plm.name
            )));
        }
        Ok(Self { plm })
    }

    /// The model's name.
    pub fn model_name(&self) -> &str {
        &self.plm.name
    }

    /// [`MaskedLm::top_k`] for many `(words, position)` queries at once:
    /// the masked texts run as one batch per 32, asynchronously (so WebGPU
    /// reads work too). A query whose mask falls past the model's limit gets
    /// no candidates.
    pub async fn top_k_batch(
        &self,
        queries: &[(Vec<&str>, usize)],
        k: usize,
    ) -> Result<Vec<Vec<(String, f32)>>, crate::models::ModelError> {
        use burn::tensor::{Tensor, TensorData, activation};
        let plm = self.plm;
        let mask = plm.tokenizer.mask_id().expect("checked in new");
        let mask_text = plm.tokenizer.decode(&[mask])?;
        let mut out: Vec<Vec<(String, f32)>> = vec![Vec::new(); queries.len()];
        // (query index, ids, mask position) of the queries the model can see.
        let mut rows: Vec<(usize, Vec<u32>, usize)> = Vec::new();
        for (q, (words, position)) in queries.iter().enumerate() {
            let text: Vec<&str> = words
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    if i == *position {
                        mask_text.as_str()
                    } else {
                        w
                    }
                })
                .collect();
            let ids = plm.encode(&text.join(" "))?.ids();
            if let Some(at) = ids.iter().position(|&id| id == mask) {
                rows.push((q, ids, at));
            }
        }
        for chunk in rows.chunks(32) {
            let seqs: Vec<Vec<u32>> = chunk.iter().map(|r| r.1.clone()).collect();
            let hidden = plm.forward(&seqs)?;
            let [b, l, _] = hidden.hidden_states[0].dims();
            let mut select = vec![0f32; b * l];
            for (i, r) in chunk.iter().enumerate() {
                select[i * l + r.2] = 1.0;
            }
            let select: Tensor<3> =
                Tensor::from_data(TensorData::new(select, [b, 1, l]), &plm.device);
            let last = hidden
                .hidden_states
                .last()
                .expect("at least the embeddings")
                .clone();
            let probs = activation::softmax(plm.mlm_logits(select.matmul(last))?, 2);
            let (values, [_, _, vocab]) = crate::models::read_back(probs).await?;
            for (i, r) in chunk.iter().enumerate() {
                out[r.0] = self.best_words(&values[i * vocab..(i + 1) * vocab], k)?;
            }
        }
        Ok(out)
    }

    /// The `k` most likely whole words of one distribution.
    fn best_words(
        &self,
        values: &[f32],
        k: usize,
    ) -> Result<Vec<(String, f32)>, crate::models::ModelError> {
        let plm = self.plm;
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
        let mut picked = Vec::with_capacity(k);
        for id in order {
            if picked.len() == k {
                break;
            }
            let id32 = id as u32;
            if plm.tokenizer.is_special(id32) {
                continue;
            }
            let piece = plm.tokenizer.decode(&[id32])?;
            let word = piece.trim();
            // Whole words only: WordPiece continuations start with "##"; a
            // byte-level BPE word piece without a leading space continues one.
            let continues = piece.starts_with("##")
                || (plm.config.family == crate::models::Family::Roberta && !piece.starts_with(' '));
            if continues || word.is_empty() || !word.chars().any(char::is_alphanumeric) {
                continue;
            }
            picked.push((word.to_owned(), values[id]));
        }
        Ok(picked)
    }

    fn predict(
        &self,
        words: &[&str],
        position: usize,
        k: usize,
    ) -> Result<Vec<(String, f32)>, crate::models::ModelError> {
        let query = [(words.to_vec(), position)];
        Ok(futures::executor::block_on(self.top_k_batch(&query, k))?.remove(0))
    }
}

impl MaskedLm for PlmMaskedLm<'_> {
    fn name(&self) -> &str {
        &self.plm.name
    }

    fn top_k(&self, words: &[&str], position: usize, k: usize) -> Vec<(String, f32)> {
        // A failed pass proposes nothing: the word stays (the injection's
        // output then shows fewer changes than asked, never a made-up word).
        self.predict(words, position, k).unwrap_or_default()
    }
}

/// All masked-LM injections.
pub static ALL: [&dyn Injection; 1] = [&BertDiverge];

/// Replace a portion p of the words one at a time with a masked-LM sample.
pub struct BertDiverge;
static BERT_DIVERGE: InjectionInfo = InjectionInfo {
    needs_masked_lm: true,
    ..info(
        "bert_diverge",
        "BERT-diverge",
        Family::Consistency,
        LevelKind::Portion,
        &[0.1, 0.2, 0.3, 0.4],
        "Replaces ceil(p x length) words one at a time: mask a random position, sample from the masked LM's top-10 (excluding the original word).",
    )
};
impl Injection for BertDiverge {
    fn info(&self) -> &'static InjectionInfo {
        &BERT_DIVERGE
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        ctx: &Context,
    ) -> Result<String, NotApplicable> {
        let lm = ctx
            .masked_lm
            .ok_or_else(|| NotApplicable("no masked language model".into()))?;
        let mut w: Vec<String> = words(text).iter().map(|w| w.text.to_string()).collect();
        if w.is_empty() {
            return Err(NotApplicable("empty text".into()));
        }
        let k = super::ceil_portion(p, w.len());
        // One position at a time, each prediction seeing the previous replacements.
        for position in sample(rng, w.len(), k) {
            let view: Vec<&str> = w.iter().map(String::as_str).collect();
            let candidates: Vec<(String, f32)> = lm
                .top_k(&view, position, TOP_K)
                .into_iter()
                .filter(|(c, _)| !c.eq_ignore_ascii_case(&w[position]))
                .collect();
            let total: f32 = candidates.iter().map(|(_, p)| p.max(0.0)).sum();
            if candidates.is_empty() || total <= 0.0 {
                continue;
            }
            let mut draw = rng.random::<f32>() * total;
            let choice = candidates
                .iter()
                .find(|(_, p)| {
                    draw -= p.max(0.0);
                    draw <= 0.0
                })
                .unwrap_or(&candidates[candidates.len() - 1]);
            w[position] = choice.0.clone();
        }
        Ok(join(&w))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{InjectError, apply};
    use super::*;

    /// A test double: always proposes the same two words.
    struct TwoWords;
    impl MaskedLm for TwoWords {
        fn name(&self) -> &str {
            "two-words"
        }
        fn top_k(&self, _: &[&str], _: usize, _: usize) -> Vec<(String, f32)> {
            vec![("alpha".into(), 0.75), ("beta".into(), 0.25)]
        }
    }

    #[test]
    fn needs_a_model_and_replaces_the_requested_portion() {
        let text = "one two three four five six seven eight nine ten";
        let missing = apply(&BertDiverge, text, 0.2, 0, &Context::default());
        assert!(matches!(
            missing,
            Err(InjectError::MissingContext {
                id: "bert_diverge",
                ..
            })
        ));
        let ctx = Context {
            masked_lm: Some(&TwoWords),
            lm_tokenizer: None,
            ..Context::default()
        };
        let out = apply(&BertDiverge, text, 0.2, 0, &ctx).unwrap();
        let changed = words(text)
            .iter()
            .zip(words(&out.text).iter())
            .filter(|(a, b)| a.text != b.text)
            .count();
        assert_eq!(changed, 2);
        assert!(out.text.contains("alpha") || out.text.contains("beta"));
        assert_eq!(
            out,
            apply(&BertDiverge, text, 0.2, 0, &ctx).unwrap(),
            "deterministic per seed"
        );
    }
}
