//! `blindspot attack`: adversarial search over a dataset (the core's
//! `stress::attack`), JSON lines out, the attack paper's summary on stderr.

use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;

use blindspot::data::DatasetFormat;
use blindspot::inject::masked_lm::PlmMaskedLm;
use blindspot::metrics::ModelSlot;
use blindspot::models::Precision;
use blindspot::stress::attack::{
    self, AttackConfig, AttackHeader, AttackOutcome, AttackRun, AttackSummary, AttackTools, Goal,
    Neighbours, Strategy,
};
use blindspot::stress::suite::Shard;
use futures::executor::block_on;

use super::CliError;
use super::input::read_text;

/// Arguments of `blindspot attack`.
#[derive(clap::Args)]
pub struct AttackArgs {
    /// Dataset file.
    #[arg(long)]
    data: String,
    /// Dataset format: wmt (ref_a attacked, ref_b reference), summeval or jsonl (hyp attacked).
    #[arg(long)]
    format: DatasetFormat,
    /// The metric attacked (one id, see `blindspot metrics`).
    #[arg(long, default_value = "chrf")]
    metric: String,
    /// over-penalise, inconsistency or raise.
    #[arg(long, default_value = "over-penalise")]
    goal: Goal,
    /// input-reduction, deepwordbug, clare, genetic or token-greedy (default: deepwordbug;
    /// token-greedy for raise).
    #[arg(long)]
    strategy: Option<Strategy>,
    /// Metric queries per item (default: 500; 3000 for raise).
    #[arg(long)]
    budget: Option<usize>,
    /// Seconds per item.
    #[arg(long)]
    time_budget: Option<f64>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The goal's threshold in z units (default: 1.0 over-penalise, 0.4 inconsistency, 0 raise).
    #[arg(long)]
    threshold: Option<f64>,
    /// Inconsistency: the largest drop against the original text, z units.
    #[arg(long)]
    self_threshold: Option<f64>,
    /// Raise: the noise ratio the text must reach.
    #[arg(long)]
    noise_target: Option<f64>,
    /// Candidates per position from the masked LM or the embedding neighbours.
    #[arg(long)]
    candidates: Option<usize>,
    /// CLARE: beam width.
    #[arg(long)]
    beam: Option<usize>,
    /// CLARE: iterations.
    #[arg(long)]
    iterations: Option<usize>,
    /// Genetic: population size.
    #[arg(long)]
    population: Option<usize>,
    /// Genetic: generations.
    #[arg(long)]
    generations: Option<usize>,
    /// Masked-LM checkpoint (folder or .bpk) for CLARE and the raising search.
    #[arg(long)]
    mlm_model: Option<PathBuf>,
    /// Encoder whose input embeddings give word neighbours (genetic, token-greedy;
    /// default: models/all-MiniLM-L6-v2).
    #[arg(long)]
    embed_model: Option<PathBuf>,
    /// Causal LM (GPT-2 folder) for the fluency constraint: perplexity may rise by at
    /// most --max-ppl-rise. Without one no fluency constraint is applied.
    #[arg(long)]
    fluency_model: Option<PathBuf>,
    /// The most the fluency LM's perplexity may rise.
    #[arg(long)]
    max_ppl_rise: Option<f64>,
    /// Use only the first N items (z statistics are over these).
    #[arg(long)]
    limit: Option<usize>,
    /// Attack only shard I of N (z statistics over all items); `blindspot merge` combines the parts.
    #[arg(long)]
    shard: Option<Shard>,
    /// JSON lines: the run's header, then one outcome per item; `-` is stdout.
    #[arg(long, default_value = "-")]
    out: String,
    /// Also write the summary (JSON) here.
    #[arg(long)]
    summary: Option<String>,
    /// Also write a self-contained HTML report (summary, settings, every item's text found) here.
    #[arg(long)]
    html: Option<String>,
    /// Apply the Porter stemmer before ROUGE matching.
    #[arg(long)]
    rouge_stemmer: bool,
    /// Models of the model-based metrics.
    #[command(flatten)]
    plm: super::plm_scores::PlmArgs,
}

