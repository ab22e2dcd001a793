//! The model-based columns of `blindspot score` (BERTScore, GPT-PPL,
//! MLM-PPL, MENLI) and `blindspot mauve`: models found, loaded once each,
//! scored over the whole input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use blindspot::metrics::mauve::{self, Options as MauveOptions};
use blindspot::metrics::menli::{self, Direction, Formula, Setup, Task};
use blindspot::metrics::{
    self, MetricOptions, Score, ScorePart, Segment, bertscore, model_metric, perplexity,
};
use blindspot::models::{Plm, Precision, registry};
use blindspot::stress::suite::{ModelColumns, ModelRows, ModelScorer};
use futures::executor::block_on;

use super::CliError;

/// Options of the model-based metrics (flattened into `blindspot score`).
#[derive(clap::Args)]
pub struct PlmArgs {
    /// Model folder or .bpk for bertscore-p/r/f (default: models/all-MiniLM-L6-v2).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// Model of a model-based metric, `METRIC=DIR` (bertscore, gpt-ppl, mlm-ppl, menli); repeatable.
    #[arg(long = "model", value_parser = parse_model_arg)]
    pub models: Vec<(String, PathBuf)>,
    /// BERTScore layer (default: the registry's layer for the model, else the last).
    #[arg(long)]
    pub layer: Option<usize>,
    /// Weight BERTScore tokens by idf over all references of the input (bert_score `idf=True`).
    #[arg(long)]
    pub idf: bool,
    /// Rescale BERTScore with the model's baseline, (x - b)/(1 - b) (bert_score
    /// `rescale_with_baseline`): bert_score's published ones, Blindspot's for MiniLM;
    /// an error for models without one.
    #[arg(long)]
    pub rescale_with_baseline: bool,
    /// GPT-PPL: put `<|endoftext|>` first so the text's first token is scored too.
    #[arg(long)]
    pub ppl_bos: bool,
    /// MENLI's task defaults: mt (e, both directions), summ (e-c, hypothesis as premise),
    /// summ-free (-c, source as premise).
    #[arg(long, default_value = "mt")]
    pub menli_task: Task,
    /// MENLI formula, overriding the task's: e, -c, e-n, e-c, e-n-2c.
    #[arg(long)]
    pub menli_formula: Option<Formula>,
    /// MENLI direction, overriding the task's: ref-hyp, hyp-ref, both.
    #[arg(long)]
    pub menli_direction: Option<Direction>,
    /// Combine MENLI with this metric: w*NLI + (1-w)*M, both min-max rescaled over the input.
    #[arg(long)]
    pub menli_combine: Option<String>,
    /// Weight of the NLI score in the combination (default: the task's, MT 0.2, summarisation 0.8).
    #[arg(long)]
    pub menli_weight: Option<f64>,
}

fn parse_model_arg(s: &str) -> Result<(String, PathBuf), String> {
    let (metric, dir) = s
        .split_once('=')
        .ok_or_else(|| format!("expected METRIC=DIR, got '{s}'"))?;
    let metric = metric.trim();
    let known = ["bertscore", "gpt-ppl", "mlm-ppl", "menli", "mauve"];
    if !known.contains(&metric) {
        return Err(format!(
            "unknown model-based metric '{metric}' (known: {})",
            known.join(", ")
        ));
    }
    Ok((metric.to_owned(), PathBuf::from(dir)))
}

/// Model-based columns for `blindspot score`.
pub struct PlmColumns {
    /// Metric ids, in the order asked.
    pub ids: Vec<&'static str>,
    /// Per segment, one score per id.
    pub rows: Vec<Vec<Score>>,
    /// Corpus scores (the mean of the segment scores).
    pub corpus: Vec<Score>,
    /// Signatures.
    pub signatures: Vec<String>,
}

