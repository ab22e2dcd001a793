//! `blindspot prepare`, `blindspot models` and `blindspot embed`: the PLM
//! engine from the command line.

use std::path::PathBuf;

use blindspot::models::{ModelFiles, Plm, Precision, read_back_blocking, registry, weights};
use burn::tensor::Device;

use super::CliError;

/// Arguments of `blindspot prepare`.
#[derive(clap::Args)]
pub struct PrepareArgs {
    /// Checkpoint folder (config.json, tokenizer.json, model.safetensors or shards).
    model_dir: PathBuf,
    /// Output `.bpk` file.
    out: PathBuf,
    /// Weight precision: `q8` (int8, per-block scales) or `f32`.
    #[arg(long, default_value = "q8")]
    quant: Precision,
}

/// Arguments of `blindspot embed`.
#[derive(clap::Args)]
pub struct EmbedArgs {
    /// Checkpoint folder or prepared `.bpk` file.
    #[arg(long)]
    model: PathBuf,
    /// Layer to print (default: the last).
    #[arg(long)]
    layer: Option<usize>,
    /// Weight precision: `f32` or `q8`.
    #[arg(long, default_value = "f32")]
    quant: Precision,
    /// Texts to encode.
    #[arg(required = true)]
    texts: Vec<String>,
}

fn model_error(path: &std::path::Path, e: impl std::fmt::Display) -> CliError {
    CliError::Model {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Writes a prepared (optionally int8) model file a site can host.
pub fn run_prepare(args: &PrepareArgs) -> Result<(), CliError> {
    let files =
        ModelFiles::from_path(&args.model_dir).map_err(|e| model_error(&args.model_dir, e))?;
    let bytes = weights::prepare(files, args.quant).map_err(|e| model_error(&args.model_dir, e))?;
    std::fs::write(&args.out, &bytes).map_err(CliError::Output)?;
    eprintln!(
        "wrote {} ({:.1} MB, {:?})",
        args.out.display(),
        bytes.len() as f64 / 1e6,
        args.quant
    );
    Ok(())
}

/// Lists the model registry (`models.toml`).
pub fn list_models(json: bool) -> Result<(), CliError> {
    let models = registry::models();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&models).expect("registry serializes")
        );
        return Ok(());
    }
    println!(
        "{:<42} {:<34} {:>8} {:<11} {:>5}  metrics",
        "id", "architecture", "MB", "licence", "layer"
    );
    for m in models {
        let layer = m.layer.map_or("-".into(), |l| l.to_string());
        println!(
            "{:<42} {:<34} {:>8.1} {:<11} {:>5}  {}",
            m.id,
            m.architecture,
            m.size_mb,
            m.licence,
            layer,
            m.metrics.join(",")
        );
    }
    Ok(())
}

/// Prints one layer's hidden states per text as JSON lines (`tokens`, `truncated`, `hidden`).
pub fn run_embed(args: &EmbedArgs) -> Result<(), CliError> {
    let files = ModelFiles::from_path(&args.model).map_err(|e| model_error(&args.model, e))?;
    let name = args
        .model
        .file_name()
        .map_or("model".into(), |n| n.to_string_lossy().into_owned());
    let plm = Plm::load(&name, files, &Device::flex(), args.quant)
        .map_err(|e| model_error(&args.model, e))?;
    let layers = plm.config.num_layers;
    let layer = args.layer.unwrap_or(layers);
    if layer > layers {
        return Err(model_error(
            &args.model,
            format!("layer {layer} does not exist (0..={layers})"),
        ));
    }
    for text in &args.texts {
        let enc = plm.encode(text).map_err(|e| model_error(&args.model, e))?;
        if enc.truncated {
            eprintln!("note: input cut to the model's {} tokens", enc.tokens.len());
        }
        let ids: Vec<u32> = enc.tokens.iter().map(|t| t.id).collect();
        let out = plm
            .forward(std::slice::from_ref(&ids))
            .map_err(|e| model_error(&args.model, e))?;
        let (values, [_, n, w]) = read_back_blocking(out.hidden_states[layer].clone())
            .map_err(|e| model_error(&args.model, e))?;
        let hidden: Vec<&[f32]> = (0..n).map(|t| &values[t * w..(t + 1) * w]).collect();
        let line = serde_json::json!({ "tokens": ids, "truncated": enc.truncated, "layer": layer, "hidden": hidden });
        println!("{line}");
    }
    Ok(())
}

