//! Linguistic tokens, split the way spaCy's English tokenizer splits them.
//!
//! The tagger (`text::tagger`) learned from spaCy's annotations, so it sees
//! text cut the same way: whitespace first, then opening punctuation and
//! currency peeled from the front, closing punctuation, `'s` and sentence
//! periods from the back, contractions split (`didn't` -> `did` `n't`), and
//! hyphens, slashes and commas between letters split off as infixes.
//! Abbreviations (`Mr.`, `U.S.`, `e.g.`) keep their periods.

use std::ops::Range;

/// Characters peeled from the front of a word.
const PREFIX_CHARS: &[char] = &[
    '(', '[', '{', '<', '"', '\'', '`', '“', '‘', '«', '„', '$', '£', '€', '¥', '#', '§', '%', '=',
    '—', '–', '*', '&', '_', '¿', '¡', '…', ',', ':', ';', '!', '?',
];

/// Characters peeled from the back of a word (the period has its own rule).
const SUFFIX_CHARS: &[char] = &[
    ')', ']', '}', '>', '"', '\'', '”', '’', '»', ',', ':', ';', '!', '?', '%', '…', '—', '–', '*',
    '&', '_', '#',
];

/// Contraction endings split off a word (`they're` -> `they` `'re`).
const CLITICS: &[&str] = &[
    "n't", "n’t", "'ll", "’ll", "'re", "’re", "'ve", "’ve", "'m", "’m", "'d", "’d", "'s", "’s",
    "'S", "’S",
];

/// One token: its text and byte span in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// The token text.
    pub text: &'a str,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset after the last byte.
    pub end: usize,
}

impl Token<'_> {
    /// The byte range.
    pub fn span(&self) -> Range<usize> {
        self.start..self.end
    }
}

/// Splits `text` into spaCy-style tokens with byte spans.
pub fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    for word in super::words::words(text) {
        split_word(text, word.start, word.end, &mut out);
    }
    out
}

fn push<'a>(text: &'a str, range: Range<usize>, out: &mut Vec<Token<'a>>) {
    if !range.is_empty() {
        out.push(Token {
            text: &text[range.clone()],
            start: range.start,
            end: range.end,
        });
    }
}

fn split_word<'a>(text: &'a str, mut start: usize, mut end: usize, out: &mut Vec<Token<'a>>) {
    let mut suffixes: Vec<Range<usize>> = Vec::new();
    loop {
        let word = &text[start..end];
        if word.is_empty() || is_special(word) {
            break;
        }
        if let Some(len) = prefix_len(word) {
            push(text, start..start + len, out);
            start += len;
            continue;
        }
        if let Some(len) = suffix_len(word) {
            suffixes.push(end - len..end);
            end -= len;
            continue;
        }
        break;
    }
    if start < end {
        split_infixes(text, start, end, out);
    }
    for range in suffixes.into_iter().rev() {
        push(text, range, out);
    }
}

fn is_special(word: &str) -> bool {
    // Abbreviations, initials and dotted acronyms keep their period: the
    // sentence splitter's list ("Mr.", "e.g.", "J.", "U.S.").
    if word.ends_with('.')
        && word.starts_with(char::is_alphabetic)
        && super::sentences::is_abbreviation(word)
    {
        return true;
    }
    // A clitic written apart ("Mary 's", "did n't") stays whole.
    if CLITICS.iter().any(|c| c.eq_ignore_ascii_case(word)) {
        return true;
    }
    // Dashes and dot runs stand alone ("--", "...").
    word.len() > 1 && (word.chars().all(|c| c == '-') || word.chars().all(|c| c == '.'))
}

fn prefix_len(word: &str) -> Option<usize> {
    if word.starts_with("...") {
        return Some(3);
    }
    let c = word.chars().next()?;
    // "+" and "-" start a number ("-5") but are punctuation otherwise.
    let signed = matches!(c, '+' | '-')
        && !word[1..].starts_with(|n: char| n.is_ascii_digit())
        && word.len() > 1;
    (PREFIX_CHARS.contains(&c) || signed).then(|| c.len_utf8())
}

