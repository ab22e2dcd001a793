//! MENLI attacks ([MENLI] §3.2, SPEC 2.4), one key error each: omission,
//! jumbling, spelling (typo), number error, pronoun error, the
//! number-to-words paraphrase, and, with the tagger, addition, the
//! noun/verb/adjective mismatches, name error and subject-verb disagreement.
//! (MENLI's negation is the consistency family's `negation`.)

use std::sync::LazyLock;

use rand::Rng;
use rand::seq::SliceRandom;
use rand::seq::index::sample;
use regex::Regex;

use super::character::{CharOp, edit_random_words, edit_word};
use super::fluency::TokenDrop;
use super::spans::replace_spans;
use super::{
    Context, Family, InjectRng, Injection, InjectionInfo, LevelKind, NotApplicable, ceil_portion,
    info, join, tagged, tagger,
};
use crate::text::lexicon::{
    self, ADJECTIVES, FEMALE_NAMES, MALE_NAMES, MONTHS, NOUNS, PRONOUN_SWAPS, SURNAMES, VERBS,
};
use crate::text::morph::{disagreeing_form, inflect, match_case, third_person};
use crate::text::tagger::Tagged;
use crate::text::words::{Word, words};

/// All MENLI injections in this file.
pub static ALL: [&dyn Injection; 12] = [
    &Addition,
    &Omission,
    &PosMismatch(&NOUN_MISMATCH),
    &PosMismatch(&VERB_MISMATCH),
    &PosMismatch(&ADJECTIVE_MISMATCH),
    &NumberError,
    &PronounError,
    &NameError,
    &Jumbling,
    &Typo,
    &SubjectVerbDisagreement,
    &NumberToWords,
];

/// Drop a portion of the words (MENLI: 1-20%).
pub struct Omission;
static OMISSION: InjectionInfo = info(
    "omission",
    "Omission",
    Family::Menli,
    LevelKind::Portion,
    &[0.05, 0.1, 0.2],
    "Drops ceil(p x length) random words (MENLI uses 1-20%).",
);
impl Injection for Omission {
    fn info(&self) -> &'static InjectionInfo {
        &OMISSION
    }
    /// The same operation as [BS] token drop, at MENLI's rates.
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        ctx: &Context,
    ) -> Result<String, NotApplicable> {
        TokenDrop.perturb(text, p, rng, ctx)
    }
}

/// Shuffle the word order.
pub struct Jumbling;
static JUMBLING: InjectionInfo = InjectionInfo {
    swap: true,
    ..info(
        "jumbling",
        "Jumbling",
        Family::Menli,
        LevelKind::Portion,
        &[1.0],
        "Shuffles a portion p of the words among their positions (p = 1: the whole sentence).",
    )
};
impl Injection for Jumbling {
    fn info(&self) -> &'static InjectionInfo {
        &JUMBLING
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let mut w: Vec<&str> = words(text).iter().map(|w| w.text).collect();
        if w.iter().collect::<std::collections::HashSet<_>>().len() < 2 {
            return Err(NotApplicable("fewer than two distinct words".into()));
        }
        let k = ceil_portion(p, w.len()).max(2);
        let positions = sample(rng, w.len(), k).into_vec();
        let mut chosen: Vec<&str> = positions.iter().map(|&i| w[i]).collect();
        let original = chosen.clone();
        // A shuffle that changes nothing is retried (bounded: distinct words exist).
        for _ in 0..16 {
            chosen.shuffle(rng);
            if chosen != original {
                break;
            }
        }
        for (&i, word) in positions.iter().zip(chosen) {
            w[i] = word;
        }
        Ok(join(&w))
    }
}

/// One spelling error in each of n words.
pub struct Typo;
static TYPO: InjectionInfo = info(
    "typo",
    "Spelling error",
    Family::Menli,
    LevelKind::Count,
    &[1.0],
    "Introduces one typo (swap, substitute, delete or insert a letter) in each of n random words.",
);
impl Injection for Typo {
    fn info(&self) -> &'static InjectionInfo {
        &TYPO
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let ops = [
            CharOp::Swap,
            CharOp::Substitute,
            CharOp::Delete,
            CharOp::Insert,
        ];
        edit_random_words(text, n as usize, rng, |word, rng| {
            let op = ops[rng.random_range(0..ops.len())];
            edit_word(word, op, rng)
        })
    }
}

