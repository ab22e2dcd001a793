//! Whitespace words with their byte spans. (Word-level alignment lives in
//! `inject::diff`, the one place that needs it; long sequences' distances in
//! `text::sequences`.)
//!
//! Injections work on whitespace-separated words (punctuation stays attached),
//! as the [BS] paper's noise ratio does.

use std::ops::Range;

/// One whitespace-separated word and where it sits in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word<'a> {
    /// The word, punctuation included.
    pub text: &'a str,
    /// Byte range in the source text.
    pub start: usize,
    /// End of the byte range (exclusive).
    pub end: usize,
}

impl Word<'_> {
    /// The byte range as a `Range`.
    pub fn span(&self) -> Range<usize> {
        self.start..self.end
    }

    /// The word without leading and trailing punctuation (`"(Hello,"` -> `Hello`).
    pub fn core(&self) -> &str {
        self.text.trim_matches(|c: char| !c.is_alphanumeric())
    }
}

/// Splits `text` into whitespace-separated words with spans.
pub fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (super::is_python_space(c), start) {
            (true, Some(s)) => {
                out.push(Word {
                    text: &text[s..i],
                    start: s,
                    end: i,
                });
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(Word {
            text: &text[s..],
            start: s,
            end: text.len(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_spans_and_punctuation() {
        let w = words("  Hello, (world)!\tAgain ");
        let texts: Vec<_> = w.iter().map(|w| w.text).collect();
        assert_eq!(texts, ["Hello,", "(world)!", "Again"]);
        assert_eq!(w[1].span(), 9..17);
        assert_eq!(w[1].core(), "world");
    }
}
