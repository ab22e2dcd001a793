//! Fluency errors of [BS] Table 16. Levels are the defaults of the paper's
//! released code (SPEC 2.1). Verb lemmatization uses the tagger.

use rand::Rng;
use rand::seq::index::sample;

use super::spans::replace_spans;
use super::{
    Context, Family, InjectRng, Injection, InjectionInfo, LevelKind, NotApplicable, ceil_portion,
    info, join, recapitalize, tagged, tagger,
};
use crate::text::lexicon::{self, ARTICLES, PREPOSITIONS, STOP_WORDS};
use crate::text::morph::{match_case, verb_lemma};
use crate::text::sentences::sentence_spans;
use crate::text::words::{Word, words};

/// All fluency injections in this file.
pub static ALL: [&dyn Injection; 10] = [
    &Truncation,
    &LexiconRemoval(&ARTICLE_REMOVAL),
    &LexiconRemoval(&PREPOSITION_REMOVAL),
    &LexiconRemoval(&STOPWORD_REMOVAL),
    &TokenDrop,
    &RepeatedToken,
    &LocalSwap,
    &MiddleSwap,
    &NoisedPunctuation,
    &VerbLemmatization,
];

const PORTIONS_05_50: &[f64] = &[0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5];

fn too_short(n: usize, p: f64) -> NotApplicable {
    NotApplicable(format!(
        "the text has {n} words: a portion of {p} affects none"
    ))
}

/// Drop the last floor(p * len) words.
pub struct Truncation;
static TRUNCATION: InjectionInfo = info(
    "truncation",
    "Truncation",
    Family::Fluency,
    LevelKind::Portion,
    &[0.1, 0.2, 0.3, 0.4, 0.5],
    "Drops the last floor(p x length) words.",
);
impl Injection for Truncation {
    fn info(&self) -> &'static InjectionInfo {
        &TRUNCATION
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        _: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let w = words(text);
        let drop = (p * w.len() as f64).floor() as usize;
        if drop == 0 {
            return Err(too_short(w.len(), p));
        }
        if drop >= w.len() {
            return Err(NotApplicable(format!(
                "p = {p} would remove all {} words",
                w.len()
            )));
        }
        Ok(text[..w[w.len() - drop - 1].end].to_string())
    }
}

/// Removal of words from a closed list, each with probability p.
pub struct LexiconRemoval(&'static LexiconSpec);

/// Which list a [`LexiconRemoval`] uses.
pub struct LexiconSpec {
    info: InjectionInfo,
    list: &'static [&'static str],
    what: &'static str,
}

static ARTICLE_REMOVAL: LexiconSpec = LexiconSpec {
    info: info(
        "article_removal",
        "Article removal",
        Family::Fluency,
        LevelKind::Portion,
        &[0.5, 1.0],
        "Removes each article (a, an, the) with probability p.",
    ),
    list: ARTICLES,
    what: "articles",
};
static PREPOSITION_REMOVAL: LexiconSpec = LexiconSpec {
    info: info(
        "preposition_removal",
        "Preposition removal",
        Family::Fluency,
        LevelKind::Portion,
        &[0.4, 0.7, 1.0],
        "Removes each preposition with probability p.",
    ),
    list: PREPOSITIONS,
    what: "prepositions",
};
static STOPWORD_REMOVAL: LexiconSpec = LexiconSpec {
    info: info(
        "stopword_removal",
        "Stop-word removal",
        Family::Fluency,
        LevelKind::Portion,
        &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        "Removes each stop word with probability p.",
    ),
    list: STOP_WORDS,
    what: "stop words",
};

