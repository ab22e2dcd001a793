//! The self-evaluation test ([BS] §5.4, SPEC 2.3): does a language model,
//! used as an evaluator, prefer the texts it generated itself?
//!
//! Every model generates a text from every input (the first words of a
//! paragraph), then every model scores every model's texts: its perplexity
//! of the text given the input (lower is better), averaged over the inputs.
//! That is the evaluator x generator matrix. As the paper runs it:
//! - causal LMs (the GPT-2 family) continue the input, by top-k sampling
//!   (k = 50) from a seeded stream; the perplexity is of the tokens that
//!   begin after the input (GPT-PPL given the prompt);
//! - encoder-decoders (BART, T5) write from the input as their source, by
//!   beam search (5 beams); the perplexity is exp(-BARTScore) of the text
//!   given the source (BARTScore's mean log-likelihood).
//!
//! A run's models are all of one kind.
//!
//! With instruction models and `evaluation: g-eval`, the same test asks the
//! LLM-judge question (self-preference, as Panickssery et al. 2024 set it
//! up for summaries): every model summarises every paragraph (one user
//! message through its chat template, greedy), then every model rates every
//! summary with G-Eval's prompt for a dimension (its probability-weighted
//! 1-5 rating, [`crate::metrics::geval`]); higher is better.
//!
//! The bias, as the paper states it: an evaluator ranks its own generator's
//! texts above those of a larger generator while an independent judge (a
//! third model: by default the largest that is neither) ranks them the other
//! way. Each such pair (evaluator, a larger generator) is a finding; the test
//! fails when any finding shows the bias.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::metrics::geval::{self, Dimension, Role};
use crate::metrics::spec::named_enum;
use crate::metrics::{bartscore, perplexity};
use crate::models::generate::{Decoding, GenerateOptions, Sampling};
use crate::models::{Head, ModelError, Plm};

/// How the evaluators score the texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Evaluation {
    /// Perplexity given the input ([BS] §5.4).
    #[default]
    Perplexity,
    /// G-Eval's probability-weighted rating of a summary of the input.
    GEval,
}

named_enum!(
    Evaluation,
    "self-evaluation measure",
    [
        (
            Perplexity,
            "perplexity",
            "perplexity given the prompt ([BS] §5.4)"
        ),
        (
            GEval,
            "g-eval",
            "instruction models summarise, and rate summaries with G-Eval"
        )
    ]
);

/// The request each instruction model answers with a summary (one user
/// message; `{document}` is the paragraph).
pub const SUMMARY_REQUEST: &str =
    "Summarize the following article in one or two sentences.\n\nArticle: {document}\n\nSummary:";

/// How the texts are made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelfEvalOptions {
    /// Words of each paragraph that make its prompt.
    pub prompt_words: usize,
    /// Tokens each generator writes at most per prompt.
    pub max_new_tokens: usize,
    /// Sampling among the k most likely tokens ([BS]: 50).
    pub top_k: usize,
    /// Seed of the first prompt's stream (prompt `i` draws from `seed + i`).
    pub seed: u64,
    /// Beams of an encoder-decoder's search ([BS]: 5).
    pub beams: usize,
    /// What the evaluators measure.
    pub evaluation: Evaluation,
    /// The G-Eval dimension rated (`evaluation: g-eval`).
    pub dimension: Dimension,
}

impl Default for SelfEvalOptions {
    fn default() -> Self {
        Self {
            prompt_words: 20,
            max_new_tokens: 40,
            top_k: 50,
            seed: 0,
            beams: 5,
            evaluation: Evaluation::Perplexity,
            dimension: Dimension::Coherence,
        }
    }
}

/// A model in the test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Its name (a folder's name, a hub id).
    pub name: String,
    /// Its parameter count (which generator is larger).
    pub parameters: usize,
}

/// One generated text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedText {
    /// Index of the generator.
    pub generator: usize,
    /// Index of the prompt.
    pub prompt: usize,
    /// The continuation, as text.
    pub continuation: String,
}

