//! GEMBA-MQM (Kocmi & Federmann 2023, "GEMBA-MQM: Detecting Translation
//! Quality Error Spans with GPT-4") as its released code asks and reads
//! (github MicrosoftTranslator/GEMBA: `gemba/gemba_mqm_utils.py`,
//! `gemba/utils.py`, `gemba/gpt_api.py`): a language model lists a
//! translation's errors by severity, and the score counts them.
//!
//! The prompt is `TEMPLATE_GEMBA_MQM`, kept verbatim in
//! `prompts/gemba/mqm.json`: a system message, three worked examples
//! (en-de, en-cs, zh-en) as user and assistant turns, then the segment's
//! user turn, every turn filled as `apply_template` fills it (`str.format`).
//! It goes through the model's chat template, which it needs. The answer is
//! decoded greedily (temperature 0). `utils.py` asks for 500 tokens and
//! `gpt_api.py` asks again with 200 more while an answer stops for length,
//! which for greedy decoding is one longer answer: here an answer that does
//! not end within `max_new_tokens` (500 by default) is an error that says
//! so, not a score. The stripped answer is read by [`parse_answer`]
//! (`parse_mqm_answer`): the first five errors count 25 (critical), 5
//! (major) or 1 (minor), at most 25 in all; the score is minus that
//! (`gemba-mqm`, −25 to 0, the repository's), or 100 − 4 × it
//! (`gemba-mqm-norm`, 0 to 100, the default of gemba 0.1.3 on PyPI).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Engine, EngineError, model_error, part_of, truncated_part};
use super::gemba::{format, language_name};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::spec::named_enum;
use super::{
    CorpusAggregation, MetricSpec, ModelKind, ModelSlot, Scale, Score, Segment, Signature,
};
use crate::models::generate::Decoding;
use crate::models::{ModelError, Plm};

/// GEMBA-MQM's conversation (`TEMPLATE_GEMBA_MQM`), as JSON messages.
pub const TEMPLATE: &str = include_str!("prompts/gemba/mqm.json");

/// The severities, in the order `parse_mqm_answer` counts them.
pub const SEVERITIES: [&str; 3] = ["critical", "major", "minor"];

/// −25 (the worst) to 0: minus the weighted error count.
pub const PENALTY: Scale = Scale {
    id: "mqm",
    label: "−25–0",
    digits: 0,
};

/// Which number the column shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Range {
    /// −penalty (the repository's `parse_mqm_answer`).
    #[default]
    Penalty,
    /// 100 − 4 × penalty (gemba 0.1.3's `normalize=True`).
    Normalized,
}

named_enum!(
    Range,
    "GEMBA-MQM score range",
    [
        (Penalty, "penalty", "minus the weighted errors, −25 to 0"),
        (
            Normalized,
            "normalized",
            "100 − 4 × the weighted errors, 0 to 100"
        )
    ]
);

/// The conversation for one segment: `apply_template(TEMPLATE_GEMBA_MQM,
/// row)`, every turn's content formatted with the row.
pub fn messages(
    source_lang: &str,
    target_lang: &str,
    source: &str,
    translation: &str,
) -> serde_json::Value {
    let turns: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(TEMPLATE).expect("prompts/gemba/mqm.json is a list of messages");
    let fill = |content: &str| {
        format(content, |name| match name {
            "source_lang" => Some(source_lang),
            "target_lang" => Some(target_lang),
            "source_seg" => Some(source),
            "target_seg" => Some(translation),
            _ => None,
        })
    };
    serde_json::Value::Array(
        turns
            .into_iter()
            .map(|mut turn| {
                if let Some(serde_json::Value::String(c)) = turn.get_mut("content") {
                    *c = fill(c);
                }
                serde_json::Value::Object(turn)
            })
            .collect(),
    )
}

/// The errors an answer lists, by severity ([`SEVERITIES`]' order), as
/// `parse_mqm_answer` reads them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Errors(pub [Vec<String>; 3]);

