//! DeepWordBug character operations ([ADV], SPEC 2.5): in each of n chosen
//! words, swap two neighbouring letters, substitute, delete or insert one.

use rand::Rng;
use rand::seq::index::sample;

use super::{
    Context, Family, InjectRng, Injection, InjectionInfo, LevelKind, NotApplicable, info, join,
};
use crate::text::words::words;

/// The four operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CharOp {
    /// Swap two neighbouring letters.
    Swap,
    /// Replace a letter by another.
    Substitute,
    /// Delete a letter.
    Delete,
    /// Insert a letter.
    Insert,
}

/// All character injections.
pub static ALL: [&dyn Injection; 4] = [
    &CharAttack(CharOp::Swap, &SWAP),
    &CharAttack(CharOp::Substitute, &SUBSTITUTE),
    &CharAttack(CharOp::Delete, &DELETE),
    &CharAttack(CharOp::Insert, &INSERT),
];

const WORD_COUNTS: &[f64] = &[1.0, 3.0, 5.0];
static SWAP: InjectionInfo = info(
    "char_swap",
    "Character swap",
    Family::Character,
    LevelKind::Count,
    WORD_COUNTS,
    "Swaps two neighbouring letters in each of n random words.",
);
static SUBSTITUTE: InjectionInfo = info(
    "char_substitute",
    "Character substitution",
    Family::Character,
    LevelKind::Count,
    WORD_COUNTS,
    "Replaces one letter by another in each of n random words.",
);
static DELETE: InjectionInfo = info(
    "char_delete",
    "Character deletion",
    Family::Character,
    LevelKind::Count,
    WORD_COUNTS,
    "Deletes one letter in each of n random words.",
);
static INSERT: InjectionInfo = info(
    "char_insert",
    "Character insertion",
    Family::Character,
    LevelKind::Count,
    WORD_COUNTS,
    "Inserts a random letter into each of n random words.",
);

/// Words eligible for a character edit: at least three letters.
fn eligible_words(w: &[&str]) -> Vec<usize> {
    (0..w.len())
        .filter(|&i| w[i].chars().filter(|c| c.is_alphabetic()).count() >= 3)
        .collect()
}

fn random_letter(rng: &mut InjectRng, not: char) -> char {
    loop {
        let c = (b'a' + rng.random_range(0..26u8)) as char;
        if c != not.to_ascii_lowercase() {
            return c;
        }
    }
}

/// Applies `op` at a random letter position of `word`; the result always differs.
pub(crate) fn edit_word(word: &str, op: CharOp, rng: &mut InjectRng) -> String {
    let mut chars: Vec<char> = word.chars().collect();
    let letters: Vec<usize> = (0..chars.len())
        .filter(|&i| chars[i].is_alphabetic())
        .collect();
    match op {
        CharOp::Swap => {
            let pairs: Vec<usize> = letters
                .iter()
                .copied()
                .filter(|&i| {
                    chars
                        .get(i + 1)
                        .is_some_and(|n| n.is_alphabetic() && *n != chars[i])
                })
                .collect();
            match pairs.get(rng.random_range(0..pairs.len().max(1))) {
                Some(&i) => chars.swap(i, i + 1),
                // "aaa": no distinct neighbours; substitute instead.
                None => return edit_word(word, CharOp::Substitute, rng),
            }
        }
        CharOp::Substitute => {
            let i = letters[rng.random_range(0..letters.len())];
            chars[i] = random_letter(rng, chars[i]);
        }
        CharOp::Delete => {
            chars.remove(letters[rng.random_range(0..letters.len())]);
        }
        CharOp::Insert => {
            let i = letters[rng.random_range(0..letters.len())];
            let c = random_letter(rng, chars[i]);
            chars.insert(i + usize::from(rng.random_bool(0.5)), c);
        }
    }
    chars.into_iter().collect()
}

/// One DeepWordBug operation applied to n random words.
pub struct CharAttack(CharOp, &'static InjectionInfo);

/// Applies `edit` to `n` random words of three or more letters.
pub(crate) fn edit_random_words(
    text: &str,
    n: usize,
    rng: &mut InjectRng,
    mut edit: impl FnMut(&str, &mut InjectRng) -> String,
) -> Result<String, NotApplicable> {
    let mut w: Vec<String> = words(text).iter().map(|w| w.text.to_string()).collect();
    let eligible = eligible_words(&w.iter().map(String::as_str).collect::<Vec<_>>());
    if eligible.is_empty() {
        return Err(NotApplicable("no word of three or more letters".into()));
    }
    for i in sample(rng, eligible.len(), n.min(eligible.len())) {
        let idx = eligible[i];
        w[idx] = edit(&w[idx], rng);
    }
    Ok(join(&w))
}

impl Injection for CharAttack {
    fn info(&self) -> &'static InjectionInfo {
        self.1
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        edit_random_words(text, n as usize, rng, |word, rng| {
            edit_word(word, self.0, rng)
        })
    }
}
