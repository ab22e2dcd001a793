//! A judge whose prompt and score reading the user writes: the playground's
//! way to test a judging prompt of one's own, not a published metric.
//!
//! The prompt is a template: `{hypothesis}`, `{reference}` (the first) and
//! `{source}` are replaced by the texts, `{{` and `}}` write braces, any
//! other `{name}` is refused. It is sent through the model's chat template
//! as a user or system message, or as plain text. The score is read one of
//! two ways:
//! - `weighted`: G-Eval's probability-weighted rating over the single-digit
//!   ratings `low..=high` of the next token (deterministic, one pass);
//! - `answer`: the greedy answer (at most `max_new_tokens`), and the first
//!   match of a regular expression in it (its first group where it has
//!   one) read as a number.
//!
//! Metric `custom-judge`. The template and the pattern go into the signature as the first 12 hex
//! digits of their SHA-256, so two results agree only when both do; the
//! options (and the page's links) carry them whole.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::engine::{Column, Engine, EngineError, model_error, part_of, truncated_part};
use super::geval::{Role, answer, cost_parts, judge_input, weighted};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::spec::named_enum;
use super::{
    CorpusAggregation, MetricError, MetricSpec, ModelKind, ModelSlot, Scale, Score, ScorePart,
    Segment, Signature,
};
use crate::models::generate::Decoding;

/// The template a judge starts from.
pub const DEFAULT_TEMPLATE: &str = "Rate how well the candidate text conveys the meaning of the reference text, on a scale from 1 (not at all) to 5 (completely).\n\nReference: {reference}\nCandidate: {hypothesis}\n\nAnswer with a single number from 1 to 5.";

/// What the scale is: whatever the prompt asks for.
pub const AS_PROMPTED: Scale = Scale {
    id: "as-prompted",
    label: "as prompted",
    digits: 4,
};

/// How the score is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Scoring {
    /// The probability-weighted rating of the next token.
    #[default]
    Weighted,
    /// The number a pattern finds in the greedy answer.
    Answer,
}

named_enum!(
    Scoring,
    "score reading",
    [
        (
            Weighted,
            "weighted",
            "probability-weighted rating of the next token"
        ),
        (Answer, "answer", "a number in the greedy answer")
    ]
);

/// How the prompt is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Input {
    /// A user message through the chat template.
    #[default]
    User,
    /// A system message through the chat template.
    System,
    /// The text as it is.
    Plain,
}

named_enum!(
    Input,
    "prompt input",
    [
        (User, "user", "a user message (chat template)"),
        (System, "system", "a system message (chat template)"),
        (Plain, "plain", "plain text")
    ]
);

/// A text the template names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// `{hypothesis}`.
    Hypothesis,
    /// `{reference}`.
    Reference,
    /// `{source}`.
    Source,
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Slot(Slot),
}

/// A checked template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Piece>);

impl Template {
    /// Parses `text`; `Err` names the first unknown placeholder or lone brace.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().is_some_and(|&(_, n)| n == '{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().is_some_and(|&(_, n)| n == '}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let rest = &text[i + 1..];
                    let end = rest.find('}').ok_or_else(|| {
                        format!("the prompt has a `{{` at character {} that no `}}` closes (write `{{{{` for a brace)", text[..i].chars().count() + 1)
                    })?;
                    let slot = match &rest[..end] {
                        "hypothesis" => Slot::Hypothesis,
                        "reference" => Slot::Reference,
                        "source" => Slot::Source,
                        other => {
                            return Err(format!(
                                "the prompt names {{{other}}}: use {{hypothesis}}, {{reference}} \
                                 or {{source}} (and `{{{{`, `}}}}` for braces)"
                            ));
                        }
                    };
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    pieces.push(Piece::Slot(slot));
                    for _ in 0..=rest[..end].chars().count() {
                        chars.next();
                    }
                }
                '}' => {
                    return Err(format!(
                        "the prompt has a lone `}}` at character {} (write `}}}}` for a brace)",
                        text[..i].chars().count() + 1
                    ));
                }
                c => literal.push(c),
            }
        }
        pieces.push(Piece::Text(literal));
        pieces.retain(|p| !matches!(p, Piece::Text(t) if t.is_empty()));
        if !pieces.contains(&Piece::Slot(Slot::Hypothesis)) {
            return Err("the prompt never names {hypothesis}: the judge would not see it".into());
        }
        Ok(Self(pieces))
    }

    /// Whether the template names `slot`.
    pub fn reads(&self, slot: Slot) -> bool {
        self.0.contains(&Piece::Slot(slot))
    }

    /// The prompt for one segment (the texts the template names given).
    pub fn fill(&self, hypothesis: &str, reference: &str, source: &str) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.as_str(),
                Piece::Slot(Slot::Hypothesis) => hypothesis,
                Piece::Slot(Slot::Reference) => reference,
                Piece::Slot(Slot::Source) => source,
            })
            .collect()
    }
}

