//! `blindspot inject` and `blindspot injections`.

use std::io::Write;

use blindspot::inject::{self, Context};
use blindspot::models::tokenizer::LmTokenizer;
use clap::ValueEnum;

use super::CliError;
use super::input::{InputError, read_text};

/// Output formats of `blindspot inject`.
#[derive(Clone, Copy, ValueEnum)]
pub enum InjectFormat {
    /// The perturbed text, one per line.
    Text,
    /// One JSON object per input: text, applied, reason, noise_ratio, edits.
    Jsonl,
}

/// Arguments of `blindspot inject`.
#[derive(clap::Args)]
pub struct InjectArgs {
    /// Injection id (see `blindspot injections`).
    #[arg(long)]
    injection: String,
    /// Level (portion, count, copies or variant); default: the first default level.
    #[arg(long)]
    level: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Input: one text per line, or JSONL with `hyp` (and `src`) when the name ends in .jsonl. `-` is stdin.
    #[arg(long, default_value = "-")]
    input: String,
    /// Source text for injections that need one (copy_source), when the input has none.
    #[arg(long)]
    source: Option<String>,
    /// Language-model tokenizer for positioned errors: a `tokenizer.json`, or
    /// a folder with GPT-2's `encoder.json` and `vocab.bpe`.
    #[arg(long)]
    tokenizer: Option<String>,
    /// Masked-LM checkpoint folder or .bpk (BERT, RoBERTa, DistilBERT with an MLM head)
    /// for bert_diverge: replacements are sampled from its top-10 predictions.
    #[arg(long)]
    mlm_model: Option<std::path::PathBuf>,
    /// The texts are open-ended generations (continuations): sentence
    /// switching leaves their last sentence in place.
    #[arg(long)]
    open_ended: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = InjectFormat::Text)]
    format: InjectFormat,
}

/// Loads `--tokenizer`: a tokenizer.json file or a GPT-2 vocabulary folder.
pub(super) fn load_tokenizer(path: &str) -> Result<LmTokenizer, CliError> {
    let fail = |message: String| CliError::Tokenizer {
        path: path.to_owned(),
        message,
    };
    let dir = std::path::Path::new(path);
    if dir.is_dir() {
        LmTokenizer::gpt2_from_dir(dir).map_err(|e| fail(e.to_string()))
    } else {
        let bytes = std::fs::read(dir).map_err(|e| fail(format!("cannot read: {e}")))?;
        LmTokenizer::from_tokenizer_json(path, &bytes).map_err(|e| fail(e.to_string()))
    }
}

/// Runs `blindspot inject`.
pub fn run_inject(args: &InjectArgs) -> Result<(), CliError> {
    let injection = inject::create(&args.injection)?;
    let level = args.level.unwrap_or(injection.info().default_levels[0]);
    let tokenizer = args.tokenizer.as_deref().map(load_tokenizer).transpose()?;
    let text = read_text(&args.input)?;
    let mut rows: Vec<(String, Option<String>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if args.input.ends_with(".jsonl") {
            if line.trim().is_empty() {
                continue;
            }
            let err = |message: &str| InputError::Jsonl {
                path: args.input.clone(),
                line: i + 1,
                message: message.into(),
            };
            let row: serde_json::Value =
                serde_json::from_str(line).map_err(|e| err(&format!("invalid JSON ({e})")))?;
            let hyp = row
                .get("hyp")
                .and_then(|v| v.as_str())
                .ok_or_else(|| err("missing string field 'hyp'"))?;
            rows.push((
                hyp.to_string(),
                row.get("src").and_then(|v| v.as_str()).map(str::to_string),
            ));
        } else {
            rows.push((line.to_string(), None));
        }
    }
    let all: Vec<&str> = rows.iter().map(|(t, _)| t.as_str()).collect();
    let plm = match &args.mlm_model {
        Some(dir) => Some(super::models::load_plm(
            dir,
            blindspot::models::Precision::F32,
        )?),
        None => None,
    };
    let masked_lm = match &plm {
        Some(plm) => Some(inject::masked_lm::PlmMaskedLm::new(plm).map_err(|e| {
            CliError::Model {
                path: args
                    .mlm_model
                    .as_ref()
                    .expect("loaded from it")
                    .display()
                    .to_string(),
                message: e.to_string(),
            }
        })?),
        None => None,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // Lines a chunk at a time: a masked LM is asked about the chunk's lines
    // together (`inject::apply_many`); each line's result is `apply`'s.
    for start in (0..rows.len()).step_by(LINES_AT_ONCE) {
        let chunk = start..(start + LINES_AT_ONCE).min(rows.len());
        // Other samples (for sentence replacement) are the other input lines.
        let samples: Vec<Vec<&str>> = chunk
            .clone()
            .map(|i| {
                all.iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, t)| *t)
                    .collect()
            })
            .collect();
        let jobs: Vec<inject::Job> = chunk
            .clone()
            .zip(&samples)
            .map(|(i, samples)| inject::Job {
                text: &rows[i].0,
                level,
                seed: args.seed,
                ctx: Context {
                    source: rows[i].1.as_deref().or(args.source.as_deref()),
                    samples,
                    masked_lm: masked_lm
                        .as_ref()
                        .map(|m| m as &dyn inject::masked_lm::MaskedLm),
                    lm_tokenizer: tokenizer.as_ref(),
                    open_ended: args.open_ended,
                    ngram_corpus: None,
                },
            })
            .collect();
        let results =
            futures::executor::block_on(inject::apply_many(injection, &jobs, async || true))?;
        for (i, result) in chunk.zip(results) {
            match args.format {
                InjectFormat::Text => writeln!(out, "{}", result.text)?,
                InjectFormat::Jsonl => {
                    let mut value = serde_json::to_value(&result).expect("serialisable");
                    value["line"] = (i + 1).into();
                    value["injection"] = injection.info().id.into();
                    value["level"] = level.into();
                    value["seed"] = args.seed.into();
                    writeln!(out, "{value}")?;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// Input lines injected between two writes of output (a masked LM is asked
/// about them together).
const LINES_AT_ONCE: usize = 64;

/// Runs `blindspot injections`.
pub fn list_injections(json: bool) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    let infos: Vec<_> = inject::registry().into_iter().map(|i| i.info()).collect();
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&infos).expect("serialisable")
        )?;
    } else {
        for i in infos {
            let levels: Vec<String> = i.default_levels.iter().map(|l| l.to_string()).collect();
            writeln!(
                out,
                "{:<20} {:<12} {:<8} {:<18} {}",
                i.id,
                format!("{:?}", i.family).to_lowercase(),
                format!("{:?}", i.level_kind).to_lowercase(),
                levels.join(","),
                i.description
            )?;
        }
    }
    Ok(())
}
