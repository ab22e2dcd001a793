//! A pairwise LLM judge, as AlpacaEval 2's weighted judge asks and reads
//! (github tatsu-lab/alpaca_eval: `evaluators_configs/
//! alpaca_eval_clf_gpt4_turbo/alpaca_eval_clf.txt`,
//! `weighted_alpaca_eval_gpt4_turbo/configs.yaml`,
//! `completion_parsers.py`'s `logprob_parser`, `utils.py`'s `make_prompts`
//! and `prompt_to_chatml`): given an instruction and two outputs,
//! identified `m` and `M`, which is best?
//!
//! Here the instruction is the source, the outputs are the hypothesis and
//! the reference, and the judge answers both orders: the hypothesis as `m`
//! (output 1), then as `M`. In each, P(first is best) = p(m) / (p(m) +
//! p(M)) from the next-token distribution after the prompt (the weighted
//! judge's `is_binarize: false`). The score is the probability that the
//! hypothesis is preferred, the mean of the two orders: 0 to 1, 0.5 a tie.
//! Parts: each order's probability, the position bias (hypothesis first
//! minus hypothesis second: what the order alone changes) and whether the
//! two orders agree on the winner (position consistency).
//!
//! The prompt is filled as `make_prompts` fills it (each placeholder's
//! first occurrence, in the template's order: a value containing a later
//! placeholder's name gets it), then cut into messages as
//! `prompt_to_chatml` cuts it (a system and a user message, each stripped),
//! rendered by the model's chat template with the generation prompt.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Engine, EngineError, model_error, part_of, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::{
    CorpusAggregation, MetricError, MetricSpec, ModelKind, ModelSlot, Scale, Score, Segment,
    Signature,
};
use crate::models::{ModelError, Plm};

/// The implementation whose prompt and reading are reproduced.
pub const CONVENTIONS: &str = "alpaca-eval-weighted";

/// AlpacaEval's `alpaca_eval_clf.txt` (ChatML in text).
pub const TEMPLATE: &str = include_str!("prompts/alpaca_eval/alpaca_eval_clf.txt");

/// The prompt with `instruction`, `output_1` and `output_2` filled in as
/// `make_prompts` fills them.
pub fn fill(instruction: &str, output_1: &str, output_2: &str) -> String {
    let mut prompt = TEMPLATE.to_owned();
    for (name, value) in [
        ("{instruction}", instruction),
        ("{output_1}", output_1),
        ("{output_2}", output_2),
    ] {
        prompt = prompt.replacen(name, value, 1);
    }
    prompt
}

/// `prompt_to_chatml`: the text's `<|im_start|>role\ncontent<|im_end|>`
/// blocks as messages, role and content stripped.
pub fn chatml(prompt: &str) -> Result<serde_json::Value, ModelError> {
    let prompt = prompt.trim();
    if !prompt.starts_with("<|im_start|>") || !prompt.ends_with("<|im_end|>") {
        return Err(ModelError::Input(
            "the pairwise prompt is not ChatML (<|im_start|> ... <|im_end|>)".into(),
        ));
    }
    let messages: Vec<serde_json::Value> = prompt
        .split("<|im_start|>")
        .skip(1)
        .map(|block| {
            let (role, rest) = block.split_once('\n').unwrap_or((block, ""));
            let content = rest.split("<|im_end|>").next().unwrap_or_default();
            serde_json::json!({"role": role.trim(), "content": content.trim()})
        })
        .collect();
    Ok(serde_json::Value::Array(messages))
}

/// The single token of `text` in `plm`'s vocabulary.
fn single_token(plm: &Plm, text: &str) -> Result<u32, ModelError> {
    match plm.tokenizer.encode(text)?.as_slice() {
        [one] => Ok(one.id),
        _ => Err(ModelError::Unsupported(format!(
            "{}'s tokenizer has no single token for the identifier `{text}`",
            plm.name
        ))),
    }
}

/// The judge's input for one order, as token ids: the filled prompt's
/// messages through the chat template (required: the prompt is a chat).
pub fn input(
    plm: &Plm,
    instruction: &str,
    first: &str,
    second: &str,
) -> Result<(Vec<u32>, bool), ModelError> {
    let template = super::geval::chat_template(plm)?.ok_or_else(|| {
        ModelError::Unsupported(format!(
            "{} has no chat template (tokenizer_config.json's chat_template): the pairwise \
             judge sends a system and a user message",
            plm.name
        ))
    })?;
    super::geval::encode_chat(plm, template, &chatml(&fill(instruction, first, second))?)
}

/// P(output 1 is best) = p(m) / (p(m) + p(M)) after each input, and the
/// tokens the model ran for it (what its prefix cache did not hold).
pub async fn first_preferred(
    plm: &Plm,
    inputs: &[Vec<u32>],
) -> Result<Vec<(f64, usize)>, ModelError> {
    super::geval::require_causal(plm)?;
    let (m, big_m) = (single_token(plm, "m")?, single_token(plm, "M")?);
    let mut out = Vec::with_capacity(inputs.len());
    for ids in inputs {
        let (row, reused) = plm.next_token_logits(ids).await?;
        let lp = crate::models::generate::log_softmax(&row);
        let (a, b) = (lp[m as usize], lp[big_m as usize]);
        // exp(a) / (exp(a) + exp(b)), stable.
        out.push((1.0 / (1.0 + (b - a).exp()), ids.len() - reused));
    }
    Ok(out)
}

