//! What an attack can do to a text: the word slots it edits, and the
//! candidate edits of each strategy (deletion, DeepWordBug's character
//! edits, a masked LM's replace / insert / merge, input-embedding
//! neighbours).

use rand::Rng;

use crate::inject::InjectRng;
use crate::inject::character::{CharOp, edit_word};
use crate::inject::masked_lm::PlmMaskedLm;
use crate::models::{ModelError, Plm, read_back};
use crate::text::words::words;

/// One whitespace word of a candidate text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The word, punctuation attached.
    pub word: String,
    /// Its index among the original words (None: inserted).
    pub origin: Option<usize>,
    /// Changed or inserted by the attack: not edited again (TextAttack's
    /// repeat-modification constraint).
    pub touched: bool,
}

/// A candidate text as words; joined with single spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cand {
    pub slots: Vec<Slot>,
}

impl Cand {
    pub fn of(text: &str) -> Self {
        Cand {
            slots: words(text)
                .into_iter()
                .enumerate()
                .map(|(i, w)| Slot {
                    word: w.text.to_owned(),
                    origin: Some(i),
                    touched: false,
                })
                .collect(),
        }
    }

    pub fn text(&self) -> String {
        let words: Vec<&str> = self.slots.iter().map(|s| s.word.as_str()).collect();
        words.join(" ")
    }

    fn words(&self) -> Vec<&str> {
        self.slots.iter().map(|s| s.word.as_str()).collect()
    }

    /// Slots an edit may touch: not yet edited, with a letter or digit.
    pub fn editable(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| !self.slots[i].touched && !core(&self.slots[i].word).is_empty())
            .collect()
    }

    /// Without slot `i` (None when it is the last word: a text never
    /// becomes empty).
    pub fn delete(&self, i: usize) -> Option<Cand> {
        if self.slots.len() <= 1 {
            return None;
        }
        let mut c = self.clone();
        c.slots.remove(i);
        Some(c)
    }

    /// Slot `i`'s word core replaced by `new` (its punctuation kept).
    pub fn replace(&self, i: usize, new: &str) -> Cand {
        let mut c = self.clone();
        let word = &self.slots[i].word;
        let (pre, _, post) = split_core(word);
        c.slots[i] = Slot {
            word: format!("{pre}{new}{post}"),
            origin: self.slots[i].origin,
            touched: true,
        };
        c
    }

    /// `new` inserted before slot `i`.
    pub fn insert(&self, i: usize, new: &str) -> Cand {
        let mut c = self.clone();
        c.slots.insert(
            i,
            Slot {
                word: new.to_owned(),
                origin: None,
                touched: true,
            },
        );
        c
    }

    /// Slots `i` and `i + 1` merged into `new` (the second's trailing
    /// punctuation kept).
    pub fn merge(&self, i: usize, new: &str) -> Cand {
        let mut c = self.clone();
        let (pre, _, _) = split_core(&self.slots[i].word);
        let (_, _, post) = split_core(&self.slots[i + 1].word);
        c.slots[i] = Slot {
            word: format!("{pre}{new}{post}"),
            origin: self.slots[i].origin,
            touched: true,
        };
        c.slots.remove(i + 1);
        c
    }
}

/// A word's leading punctuation, core and trailing punctuation.
fn split_core(word: &str) -> (&str, &str, &str) {
    let start = word.find(char::is_alphanumeric).unwrap_or(word.len());
    let end = word.rfind(char::is_alphanumeric).map_or(start, |i| {
        i + word[i..].chars().next().map_or(1, char::len_utf8)
    });
    (&word[..start], &word[start..end], &word[end..])
}

/// The word without leading and trailing punctuation.
pub(crate) fn core(word: &str) -> &str {
    split_core(word).1
}

