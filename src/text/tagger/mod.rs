//! Part-of-speech tags and named entities for English: spaCy
//! `en_core_web_sm` 3.8's tagger and entity recognizer, ported to Rust.
//!
//! The weights (MIT, exported by scripts/spacy_export.py as f16
//! safetensors, 6.4 MB) ship inside the native build and parse on first use.
//! The browser build leaves them out of its wasm: the page fetches
//! `tagger/en_core_web_sm.safetensors` the first time an injection needs the
//! tagger and hands the bytes to [`Tagger::install`]. Text is cut by
//! [`super::tokens`], which follows spaCy's tokenizer rules, and sentence
//! starts come from [`super::sentences`] (spaCy takes them from its parser;
//! entities never cross them). Coarse POS comes from the fine tag through the
//! rules of spaCy's attribute ruler (those that do not need a dependency
//! parse). Agreement with spaCy itself is measured in tests/tagger.rs.

pub mod attrs;
pub mod network;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use safetensors::SafeTensors;

use self::network::{Linear, Ner, NerToken, Tok2Vec, WeightError, metadata_json};
use super::tokens::{Token, tokenize};

/// The shipped weights (native builds; the browser fetches them).
#[cfg(not(target_arch = "wasm32"))]
static WEIGHTS: &[u8] = include_bytes!("../data/en_core_web_sm.safetensors");

/// The English tagger, once parsed.
static ENGLISH: OnceLock<Tagger> = OnceLock::new();

/// A token with its tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tagged<'a> {
    /// The token and its byte span.
    pub token: Token<'a>,
    /// Penn Treebank tag (`VBD`, `NNP`...).
    pub tag: &'a str,
    /// Universal POS tag (`VERB`, `PROPN`...).
    pub upos: &'a str,
}

impl Tagged<'_> {
    /// The token text.
    pub fn text(&self) -> &str {
        self.token.text
    }
}

/// A named-entity span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    /// spaCy label: `PERSON`, `GPE`, `ORG`, `LOC`, `NORP`, `DATE`...
    pub label: String,
    /// Token indices in the analysis.
    pub tokens: Range<usize>,
    /// Byte span in the text.
    pub span: Range<usize>,
}

/// Tagged tokens and entities of one text.
#[derive(Debug, Clone)]
pub struct Analysis<'a> {
    /// Every token, in order.
    pub tokens: Vec<Tagged<'a>>,
    /// Entity spans, in order, not overlapping.
    pub entities: Vec<Entity>,
}

/// One token as the networks see it.
#[derive(Debug, Clone, Copy)]
pub struct TokenInput<'a> {
    /// Token text.
    pub text: &'a str,
    /// Followed by a single space (spaCy's `whitespace_`).
    pub space_after: bool,
    /// Starts a sentence.
    pub sent_start: bool,
}

/// Tags and entities for a token sequence (spaCy's own or ours).
#[derive(Debug, Clone)]
pub struct Prediction {
    /// Fine tag per token.
    pub tags: Vec<String>,
    /// Coarse POS per token.
    pub upos: Vec<String>,
    /// (label, token range) per entity.
    pub entities: Vec<(String, Range<usize>)>,
}

/// The spaCy tagger and entity recognizer.
#[derive(Debug, Clone)]
pub struct Tagger {
    tok2vec: Tok2Vec,
    softmax: Linear,
    ner: Ner,
    tags: Vec<String>,
    tag_pos: HashMap<String, String>,
    word_tag_pos: HashMap<String, String>,
    norms: attrs::NormTables,
    /// Recent analyses by text: injections and sweeps re-analyse the same
    /// text for every level and seed.
    cache: Arc<Mutex<RecentPredictions>>,
}

/// Recent (text, prediction) pairs, oldest first.
type RecentPredictions = Vec<(String, Arc<Prediction>)>;

/// How many recent texts [`Tagger::analyze`] remembers.
const CACHE_SIZE: usize = 128;