fn model_error(path: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Model {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Where the registry's default checkpoint of `metric` is on this machine:
/// its `local` folder under the working directory, beside the executable, or
/// in the source checkout.
fn default_model(metric: &str) -> Result<PathBuf, CliError> {
    let entry = registry::default_for(metric);
    let local = entry.as_ref().and_then(|m| m.local.clone());
    let mut candidates = Vec::new();
    if let Some(local) = &local {
        candidates.push(PathBuf::from(local));
        if let Some(exe_dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            candidates.push(exe_dir.join(local));
        }
        candidates.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(local));
    }
    if let Some(found) = candidates.into_iter().find(|c| c.exists()) {
        return Ok(found);
    }
    let hint = entry.map_or(String::new(), |m| {
        format!(
            " (its default, {}, is at https://huggingface.co/{}: download config.json, tokenizer.json and model.safetensors into a folder)",
            m.id, m.id
        )
    });
    Err(CliError::Model {
        path: "-".into(),
        message: format!("{metric} needs a model: pass --model {metric}=DIR{hint}"),
    })
}

/// Loaded models, one per folder.
#[derive(Default)]
struct Models(HashMap<PathBuf, Plm>);

impl Models {
    fn get(&mut self, dir: &Path) -> Result<&Plm, CliError> {
        if !self.0.contains_key(dir) {
            let plm = super::models::load_plm(dir, Precision::F32)?;
            self.0.insert(dir.to_path_buf(), plm);
        }
        Ok(&self.0[dir])
    }
}

/// The model-based metrics of `blindspot stress`: models loaded once, each
/// batch of perturbed texts scored as `blindspot score` would.
pub struct SuiteScorer<'a> {
    args: &'a PlmArgs,
    models: Models,
}

impl<'a> SuiteScorer<'a> {
    /// A scorer with `args`' models; refuses what depends on the whole set
    /// (idf, MENLI's min-max combination), which batches would change.
    pub fn new(args: &'a PlmArgs) -> Result<Self, CliError> {
        let refuse = |what: &str| {
            Err(CliError::Suite(format!(
                "{what} depends on the whole scored set; stress suites score in batches, so it is not available there"
            )))
        };
        if args.idf {
            return refuse("--idf");
        }
        if args.menli_combine.is_some() {
            return refuse("--menli-combine");
        }
        Ok(Self {
            args,
            models: Models::default(),
        })
    }
}

impl ModelScorer for SuiteScorer<'_> {
    fn serves(&self, id: &str) -> bool {
        model_metric(id).is_some()
    }

    fn score(&mut self, ids: &[&str], rows: &ModelRows) -> Result<ModelColumns, String> {
        let hyps: Vec<String> = rows.hyps.iter().map(|h| (*h).to_owned()).collect();
        let srcs: Vec<Option<String>> = rows.srcs.iter().map(|s| s.map(str::to_owned)).collect();
        let input = Input {
            hyps: &hyps,
            refs: &rows.refs,
            srcs: &srcs,
        };
        let scored =
            columns_with(self.args, &mut self.models, &input, ids).map_err(|e| e.to_string())?;
        // `columns_with` groups BERTScore's parts; hand them back in the order asked.
        let order = ids
            .iter()
            .map(|id| scored.ids.iter().position(|c| c == id))
            .collect::<Option<Vec<usize>>>()
            .ok_or("a model metric produced no column")?;
        Ok(ModelColumns {
            values: order
                .iter()
                .map(|&c| scored.rows.iter().map(|r| r[c].value).collect())
                .collect(),
            signatures: order
                .iter()
                .map(|&c| scored.signatures[c].clone())
                .collect(),
        })
    }
}

/// The input of `blindspot score`.
pub struct Input<'a> {
    /// Hypotheses.
    pub hyps: &'a [String],
    /// References of each hypothesis.
    pub refs: &'a [Vec<&'a str>],
    /// Sources.
    pub srcs: &'a [Option<String>],
}

fn model_dir(args: &PlmArgs, registry_metric: &str) -> Result<PathBuf, CliError> {
    if let Some((_, dir)) = args.models.iter().find(|(m, _)| m == registry_metric) {
        return Ok(dir.clone());
    }
    if registry_metric == "bertscore"
        && let Some(dir) = &args.model_dir
    {
        return Ok(dir.clone());
    }
    default_model(registry_metric)
}