/// A number token: digit groups with optional thousands commas and decimals.
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$").expect("valid pattern"));

/// The number inside a word (`"$3.50,"` -> `3.50`) with its byte range.
fn number_in(word: &str) -> Option<(usize, usize)> {
    let start = word.find(|c: char| c.is_ascii_digit())?;
    let end = word.rfind(|c: char| c.is_ascii_digit())? + 1;
    NUMBER.is_match(&word[start..end]).then_some((start, end))
}

/// Dates are left alone: years (1000-2099) and numbers next to a month name.
fn is_date(w: &[Word], i: usize, number: &str) -> bool {
    let year = number.len() == 4
        && number
            .parse::<u32>()
            .is_ok_and(|y| (1000..2100).contains(&y));
    let month_near = [i.wrapping_sub(1), i + 1]
        .iter()
        .any(|&j| w.get(j).is_some_and(|n| lexicon::contains(MONTHS, n.text)));
    year || month_near
}

/// Replace every non-date number (with probability p) by a random number of the same format.
pub struct NumberError;
static NUMBER_ERROR: InjectionInfo = info(
    "number_error",
    "Number error",
    Family::Menli,
    LevelKind::Portion,
    &[1.0],
    "Replaces each non-date number (with probability p) by a random number of the same format.",
);
/// Replaces each non-date number (with probability `p`) by `replace(number)`,
/// keeping any surrounding punctuation or symbols (`"$3.50,"`).
fn replace_numbers(
    text: &str,
    p: f64,
    rng: &mut InjectRng,
    mut replace: impl FnMut(&str, &mut InjectRng) -> Option<String>,
) -> Result<String, NotApplicable> {
    let w = words(text);
    let mut out: Vec<String> = w.iter().map(|w| w.text.to_string()).collect();
    let mut found = false;
    for (i, word) in w.iter().enumerate() {
        let Some((s, e)) = number_in(word.text) else {
            continue;
        };
        let number = &word.text[s..e];
        if is_date(&w, i, number) {
            continue;
        }
        found = true;
        if rng.random_bool(p)
            && let Some(replacement) = replace(number, rng)
        {
            out[i] = format!("{}{}{}", &word.text[..s], replacement, &word.text[e..]);
        }
    }
    if !found {
        return Err(NotApplicable("no number outside dates".into()));
    }
    Ok(join(&out))
}

/// A random number with the same digit layout as `number`, different from it.
fn random_same_format(number: &str, rng: &mut InjectRng) -> String {
    loop {
        let mut first = true;
        let candidate: String = number
            .chars()
            .map(|c| {
                if !c.is_ascii_digit() {
                    return c;
                }
                let lo = if first && number.len() > 1 && c != '0' {
                    1
                } else {
                    0
                };
                first = false;
                char::from(b'0' + rng.random_range(lo..10u8))
            })
            .collect();
        if candidate != number {
            return candidate;
        }
    }
}

impl Injection for NumberError {
    fn info(&self) -> &'static InjectionInfo {
        &NUMBER_ERROR
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        replace_numbers(text, p, rng, |number, rng| {
            Some(random_same_format(number, rng))
        })
    }
}

/// Swap one pronoun for its counterpart (he <-> she, us <-> them...).
pub struct PronounError;
static PRONOUN_ERROR: InjectionInfo = info(
    "pronoun_error",
    "Pronoun error",
    Family::Menli,
    LevelKind::Count,
    &[1.0],
    "Swaps n random pronouns for a counterpart with the same syntax (he/she, us/them, our/their...).",
);

fn swap_pronoun(word: &str) -> Option<String> {
    let start = word.find(|c: char| c.is_alphabetic())?;
    let end = word[start..]
        .find(|c: char| !c.is_alphabetic())
        .map_or(word.len(), |e| start + e);
    // Contractions ("I'm", "he's") would need a different verb form: skip them.
    if word[end..].starts_with(['\'', '’']) || word[end..].chars().any(char::is_alphanumeric) {
        return None;
    }
    let core = &word[start..end];
    let lower = core.to_lowercase();
    let other = PRONOUN_SWAPS.iter().find_map(|&(a, b)| {
        if lower == a {
            Some(b)
        } else if lower == b && a != "his" {
            Some(a)
        } else {
            None
        }
    })?;
    let mut swapped = if core.chars().next().is_some_and(char::is_uppercase) || core == "I" {
        let mut c = other.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    } else {
        other.to_string()
    };
    if other == "i" {
        swapped = "I".into();
    }
    Some(format!("{}{}{}", &word[..start], swapped, &word[end..]))
}

