//! Injections driven by a masked language model: BERT-diverge ([BS] Table 16).
//! [`MaskedLm`] is the generator interface; [`PlmMaskedLm`] implements it
//! with a masked-LM checkpoint of the PLM engine (`src/models`). Without one
//! these injections report what is missing instead of falling back to a rule.
//!
//! A rewrite asks its model one masked position at a time, each query seeing
//! the replacements before it ([`Rewrite`]). [`super::apply_many`] answers
//! many texts' queries together, one batch per step, awaiting the model (so
//! a model on WebGPU works too); [`super::apply`] blocks on it for one text
//! (natively).

use futures::future::LocalBoxFuture;
use rand::Rng;
use rand::seq::index::sample;

use super::{
    Context, Family, InjectRng, Injection, InjectionInfo, LevelKind, NotApplicable, info, join,
};
use crate::models::ModelError;
use crate::text::words::words;

/// Replacement words with their probabilities, most likely first.
pub type Candidates = Vec<(String, f32)>;

/// One masked position: the words of the text and the position to predict.
/// The model predicts the word's [`core`]: punctuation attached to it stays.
pub type Query<'a> = (Vec<&'a str>, usize);

/// The byte range of `word` without the punctuation attached to it ("office."
/// -> "office", "(Berlin)" -> "Berlin"): from its first to its last letter or
/// digit. Empty when it has none.
pub fn core(word: &str) -> std::ops::Range<usize> {
    let Some(start) = word.find(char::is_alphanumeric) else {
        return 0..0;
    };
    let (last, c) = word
        .char_indices()
        .rfind(|(_, c)| c.is_alphanumeric())
        .expect("a letter or digit was found");
    start..last + c.len_utf8()
}

/// Predictions for masked word positions.
pub trait MaskedLm {
    /// Model name, for messages and signatures.
    fn name(&self) -> &str;
    /// For each query, the `k` most likely whole-word replacements of the
    /// [`core`] of `words[position]` given the other words (and the
    /// punctuation around it). A query the model cannot see (its mask past
    /// the model's length) gets none.
    fn top_k<'a>(
        &'a self,
        queries: &'a [Query<'a>],
        k: usize,
    ) -> LocalBoxFuture<'a, Result<Vec<Candidates>, ModelError>>;
}

/// Candidates the replacement is sampled from ([BS]: top-10).
pub const TOP_K: usize = 10;

/// The words joined with spaces, the [`core`] of `words[position]` replaced
/// by `mask` (its punctuation stays); a word without a core (a placeholder
/// such as the attack's `_`) is replaced whole.
pub fn masked_text(words: &[&str], position: usize, mask: &str) -> String {
    let mut text = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        let c = core(w);
        if i != position {
            text.push_str(w);
        } else if c.is_empty() {
            text.push_str(mask);
        } else {
            text.push_str(&w[..c.start]);
            text.push_str(mask);
            text.push_str(&w[c.end..]);
        }
    }
    text
}

/// A masked-LM checkpoint (BERT, RoBERTa, DistilBERT with their MLM head)
/// as a [`MaskedLm`]: the words are joined with spaces, the [`core`] of the
/// word at the position replaced by the mask token, and the head's distribution at the
/// mask read. Candidates are whole-word vocabulary entries (no special
/// tokens, no `##` continuation pieces, no punctuation-only tokens), with
/// their probabilities.
pub struct PlmMaskedLm<'a> {
    plm: &'a crate::models::Plm,
}

