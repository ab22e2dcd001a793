//! Sentence segmentation for English that survives abbreviations ("Mr.",
//! "U.S.", "e.g."), initials, decimals ("3.5"), and closing quotes or
//! brackets after the final punctuation.
//!
//! Rules rather than a model: a sentence ends at `.`, `!` or `?` (plus any
//! closing quotes/brackets) followed by whitespace and then an uppercase
//! letter, a digit or an opening quote/bracket, unless the word carrying the
//! period is a known abbreviation or a single-letter initial.

use std::ops::Range;

/// Abbreviations after which a period does not end a sentence (lowercase,
/// without the final period). Titles, Latin shorthand, months, corporate
/// suffixes, and the like.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "gen", "col", "lt", "sgt", "capt",
    "gov", "sen", "rep", "rev", "hon", "pres", "e.g", "i.e", "etc", "vs", "cf", "al", "approx",
    "no", "nos", "vol", "fig", "p", "pp", "ed", "eds", "inc", "ltd", "co", "corp", "bros", "dept",
    "univ", "ave", "blvd", "rd", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept",
    "oct", "nov", "dec", "u.s", "u.k", "u.n", "e.u", "a.m", "p.m", "ph.d", "d.c",
];

const CLOSERS: &[char] = &['"', '\'', ')', ']', '}', '»', '”', '’'];
const OPENERS: &[char] = &['"', '\'', '(', '[', '{', '«', '“', '‘'];

/// True for a known abbreviation, a single-letter initial or a dotted
/// acronym ("Mr.", "e.g.", "J.", "U.S."), with or without its final period.
pub(crate) fn is_abbreviation(word: &str) -> bool {
    let w = word
        .trim_start_matches(OPENERS)
        .trim_end_matches('.')
        .to_lowercase();
    if ABBREVIATIONS.contains(&w.as_str()) {
        return true;
    }
    // Single-letter initials ("J. K. Rowling") and dotted acronyms ("N.A.S.A.").
    let mut chars = w.chars();
    matches!((chars.next(), chars.next()), (Some(c), None) if c.is_alphabetic())
        || (w.contains('.') && w.split('.').all(|p| p.chars().count() == 1))
}

/// True when `word` ends with terminal punctuation (closing quotes and
/// brackets allowed) that is not the period of an abbreviation or initial.
pub fn ends_sentence(word: &str) -> bool {
    let core = word.trim_end_matches(CLOSERS);
    let period_only = core.ends_with('.') && !core.ends_with("..");
    core.ends_with(['.', '!', '?', '…']) && !(period_only && is_abbreviation(core))
}

/// Byte ranges of the sentences in `text`, trimmed of surrounding whitespace.
pub fn sentence_spans(text: &str) -> Vec<Range<usize>> {
    let words = super::words::words(text);
    let mut spans = Vec::new();
    let mut start: Option<usize> = None;
    for (i, w) in words.iter().enumerate() {
        let s = *start.get_or_insert(w.start);
        let next_starts_sentence = words.get(i + 1).is_some_and(|n| {
            let first = n.text.trim_start_matches(OPENERS).chars().next();
            n.text.starts_with(OPENERS) || first.is_some_and(|c| c.is_uppercase() || c.is_numeric())
        });
        let is_last = i + 1 == words.len();
        if is_last || (next_starts_sentence && ends_sentence(w.text)) {
            spans.push(s..w.end);
            start = None;
        }
    }
    spans
}

/// The sentences of `text` as string slices.
pub fn sentences(text: &str) -> Vec<&str> {
    sentence_spans(text).into_iter().map(|r| &text[r]).collect()
}

#[cfg(test)]
mod tests {
    use super::sentences;

    #[test]
    fn splits_plain_sentences() {
        assert_eq!(
            sentences("It rained. We stayed in! Did you?"),
            ["It rained.", "We stayed in!", "Did you?"]
        );
    }

    #[test]
    fn keeps_abbreviations_initials_and_decimals() {
        let text = "Mr. Smith paid $3.50 in the U.S. on Monday. J. K. Rowling wrote it, e.g. Harry Potter. Done.";
        assert_eq!(
            sentences(text),
            [
                "Mr. Smith paid $3.50 in the U.S. on Monday.",
                "J. K. Rowling wrote it, e.g. Harry Potter.",
                "Done."
            ]
        );
    }

    #[test]
    fn quotes_and_brackets_close_sentences() {
        assert_eq!(
            sentences("\"Stop.\" She left. (It was late.) Then 2 more came."),
            [
                "\"Stop.\"",
                "She left.",
                "(It was late.)",
                "Then 2 more came."
            ]
        );
    }

    #[test]
    fn lowercase_after_period_continues() {
        assert_eq!(
            sentences("See fig. 3 and the notes. ok"),
            ["See fig. 3 and the notes. ok"]
        );
        assert!(sentences("   ").is_empty());
    }
}
