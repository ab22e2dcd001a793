//! Text processing shared by metrics and injections.
//!
//! Reference implementations are Python, so the helpers here reproduce Python's
//! string semantics where a score depends on them (what counts as whitespace,
//! `str.split()`), plus the NLTK Porter stemmer that rouge-score uses.

pub mod lexicon;
pub mod morph;
pub mod porter;
pub mod sentences;
pub mod sequences;
pub mod tagger;
pub mod tokens;
pub mod words;

/// True for every character Python's `str.isspace()` accepts.
///
/// Rust's `char::is_whitespace` follows Unicode `White_Space`, which lacks the
/// ASCII separators U+001C..U+001F that Python treats as whitespace.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Splits like Python's `str.split()` with no argument: runs of whitespace
/// separate tokens, and no empty tokens are produced.
pub fn python_split(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_python_space).filter(|t| !t.is_empty())
}

/// Strips trailing whitespace like Python's `str.rstrip()`.
pub fn python_rstrip(text: &str) -> &str {
    text.trim_end_matches(is_python_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_matches_python_whitespace() {
        let tokens: Vec<_> = python_split(" a\u{1f}b\u{a0}c\u{3000}d\t\n").collect();
        assert_eq!(tokens, ["a", "b", "c", "d"]);
    }

    #[test]
    fn rstrip_keeps_leading_space() {
        assert_eq!(python_rstrip("  x \u{1c}\n"), "  x");
    }
}

/// The references typed in one box: several are separated by a blank line
/// (a line of only whitespace); each is trimmed, and empty ones dropped. The
/// page's lexical and model-based metrics both read references this way.
pub fn references(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() {
            if let Some(s) = start.take() {
                out.push(text[s..end].trim());
            }
        } else {
            start.get_or_insert(offset);
            end = offset + line.len();
        }
        offset += line.len();
    }
    if let Some(s) = start {
        out.push(text[s..end].trim());
    }
    out
}

#[cfg(test)]
mod reference_tests {
    use super::references;

    #[test]
    fn blank_lines_separate_references() {
        assert_eq!(references("a b\nc\n\n  \n d e \n"), ["a b\nc", "d e"]);
        assert_eq!(references("one"), ["one"]);
        assert!(references(" \n\t\n").is_empty());
        assert_eq!(references("x\r\n\r\ny"), ["x", "y"]);
    }
}