/// DeepWordBug's edits of one word's core ([ADV], SPEC 2.5): every swap of
/// neighbouring letters and every deletion of a letter, plus two random
/// substitutions and two random insertions (drawn from `rng`); distinct,
/// never the word itself.
pub(crate) fn char_edits(word: &str, rng: &mut InjectRng) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let letters = chars.iter().filter(|c| c.is_alphabetic()).count();
    let mut out: Vec<String> = Vec::new();
    let push = |w: String, out: &mut Vec<String>| {
        if w != word && !w.is_empty() && !out.contains(&w) {
            out.push(w);
        }
    };
    if letters < 2 {
        return out;
    }
    for i in 0..chars.len() - 1 {
        if chars[i].is_alphabetic() && chars[i + 1].is_alphabetic() && chars[i] != chars[i + 1] {
            let mut c = chars.clone();
            c.swap(i, i + 1);
            push(c.into_iter().collect(), &mut out);
        }
    }
    for i in 0..chars.len() {
        if chars[i].is_alphabetic() {
            let mut c = chars.clone();
            c.remove(i);
            push(c.into_iter().collect(), &mut out);
        }
    }
    for op in [
        CharOp::Substitute,
        CharOp::Substitute,
        CharOp::Insert,
        CharOp::Insert,
    ] {
        push(edit_word(word, op, rng), &mut out);
    }
    out
}

/// CLARE's three actions at a slot ([BS] §6's raising search uses the
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MlmOp {
    /// Replace the slot's core.
    Replace,
    /// Insert a word before the slot.
    Insert,
    /// Merge the slot with the next one.
    Merge,
}

/// A masked LM's proposals for each `(candidate, slot, action)` job, the
/// `k` most likely whole words each, all masked texts in one batched call.
/// A replacement equal to the word it replaces (ignoring case) is dropped;
/// a merge needs an untouched next slot.
pub(crate) async fn mlm_edits(
    mlm: &PlmMaskedLm<'_>,
    jobs: &[(&Cand, usize, MlmOp)],
    k: usize,
) -> Result<Vec<Cand>, ModelError> {
    const HOLE: &str = "_";
    let mut kept: Vec<(&Cand, usize, MlmOp)> = Vec::new();
    let mut queries: Vec<(Vec<&str>, usize)> = Vec::new();
    for &(cand, i, op) in jobs {
        let mut ctx = cand.words();
        match op {
            MlmOp::Replace => ctx[i] = HOLE,
            MlmOp::Insert => ctx.insert(i, HOLE),
            MlmOp::Merge => {
                if i + 1 >= cand.slots.len() || cand.slots[i + 1].touched {
                    continue;
                }
                ctx[i] = HOLE;
                ctx.remove(i + 1);
            }
        }
        kept.push((cand, i, op));
        queries.push((ctx, i));
    }
    let proposals = mlm.top_k_batch(&queries, k).await?;
    let mut out = Vec::new();
    for ((cand, i, op), words) in kept.into_iter().zip(proposals) {
        let old = core(&cand.slots[i].word).to_lowercase();
        for (w, _) in words {
            match op {
                MlmOp::Replace if w.to_lowercase() != old => out.push(cand.replace(i, &w)),
                MlmOp::Replace => {}
                MlmOp::Insert => out.push(cand.insert(i, &w)),
                MlmOp::Merge => out.push(cand.merge(i, &w)),
            }
        }
    }
    Ok(out)
}

/// Nearest whole-word tokens in a model's input-embedding space (cosine),
/// standing in for the counter-fitted word vectors of the genetic attack's
/// original recipe, which are not available offline.
pub struct Neighbours {
    name: String,
    /// Whole-word vocabulary entries, as written (no `##`, `Ġ` or `▁`).
    words: Vec<String>,
    /// Their L2-normalised embeddings, row-major.
    vectors: Vec<f32>,
    dim: usize,
    /// Vocabulary id -> row in `words`.
    row_of: std::collections::HashMap<u32, usize>,
    lowercase: bool,
    plm: std::rc::Rc<Plm>,
}

impl std::fmt::Debug for Neighbours {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Neighbours")
            .field("name", &self.name)
            .field("words", &self.words.len())
            .finish()
    }
}

