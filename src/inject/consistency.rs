//! Consistency errors of [BS] Table 16 (SPEC 2.2). Negation, the entity
//! injections and verb/noun switching use the tagger; BERT-diverge lives in
//! `masked_lm` (it needs the masked LM of the PLM engine).

use rand::Rng;
use rand::seq::index::sample;

use super::spans::{replace_spans, swap_random_pairs};
use super::{
    Context, Family, InjectRng, Injection, InjectionInfo, LevelKind, NotApplicable, info, join,
    tagged, tagger,
};
use crate::text::morph::{match_case, uncontract, verb_lemma};
use crate::text::sentences::sentences;
use crate::text::tagger::{Analysis, Tagged};

/// All consistency injections in this file.
pub static ALL: [&dyn Injection; 7] = [
    &SentenceSwitching,
    &SentenceReplacement,
    &Negation,
    &GenericEntity,
    &EntitySwitching,
    &PosSwitching(&VERB_SWITCHING),
    &PosSwitching(&NOUN_SWITCHING),
];

/// Swap n random pairs of sentences. On open-ended text
/// ([`Context::open_ended`]) the last sentence stays in place, as [BS]'s
/// open-ended tests keep it; elsewhere any sentence may move, as its
/// summarisation and translation tests do.
pub struct SentenceSwitching;
static SENTENCE_SWITCHING: InjectionInfo = InjectionInfo {
    swap: true,
    ..info(
        "sentence_switching",
        "Sentence switching",
        Family::Consistency,
        LevelKind::Count,
        &[1.0, 2.0],
        "Swaps n random pairs of sentences (on open-ended text, never the last sentence).",
    )
};
impl Injection for SentenceSwitching {
    fn info(&self) -> &'static InjectionInfo {
        &SENTENCE_SWITCHING
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        ctx: &Context,
    ) -> Result<String, NotApplicable> {
        let mut s = sentences(text);
        // Open-ended text keeps its last sentence: two others must remain.
        let movable = if ctx.open_ended {
            s.len().saturating_sub(1)
        } else {
            s.len()
        };
        if movable < 2 {
            return Err(NotApplicable(if ctx.open_ended {
                format!(
                    "needs at least three sentences on open-ended text (the last one stays in place), found {}",
                    s.len()
                )
            } else {
                format!("needs at least two sentences, found {}", s.len())
            }));
        }
        // n distinct pairs, so a second swap never undoes the first.
        let pairs: Vec<(usize, usize)> = (0..movable)
            .flat_map(|i| (i + 1..movable).map(move |j| (i, j)))
            .collect();
        for k in sample(rng, pairs.len(), (n as usize).min(pairs.len())) {
            s.swap(pairs[k].0, pairs[k].1);
        }
        Ok(join(&s))
    }
}

/// Replace n sentences by random sentences from other samples.
pub struct SentenceReplacement;
static SENTENCE_REPLACEMENT: InjectionInfo = InjectionInfo {
    needs_samples: true,
    ..info(
        "sentence_replacement",
        "Sentence replacement",
        Family::Consistency,
        LevelKind::Count,
        &[1.0, 2.0],
        "Replaces n random sentences by sentences drawn from other samples.",
    )
};
impl Injection for SentenceReplacement {
    fn info(&self) -> &'static InjectionInfo {
        &SENTENCE_REPLACEMENT
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        ctx: &Context,
    ) -> Result<String, NotApplicable> {
        let mut own = sentences(text);
        let pool: Vec<&str> = ctx
            .samples
            .iter()
            .flat_map(|s| sentences(s))
            .filter(|s| !own.contains(s))
            .collect();
        if own.is_empty() || pool.is_empty() {
            return Err(NotApplicable(
                "no sentences to replace or none to draw from".into(),
            ));
        }
        for i in sample(rng, own.len(), (n as usize).min(own.len())) {
            own[i] = pool[rng.random_range(0..pool.len())];
        }
        Ok(join(&own))
    }
}

/// Negate each sentence with probability p: "not" after the first finite
/// auxiliary, do-support for a main verb ("went" -> "did not go"), and an
/// existing negation removed instead ("did not go" -> "did go").
pub struct Negation;
static NEGATION: InjectionInfo = tagged(info(
    "negation",
    "Negation",
    Family::Consistency,
    LevelKind::Portion,
    &[0.5, 1.0],
    "Negates each sentence with probability p on its first finite verb (is -> is not, went -> did not go), or removes an existing negation.",
));