impl<'a> PlmMaskedLm<'a> {
    /// Wraps a loaded model; errors when it has no masked-LM head or mask token.
    pub fn new(plm: &'a crate::models::Plm) -> Result<Self, ModelError> {
        use crate::models::Head;
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

    /// [`MaskedLm::top_k`]: the masked texts run as one batch per 32,
    /// asynchronously (so WebGPU reads work too).
    pub async fn top_k_batch(
        &self,
        queries: &[Query<'_>],
        k: usize,
    ) -> Result<Vec<Candidates>, ModelError> {
        use burn::tensor::{Tensor, TensorData, activation};
        let plm = self.plm;
        let mask = plm.tokenizer.mask_id().expect("checked in new");
        let mask_text = plm.tokenizer.decode(&[mask])?;
        let mut out: Vec<Candidates> = vec![Vec::new(); queries.len()];
        // (query index, ids, mask position) of the queries the model can see.
        let mut rows: Vec<(usize, Vec<u32>, usize)> = Vec::new();
        for (q, (words, position)) in queries.iter().enumerate() {
            let ids = plm
                .encode(&masked_text(words, *position, &mask_text))?
                .ids();
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
    fn best_words(&self, values: &[f32], k: usize) -> Result<Candidates, ModelError> {
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
}

impl MaskedLm for PlmMaskedLm<'_> {
    fn name(&self) -> &str {
        &self.plm.name
    }

    fn top_k<'a>(
        &'a self,
        queries: &'a [Query<'a>],
        k: usize,
    ) -> LocalBoxFuture<'a, Result<Vec<Candidates>, ModelError>> {
        Box::pin(self.top_k_batch(queries, k))
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
        "Replaces ceil(p x the words with a letter or digit) one at a time: mask a random word (its punctuation stays), sample from the masked LM's top-10 (excluding the original word).",
    )
};
impl Injection for BertDiverge {
    fn info(&self) -> &'static InjectionInfo {
        &BERT_DIVERGE
    }
    /// Never called: [`super::apply`] and [`super::apply_many`] drive
    /// [`Injection::rewrite`], asking the masked LM as it goes.
    fn perturb(
        &self,
        _text: &str,
        _p: f64,
        _rng: &mut InjectRng,
        _ctx: &Context,
    ) -> Result<String, NotApplicable> {
        Err(NotApplicable(
            "BERT-diverge runs through its rewrite (inject::apply)".into(),
        ))
    }

    fn rewrite(
        &self,
        text: &str,
        level: f64,
        rng: InjectRng,
    ) -> Option<Result<Rewrite, NotApplicable>> {
        Some(Rewrite::new(text, level, rng))
    }
}

/// BERT-diverge's rewrite of one text: `ceil(p x length)` positions drawn up
/// front among the words with a letter or digit, then one masked-LM query
/// per position, each seeing the replacements before it. The replacement
/// is sampled from the top-10 candidates other than the original word, in
/// proportion to their probabilities, and takes the place of the word's
/// [`core`]: "office." becomes "building.", not "building". A position with
/// no candidate keeps its word.
pub struct Rewrite {
    words: Vec<String>,
    positions: std::vec::IntoIter<usize>,
    next: Option<usize>,
    rng: InjectRng,
}

impl Rewrite {
    fn new(text: &str, p: f64, mut rng: InjectRng) -> Result<Self, NotApplicable> {
        let words: Vec<String> = words(text).iter().map(|w| w.text.to_string()).collect();
        if words.is_empty() {
            return Err(NotApplicable("empty text".into()));
        }
        let eligible: Vec<usize> = (0..words.len())
            .filter(|&i| !core(&words[i]).is_empty())
            .collect();
        if eligible.is_empty() {
            return Err(NotApplicable("no word with a letter or digit".into()));
        }
        let k = super::ceil_portion(p, eligible.len());
        let mut positions = sample(&mut rng, eligible.len(), k)
            .into_iter()
            .map(|i| eligible[i])
            .collect::<Vec<_>>()
            .into_iter();
        let next = positions.next();
        Ok(Self {
            words,
            positions,
            next,
            rng,
        })
    }

    /// Whether a position is left to ask about.
    pub fn asks(&self) -> bool {
        self.next.is_some()
    }

