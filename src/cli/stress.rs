//! `blindspot stress`: the blind-spot suite over a dataset file.

use std::io::Write;

use blindspot::data::{self, DatasetFormat, Item};
use blindspot::inject;
use blindspot::inject::masked_lm::PlmMaskedLm;
use blindspot::stress::suite::{
    Shard, SuiteConfig, SuiteModels, SuitePart, SuiteReport, SuiteRun, merge,
};
use futures::executor::block_on;

use super::CliError;
use super::input::read_text;

/// Arguments of `blindspot stress`.
#[derive(clap::Args)]
pub struct StressArgs {
    /// Dataset file.
    #[arg(long)]
    data: String,
    /// Dataset format: wmt (WMT21/TED-MT JSONL: ref_a gold, ref_b reference), summeval
    /// (SummEval JSONL: ref gold, the other refs references) or jsonl (hyp gold, ref, src).
    #[arg(long)]
    format: DatasetFormat,
    /// Comma-separated metric ids.
    #[arg(long, value_delimiter = ',', default_value = blindspot::metrics::registry::DEFAULT_METRIC_IDS.as_str())]
    metrics: Vec<String>,
    /// Comma-separated injection ids or families (fluency, consistency, menli, character, other, all).
    #[arg(long, value_delimiter = ',', default_value = "fluency,consistency")]
    injections: Vec<String>,
    /// Seeds per level.
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// Use only the first N items.
    #[arg(long)]
    limit: Option<usize>,
    /// Apply the Porter stemmer before ROUGE matching.
    #[arg(long)]
    rouge_stemmer: bool,
    /// The gold texts are open-ended generations (continuations): sentence
    /// switching leaves their last sentence in place.
    #[arg(long)]
    open_ended: bool,
    /// Language-model tokenizer for positioned errors (tokenizer.json, or a GPT-2 vocabulary folder).
    #[arg(long)]
    tokenizer: Option<String>,
    /// Where the report goes (with `--shard`: the partial result, to `--out`).
    #[command(flatten)]
    report: ReportFiles,
    /// Masked-LM checkpoint (folder or .bpk) for BERT-diverge's replacements (top-10 sampling).
    #[arg(long)]
    mlm_model: Option<std::path::PathBuf>,
    /// Run only shard I of N (0-based, contiguous items) and write its partial
    /// result to `--out`; `blindspot merge` combines the parts into the report.
    #[arg(long)]
    shard: Option<Shard>,
    /// Models of the model-based metrics (bertscore-f, gpt-ppl, mlm-ppl, menli...).
    #[command(flatten)]
    plm: super::plm_scores::PlmArgs,
}

/// Where a suite report is written.
#[derive(clap::Args)]
pub struct ReportFiles {
    /// Write the full results (JSON) here; `-` is stdout.
    #[arg(long, default_value = "-")]
    out: String,
    /// Also write one CSV row per test, level and metric here.
    #[arg(long)]
    csv: Option<String>,
    /// Also write a self-contained HTML report (card, charts, embedded JSON) here.
    #[arg(long)]
    html: Option<String>,
    /// Stress reports: add the summary of this attack run on the same dataset
    /// (the results of `blindspot attack`, or its merged shards); repeatable.
    #[arg(long = "attack", value_name = "RESULTS")]
    attacks: Vec<String>,
}

/// Arguments of `blindspot merge`.
#[derive(clap::Args)]
pub struct MergeArgs {
    /// The partial results of `blindspot stress --shard I/N` (or `blindspot attack --shard I/N`), one per shard.
    #[arg(required = true)]
    parts: Vec<String>,
    /// Attack parts: also write the summary (JSON) here.
    #[arg(long)]
    summary: Option<String>,
    /// Where the merged report goes.
    #[command(flatten)]
    report: ReportFiles,
}

/// The file-name part of a path, naming the dataset in reports.
pub(super) fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or(path.to_owned(), |n| n.to_string_lossy().into_owned())
}