impl Neighbours {
    /// Reads `plm`'s input embeddings and keeps its whole-word entries
    /// (letters only, two or more).
    pub async fn of(plm: std::rc::Rc<Plm>) -> Result<Self, ModelError> {
        let (values, [rows, dim]) = read_back(plm.input_embeddings()).await?;
        let tok = &plm.tokenizer;
        let vocab = rows.min(tok.vocab_size());
        let entries: Vec<(u32, String)> = (0..vocab as u32)
            .filter(|&id| !tok.is_special(id))
            .filter_map(|id| tok.id_to_token(id).map(|t| (id, t)))
            .collect();
        // Word-start markers: byte-level BPE's `Ġ`, SentencePiece's `▁`;
        // WordPiece marks continuations with `##` instead.
        let marker = ['Ġ', '▁']
            .into_iter()
            .find(|m| entries.iter().filter(|(_, t)| t.starts_with(*m)).count() > 100);
        let lowercase = tok.encode("The").is_ok_and(|t| {
            t.first()
                .is_some_and(|t| tok.id_to_token(t.id).as_deref() == Some("the"))
        });
        let mut words = Vec::new();
        let mut vectors = Vec::new();
        let mut row_of = std::collections::HashMap::new();
        for (id, token) in entries {
            let word = match marker {
                Some(m) => match token.strip_prefix(m) {
                    Some(w) => w,
                    None => continue,
                },
                None if token.starts_with("##") => continue,
                None => token.as_str(),
            };
            if word.chars().count() < 2 || !word.chars().all(char::is_alphabetic) {
                continue;
            }
            let row = &values[id as usize * dim..(id as usize + 1) * dim];
            let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            vectors.extend(row.iter().map(|v| v / norm));
            row_of.insert(id, words.len());
            words.push(word.to_owned());
        }
        Ok(Self {
            name: plm.name.clone(),
            words,
            vectors,
            dim,
            row_of,
            lowercase,
            plm,
        })
    }

    /// The model the vectors come from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `k` nearest whole words to `word` (itself, case-only variants
    /// and punctuation excluded), nearest first; empty when `word` is not a
    /// single whole-word token of the vocabulary. Capitalised like `word`.
    pub fn nearest(&self, word: &str, k: usize) -> Vec<String> {
        let tok = &self.plm.tokenizer;
        let row = [word.to_owned(), format!(" {word}")].iter().find_map(|w| {
            match tok.encode(w).ok()?.as_slice() {
                [t] => self.row_of.get(&t.id).copied(),
                _ => None,
            }
        });
        let Some(row) = row else {
            return vec![];
        };
        let query = &self.vectors[row * self.dim..(row + 1) * self.dim];
        let mut sims: Vec<(f32, usize)> = self
            .vectors
            .chunks_exact(self.dim)
            .enumerate()
            .map(|(j, v)| (v.iter().zip(query).map(|(a, b)| a * b).sum(), j))
            .collect();
        sims.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let lower = word.to_lowercase();
        let capital = word.chars().next().is_some_and(char::is_uppercase);
        let mut out: Vec<String> = Vec::with_capacity(k);
        for (_, j) in sims {
            if out.len() == k {
                break;
            }
            let w = &self.words[j];
            if w.to_lowercase() == lower || out.iter().any(|o| o.to_lowercase() == w.to_lowercase())
            {
                continue;
            }
            let w = if capital && self.lowercase {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_uppercase().chain(c).collect())
                    .unwrap_or_default()
            } else {
                w.clone()
            };
            out.push(w);
        }
        out
    }
}

/// A random index of `weights` drawn in proportion to them (all zero:
/// uniform).
pub(crate) fn weighted_choice(weights: &[f64], rng: &mut InjectRng) -> usize {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return rng.random_range(0..weights.len());
    }
    let mut x = rng.random_range(0.0..total);
    for (i, w) in weights.iter().enumerate() {
        if x < *w {
            return i;
        }
        x -= w;
    }
    weights.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn slots_keep_punctuation() {
        let c = Cand::of("The cat (sat) on the mat.");
        assert_eq!(c.replace(2, "stood").text(), "The cat (stood) on the mat.");
        assert_eq!(c.merge(4, "a").text(), "The cat (sat) on a.");
        assert_eq!(c.insert(0, "So").text(), "So The cat (sat) on the mat.");
        assert_eq!(c.delete(1).unwrap().text(), "The (sat) on the mat.");
        assert!(Cand::of("one").delete(0).is_none());
        assert_eq!(split_core("\"don't!\""), ("\"", "don't", "!\""));
        assert_eq!(split_core("..."), ("...", "", ""));
    }

    #[test]
    fn char_edits_differ_and_are_deterministic() {
        let mut a = InjectRng::seed_from_u64(3);
        let mut b = InjectRng::seed_from_u64(3);
        let e = char_edits("house", &mut a);
        assert_eq!(e, char_edits("house", &mut b));
        assert!(e.contains(&"huose".to_owned()) && e.contains(&"hous".to_owned()));
        assert!(e.iter().all(|w| w != "house"));
        assert!(char_edits("a", &mut a).is_empty());
    }
}