/// The edit that flips the polarity of the clause starting at `tokens[0]`
/// (one sentence's tokens), if it has a finite verb.
pub(crate) fn negate_clause(tokens: &[Tagged]) -> Option<(std::ops::Range<usize>, String)> {
    let i = tokens.iter().position(|t| {
        matches!(t.tag, "MD" | "VBZ" | "VBP" | "VBD") && matches!(t.upos, "AUX" | "VERB")
    })?;
    let verb = &tokens[i];
    let next = tokens.get(i + 1);
    let negator =
        next.filter(|n| matches!(n.text().to_lowercase().as_str(), "not" | "n't" | "n’t"));
    if let Some(neg) = negator {
        // Remove it: "didn't" -> "did", "can't" -> "can", "is not" -> "is".
        let aux = uncontract(verb.text());
        return Some((verb.token.start..neg.token.end, aux.to_owned()));
    }
    let is_aux = verb.upos == "AUX" || verb.tag == "MD";
    if is_aux {
        let negated = if verb.text().eq_ignore_ascii_case("can") {
            format!("{}not", verb.text())
        } else {
            format!("{} not", verb.text())
        };
        return Some((verb.token.span(), negated));
    }
    let support = match verb.tag {
        "VBD" => "did",
        "VBZ" => "does",
        _ => "do",
    };
    let lemma = verb_lemma(verb.text());
    Some((
        verb.token.span(),
        format!("{} not {lemma}", match_case(support, verb.text())),
    ))
}

/// Tokens of each sentence (the sentence splitter's spans, which the
/// tagger also analysed by).
fn sentence_tokens<'a, 'b>(text: &str, analysis: &'b Analysis<'a>) -> Vec<&'b [Tagged<'a>]> {
    let mut out = Vec::new();
    let mut start = 0;
    for span in crate::text::sentences::sentence_spans(text) {
        let end = start
            + analysis.tokens[start..]
                .iter()
                .take_while(|t| t.token.start < span.end)
                .count();
        if end > start {
            out.push(&analysis.tokens[start..end]);
        }
        start = end;
    }
    out
}

impl Injection for Negation {
    fn info(&self) -> &'static InjectionInfo {
        &NEGATION
    }
    fn perturb(
        &self,
        text: &str,
        p: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let analysis = tagger()?.analyze(text);
        let edits: Vec<_> = sentence_tokens(text, &analysis)
            .into_iter()
            .filter_map(negate_clause)
            .collect();
        if edits.is_empty() {
            return Err(NotApplicable("no finite verb to negate".into()));
        }
        let chosen = edits.into_iter().filter(|_| rng.random_bool(p)).collect();
        Ok(replace_spans(text, chosen))
    }
}

/// Entity labels replaced by a generic phrase, and the phrase.
const GENERIC_PHRASES: &[(&str, &str)] = &[
    ("PERSON", "the person"),
    ("GPE", "the place"),
    ("LOC", "the place"),
    ("FAC", "the place"),
    ("ORG", "the organization"),
    ("PRODUCT", "the product"),
];

/// Replace named entities by a generic phrase with probability p.
pub struct GenericEntity;
static GENERIC_ENTITY: InjectionInfo = tagged(info(
    "generic_entity",
    "Generic named entity",
    Family::Consistency,
    LevelKind::Portion,
    &[0.5, 1.0],
    "Replaces each person, place, organization or product name with probability p by a generic phrase (the person, the place...).",
));
impl Injection for GenericEntity {
    fn info(&self) -> &'static InjectionInfo {
        &GENERIC_ENTITY
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
            .entities
            .iter()
            .filter_map(|e| {
                let (_, phrase) = GENERIC_PHRASES.iter().find(|(l, _)| *l == e.label)?;
                // Not inside a compound ("a Premier League-wide record").
                let next = analysis.tokens.get(e.tokens.end);
                if next.is_some_and(|n| {
                    n.token.start == e.span.end
                        && (n.text() == "-" || n.text().chars().any(char::is_alphanumeric))
                        && n.tag != "POS"
                }) {
                    return None;
                }
                // "the United States" -> "the place", not "the the place".
                // Matched on the text itself: lowercasing can change byte
                // lengths ("İ", the Kelvin sign), so offsets into a
                // lowercased copy would cut the wrong place or mid-character.
                let mut start = e.span.start;
                for det in ["the ", "a ", "an "] {
                    let Some(cut) = start.checked_sub(det.len()) else {
                        continue;
                    };
                    let is_det = text
                        .get(cut..start)
                        .is_some_and(|s| s.eq_ignore_ascii_case(det));
                    // Not a determiner another entity holds ("John the" in
                    // "saw John the John Smith").
                    let held = analysis
                        .entities
                        .iter()
                        .any(|o| o.span.start < start && o.span.end > cut);
                    if is_det
                        && !held
                        && text[..cut]
                            .chars()
                            .next_back()
                            .is_none_or(char::is_whitespace)
                    {
                        start = cut;
                        break;
                    }
                }
                let before = text[..start].trim_end();
                let at_start = before.is_empty() || before.ends_with(['.', '!', '?']);
                let phrase = if at_start {
                    match_case(phrase, "The")
                } else {
                    (*phrase).to_owned()
                };
                Some((start..e.span.end, phrase))
            })
            .collect();
        if candidates.is_empty() {
            return Err(NotApplicable(
                "no person, place, organization or product names".into(),
            ));
        }
        let chosen = candidates
            .into_iter()
            .filter(|_| rng.random_bool(p))
            .collect();
        Ok(replace_spans(text, chosen))
    }
}