/// Removes the words at `drop`, moving trailing punctuation of a removed word
/// onto the previous kept word, and re-capitalises sentence starts.
fn remove_words(all: &[Word], drop: &[bool]) -> String {
    let mut kept: Vec<String> = Vec::with_capacity(all.len());
    for (w, &d) in all.iter().zip(drop) {
        if !d {
            kept.push(w.text.to_string());
            continue;
        }
        let core_end = w
            .text
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_alphanumeric())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let trailing = &w.text[core_end..];
        if let Some(prev) = kept.last_mut()
            && !trailing.is_empty()
            && !prev.ends_with(|c: char| !c.is_alphanumeric())
        {
            prev.push_str(trailing);
        }
    }
    recapitalize(&join(&kept))
}

impl Injection for LexiconRemoval {
    fn info(&self) -> &'static InjectionInfo {
        &self.0.info
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let w = words(text);
        let eligible: Vec<bool> = w
            .iter()
            .map(|w| lexicon::contains(self.0.list, w.text))
            .collect();
        if !eligible.contains(&true) {
            return Err(NotApplicable(format!("no {} to remove", self.0.what)));
        }
        let drop: Vec<bool> = eligible.iter().map(|&e| e && rng.random_bool(p)).collect();
        Ok(remove_words(&w, &drop))
    }
}

/// Delete ceil(p * len) random words.
pub struct TokenDrop;
static TOKEN_DROP: InjectionInfo = info(
    "token_drop",
    "Token drop",
    Family::Fluency,
    LevelKind::Portion,
    PORTIONS_05_50,
    "Deletes ceil(p x length) random words.",
);

/// Marks `k` random positions out of `n` (at most `n - 1`, so text remains).
fn random_mask(rng: &mut InjectRng, n: usize, k: usize) -> Vec<bool> {
    let mut mask = vec![false; n];
    for i in sample(rng, n, k.min(n.saturating_sub(1))) {
        mask[i] = true;
    }
    mask
}

impl Injection for TokenDrop {
    fn info(&self) -> &'static InjectionInfo {
        &TOKEN_DROP
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let w = words(text);
        if w.len() < 2 {
            return Err(too_short(w.len(), p));
        }
        let drop = random_mask(rng, w.len(), ceil_portion(p, w.len()));
        Ok(remove_words(&w, &drop))
    }
}

/// Repeat ceil(p * len) random words once, in place.
pub struct RepeatedToken;
static REPEATED_TOKEN: InjectionInfo = info(
    "repeated_token",
    "Repeated token",
    Family::Fluency,
    LevelKind::Portion,
    PORTIONS_05_50,
    "Repeats ceil(p x length) random words once, in place.",
);
impl Injection for RepeatedToken {
    fn info(&self) -> &'static InjectionInfo {
        &REPEATED_TOKEN
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let w = words(text);
        if w.is_empty() {
            return Err(too_short(0, p));
        }
        let k = ceil_portion(p, w.len());
        let mut repeat = vec![false; w.len()];
        for i in sample(rng, w.len(), k) {
            repeat[i] = true;
        }
        let mut out = Vec::with_capacity(w.len() + k);
        for (word, r) in w.iter().zip(repeat) {
            if r {
                // The copy carries no sentence-final punctuation: "went went."
                out.push(word.text.trim_end_matches(|c: char| !c.is_alphanumeric()));
            }
            out.push(word.text);
        }
        Ok(join(&out))
    }
}

/// Swap ceil(p * len) random words with their right neighbour.
pub struct LocalSwap;
static LOCAL_SWAP: InjectionInfo = InjectionInfo {
    swap: true,
    ..info(
        "local_swap",
        "Local swap",
        Family::Fluency,
        LevelKind::Portion,
        &[0.05, 0.15, 0.3, 0.6],
        "Swaps ceil(p x length) random words with their right neighbour.",
    )
};
impl Injection for LocalSwap {
    fn info(&self) -> &'static InjectionInfo {
        &LOCAL_SWAP
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let mut w: Vec<&str> = words(text).iter().map(|w| w.text).collect();
        if w.len() < 2 {
            return Err(NotApplicable("fewer than two words to swap".into()));
        }
        // SPEC: ceil(p x len) words, each with its right neighbour; the last
        // word has none, so at most len - 1 of them.
        let k = ceil_portion(p, w.len()).min(w.len() - 1);
        for i in sample(rng, w.len() - 1, k) {
            w.swap(i, i + 1);
        }
        Ok(join(&w))
    }
}