    /// The next position to ask about, or `None` when the rewrite is done.
    pub fn query(&self) -> Option<Query<'_>> {
        let position = self.next?;
        Some((self.words.iter().map(String::as_str).collect(), position))
    }

    /// Takes the model's candidates for the position [`Self::query`] asked.
    pub fn answer(&mut self, candidates: Candidates) {
        let Some(position) = self.next.take() else {
            return;
        };
        self.next = self.positions.next();
        let word = &self.words[position];
        let at = core(word);
        let original = &word[at.clone()];
        let candidates: Candidates = candidates
            .into_iter()
            .filter(|(c, _)| !c.eq_ignore_ascii_case(original))
            .collect();
        let total: f32 = candidates.iter().map(|(_, p)| p.max(0.0)).sum();
        if candidates.is_empty() || total <= 0.0 {
            return;
        }
        let mut draw = self.rng.random::<f32>() * total;
        let choice = candidates
            .iter()
            .position(|(_, p)| {
                draw -= p.max(0.0);
                draw <= 0.0
            })
            .unwrap_or(candidates.len() - 1);
        let chosen = candidates.into_iter().nth(choice).expect("in range").0;
        self.words[position].replace_range(at, &chosen);
    }

    /// The rewritten text.
    pub fn finish(self) -> String {
        join(&self.words)
    }
}

/// A test double: always proposes the same two words ("alpha", "beta").
#[cfg(test)]
pub(crate) struct TwoWords;

