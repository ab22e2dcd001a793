//! G-Eval (Liu et al. 2023) on SummEval, as its released code asks
//! (github nlpyang/geval: `prompts/summeval/*_detailed.txt`,
//! `gpt4_eval.py`, `meta_eval_summeval.py`): a language model is given the
//! dimension's instructions with the source article and the summary, and
//! answers with a rating: coherence, consistency and relevance 1 to 5,
//! fluency 1 to 3.
//!
//! The prompt is the released file with `{{Document}}` and `{{Summary}}`
//! replaced (its Windows line ends read as Python reads them, `\n`), sent as
//! one message (`system`, as `gpt4_eval.py` sends it, or `user`) through the
//! model's chat template with the generation prompt; a model without a
//! template reads the prompt as plain text (it then continues
//! "- Coherence:").
//!
//! Two scores, as the paper defines them:
//! - **probability-weighted** (the default, deterministic): the expected
//!   rating under the model's next-token distribution, Σ s·p(s) / Σ p(s),
//!   where p(s) sums the probabilities of the single tokens that spell the
//!   rating alone or after a space (`4`, ` 4`: what `parse_output`'s
//!   `^ ?([\d\.]+)` reads). The probability mass on the ratings, Σ p(s), is
//!   reported beside it: a judge that wants to say something else puts
//!   little there.
//! - **sampled** (`samples: n`): the mean of n answers drawn at `temperature`
//!   (2 in `gpt4_eval.py`, with n = 20 and at most 5 tokens), each read by
//!   `parse_output` (the number at the start, else 0). Draws are seeded
//!   (answer i from `seed + i`), so a score repeats; they are not OpenAI's.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Engine, EngineError, model_error, part_of, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::spec::named_enum;
use super::{
    CorpusAggregation, MetricSpec, ModelKind, ModelSlot, Scale, Score, ScorePart, Segment,
    Signature,
};
use crate::models::chat::ChatTemplate;
use crate::models::generate::{Decoding, GenerateOptions, Sampling};
use crate::models::{Head, ModelError, Plm};

/// The implementation whose prompts and parsing are reproduced.
pub const CONVENTIONS: &str = "nlpyang-geval";

/// Tokens a sampled answer has at most (`max_tokens=5` in gpt4_eval.py).
pub const SAMPLE_TOKENS: usize = 5;

/// A G-Eval dimension (a column of `g-eval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dimension {
    /// Coherence (1-5).
    #[default]
    Coherence,
    /// Consistency (1-5).
    Consistency,
    /// Fluency (1-3).
    Fluency,
    /// Relevance (1-5).
    Relevance,
}

named_enum!(
    Dimension,
    "G-Eval dimension",
    [
        (Coherence, "coherence", "coherence 1-5 (summary + source)"),
        (
            Consistency,
            "consistency",
            "consistency 1-5 (summary + source)"
        ),
        (Fluency, "fluency", "fluency 1-3 (summary)"),
        (Relevance, "relevance", "relevance 1-5 (summary + source)")
    ]
);

impl Dimension {
    /// The released prompt (`prompts/summeval/*_detailed.txt`).
    pub fn prompt(self) -> &'static str {
        match self {
            Dimension::Coherence => include_str!("prompts/geval/coh_detailed.txt"),
            Dimension::Consistency => include_str!("prompts/geval/con_detailed.txt"),
            Dimension::Fluency => include_str!("prompts/geval/flu_detailed.txt"),
            Dimension::Relevance => include_str!("prompts/geval/rel_detailed.txt"),
        }
    }

    /// The highest rating (the lowest is 1).
    pub fn top(self) -> u32 {
        if self == Dimension::Fluency { 3 } else { 5 }
    }

    /// Whether the prompt reads the source article.
    pub fn reads_source(self) -> bool {
        self != Dimension::Fluency
    }
}

/// The role the prompt is sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Role {
    /// A system message, as gpt4_eval.py sends it.
    #[default]
    System,
    /// A user message (for templates that refuse a lone system message).
    User,
}

named_enum!(
    Role,
    "message role",
    [
        (System, "system", "system (as gpt4_eval.py sends it)"),
        (User, "user", "user")
    ]
);

/// The prompt of `dim` about `summary` of `document`, as gpt4_eval.py
/// fills it in.
pub fn prompt(dim: Dimension, document: &str, summary: &str) -> String {
    dim.prompt()
        .replace("{{Document}}", document)
        .replace("{{Summary}}", summary)
}

