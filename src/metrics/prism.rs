//! PRISM (Thompson & Post 2020) as its released code computes it (github
//! thompsonb/prism, `prism.py`): a multilingual translation model, used as
//! a zero-shot paraphraser, scores how likely one text is given another.
//!
//! - A text is SentencePiece's pieces looked up in the model's fairseq
//!   dictionary (pieces it lacks read as `<unk>`), `</s>` appended. The
//!   scored (target) text starts with its language's tag, `<en>` for
//!   `lang = en`; the conditioning (source) text has no tag.
//! - The decoder reads `</s> <lang> pieces` and is scored on `<lang> pieces
//!   </s>`; the logits are divided by the temperature (1 by default) before
//!   the log-softmax. A direction's score is the mean token log-probability
//!   after the language tag (the pieces and `</s>`), in nats: fairseq's
//!   log-softmax is natural, though prism.py's identifier says
//!   `log_base: 2`.
//! - PRISM-ref = 0.5 · (hypothesis | reference) + 0.5 · (reference |
//!   hypothesis); PRISM-src, which [BS] calls PRISM-QE, = hypothesis |
//!   source. `lang` is the hypothesis's language in both, as `--lang` is.
//!
//! Where this differs from the released code: several references are
//! averaged (prism.py reads one); texts beyond the model's 1024 positions
//! are cut (fairseq would read them); a text holding a dictionary symbol
//! literally (`<en>`, `</s>`) is refused, since the tokenizer would read it
//! as the symbol where prism.py splits it into pieces.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Detail, Engine, EngineError, model_error, part_of, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::spec::named_enum;
use super::{
    CorpusAggregation, MetricError, MetricId, MetricSpec, ModelKind, ModelSlot, Scale, Score,
    Segment, Signature,
};
use crate::models::{LmToken, LmTokenizer, ModelError, Plm};

/// The implementation whose computation is reproduced.
pub const CONVENTIONS: &str = "thompsonb-prism";

/// Padded tokens per model pass, counting each pair's longer side.
pub const TOKEN_BUDGET: usize = 512;

/// How several references are folded into PRISM-ref.
pub const REFERENCE_AGGREGATION: &str = "mean";

/// Which PRISM score a column reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PrismPart {
    /// PRISM-ref: both directions between hypothesis and reference.
    #[default]
    Ref,
    /// PRISM-src (PRISM-QE): the hypothesis given the source.
    Qe,
}

named_enum!(
    PrismPart,
    "PRISM part",
    [
        (Ref, "ref", "PRISM-ref: hypothesis ↔ reference"),
        (Qe, "qe", "PRISM-QE: source → hypothesis")
    ]
);

/// PRISM's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PrismOptions {
    /// # Model
    ///
    /// The translation model (PRISM's m39v1 or a checkpoint of its
    /// architecture); unset: the registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Score
    ///
    /// PRISM-ref (against the reference) or PRISM-QE (against the source).
    pub part: PrismPart,
    /// # Language
    ///
    /// The hypothesis's language, ISO 639-1 (prism.py's `--lang`): its tag
    /// starts every scored text. Default: en.
    pub lang: String,
    /// # Temperature
    ///
    /// The logits are divided by it before the softmax (prism.py's
    /// `--temperature`). Default: 1.
    pub temperature: f64,
}

impl Default for PrismOptions {
    fn default() -> Self {
        Self {
            model: None,
            part: PrismPart::Ref,
            lang: "en".into(),
            temperature: 1.0,
        }
    }
}

/// The signature of a PRISM part.
pub fn signature(model: &str, o: &PrismOptions, precision: &str) -> Signature {
    let s = Signature::new("prism")
        .with("model", model)
        .with("part", o.part)
        .with("lang", &o.lang)
        .with("t", o.temperature);
    let s = match o.part {
        PrismPart::Ref => s.with("refs", REFERENCE_AGGREGATION),
        PrismPart::Qe => s,
    };
    s.with("conventions", CONVENTIONS)
        .with("precision", precision)
        .versioned()
}