/// The progress bar of a run over dataset items (stderr).
pub(super) fn items_bar(items: usize) -> indicatif::ProgressBar {
    indicatif::ProgressBar::new(items as u64).with_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} items, {elapsed} elapsed, ETA {eta}",
        )
        .expect("valid template"),
    )
}

/// Says on stderr which part a sharded run wrote.
pub(super) fn shard_written(shard: Shard, items: usize, of: usize) {
    eprintln!(
        "shard {}/{}: {items} of {of} items; combine the parts with `blindspot merge`",
        shard.index, shard.count
    );
}

/// Writes a report as pretty JSON to `out` (`-` is stdout).
fn write_json(out: &str, report: &impl serde::Serialize) -> Result<(), CliError> {
    let json = serde_json::to_string_pretty(report).expect("serialisable");
    if out == "-" {
        writeln!(std::io::stdout().lock(), "{json}")?;
    } else {
        super::write_file(out, json + "\n")?;
    }
    Ok(())
}

/// Expands family names into injection ids, keeping the order given.
pub fn expand_injections(names: &[String]) -> Result<Vec<String>, CliError> {
    Ok(inject::expand(names)?
        .into_iter()
        .map(str::to_owned)
        .collect())
}

/// Reads `path` in `format` (rows that do not parse are reported and
/// skipped) and keeps the first `limit` items.
pub(super) fn load(
    path: &str,
    format: DatasetFormat,
    limit: Option<usize>,
) -> Result<Vec<Item>, CliError> {
    let text = read_text(path)?;
    let loaded = data::load_items(format, &text);
    warn_skipped(path, &loaded.problems);
    let mut items = loaded.rows;
    if let Some(n) = limit {
        items.truncate(n);
    }
    Ok(items)
}

/// Runs `blindspot stress`.
pub fn run_stress(args: &StressArgs) -> Result<(), CliError> {
    let items = load(&args.data, args.format, args.limit)?;
    let tokenizer = args
        .tokenizer
        .as_deref()
        .map(super::inject::load_tokenizer)
        .transpose()?;
    let config = SuiteConfig {
        injections: expand_injections(&args.injections)?,
        metrics: args.metrics.clone(),
        seeds: args.seeds,
        rouge_stemmer: args.rouge_stemmer,
        open_ended: args.open_ended,
    };
    let bar = items_bar(items.len());
    let dataset = file_name(&args.data);
    let engine = args.plm.engine();
    let mut scorer = &engine;
    let mlm = args
        .mlm_model
        .as_deref()
        .map(|dir| super::models::load_plm(dir, blindspot::models::Precision::F32))
        .transpose()?;
    let masked_lm = mlm
        .as_ref()
        .map(|plm| {
            PlmMaskedLm::new(plm).map_err(|e| CliError::Model {
                path: args
                    .mlm_model
                    .as_ref()
                    .expect("loaded")
                    .display()
                    .to_string(),
                message: e.to_string(),
            })
        })
        .transpose()?;
    let models = SuiteModels {
        lm_tokenizer: tokenizer.as_ref(),
        masked_lm: masked_lm.as_ref().map(|m| m as _),
        scorer: Some(&mut scorer),
        settings: args.plm.settings(args.rouge_stemmer),
        on_test: None,
        on_part: None,
        specs: None,
    };
    let progress = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        true
    };
    let run = SuiteRun::new(&dataset, &items, &config)
        .models(models)
        .shard(args.shard)
        .progress(&progress);
    let part = run.run().map_err(|e| CliError::Suite(e.to_string()))?;
    if let Some(shard) = args.shard {
        bar.finish_and_clear();
        write_json(&args.report.out, &part)?;
        shard_written(shard, part.indices.len(), part.items);
        return Ok(());
    }
    let report = part.report().map_err(|e| CliError::Suite(e.to_string()))?;
    bar.finish_and_clear();
    write_report(report, &args.report)
}

