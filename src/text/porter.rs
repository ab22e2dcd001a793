//! The Porter stemmer exactly as NLTK's `PorterStemmer()` in its default
//! `NLTK_EXTENSIONS` mode, which rouge-score 0.1.2 uses for `use_stemmer=True`.
//!
//! Published stemmer crates implement the original 1980 algorithm or Snowball
//! (Porter2); both stem some words differently from NLTK's extended mode
//! ("dying" -> "die", "generously" -> "gener"...), which would change ROUGE
//! scores, so the NLTK rules are written out here. Source:
//! <https://github.com/nltk/nltk/blob/develop/nltk/stem/porter.py>.
//!
//! Input is expected to be lowercase ASCII (rouge-score's tokens are
//! `[a-z0-9]+`); other text is returned unchanged.

/// Irregular forms NLTK maps directly (its `pool`).
const IRREGULAR: &[(&str, &str)] = &[
    ("sky", "sky"),
    ("skies", "sky"),
    ("dying", "die"),
    ("lying", "lie"),
    ("tying", "tie"),
    ("news", "news"),
    ("innings", "inning"),
    ("inning", "inning"),
    ("outings", "outing"),
    ("outing", "outing"),
    ("cannings", "canning"),
    ("canning", "canning"),
    ("howe", "howe"),
    ("proceed", "proceed"),
    ("exceed", "exceed"),
    ("succeed", "succeed"),
];

/// Stems one lowercase ASCII word with NLTK's Porter rules.
pub fn stem(word: &str) -> String {
    if !word.is_ascii() {
        return word.to_string();
    }
    if let Some((_, s)) = IRREGULAR.iter().find(|(w, _)| *w == word) {
        return (*s).to_string();
    }
    if word.len() <= 2 {
        return word.to_string();
    }
    let mut w = word.as_bytes().to_vec();
    step1a(&mut w);
    step1b(&mut w);
    step1c(&mut w);
    step2(&mut w);
    step3(&mut w);
    step4(&mut w);
    step5a(&mut w);
    step5b(&mut w);
    String::from_utf8(w).expect("stemming ASCII yields ASCII")
}

fn is_vowel(c: u8) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u')
}

/// Consonant flags: `y` is a consonant at the start or after a vowel.
fn consonant_flags(w: &[u8]) -> Vec<bool> {
    let mut flags: Vec<bool> = Vec::with_capacity(w.len());
    for (i, &c) in w.iter().enumerate() {
        let cons = if is_vowel(c) {
            false
        } else if c == b'y' {
            i == 0 || !flags[i - 1]
        } else {
            true
        };
        flags.push(cons);
    }
    flags
}

fn is_consonant(w: &[u8], i: usize) -> bool {
    consonant_flags(&w[..=i])[i]
}

/// Porter's m: the number of vowel-consonant sequences in the stem.
fn measure(stem: &[u8]) -> usize {
    let flags = consonant_flags(stem);
    flags.windows(2).filter(|p| !p[0] && p[1]).count()
}

fn contains_vowel(stem: &[u8]) -> bool {
    consonant_flags(stem).iter().any(|c| !c)
}

fn ends_double_consonant(w: &[u8]) -> bool {
    let n = w.len();
    n >= 2 && w[n - 1] == w[n - 2] && is_consonant(w, n - 1)
}

fn ends_cvc(w: &[u8]) -> bool {
    let n = w.len();
    (n >= 3
        && is_consonant(w, n - 3)
        && !is_consonant(w, n - 2)
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], b'w' | b'x' | b'y'))
        || (n == 2 && !is_consonant(w, 0) && is_consonant(w, 1))
}

type Condition<'a> = &'a dyn Fn(&[u8]) -> bool;

/// One suffix rule: suffix, replacement, optional condition on the stem.
/// The suffix `*d` means "ends in a double consonant" (remove both letters).
struct Rule<'a>(&'a [u8], &'a [u8], Option<Condition<'a>>);

/// Applies the first rule whose suffix matches; a failed condition stops the
/// list (NLTK semantics).
fn apply_rules(w: &mut Vec<u8>, rules: &[Rule]) {
    for Rule(suffix, replacement, condition) in rules {
        if *suffix == b"*d" && ends_double_consonant(w) {
            let stem = &w[..w.len() - 2];
            if condition.is_none_or(|c| c(stem)) {
                w.truncate(w.len() - 2);
                w.extend_from_slice(replacement);
            }
            return;
        }
        if w.ends_with(suffix) {
            let stem = &w[..w.len() - suffix.len()];
            if condition.is_none_or(|c| c(stem)) {
                w.truncate(w.len() - suffix.len());
                w.extend_from_slice(replacement);
            }
            return;
        }
    }
}

fn replace_suffix(w: &mut Vec<u8>, suffix_len: usize, replacement: &[u8]) {
    w.truncate(w.len() - suffix_len);
    w.extend_from_slice(replacement);
}

fn positive_measure(stem: &[u8]) -> bool {
    measure(stem) > 0
}

fn step1a(w: &mut Vec<u8>) {
    if w.ends_with(b"ies") && w.len() == 4 {
        return replace_suffix(w, 3, b"ie");
    }
    apply_rules(
        w,
        &[
            Rule(b"sses", b"ss", None),
            Rule(b"ies", b"i", None),
            Rule(b"ss", b"ss", None),
            Rule(b"s", b"", None),
        ],
    );
}