/// PRISM's registry entry.
pub struct PrismMetric;

impl MetricModule for PrismMetric {
    type Options = PrismOptions;
    const KIND: KindAbout = KindAbout {
        name: "PRISM",
        about: "A multilingual translation model reads one text and scores how likely the \
                other is as its paraphrase: the mean token log-probability in nats after the \
                language tag (closer to 0 is better). PRISM-ref averages the hypothesis given \
                the reference and the reference given the hypothesis; PRISM-QE scores the \
                hypothesis given the source (fill in the source box). Set the hypothesis's \
                language (en by default).",
        reference: "thompsonb/prism (prism.py)",
        truncated: "a text was cut to the model's 1024 positions",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Seq2SeqLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[
        About::reference_based(
            "PRISM-ref",
            "PRISM-ref: the mean of the hypothesis's log-likelihood given the reference and the reference's given the hypothesis",
            Scale::LOG_LIKELIHOOD,
        ),
        About {
            name: "PRISM-QE",
            description: "PRISM-QE (prism.py's Prism-src): the hypothesis's mean log-likelihood given the source",
            higher_is_better: true,
            needs_reference: false,
            needs_source: true,
            reads: "hypothesis + source",
            scale: Scale::LOG_LIKELIHOOD,
        },
    ];
    const COLUMN_OPTION: Option<&'static str> = Some("part");

    fn column(o: &PrismOptions) -> usize {
        o.part as usize
    }

    fn with_column(o: PrismOptions, column: usize) -> PrismOptions {
        PrismOptions {
            part: PrismPart::ALL.get(column).copied().unwrap_or_default(),
            ..o
        }
    }
}

/// A text as PRISM reads it: ids with `</s>`, no language tag.
struct Encoded {
    ids: Vec<u32>,
    tokens: Vec<LmToken>,
    truncated: bool,
}

/// One scored direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Direction {
    /// Mean log-probability after the language tag.
    pub score: f64,
    /// The target's tokens after the tag (`</s>` last).
    pub tokens: Vec<LmToken>,
    /// Per target token after the tag (nats).
    pub logprob: Vec<f64>,
    /// The source or the target was cut at the model's limit.
    pub truncated: bool,
}

/// The model's language tags (`<xx>` among its special tokens), for errors.
fn language_tags(tokenizer: &LmTokenizer) -> String {
    let mut tags: Vec<String> = tokenizer
        .special_token_strings()
        .into_iter()
        .filter_map(|t| {
            let code = t.strip_prefix('<')?.strip_suffix('>')?;
            let special = matches!(code, "s" | "pad" | "unk");
            (!special
                && (2..=3).contains(&code.len())
                && code.chars().all(|c| c.is_ascii_lowercase()))
            .then(|| code.into())
        })
        .collect();
    tags.sort();
    tags.join(", ")
}

fn encode(plm: &Plm, text: &str) -> Result<Encoded, ModelError> {
    let specials = plm.tokenizer.special_token_strings();
    if let Some(s) = specials.iter().find(|s| text.contains(s.as_str())) {
        return Err(ModelError::Input(format!(
            "the text holds {s:?}, a symbol of {}'s dictionary: prism.py would read it as \
             pieces, this tokenizer as the symbol; remove it",
            plm.name
        )));
    }
    let e = plm.encode(text)?;
    // A symbol the text only becomes after normalisation (`＜en＞`) is
    // refused as well: prism.py's SentencePiece splits it.
    let body = &e.tokens[..e.tokens.len().saturating_sub(1)];
    if let Some(t) = body
        .iter()
        .find(|t| t.id != 3 && plm.tokenizer.is_special(t.id))
    {
        let symbol = plm.tokenizer.id_to_token(t.id).unwrap_or_default();
        return Err(ModelError::Input(format!(
            "the text reads as {symbol:?}, a symbol of {}'s dictionary: prism.py would read \
             it as pieces; remove it",
            plm.name
        )));
    }
    let mut ids = e.ids();
    LmTokenizer::fairseq_unknown(&mut ids, plm.config.vocab_size);
    if ids.last() != Some(&2) {
        return Err(ModelError::Unsupported(format!(
            "{}'s tokenizer does not end a text with </s> (id 2): it is not a fairseq \
             dictionary's",
            plm.name
        )));
    }
    Ok(Encoded {
        ids,
        tokens: e.tokens,
        truncated: e.truncated,
    })
}

