//! GEMBA-DA (Kocmi & Federmann 2023) as its released code asks and reads
//! (github MicrosoftTranslator/GEMBA: `gemba/prompt.py`, `gemba/gpt_api.py`):
//! a language model scores a translation from 0 to 100, with the source
//! (`GEMBA-DA`) or the source and a human reference (`GEMBA-DA_ref`).
//!
//! The prompt is `prompt.py`'s, the languages named as its table names them
//! (`en`, `de`, `zh`, `ru`) or as given; it is one user message through the
//! model's chat template (the plain text for a model without one). The
//! answer is decoded greedily (temperature 0) until the model ends it; an
//! answer that does not end within `max_new_tokens` counts as none, as an
//! API answer that stops for length does in `gpt_api.py`. The answer,
//! stripped, is read by `validate_number`: the one number in it (or `['85']`,
//! or `85/100`), kept when within 0-100. With no valid answer GEMBA asks
//! again at temperature 0.1, 0.2... up to 1.0; so does this, sampling from a
//! seeded stream (attempt k from `seed + k`). No valid answer after those is
//! an error that names the segment and the last answer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Engine, EngineError, model_error, part_of, truncated_part};
use super::geval::{Role, judge_input};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::spec::named_enum;
use super::{
    CorpusAggregation, MetricError, MetricSpec, ModelKind, ModelSlot, Scale, Score, Segment,
    Signature,
};
use crate::models::generate::{Decoding, Sampling};
use crate::models::{ModelError, Plm};

/// The implementation whose prompts and parsing are reproduced.
pub const CONVENTIONS: &str = "microsoft-gemba";

/// GEMBA-DA's prompt (`prompts["GEMBA-DA"]`).
pub const DA: &str = "Score the following translation from {source_lang} to {target_lang} on a continuous scale from 0 to 100, where a score of zero means \"no meaning preserved\" and score of one hundred means \"perfect meaning and grammar\".\n\n{source_lang} source: \"{source_seg}\"\n{target_lang} translation: \"{target_seg}\"\nScore: ";

/// GEMBA-DA_ref's prompt (`prompts["GEMBA-DA_ref"]`; its reference is not
/// quoted, as there).
pub const DA_REF: &str = "Score the following translation from {source_lang} to {target_lang} with respect to human reference on a continuous scale 0 to 100 where score of zero means \"no meaning preserved\" and score of one hundred means \"perfect meaning and grammar\".\n\n{source_lang} source: \"{source_seg}\"\n{target_lang} human reference: {reference_seg}\n{target_lang} machine translation: \"{target_seg}\"\nScore: ";

/// Which prompt (a column of `gemba-da`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Prompt {
    /// Source and translation.
    #[default]
    Source,
    /// Source, human reference and translation.
    Reference,
}

named_enum!(
    Prompt,
    "GEMBA-DA prompt",
    [
        (Source, "source", "GEMBA-DA (source and translation)"),
        (
            Reference,
            "reference",
            "GEMBA-DA_ref (source, human reference and translation)"
        )
    ]
);

/// A language as GEMBA's table names it (`language_codes`), or as given.
pub fn language_name(code: &str) -> &str {
    match code {
        "en" => "English",
        "de" => "German",
        "zh" => "Chinese",
        "ru" => "Russian",
        other => other,
    }
}

/// The prompt for one segment, as `prompt.format(**data)` fills it.
pub fn prompt(
    which: Prompt,
    source_lang: &str,
    target_lang: &str,
    source: &str,
    translation: &str,
    reference: &str,
) -> String {
    let template = match which {
        Prompt::Source => DA,
        Prompt::Reference => DA_REF,
    };
    format(template, |name| match name {
        "source_lang" => Some(source_lang),
        "target_lang" => Some(target_lang),
        "source_seg" => Some(source),
        "target_seg" => Some(translation),
        "reference_seg" => Some(reference),
        _ => None,
    })
}