fn suffix_len(word: &str) -> Option<usize> {
    if word.len() > 3 && word.ends_with("...") {
        return Some(3);
    }
    for clitic in CLITICS {
        if word.len() > clitic.len() && word.ends_with(clitic) {
            let base = &word[..word.len() - clitic.len()];
            let base_ok = base.chars().last().is_some_and(char::is_alphabetic);
            if base_ok {
                return Some(clitic.len());
            }
        }
    }
    let c = word.chars().last()?;
    if c == '.' {
        return (word.len() > 1 && period_splits(&word[..word.len() - 1])).then_some(1);
    }
    (SUFFIX_CHARS.contains(&c) && word.len() > c.len_utf8()).then(|| c.len_utf8())
}

/// spaCy splits a final period after a lowercase letter, a digit, closing
/// punctuation or two capitals ("ABC."), but not after a single capital ("J.").
fn period_splits(before: &str) -> bool {
    let mut rev = before.chars().rev();
    match (rev.next(), rev.next()) {
        (Some(a), b) if a.is_uppercase() => b.is_some_and(char::is_uppercase),
        (Some(a), _) => {
            a.is_lowercase()
                || a.is_numeric()
                || matches!(a, '%' | '-' | '+' | ')' | ']' | '"' | '\'' | '”' | '’')
        }
        _ => false,
    }
}

fn split_infixes<'a>(text: &'a str, start: usize, end: usize, out: &mut Vec<Token<'a>>) {
    let word = &text[start..end];
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut piece = 0;
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let prev = i.checked_sub(1).map(|j| chars[j].1);
        let next = chars.get(i + 1).map(|p| p.1);
        let alpha = |x: Option<char>| x.is_some_and(char::is_alphabetic);
        let alnum = |x: Option<char>| x.is_some_and(char::is_alphanumeric);
        let digit = |x: Option<char>| x.is_some_and(|c| c.is_ascii_digit());
        let single = (matches!(c, '-' | '–' | '—' | '~') && alnum(prev) && alpha(next))
            || (matches!(c, '+' | '-' | '*' | '^')
                && digit(prev)
                && (digit(next) || next == Some('-')))
            || (matches!(c, ':' | '<' | '>' | '=' | '/') && alnum(prev) && alpha(next))
            || (c == ',' && alpha(prev) && alpha(next))
            || (c == '.'
                && prev.is_some_and(char::is_lowercase)
                && next.is_some_and(char::is_uppercase));
        let infix_len = if word[at..].starts_with("--") && alnum(prev) {
            let n = word[at..].chars().take_while(|&d| d == '-').count();
            alpha(chars.get(i + n).map(|p| p.1)).then_some(n)
        } else {
            single.then_some(1)
        };
        match infix_len {
            Some(n) => {
                push(text, start + piece..start + at, out);
                let stop = chars.get(i + n).map_or(word.len(), |p| p.0);
                push(text, start + at..start + stop, out);
                piece = stop;
                i += n;
            }
            None => i += 1,
        }
    }
    push(text, start + piece..end, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<&str> {
        tokenize(s).iter().map(|t| t.text).collect()
    }

    #[test]
    fn splits_like_spacy() {
        assert_eq!(
            texts(
                "Mr. Smith didn't go to the U.S. last week, but he'll visit Apple's well-known office (Manhattan). It costs $5.50!"
            ),
            [
                "Mr.",
                "Smith",
                "did",
                "n't",
                "go",
                "to",
                "the",
                "U.S.",
                "last",
                "week",
                ",",
                "but",
                "he",
                "'ll",
                "visit",
                "Apple",
                "'s",
                "well",
                "-",
                "known",
                "office",
                "(",
                "Manhattan",
                ")",
                ".",
                "It",
                "costs",
                "$",
                "5.50",
                "!"
            ]
        );
    }

    #[test]
    fn spans_point_into_the_text() {
        let text = "\"Yes,\" she said -- 3-4 km/h.";
        for t in tokenize(text) {
            assert_eq!(&text[t.span()], t.text);
        }
        assert_eq!(
            texts(text),
            [
                "\"", "Yes", ",", "\"", "she", "said", "--", "3", "-", "4", "km", "/", "h", "."
            ]
        );
        assert_eq!(
            texts("St Mary 's and did n't"),
            ["St", "Mary", "'s", "and", "did", "n't"]
        );
    }
}