/// Scores `(source, target)` texts: the target's mean log-probability
/// after `<lang>`, each pair once.
pub async fn score(
    plm: &Plm,
    pairs: &[(&str, &str)],
    lang: &str,
    temperature: f64,
) -> Result<Vec<Direction>, ModelError> {
    if !(temperature.is_finite() && temperature > 0.0) {
        return Err(ModelError::Input(format!(
            "the temperature must be above 0 (got {temperature})"
        )));
    }
    let tag = plm
        .tokenizer
        .token_id(&format!("<{lang}>"))
        .ok_or_else(|| {
            ModelError::Input(format!(
                "{} has no language tag <{lang}> (it has: {})",
                plm.name,
                language_tags(&plm.tokenizer)
            ))
        })?;
    let limit = plm.config.max_tokens();
    let mut texts: std::collections::HashMap<&str, Encoded> = std::collections::HashMap::new();
    for &text in pairs.iter().flat_map(|(a, b)| [a, b]) {
        if !texts.contains_key(text) {
            texts.insert(text, encode(plm, text)?);
        }
    }
    let mut ids = Vec::with_capacity(pairs.len());
    let mut cut = Vec::with_capacity(pairs.len());
    for (src, tgt) in pairs {
        let body = &texts[tgt].ids;
        // The tag makes the target one longer: cut before `</s>` to fit.
        let keep = body.len().min(limit - 1) - 1;
        let target: Vec<u32> = std::iter::once(tag)
            .chain(body[..keep].iter().copied())
            .chain([2])
            .collect();
        cut.push(keep + 1 < body.len());
        ids.push((texts[src].ids.clone(), target));
    }
    let logprobs = plm
        .label_logprobs(&ids, temperature as f32, TOKEN_BUDGET)
        .await?;
    Ok(logprobs
        .into_iter()
        .zip(pairs.iter().zip(cut))
        .map(|(lp, ((src, tgt), cut))| {
            let after = lp[1..].to_vec();
            let target = &texts[tgt];
            let mut tokens = target.tokens[..after.len() - 1].to_vec();
            tokens.push(target.tokens[target.tokens.len() - 1].clone());
            Direction {
                score: after.iter().sum::<f64>() / after.len() as f64,
                tokens,
                logprob: after,
                truncated: cut || target.truncated || texts[src].truncated,
            }
        })
        .collect())
}

/// Where one segment's directions sit among the scored pairs.
struct Slots {
    /// Per reference: (hypothesis | reference, reference | hypothesis).
    refs: Vec<(usize, usize)>,
    /// Hypothesis | source.
    src: Option<usize>,
}

impl ModelModule for PrismMetric {
    fn model_name(o: &PrismOptions) -> Option<&str> {
        o.model.as_deref()
    }

    fn pass_key(o: &PrismOptions) -> Option<PrismOptions> {
        Some(PrismOptions {
            part: PrismPart::Ref,
            ..o.clone()
        })
    }