impl Errors {
    /// The weighted count GEMBA subtracts: the first five errors (critical
    /// ones first) at 25, 5 or 1, at most 25.
    pub fn penalty(&self) -> u32 {
        let weights = [25, 5, 1];
        let counted: u32 = self
            .0
            .iter()
            .zip(weights)
            .flat_map(|(errors, w)| errors.iter().map(move |_| w))
            .take(5)
            .sum();
        counted.min(25)
    }

    /// The score in `range`.
    pub fn score(&self, range: Range) -> f64 {
        let penalty = f64::from(self.penalty());
        match range {
            // 0 − penalty: no errors score 0, not −0.
            Range::Penalty => 0.0 - penalty,
            Range::Normalized => 100.0 - 4.0 * penalty,
        }
    }

    fn push(&mut self, severity: &str, error: String) {
        if let Some(k) = SEVERITIES.iter().position(|s| *s == severity) {
            self.0[k].push(error);
        }
    }
}

/// `parse_mqm_answer(answer)` (full descriptions): the stripped answer's
/// errors. An answer in GEMBA's JSON form (`{"improved translation"...`) is
/// read as JSON, or as `parse_broken_json` salvages it; any other is read
/// line by line under `Critical:`, `Major:` and `Minor:` headings
/// (lower-cased; `no-error` lines skipped; a `non-translation` error is
/// critical wherever it is listed). `Err` where GEMBA's parser raises (a
/// JSON answer whose errors are not lists by severity).
pub fn parse_answer(answer: &str) -> Result<Errors, String> {
    if answer.starts_with("{\"improved translation\"") {
        return match serde_json::from_str::<serde_json::Value>(answer) {
            Ok(v) => match v.get("errors") {
                Some(errors) => by_severity(errors),
                None => Err("its JSON has no \"errors\"".into()),
            },
            Err(_) => broken_json(answer),
        };
    }
    let mut errors = Errors::default();
    let mut level = None;
    for line in answer.to_lowercase().split('\n') {
        let line = py_strip(line);
        if line.contains("no-error") || line.contains("no error") || line.is_empty() {
            continue;
        }
        if let Some(heading) = line.strip_suffix(':').filter(|h| SEVERITIES.contains(h)) {
            level = Some(heading.to_owned());
            continue;
        }
        let Some(level) = &level else { continue };
        let severity = if line.contains("non-translation") {
            "critical"
        } else {
            level
        };
        errors.push(severity, line.to_owned());
    }
    Ok(errors)
}