impl Injection for PronounError {
    fn info(&self) -> &'static InjectionInfo {
        &PRONOUN_ERROR
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let mut w: Vec<String> = words(text).iter().map(|w| w.text.to_string()).collect();
        let eligible: Vec<usize> = (0..w.len())
            .filter(|&i| swap_pronoun(&w[i]).is_some())
            .collect();
        if eligible.is_empty() {
            return Err(NotApplicable("no pronoun to swap".into()));
        }
        for i in sample(rng, eligible.len(), (n as usize).min(eligible.len())) {
            let idx = eligible[i];
            w[idx] = swap_pronoun(&w[idx]).expect("eligible");
        }
        Ok(join(&w))
    }
}

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// English words for a whole number below one trillion.
pub fn integer_words(n: u64) -> Option<String> {
    if n >= 1_000_000_000_000 {
        return None;
    }
    fn below_thousand(n: u64) -> String {
        let mut parts = Vec::new();
        if n >= 100 {
            parts.push(format!("{} hundred", ONES[(n / 100) as usize]));
        }
        let rest = n % 100;
        if rest > 0 || n == 0 {
            parts.push(if rest < 20 {
                ONES[rest as usize].to_string()
            } else if rest.is_multiple_of(10) {
                TENS[(rest / 10) as usize].to_string()
            } else {
                format!(
                    "{}-{}",
                    TENS[(rest / 10) as usize],
                    ONES[(rest % 10) as usize]
                )
            });
        }
        parts.join(" ")
    }
    if n < 1000 {
        return Some(below_thousand(n));
    }
    let mut parts = Vec::new();
    for (scale, name) in [
        (1_000_000_000, "billion"),
        (1_000_000, "million"),
        (1_000, "thousand"),
    ] {
        if !(n / scale).is_multiple_of(1000) {
            parts.push(format!("{} {name}", below_thousand(n / scale % 1000)));
        }
    }
    if !n.is_multiple_of(1000) {
        parts.push(below_thousand(n % 1000));
    }
    Some(parts.join(" "))
}

/// Words for a number token (`"1,250.5"` -> "one thousand two hundred fifty point five").
pub fn number_words(number: &str) -> Option<String> {
    let (int, frac) = number
        .split_once('.')
        .map_or((number, None), |(i, f)| (i, Some(f)));
    let mut out = integer_words(int.replace(',', "").parse().ok()?)?;
    if let Some(frac) = frac {
        out.push_str(" point");
        for d in frac.chars() {
            out.push(' ');
            out.push_str(ONES[d.to_digit(10)? as usize]);
        }
    }
    Some(out)
}

/// Paraphrase: numbers spelled out as words (the MENLI number test's paraphrase).
pub struct NumberToWords;
static NUMBER_TO_WORDS: InjectionInfo = info(
    "number_to_words",
    "Numbers as words",
    Family::Menli,
    LevelKind::Portion,
    &[1.0],
    "Paraphrase: spells out each non-date number as words (with probability p); meaning is kept.",
);
impl Injection for NumberToWords {
    fn info(&self) -> &'static InjectionInfo {
        &NUMBER_TO_WORDS
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        replace_numbers(text, p, rng, |number, _| number_words(number))
    }
}

/// Picks `n` random candidates (at least one must exist) and returns the
/// edits `make` produces for them, skipping candidates it declines.
fn edit_random<T>(
    candidates: &[T],
    n: f64,
    rng: &mut InjectRng,
    what: &str,
    mut make: impl FnMut(&T, &mut InjectRng) -> Option<(std::ops::Range<usize>, String)>,
) -> Result<Vec<(std::ops::Range<usize>, String)>, NotApplicable> {
    if candidates.is_empty() {
        return Err(NotApplicable(format!("no {what}")));
    }
    let k = (n as usize).min(candidates.len());
    let edits: Vec<_> = sample(rng, candidates.len(), k)
        .into_iter()
        .filter_map(|i| make(&candidates[i], rng))
        .collect();
    Ok(edits)
}

