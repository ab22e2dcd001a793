//! spaCy's lexical attributes and hashing, as its networks read them.
//!
//! Each token is described by string attributes (NORM, PREFIX, SUFFIX,
//! SHAPE) and flags (SPACY: followed by a space; IS_SPACE). A string
//! attribute's value is spaCy's 64-bit string hash (MurmurHash64A, seed 1);
//! a flag's value is 0 or 1. thinc's HashEmbed then hashes each value with
//! MurmurHash3 x64-128 under a per-table seed and sums the four table rows the
//! four 32-bit words of that hash pick.

use std::collections::HashMap;

/// spaCy's string hash (`spacy.strings.hash_string`).
pub fn hash_string(s: &str) -> u64 {
    murmur2::murmur64a(s.as_bytes(), 1)
}

/// thinc's `ops.hash` of one key: four 32-bit words.
pub fn hash_key(key: u64, seed: u32) -> [u32; 4] {
    let hash = murmur3::murmur3_x64_128(&mut &key.to_le_bytes()[..], seed)
        .expect("hashing a byte slice cannot fail");
    let (h1, h2) = (hash as u64, (hash >> 64) as u64);
    [h1 as u32, (h1 >> 32) as u32, h2 as u32, (h2 >> 32) as u32]
}

/// spaCy's `word_shape`: letters to `X`/`x`, digits to `d`, other characters
/// kept, runs longer than four cut at four.
pub fn shape(text: &str) -> String {
    if text.chars().count() >= 100 {
        return "LONG".into();
    }
    let mut out = String::new();
    let mut last = None;
    let mut run = 0;
    for c in text.chars() {
        let s = if c.is_alphabetic() {
            if c.is_uppercase() { 'X' } else { 'x' }
        } else if c.is_numeric() {
            'd'
        } else {
            c
        };
        if Some(s) == last {
            run += 1;
        } else {
            run = 0;
            last = Some(s);
        }
        if run < 4 {
            out.push(s);
        }
    }
    out
}

/// Norms spaCy's English tokenizer exceptions give contraction pieces that
/// are glued to the word before them (`did` + `n't`).
const CLITIC_NORMS: &[(&str, &str)] = &[
    ("n't", "not"),
    ("n’t", "not"),
    ("'ll", "will"),
    ("’ll", "will"),
    ("'re", "are"),
    ("’re", "are"),
    ("'ve", "have"),
    ("’ve", "have"),
    ("'m", "am"),
    ("’m", "am"),
];

/// Norms of the auxiliary pieces glued to a following `n't` (`can't` -> `ca`).
const AUX_NORMS: &[(&str, &str)] = &[
    ("ca", "can"),
    ("wo", "will"),
    ("sha", "shall"),
    ("did", "do"),
];

/// Where a token sits relative to its neighbours, for contraction norms.
#[derive(Debug, Clone, Copy, Default)]
pub struct Glue {
    /// No space between the previous token and this one.
    pub to_previous: bool,
    /// The next token is a glued `n't`.
    pub before_negation: bool,
}

/// Lookup tables for NORM.
#[derive(Debug, Clone, Default)]
pub struct NormTables {
    /// spaCy's base norms (quotes, dashes, currency), by exact text.
    pub base: HashMap<String, String>,
    /// The English lexeme norm table, keyed by the hash of the exact text.
    pub lexeme: HashMap<u64, String>,
}

/// The NORM of a token: the tokenizer-exception norms, spaCy's norm tables,
/// or the lowercase text.
pub fn norm(text: &str, tables: &NormTables, glue: Glue) -> String {
    if let Some(n) = tables.base.get(text) {
        return n.clone();
    }
    let clitic = CLITIC_NORMS
        .iter()
        .find(|(f, _)| f.eq_ignore_ascii_case(text));
    if let (true, Some((_, n))) = (glue.to_previous, clitic) {
        return (*n).to_owned();
    }
    let aux = AUX_NORMS.iter().find(|(f, _)| f.eq_ignore_ascii_case(text));
    if let (true, Some((_, n))) = (glue.before_negation, aux) {
        return (*n).to_owned();
    }
    if let Some(n) = tables.lexeme.get(&hash_string(text)) {
        return n.clone();
    }
    text.to_lowercase()
}

/// The first character, as spaCy's PREFIX.
pub fn prefix(text: &str) -> &str {
    text.char_indices().nth(1).map_or(text, |(i, _)| &text[..i])
}

/// The last three characters, as spaCy's SUFFIX.
pub fn suffix(text: &str) -> &str {
    text.char_indices()
        .rev()
        .nth(2)
        .map_or(text, |(i, _)| &text[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_spacy_and_thinc() {
        // Values printed by spaCy 3.8 / thinc 8 (see scripts/spacy_export.py).
        assert_eq!(hash_string("Apple"), 6418411030699964375);
        assert_eq!(hash_string("xxxx"), 13110060611322374290);
        assert_eq!(hash_string("é"), 16256712947286012828);
        assert_eq!(
            hash_key(12345678901234567890, 8),
            [825681028, 3746740173, 3386005190, 3472626611]
        );
        assert_eq!(
            hash_key(1, 8),
            [1161550108, 2247783286, 1742325162, 1224191281]
        );
    }

    #[test]
    fn attributes() {
        assert_eq!(shape("McDonald's"), "XxXxxxx'x");
        assert_eq!(shape("1990s"), "ddddx");
        assert_eq!(shape("Hello"), "Xxxxx");
        assert_eq!(shape("Helloooo"), "Xxxxx");
        assert_eq!(prefix("über"), "ü");
        assert_eq!(suffix("Straße"), "aße");
        assert_eq!(suffix("it"), "it");
    }
}