/// `template` with each `{name}` replaced by `value(name)` in one pass, as
/// Python's `str.format` fills GEMBA's prompts: a value is not searched
/// again. A name `value` does not know, or an unclosed `{`, stays as it is
/// (GEMBA's templates have neither; `str.format` would raise).
pub fn format<'a>(template: &str, value: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let filled = rest[start..].find('}').and_then(|e| {
            let end = start + e;
            value(&rest[start + 1..end]).map(|v| (v, end))
        });
        match filled {
            Some((v, end)) => {
                out.push_str(v);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('{');
                rest = &rest[start + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `prompt.py`'s `validate_number(answer, 0, 100)`: the answer's one number
/// (`\d+` runs: exactly one), or the whole answer as `['85']`, or `85/100`;
/// none outside 0-100. Digits are ASCII (Python's `\d` also reads other
/// scripts' digits).
pub fn validate_number(answer: &str) -> Option<u32> {
    let runs: Vec<&str> = answer
        .split(|c: char| !c.is_ascii_digit())
        .filter(|r| !r.is_empty())
        .collect();
    let parsed = if runs.len() == 1 {
        runs[0].parse::<u64>().ok()
    } else if let Some(inner) = answer
        .strip_prefix('[')
        .and_then(|r| r.strip_prefix(['\'', '"']))
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|r| r.strip_suffix(['\'', '"']))
        .filter(|d| d.chars().all(|c| c.is_ascii_digit()))
    {
        // `int('')` fails in Python: no answer.
        inner.parse::<u64>().ok()
    } else {
        answer
            .strip_suffix("/100")
            .filter(|d| d.chars().all(|c| c.is_ascii_digit()))
            .and_then(|d| d.parse::<u64>().ok())
    };
    parsed.filter(|&n| n <= 100).map(|n| n as u32)
}

/// One judged segment: the score, the temperature (tenths) it came at, the
/// answers asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// 0 to 100.
    pub score: u32,
    /// GEMBA's temperature step: 0 greedy, k sampled at k / 10.
    pub temperature: u32,
    /// The answer read.
    pub answer: String,
    /// Tokens the model ran for all the answers asked.
    pub decoded: usize,
}

/// Asks `plm` about `input` (token ids) as `gpt_api.py` asks: greedy, then
/// seeded samples at 0.1, 0.2... 1.0 until an answer validates. `Err` with
/// the last answer when none does.
pub async fn judge(
    plm: &Plm,
    input: &[u32],
    max_new_tokens: usize,
    seed: u64,
) -> Result<Result<Judged, String>, ModelError> {
    super::geval::require_causal(plm)?;
    let mut last = String::new();
    let mut decoded = 0;
    for step in 0..=10u32 {
        let decoding = if step == 0 {
            Decoding::Greedy
        } else {
            Decoding::Sample(Sampling {
                temperature: f64::from(step) / 10.0,
                top_k: 0,
                top_p: 1.0,
                seed: seed.wrapping_add(u64::from(step)),
            })
        };
        let said = super::geval::answer(plm, input, max_new_tokens, decoding).await?;
        decoded += said.decoded;
        last = said.text.trim().to_owned();
        if !said.ended {
            // An answer cut for length is no answer (gpt_api.py).
            continue;
        }
        if let Some(score) = validate_number(&last) {
            return Ok(Ok(Judged {
                score,
                temperature: step,
                answer: last,
                decoded,
            }));
        }
    }
    Ok(Err(last))
}

/// GEMBA-DA's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GembaDaOptions {
    /// # Model
    ///
    /// The judge (an instruction-tuned causal LM); unset: the registry's
    /// default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Prompt
    ///
    /// GEMBA-DA (source and translation) or GEMBA-DA_ref (with the human
    /// reference).
    pub prompt: Prompt,
    /// # Source language
    ///
    /// A code GEMBA names (en, de, zh, ru) or a language's name.
    pub source_lang: String,
    /// # Target language
    ///
    /// A code GEMBA names (en, de, zh, ru) or a language's name.
    pub target_lang: String,
    /// # Answer length
    ///
    /// Tokens an answer may take before it counts as none.
    #[schemars(range(min = 1, max = 1024))]
    pub max_new_tokens: usize,
    /// # Seed
    ///
    /// Of the sampled retries (temperature k / 10 draws from seed + k).
    pub seed: u64,
}