/// Python's `str.strip()`: Unicode white space and the separators
/// U+001C to U+001F.
fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// The errors of a JSON value as `parse_mqm_answer` iterates
/// `errors[severity]`: a list's items, a string's characters, an object's
/// keys; GEMBA raises on anything else.
fn by_severity(errors: &serde_json::Value) -> Result<Errors, String> {
    use serde_json::Value;
    let mut out = Errors::default();
    match errors {
        Value::Object(map) => {
            for severity in SEVERITIES {
                let items: Vec<String> = match map.get(severity) {
                    None => continue,
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|i| match i {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect(),
                    Some(Value::String(s)) => s.chars().map(String::from).collect(),
                    Some(Value::Object(m)) => m.keys().cloned().collect(),
                    Some(other) => {
                        return Err(format!("its {severity} errors are not a list: {other}"));
                    }
                };
                for item in items {
                    out.push(severity, item);
                }
            }
            Ok(out)
        }
        // `severity in errors` on a list tests membership; GEMBA then
        // indexes the list with a string and raises.
        Value::Array(items) => match items
            .iter()
            .find(|i| i.as_str().is_some_and(|s| SEVERITIES.contains(&s)))
        {
            Some(_) => Err("its errors are a list, not errors by severity".into()),
            None => Ok(out),
        },
        other => Err(format!("its errors are not errors by severity: {other}")),
    }
}

/// `parse_broken_json`: an answer that starts as GEMBA's JSON form but does
/// not parse. The part after `", "errors": ` (its last character dropped)
/// is read as JSON; failing that, each word `class` after the word
/// `critical`, `major` or `minor` counts as an error of that severity.
fn broken_json(answer: &str) -> Result<Errors, String> {
    if !(answer.contains("\"errors\": ") && answer.contains("improved translation")) {
        return Ok(Errors::default());
    }
    let parts: Vec<&str> = answer.split("\", \"errors\": ").collect();
    let [first, errors] = parts[..] else {
        return Ok(Errors::default());
    };
    if !first.contains("\"improved translation\": \"") {
        // `split(...)[1]` raises an IndexError there.
        return Err("its JSON is broken before its errors".into());
    }
    let mut errors_text = errors.chars();
    errors_text.next_back();
    let errors_text = errors_text.as_str();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(errors_text) {
        return by_severity(&v);
    }
    let mut out = Errors::default();
    let mut last = None;
    let lower = errors_text.to_lowercase();
    let words = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty());
    for word in words {
        if SEVERITIES.contains(&word) {
            last = Some(word);
        } else if let Some(severity) = last.filter(|_| word == "class") {
            out.push(severity, "{\"class\": \"other\"}".into());
        }
    }
    Ok(out)
}

/// One judged segment: the answer and the errors read from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The answer, stripped.
    pub answer: String,
    /// Its errors.
    pub errors: Errors,
    /// Tokens the model ran for it.
    pub decoded: usize,
}

/// Asks `plm` about `input` (token ids) greedily. `Ok(Err(why))` when the
/// answer does not end within `max_new_tokens` or GEMBA's parser fails on it.
pub async fn judge(
    plm: &Plm,
    input: &[u32],
    max_new_tokens: usize,
) -> Result<Result<Judged, String>, ModelError> {
    let said = super::geval::answer(plm, input, max_new_tokens, Decoding::Greedy).await?;
    let answer = py_strip(&said.text).to_owned();
    if !said.ended {
        return Ok(Err(format!(
            "the answer did not end within {max_new_tokens} tokens (GEMBA asks again for \
             200 more each time: raise the answer length); it began {:?}",
            answer.chars().take(200).collect::<String>()
        )));
    }
    Ok(match parse_answer(&answer) {
        Ok(errors) => Ok(Judged {
            answer,
            errors,
            decoded: said.decoded,
        }),
        Err(why) => Err(format!(
            "GEMBA's parser fails on the answer ({why}): {answer:?}"
        )),
    })
}

/// GEMBA-MQM's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GembaMqmOptions {
    /// # Model
    ///
    /// The judge (an instruction-tuned causal LM with a chat template);
    /// unset: the registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Range
    ///
    /// Minus the weighted errors (−25 to 0, GEMBA's repository) or
    /// 100 − 4 × them (0 to 100, gemba 0.1.3's default).
    pub range: Range,
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
    /// Tokens an answer may take; one that does not end within them is an
    /// error.
    #[schemars(range(min = 1, max = 4096))]
    pub max_new_tokens: usize,
}

impl Default for GembaMqmOptions {
    fn default() -> Self {
        Self {
            model: None,
            range: Range::Penalty,
            source_lang: "de".into(),
            target_lang: "en".into(),
            max_new_tokens: 500,
        }
    }
}

/// GEMBA-MQM's registry entry.
pub struct GembaMqmMetric;