fn step1b(w: &mut Vec<u8>) {
    if w.ends_with(b"ied") {
        let rep: &[u8] = if w.len() == 4 { b"ie" } else { b"i" };
        return replace_suffix(w, 3, rep);
    }
    if w.ends_with(b"eed") {
        if measure(&w[..w.len() - 3]) > 0 {
            replace_suffix(w, 3, b"ee");
        }
        return;
    }
    let mut stem_len = None;
    for suffix in [&b"ed"[..], b"ing"] {
        if w.ends_with(suffix) && contains_vowel(&w[..w.len() - suffix.len()]) {
            stem_len = Some(w.len() - suffix.len());
            break;
        }
    }
    let Some(stem_len) = stem_len else { return };
    w.truncate(stem_len);
    let last = [w[w.len() - 1]];
    let not_lsz = |_: &[u8]| !matches!(last[0], b'l' | b's' | b'z');
    let add_e = |s: &[u8]| measure(s) == 1 && ends_cvc(s);
    apply_rules(
        w,
        &[
            Rule(b"at", b"ate", None),
            Rule(b"bl", b"ble", None),
            Rule(b"iz", b"ize", None),
            Rule(b"*d", &last, Some(&not_lsz)),
            Rule(b"", b"e", Some(&add_e)),
        ],
    );
}

fn step1c(w: &mut Vec<u8>) {
    let cond = |s: &[u8]| s.len() > 1 && is_consonant(s, s.len() - 1);
    apply_rules(w, &[Rule(b"y", b"i", Some(&cond))]);
}

fn step2(w: &mut Vec<u8>) {
    if w.ends_with(b"alli") && positive_measure(&w[..w.len() - 4]) {
        replace_suffix(w, 4, b"al");
        return step2(w);
    }
    let word = w.clone();
    let logi = |_: &[u8]| positive_measure(&word[..word.len() - 3]);
    let pm: Condition = &positive_measure;
    apply_rules(
        w,
        &[
            Rule(b"ational", b"ate", Some(pm)),
            Rule(b"tional", b"tion", Some(pm)),
            Rule(b"enci", b"ence", Some(pm)),
            Rule(b"anci", b"ance", Some(pm)),
            Rule(b"izer", b"ize", Some(pm)),
            Rule(b"bli", b"ble", Some(pm)),
            Rule(b"alli", b"al", Some(pm)),
            Rule(b"entli", b"ent", Some(pm)),
            Rule(b"eli", b"e", Some(pm)),
            Rule(b"ousli", b"ous", Some(pm)),
            Rule(b"ization", b"ize", Some(pm)),
            Rule(b"ation", b"ate", Some(pm)),
            Rule(b"ator", b"ate", Some(pm)),
            Rule(b"alism", b"al", Some(pm)),
            Rule(b"iveness", b"ive", Some(pm)),
            Rule(b"fulness", b"ful", Some(pm)),
            Rule(b"ousness", b"ous", Some(pm)),
            Rule(b"aliti", b"al", Some(pm)),
            Rule(b"iviti", b"ive", Some(pm)),
            Rule(b"biliti", b"ble", Some(pm)),
            Rule(b"fulli", b"ful", Some(pm)),
            Rule(b"logi", b"log", Some(&logi)),
        ],
    );
}

fn step3(w: &mut Vec<u8>) {
    let pm: Condition = &positive_measure;
    apply_rules(
        w,
        &[
            Rule(b"icate", b"ic", Some(pm)),
            Rule(b"ative", b"", Some(pm)),
            Rule(b"alize", b"al", Some(pm)),
            Rule(b"iciti", b"ic", Some(pm)),
            Rule(b"ical", b"ic", Some(pm)),
            Rule(b"ful", b"", Some(pm)),
            Rule(b"ness", b"", Some(pm)),
        ],
    );
}

fn step4(w: &mut Vec<u8>) {
    let gt1 = |s: &[u8]| measure(s) > 1;
    let ion = |s: &[u8]| measure(s) > 1 && matches!(s.last(), Some(b's' | b't'));
    let m: Condition = &gt1;
    apply_rules(
        w,
        &[
            Rule(b"al", b"", Some(m)),
            Rule(b"ance", b"", Some(m)),
            Rule(b"ence", b"", Some(m)),
            Rule(b"er", b"", Some(m)),
            Rule(b"ic", b"", Some(m)),
            Rule(b"able", b"", Some(m)),
            Rule(b"ible", b"", Some(m)),
            Rule(b"ant", b"", Some(m)),
            Rule(b"ement", b"", Some(m)),
            Rule(b"ment", b"", Some(m)),
            Rule(b"ent", b"", Some(m)),
            Rule(b"ion", b"", Some(&ion)),
            Rule(b"ou", b"", Some(m)),
            Rule(b"ism", b"", Some(m)),
            Rule(b"ate", b"", Some(m)),
            Rule(b"iti", b"", Some(m)),
            Rule(b"ous", b"", Some(m)),
            Rule(b"ive", b"", Some(m)),
            Rule(b"ize", b"", Some(m)),
        ],
    );
}

fn step5a(w: &mut Vec<u8>) {
    if w.ends_with(b"e") {
        let stem = &w[..w.len() - 1];
        let m = measure(stem);
        if m > 1 || (m == 1 && !ends_cvc(stem)) {
            w.pop();
        }
    }
}

fn step5b(w: &mut Vec<u8>) {
    if w.ends_with(b"ll") && measure(&w[..w.len() - 1]) > 1 {
        w.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::stem;

    /// Expected values printed by `nltk.stem.porter.PorterStemmer().stem(w)`
    /// (NLTK 3.10).
    #[test]
    fn matches_nltk_examples() {
        let cases = [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "tie"),
            ("dying", "die"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("hopping", "hop"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("generously", "gener"),
            ("running", "run"),
            ("controlling", "control"),
            ("analogous", "analog"),
            ("abc123", "abc123"),
            ("yyyy", "yyyi"),
        ];
        for (word, expected) in cases {
            assert_eq!(stem(word), expected, "stem({word})");
        }
    }
}
