//! The model options of `blindspot score`, `stress`, `prefer` and `audit`
//! (flags that become the core's [`Settings`]), the model store that loads
//! their folders, and `blindspot mauve`. Scoring itself is the core's
//! [`Engine`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use blindspot::metrics::engine::EngineError;
use blindspot::metrics::mauve::{self, Options as MauveOptions};
use blindspot::metrics::spec::OptionValue;
use blindspot::metrics::{Engine, MetricId, ModelSlot, ModelStore, Settings};
use blindspot::models::{Plm, Precision, registry};
use futures::executor::block_on;

use super::CliError;

/// Options of the metrics (flattened into the commands that score): models,
/// `--opt` for any option of any metric, and shorter flags for common ones.
#[derive(clap::Args)]
pub struct PlmArgs {
    /// Model folder or .bpk for bertscore-p/r/f (default: models/all-MiniLM-L6-v2).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// Model of a model-based metric, `METRIC=DIR` (bertscore, gpt-ppl, mlm-ppl, menli, mauve...; see `blindspot metrics`); repeatable.
    #[arg(long = "model", value_parser = parse_model_arg)]
    pub models: Vec<(ModelSlot, PathBuf)>,
    /// An option of a metric: `KIND.OPTION=VALUE` (`moverscore-v1.ngram=2`,
    /// `bertscore.layer=9`), or `OPTION=VALUE` for every metric asked for that
    /// has it (`idf=true`); repeatable, later ones win. `blindspot metrics`
    /// lists each metric's options with their defaults.
    #[arg(long = "opt", value_name = "[KIND.]OPTION=VALUE")]
    pub opts: Vec<OptionValue>,
    /// Same as `--opt bertscore.layer=N`.
    #[arg(long)]
    pub layer: Option<usize>,
    /// Same as `--opt idf=true`: idf weights over the input's whole set, BERTScore's
    /// over its references, MoverScore's over references and hypotheses apart; in
    /// `stress`, each level and seed is a set of its own.
    #[arg(long)]
    pub idf: bool,
    /// Same as `--opt bertscore.rescale=true`: BERTScore rescaled with the model's baseline.
    #[arg(long)]
    pub rescale_with_baseline: bool,
    /// Same as `--opt gpt-ppl.bos=true`: the text's first token scored after `<|endoftext|>`.
    #[arg(long)]
    pub ppl_bos: bool,
    /// Same as `--opt menli.task=TASK` (mt, summ, summ-free).
    #[arg(long)]
    pub menli_task: Option<String>,
    /// Same as `--opt menli.formula=F` (e, -c, e-n, e-c, e-n-2c).
    #[arg(long, allow_hyphen_values = true)]
    pub menli_formula: Option<String>,
    /// Same as `--opt menli.direction=D` (ref-hyp, hyp-ref, both).
    #[arg(long)]
    pub menli_direction: Option<String>,
    /// Same as `--opt menli.combine=METRIC`: w*NLI + (1-w)*M, both min-max rescaled over the input.
    #[arg(long)]
    pub menli_combine: Option<MetricId>,
    /// Same as `--opt menli.weight=W` (default: the task's, MT 0.2, summarisation 0.8).
    #[arg(long, requires = "menli_combine")]
    pub menli_weight: Option<f64>,
    /// Same as `--opt moverscore-v1.ngram=N`.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub moverscore_ngram: Option<u16>,
}

impl PlmArgs {
    /// The core's settings these flags (and the ROUGE stemmer) describe:
    /// the shorter flags first, applied where a metric has the option, then
    /// each `--opt`, which must apply to a metric asked for.
    pub fn settings(&self, rouge_stemmer: bool) -> Settings {
        let mut models: std::collections::BTreeMap<ModelSlot, String> = self
            .models
            .iter()
            .map(|(slot, dir)| (*slot, dir.display().to_string()))
            .collect();
        if let Some(dir) = &self.model_dir {
            models
                .entry(ModelSlot::BertScore)
                .or_insert_with(|| dir.display().to_string());
        }
        let alias = |kind: Option<&str>, name: &str, value: serde_json::Value| {
            Some(OptionValue::new(kind, name, value).lenient())
        };
        let flags = [
            rouge_stemmer
                .then(|| alias(None, "stemmer", true.into()))
                .flatten(),
            self.layer
                .and_then(|l| alias(Some("bertscore"), "layer", l.into())),
            self.idf.then(|| alias(None, "idf", true.into())).flatten(),
            self.rescale_with_baseline
                .then(|| alias(Some("bertscore"), "rescale", true.into()))
                .flatten(),
            self.ppl_bos
                .then(|| alias(Some("gpt-ppl"), "bos", true.into()))
                .flatten(),
            self.menli_task
                .as_ref()
                .and_then(|t| alias(Some("menli"), "task", t.as_str().into())),
            self.menli_formula
                .as_ref()
                .and_then(|f| alias(Some("menli"), "formula", f.as_str().into())),
            self.menli_direction
                .as_ref()
                .and_then(|d| alias(Some("menli"), "direction", d.as_str().into())),
            self.menli_combine
                .and_then(|m| alias(Some("menli"), "combine", m.as_str().into())),
            self.menli_weight
                .and_then(|w| alias(Some("menli"), "weight", w.into())),
            self.moverscore_ngram
                .and_then(|n| alias(Some("moverscore-v1"), "ngram", n.into())),
        ];
        Settings {
            models,
            options: flags
                .into_iter()
                .flatten()
                .chain(self.opts.iter().cloned())
                .collect(),
        }
    }