/// The pairwise judge's options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PairwiseOptions {
    /// # Model
    ///
    /// The judge (an instruction-tuned causal LM with a chat template);
    /// unset: the registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
}

/// The pairwise judge's registry entry.
pub struct PairwiseMetric;

impl MetricModule for PairwiseMetric {
    type Options = PairwiseOptions;
    const KIND: KindAbout = KindAbout {
        name: "Pairwise judge",
        about: "An LLM judge asked AlpacaEval 2's question: given the instruction (the source) \
                and two outputs, the hypothesis and the reference, which is best? It answers \
                with an identifier, m or M; the score is the probability it prefers the \
                hypothesis, p(m) / (p(m) + p(M)), averaged over both orders (0.5: a tie). \
                The parts show how much the order alone moves it (position bias) and whether \
                the two orders agree.",
        reference: "tatsu-lab/alpaca_eval (weighted_alpaca_eval_gpt4_turbo)",
        truncated: "the prompt was longer than the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::ChatLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        name: "Pairwise judge",
        description: "the probability an LLM judge prefers the hypothesis to the reference as an answer to the source, both orders averaged",
        higher_is_better: true,
        needs_reference: true,
        needs_source: true,
        reads: "hypothesis + reference + source",
        scale: Scale::UNIT,
    }];
}

/// The signature of the pairwise column.
pub fn signature(model: &str, precision: &str) -> Signature {
    Signature::new("pairwise")
        .with("model", model)
        .with("prompt", "alpaca_eval_clf")
        .with("orders", "both")
        .with("refs", "first")
        .with("conventions", CONVENTIONS)
        .with("precision", precision)
        .versioned()
}

impl ModelModule for PairwiseMetric {
    fn model_name(o: &PairwiseOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&PairwiseOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        super::registry::each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::Pairwise, o.model.as_deref())?;
            let spec = MetricSpec::Pairwise(o.clone());
            let id = spec.id();
            let mut inputs = Vec::with_capacity(2 * segments.len());
            for (i, s) in segments.iter().enumerate() {
                let instruction = s.src.ok_or_else(|| EngineError::Input {
                    metric: id,
                    message: format!(
                        "segment {} has no source: the pairwise judge reads it as the \
                         instruction (fill in the source)",
                        i + 1
                    ),
                })?;
                let reference = s.refs.first().ok_or(MetricError::MissingReference {
                    metric: id.as_str(),
                    segment: i + 1,
                })?;
                for (first, second) in [(s.hyp, *reference), (*reference, s.hyp)] {
                    let (ids, truncated) =
                        input(&plm, instruction, first, second).map_err(model_error(&plm))?;
                    if truncated {
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
                    inputs.push(ids);
                }
            }
            let p = first_preferred(&plm, &inputs)
                .await
                .map_err(model_error(&plm))?;
            let sig = signature(&plm.name, &plm.precision_label());
            let scores = p
                .chunks(2)
                .zip(inputs.chunks(2))
                .map(|(pair, prompts)| {
                    // The hypothesis first, then second (where output 1 is the reference).
                    let (first, second) = (pair[0].0, 1.0 - pair[1].0);
                    let tokens = prompts.iter().map(Vec::len).sum();
                    let [tokens, decoded] = super::geval::cost_parts(tokens, pair[0].1 + pair[1].1);
                    let consistent = (first > 0.5) == (second > 0.5);
                    Score {
                        metric: id.as_str(),
                        value: (first + second) / 2.0,
                        parts: vec![
                            part_of("hyp_first", first),
                            part_of("hyp_second", second),
                            part_of("position_bias", first - second),
                            part_of("consistent", f64::from(u8::from(consistent))),
                            tokens,
                            decoded,
                            truncated_part(false),
                        ],
                        signature: sig.to_string(),
                    }
                })
                .collect();
            Ok(Column::new(spec, scores, sig))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_fills_and_splits_as_alpaca_eval_does() {
        let p = fill("Say {output_1}", "A", "B");
        // make_prompts replaces the first occurrence, in order: the
        // instruction's `{output_1}` takes output 1's value.
        assert!(p.contains("\"instruction\": \"\"\"Say A\"\"\""), "{p}");
        assert!(p.contains("\"output\": \"\"\"{output_1}\"\"\""));
        let m = chatml(&fill("Q", "A", "B")).unwrap();
        let m = m.as_array().unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0]["role"], "system");
        assert!(
            m[0]["content"]
                .as_str()
                .unwrap()
                .starts_with("You are a highly efficient")
        );
        assert_eq!(m[1]["role"], "user");
        assert!(
            m[1]["content"]
                .as_str()
                .unwrap()
                .ends_with("## Best Model Identifier")
        );
        assert!(chatml("no chat").is_err());
    }
}