    /// Every direction the group's parts need is scored once, in one call.
    async fn score(
        engine: &Engine,
        group: &[&PrismOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        let Some(first) = group.first() else {
            return Ok(vec![]);
        };
        let plm = engine.model(ModelSlot::Prism, first.model.as_deref())?;
        let with_refs = group.iter().any(|o| o.part == PrismPart::Ref);
        let with_src = group.iter().any(|o| o.part == PrismPart::Qe);
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        let mut slots = Vec::with_capacity(segments.len());
        for (i, s) in segments.iter().enumerate() {
            let mut refs = Vec::new();
            if with_refs {
                if s.refs.is_empty() {
                    return Err(MetricError::MissingReference {
                        metric: MetricId::PrismRef.as_str(),
                        segment: i + 1,
                    }
                    .into());
                }
                for &r in s.refs {
                    pairs.push((r, s.hyp));
                    pairs.push((s.hyp, r));
                    refs.push((pairs.len() - 2, pairs.len() - 1));
                }
            }
            let src = if with_src {
                let src = s.src.ok_or_else(|| EngineError::Input {
                    metric: MetricId::PrismQe,
                    message: format!(
                        "segment {} has no source: PRISM-QE scores the hypothesis given the \
                         source",
                        i + 1
                    ),
                })?;
                pairs.push((src, s.hyp));
                Some(pairs.len() - 1)
            } else {
                None
            };
            slots.push(Slots { refs, src });
        }
        let scored = score(&plm, &pairs, &first.lang, first.temperature)
            .await
            .map_err(model_error(&plm))?;
        let precision = plm.precision_label();
        group
            .iter()
            .map(|o| {
                let spec = MetricSpec::Prism((*o).clone());
                let id = spec.id();
                let sig = signature(&plm.name, o, &precision);
                let mut scores = Vec::with_capacity(slots.len());
                let mut details = Vec::new();
                for Slots { refs, src } in &slots {
                    let mean = |ks: &mut dyn Iterator<Item = usize>| {
                        let v: Vec<f64> = ks.map(|k| scored[k].score).collect();
                        v.iter().sum::<f64>() / v.len() as f64
                    };
                    let (value, mut parts, shown) = match o.part {
                        PrismPart::Ref => {
                            let fwd = mean(&mut refs.iter().map(|r| r.0));
                            let rev = mean(&mut refs.iter().map(|r| r.1));
                            let value = 0.5 * fwd + 0.5 * rev;
                            let parts =
                                vec![part_of("hyp_given_ref", fwd), part_of("ref_given_hyp", rev)];
                            (value, parts, refs.first().map(|r| r.0))
                        }
                        PrismPart::Qe => {
                            let k = src.ok_or_else(|| EngineError::Input {
                                metric: id,
                                message: "the source direction was not scored".into(),
                            })?;
                            (scored[k].score, vec![], Some(k))
                        }
                    };
                    // Only the directions this part reads.
                    let truncated = match o.part {
                        PrismPart::Ref => refs
                            .iter()
                            .any(|r| scored[r.0].truncated || scored[r.1].truncated),
                        PrismPart::Qe => src.is_some_and(|k| scored[k].truncated),
                    };
                    parts.push(truncated_part(truncated));
                    // The token bar: the hypothesis given the first reference or the source.
                    if let (true, Some(k)) = (engine.details(), shown) {
                        let t = &scored[k];
                        details.push(Detail::TokenLogprobs {
                            target: "hypothesis",
                            tokens: t
                                .tokens
                                .iter()
                                .zip(&t.logprob)
                                .map(|(tok, &lp)| Ok((plm.tokenizer.decode(&[tok.id])?, lp)))
                                .collect::<Result<_, ModelError>>()
                                .map_err(model_error(&plm))?,
                            spans: t
                                .tokens
                                .iter()
                                .map(|t| (t.span.start, t.span.end))
                                .collect(),
                            truncated,
                        });
                    }
                    scores.push(Score {
                        metric: id.as_str(),
                        value,
                        parts,
                        signature: sig.to_string(),
                    });
                }
                let mut column = Column::new(spec, scores, sig);
                column.details = details;
                Ok(column)
            })
            .collect()
    }
}