fn part(name: &'static str, value: f64) -> ScorePart {
    ScorePart { name, value }
}

fn score(metric: &'static str, value: f64, parts: Vec<ScorePart>, signature: &str) -> Score {
    Score {
        metric,
        value,
        parts,
        signature: signature.to_owned(),
    }
}

/// One metric's per-segment scores.
struct Column {
    id: &'static str,
    scores: Vec<Score>,
    signature: String,
}

/// Scores every segment with each model-based metric in `wanted`.
pub fn columns(args: &PlmArgs, input: &Input, wanted: &[&str]) -> Result<PlmColumns, CliError> {
    columns_with(args, &mut Models::default(), input, wanted)
}

fn columns_with(
    args: &PlmArgs,
    models: &mut Models,
    input: &Input,
    wanted: &[&str],
) -> Result<PlmColumns, CliError> {
    let mut columns: Vec<Column> = Vec::new();
    let bertscore_ids: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|id| bertscore::METRIC_IDS.contains(id))
        .collect();
    for &id in wanted {
        if columns.iter().any(|c| c.id == id) {
            continue;
        }
        if bertscore::METRIC_IDS.contains(&id) {
            columns.extend(bertscore_columns(args, models, input, &bertscore_ids)?);
        } else {
            columns.push(column(args, models, input, id)?);
        }
    }
    let n = input.hyps.len().max(1) as f64;
    let ids: Vec<&'static str> = columns.iter().map(|c| c.id).collect();
    let rows = (0..input.hyps.len())
        .map(|i| columns.iter().map(|c| c.scores[i].clone()).collect())
        .collect();
    let corpus = columns
        .iter()
        .map(|c| {
            let mean = c.scores.iter().map(|s| s.value).sum::<f64>() / n;
            score(c.id, mean, vec![], &c.signature)
        })
        .collect();
    Ok(PlmColumns {
        ids,
        rows,
        corpus,
        signatures: columns.into_iter().map(|c| c.signature).collect(),
    })
}

fn column(
    args: &PlmArgs,
    models: &mut Models,
    input: &Input,
    id: &str,
) -> Result<Column, CliError> {
    let info = model_metric(id).ok_or_else(|| metrics::MetricError::UnknownMetric(id.into()))?;
    let dir = model_dir(args, info.registry_metric)?;
    let plm = models.get(&dir)?;
    let hyps: Vec<&str> = input.hyps.iter().map(String::as_str).collect();
    let precision = &plm.precision.to_string();
    match info.id {
        "gpt-ppl" | "mlm-ppl" => {
            let (result, signature) = if info.id == "gpt-ppl" {
                (
                    block_on(perplexity::causal(plm, &hyps, args.ppl_bos)),
                    perplexity::causal_signature(&plm.name, args.ppl_bos, precision),
                )
            } else {
                (
                    block_on(perplexity::pseudo(plm, &hyps)),
                    perplexity::pseudo_signature(&plm.name, precision),
                )
            };
            let result = result.map_err(|e| model_error(&dir, e))?;
            let scores = result
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let ppl = p.perplexity.ok_or_else(|| {
                        model_error(
                            &dir,
                            format!(
                                "{}: segment {} has no token to score{}",
                                info.id,
                                i + 1,
                                if info.id == "gpt-ppl" {
                                    " (one token has no context: add --ppl-bos to score it after <|endoftext|>)"
                                } else {
                                    " (it is empty)"
                                }
                            ),
                        )
                    })?;
                    let scored = p.surprisal.iter().flatten().count() as f64;
                    Ok(score(
                        info.id,
                        -ppl,
                        vec![
                            part("perplexity", ppl),
                            part("tokens_scored", scored),
                            part("truncated", f64::from(u8::from(p.truncated))),
                        ],
                        &signature,
                    ))
                })
                .collect::<Result<Vec<_>, CliError>>()?;
            Ok(Column {
                id: info.id,
                scores,
                signature,
            })
        }
        "menli" => menli_column(args, models, &dir, input),
        other => Err(metrics::MetricError::UnknownMetric(other.into()).into()),
    }
}

