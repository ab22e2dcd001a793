//! `blindspot self-eval`: the self-evaluation test ([BS] §5.4) over causal
//! language models given as folders (`stress::self_eval`).

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;

use blindspot::models::Precision;
use blindspot::stress::self_eval::{self, SelfEvalOptions, SelfEvalReport};

use super::CliError;
use super::models::{load_plm, model_error};

/// Arguments of `blindspot self-eval`.
#[derive(clap::Args)]
pub struct SelfEvalArgs {
    /// Causal language models (GPT-2), or encoder-decoders (BART, T5), two or more, of one
    /// kind (checkpoint folders or prepared `.bpk` files): each generates and each evaluates.
    /// A model is named by its folder or file name.
    #[arg(long, num_args = 2.., required = true)]
    models: Vec<PathBuf>,
    /// Weight precision: `f32`, `q8` (int8) or `q4` (4-bit levels, int8 storage).
    #[arg(long, default_value = "f32")]
    quant: Precision,
    /// Paragraphs, one per line (WikiText's, for the paper's test): each gives a prompt.
    #[arg(long)]
    prompts: String,
    /// Paragraphs used at most (the first ones long enough).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Words of each paragraph that make its prompt.
    #[arg(long, default_value_t = SelfEvalOptions::default().prompt_words)]
    prompt_words: usize,
    /// Tokens each model writes at most per prompt.
    #[arg(long, default_value_t = SelfEvalOptions::default().max_new_tokens)]
    max_new_tokens: usize,
    /// Causal LMs: sampling among the k most likely tokens.
    #[arg(long, default_value_t = SelfEvalOptions::default().top_k)]
    top_k: usize,
    /// Encoder-decoders: beams of the search.
    #[arg(long, default_value_t = SelfEvalOptions::default().beams)]
    beams: usize,
    /// Seed of the first prompt's sampling (prompt i draws from seed + i).
    #[arg(long, default_value_t = SelfEvalOptions::default().seed)]
    seed: u64,
    /// What the evaluators measure: `perplexity` (the paper's), or `g-eval` (instruction
    /// models summarise each paragraph and rate the summaries with G-Eval).
    #[arg(long, default_value = "perplexity")]
    evaluation: self_eval::Evaluation,
    /// The G-Eval dimension rated (`--evaluation g-eval`).
    #[arg(long, default_value = "coherence")]
    dimension: blindspot::metrics::geval::Dimension,
    /// The independent judge, by name (default: for each evaluator and larger generator, the
    /// largest model that is neither).
    #[arg(long)]
    judge: Option<String>,
    /// Write the report (matrix, findings, every text) as JSON here (`-`: stdout).
    #[arg(long)]
    json: Option<String>,
}

/// Runs the test and prints the matrix and the findings.
pub fn run_self_eval(args: &SelfEvalArgs) -> Result<(), CliError> {
    let paragraphs = super::input::read_lines(&args.prompts)?;
    let options = SelfEvalOptions {
        prompt_words: args.prompt_words,
        max_new_tokens: args.max_new_tokens,
        top_k: args.top_k,
        seed: args.seed,
        beams: args.beams,
        evaluation: args.evaluation,
        dimension: args.dimension,
    };
    let prompts: Vec<String> = self_eval::inputs(paragraphs.iter().map(String::as_str), &options)
        .into_iter()
        .take(args.limit)
        .collect();
    let names: Vec<String> = args
        .models
        .iter()
        .map(|p| {
            p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    if let Some(dup) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
    {
        return Err(CliError::Suite(format!(
            "two models are named `{}`: give folders with different names",
            dup.1
        )));
    }
    let mut plms = Vec::with_capacity(args.models.len());
    for path in &args.models {
        plms.push(load_plm(path, args.quant)?);
    }
    let models: Vec<(&str, &blindspot::models::Plm)> =
        names.iter().map(String::as_str).zip(plms.iter()).collect();
    let report = futures::executor::block_on(self_eval::run(
        &models,
        prompts,
        &options,
        args.judge.as_deref(),
        async |done, total| {
            eprint!("\rself-eval: {done}/{total} steps");
            if done == total {
                eprintln!();
            }
            ControlFlow::Continue(())
        },
    ))
    .map_err(|e| model_error(&args.models[0], e))?;
    if let Some(out) = &args.json {
        let json = serde_json::to_string_pretty(&report).expect("serialisable");
        if out == "-" {
            writeln!(std::io::stdout().lock(), "{json}")?;
            return Ok(());
        }
        super::write_file(out, json + "\n")?;
    }
    print_report(&report)?;
    Ok(())
}

fn print_report(report: &SelfEvalReport) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    let names: Vec<&str> = report.models.iter().map(|m| m.name.as_str()).collect();
    writeln!(
        out,
        "{} (generators in columns, evaluators in rows), mean over {} prompts; {} is better; \
         * marks the evaluator's own texts.",
        report.measure,
        report.prompts.len(),
        if report.higher_is_better {
            "higher"
        } else {
            "lower"
        }
    )?;
    let width = names.iter().map(|n| n.len()).max().unwrap_or(8).max(10);
    write!(out, "{:width$}", "")?;
    for n in &names {
        write!(out, "  {n:>width$}")?;
    }
    writeln!(out)?;
    for (e, row) in report.matrix.iter().enumerate() {
        write!(out, "{:width$}", names[e])?;
        for (g, v) in row.iter().enumerate() {
            let cell = match v {
                Some(v) => format!("{v:.2}{}", if e == g { "*" } else { " " }),
                None => "–".into(),
            };
            write!(out, "  {cell:>width$}")?;
        }
        writeln!(out)?;
    }
    for f in &report.findings {
        writeln!(
            out,
            "{}: {} its own texts to {}'s (larger); the judge {} {}'s{}",
            names[f.evaluator],
            if f.evaluator_prefers_own {
                "prefers"
            } else {
                "does not prefer"
            },
            names[f.larger],
            names[f.judge],
            if f.judge_prefers_larger {
                "prefers"
            } else {
                "does not prefer"
            },
            if f.biased { ": self-preference" } else { "" }
        )?;
    }
    writeln!(
        out,
        "verdict: {}",
        if report.biased {
            "fail (an evaluator prefers its own texts against the judge)"
        } else if report.findings.is_empty() {
            "no finding (it needs an evaluator, a larger generator and a third model as the judge)"
        } else {
            "pass"
        }
    )?;
    Ok(())
}