/// Swap the halves of n sentences at their midpoint.
pub struct MiddleSwap;
static MIDDLE_SWAP: InjectionInfo = InjectionInfo {
    swap: true,
    ..info(
        "middle_swap",
        "Middle swap",
        Family::Fluency,
        LevelKind::Count,
        &[1.0, 2.0, 3.0],
        "Swaps the two halves of n random sentences at their midpoint (\"To the office she went.\").",
    )
};

/// "She went to the office." -> "To the office she went."
fn swap_halves(sentence: &str) -> String {
    let mut w: Vec<String> = words(sentence).iter().map(|w| w.text.to_string()).collect();
    let last = w.last_mut().expect("caller checked length");
    let cut = last
        .trim_end_matches(['.', '!', '?', '…', '"', '\'', ')', '”'])
        .len();
    let terminal = last.split_off(cut);
    // A sentence-initial function word loses its capital in the middle.
    if lexicon::contains(STOP_WORDS, &w[0]) && w[0] != "I" {
        w[0] = w[0].to_lowercase();
    }
    let mid = w.len() / 2;
    w.rotate_left(mid);
    let mut out = recapitalize(&join(&w));
    out.push_str(&terminal);
    out
}

impl Injection for MiddleSwap {
    fn info(&self) -> &'static InjectionInfo {
        &MIDDLE_SWAP
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let spans = sentence_spans(text);
        let eligible: Vec<usize> = (0..spans.len())
            .filter(|&i| words(&text[spans[i].clone()]).len() >= 4)
            .collect();
        if eligible.is_empty() {
            return Err(NotApplicable("no sentence of four or more words".into()));
        }
        let chosen: Vec<usize> = sample(rng, eligible.len(), (n as usize).min(eligible.len()))
            .into_iter()
            .map(|i| eligible[i])
            .collect();
        let parts: Vec<String> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if chosen.contains(&i) {
                    swap_halves(&text[s.clone()])
                } else {
                    text[s.clone()].to_string()
                }
            })
            .collect();
        Ok(join(&parts))
    }
}

/// Change each of . , ! ? : with probability p.
pub struct NoisedPunctuation;
static NOISED_PUNCTUATION: InjectionInfo = info(
    "noised_punctuation",
    "Noised punctuation",
    Family::Fluency,
    LevelKind::Portion,
    &[0.5, 1.0],
    "Changes each word-final . , ! ? : with probability p (period and comma trade places, ! ? become commas, a colon a period).",
);
impl Injection for NoisedPunctuation {
    fn info(&self) -> &'static InjectionInfo {
        &NOISED_PUNCTUATION
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let mut out = String::with_capacity(text.len());
        let mut found = false;
        let chars: Vec<char> = text.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            // Only punctuation that ends a word: decimals ("3.5") and "e.g." inner dots stay.
            let ends_word = chars
                .get(i + 1)
                .is_none_or(|n| n.is_whitespace() || "\"')]”’".contains(*n));
            let replacement = match c {
                '.' if ends_word && chars.get(i.wrapping_sub(1)).is_none_or(|c| *c != '.') => {
                    Some(',')
                }
                ',' if ends_word => Some('.'),
                '!' | '?' if ends_word => Some(','),
                ':' if ends_word => Some('.'),
                _ => None,
            };
            match replacement {
                Some(r) => {
                    found = true;
                    out.push(if rng.random_bool(p) { r } else { c });
                }
                None => out.push(c),
            }
        }
        if !found {
            return Err(NotApplicable("no word-final punctuation to change".into()));
        }
        Ok(out)
    }
}