/// `meta_eval_summeval.py`'s `parse_output`: the number at the start of an
/// answer (after at most one space), else 0. Digits are ASCII (Python's
/// `\d` and `float` also read other scripts' digits).
pub fn parse_output(answer: &str) -> f64 {
    let rest = answer.strip_prefix(' ').unwrap_or(answer);
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    // Python's float(): "4", "4.", ".5"; "4.5.1" or "." fail, and count 0.
    let valid = !number.is_empty() && number != "." && number.matches('.').count() <= 1;
    if valid {
        number.parse::<f64>().unwrap_or(0.0)
    } else {
        0.0
    }
}

/// The token ids of `plm` that spell rating `s` alone or after a space:
/// the single-token encodings of "s" and " s", and SentencePiece's "▁s"
/// where the vocabulary has it (a Llama 2 tokenizer encodes "4" as "▁",
/// "4").
fn rating_tokens(plm: &Plm, s: u32) -> Result<Vec<u32>, ModelError> {
    let mut ids = Vec::new();
    for text in [format!("{s}"), format!(" {s}")] {
        let tokens = plm.tokenizer.encode(&text)?;
        if let [one] = tokens.as_slice()
            && !ids.contains(&one.id)
        {
            ids.push(one.id);
        }
    }
    if let Some(id) = plm.tokenizer.token_id(&format!("\u{2581}{s}"))
        && !ids.contains(&id)
    {
        ids.push(id);
    }
    if ids.is_empty() {
        return Err(ModelError::Unsupported(format!(
            "{}'s tokenizer has no single token for the rating {s}",
            plm.name
        )));
    }
    Ok(ids)
}

/// Refuses a model that cannot be a judge: one without a causal LM head.
pub fn require_causal(plm: &Plm) -> Result<(), ModelError> {
    if plm.config.head == Head::CausalLm {
        return Ok(());
    }
    Err(ModelError::Unsupported(format!(
        "{} is not a causal language model (config.json names {}): a judge writes its \
         answer, as Qwen2.5-Instruct or SmolLM2-Instruct do",
        plm.name, plm.config.architecture
    )))
}

/// The model's chat template, none without one; an error when it has one
/// that could not be read.
pub fn chat_template(plm: &Plm) -> Result<Option<&ChatTemplate>, ModelError> {
    match &plm.chat_template {
        Ok(t) => Ok(t.as_ref()),
        Err(e) => Err(ModelError::Config(format!(
            "{}'s chat template cannot be used: {e}",
            plm.name
        ))),
    }
}

/// `messages` rendered by `template` with the generation prompt, as token
/// ids without added special tokens (`apply_chat_template(tokenize=True)`),
/// and whether they were cut at the model's limit.
pub fn encode_chat(
    plm: &Plm,
    template: &ChatTemplate,
    messages: &serde_json::Value,
) -> Result<(Vec<u32>, bool), ModelError> {
    let rendered = template.render(messages, None, true, &serde_json::Map::new())?;
    let e = plm.tokenizer.encode_as_is(&rendered)?;
    Ok((e.ids(), e.truncated))
}

/// A rendered judge prompt as token ids: through the model's chat template
/// (`role`, the generation prompt) when it has one and `chat` asks for it,
/// else the plain text with the model's own special tokens. The last bool
/// says whether the template was used.
pub fn judge_input(
    plm: &Plm,
    text: &str,
    role: Role,
    chat: bool,
) -> Result<(Vec<u32>, bool, bool), ModelError> {
    let template = if chat { chat_template(plm)? } else { None };
    let (ids, truncated) = match template {
        Some(t) => {
            let messages = serde_json::json!([{"role": role.to_string(), "content": text}]);
            encode_chat(plm, t, &messages)?
        }
        None => {
            let e = plm.tokenizer.encode_for_model(text)?;
            (e.ids(), e.truncated)
        }
    };
    Ok((ids, truncated, template.is_some()))
}

/// One rating: its value, the mass on the ratings (probability-weighted)
/// and each rating's share of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rating {
    /// The score.
    pub value: f64,
    /// Σ p(s) over the ratings (probability-weighted), or the share of
    /// sampled answers that parsed to a rating in range.
    pub mass: f64,
    /// The prompt's tokens.
    pub tokens: usize,
    /// Tokens the model ran for this rating: the prompt's that were not in
    /// its prefix cache, and any answers'.
    pub decoded: usize,
    /// p(s) / Σ p(s) for each rating s in order (probability-weighted), or the share
    /// of sampled answers giving s.
    pub shares: Vec<f64>,
}