/// The first 12 hex digits of `text`'s SHA-256.
pub fn short_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The number `pattern` finds first in `answer`: its first group where it
/// has one, else the whole match, trimmed, read as a finite number.
pub fn read_answer(pattern: &regex::Regex, answer: &str) -> Option<f64> {
    let caps = pattern.captures(answer)?;
    let found = caps.get(1).or_else(|| caps.get(0))?;
    found
        .as_str()
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
}

/// The custom judge's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CustomJudgeOptions {
    /// # Model
    ///
    /// The judge (an instruction-tuned causal LM); unset: the registry's
    /// default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Prompt
    ///
    /// The judge's prompt: {hypothesis}, {reference} and {source} are
    /// replaced by the texts; {{ and }} write braces.
    #[schemars(extend("x-multiline" = true))]
    pub template: String,
    /// # Sent as
    ///
    /// A user or system message through the model's chat template, or the
    /// plain text.
    pub input: Input,
    /// # Score
    ///
    /// weighted: the probability-weighted rating of the next token, from
    /// Lowest to Highest; answer: the number the pattern finds in the greedy
    /// answer.
    pub scoring: Scoring,
    /// # Lowest
    ///
    /// The lowest rating (a digit; weighted scoring).
    #[schemars(range(max = 8))]
    pub low: u32,
    /// # Highest
    ///
    /// The highest rating (a digit; weighted scoring).
    #[schemars(range(min = 1, max = 9))]
    pub high: u32,
    /// # Pattern
    ///
    /// A regular expression (Rust's regex syntax) whose first match in the
    /// answer is the score: its first group where it has one (answer
    /// scoring).
    pub pattern: String,
    /// # Answer length
    ///
    /// Tokens the answer may take (answer scoring).
    #[schemars(range(min = 1, max = 1024))]
    pub max_new_tokens: usize,
}

impl Default for CustomJudgeOptions {
    fn default() -> Self {
        Self {
            model: None,
            template: DEFAULT_TEMPLATE.into(),
            input: Input::User,
            scoring: Scoring::Weighted,
            low: 1,
            high: 5,
            pattern: r"(-?\d+(?:\.\d+)?)".into(),
            max_new_tokens: 16,
        }
    }
}

/// The custom judge's registry entry.
pub struct CustomJudgeMetric;

impl MetricModule for CustomJudgeMetric {
    type Options = CustomJudgeOptions;
    const KIND: KindAbout = KindAbout {
        name: "Custom judge",
        about: "An LLM judge with a prompt you write: {hypothesis}, {reference} and {source} \
                are filled in, and the score is the probability-weighted rating of the next \
                token or a number found in the greedy answer. For testing a judging prompt of \
                your own; not a published metric.",
        reference: "Blindspot (your prompt)",
        truncated: "the prompt was longer than the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::ChatLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        name: "Custom judge",
        description: "Custom judge: the score your prompt asks the judge for",
        higher_is_better: true,
        needs_reference: false,
        needs_source: false,
        reads: "the texts its prompt names",
        scale: AS_PROMPTED,
    }];
}

/// The signature of a custom judge.
pub fn signature(o: &CustomJudgeOptions, model: &str, chat: bool, precision: &str) -> Signature {
    let input = match (o.input, chat) {
        (Input::Plain, _) | (_, false) => "plain".to_owned(),
        (role, true) => format!("chat-{role}"),
    };
    let score = match o.scoring {
        Scoring::Weighted => format!("weighted-{}-{}", o.low, o.high),
        Scoring::Answer => format!("answer-{}-{}", short_hash(&o.pattern), o.max_new_tokens),
    };
    Signature::new("custom-judge")
        .with("model", model)
        .with("prompt", format!("sha256-{}", short_hash(&o.template)))
        .with("input", input)
        .with("score", score)
        .with("precision", precision)
        .versioned()
}

/// The parts naming each rating's share (`p0` to `p9`).
const RATING_PARTS: [&str; 10] = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"];