impl Default for GembaDaOptions {
    fn default() -> Self {
        Self {
            model: None,
            prompt: Prompt::Source,
            source_lang: "de".into(),
            target_lang: "en".into(),
            max_new_tokens: 64,
            seed: 0,
        }
    }
}

/// GEMBA-DA's registry entry.
pub struct GembaDaMetric;

impl MetricModule for GembaDaMetric {
    type Options = GembaDaOptions;
    const KIND: KindAbout = KindAbout {
        name: "GEMBA-DA",
        about: "An LLM judge asked GEMBA's direct-assessment question: score the translation \
                from 0 to 100 (\"no meaning preserved\" to \"perfect meaning and grammar\"), \
                given the source, and for GEMBA-DA_ref a human reference too. The answer is \
                decoded greedily and its one number read; without a valid one the judge is \
                asked again at rising temperatures, as GEMBA does. Higher is better.",
        reference: "MicrosoftTranslator/GEMBA (gemba/prompt.py, gemba/gpt_api.py)",
        truncated: "the prompt was longer than the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::ChatLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[
        About {
            name: "GEMBA-DA",
            description: "GEMBA-DA: the judge's 0-100 score of the translation, given the source",
            higher_is_better: true,
            needs_reference: false,
            needs_source: true,
            reads: "hypothesis + source",
            scale: Scale::PERCENT,
        },
        About {
            name: "GEMBA-DA_ref",
            description: "GEMBA-DA_ref: the judge's 0-100 score of the translation, given the source and a human reference",
            higher_is_better: true,
            needs_reference: true,
            needs_source: true,
            reads: "hypothesis + reference + source",
            scale: Scale::PERCENT,
        },
    ];
    const COLUMN_OPTION: Option<&'static str> = Some("prompt");

    fn column(o: &GembaDaOptions) -> usize {
        o.prompt as usize
    }

    fn with_column(o: GembaDaOptions, column: usize) -> GembaDaOptions {
        GembaDaOptions {
            prompt: Prompt::ALL.get(column).copied().unwrap_or_default(),
            ..o
        }
    }
}

/// The signature of a GEMBA-DA column.
pub fn signature(o: &GembaDaOptions, model: &str, chat: bool, precision: &str) -> Signature {
    let s = Signature::new("gemba-da")
        .with("model", model)
        .with("prompt", o.prompt)
        .with("langs", format!("{}-{}", o.source_lang, o.target_lang))
        .with("input", if chat { "chat-user" } else { "plain" })
        .with("answer", o.max_new_tokens)
        .with("seed", o.seed);
    let s = if o.prompt == Prompt::Reference {
        s.with("refs", "first")
    } else {
        s
    };
    s.with("conventions", CONVENTIONS)
        .with("precision", precision)
        .versioned()
}