#[cfg(test)]
impl MaskedLm for TwoWords {
    fn name(&self) -> &str {
        "two-words"
    }
    fn top_k<'a>(
        &'a self,
        queries: &'a [Query<'a>],
        _: usize,
    ) -> LocalBoxFuture<'a, Result<Vec<Candidates>, ModelError>> {
        let two = vec![("alpha".to_owned(), 0.75), ("beta".to_owned(), 0.25)];
        Box::pin(async move { Ok(vec![two; queries.len()]) })
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::super::{InjectError, Job, apply, apply_many};
    use super::*;

    /// A test double whose candidates depend on the words it sees (so a
    /// rewrite that asked with stale words would differ), and that records
    /// each batch's size.
    #[derive(Default)]
    struct Echo {
        batches: RefCell<Vec<usize>>,
    }
    impl MaskedLm for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        fn top_k<'a>(
            &'a self,
            queries: &'a [Query<'a>],
            _: usize,
        ) -> LocalBoxFuture<'a, Result<Vec<Candidates>, ModelError>> {
            self.batches.borrow_mut().push(queries.len());
            let answers = queries
                .iter()
                .map(|(words, position)| {
                    let before = if *position == 0 {
                        "start"
                    } else {
                        words[position - 1]
                    };
                    let after = words.get(position + 1).copied().unwrap_or("end");
                    vec![(format!("{before}-x"), 0.6), (format!("y-{after}"), 0.4)]
                })
                .collect();
            Box::pin(async move { Ok(answers) })
        }
    }

    #[test]
    fn the_core_of_a_word_leaves_its_punctuation() {
        assert_eq!(core("office."), 0..6);
        assert_eq!(core("(Berlin),"), 1..7);
        assert_eq!(core("\"Zürich\""), 1..8);
        assert_eq!(core("don't"), 0..5);
        assert_eq!(core("—"), 0..0);
        assert_eq!(core(""), 0..0);
    }

    #[test]
    fn the_masked_text_keeps_punctuation_and_masks_a_placeholder_whole() {
        let words = ["She", "went", "(to", "office).", "_"];
        assert_eq!(masked_text(&words, 3, "[MASK]"), "She went (to [MASK]). _");
        // The attack marks the slot to fill with "_": no stray underscore.
        assert_eq!(
            masked_text(&words, 4, "<mask>"),
            "She went (to office). <mask>"
        );
        assert_eq!(
            masked_text(&words, 0, "[MASK]"),
            "[MASK] went (to office). _"
        );
    }

    #[test]
    fn a_replacement_keeps_the_punctuation_around_the_word() {
        let ctx = Context {
            masked_lm: Some(&TwoWords),
            ..Context::default()
        };
        let text = "She went (to Berlin), — then: \"alpha.\"";
        for seed in 0..5 {
            let out = apply(&BertDiverge, text, 1.0, seed, &ctx).unwrap();
            let words: Vec<&str> = out.text.split(' ').collect();
            assert_eq!(words.len(), 7, "{}", out.text);
            for (got, shape) in words.iter().zip(["", "", "(", "),", "—", ":", "\".\""]) {
                // Every word but the dash is replaced; its punctuation stays.
                let bare: String = got.chars().filter(|c| !c.is_alphabetic()).collect();
                assert_eq!(bare, shape, "{}", out.text);
            }
            assert_eq!(words[4], "—", "a word without letters is never asked about");
            // The original word is never its own replacement.
            assert_eq!(words[6], "\"beta.\"", "{}", out.text);
        }
        let none = apply(&BertDiverge, "— ...", 1.0, 0, &ctx).unwrap();
        assert!(!none.applied);
        assert_eq!(
            none.reason.as_deref(),
            Some("no word with a letter or digit")
        );
    }

    #[test]
    fn many_texts_at_once_equal_one_at_a_time() {
        let texts = [
            "one two three four five six seven eight nine ten",
            "a short one",
            "",
            "the committee approved the new budget after a long debate",
        ];
        let echo = Echo::default();
        let ctx = Context {
            masked_lm: Some(&echo),
            ..Context::default()
        };
        let mut jobs = Vec::new();
        for text in texts {
            for (level, seed) in [(0.1, 0), (0.4, 1), (0.4, 2), (1.0, 3)] {
                jobs.push(Job {
                    text,
                    level,
                    seed,
                    ctx,
                });
            }
        }
        let turns = std::cell::Cell::new(0);
        let many = futures::executor::block_on(apply_many(&BertDiverge, &jobs, async || {
            turns.set(turns.get() + 1);
            true
        }))
        .unwrap();
        let batches = echo.batches.take();
        // One batch per step: the longest rewrite (10 words at p = 1) takes
        // 10 steps, and each step asks every job still going.
        assert_eq!(batches.len(), 10, "{batches:?}");
        assert_eq!(turns.get(), 10);
        assert_eq!(batches[0], 12, "every job of a non-empty text asks first");
        assert_eq!(
            batches.iter().sum::<usize>(),
            1 + 4 + 4 + 10 + 1 + 2 + 2 + 3 + 1 + 4 + 4 + 10
        );
        // More jobs than a batch holds: batches of 32, each followed by a
        // turn, and a `false` there stops the work.
        let many_jobs = vec![jobs[3]; 70];
        let turns = std::cell::Cell::new(0);
        let out = futures::executor::block_on(apply_many(&BertDiverge, &many_jobs, async || {
            turns.set(turns.get() + 1);
            true
        }))
        .unwrap();
        assert_eq!(out, vec![many[3].clone(); 70]);
        assert_eq!(echo.batches.take()[..3], [32, 32, 6]);
        assert_eq!(turns.get(), 30);
        let stopped =
            futures::executor::block_on(apply_many(&BertDiverge, &many_jobs, async || false));
        assert!(matches!(stopped, Err(InjectError::Stopped)));
        assert_eq!(echo.batches.take(), [32], "stopped after the first batch");
        for (job, out) in jobs.iter().zip(&many) {
            let one = apply(&BertDiverge, job.text, job.level, job.seed, &job.ctx).unwrap();
            assert_eq!(out, &one, "{job:?}");
        }
        assert!(many.iter().filter(|o| o.applied).count() >= 12);
        assert_eq!(many[8].reason.as_deref(), Some("empty text"));
        // A model that answers fewer queries than it was asked is an error,
        // not a rewrite that waits forever.
        struct Mute;
        impl MaskedLm for Mute {
            fn name(&self) -> &str {
                "mute"
            }
            fn top_k<'a>(
                &'a self,
                _: &'a [Query<'a>],
                _: usize,
            ) -> LocalBoxFuture<'a, Result<Vec<Candidates>, ModelError>> {
                Box::pin(async { Ok(Vec::new()) })
            }
        }
        let mute = Job {
            ctx: Context {
                masked_lm: Some(&Mute),
                ..Context::default()
            },
            ..jobs[0]
        };
        assert!(matches!(
            apply(&BertDiverge, mute.text, mute.level, mute.seed, &mute.ctx),
            Err(InjectError::Model { .. })
        ));
        // Without a masked LM, the same error as one at a time.
        let bare = Job {
            ctx: Context::default(),
            ..jobs[0]
        };
        let err = futures::executor::block_on(apply_many(&BertDiverge, &[bare], async || true));
        assert!(matches!(err, Err(InjectError::MissingContext { .. })));
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
