//! English verb morphology: lemmas (went -> go), third-person singular and
//! past forms (like -> likes, walk -> walked), and clause negation.
//!
//! Lemmas follow spaCy's rule lemmatizer for verbs: its exception table
//! (irregular forms) first, then suffix rules whose result is a known verb
//! lemma. Both tables come from spaCy `en_core_web_sm` 3.8.0
//! (scripts/tagger_data.py extracts them).

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

static EXCEPTIONS: LazyLock<HashMap<&'static str, &'static str>> = LazyLock::new(|| {
    include_str!("data/verb_lemmas.tsv")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t'))
        .collect()
});

static INDEX: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| include_str!("data/verb_index.txt").lines().collect());

/// spaCy's verb suffix rules, in its order.
const RULES: &[(&str, &str)] = &[
    ("s", ""),
    ("ies", "y"),
    ("es", "e"),
    ("es", ""),
    ("ed", "e"),
    ("ed", ""),
    ("ing", "e"),
    ("ing", ""),
];

/// Forms of the auxiliaries and other irregular verbs the rules get wrong.
const IRREGULAR_LEMMAS: &[(&str, &str)] = &[
    ("am", "be"),
    ("is", "be"),
    ("are", "be"),
    ("was", "be"),
    ("were", "be"),
    ("been", "be"),
    ("being", "be"),
    ("'s", "be"),
    ("'re", "be"),
    ("'m", "be"),
    ("has", "have"),
    ("had", "have"),
    ("'ve", "have"),
    ("does", "do"),
    ("did", "do"),
    ("done", "do"),
];

/// The lemma of a verb form, lowercase (`went` -> `go`, `likes` -> `like`,
/// `stopped` -> `stop`). Unknown forms come back lowercased.
pub fn verb_lemma(word: &str) -> String {
    let lower = word.to_lowercase();
    if let Some(&(_, lemma)) = IRREGULAR_LEMMAS.iter().find(|(f, _)| *f == lower) {
        return lemma.to_owned();
    }
    if let Some(lemma) = EXCEPTIONS.get(lower.as_str()) {
        return (*lemma).to_owned();
    }
    if INDEX.contains(lower.as_str()) {
        return lower;
    }
    let mut fallback = None;
    for (old, new) in RULES {
        if let Some(stem) = lower.strip_suffix(old).filter(|s| !s.is_empty()) {
            let form = format!("{stem}{new}");
            if INDEX.contains(form.as_str()) {
                return form;
            }
            fallback.get_or_insert(form);
        }
    }
    fallback.unwrap_or(lower)
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u')
}

/// Third-person singular present of a lemma (`go` -> `goes`, `try` ->
/// `tries`, `be` -> `is`).
pub fn third_person(lemma: &str) -> String {
    match lemma {
        "be" => return "is".into(),
        "have" => return "has".into(),
        "do" => return "does".into(),
        "go" => return "goes".into(),
        _ => {}
    }
    let mut rev = lemma.chars().rev();
    let (last, before) = (rev.next(), rev.next());
    if ["s", "x", "z", "ch", "sh", "o"]
        .iter()
        .any(|s| lemma.ends_with(s))
    {
        format!("{lemma}es")
    } else if last == Some('y') && before.is_some_and(|c| !is_vowel(c)) {
        format!("{}ies", &lemma[..lemma.len() - 1])
    } else {
        format!("{lemma}s")
    }
}

/// Regular past tense of a lemma (`walk` -> `walked`, `like` -> `liked`,
/// `try` -> `tried`). For regular verbs only: callers pick regular lemmas.
pub fn regular_past(lemma: &str) -> String {
    let mut rev = lemma.chars().rev();
    let (last, before) = (rev.next(), rev.next());
    if last == Some('e') {
        format!("{lemma}d")
    } else if last == Some('y') && before.is_some_and(|c| !is_vowel(c)) {
        format!("{}ied", &lemma[..lemma.len() - 1])
    } else {
        format!("{lemma}ed")
    }
}