fn menli_column(
    args: &PlmArgs,
    models: &mut Models,
    dir: &Path,
    input: &Input,
) -> Result<Column, CliError> {
    let task = args.menli_task.setup();
    let setup = Setup {
        formula: args.menli_formula.unwrap_or(task.formula),
        direction: args.menli_direction.unwrap_or(task.direction),
        weight: args.menli_weight.unwrap_or(task.weight),
        ..task
    };
    if !(0.0..=1.0).contains(&setup.weight) {
        return Err(model_error(dir, "--menli-weight must be between 0 and 1"));
    }
    let hyps: Vec<&str> = input.hyps.iter().map(String::as_str).collect();
    let srcs: Vec<Option<&str>> = input.srcs.iter().map(Option::as_deref).collect();
    let plm = models.get(dir)?;
    let mut signature = menli::signature(&plm.name, &setup, &plm.precision.to_string());
    let nli = block_on(menli::score_set(plm, &hyps, input.refs, &srcs, &setup))
        .map_err(|e| model_error(dir, e))?;
    let combined = match &args.menli_combine {
        None => None,
        Some(other) => {
            let other = other.trim();
            let values = other_metric_values(args, models, input, other)?;
            let nli_values: Vec<f64> = nli.iter().map(|s| s.value).collect();
            let mixed = menli::combine(&nli_values, &values, setup.weight)
                .map_err(|e| model_error(dir, e))?;
            signature.push_str(&format!("|combine:{other}|w:{}", setup.weight));
            Some((values, mixed))
        }
    };
    let scores = nli
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut parts = vec![
                part("nli", s.value),
                part("e", s.forward.e),
                part("n", s.forward.n),
                part("c", s.forward.c),
                part("e_backward", s.backward.e),
                part("n_backward", s.backward.n),
                part("c_backward", s.backward.c),
            ];
            let value = match &combined {
                Some((other, mixed)) => {
                    parts.push(part("other", other[i]));
                    mixed[i]
                }
                None => s.value,
            };
            score("menli", value, parts, &signature)
        })
        .collect();
    Ok(Column {
        id: "menli",
        scores,
        signature,
    })
}

/// Segment values of the metric MENLI is combined with.
fn other_metric_values(
    args: &PlmArgs,
    models: &mut Models,
    input: &Input,
    id: &str,
) -> Result<Vec<f64>, CliError> {
    if id == "menli" {
        return Err(model_error(
            Path::new("-"),
            "MENLI cannot be combined with itself",
        ));
    }
    if bertscore::METRIC_IDS.contains(&id) {
        let cols = bertscore_columns(args, models, input, &[id])?;
        return Ok(cols[0].scores.iter().map(|s| s.value).collect());
    }
    if model_metric(id).is_some() {
        return Ok(column(args, models, input, id)?
            .scores
            .iter()
            .map(|s| s.value)
            .collect());
    }
    let metric = metrics::create(id, MetricOptions::default())?;
    input
        .hyps
        .iter()
        .zip(input.refs)
        .zip(input.srcs)
        .map(|((hyp, refs), src)| {
            let segment = Segment {
                hyp,
                refs,
                src: src.as_deref(),
            };
            Ok(metric.sentence_score(&segment)?.value)
        })
        .collect()
}