/// Swap n random pairs of named entities.
pub struct EntitySwitching;
static ENTITY_SWITCHING: InjectionInfo = InjectionInfo {
    needs_tagger: true,
    swap: true,
    ..info(
        "entity_switching",
        "Named-entity switching",
        Family::Consistency,
        LevelKind::Count,
        &[1.0, 3.0],
        "Swaps n random pairs of named entities (people, places, organizations, dates, numbers...).",
    )
};
impl Injection for EntitySwitching {
    fn info(&self) -> &'static InjectionInfo {
        &ENTITY_SWITCHING
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let analysis = tagger()?.analyze(text);
        let items: Vec<_> = analysis
            .entities
            .iter()
            .map(|e| (e.span.clone(), text[e.span.clone()].to_owned()))
            .collect();
        let edits = swap_random_pairs(&items, n as usize, rng, "named entities")?;
        Ok(replace_spans(text, edits))
    }
}

/// Which part of speech a [`PosSwitching`] swaps.
pub struct PosSwitchingKind {
    info: InjectionInfo,
    upos: &'static str,
    what: &'static str,
}

/// Swap n random pairs of words of one part of speech (verbs or nouns).
pub struct PosSwitching(&'static PosSwitchingKind);
static VERB_SWITCHING: PosSwitchingKind = PosSwitchingKind {
    info: InjectionInfo {
        swap: true,
        needs_tagger: true,
        ..info(
            "verb_switching",
            "Verb switching",
            Family::Consistency,
            LevelKind::Count,
            &[8.0],
            "Swaps n random pairs of verbs.",
        )
    },
    upos: "VERB",
    what: "verbs",
};
static NOUN_SWITCHING: PosSwitchingKind = PosSwitchingKind {
    info: InjectionInfo {
        swap: true,
        needs_tagger: true,
        ..info(
            "noun_switching",
            "Noun switching",
            Family::Consistency,
            LevelKind::Count,
            &[2.0, 7.0],
            "Swaps n random pairs of nouns.",
        )
    },
    upos: "NOUN",
    what: "nouns",
};
impl Injection for PosSwitching {
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
        let starts: std::collections::HashSet<usize> = crate::text::sentences::sentence_spans(text)
            .into_iter()
            .map(|s| s.start)
            .collect();
        // A common word moves without the capital its sentence start gave it,
        // and takes one if it lands on a sentence start.
        let items: Vec<_> = analysis
            .tokens
            .iter()
            .filter(|t| t.upos == self.0.upos && t.text().chars().any(char::is_alphabetic))
            .map(|t| {
                let word = if starts.contains(&t.token.start) {
                    match_case(&t.text().to_lowercase(), "x")
                } else {
                    t.text().to_owned()
                };
                (t.token.span(), word)
            })
            .collect();
        let edits = swap_random_pairs(&items, n as usize, rng, self.0.what)?
            .into_iter()
            .map(|(span, word)| {
                let word = if starts.contains(&span.start) {
                    match_case(&word, "Xx")
                } else {
                    word
                };
                (span, word)
            })
            .collect();
        Ok(replace_spans(text, edits))
    }
}