/// An evaluator, its own generator and a larger one, as the evaluator and
/// the judge rank them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The evaluator (an index into the models).
    pub evaluator: usize,
    /// The larger generator compared with the evaluator's own texts.
    pub larger: usize,
    /// The judge.
    pub judge: usize,
    /// The evaluator scores its own texts better (a lower perplexity, a
    /// higher rating).
    pub evaluator_prefers_own: bool,
    /// The judge scores the larger generator's texts better.
    pub judge_prefers_larger: bool,
    /// Both: the evaluator prefers itself against the judge.
    pub biased: bool,
}

/// The test's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfEvalReport {
    /// The models, each a generator and an evaluator.
    pub models: Vec<ModelInfo>,
    /// The prompts.
    pub prompts: Vec<String>,
    /// What the matrix holds, as a caption's start ("Perplexity of each
    /// generator's continuations (top-k sampling, k = 50) under each
    /// evaluator").
    pub measure: String,
    /// Whether a larger value in the matrix is better (ratings) or a
    /// smaller one (perplexities).
    pub higher_is_better: bool,
    /// `matrix[evaluator][generator]`: the mean over prompts of the
    /// evaluator's score of the generator's texts; `None` where no text had
    /// a token to score.
    pub matrix: Vec<Vec<Option<f64>>>,
    /// Every pair an evaluator and a larger generator make.
    pub findings: Vec<Finding>,
    /// Whether any finding shows the bias.
    pub biased: bool,
    /// Every generated text.
    pub texts: Vec<GeneratedText>,
    /// What was run.
    pub options: SelfEvalOptions,
}

/// The inputs of a run on `paragraphs`: for perplexity, [`prompts`]; for
/// G-Eval, the paragraphs themselves (trimmed, the empty ones left out).
pub fn inputs<'a>(
    paragraphs: impl IntoIterator<Item = &'a str>,
    options: &SelfEvalOptions,
) -> Vec<String> {
    match options.evaluation {
        Evaluation::Perplexity => prompts(paragraphs, options.prompt_words),
        Evaluation::GEval => paragraphs
            .into_iter()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
    }
}

/// The prompts of `paragraphs`: each one's first `words` words, for the
/// paragraphs with more words than that (there is something to continue).
pub fn prompts<'a>(paragraphs: impl IntoIterator<Item = &'a str>, words: usize) -> Vec<String> {
    paragraphs
        .into_iter()
        .filter_map(|p| {
            let all: Vec<&str> = p.split_whitespace().collect();
            (words > 0 && all.len() > words).then(|| all[..words].join(" "))
        })
        .collect()
}

