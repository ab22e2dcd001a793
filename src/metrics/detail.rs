//! What a model-based score shows beyond its value: one variant per drawing
//! the page makes (BERTScore's heatmap, a perplexity's surprisal bar,
//! BARTScore's token bar, MoverScore's transport plan, MENLI's bars). Each
//! metric module builds its own variant when the engine is asked for details
//! ([`super::Engine::with_details`]).

use serde::Serialize;

use super::menli::{Direction, Formula, NliProbs, Premise};

/// What a model-based score shows beyond its value (the page draws it).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Detail {
    /// BERTScore's greedy alignment with the best reference.
    #[serde(rename_all = "camelCase")]
    Alignment {
        /// Index of the reference with the best F.
        best_reference: usize,
        /// Hypothesis tokens as text.
        hyp_tokens: Vec<String>,
        /// The best reference's tokens as text.
        ref_tokens: Vec<String>,
        /// Token weights (0 for special tokens; idf where on).
        hyp_weights: Vec<f32>,
        /// Reference token weights.
        ref_weights: Vec<f32>,
        /// `[hyp tokens, ref tokens]` cosine similarities, row-major.
        similarity: Vec<f32>,
        /// Each hypothesis token's best reference token.
        hyp_best: Vec<usize>,
        /// Each reference token's best hypothesis token.
        ref_best: Vec<usize>,
        /// The layer read.
        layer: usize,
        /// A text was cut to the model's limit.
        truncated: bool,
    },
    /// Per-token surprisal of a perplexity.
    Surprisal {
        /// Each token's text and surprisal in nats (None: not scored).
        tokens: Vec<(String, Option<f64>)>,
        /// Byte span of each token in the text (empty for added tokens).
        spans: Vec<(usize, usize)>,
        /// The text was cut to the model's limit.
        truncated: bool,
    },
    /// BARTScore's per-token log-likelihoods of the target text shown.
    TokenLogprobs {
        /// `hypothesis` or `reference`: the text scored given the other.
        target: &'static str,
        /// Each target token's text and log-probability in nats.
        tokens: Vec<(String, f64)>,
        /// Byte span of each token in the target (empty for `<s>`, `</s>`).
        spans: Vec<(usize, usize)>,
        /// A text was cut to the model's limit.
        truncated: bool,
    },
    /// MoverScore's transport plan.
    #[serde(rename_all = "camelCase")]
    Flow {
        /// Reference tokens as the tokenizer spells them.
        ref_tokens: Vec<String>,
        /// Hypothesis tokens.
        hyp_tokens: Vec<String>,
        /// Each reference token's mass (0: removed).
        ref_mass: Vec<f64>,
        /// Each hypothesis token's mass.
        hyp_mass: Vec<f64>,
        /// Mass moved, row-major `[ref tokens, hyp tokens]`.
        flow: Vec<f64>,
        /// A text was cut to the model's limit.
        truncated: bool,
    },
    /// MENLI's probabilities for the best premise.
    #[serde(rename_all = "camelCase")]
    Nli {
        /// Premise -> hypothesis.
        forward: NliProbs,
        /// Hypothesis -> premise.
        backward: NliProbs,
        /// Index of the reference that scored best.
        premise: usize,
        /// `reference` or `source`.
        premise_kind: Premise,
        /// The formula applied (the task's unless overridden).
        formula: Formula,
        /// The direction read (the task's unless overridden).
        direction: Direction,
    },
}
