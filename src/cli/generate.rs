//! `blindspot generate`: text from a causal language model (continuing a
//! prompt) or an encoder-decoder (from a source), greedy, sampled or by
//! beam search (`models::generate`).

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;

use blindspot::models::Precision;
use blindspot::models::generate::{Decoding, GenerateOptions, MAX_BEAMS, Sampling};

use super::CliError;
use super::models::{load_plm, model_error};

/// How tokens are chosen.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Method {
    /// The most likely token each step.
    Greedy,
    /// Drawn at random (temperature, top-k, top-p, seed).
    Sample,
    /// Beam search (beams, length penalty).
    Beam,
}

/// Arguments of `blindspot generate`.
#[derive(clap::Args)]
pub struct GenerateArgs {
    /// Checkpoint folder or prepared `.bpk` file of a causal language model (GPT-2), which
    /// continues each input, or an encoder-decoder (BART, T5), which reads it as its source.
    #[arg(long)]
    model: PathBuf,
    /// Weight precision: `f32`, `q8` (int8) or `q4` (4-bit levels, int8 storage).
    #[arg(long, default_value = "f32")]
    quant: Precision,
    /// Inputs (prompts, or sources for an encoder-decoder); without any, one per line of
    /// standard input.
    prompts: Vec<String>,
    /// Tokens to generate at most, per prompt.
    #[arg(long, default_value_t = GenerateOptions::default().max_new_tokens)]
    max_new_tokens: usize,
    /// How tokens are chosen.
    #[arg(long, value_enum, default_value_t = Method::Greedy)]
    decoding: Method,
    /// Sampling: logits are divided by this first.
    #[arg(long, default_value_t = Sampling::default().temperature)]
    temperature: f64,
    /// Sampling: draw among the k most likely tokens only (0: all).
    #[arg(long, default_value_t = Sampling::default().top_k)]
    top_k: usize,
    /// Sampling: draw among the most likely tokens whose probabilities sum to p (1: all).
    #[arg(long, default_value_t = Sampling::default().top_p)]
    top_p: f64,
    /// Sampling: seed of the random stream (each prompt starts from it).
    #[arg(long, default_value_t = Sampling::default().seed)]
    seed: u64,
    /// Beam search: hypotheses kept.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=MAX_BEAMS as u64))]
    beams: u64,
    /// Beam search: finished texts rank by log-probability / length^this.
    #[arg(long, default_value_t = 1.0)]
    length_penalty: f64,
    /// The end token cannot come before this many new tokens (transformers'
    /// `min_new_tokens`).
    #[arg(long, default_value_t = 0)]
    min_new_tokens: usize,
    /// No n-gram of this size repeats, the prompt included (transformers'
    /// `no_repeat_ngram_size`; 0: off).
    #[arg(long, default_value_t = 0)]
    no_repeat_ngram_size: usize,
    /// Go on past the model's end-of-sequence token.
    #[arg(long)]
    ignore_eos: bool,
    /// One JSON line per prompt (prompt, input_tokens, tokens, text, log_prob, end)
    /// instead of the text, written as it is generated.
    #[arg(long)]
    json: bool,
}

impl GenerateArgs {
    fn options(&self) -> GenerateOptions {
        let decoding = match self.decoding {
            Method::Greedy => Decoding::Greedy,
            Method::Sample => Decoding::Sample(Sampling {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                seed: self.seed,
            }),
            Method::Beam => Decoding::Beam {
                beams: self.beams as usize,
                length_penalty: self.length_penalty,
            },
        };
        GenerateOptions {
            max_new_tokens: self.max_new_tokens,
            decoding,
            stop_at_eos: !self.ignore_eos,
            min_new_tokens: self.min_new_tokens,
            no_repeat_ngram_size: self.no_repeat_ngram_size,
        }
    }
}

/// Continues each prompt: its text streamed to standard output (beam search
/// prints when done: its best text can change at every step), or a JSON line.
pub fn run_generate(args: &GenerateArgs) -> Result<(), CliError> {
    let options = args.options();
    options
        .validate()
        .map_err(|e| model_error(&args.model, e))?;
    let prompts = if args.prompts.is_empty() {
        super::input::read_lines("-")?
    } else {
        args.prompts.clone()
    };
    let plm = load_plm(&args.model, args.quant)?;
    let stream = !args.json && !matches!(options.decoding, Decoding::Beam { .. });
    let mut out = std::io::stdout().lock();
    for prompt in &prompts {
        let mut shown = String::new();
        let mut written: std::io::Result<()> = Ok(());
        let on_step = async |tokens: &[u32]| {
            if stream && written.is_ok() {
                // Byte-level tokens can end inside a character: wait for the rest.
                if let Ok(text) = plm.tokenizer.decode_text(tokens)
                    && !text.ends_with('\u{FFFD}')
                    && let Some(new) = text.strip_prefix(shown.as_str())
                {
                    written = write!(out, "{new}").and_then(|()| out.flush());
                    shown = text;
                }
            }
            ControlFlow::Continue(())
        };
        let continuation = futures::executor::block_on(plm.generate(prompt, &options, on_step))
            .map_err(|e| model_error(&args.model, e))?;
        written?;
        if args.json {
            let mut line = serde_json::to_value(&continuation).expect("a continuation is JSON");
            line["prompt"] = prompt.as_str().into();
            writeln!(out, "{line}")?;
        } else if stream {
            // What streaming could not show yet (a character cut at the end).
            let rest = continuation.text.strip_prefix(shown.as_str()).unwrap_or("");
            writeln!(out, "{rest}")?;
        } else {
            writeln!(out, "{}", continuation.text)?;
        }
    }
    Ok(())
}