impl MetricModule for GembaMqmMetric {
    type Options = GembaMqmOptions;
    const KIND: KindAbout = KindAbout {
        name: "GEMBA-MQM",
        about: "An LLM judge shown three annotated examples and asked to list the translation's \
                errors as critical, major or minor (GEMBA-MQM). The answer is decoded greedily \
                and read as GEMBA reads it: the first five errors cost 25, 5 or 1 points, at \
                most 25. Reference-free. Higher is better.",
        reference: "MicrosoftTranslator/GEMBA (gemba/gemba_mqm_utils.py, gemba/utils.py)",
        truncated: "the prompt was longer than the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::ChatLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[
        About {
            name: "GEMBA-MQM",
            description: "GEMBA-MQM: minus the judge's weighted errors (25 critical, 5 major, 1 minor; first five, at most 25)",
            higher_is_better: true,
            needs_reference: false,
            needs_source: true,
            reads: "hypothesis + source",
            scale: PENALTY,
        },
        About {
            name: "GEMBA-MQM (0-100)",
            description: "GEMBA-MQM normalized: 100 minus 4 times the judge's weighted errors",
            higher_is_better: true,
            needs_reference: false,
            needs_source: true,
            reads: "hypothesis + source",
            scale: Scale::PERCENT,
        },
    ];
    const COLUMN_OPTION: Option<&'static str> = Some("range");

    fn column(o: &GembaMqmOptions) -> usize {
        o.range as usize
    }

    fn with_column(o: GembaMqmOptions, column: usize) -> GembaMqmOptions {
        GembaMqmOptions {
            range: Range::ALL.get(column).copied().unwrap_or_default(),
            ..o
        }
    }
}

/// The signature of a GEMBA-MQM column.
pub fn signature(o: &GembaMqmOptions, model: &str, precision: &str) -> Signature {
    Signature::new("gemba-mqm")
        .with("model", model)
        .with("range", o.range)
        .with("langs", format!("{}-{}", o.source_lang, o.target_lang))
        .with("input", "chat-fewshot3")
        .with("answer", o.max_new_tokens)
        .with("conventions", super::gemba::CONVENTIONS)
        .with("precision", precision)
        .versioned()
}

impl ModelModule for GembaMqmMetric {
    fn model_name(o: &GembaMqmOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&GembaMqmOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        super::registry::each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::GembaMqm, o.model.as_deref())?;
            let spec = MetricSpec::GembaMqm(o.clone());
            let id = spec.id();
            let input_error = |message: String| EngineError::Input {
                metric: id,
                message,
            };
            if o.max_new_tokens == 0 {
                return Err(input_error("max_new_tokens must be at least 1".into()));
            }
            let template = super::geval::chat_template(&plm)
                .map_err(model_error(&plm))?
                .ok_or_else(|| {
                    input_error(format!(
                        "{} has no chat template (tokenizer_config.json's chat_template): \
                         GEMBA-MQM sends a system message and worked examples as turns",
                        plm.name
                    ))
                })?;
            let (source_lang, target_lang) =
                (language_name(&o.source_lang), language_name(&o.target_lang));
            let signature = signature(o, &plm.name, &plm.precision_label());
            let mut scores = Vec::with_capacity(segments.len());
            for (i, s) in segments.iter().enumerate() {
                let source = s.src.ok_or_else(|| {
                    input_error(format!(
                        "segment {} has no source: GEMBA-MQM reads it (fill in the source)",
                        i + 1
                    ))
                })?;
                let chat = messages(source_lang, target_lang, source, s.hyp);
                let (ids, truncated) =
                    super::geval::encode_chat(&plm, template, &chat).map_err(model_error(&plm))?;
                if truncated || ids.len() + o.max_new_tokens > plm.config.max_tokens() {
                    return Err(input_error(format!(
                        "segment {}'s prompt ({} tokens) and answer ({}) do not fit {}'s limit \
                         of {} tokens",
                        i + 1,
                        ids.len(),
                        o.max_new_tokens,
                        plm.name,
                        plm.config.max_tokens()
                    )));
                }
                let judged = judge(&plm, &ids, o.max_new_tokens)
                    .await
                    .map_err(model_error(&plm))?
                    .map_err(|why| input_error(format!("segment {}: {why}", i + 1)))?;
                let [critical, major, minor] = judged.errors.0.each_ref().map(|e| e.len() as f64);
                let [tokens, decoded] = super::geval::cost_parts(ids.len(), judged.decoded);
                scores.push(Score {
                    metric: id.as_str(),
                    value: judged.errors.score(o.range),
                    parts: vec![
                        part_of("critical", critical),
                        part_of("major", major),
                        part_of("minor", minor),
                        tokens,
                        decoded,
                        truncated_part(false),
                    ],
                    signature: signature.to_string(),
                });
            }
            Ok(Column::new(spec, scores, signature))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(answer: &str) -> (Vec<usize>, f64) {
        let e = parse_answer(answer).unwrap();
        (e.0.iter().map(Vec::len).collect(), e.score(Range::Penalty))
    }

