//! The model registry: `models.toml` names the default checkpoint of each
//! model-based metric with its hub id, size, licence, BERTScore layer and
//! rescaling baselines.

use serde::Deserialize;

/// One checkpoint the tool knows.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq)]
pub struct RegistryModel {
    /// Hugging Face hub id.
    pub id: String,
    /// Folder served with the site (or beside the CLI) holding the files.
    #[serde(default)]
    pub local: Option<String>,
    /// `architectures[0]` of its config.json.
    pub architecture: String,
    /// For COMET checkpoints: the hub id of the encoder whose config.json
    /// and tokenizer.json go beside the checkpoint.
    #[serde(default)]
    pub encoder: Option<String>,
    /// The files of its hub repository a folder needs, when not
    /// config.json, tokenizer.json and model.safetensors (BLEURT ships
    /// spm.model and pytorch_model.bin).
    #[serde(default)]
    pub files: Vec<String>,
    /// fp32 weight download, MB.
    pub size_mb: f64,
    /// Licence of the weights.
    pub licence: String,
    /// Metrics it is a default model for.
    pub metrics: Vec<String>,
    /// Default BERTScore layer.
    #[serde(default)]
    pub layer: Option<usize>,
    /// BERTScore rescaling baselines by layer, where known.
    #[serde(default)]
    pub baselines: Vec<Baseline>,
    /// Who computed `baselines`: `bert_score` (published with it) or
    /// `blindspot` (scripts/bertscore_baseline.py, the same way, where
    /// bert_score publishes none).
    #[serde(default)]
    pub baseline_by: Option<String>,
    /// Anything a user should know.
    #[serde(default)]
    pub note: Option<String>,
}

/// A BERTScore rescaling baseline: the mean P, R and F of unrelated sentence
/// pairs at one layer (0 = the embeddings), as in bert_score's baseline files.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq)]
pub struct Baseline {
    /// The layer the baseline was computed at.
    pub layer: usize,
    /// Mean precision, recall and F1.
    pub prf: [f64; 3],
}

#[derive(Deserialize)]
struct Registry {
    model: Vec<RegistryModel>,
}

/// Every model in `models.toml`, in file order (the first listed for a
/// metric is its default); parsed once.
pub fn models() -> &'static [RegistryModel] {
    static MODELS: std::sync::LazyLock<Vec<RegistryModel>> = std::sync::LazyLock::new(|| {
        let registry: Registry = toml::from_str(include_str!("../../models.toml"))
            .expect("models.toml is checked by a unit test");
        registry.model
    });
    &MODELS
}

/// The default model of `metric` (`bertscore`, `gpt-ppl`, `mlm-ppl`, `menli`, `mauve`,
/// `comet`, `comet-qe`, `bleurt`, `bartscore`, `moverscore`, `moverscore-v1`, `unieval`,
/// `unieval-fact`, `prism`).
pub fn default_for(metric: &str) -> Option<&'static RegistryModel> {
    models()
        .iter()
        .find(|m| m.metrics.iter().any(|x| x == metric))
}

/// A registered model by hub id.
pub fn find(id: &str) -> Option<&'static RegistryModel> {
    models().iter().find(|m| m.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_doc_lists_every_checkpoint_once_as_models_toml_has_it() {
        let doc = include_str!("../../docs/models.md");
        let all = models();
        for m in all {
            assert_eq!(
                all.iter().filter(|o| o.id == m.id).count(),
                1,
                "{} twice",
                m.id
            );
            let size = if m.size_mb >= 1000.0 {
                format!("{:.2} GB", m.size_mb / 1000.0)
            } else {
                format!("{:.0} MB", m.size_mb)
            };
            let metrics: Vec<String> = m.metrics.iter().map(|x| format!("`{x}`")).collect();
            let layer = m.layer.map_or("–".to_owned(), |l| l.to_string());
            let baseline = match (&m.baseline_by, m.baselines.is_empty()) {
                (Some(by), false) => by.as_str(),
                _ => "–",
            };
            let row = format!(
                "| `{}` | {} | {} | {size} | {layer} | {baseline} |",
                m.id,
                metrics.join(", "),
                m.architecture
            );
            assert!(doc.contains(&row), "docs/models.md lacks the row\n{row}");
        }
        // And no row for a model the file no longer has.
        let rows = doc.lines().filter(|l| l.starts_with("| `")).count();
        assert_eq!(
            rows,
            all.len(),
            "docs/models.md's checkpoint table has {rows} rows"
        );
    }

    #[test]
    fn registry_parses_and_names_a_default_per_metric() {
        let all = models();
        assert!(all.len() >= 5);
        for metric in [
            "bertscore",
            "gpt-ppl",
            "mlm-ppl",
            "menli",
            "mauve",
            "comet",
            "comet-qe",
            "bleurt",
            "bartscore",
            "moverscore",
            "moverscore-v1",
            "unieval",
            "unieval-fact",
            "prism",
        ] {
            assert!(default_for(metric).is_some(), "{metric}");
        }
        let minilm = default_for("bertscore").unwrap();
        assert_eq!(minilm.id, "sentence-transformers/all-MiniLM-L6-v2");
        assert_eq!(minilm.local.as_deref(), Some("models/all-MiniLM-L6-v2"));
        assert_eq!(find("roberta-large").unwrap().layer, Some(17));
        let cometinho = default_for("comet").unwrap();
        assert_eq!(cometinho.encoder.as_deref(), Some("xlm-roberta-base"));
        assert!(
            all.iter()
                .filter(|m| m.metrics.iter().any(|x| x.starts_with("comet")))
                .all(|m| m.encoder.is_some())
        );
        let bleurt = default_for("bleurt").unwrap();
        assert_eq!(bleurt.id, "lucadiliello/BLEURT-20-D6");
        assert!(bleurt.files.iter().any(|f| f == "spm.model"));
        assert_eq!(
            default_for("bartscore").unwrap().id,
            "facebook/bart-large-cnn"
        );
        // MAUVE keeps GPT-2 as its default; ELECTRA is listed after it.
        assert_eq!(default_for("mauve").unwrap().id, "gpt2");
        // bert_score's model2layers for the ELECTRA discriminators.
        let layers: Vec<Option<usize>> = ["large", "base", "small"]
            .iter()
            .map(|s| {
                find(&format!("google/electra-{s}-discriminator"))
                    .unwrap()
                    .layer
            })
            .collect();
        assert_eq!(layers, [Some(14), Some(9), Some(11)]);
        let roberta = find("roberta-large").unwrap();
        assert_eq!(roberta.baselines[0].layer, 17);
        assert_eq!(roberta.baselines[0].prf[2], 0.83122575);
        assert_eq!(roberta.baseline_by.as_deref(), Some("bert_score"));
        assert_eq!(minilm.baseline_by.as_deref(), Some("blindspot"));
        assert!(all.iter().all(|m| m.size_mb > 0.0 && !m.licence.is_empty()));
        // Every baseline says who computed it (signatures name non-bert_score ones).
        assert!(
            all.iter()
                .filter(|m| !m.baselines.is_empty())
                .all(|m| matches!(m.baseline_by.as_deref(), Some("bert_score" | "blindspot")))
        );
        // A model's baselines include its default BERTScore layer.
        for m in all.iter().filter(|m| !m.baselines.is_empty()) {
            assert!(
                m.baselines.iter().any(|b| Some(b.layer) == m.layer),
                "{}: no baseline at layer {:?}",
                m.id,
                m.layer
            );
        }
    }
}
