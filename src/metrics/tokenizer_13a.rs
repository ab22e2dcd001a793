//! sacrebleu's default `13a` tokenizer (mteval-v13a.pl), used by BLEU.
//!
//! Ported from sacrebleu 2.6 `tokenizers/tokenizer_13a.py` and
//! `tokenizer_re.py`; the regular expressions are the same four rules.

use std::sync::LazyLock;

use regex::Regex;

use crate::text::python_split;

/// sacrebleu's first rule, `([\{-\~\[-\` -\&\(-\+\:-\@\/])` -> ` \1 `: these
/// characters always become tokens. A plain character test replaces the regex.
fn is_13a_punctuation(c: char) -> bool {
    matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/')
}

/// The period/comma and dash rules, applied in order after the first one.
static RULES: LazyLock<[(Regex, &'static str); 3]> = LazyLock::new(|| {
    let re = |pattern: &str| Regex::new(pattern).expect("13a patterns are valid");
    [
        // Period and comma, unless preceded by a digit.
        (re(r"([^0-9])([\.,])"), "$1 $2 "),
        // Period and comma, unless followed by a digit.
        (re(r"([\.,])([^0-9])"), " $1 $2"),
        // Dash after a digit.
        (re(r"([0-9])(-)"), "$1 $2 "),
    ]
});

/// Tokenizes a segment exactly as sacrebleu's `Tokenizer13a`.
pub fn tokenize_13a(line: &str) -> String {
    let mut line = line
        .replace("<skipped>", "")
        .replace("-\n", "")
        .replace('\n', " ");
    if line.contains('&') {
        line = line
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
    }
    let mut spaced = String::with_capacity(line.len() * 2 + 2);
    spaced.push(' ');
    for c in line.chars() {
        if is_13a_punctuation(c) {
            spaced.extend([' ', c, ' ']);
        } else {
            spaced.push(c);
        }
    }
    spaced.push(' ');
    let mut line = spaced;
    for (pattern, replacement) in RULES.iter() {
        if let std::borrow::Cow::Owned(changed) = pattern.replace_all(&line, *replacement) {
            line = changed;
        }
    }
    python_split(&line).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::tokenize_13a;

    #[test]
    fn splits_punctuation_but_not_numbers() {
        assert_eq!(
            tokenize_13a("Hello, world! It costs $3.50-4.00."),
            "Hello , world ! It costs $ 3.50 - 4.00 ."
        );
        assert_eq!(tokenize_13a("a&amp;b &lt;tag&gt;"), "a & b < tag >");
        assert_eq!(tokenize_13a("1,000 people"), "1,000 people");
        assert_eq!(tokenize_13a(""), "");
    }
}