/// BERTScore columns for `blindspot score`.
pub struct PlmColumns {
    /// Metric ids, in the order asked.
    pub ids: Vec<&'static str>,
    /// Per segment, one score per id.
    pub rows: Vec<Vec<blindspot::metrics::Score>>,
    /// Corpus scores (the mean of the segment scores, as bert_score reports).
    pub corpus: Vec<blindspot::metrics::Score>,
    /// Signatures.
    pub signatures: Vec<String>,
}

/// Scores every pair with BERTScore on the model `--model-dir` names
/// (MiniLM from models/ by default), at `--layer`, with `--idf` over all
/// references of the input.
pub fn bertscore_rows(
    args: &super::ScoreArgs,
    hyps: &[String],
    refs: &[Vec<&str>],
    wanted: &[&str],
) -> Result<PlmColumns, CliError> {
    use blindspot::metrics::{Score, ScorePart, bertscore};
    let default_dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/all-MiniLM-L6-v2"
    ));
    let dir = args.model_dir.clone().unwrap_or(default_dir);
    let files = ModelFiles::from_path(&dir).map_err(|e| model_error(&dir, e))?;
    let name = dir
        .file_name()
        .map_or("model".into(), |n| n.to_string_lossy().into_owned());
    let plm = Plm::load(&name, files, &Device::flex(), Precision::F32)
        .map_err(|e| model_error(&dir, e))?;
    let layer = args.layer.unwrap_or_else(|| {
        registry::models()
            .into_iter()
            .find(|m| m.id.ends_with(&format!("/{name}")) || m.id == name)
            .and_then(|m| m.layer)
            .unwrap_or(plm.config.num_layers)
    });
    let hyp_refs: Vec<&str> = hyps.iter().map(String::as_str).collect();
    let scores =
        futures::executor::block_on(bertscore::score_set(&plm, &hyp_refs, refs, layer, args.idf))
            .map_err(|e| model_error(&dir, e))?;
    let signature = bertscore::signature(&name, layer, args.idf, "f32");
    let ids: Vec<&'static str> = bertscore::METRIC_IDS
        .into_iter()
        .filter(|id| wanted.contains(id))
        .collect();
    let pick = |s: &bertscore::BertScore, id: &str| match id {
        "bertscore-p" => s.p,
        "bertscore-r" => s.r,
        _ => s.f,
    };
    let make = |id: &'static str, value: f64, s: Option<&bertscore::BertScore>| Score {
        metric: id,
        value,
        parts: s.map_or_else(Vec::new, |s| {
            vec![
                ScorePart {
                    name: "precision",
                    value: s.p,
                },
                ScorePart {
                    name: "recall",
                    value: s.r,
                },
                ScorePart {
                    name: "f1",
                    value: s.f,
                },
            ]
        }),
        signature: signature.clone(),
    };
    let rows = scores
        .iter()
        .map(|s| {
            ids.iter()
                .map(|&id| make(id, pick(s, id), Some(s)))
                .collect()
        })
        .collect();
    let n = scores.len().max(1) as f64;
    let corpus = ids
        .iter()
        .map(|&id| {
            make(
                id,
                scores.iter().map(|s| pick(s, id)).sum::<f64>() / n,
                None,
            )
        })
        .collect();
    Ok(PlmColumns {
        ids: ids.clone(),
        rows,
        corpus,
        signatures: vec![signature.clone(); ids.len()],
    })
}