/// BERTScore columns on the model `--model bertscore=DIR` or `--model-dir`
/// names (MiniLM from models/ by default), at `--layer`, with `--idf` over
/// all references of the input.
fn bertscore_columns(
    args: &PlmArgs,
    models: &mut Models,
    input: &Input,
    wanted: &[&str],
) -> Result<Vec<Column>, CliError> {
    let dir = model_dir(args, "bertscore")?;
    let plm = models.get(&dir)?;
    let name = plm.name.clone();
    let layer = args.layer.unwrap_or_else(|| {
        registry::models()
            .into_iter()
            .find(|m| m.id.ends_with(&format!("/{name}")) || m.id == name)
            .and_then(|m| m.layer)
            .unwrap_or(plm.config.num_layers)
    });
    let hyps: Vec<&str> = input.hyps.iter().map(String::as_str).collect();
    let baseline = if args.rescale_with_baseline {
        Some(bertscore::baseline_for(&name, layer).map_err(|e| model_error(&dir, e))?)
    } else {
        None
    };
    let mut scores = block_on(bertscore::score_set(
        plm, &hyps, input.refs, layer, args.idf,
    ))
    .map_err(|e| model_error(&dir, e))?;
    let mut signature = bertscore::signature(&name, layer, args.idf, &plm.precision.to_string());
    if let Some(b) = baseline {
        scores = scores
            .into_iter()
            .map(|s| bertscore::rescale(s, b.prf))
            .collect();
        signature.push_str(&b.signature_suffix());
    }
    Ok(bertscore::METRIC_IDS
        .into_iter()
        .filter(|id| wanted.contains(id))
        .map(|id| {
            let scores = scores
                .iter()
                .map(|s| {
                    let value = match id {
                        "bertscore-p" => s.p,
                        "bertscore-r" => s.r,
                        _ => s.f,
                    };
                    let parts = vec![part("precision", s.p), part("recall", s.r), part("f1", s.f)];
                    score(id, value, parts, &signature)
                })
                .collect();
            Column {
                id,
                scores,
                signature: signature.clone(),
            }
        })
        .collect())
}

/// Arguments of `blindspot mauve`.
#[derive(clap::Args)]
pub struct MauveArgs {
    /// Hypotheses (model text, P), one per line.
    #[arg(long)]
    hyps: PathBuf,
    /// References (human text, Q), one per line.
    #[arg(long)]
    refs: PathBuf,
    /// Featurising model folder or .bpk (MAUVE's paper uses GPT-2; any registry model works).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Number of clusters (default: max(2, round(min(n_p, n_q) / 10))).
    #[arg(long)]
    clusters: Option<usize>,
    /// k-means seed.
    #[arg(long, default_value_t = 25)]
    seed: u64,
    /// Print the histograms and the divergence curve as JSON.
    #[arg(long)]
    json: bool,
}

fn read_lines(path: &Path) -> Result<Vec<String>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| model_error(path, e))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// `blindspot mauve`: MAUVE between the hypotheses and the references.
pub fn run_mauve(args: &MauveArgs) -> Result<(), CliError> {
    let dir = match &args.model {
        Some(dir) => dir.clone(),
        None => default_model("mauve")?,
    };
    let (hyps, refs) = (read_lines(&args.hyps)?, read_lines(&args.refs)?);
    if hyps.len() < 2 || refs.len() < 2 {
        let e = mauve::MauveError::TooFew {
            p: hyps.len(),
            q: refs.len(),
        };
        return Err(model_error(&args.hyps, e));
    }
    let mut models = Models::default();
    let plm = models.get(&dir)?;
    let featurise = |texts: &[String], what: &str| {
        eprintln!("featurising {} {what} with {}...", texts.len(), plm.name);
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        block_on(mauve::features(plm, &texts)).map_err(|e| model_error(&dir, e))
    };
    let p = featurise(&hyps, "hypotheses")?;
    let q = featurise(&refs, "references")?;
    let options = MauveOptions {
        clusters: args.clusters,
        seed: args.seed,
        ..MauveOptions::default()
    };
    let result = mauve::compute(&p, &q, &options).map_err(|e| model_error(&dir, e))?;
    let signature = mauve::signature(&plm.name, &options, &plm.precision.to_string());
    if args.json {
        let out = serde_json::json!({ "result": result, "signature": signature,
            "hypotheses": hyps.len(), "references": refs.len() });
        println!("{out}");
    } else {
        println!("MAUVE              {:.4}", result.mauve);
        println!("frontier integral  {:.4}", result.frontier_integral);
        println!("MAUVE*             {:.4}", result.mauve_star);
        println!(
            "{} hypotheses, {} references, {} clusters, {} PCA dimensions",
            hyps.len(),
            refs.len(),
            result.clusters,
            result.dimensions
        );
        println!("signature: {signature}");
    }
    Ok(())
}
