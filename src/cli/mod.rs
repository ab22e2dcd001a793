//! Command-line interface: argument parsing and dispatch.

mod attack;
mod generate;
mod inject;
mod input;
mod models;
mod output;
mod plm_scores;
mod self_eval;
mod stress;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use blindspot::metrics::{self, Segment};
use futures::executor::block_on;
use input::Pairs;

/// Stress-test text-generation metrics from the command line.
#[derive(Parser)]
#[command(name = "blindspot", version, about)]
struct Cli {
    /// Where language models run: `cpu` (burn-flex), `cpu-i16` (the same,
    /// with an int8 model's projections as 16-bit integer products, as the
    /// page's CPU computes them), `gpu` (burn-wgpu: Vulkan, Metal or DX12;
    /// needs a build with `--features gpu`), or `gpu-f16` (the GPU
    /// computing in f16: BERT-family encoders only).
    #[arg(long, global = true, value_enum, default_value_t = models::Backend::Cpu)]
    device: models::Backend,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Score hypotheses against references, one line per pair plus a corpus summary.
    Score(ScoreArgs),
    /// Apply one injection to each input text.
    Inject(inject::InjectArgs),
    /// List the registered injections with their families and default levels.
    Injections {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Run the blind-spot stress suite over a dataset: every injection, level and seed.
    Stress(stress::StressArgs),
    /// Combine the partial results of `stress --shard I/N` runs into one report.
    Merge(stress::MergeArgs),
    /// Run the MENLI preference suite: does each metric prefer the paraphrase to the adversarial text?
    Prefer(stress::PreferArgs),
    /// Search for edits that fool a metric (over-penalise, inconsistency, raise) over a dataset.
    Attack(Box<attack::AttackArgs>),
    /// Audit metrics for spurious correlates (length, coverage, density) on SummEval-format data.
    Audit(stress::AuditArgs),
    /// Write a prepared model file (.bpk, int8 by default) from a checkpoint folder.
    Prepare(models::PrepareArgs),
    /// List the model registry (models.toml): default checkpoints per metric.
    Models {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Print a model's hidden states for texts (JSON lines).
    Embed(models::EmbedArgs),
    /// Print where a model attends, by position in each text (JSON lines).
    Attention(models::AttentionArgs),
    /// Generate text: a causal LM continues prompts, an encoder-decoder writes from sources.
    Generate(generate::GenerateArgs),
    /// MAUVE between a set of hypotheses and a set of references.
    Mauve(plm_scores::MauveArgs),
    /// The self-evaluation test: do language models prefer the texts they generate?
    SelfEval(self_eval::SelfEvalArgs),
    /// List the registered metrics.
    Metrics {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
}

/// Arguments of `blindspot score`.
#[derive(clap::Args)]
pub(crate) struct ScoreArgs {
    /// Comma-separated metric ids (see `blindspot metrics`).
    #[arg(long, value_delimiter = ',', default_value = blindspot::metrics::registry::DEFAULT_METRIC_IDS.as_str())]
    pub(crate) metrics: Vec<String>,
    /// Reference file, one text per line; repeat for several references per pair. `-` is stdin.
    #[arg(long = "refs", conflicts_with = "input")]
    refs: Vec<String>,
    /// Hypothesis file, one text per line. `-` is stdin.
    #[arg(long, conflicts_with = "input", required_unless_present = "input")]
    hyps: Option<String>,
    /// Source file, one text per line (optional). `-` is stdin.
    #[arg(long, conflicts_with = "input")]
    srcs: Option<String>,
    /// JSONL file with `ref` (string or list), `hyp` and optional `src` per line. `-` is stdin.
    #[arg(long)]
    input: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = output::Format::Table)]
    format: output::Format,
    /// Options of the model-based metrics.
    #[command(flatten)]
    pub(crate) plm: plm_scores::PlmArgs,
    /// Apply the Porter stemmer before ROUGE matching (rouge-score `use_stemmer=True`).
    #[arg(long)]
    rouge_stemmer: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum ListFormat {
    Table,
    Json,
    /// A Markdown table (`metrics`: the README's).
    Markdown,
}

/// A user-facing failure: printed as one line, exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Problem with an input file or its contents.
    #[error(transparent)]
    Input(#[from] input::InputError),
    /// Problem raised by an injection (unknown id, bad level, missing source).
    #[error(transparent)]
    Inject(#[from] blindspot::inject::InjectError),
    /// Problem raised by a metric.
    #[error(transparent)]
    Metric(#[from] metrics::MetricError),
    /// Metric ids or options that do not resolve.
    #[error(transparent)]
    Specs(#[from] metrics::spec::SpecsError),
    /// Scoring failed (a model, an input a metric refuses).
    #[error(transparent)]
    Engine(#[from] metrics::EngineError),
    /// A stress suite could not run.
    #[error("{0}")]
    Suite(String),
    /// A model could not be loaded or run.
    #[error("{path}: {message}")]
    Model {
        /// The folder or file given.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A tokenizer could not be loaded.
    #[error("{path}: {message}")]
    Tokenizer {
        /// The file or folder given.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// Writing the output failed (closed pipe and the like).
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
    /// An output file could not be written.
    #[error("cannot write {path}: {source}")]
    WriteFile {
        /// The file given.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Writes an output file, naming it in the error.
fn write_file(
    path: impl AsRef<std::path::Path>,
    contents: impl AsRef<[u8]>,
) -> Result<(), CliError> {
    let path = path.as_ref();
    std::fs::write(path, contents).map_err(|source| CliError::WriteFile {
        path: path.display().to_string(),
        source,
    })
}

/// Parses arguments, runs the command and maps errors to exit code 2.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    models::use_backend(cli.device);
    let result = match cli.command {
        Command::Score(args) => score(&args),
        Command::Metrics { format } => list_metrics(format),
        Command::Inject(args) => inject::run_inject(&args),
        Command::Stress(args) => stress::run_stress(&args),
        Command::Merge(args) => stress::run_merge(&args),
        Command::Prefer(args) => stress::run_prefer(&args),
        Command::Audit(args) => stress::run_audit(&args),
        Command::Attack(args) => attack::run_attack(&args),
        Command::Prepare(args) => models::run_prepare(&args),
        Command::Models { format } => models::list_models(matches!(format, ListFormat::Json)),
        Command::Embed(args) => models::run_embed(&args),
        Command::Attention(args) => models::run_attention(&args),
        Command::Generate(args) => generate::run_generate(&args),
        Command::Mauve(args) => plm_scores::run_mauve(&args),
        Command::SelfEval(args) => self_eval::run_self_eval(&args),
        Command::Injections { format } => {
            inject::list_injections(matches!(format, ListFormat::Json))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn score(args: &ScoreArgs) -> Result<(), CliError> {
    let specs = args.plm.settings(args.rouge_stemmer).specs(&args.metrics)?;
    // References are asked for only where a chosen metric reads them.
    let need_refs = specs.iter().any(|s| s.info().needs_reference);
    let pairs = match &args.input {
        Some(path) => Pairs::from_jsonl(path, need_refs)?,
        None => Pairs::from_line_files(
            args.hyps.as_deref().unwrap_or("-"),
            &args.refs,
            args.srcs.as_deref(),
            need_refs,
        )?,
    };
    let refs: Vec<Vec<&str>> = pairs
        .refs
        .iter()
        .map(|r| r.iter().map(String::as_str).collect())
        .collect();
    let segments: Vec<Segment> = pairs
        .hyps
        .iter()
        .zip(&refs)
        .zip(&pairs.srcs)
        .map(|((hyp, refs), src)| Segment {
            hyp,
            refs,
            src: src.as_deref(),
        })
        .collect();
    for spec in &specs {
        if spec.info().needs_source && segments.iter().any(|s| s.src.is_none()) {
            return Err(input::InputError::MissingSource(spec.info().id).into());
        }
    }
    let engine = args.plm.engine();
    let columns = block_on(engine.score(&specs, &segments))?;
    note_cut_texts(&engine, &specs, &segments);
    let rows: Vec<Vec<_>> = (0..segments.len())
        .map(|i| columns.iter().map(|c| c.scores[i].clone()).collect())
        .collect();
    let corpus: Vec<_> = columns.iter().map(|c| c.corpus.clone()).collect();
    let ids: Vec<&str> = columns.iter().map(|c| c.spec.id().as_str()).collect();
    let signatures: Vec<String> = columns.iter().map(|c| c.signature.to_string()).collect();
    output::write_scores(args.format, &ids, &rows, &corpus, &signatures)?;
    Ok(())
}

/// Says on stderr how many distinct texts a model cut to its length limit:
/// its metrics read only what fits (as the reference implementations do),
/// so a score of a cut text is not the whole text's.
fn note_cut_texts(engine: &metrics::Engine, specs: &[metrics::MetricSpec], segments: &[Segment]) {
    let texts: std::collections::BTreeSet<&str> = segments
        .iter()
        .flat_map(|s| {
            std::iter::once(s.hyp)
                .chain(s.refs.iter().copied())
                .chain(s.src)
        })
        .collect();
    let mut seen = Vec::new();
    for spec in specs {
        let Some((slot, name)) = spec.model() else {
            continue;
        };
        let Ok(plm) = engine.model(slot, name) else {
            continue;
        };
        if seen.contains(&plm.load_id) {
            continue;
        }
        seen.push(plm.load_id);
        let cut = texts
            .iter()
            .filter(|t| plm.encode(t).is_ok_and(|e| e.truncated))
            .count();
        if cut > 0 {
            let limit = plm
                .tokenizer
                .max_length()
                .map_or(String::new(), |n| format!(" of {n} tokens"));
            eprintln!(
                "note: {cut} of the {} texts are longer than {}'s limit{limit}: its metrics \
                 read each of them up to the limit only",
                texts.len(),
                plm.name,
            );
        }
    }
}

fn list_metrics(format: ListFormat) -> Result<(), CliError> {
    use std::io::Write;
    let listing = metrics::registry::listing();
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&listing).expect("serialisable")
        )?,
        ListFormat::Markdown => write!(out, "{}", metrics::registry::markdown_table())?,
        ListFormat::Table => {
            for m in &listing {
                writeln!(
                    out,
                    "{:<19} {:<23} {}",
                    m.info.id, m.info.name, m.info.description
                )?;
                let options = option_lines(&m.options);
                if !options.is_empty() {
                    writeln!(out, "{:<19} options: {}", "", options.join("; "))?;
                }
            }
            writeln!(
                out,
                "options: --opt KIND.OPTION=VALUE (e.g. --opt moverscore-v1.ngram=2); models: \
                 --model KIND=DIR (bertscore defaults to models/all-MiniLM-L6-v2); \
                 `blindspot metrics --format json` gives each option's meaning"
            )?;
        }
    }
    Ok(())
}

/// `name=default` for each option of a schema (the model aside: `--model`).
fn option_lines(schema: &serde_json::Value) -> Vec<String> {
    let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
        return vec![];
    };
    props
        .iter()
        .filter(|(name, _)| name.as_str() != "model")
        .map(|(name, p)| match p.get("default") {
            Some(d) => format!("{name}={d}"),
            None => format!(
                "{name} (unset: {})",
                p.get("x-null-label")
                    .and_then(|l| l.as_str())
                    .unwrap_or("default")
            ),
        })
        .collect()
}