/// Probability-weighted ratings of each input (token ids within the
/// model's limit) on the scale `ratings` (G-Eval's `1..=top`; single
/// digits, one token each). Inputs run one by one in order, each
/// reading only what follows the start it shares with the one before
/// ([`Plm::next_token_logits`]): a judge's instructions and article are
/// read once per article, and once while a summary is typed.
pub async fn weighted(
    plm: &Plm,
    inputs: &[Vec<u32>],
    ratings: std::ops::RangeInclusive<u32>,
) -> Result<Vec<Rating>, ModelError> {
    require_causal(plm)?;
    let low = *ratings.start();
    let candidates: Vec<Vec<u32>> = ratings
        .map(|s| rating_tokens(plm, s))
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(inputs.len());
    for ids in inputs {
        // This pass's own count: other passes may run between its awaits.
        let (row, reused) = plm.next_token_logits(ids).await?;
        let decoded = ids.len() - reused;
        let lp = crate::models::generate::log_softmax(&row);
        let p: Vec<f64> = candidates
            .iter()
            .map(|ids| ids.iter().map(|&t| lp[t as usize].exp()).sum())
            .collect();
        let mass: f64 = p.iter().sum();
        if !(mass > 0.0 && mass.is_finite()) {
            return Err(ModelError::Input(format!(
                "{} puts no probability on any rating (every rating token's is below \
                 1e-320): no expected rating exists",
                plm.name
            )));
        }
        let value = p
            .iter()
            .enumerate()
            .map(|(k, q)| (low as usize + k) as f64 * q)
            .sum::<f64>()
            / mass;
        out.push(Rating {
            value,
            mass,
            tokens: ids.len(),
            decoded,
            shares: p.iter().map(|q| q / mass).collect(),
        });
    }
    Ok(out)
}

/// Sampled ratings: the mean of `n` answers of each input drawn at
/// `temperature` (answer k from `seed + k`), read by [`parse_output`].
pub async fn sampled(
    plm: &Plm,
    inputs: &[Vec<u32>],
    top: u32,
    n: usize,
    temperature: f64,
    seed: u64,
) -> Result<Vec<Rating>, ModelError> {
    let mut out = Vec::with_capacity(inputs.len());
    for ids in inputs {
        let mut decoded = 0;
        let mut answers = Vec::with_capacity(n);
        for k in 0..n {
            let sampling = Decoding::Sample(Sampling {
                temperature,
                top_k: 0,
                top_p: 1.0,
                seed: seed.wrapping_add(k as u64),
            });
            let said = answer(plm, ids, SAMPLE_TOKENS, sampling).await?;
            decoded += said.decoded;
            answers.push(parse_output(&said.text));
        }
        let value = answers.iter().sum::<f64>() / n as f64;
        let share =
            |s: u32| answers.iter().filter(|&&a| a == f64::from(s)).count() as f64 / n as f64;
        let shares: Vec<f64> = (1..=top).map(share).collect();
        out.push(Rating {
            value,
            mass: shares.iter().sum(),
            tokens: ids.len(),
            decoded,
            shares,
        });
    }
    Ok(out)
}

/// G-Eval's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GEvalOptions {
    /// # Model
    ///
    /// The judge (an instruction-tuned causal LM); unset: the registry's
    /// default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Dimension
    ///
    /// The SummEval dimension asked: coherence, consistency, relevance (1-5)
    /// or fluency (1-3).
    pub dimension: Dimension,
    /// # Samples
    ///
    /// 0: the probability-weighted rating (deterministic); n: the mean of n
    /// sampled answers (the paper's GPT-4 runs used 20).
    #[schemars(range(max = 100))]
    pub samples: usize,
    /// # Temperature
    ///
    /// Of the sampled answers (gpt4_eval.py: 2).
    #[schemars(range(min = 0.01, max = 10.0))]
    pub temperature: f64,
    /// # Seed
    ///
    /// Of the first sampled answer (answer k draws from seed + k).
    pub seed: u64,
    /// # Role
    ///
    /// The message the prompt is sent as: system (gpt4_eval.py) or user.
    pub role: Role,
    /// # Chat template
    ///
    /// Send the prompt through the model's chat template (when it has one);
    /// off: the plain text.
    pub chat: bool,
}