    /// An engine whose models are these flags' folders (or the registry's
    /// defaults found on this machine).
    pub fn engine(&self) -> Engine {
        Engine::new(FolderModels::default())
    }
}

fn parse_model_arg(s: &str) -> Result<(ModelSlot, PathBuf), String> {
    let (slot, dir) = s
        .split_once('=')
        .ok_or_else(|| format!("expected METRIC=DIR, got '{s}'"))?;
    Ok((
        slot.parse().map_err(|e| format!("{e}"))?,
        PathBuf::from(dir),
    ))
}

/// Where the registry's default checkpoint of `slot` is on this machine:
/// its `local` folder under the working directory, beside the executable, or
/// in the source checkout.
pub fn default_model(slot: ModelSlot) -> Result<PathBuf, CliError> {
    let entry = registry::default_for(slot.as_str());
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
    let hint = entry.map_or(String::new(), |m| match &m.encoder {
        Some(encoder) => format!(
            " (its default, {id}, is at https://huggingface.co/{id}: download hparams.yaml and \
             checkpoints/model.ckpt, and config.json and tokenizer.json from \
             https://huggingface.co/{encoder}, into one folder)",
            id = m.id
        ),
        None => {
            let files = match m.files.as_slice() {
                [] => "config.json, tokenizer.json and model.safetensors".to_owned(),
                [one] => one.clone(),
                [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
            };
            format!(
                " (its default, {id}, is at https://huggingface.co/{id}: download {files} into \
                 a folder)",
                id = m.id
            )
        }
    });
    Err(CliError::Model {
        path: "-".into(),
        message: format!("{slot} needs a model: pass --model {slot}=DIR{hint}"),
    })
}

/// Models loaded from folders (or .bpk files), once each.
#[derive(Default)]
pub struct FolderModels(RefCell<HashMap<PathBuf, Rc<Plm>>>);

impl FolderModels {
    fn load(&self, dir: &Path) -> Result<Rc<Plm>, CliError> {
        if let Some(plm) = self.0.borrow().get(dir) {
            return Ok(plm.clone());
        }
        let plm = Rc::new(super::models::load_plm(dir, Precision::F32)?);
        self.0.borrow_mut().insert(dir.to_path_buf(), plm.clone());
        Ok(plm)
    }
}

impl ModelStore for FolderModels {
    fn model(&self, slot: ModelSlot, name: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        let dir = match name {
            Some(dir) => PathBuf::from(dir),
            None => default_model(slot).map_err(|e| EngineError::NoModel(e.to_string()))?,
        };
        self.load(&dir).map_err(|e| match e {
            CliError::Model { path, message } | CliError::Tokenizer { path, message } => {
                EngineError::Load {
                    model: path,
                    message,
                }
            }
            other => EngineError::NoModel(other.to_string()),
        })
    }
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
    let text = super::input::read_text(&path.to_string_lossy())?;
    Ok(text.lines().map(str::to_owned).collect())
}

/// `blindspot mauve`: MAUVE between the hypotheses and the references.
pub fn run_mauve(args: &MauveArgs) -> Result<(), CliError> {
    let dir = match &args.model {
        Some(dir) => dir.clone(),
        None => default_model(ModelSlot::Mauve)?,
    };
    let (hyps, refs) = (read_lines(&args.hyps)?, read_lines(&args.refs)?);
    let plm = FolderModels::default().load(&dir)?;
    let options = MauveOptions {
        clusters: args.clusters,
        seed: args.seed,
        ..MauveOptions::default()
    };
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} texts, ETA {eta}")
            .expect("valid template"),
    );
    let scored = block_on(mauve::score_texts(
        &plm,
        &hyps,
        &refs,
        &options,
        async |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            true
        },
    ));
    bar.finish_and_clear();
    let scored = scored.map_err(|e| match e {
        // The model's failures name its folder; the texts' do not.
        mauve::MauveError::Model(_) => model_error(&dir, e),
        e => CliError::Suite(e.to_string()),
    })?;
    let (result, signature) = (&scored.result, &scored.signature);
    if args.json {
        let out = serde_json::json!({ "result": result, "signature": signature,
            "hypotheses": scored.hypotheses, "references": scored.references });
        println!("{out}");
    } else {
        println!("MAUVE              {:.4}", result.mauve);
        println!("frontier integral  {:.4}", result.frontier_integral);
        println!("MAUVE*             {:.4}", result.mauve_star);
        println!(
            "{} hypotheses, {} references, {} clusters, {} PCA dimensions",
            scored.hypotheses, scored.references, result.clusters, result.dimensions
        );
        println!("signature: {signature}");
    }
    Ok(())
}

fn model_error(path: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Model {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}