    #[test]
    fn answers_read_as_gemba_reads_them() {
        // The first worked example's answer: two major, two minor.
        let shot = "Critical:\nno-error\nMajor:\naccuracy/mistranslation - \"involvement\"\n\
                    accuracy/omission - \"the account holder\"\nMinor:\nfluency/grammar - \
                    \"wäre\"\nfluency/register - \"dir\"";
        assert_eq!(parsed(shot), (vec![0, 2, 2], -12.0));
        // Headings are read lower-cased; lines before one are skipped.
        assert_eq!(
            parsed("Fine.\nMAJOR:\nstyle/awkward - \"x\""),
            (vec![0, 1, 0], -5.0)
        );
        // Non-translation is critical wherever it is listed.
        assert_eq!(
            parsed("Minor:\nnon-translation - \"x\""),
            (vec![1, 0, 0], -25.0)
        );
        // Only the first five errors count, critical first, at most 25.
        let many = "Minor:\na\nb\nc\nd\ne\nf\nMajor:\ng";
        assert_eq!(parsed(many), (vec![0, 1, 6], -9.0));
        assert_eq!(parsed("Critical:\na\nb"), (vec![2, 0, 0], -25.0));
        assert_eq!(parsed("no error at all"), (vec![0, 0, 0], 0.0));
        let e = parse_answer("Major:\nx").unwrap();
        assert_eq!(e.score(Range::Normalized), 80.0);
    }

    #[test]
    fn json_answers_read_as_gemba_reads_them() {
        let ok = r#"{"improved translation": "x", "errors": {"critical": [], "major": [{"class": "accuracy"}], "minor": ["a", "b"]}}"#;
        assert_eq!(parsed(ok), (vec![0, 1, 2], -7.0));
        // Broken JSON: the errors part still parses.
        let broken = r#"{"improved translation": "say "hi"", "errors": {"minor": ["a"]}}"#;
        assert_eq!(parsed(broken), (vec![0, 0, 1], -1.0));
        // Broken errors too: each `class` after a severity word counts.
        let words = r#"{"improved translation": "a"b", "errors": {"major": [{"class": accuracy}, {"class": x}], "minor": [{class: y}]}}"#;
        assert_eq!(parsed(words), (vec![0, 2, 1], -11.0));
        assert!(parse_answer(r#"{"improved translation": "x", "errors": {"major": 3}}"#).is_err());
    }

    #[test]
    fn the_conversation_is_the_template_filled() {
        let m = messages("German", "English", "Quelle {target_seg}", "Hyp");
        let turns = m.as_array().unwrap();
        assert_eq!(turns.len(), 8);
        assert_eq!(turns[0]["role"], "system");
        let last = turns[7]["content"].as_str().unwrap();
        assert!(last.starts_with(
            "German source:\n```Quelle {target_seg}```\nEnglish translation:\n```Hyp```\n\n"
        ));
        // The worked examples are unchanged.
        assert!(
            turns[1]["content"]
                .as_str()
                .unwrap()
                .starts_with("English source:\n```I do apologise")
        );
    }
}