/// Perplexity of each `continuation` given its `prompt` under `plm`. A
/// causal LM reads `prompt + continuation` whole and the tokens that begin
/// after the prompt are scored; an encoder-decoder reads the prompt as its
/// source and the continuation is its target (exp(-BARTScore)). `None`
/// where no token is scored.
pub async fn conditional_perplexity(
    plm: &Plm,
    pairs: &[(&str, &str)],
) -> Result<Vec<Option<f64>>, ModelError> {
    if plm.config.head == Head::Seq2SeqLm {
        let scored = bartscore::score(plm, pairs).await?;
        return Ok(scored.iter().map(|s| Some((-s.score).exp())).collect());
    }
    let texts: Vec<String> = pairs.iter().map(|(p, c)| format!("{p}{c}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let scored = perplexity::causal(plm, &refs, false).await?;
    Ok(scored
        .iter()
        .zip(pairs)
        .map(|(s, (prompt, _))| {
            let after: Vec<f64> = s
                .tokens
                .iter()
                .zip(&s.surprisal)
                .filter(|(t, _)| t.span.start >= prompt.len())
                .filter_map(|(_, x)| *x)
                .collect();
            (!after.is_empty()).then(|| (after.iter().sum::<f64>() / after.len() as f64).exp())
        })
        .collect())
}

/// Whether every model is an encoder-decoder (`Some(true)`), every one a
/// causal LM (`Some(false)`), or the models mix kinds or cannot generate.
fn kind(models: &[(&str, &Plm)]) -> Result<bool, ModelError> {
    let seq2seq = |p: &Plm| p.config.head == Head::Seq2SeqLm;
    let causal = |p: &Plm| p.config.head == Head::CausalLm;
    if models.iter().all(|(_, p)| seq2seq(p)) {
        Ok(true)
    } else if models.iter().all(|(_, p)| causal(p)) {
        Ok(false)
    } else {
        let odd = models
            .iter()
            .find(|(_, p)| !seq2seq(p) && !causal(p))
            .map(|(n, p)| format!("{n} ({}) generates no text", p.config.architecture));
        Err(ModelError::Input(odd.unwrap_or_else(|| {
            "the models mix causal LMs and encoder-decoders: the test compares models \
             that read and write the same way"
                .into()
        })))
    }
}

/// Runs the test: every model generates, every model evaluates. `judge`
/// names the independent judge (default: per pair, the largest model that
/// is neither of the two). `progress(done, total)` after each generated text and each
/// evaluator's pass; `Break` stops with an error.
pub async fn run(
    models: &[(&str, &Plm)],
    prompts: Vec<String>,
    options: &SelfEvalOptions,
    judge: Option<&str>,
    mut progress: impl AsyncFnMut(usize, usize) -> ControlFlow<()>,
) -> Result<SelfEvalReport, ModelError> {
    if models.len() < 2 {
        return Err(ModelError::Input(
            "the self-evaluation test needs at least two models".into(),
        ));
    }
    if prompts.is_empty() {
        return Err(ModelError::Input(match options.evaluation {
            Evaluation::Perplexity => format!(
                "no paragraph has more than {} words to make a prompt of",
                options.prompt_words
            ),
            Evaluation::GEval => "no paragraph to summarise".into(),
        }));
    }
    let judge = match judge {
        Some(name) => Some(models.iter().position(|(n, _)| *n == name).ok_or_else(|| {
            ModelError::Input(format!("the judge `{name}` is not one of the models"))
        })?),
        None => None,
    };
    let seq2seq = kind(models)?;
    let rating = options.evaluation == Evaluation::GEval;
    if rating {
        if seq2seq {
            return Err(ModelError::Input(
                "G-Eval's self-preference test asks instruction models (causal LMs with a \
                 chat template), not encoder-decoders"
                    .into(),
            ));
        }
        for (name, plm) in models {
            if geval::chat_template(plm)?.is_none() {
                return Err(ModelError::Input(format!(
                    "{name} has no chat template: G-Eval's self-preference test asks \
                     instruction models for summaries"
                )));
            }
        }
    }
    let generate = GenerateOptions {
        max_new_tokens: options.max_new_tokens,
        decoding: if rating {
            Decoding::Greedy
        } else if seq2seq {
            Decoding::Beam {
                beams: options.beams,
                length_penalty: 1.0,
            }
        } else {
            Decoding::Sample(Sampling {
                top_k: options.top_k,
                ..Sampling::default()
            })
        },
        stop_at_eos: true,
        ..GenerateOptions::default()
    };
    generate.validate()?;
    let total = models.len() * prompts.len() + models.len();
    let mut done = 0;
    let mut texts = Vec::with_capacity(models.len() * prompts.len());
    for (g, (name, plm)) in models.iter().enumerate() {
        for (p, prompt) in prompts.iter().enumerate() {
            let continuation = if rating {
                let ids = summary_request(name, plm, prompt)?;
                let out = plm
                    .generate_ids(&ids, &generate, async |_| ControlFlow::Continue(()))
                    .await?;
                plm.tokenizer.decode_text(&out.tokens)?.trim().to_owned()
            } else {
                let seeded = seeded(&generate, options.seed, p);
                plm.generate(prompt, &seeded, async |_| ControlFlow::Continue(()))
                    .await?
                    .text
            };
            texts.push(GeneratedText {
                generator: g,
                prompt: p,
                continuation,
            });
            done += 1;
            if progress(done, total).await.is_break() {
                return Err(ModelError::Input("stopped".into()));
            }
        }
    }
    let mut matrix = Vec::with_capacity(models.len());
    for (name, plm) in models {
        let scored = if rating {
            rate_summaries(name, plm, &prompts, &texts, options.dimension).await?
        } else {
            let pairs: Vec<(&str, &str)> = texts
                .iter()
                .map(|t| (prompts[t.prompt].as_str(), t.continuation.as_str()))
                .collect();
            conditional_perplexity(plm, &pairs).await?
        };
        let row = (0..models.len())
            .map(|g| {
                let values: Vec<f64> = texts
                    .iter()
                    .zip(&scored)
                    .filter(|(t, _)| t.generator == g)
                    .filter_map(|(_, s)| *s)
                    .collect();
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
            })
            .collect();
        matrix.push(row);
        done += 1;
        if progress(done, total).await.is_break() {
            return Err(ModelError::Input("stopped".into()));
        }
    }
    let measure = match (options.evaluation, seq2seq) {
        (Evaluation::GEval, _) => format!(
            "G-Eval {} (1–{}, probability-weighted) each evaluator gives each generator's \
             summaries (greedy, at most {} tokens)",
            options.dimension,
            options.dimension.top(),
            options.max_new_tokens
        ),
        (Evaluation::Perplexity, true) => format!(
            "Perplexity of each generator's texts (beam search, {} beams) under each evaluator, \
             exp(−BARTScore) given the prompt",
            options.beams
        ),
        (Evaluation::Perplexity, false) => format!(
            "Perplexity of each generator's continuations (top-k sampling, k = {}) under each \
             evaluator",
            options.top_k
        ),
    };
    let infos: Vec<ModelInfo> = models
        .iter()
        .map(|(name, plm)| ModelInfo {
            name: (*name).to_owned(),
            parameters: plm.parameters(),
        })
        .collect();
    let findings = findings(&infos, &matrix, rating, judge);
    Ok(SelfEvalReport {
        biased: findings.iter().any(|f| f.biased),
        models: infos,
        prompts,
        measure,
        higher_is_better: rating,
        matrix,
        findings,
        texts,
        options: options.clone(),
    })
}

/// The summary request for `document`, as `plm`'s chat template renders
/// one user message, in token ids.
pub fn summary_request(name: &str, plm: &Plm, document: &str) -> Result<Vec<u32>, ModelError> {
    let template = geval::chat_template(plm)?
        .ok_or_else(|| ModelError::Input(format!("{name} has no chat template")))?;
    let request = SUMMARY_REQUEST.replace("{document}", document);
    let messages = serde_json::json!([{"role": "user", "content": request}]);
    let (ids, truncated) = geval::encode_chat(plm, template, &messages)?;
    if truncated {
        return Err(ModelError::Input(format!(
            "a paragraph's summary request is longer than {name}'s limit of {} tokens",
            plm.config.max_tokens()
        )));
    }
    Ok(ids)
}

/// `plm`'s G-Eval rating of each text (a summary of its prompt), in the
/// texts' order. They are read paragraph by paragraph, so the instructions
/// and the paragraph come from the prefix cache for every summary after
/// the first.
async fn rate_summaries(
    name: &str,
    plm: &Plm,
    documents: &[String],
    texts: &[GeneratedText],
    dimension: Dimension,
) -> Result<Vec<Option<f64>>, ModelError> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| (texts[i].prompt, texts[i].generator));
    let mut inputs = Vec::with_capacity(texts.len());
    for &i in &order {
        let t = &texts[i];
        let text = geval::prompt(dimension, &documents[t.prompt], &t.continuation);
        let (ids, truncated, _) = geval::judge_input(plm, &text, Role::System, true)?;
        if truncated {
            return Err(ModelError::Input(format!(
                "a G-Eval prompt is longer than {name}'s limit of {} tokens: use shorter \
                 paragraphs",
                plm.config.max_tokens()
            )));
        }
        inputs.push(ids);
    }
    let ratings = geval::weighted(plm, &inputs, 1..=dimension.top()).await?;
    let mut out = vec![None; texts.len()];
    for (&i, r) in order.iter().zip(ratings) {
        out[i] = Some(r.value);
    }
    Ok(out)
}