/// Writes a suite report as JSON (and CSV and HTML where asked) and prints
/// its card, with the summaries of the attack runs asked for.
fn write_report(mut report: SuiteReport, files: &ReportFiles) -> Result<(), CliError> {
    for path in &files.attacks {
        let run = match super::attack::parse_run(&read_text(path)?) {
            Some(Ok(run)) => run,
            Some(Err(e)) => return Err(CliError::Suite(format!("{path}: {e}"))),
            None => {
                return Err(CliError::Suite(format!(
                    "{path}: not the results of `blindspot attack`"
                )));
            }
        };
        report
            .add_attack(&run)
            .map_err(|e| CliError::Suite(format!("{path}: {e}")))?;
    }
    let report = &report;
    write_json(&files.out, report)?;
    if let Some(path) = &files.csv {
        super::write_file(path, report.to_csv())?;
    }
    if let Some(path) = &files.html {
        super::write_file(path, blindspot::stress::html::suite_html(report))?;
    }
    eprintln!("{}", summary(report));
    Ok(())
}

/// Runs `blindspot merge`.
pub fn run_merge(args: &MergeArgs) -> Result<(), CliError> {
    // Parts of `blindspot attack --shard` are JSON lines with an attack header.
    let first = read_text(&args.parts[0])?;
    if let Some(run) = super::attack::parse_run(&first) {
        let run = run.map_err(|e| CliError::Suite(format!("{}: {e}", args.parts[0])))?;
        if args.report.csv.is_some() {
            return Err(CliError::Suite(
                "attack results have no CSV form: use --out (JSON lines), --summary or --html"
                    .into(),
            ));
        }
        if !args.report.attacks.is_empty() {
            return Err(CliError::Suite(
                "--attack adds an attack's summary to a stress report; these parts are an attack's"
                    .into(),
            ));
        }
        return super::attack::merge_parts(
            run,
            &args.parts,
            &args.report.out,
            args.report.html.as_deref(),
            args.summary.as_deref(),
        );
    }
    if args.summary.is_some() {
        return Err(CliError::Suite(
            "--summary is for attack parts; a stress report's summary is its report card".into(),
        ));
    }
    let parts = args
        .parts
        .iter()
        .map(|path| {
            let text = read_text(path)?;
            serde_json::from_str::<SuitePart>(&text).map_err(|e| {
                CliError::Suite(format!(
                    "{path}: not a partial result of `blindspot stress --shard` ({e})"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let report = merge(parts).map_err(|e| CliError::Suite(e.to_string()))?;
    write_report(report, &args.report)
}

/// The report card as a terminal table: one row per test, one column per metric.
pub fn summary(report: &SuiteReport) -> String {
    let mut out = format!("{:<26}", "injection");
    for m in &report.metrics {
        out.push_str(&format!(" {:>14}", m.id));
    }
    out.push('\n');
    for test in &report.tests {
        out.push_str(&format!("{:<26}", test.injection));
        if let Some(reason) = &test.skipped {
            out.push_str(&format!(" skipped: {reason}\n"));
            continue;
        }
        for v in &test.verdicts {
            let v = serde_json::to_value(v).expect("serialisable");
            out.push_str(&format!(" {:>14}", v.as_str().unwrap_or_default()));
        }
        out.push('\n');
    }
    for a in &report.attacks {
        out.push_str(&format!(
            "attack {}\n",
            super::attack::summary_line(&a.header, &a.summary)
        ));
    }
    out
}

/// Arguments of `blindspot prefer`.
#[derive(clap::Args)]
pub struct PreferArgs {
    /// MENLI-format CSV (error, id, source, ref, hyp_para, hyp_adv_based, hyp_adv_free, `_fixed` columns).
    #[arg(long, required_unless_present = "data", conflicts_with = "data")]
    menli: Option<String>,
    /// Or build the suite from a dataset (gold = paraphrase, our MENLI attacks on the reference).
    #[arg(long)]
    data: Option<String>,
    /// Format of `--data`.
    #[arg(long, default_value = "wmt")]
    format: DatasetFormat,
    /// Attacks for `--data` (default: every MENLI attack but number_to_words).
    #[arg(long, value_delimiter = ',')]
    attacks: Vec<String>,
    /// Use only the first N items of `--data`.
    #[arg(long)]
    limit: Option<usize>,
    /// Comma-separated metric ids, model-based ones included.
    #[arg(long, value_delimiter = ',', default_value = blindspot::metrics::registry::DEFAULT_METRIC_IDS.as_str())]
    metrics: Vec<String>,
    /// Apply the Porter stemmer before ROUGE matching.
    #[arg(long)]
    rouge_stemmer: bool,
    /// Write the full results (JSON) here; `-` is stdout.
    #[arg(long, default_value = "-")]
    out: String,
    /// Models of the model-based metrics.
    #[command(flatten)]
    plm: super::plm_scores::PlmArgs,
}

/// Runs `blindspot prefer`.
pub fn run_prefer(args: &PreferArgs) -> Result<(), CliError> {
    let (path, cases) = match (&args.menli, &args.data) {
        (Some(menli), _) => {
            let text = read_text(menli)?;
            let loaded = data::load_menli_csv(&text)
                .map_err(|p| CliError::Suite(format!("{menli}:{}: {}", p.line, p.message)))?;
            warn_skipped(menli, &loaded.problems);
            (menli.clone(), loaded.rows)
        }
        (None, Some(path)) => {
            let items = load(path, args.format, args.limit)?;
            let attacks: Vec<String> = if args.attacks.is_empty() {
                blindspot::stress::prefer::default_attacks()
                    .into_iter()
                    .map(str::to_owned)
                    .collect()
            } else {
                args.attacks.clone()
            };
            let attacks: Vec<&str> = attacks.iter().map(String::as_str).collect();
            let cases = blindspot::stress::prefer::build_cases(&items, &attacks, 0)?;
            (path.clone(), cases)
        }
        (None, None) => unreachable!("clap requires --menli or --data"),
    };
    if cases.is_empty() {
        let why = if args.menli.is_some() {
            "the file has no rows, or every row was skipped (see the warnings above)"
        } else {
            "a case needs an item with a source, which the reference-free setting reads, and \
             a reference that an attack changes"
        };
        return Err(CliError::Suite(format!(
            "{path}: no preference case ({why})"
        )));
    }
    let dataset = file_name(&path);
    let specs = args.plm.settings(args.rouge_stemmer).specs(&args.metrics)?;
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    let report = block_on(blindspot::stress::prefer::run_preference(
        &dataset,
        &cases,
        &specs,
        &args.plm.engine(),
        async |done, _| {
            bar.set_position(done as u64);
            true
        },
    ))?;
    bar.finish_and_clear();
    write_json(&args.out, &report)?;
    let mut table = format!("{:<26}", "error");
    for m in &report.metrics {
        table.push_str(&format!(" {:>8}", m.metric.id));
    }
    table.push('\n');
    for (e, error) in report.error_types.iter().enumerate() {
        table.push_str(&format!("{error:<26}"));
        for m in &report.metrics {
            table.push_str(&format!(" {:>8.3}", m.ref_based[e].accuracy));
        }
        table.push('\n');
    }
    table.push_str(&format!("{:<26}", "all"));
    for m in &report.metrics {
        table.push_str(&format!(" {:>8.3}", m.ref_based_overall.accuracy));
    }
    eprintln!(
        "reference-based accuracy (paraphrase preferred over the adversarial text):\n{table}"
    );
    Ok(())
}

/// Arguments of `blindspot audit`.
#[derive(clap::Args)]
pub struct AuditArgs {
    /// SummEval-format JSONL (src, ref, refs, systems with summary and expert scores).
    #[arg(long)]
    summeval: String,
    /// Comma-separated metric ids, model-based ones included.
    #[arg(long, value_delimiter = ',', default_value = blindspot::metrics::registry::DEFAULT_METRIC_IDS.as_str())]
    metrics: Vec<String>,
    /// Apply the Porter stemmer before ROUGE matching.
    #[arg(long)]
    rouge_stemmer: bool,
    /// Write the full results (JSON) here; `-` is stdout.
    #[arg(long, default_value = "-")]
    out: String,
    /// GPT-2 checkpoint folder or .bpk: adds each summary's perplexity
    /// (after `<|endoftext|>`) as a correlate.
    #[arg(long)]
    ppl_model: Option<std::path::PathBuf>,
    /// Models of the model-based metrics.
    #[command(flatten)]
    plm: super::plm_scores::PlmArgs,
}

/// Rows of a dataset file that were skipped, a warning each (the first 10,
/// then how many more).
fn warn_skipped(path: &str, problems: &[data::RowProblem]) {
    const SHOWN: usize = 10;
    for p in problems.iter().take(SHOWN) {
        eprintln!("warning: {path}:{}: {} (row skipped)", p.line, p.message);
    }
    if problems.len() > SHOWN {
        eprintln!(
            "warning: {path}: {} more rows skipped ({} in all)",
            problems.len() - SHOWN,
            problems.len()
        );
    }
}

/// Runs `blindspot audit`.
pub fn run_audit(args: &AuditArgs) -> Result<(), CliError> {
    let text = read_text(&args.summeval)?;
    let loaded = data::load_summeval(&text);
    warn_skipped(&args.summeval, &loaded.problems);
    if loaded.rows.is_empty() {
        return Err(CliError::Suite(format!(
            "{}: no SummEval document (a row needs the summary, its source, references and \
             human scores{})",
            args.summeval,
            if loaded.problems.is_empty() {
                ""
            } else {
                "; every row was skipped, see the warnings above"
            }
        )));
    }
    let dataset = file_name(&args.summeval);
    let specs = args.plm.settings(args.rouge_stemmer).specs(&args.metrics)?;
    let engine = args.plm.engine();
    // Each summary's GPT-2 perplexity as a correlate.
    let ppl_model = args.ppl_model.as_ref().map(|dir| dir.display().to_string());
    let bar = items_bar(loaded.rows.len());
    let report = block_on(blindspot::stress::audit::run_audit(
        &dataset,
        &loaded.rows,
        &specs,
        &engine,
        ppl_model.as_deref(),
        async |done, _| {
            bar.set_position(done as u64);
            true
        },
    ))?;
    bar.finish_and_clear();
    write_json(&args.out, &report)?;
    let mut table = format!("{:<8}", "kendall");
    for d in &report.dimensions {
        table.push_str(&format!(" {:>12}", d));
    }
    for c in &report.correlates {
        table.push_str(&format!(" {:>10}", c));
    }
    table.push('\n');
    // Kendall's tau of a column that does not vary (one summary, human
    // scores all equal) is undefined: said, not printed as NaN.
    let cell = |tau: f64, width: usize| {
        if tau.is_nan() {
            format!(" {:>width$}", "n/a")
        } else {
            format!(" {tau:>width$.3}")
        }
    };
    let mut undefined = false;
    for m in &report.metrics {
        table.push_str(&format!("{:<8}", m.metric.id));
        for h in &m.human {
            undefined |= h.kendall.is_nan();
            table.push_str(&cell(h.kendall, 12));
        }
        for c in &m.correlates {
            undefined |= c.kendall.is_nan();
            table.push_str(&cell(c.kendall, 10));
        }
        table.push('\n');
    }
    if undefined {
        table.push_str(
            "n/a: undefined, one of the two columns does not vary (fewer than two summaries, \
             or all its values equal)\n",
        );
    }
    eprintln!(
        "{} summaries, {} systems; example-level Kendall tau with humans and correlates:\n{table}",
        report.examples, report.systems
    );
    Ok(())
}