impl Tagger {
    /// The English model: natively the shipped weights, parsed on first
    /// use; in the browser whatever [`Tagger::install`] was given, `None`
    /// until then.
    pub fn english() -> Option<&'static Tagger> {
        #[cfg(not(target_arch = "wasm32"))]
        return Some(
            ENGLISH.get_or_init(|| Tagger::from_bytes(WEIGHTS).expect("shipped tagger weights")),
        );
        #[cfg(target_arch = "wasm32")]
        ENGLISH.get()
    }

    /// Installs the English model from the bytes of
    /// `en_core_web_sm.safetensors` (the browser build, which does not embed
    /// them). A second call keeps the first model.
    pub fn install(bytes: &[u8]) -> Result<(), WeightError> {
        if ENGLISH.get().is_none() {
            let _ = ENGLISH.set(Tagger::from_bytes(bytes)?);
        }
        Ok(())
    }

    /// Reads weights written by scripts/spacy_export.py.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WeightError> {
        let (_, meta) =
            SafeTensors::read_metadata(bytes).map_err(|e| WeightError::Format(e.to_string()))?;
        let metadata = meta.metadata().clone().unwrap_or_default();
        let st = SafeTensors::deserialize(bytes).map_err(|e| WeightError::Format(e.to_string()))?;
        let seeds: Vec<u32> = metadata_json(&metadata, "tok2vec_seeds")?;
        let ner_seeds: Vec<u32> = metadata_json(&metadata, "ner_seeds")?;
        let tags: Vec<String> = metadata_json(&metadata, "tags")?;
        let moves: Vec<String> = metadata_json(&metadata, "moves")?;
        let lexeme: HashMap<String, String> = metadata_json(&metadata, "lexeme_norm")?;
        let norms = attrs::NormTables {
            base: metadata_json(&metadata, "base_norms")?,
            lexeme: lexeme
                .into_iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, v)))
                .collect(),
        };
        let tok2vec = Tok2Vec::load(&st, "tok2vec", &seeds)?;
        let softmax = Linear::load(&st, "tagger")?;
        if softmax.n_out() != tags.len()
            || softmax.n_in() != tok2vec.width()
            || tok2vec.columns() != 6
        {
            return Err(WeightError::Tensor("tagger shapes".into()));
        }
        let ner = Ner::load(&st, &ner_seeds, &moves)?;
        if ner.columns() != 4 {
            return Err(WeightError::Tensor("ner columns".into()));
        }
        Ok(Self {
            tok2vec,
            softmax,
            ner,
            tags,
            tag_pos: metadata_json(&metadata, "tag_pos")?,
            word_tag_pos: metadata_json(&metadata, "word_tag_pos")?,
            norms,
            cache: Arc::default(),
        })
    }

    /// spaCy's NORM of token `i` of a sequence.
    pub fn norm(&self, tokens: &[TokenInput], i: usize) -> String {
        let glued = |a: &TokenInput| !a.space_after && !a.text.trim().is_empty();
        let glue = attrs::Glue {
            to_previous: i > 0 && glued(&tokens[i - 1]),
            before_negation: glued(&tokens[i])
                && tokens
                    .get(i + 1)
                    .is_some_and(|n| matches!(n.text.to_lowercase().as_str(), "n't" | "n’t")),
        };
        attrs::norm(tokens[i].text, &self.norms, glue)
    }

    /// Tags and entities for a token sequence.
    pub fn predict(&self, tokens: &[TokenInput]) -> Prediction {
        if tokens.is_empty() {
            return Prediction {
                tags: Vec::new(),
                upos: Vec::new(),
                entities: Vec::new(),
            };
        }
        let mut shared = Vec::with_capacity(tokens.len());
        let mut ner_attrs = Vec::with_capacity(tokens.len());
        let mut ner_tokens = Vec::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            let norm = self.norm(tokens, i);
            let is_space = t.text.chars().all(char::is_whitespace);
            let strings = [
                attrs::hash_string(&norm),
                attrs::hash_string(attrs::prefix(t.text)),
                attrs::hash_string(attrs::suffix(t.text)),
                attrs::hash_string(&attrs::shape(t.text)),
            ];
            ner_attrs.push(strings.to_vec());
            let mut all = strings.to_vec();
            all.extend([u64::from(t.space_after), u64::from(is_space)]);
            shared.push(all);
            ner_tokens.push(NerToken {
                sent_start: t.sent_start,
                is_space,
            });
        }
        let vectors = self.tok2vec.forward(&shared);
        let all_scores = self.softmax.forward(&vectors);
        let mut tags = Vec::with_capacity(tokens.len());
        let mut upos = Vec::with_capacity(tokens.len());
        for (t, scores) in tokens.iter().zip(all_scores.chunks_exact(self.tags.len())) {
            let best = (0..scores.len()).fold(0, |b, k| if scores[k] > scores[b] { k } else { b });
            let tag = &self.tags[best];
            let key = format!("{} {tag}", t.text.to_lowercase());
            let pos = self
                .word_tag_pos
                .get(&key)
                .or_else(|| self.tag_pos.get(tag))
                .map_or("X", String::as_str);
            tags.push(tag.clone());
            upos.push(pos.to_owned());
        }
        let entities = self.ner.entities(&ner_attrs, &ner_tokens);
        Prediction {
            tags,
            upos,
            entities,
        }
    }

    /// Tokenizes `text` the spaCy way, tags every token and finds entities.
    pub fn analyze<'a>(&'a self, text: &'a str) -> Analysis<'a> {
        let tokens = tokenize(text);
        let starts: std::collections::HashSet<usize> = super::sentences::sentence_spans(text)
            .into_iter()
            .map(|s| s.start)
            .collect();
        // spaCy keeps one trailing space per token; other whitespace becomes
        // whitespace tokens, which the networks see and we then drop.
        let mut inputs = Vec::with_capacity(tokens.len());
        let mut real = Vec::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            let gap_end = tokens.get(i + 1).map_or(text.len(), |n| n.start);
            let gap = &text[t.end..gap_end];
            let space_after = gap.starts_with(' ');
            real.push(inputs.len());
            inputs.push(TokenInput {
                text: t.text,
                space_after,
                sent_start: starts.contains(&t.start),
            });
            let rest = if space_after { &gap[1..] } else { gap };
            if !rest.is_empty() && i + 1 < tokens.len() {
                inputs.push(TokenInput {
                    text: rest,
                    space_after: false,
                    sent_start: false,
                });
            }
        }
        let prediction = self.predict_cached(text, &inputs);
        let back: HashMap<usize, usize> = real.iter().enumerate().map(|(k, &i)| (i, k)).collect();
        let tagged = tokens
            .iter()
            .zip(&real)
            .map(|(&token, &i)| Tagged {
                token,
                tag: self.intern_tag(&prediction.tags[i]),
                upos: intern_upos(&prediction.upos[i]),
            })
            .collect();
        let entities = prediction
            .entities
            .iter()
            .filter_map(|(label, range)| {
                let first = *back.get(&range.start)?;
                let last = *back.get(&(range.end - 1))?;
                Some(Entity {
                    label: label.clone(),
                    tokens: first..last + 1,
                    span: tokens[first].start..tokens[last].end,
                })
            })
            .collect();
        Analysis {
            tokens: tagged,
            entities,
        }
    }

    fn predict_cached(&self, text: &str, inputs: &[TokenInput]) -> Arc<Prediction> {
        let lock = || {
            self.cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some((_, p)) = lock().iter().find(|(t, _)| t == text) {
            return Arc::clone(p);
        }
        let prediction = Arc::new(self.predict(inputs));
        let mut cache = lock();
        if cache.len() == CACHE_SIZE {
            cache.remove(0);
        }
        cache.push((text.to_owned(), Arc::clone(&prediction)));
        prediction
    }

    fn intern_tag(&self, tag: &str) -> &str {
        self.tags
            .iter()
            .find(|t| *t == tag)
            .map_or("X", String::as_str)
    }
}

/// The universal POS tags, as static strings.
const UPOS: &[&str] = &[
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
    "PUNCT", "SCONJ", "SYM", "VERB", "X", "SPACE",
];

fn intern_upos(pos: &str) -> &'static str {
    UPOS.iter().find(|p| **p == pos).copied().unwrap_or("X")
}