fn config(args: &AttackArgs) -> AttackConfig {
    let strategy = args.strategy.unwrap_or(args.goal.default_strategy());
    let mut c = AttackConfig::new(args.goal, strategy);
    c.budget = args.budget.unwrap_or(c.budget);
    c.time_budget_s = args.time_budget;
    c.seed = args.seed;
    c.threshold = args.threshold.unwrap_or(c.threshold);
    c.self_threshold = args.self_threshold.unwrap_or(c.self_threshold);
    c.noise_target = args.noise_target.unwrap_or(c.noise_target);
    c.candidates = args.candidates.unwrap_or(c.candidates);
    c.beam = args.beam.unwrap_or(c.beam);
    c.iterations = args.iterations.unwrap_or(c.iterations);
    c.population = args.population.unwrap_or(c.population);
    c.generations = args.generations.unwrap_or(c.generations);
    c.max_ppl_rise = args.max_ppl_rise.unwrap_or(c.max_ppl_rise);
    c
}

fn attack_error(e: attack::AttackError) -> CliError {
    CliError::Suite(e.to_string())
}

/// Runs `blindspot attack`.
pub fn run_attack(args: &AttackArgs) -> Result<(), CliError> {
    let config = config(args);
    config.validate().map_err(attack_error)?;
    if args.shard.is_some() && (args.summary.is_some() || args.html.is_some()) {
        return Err(CliError::Suite(
            "a shard has no summary or report of its own: give --summary and --html to \
             `blindspot merge`"
                .into(),
        ));
    }
    let items = super::stress::load(&args.data, args.format, args.limit)?;
    if items.is_empty() {
        return Err(CliError::Suite(format!(
            "{}: no items to attack",
            args.data
        )));
    }
    let settings = args.plm.settings(args.rouge_stemmer);
    let spec = match settings
        .specs(std::slice::from_ref(&args.metric))?
        .as_slice()
    {
        [one] => one.clone(),
        _ => {
            return Err(CliError::Suite(
                "attack one metric at a time (--metric takes one id)".into(),
            ));
        }
    };
    let mlm = args
        .mlm_model
        .as_deref()
        .map(|dir| super::models::load_plm(dir, Precision::F32))
        .transpose()?;
    let masked_lm = mlm
        .as_ref()
        .map(|plm| {
            PlmMaskedLm::new(plm).map_err(|e| CliError::Model {
                path: plm.name.clone(),
                message: e.to_string(),
            })
        })
        .transpose()?;
    let wants_neighbours = matches!(config.strategy, Strategy::Genetic | Strategy::TokenGreedy);
    let neighbours = if wants_neighbours || args.embed_model.is_some() {
        let dir = match &args.embed_model {
            Some(dir) => dir.clone(),
            None => super::plm_scores::default_model(ModelSlot::BertScore)?,
        };
        let plm = Rc::new(super::models::load_plm(&dir, Precision::F32)?);
        Some(block_on(Neighbours::of(plm)).map_err(|e| CliError::Model {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?)
    } else {
        None
    };
    let fluency = args
        .fluency_model
        .as_ref()
        .map(|dir| AttackTools::fluency_spec(Some(dir.display().to_string())));
    let tools = AttackTools {
        masked_lm: masked_lm.as_ref().map(|m| m as _),
        neighbours: neighbours.as_ref(),
        fluency,
        pool: None,
    };
    let engine = args.plm.engine().with_reference_cache();
    let bar = super::stress::items_bar(items.len());
    let dataset = super::stress::file_name(&args.data);
    let run = block_on(attack::run_attacks(
        &engine,
        &dataset,
        &items,
        &spec,
        &config,
        &tools,
        args.shard,
        &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    ))
    .map_err(attack_error)?;
    bar.finish_and_clear();
    if args.fluency_model.is_none() && config.goal != Goal::Raise {
        eprintln!("note: no --fluency-model given: no fluency constraint was applied");
    }
    if config.strategy == Strategy::TokenGreedy && args.mlm_model.is_none() {
        eprintln!(
            "note: no --mlm-model given: token-greedy's edits were deletions and embedding \
             neighbours only, without the masked LM's top-{} (SPEC's candidate set)",
            config.candidates
        );
    }
    write_run(
        &run,
        &args.out,
        args.summary.as_deref(),
        args.html.as_deref(),
    )
}

/// Writes a run as JSON lines (header, then outcomes), its summary where
/// asked, and the summary line on stderr.
fn write_run(
    run: &AttackRun,
    out: &str,
    summary: Option<&str>,
    html: Option<&str>,
) -> Result<(), CliError> {
    let mut text = serde_json::to_string(&run.header).expect("serialisable") + "\n";
    for o in &run.outcomes {
        text += &(serde_json::to_string(o).expect("serialisable") + "\n");
    }
    if out == "-" {
        std::io::stdout().lock().write_all(text.as_bytes())?;
    } else {
        super::write_file(out, text)?;
    }
    let h = &run.header;
    if let Some(shard) = h.shard {
        super::stress::shard_written(shard, run.outcomes.len(), h.items);
        return Ok(());
    }
    let s = run.summary();
    if let Some(path) = html {
        super::write_file(path, blindspot::stress::html::attack_html(run))?;
    }
    if let Some(path) = summary {
        super::write_file(
            path,
            serde_json::to_string_pretty(&s).expect("serialisable") + "\n",
        )?;
    }
    eprintln!("{} (std {:.4})", summary_line(h, &s), h.z.std);
    Ok(())
}

/// A run's summary in one line, as the attack paper reports it (the attack's
/// stderr and the stress report card).
pub fn summary_line(h: &AttackHeader, s: &AttackSummary) -> String {
    format!(
        "{} / {} on {}: {} of {} succeeded ({:.1}%), {:.1} queries per item, {:.1}% of words \
         perturbed where it succeeded, mean change {:+.2} z",
        h.config.goal,
        h.config.strategy,
        h.metric,
        s.succeeded,
        s.attempted,
        100.0 * s.success_rate,
        s.mean_queries,
        s.mean_perturbed_pct,
        s.mean_change_z,
    )
}

/// Reads a run written by [`write_run`] (checked: [`AttackRun::check`]),
/// or None when `text` is not one (a stress suite's part).
pub fn parse_run(text: &str) -> Option<Result<AttackRun, String>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: AttackHeader = serde_json::from_str(lines.next()?).ok()?;
    if header.kind != "attack" {
        return None;
    }
    let outcomes: Result<Vec<AttackOutcome>, _> = lines.map(serde_json::from_str).collect();
    Some(
        outcomes
            .map(|outcomes| AttackRun { header, outcomes })
            .map_err(|e| e.to_string())
            .and_then(|run| {
                run.check()
                    .map_err(|e| format!("the attack run is damaged: {e}"))?;
                Ok(run)
            }),
    )
}

/// `blindspot merge` for attack parts: the run an unsharded call writes.
pub fn merge_parts(
    first: AttackRun,
    paths: &[String],
    out: &str,
    html: Option<&str>,
    summary: Option<&str>,
) -> Result<(), CliError> {
    let mut parts = vec![first];
    for path in &paths[1..] {
        let text = read_text(path)?;
        match parse_run(&text) {
            Some(Ok(run)) => parts.push(run),
            Some(Err(e)) => return Err(CliError::Suite(format!("{path}: {e}"))),
            None => {
                return Err(CliError::Suite(format!(
                    "{path}: not a part of `blindspot attack --shard`"
                )));
            }
        }
    }
    let run = attack::merge(parts).map_err(attack_error)?;
    write_run(&run, out, summary, html)
}