/// Replace inflected verbs by their lemma with probability p (went -> go).
pub struct VerbLemmatization;
static VERB_LEMMATIZATION: InjectionInfo = tagged(info(
    "verb_lemmatization",
    "Verb lemmatization",
    Family::Fluency,
    LevelKind::Portion,
    &[0.5, 1.0],
    "Replaces each inflected verb by its lemma with probability p (went -> go, says -> say).",
));
impl Injection for VerbLemmatization {
    fn info(&self) -> &'static InjectionInfo {
        &VERB_LEMMATIZATION
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let analysis = tagger()?.analyze(text);
        let candidates: Vec<_> = analysis
            .tokens
            .iter()
            .filter(|t| matches!(t.upos, "VERB" | "AUX"))
            .filter(|t| t.token.text.chars().all(char::is_alphabetic))
            .filter_map(|t| {
                let lemma = match_case(&verb_lemma(t.text()), t.text());
                (lemma != t.text()).then(|| (t.token.span(), lemma))
            })
            .collect();
        if candidates.is_empty() {
            return Err(NotApplicable("no inflected verbs".into()));
        }
        let chosen = candidates
            .into_iter()
            .filter(|_| rng.random_bool(p))
            .collect();
        Ok(replace_spans(text, chosen))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Context, apply};
    use super::*;

    fn run(inj: &dyn Injection, text: &str, level: f64) -> String {
        apply(inj, text, level, 7, &Context::default())
            .unwrap()
            .text
    }

    #[test]
    fn local_swap_swaps_ceil_p_times_the_words() {
        // 21 words at p = 0.05: ceil(1.05) = 2 swaps (SPEC), so at least three
        // words move (one swap alone moves two).
        let text: Vec<String> = (0..21).map(|i| format!("w{i}")).collect();
        let text = text.join(" ");
        for seed in 0..20 {
            let out = apply(&LocalSwap, &text, 0.05, seed, &Context::default()).unwrap();
            let moved = text
                .split(' ')
                .zip(out.text.split(' '))
                .filter(|(a, b)| a != b)
                .count();
            assert!(moved >= 3, "seed {seed}: {}", out.text);
        }
        // Never more swaps than words with a right neighbour.
        let two = apply(&LocalSwap, "a b", 1.0, 0, &Context::default()).unwrap();
        assert_eq!(two.text, "b a");
    }

    #[test]
    fn removing_a_word_that_ends_in_a_multibyte_letter_keeps_its_punctuation() {
        let w = words("We met at the Café. Then left.");
        let drop: Vec<bool> = w.iter().map(|w| w.text == "Café.").collect();
        assert_eq!(remove_words(&w, &drop), "We met at the. Then left.");
    }

    #[test]
    fn truncation_drops_the_tail() {
        assert_eq!(
            run(
                &Truncation,
                "one two three four five six seven eight nine ten",
                0.3
            ),
            "one two three four five six seven"
        );
        let all = apply(&Truncation, "Hi there", 1.0, 0, &Context::default()).unwrap();
        assert!(!all.applied && all.reason.unwrap().contains("remove all 2 words"));
        let short = apply(&Truncation, "Hi there", 0.1, 0, &Context::default()).unwrap();
        assert!(!short.applied && short.reason.unwrap().contains("2 words"));
    }

    #[test]
    fn article_removal_recapitalises_and_keeps_punctuation() {
        assert_eq!(
            run(ALL[1], "The cat saw a dog. The end.", 1.0),
            "Cat saw dog. End."
        );
    }

    #[test]
    fn middle_swap_moves_the_halves() {
        assert_eq!(
            swap_halves("She went to the office."),
            "To the office she went."
        );
    }

    #[test]
    fn noised_punctuation_spares_decimals() {
        assert_eq!(
            run(
                &NoisedPunctuation,
                "It cost 3.5 euros, she said: fine!",
                1.0
            ),
            "It cost 3.5 euros. she said. fine,"
        );
    }
}