impl ModelModule for GembaDaMetric {
    fn model_name(o: &GembaDaOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&GembaDaOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        super::registry::each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::GembaDa, o.model.as_deref())?;
            let spec = MetricSpec::GembaDa(o.clone());
            let id = spec.id();
            let input_error = |message: String| EngineError::Input {
                metric: id,
                message,
            };
            if o.max_new_tokens == 0 {
                return Err(input_error("max_new_tokens must be at least 1".into()));
            }
            let (source_lang, target_lang) =
                (language_name(&o.source_lang), language_name(&o.target_lang));
            let mut chat = false;
            let mut scores = Vec::with_capacity(segments.len());
            let sig_of = |chat| signature(o, &plm.name, chat, &plm.precision_label());
            for (i, s) in segments.iter().enumerate() {
                let source = s.src.ok_or_else(|| {
                    input_error(format!(
                        "segment {} has no source: GEMBA-DA reads it (fill in the source)",
                        i + 1
                    ))
                })?;
                let reference = match (o.prompt, s.refs.first()) {
                    (Prompt::Reference, None) => {
                        return Err(MetricError::MissingReference {
                            metric: id.as_str(),
                            segment: i + 1,
                        }
                        .into());
                    }
                    (_, r) => r.copied().unwrap_or_default(),
                };
                let text = prompt(o.prompt, source_lang, target_lang, source, s.hyp, reference);
                let (ids, truncated, templated) =
                    judge_input(&plm, &text, Role::User, true).map_err(model_error(&plm))?;
                if truncated || ids.len() + o.max_new_tokens > plm.config.max_tokens() {
                    return Err(input_error(format!(
                        "segment {}'s prompt and answer do not fit {}'s limit of {} tokens",
                        i + 1,
                        plm.name,
                        plm.config.max_tokens()
                    )));
                }
                chat = templated;
                let judged = judge(&plm, &ids, o.max_new_tokens, o.seed)
                    .await
                    .map_err(model_error(&plm))?
                    .map_err(|last| {
                        input_error(format!(
                            "segment {}: {} gave no score from 0 to 100 in 11 tries (greedy, \
                             then temperatures 0.1 to 1.0); its last answer: {last:?}",
                            i + 1,
                            plm.name
                        ))
                    })?;
                scores.push(Score {
                    metric: id.as_str(),
                    value: f64::from(judged.score),
                    parts: [part_of("temperature", f64::from(judged.temperature) / 10.0)]
                        .into_iter()
                        .chain(super::geval::cost_parts(ids.len(), judged.decoded))
                        .chain([truncated_part(false)])
                        .collect(),
                    signature: sig_of(chat).to_string(),
                });
            }
            Ok(Column::new(spec, scores, sig_of(chat)))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `validate_number`'s rules, case by case.
    #[test]
    fn answers_read_as_gemba_reads_them() {
        assert_eq!(validate_number("85"), Some(85));
        assert_eq!(validate_number("Score: 85."), Some(85));
        assert_eq!(validate_number("I would give it 90 points"), Some(90));
        assert_eq!(validate_number("85 or 90"), None);
        assert_eq!(validate_number("85.5"), None);
        assert_eq!(validate_number("['85']"), Some(85));
        assert_eq!(validate_number("[\"70\"]"), Some(70));
        assert_eq!(validate_number("['']"), None);
        assert_eq!(validate_number("['85\"]"), Some(85));
        assert_eq!(validate_number("101"), None);
        assert_eq!(validate_number("0"), Some(0));
        assert_eq!(validate_number("-5"), Some(5));
        assert_eq!(validate_number("no idea"), None);
        // Two numbers: only the `x/100` form reads.
        assert_eq!(validate_number("80/100"), Some(80));
        assert_eq!(validate_number("80/10"), None);
    }

    #[test]
    fn prompts_are_filled_as_str_format_fills_them() {
        let p = prompt(
            Prompt::Reference,
            "German",
            "English",
            "Quelle {x}",
            "Hyp {target_seg}",
            "Ref",
        );
        assert_eq!(
            p,
            "Score the following translation from German to English with respect to human reference on a continuous scale 0 to 100 where score of zero means \"no meaning preserved\" and score of one hundred means \"perfect meaning and grammar\".\n\nGerman source: \"Quelle {x}\"\nEnglish human reference: Ref\nEnglish machine translation: \"Hyp {target_seg}\"\nScore: "
        );
        assert!(
            prompt(Prompt::Source, "de", "en", "a", "b", "")
                .ends_with("en translation: \"b\"\nScore: ")
        );
        assert_eq!(language_name("zh"), "Chinese");
        assert_eq!(language_name("Czech"), "Czech");
    }
}
