//! Injections driven by a masked language model: BERT-diverge ([BS] Table 16)
//! and, later, the MENLI-style masked-LM substitutions. This file defines the
//! generator interface; the model behind it comes from the PLM engine
//! (`src/models`), so without one these injections report what is missing
//! instead of falling back to a rule.

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