impl ModelModule for CustomJudgeMetric {
    fn model_name(o: &CustomJudgeOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&CustomJudgeOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        super::registry::each_alone(group, async |o| {
            let spec = MetricSpec::CustomJudge(o.clone());
            let id = spec.id();
            let input_error = |message: String| EngineError::Input {
                metric: id,
                message,
            };
            let template = Template::parse(&o.template).map_err(input_error)?;
            let pattern = match o.scoring {
                Scoring::Answer => Some(regex::Regex::new(&o.pattern).map_err(|e| {
                    // regex's message draws a caret under the pattern: one line here.
                    let message = e.to_string();
                    let why = message.lines().map(str::trim).rfind(|l| !l.is_empty());
                    input_error(format!(
                        "the pattern {:?} is not a regular expression ({})",
                        o.pattern,
                        why.unwrap_or_default().trim_start_matches("error: ")
                    ))
                })?),
                Scoring::Weighted => None,
            };
            if o.scoring == Scoring::Weighted && !(o.low < o.high && o.high <= 9) {
                return Err(input_error(format!(
                    "ratings run from a digit to a larger one (got {} to {})",
                    o.low, o.high
                )));
            }
            if o.max_new_tokens == 0 {
                return Err(input_error("max_new_tokens must be at least 1".into()));
            }
            let plm = engine.model(ModelSlot::CustomJudge, o.model.as_deref())?;
            let (role, chat) = match o.input {
                Input::User => (Role::User, true),
                Input::System => (Role::System, true),
                Input::Plain => (Role::User, false),
            };
            let mut inputs = Vec::with_capacity(segments.len());
            let mut templated = false;
            for (i, s) in segments.iter().enumerate() {
                let reference = match s.refs.first() {
                    Some(r) => r,
                    None if template.reads(Slot::Reference) => {
                        return Err(MetricError::MissingReference {
                            metric: id.as_str(),
                            segment: i + 1,
                        }
                        .into());
                    }
                    None => "",
                };
                let source = match s.src {
                    Some(src) => src,
                    None if template.reads(Slot::Source) => {
                        return Err(input_error(format!(
                            "segment {} has no source: the prompt names {{source}} (fill in \
                             the source)",
                            i + 1
                        )));
                    }
                    None => "",
                };
                let text = template.fill(s.hyp, reference, source);
                let (ids, truncated, used) =
                    judge_input(&plm, &text, role, chat).map_err(model_error(&plm))?;
                let room = match o.scoring {
                    Scoring::Weighted => 0,
                    Scoring::Answer => o.max_new_tokens,
                };
                if truncated || ids.len() + room > plm.config.max_tokens() {
                    return Err(input_error(format!(
                        "segment {}'s prompt ({} tokens) does not fit {}'s limit of {} tokens{}",
                        i + 1,
                        ids.len(),
                        plm.name,
                        plm.config.max_tokens(),
                        if room > 0 { " with its answer" } else { "" }
                    )));
                }
                templated = used;
                inputs.push(ids);
            }
            let sig = signature(o, &plm.name, templated, &plm.precision_label());
            let score = |value: f64, parts: Vec<ScorePart>| Score {
                metric: id.as_str(),
                value,
                parts,
                signature: sig.to_string(),
            };
            let scores = match &pattern {
                None => weighted(&plm, &inputs, o.low..=o.high)
                    .await
                    .map_err(model_error(&plm))?
                    .into_iter()
                    .map(|r| {
                        let mut parts: Vec<ScorePart> = r
                            .shares
                            .iter()
                            .zip(o.low..=o.high)
                            .map(|(&q, s)| part_of(RATING_PARTS[s as usize], q))
                            .collect();
                        parts.push(part_of("mass", r.mass));
                        parts.extend(cost_parts(r.tokens, r.decoded));
                        parts.push(truncated_part(false));
                        score(r.value, parts)
                    })
                    .collect(),
                Some(pattern) => {
                    let mut out = Vec::with_capacity(inputs.len());
                    for (i, ids) in inputs.iter().enumerate() {
                        let said = answer(&plm, ids, o.max_new_tokens, Decoding::Greedy)
                            .await
                            .map_err(model_error(&plm))?;
                        let value = read_answer(pattern, &said.text).ok_or_else(|| {
                            input_error(format!(
                                "segment {}: the pattern finds no number in the answer {:?}",
                                i + 1,
                                said.text.trim()
                            ))
                        })?;
                        let [tokens, decoded] = cost_parts(ids.len(), said.decoded);
                        out.push(score(value, vec![tokens, decoded, truncated_part(false)]));
                    }
                    out
                }
            };
            Ok(Column::new(spec, scores, sig))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_the_three_texts_and_escape_braces() {
        let t = Template::parse("{{json}} R: {reference} H: {hypothesis} }}").unwrap();
        assert!(t.reads(Slot::Reference) && !t.reads(Slot::Source));
        assert_eq!(
            t.fill("h {source}", "r", "s"),
            "{json} R: r H: h {source} }"
        );
        assert!(
            Template::parse("{hypothesis} {answer}")
                .unwrap_err()
                .contains("{answer}")
        );
        assert!(
            Template::parse("{hypothesis} {")
                .unwrap_err()
                .contains("character 14")
        );
        assert!(
            Template::parse("{hypothesis} }")
                .unwrap_err()
                .contains("lone")
        );
        assert!(
            Template::parse("{reference}")
                .unwrap_err()
                .contains("never names")
        );
        assert!(Template::parse(DEFAULT_TEMPLATE).is_ok());
        // Placeholders after multi-byte text.
        let t = Template::parse("é {hypothesis}ü").unwrap();
        assert_eq!(t.fill("x", "", ""), "é xü");
    }

    #[test]
    fn answers_are_read_by_the_pattern() {
        let default = regex::Regex::new(&CustomJudgeOptions::default().pattern).unwrap();
        assert_eq!(read_answer(&default, "I give it 4.5 of 5"), Some(4.5));
        assert_eq!(read_answer(&default, "Score: -2"), Some(-2.0));
        assert_eq!(read_answer(&default, "none"), None);
        let whole = regex::Regex::new(r"\d+").unwrap();
        assert_eq!(read_answer(&whole, "a 17 b"), Some(17.0));
        let rating = regex::Regex::new(r"Rating: \[\[(\d+)\]\]").unwrap();
        assert_eq!(read_answer(&rating, "so. Rating: [[8]]"), Some(8.0));
        assert_eq!(short_hash("abc"), "ba7816bf8f01");
    }
}