/// `options` with prompt `p`'s seed.
fn seeded(options: &GenerateOptions, base: u64, p: usize) -> GenerateOptions {
    let mut out = options.clone();
    if let Decoding::Sample(s) = &mut out.decoding {
        s.seed = base.wrapping_add(p as u64);
    }
    out
}

/// Every (evaluator, larger generator) pair, ranked by the evaluator and
/// an independent judge: `judge` where given, else the model with the most
/// parameters; never the evaluator or the larger generator (a pair without
/// such a judge has no finding: the test needs three models). `matrix` is
/// evaluator by generator; `higher_is_better` says which way it ranks.
pub fn findings(
    models: &[ModelInfo],
    matrix: &[Vec<Option<f64>>],
    higher_is_better: bool,
    judge: Option<usize>,
) -> Vec<Finding> {
    let better = |a: f64, b: f64| if higher_is_better { a > b } else { a < b };
    let mut out = Vec::new();
    for e in 0..models.len() {
        for g in 0..models.len() {
            if g == e || models[g].parameters <= models[e].parameters {
                continue;
            }
            let independent = |j: &usize| *j != e && *j != g;
            let judge = match judge {
                Some(j) => Some(j).filter(independent),
                None => (0..models.len())
                    .filter(independent)
                    .max_by_key(|&j| (models[j].parameters, std::cmp::Reverse(j))),
            };
            let Some(j) = judge else { continue };
            let (Some(own), Some(larger)) = (matrix[e][e], matrix[e][g]) else {
                continue;
            };
            let (Some(j_own), Some(j_larger)) = (matrix[j][e], matrix[j][g]) else {
                continue;
            };
            let evaluator_prefers_own = better(own, larger);
            let judge_prefers_larger = better(j_larger, j_own);
            out.push(Finding {
                evaluator: e,
                larger: g,
                judge: j,
                evaluator_prefers_own,
                judge_prefers_larger,
                biased: evaluator_prefers_own && judge_prefers_larger,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_take_the_first_words_of_longer_paragraphs() {
        let got = prompts(["one two three four", "one two", "  a  b c d e "], 3);
        assert_eq!(got, ["one two three", "a b c"]);
        assert!(prompts(["a b"], 0).is_empty());
    }

    #[test]
    fn a_finding_needs_the_evaluator_and_the_judge_to_disagree() {
        let m = |name: &str, parameters| ModelInfo {
            name: name.into(),
            parameters,
        };
        let models = [m("small", 10), m("medium", 20), m("large", 30)];
        // Rows: evaluators; columns: generators.
        let ppl = vec![
            vec![Some(5.0), Some(9.0), Some(6.0)],
            vec![Some(8.0), Some(7.0), Some(7.5)],
            vec![Some(9.0), Some(6.0), Some(4.0)],
        ];
        let f = findings(&models, &ppl, false, None);
        // small vs medium (judge: large), small vs large (judge: medium),
        // medium vs large (judge: small); large has none larger.
        let pairs: Vec<(usize, usize, usize)> =
            f.iter().map(|f| (f.evaluator, f.larger, f.judge)).collect();
        assert_eq!(pairs, [(0, 1, 2), (0, 2, 1), (1, 2, 0)]);
        // small prefers itself to medium (5 < 9), large prefers medium (6 < 9).
        assert!(f[0].evaluator_prefers_own && f[0].judge_prefers_larger && f[0].biased);
        // small prefers itself to large (5 < 6), medium prefers large (7.5 < 8).
        assert!(f[1].biased);
        // medium prefers itself to large (7 < 7.5), small prefers large (6 < 9).
        assert!(f[2].evaluator_prefers_own && f[2].judge_prefers_larger && f[2].biased);
        let fair = vec![
            vec![Some(9.0), Some(6.0), Some(5.0)],
            vec![Some(9.0), Some(7.0), Some(6.0)],
            vec![Some(9.0), Some(6.0), Some(4.0)],
        ];
        assert!(
            findings(&models, &fair, false, None)
                .iter()
                .all(|f| !f.biased)
        );
        // Ratings rank the other way: the same numbers as ratings are fair
        // where they were biased.
        let as_ratings = findings(&models, &ppl, true, None);
        assert!(!as_ratings[0].evaluator_prefers_own && !as_ratings[0].biased);
        // A named judge serves only where it is independent; two models give none.
        let f = findings(&models, &ppl, false, Some(2));
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].evaluator, f[0].larger, f[0].judge), (0, 1, 2));
        assert!(findings(&models[..2], &ppl, false, None).is_empty());
    }
}