/// A random word from `list` other than `not` (compared lowercase).
fn other_word<'a>(list: &[&'a str], not: &str, rng: &mut InjectRng) -> &'a str {
    loop {
        let w = list[rng.random_range(0..list.len())];
        if !w.eq_ignore_ascii_case(not) {
            return w;
        }
    }
}

/// Plural of a regular noun (`box` -> `boxes`, `city` -> `cities`).
fn plural(noun: &str) -> String {
    third_person(noun)
}

/// Insert a random noun after a noun, joined by "and".
pub struct Addition;
static ADDITION: InjectionInfo = tagged(info(
    "addition",
    "Addition",
    Family::Menli,
    LevelKind::Count,
    &[1.0],
    "Inserts a random noun after each of n random nouns, joined by \"and\" (the cat -> the cat and lamp).",
));
impl Injection for Addition {
    fn info(&self) -> &'static InjectionInfo {
        &ADDITION
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let analysis = tagger()?.analyze(text);
        // Not inside a compound or before a possessive ("footprint's").
        let glued_word = |i: usize| {
            analysis.tokens.get(i + 1).is_some_and(|n| {
                n.token.start == analysis.tokens[i].token.end
                    && (n.tag == "POS"
                        || n.text().chars().any(char::is_alphanumeric)
                        || n.text() == "-")
            })
        };
        let nouns: Vec<&Tagged> = analysis
            .tokens
            .iter()
            .enumerate()
            .filter(|&(i, t)| t.upos == "NOUN" && !glued_word(i))
            .map(|(_, t)| t)
            .collect();
        let edits = edit_random(&nouns, n, rng, "nouns", |t, rng| {
            let added = other_word(NOUNS, t.text(), rng);
            let added = if t.tag == "NNS" {
                plural(added)
            } else {
                added.to_owned()
            };
            Some((t.token.span(), format!("{} and {added}", t.text())))
        })?;
        Ok(replace_spans(text, edits))
    }
}

/// Which part of speech a [`PosMismatch`] replaces.
pub struct PosMismatchKind {
    info: InjectionInfo,
    upos: &'static str,
    words: &'static [&'static str],
    what: &'static str,
}

/// Replace n random words by a random word of the same part of speech,
/// inflected like the original (nouns keep their number, verbs their tense).
pub struct PosMismatch(&'static PosMismatchKind);
static NOUN_MISMATCH: PosMismatchKind = PosMismatchKind {
    info: tagged(info(
        "noun_mismatch",
        "Noun mismatch",
        Family::Menli,
        LevelKind::Count,
        &[1.0],
        "Replaces n random nouns by random nouns of the same number.",
    )),
    upos: "NOUN",
    words: NOUNS,
    what: "nouns",
};
static VERB_MISMATCH: PosMismatchKind = PosMismatchKind {
    info: tagged(info(
        "verb_mismatch",
        "Verb mismatch",
        Family::Menli,
        LevelKind::Count,
        &[1.0],
        "Replaces n random main verbs by random verbs in the same form.",
    )),
    upos: "VERB",
    words: VERBS,
    what: "main verbs",
};
static ADJECTIVE_MISMATCH: PosMismatchKind = PosMismatchKind {
    info: tagged(info(
        "adjective_mismatch",
        "Adjective mismatch",
        Family::Menli,
        LevelKind::Count,
        &[1.0],
        "Replaces n random adjectives by random adjectives.",
    )),
    upos: "ADJ",
    words: ADJECTIVES,
    what: "adjectives",
};
impl Injection for PosMismatch {
    fn info(&self) -> &'static InjectionInfo {
        &self.0.info
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let analysis = tagger()?.analyze(text);
        let candidates: Vec<&Tagged> = analysis
            .tokens
            .iter()
            .filter(|t| t.upos == self.0.upos && t.text().chars().all(char::is_alphabetic))
            // Comparatives and superlatives have no regular form in our list.
            .filter(|t| !matches!(t.tag, "JJR" | "JJS"))
            .collect();
        let edits = edit_random(&candidates, n, rng, self.0.what, |t, rng| {
            let word = other_word(self.0.words, t.text(), rng);
            let form = match self.0.upos {
                "NOUN" if t.tag == "NNS" => plural(word),
                "VERB" => inflect(word, t.tag),
                _ => word.to_owned(),
            };
            Some((t.token.span(), match_case(&form, t.text())))
        })?;
        Ok(replace_spans(text, edits))
    }
}