impl Default for GEvalOptions {
    fn default() -> Self {
        Self {
            model: None,
            dimension: Dimension::Coherence,
            samples: 0,
            temperature: 2.0,
            seed: 0,
            role: Role::System,
            chat: true,
        }
    }
}

/// G-Eval's registry entry.
pub struct GEvalMetric;

const fn column(name: &'static str, description: &'static str, needs_source: bool) -> About {
    About {
        name,
        description,
        higher_is_better: true,
        needs_reference: false,
        needs_source,
        reads: if needs_source {
            "hypothesis + source"
        } else {
            "hypothesis"
        },
        scale: if needs_source {
            Scale::RATING5
        } else {
            Scale::RATING3
        },
    }
}

impl MetricModule for GEvalMetric {
    type Options = GEvalOptions;
    const KIND: KindAbout = KindAbout {
        name: "G-Eval",
        about: "An LLM judge asked G-Eval's SummEval questions: the dimension's instructions, \
                the source article and the summary, then \"- Coherence:\". The score is the \
                rating the model expects, Σ s·p(s) over the ratings' tokens (1-5; fluency \
                1-3), or the mean of sampled answers. Higher is better. The question travels \
                in the same input as the text, so a text can answer it.",
        reference: "nlpyang/geval (prompts/summeval, gpt4_eval.py)",
        truncated: "the prompt was longer than the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::ChatLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[
        column(
            "G-Eval coherence",
            "G-Eval coherence (1-5): the judge's expected rating of the summary's structure, given the source",
            true,
        ),
        column(
            "G-Eval consistency",
            "G-Eval consistency (1-5): the judge's expected rating of the summary's factual alignment with the source",
            true,
        ),
        column(
            "G-Eval fluency",
            "G-Eval fluency (1-3): the judge's expected rating of the summary's grammar and wording",
            false,
        ),
        column(
            "G-Eval relevance",
            "G-Eval relevance (1-5): the judge's expected rating of the summary's choice of important content from the source",
            true,
        ),
    ];
    const COLUMN_OPTION: Option<&'static str> = Some("dimension");

    fn column(o: &GEvalOptions) -> usize {
        o.dimension as usize
    }

    fn with_column(o: GEvalOptions, column: usize) -> GEvalOptions {
        GEvalOptions {
            dimension: Dimension::ALL.get(column).copied().unwrap_or_default(),
            ..o
        }
    }
}

/// The signature of a G-Eval column.
pub fn signature(o: &GEvalOptions, model: &str, chat: bool, precision: &str) -> Signature {
    let s = Signature::new("g-eval")
        .with("model", model)
        .with("dimension", o.dimension)
        .with("prompt", "detailed")
        .with(
            "input",
            if chat {
                format!("chat-{}", o.role)
            } else {
                "plain".into()
            },
        );
    let s = if o.samples == 0 {
        s.with("score", "weighted")
    } else {
        s.with("score", format!("mean-of-{}", o.samples))
            .with("t", o.temperature)
            .with("seed", o.seed)
    };
    s.with("conventions", CONVENTIONS)
        .with("precision", precision)
        .versioned()
}