/// Present participle of a regular lemma (`make` -> `making`, `walk` -> `walking`).
pub fn present_participle(lemma: &str) -> String {
    match lemma.strip_suffix('e') {
        Some(stem) if !lemma.ends_with("ee") && !stem.is_empty() => format!("{stem}ing"),
        _ => format!("{lemma}ing"),
    }
}

/// A form of `lemma` for the Penn Treebank verb tag (regular verbs).
pub fn inflect(lemma: &str, tag: &str) -> String {
    match tag {
        "VBZ" => third_person(lemma),
        "VBD" | "VBN" => regular_past(lemma),
        "VBG" => present_participle(lemma),
        _ => lemma.to_owned(),
    }
}

/// `word` with the capitalisation pattern of `model` (`Go` for `Went`).
pub fn match_case(word: &str, model: &str) -> String {
    let mut chars = model.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && b.is_uppercase() => word.to_uppercase(),
        (Some(a), _) if a.is_uppercase() => {
            let mut w = word.chars();
            w.next()
                .map(|f| f.to_uppercase().chain(w).collect())
                .unwrap_or_default()
        }
        _ => word.to_owned(),
    }
}

/// The present form that disagrees in number with `word`'s subject:
/// `likes` -> `like`, `like` -> `likes`, `is` -> `are`, `was` -> `were`.
/// `tag` is the Penn tag: `VBZ` or `VBP` (and `VBD` for was/were); other
/// tags give `None` ("would have" stays).
pub fn disagreeing_form(word: &str, tag: &str) -> Option<String> {
    let lower = word.to_lowercase();
    let past_be = tag == "VBD" && matches!(lower.as_str(), "was" | "were");
    if !(matches!(tag, "VBZ" | "VBP") || past_be) {
        return None;
    }
    let swapped = match lower.as_str() {
        "is" => "are".to_owned(),
        "are" => "is".to_owned(),
        "am" => "is".to_owned(),
        "was" => "were".to_owned(),
        "were" => "was".to_owned(),
        "has" => "have".to_owned(),
        "have" => "has".to_owned(),
        "does" => "do".to_owned(),
        "do" => "does".to_owned(),
        _ if tag == "VBZ" => verb_lemma(&lower),
        _ if tag == "VBP" => third_person(&lower),
        _ => return None,
    };
    (swapped != lower).then(|| match_case(&swapped, word))
}

/// Contracted auxiliaries before `n't`, spelled out (`ca` -> `can`).
pub fn uncontract(aux: &str) -> &str {
    match aux.to_lowercase().as_str() {
        "ca" => "can",
        "wo" => "will",
        "sha" => "shall",
        _ => aux,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lemmas_follow_spacy_tables_and_rules() {
        for (form, lemma) in [
            ("went", "go"),
            ("likes", "like"),
            ("stopped", "stop"),
            ("making", "make"),
            ("tries", "try"),
            ("was", "be"),
            ("Announced", "announce"),
            ("walked", "walk"),
            ("go", "go"),
        ] {
            assert_eq!(verb_lemma(form), lemma, "{form}");
        }
    }

    #[test]
    fn inflection() {
        assert_eq!(third_person("watch"), "watches");
        assert_eq!(third_person("try"), "tries");
        assert_eq!(third_person("play"), "plays");
        assert_eq!(third_person("be"), "is");
        assert_eq!(regular_past("try"), "tried");
        assert_eq!(regular_past("like"), "liked");
        assert_eq!(present_participle("make"), "making");
        assert_eq!(present_participle("see"), "seeing");
        assert_eq!(inflect("open", "VBZ"), "opens");
        assert_eq!(match_case("go", "Went"), "Go");
    }

    #[test]
    fn disagreement_flips_number() {
        assert_eq!(disagreeing_form("likes", "VBZ").as_deref(), Some("like"));
        assert_eq!(disagreeing_form("like", "VBP").as_deref(), Some("likes"));
        assert_eq!(disagreeing_form("Is", "VBZ").as_deref(), Some("Are"));
        assert_eq!(disagreeing_form("went", "VBD"), None);
        assert_eq!(disagreeing_form("have", "VB"), None);
        assert_eq!(disagreeing_form("was", "VBD").as_deref(), Some("were"));
    }
}