/// Replace a person's name by another of the same gender.
pub struct NameError;
static NAME_ERROR: InjectionInfo = tagged(info(
    "name_error",
    "Name error",
    Family::Menli,
    LevelKind::Count,
    &[1.0],
    "Replaces n random person names by other names of the same gender (a surname alone by another surname).",
));
impl Injection for NameError {
    fn info(&self) -> &'static InjectionInfo {
        &NAME_ERROR
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let analysis = tagger()?.analyze(text);
        let people: Vec<_> = analysis
            .entities
            .iter()
            .filter(|e| e.label == "PERSON")
            .collect();
        let edits = edit_random(&people, n, rng, "person names", |e, rng| {
            let tokens = &analysis.tokens[e.tokens.clone()];
            let given = tokens.iter().find_map(|t| {
                let list = if lexicon::contains(MALE_NAMES, t.text()) {
                    MALE_NAMES
                } else if lexicon::contains(FEMALE_NAMES, t.text()) {
                    FEMALE_NAMES
                } else {
                    return None;
                };
                Some((t, list))
            });
            let (token, list) = match given {
                Some(found) => found,
                None => {
                    let last = tokens
                        .iter()
                        .rev()
                        .find(|t| t.text().chars().all(char::is_alphabetic))?;
                    (last, SURNAMES)
                }
            };
            let name = other_word(list, token.text(), rng);
            Some((
                token.token.span(),
                match_case(&name.to_lowercase(), token.text()),
            ))
        })?;
        if edits.is_empty() {
            return Err(NotApplicable("no replaceable person names".into()));
        }
        Ok(replace_spans(text, edits))
    }
}

/// Break subject-verb agreement of n present-tense verbs ("He like dogs").
pub struct SubjectVerbDisagreement;
static SUBJECT_VERB_DISAGREEMENT: InjectionInfo = tagged(info(
    "subject_verb_disagreement",
    "Subject-verb disagreement",
    Family::Menli,
    LevelKind::Count,
    &[1.0],
    "Changes the number of n random present-tense verbs (he likes -> he like, they are -> they is).",
));
impl Injection for SubjectVerbDisagreement {
    fn info(&self) -> &'static InjectionInfo {
        &SUBJECT_VERB_DISAGREEMENT
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let analysis = tagger()?.analyze(text);
        let verbs: Vec<(std::ops::Range<usize>, String)> = analysis
            .tokens
            .iter()
            .filter(|t| t.text().chars().all(char::is_alphabetic))
            .filter_map(|t| Some((t.token.span(), disagreeing_form(t.text(), t.tag)?)))
            .collect();
        let edits = edit_random(&verbs, n, rng, "present-tense verbs", |e, _| {
            Some(e.clone())
        })?;
        Ok(replace_spans(text, edits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_spell_out() {
        assert_eq!(number_words("0").unwrap(), "zero");
        assert_eq!(number_words("42").unwrap(), "forty-two");
        assert_eq!(
            number_words("1,250.5").unwrap(),
            "one thousand two hundred fifty point five"
        );
        assert_eq!(number_words("3000000").unwrap(), "three million");
    }

    #[test]
    fn pronouns_swap_with_case() {
        assert_eq!(swap_pronoun("He").unwrap(), "She");
        assert_eq!(swap_pronoun("them,").unwrap(), "us,");
        assert_eq!(swap_pronoun("his").unwrap(), "her");
        assert!(swap_pronoun("table").is_none());
        assert!(swap_pronoun("I'm").is_none());
    }

    #[test]
    fn dates_are_not_numbers_to_change() {
        let w = words("On May 5 in 2021 we paid 300 euros");
        assert!(is_date(&w, 2, "5") && is_date(&w, 4, "2021") && !is_date(&w, 7, "300"));
    }
}