impl ModelModule for GEvalMetric {
    fn model_name(o: &GEvalOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&GEvalOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        super::registry::each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::GEval, o.model.as_deref())?;
            let spec = MetricSpec::GEval(o.clone());
            let id = spec.id();
            if o.samples > 0 && !(o.temperature.is_finite() && o.temperature > 0.0) {
                return Err(EngineError::Input {
                    metric: id,
                    message: format!("temperature must be above 0 (got {})", o.temperature),
                });
            }
            let mut inputs = Vec::with_capacity(segments.len());
            let mut chat = false;
            for (i, s) in segments.iter().enumerate() {
                let document = match (o.dimension.reads_source(), s.src) {
                    (true, Some(src)) => src,
                    (true, None) => {
                        return Err(EngineError::Input {
                            metric: id,
                            message: format!(
                                "segment {} has no source: G-Eval's {} reads the article \
                                 (fill in the source)",
                                i + 1,
                                o.dimension
                            ),
                        });
                    }
                    (false, _) => "",
                };
                let text = prompt(o.dimension, document, s.hyp);
                let (ids, truncated, templated) =
                    judge_input(&plm, &text, o.role, o.chat).map_err(model_error(&plm))?;
                if truncated {
                    // A cut prompt would lose the question at its end.
                    return Err(EngineError::Input {
                        metric: id,
                        message: format!(
                            "segment {}'s prompt is longer than {}'s limit of {} tokens",
                            i + 1,
                            plm.name,
                            plm.config.max_tokens()
                        ),
                    });
                }
                chat = templated;
                inputs.push(ids);
            }
            let top = o.dimension.top();
            let ratings = if o.samples == 0 {
                weighted(&plm, &inputs, 1..=top).await
            } else {
                sampled(&plm, &inputs, top, o.samples, o.temperature, o.seed).await
            }
            .map_err(model_error(&plm))?;
            let sig = signature(o, &plm.name, chat, &plm.precision_label());
            let scores = ratings
                .iter()
                .map(|r| {
                    let mut parts: Vec<ScorePart> = r
                        .shares
                        .iter()
                        .enumerate()
                        .map(|(k, &q)| part_of(RATING_PARTS[k], q))
                        .collect();
                    parts.push(part_of("mass", r.mass));
                    parts.extend(cost_parts(r.tokens, r.decoded));
                    parts.push(truncated_part(false));
                    Score {
                        metric: id.as_str(),
                        value: r.value,
                        parts,
                        signature: sig.to_string(),
                    }
                })
                .collect();
            Ok(Column::new(spec, scores, sig))
        })
        .await
    }
}

/// A judge's answer to a prompt.
pub struct Answer {
    /// Its text (special tokens left out).
    pub text: String,
    /// The model ended it, not the length limit.
    pub ended: bool,
    /// Tokens the model ran for it (the generation's `decoded`).
    pub decoded: usize,
}

/// The judge's [`Answer`] to `input` (token ids) decoded as `decoding` (at
/// most `max_new_tokens`).
pub async fn answer(
    plm: &Plm,
    input: &[u32],
    max_new_tokens: usize,
    decoding: Decoding,
) -> Result<Answer, ModelError> {
    require_causal(plm)?;
    let options = GenerateOptions {
        max_new_tokens,
        decoding,
        ..GenerateOptions::default()
    };
    let out = plm
        .generate_ids(input, &options, async |_| {
            std::ops::ControlFlow::Continue(())
        })
        .await?;
    Ok(Answer {
        text: plm.tokenizer.decode_text(&out.tokens)?,
        ended: out.end == crate::models::generate::End::Eos,
        decoded: out.decoded,
    })
}

/// What a judge's score cost: `tokens`, the prompt's (both prompts' for a
/// pairwise judge), and `decoded`, the tokens the model ran for it (what
/// its prefix cache did not hold, and the answers).
pub fn cost_parts(tokens: usize, decoded: usize) -> [ScorePart; 2] {
    [
        part_of("tokens", tokens as f64),
        part_of("decoded", decoded as f64),
    ]
}

/// The parts naming each rating's share.
const RATING_PARTS: [&str; 5] = ["p1", "p2", "p3", "p4", "p5"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_output_reads_the_leading_number_as_the_released_code() {
        assert_eq!(parse_output("4"), 4.0);
        assert_eq!(parse_output(" 3.5 because"), 3.5);
        assert_eq!(parse_output("  4"), 0.0);
        assert_eq!(parse_output("Score: 4"), 0.0);
        assert_eq!(parse_output("4.5.1"), 0.0);
        assert_eq!(parse_output("."), 0.0);
        assert_eq!(parse_output("5."), 5.0);
        assert_eq!(parse_output(""), 0.0);
    }

    #[test]
    fn prompts_are_the_released_files_with_python_line_ends() {
        for d in Dimension::ALL {
            let p = d.prompt();
            assert!(!p.contains('\r'), "{d}");
            assert!(p.contains("{{Summary}}"), "{d}");
            assert_eq!(p.contains("{{Document}}"), d.reads_source(), "{d}");
        }
        assert!(Dimension::Coherence.prompt().ends_with("- Coherence:"));
        assert!(Dimension::Fluency.prompt().ends_with("- Fluency (1-3):"));
        let p = prompt(Dimension::Relevance, "DOC", "SUM");
        assert!(p.contains("Source Text:\n\nDOC\n") && p.contains("Summary:\n\nSUM\n"));
    }
}
