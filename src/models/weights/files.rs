//! A checkpoint's files as bytes: read from a folder natively, or handed
//! over by the page after its downloads.

use super::{Precision, WeightSource};
use crate::models::ModelError;
use crate::models::comet::CometHparams;
use crate::models::config::ModelConfig;
use crate::models::tokenizer::LmTokenizer;

/// A checkpoint's files, as bytes (read from disk or fetched by the page).
pub struct ModelFiles {
    /// `config.json`.
    pub config_json: String,
    /// `tokenizer.json` (None: the network alone, for tests and `prepare`).
    pub tokenizer_json: Option<Vec<u8>>,
    /// Weights.
    pub weights: WeightSource,
    /// Precision the weights are stored at (`.bpk` files may be int8 already).
    pub stored_precision: Precision,
    /// COMET's hparams (YAML or JSON text), when the checkpoint is a COMET
    /// estimator: those stored in the checkpoint, as COMET reads them, with
    /// `hparams.yaml`'s class (or `hparams.yaml` alone when the checkpoint
    /// stores none).
    pub comet_hparams: Option<String>,
    /// `tokenizer_config.json`'s text (a chat model's `chat_template` and
    /// special tokens), with the template of a `chat_template.jinja` beside
    /// it set in it, as transformers reads them; none without either.
    pub tokenizer_config: Option<String>,
}

impl ModelFiles {
    /// Reads a checkpoint folder (`config.json`, `tokenizer.json`,
    /// `model.safetensors` or the shards `model.safetensors.index.json`
    /// lists), a COMET folder (the hub repository's `hparams.yaml` and
    /// `checkpoints/model.ckpt` with the encoder's `config.json` and
    /// `tokenizer.json` beside them), a fairseq folder (PRISM's
    /// `checkpoint.pt`, `spm.model` and dictionaries) or a prepared `.bpk`
    /// file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_path(path: &std::path::Path) -> Result<Self, ModelError> {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|source| ModelError::Io {
                path: p.to_path_buf(),
                source,
            })
        };
        if path.is_file() {
            return Self::from_burnpack(read(path)?);
        }
        if !path.is_dir() {
            return Err(ModelError::Missing("no such model folder or file".into()));
        }
        if super::fairseq::is_fairseq_folder(path) {
            return super::fairseq::read_folder(path);
        }
        let hparams = path.join("hparams.yaml");
        let ckpt = path.join("checkpoints").join("model.ckpt");
        let comet_hparams = if hparams.is_file() {
            Some(
                String::from_utf8(read(&hparams)?)
                    .map_err(|_| ModelError::Config("hparams.yaml is not UTF-8".into()))?,
            )
        } else if ckpt.is_file() {
            return Err(ModelError::Config(
                "this folder has checkpoints/model.ckpt but no hparams.yaml: a COMET model \
                 needs both, as its hub repository has them"
                    .into(),
            ));
        } else {
            None
        };
        let config = path.join("config.json");
        if comet_hparams.is_some() && !config.is_file() {
            let h = CometHparams::from_yaml(comet_hparams.as_deref().unwrap_or_default())?;
            return Err(ModelError::Config(format!(
                "a COMET folder needs its encoder's config.json and tokenizer.json beside \
                 hparams.yaml: download them from https://huggingface.co/{} and \
                 https://huggingface.co/{}",
                h.pretrained_model,
                h.tokenizer_source()
            )));
        }
        let config_json = String::from_utf8(read(&config)?)
            .map_err(|_| ModelError::Config("config.json is not UTF-8".into()))?;
        let tokenizer_config = read_tokenizer_config(path)?;
        let tokenizer = path.join("tokenizer.json");
        let spm = path.join("spm.model");
        let spiece = path.join("spiece.model");
        let (vocab, merges) = (path.join("vocab.json"), path.join("merges.txt"));
        let tokenizer_json = if tokenizer.is_file() {
            Some(read(&tokenizer)?)
        } else if vocab.is_file() && merges.is_file() {
            let text = |p: &std::path::Path| {
                String::from_utf8(read(p)?)
                    .map_err(|_| ModelError::Config(format!("{} is not UTF-8", p.display())))
            };
            // GPT-2's own pair, DeBERTa v1's ([CLS] .. [SEP]), or RoBERTa's
            // and BART's (<s> .. </s>).
            let config = ModelConfig::from_json(&config_json).ok();
            let family = config.as_ref().map(|c| c.family);
            let deberta_v1 = config
                .as_ref()
                .and_then(|c| c.deberta())
                .is_some_and(|d| d.v1);
            let (v, m) = (text(&vocab)?, text(&merges)?);
            let tok = if family == Some(crate::models::Family::Gpt2) {
                LmTokenizer::gpt2(&v, &m)
            } else if deberta_v1 {
                LmTokenizer::deberta_bpe(&v, &m)
            } else {
                LmTokenizer::roberta_bpe(&v, &m)
            }
            .map_err(|e| ModelError::Config(format!("vocab.json and merges.txt: {e}")))?;
            Some(tok.to_json()?.into_bytes())
        } else if path.join("vocab.txt").is_file() && !spm.is_file() {
            let vocab_txt = String::from_utf8(read(&path.join("vocab.txt"))?)
                .map_err(|_| ModelError::Config("vocab.txt is not UTF-8".into()))?;
            // BertTokenizer lowercases unless tokenizer_config.json says otherwise.
            let config = std::fs::read_to_string(path.join("tokenizer_config.json")).ok();
            let options =
                crate::models::tokenizer::WordPieceOptions::from_config(config.as_deref());
            let tok = LmTokenizer::bert_wordpiece(&vocab_txt, options)
                .map_err(|e| ModelError::Config(format!("vocab.txt: {e}")))?;
            Some(tok.to_json()?.into_bytes())
        } else if spm.is_file() && path.join("prism_vocab.json").is_file() {
            let vocab = String::from_utf8(read(&path.join("prism_vocab.json"))?)
                .map_err(|_| ModelError::Config("prism_vocab.json is not UTF-8".into()))?;
            Some(super::fairseq::vocab_json_tokenizer(
                &read(&spm)?,
                &vocab,
                &config_json,
            )?)
        } else if spm.is_file() || spiece.is_file() {
            let file = if spm.is_file() { &spm } else { &spiece };
            let config = std::fs::read_to_string(path.join("tokenizer_config.json")).ok();
            Some(sentencepiece_tokenizer_json(
                &read(file)?,
                config.as_deref(),
                &config_json,
            )?)
        } else {
            None
        };
        if comet_hparams.is_some() {
            if !ckpt.is_file() {
                return Err(ModelError::Missing(format!(
                    "the COMET folder has no checkpoints/model.ckpt ({})",
                    ckpt.display()
                )));
            }
            let yaml = comet_hparams.unwrap_or_default();
            return Ok(Self {
                config_json,
                tokenizer_json,
                comet_hparams: Some(crate::models::comet::checkpoint_hparams(&yaml, &ckpt)?),
                weights: WeightSource::Torch {
                    path: ckpt,
                    state_dict_key: Some("state_dict"),
                },
                stored_precision: Precision::F32,
                tokenizer_config,
            });
        }
        let index = path.join("model.safetensors.index.json");
        let bin = path.join("pytorch_model.bin");
        if !index.is_file() && !path.join("model.safetensors").is_file() && bin.is_file() {
            return Ok(Self {
                config_json,
                tokenizer_json,
                weights: WeightSource::Torch {
                    path: bin,
                    state_dict_key: None,
                },
                stored_precision: Precision::F32,
                comet_hparams: None,
                tokenizer_config,
            });
        }
        let shards = if index.is_file() {
            shard_names(&String::from_utf8_lossy(&read(&index)?))?
                .iter()
                .map(|name| read(&path.join(name)))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            vec![read(&path.join("model.safetensors"))?]
        };
        Ok(Self {
            config_json,
            tokenizer_json,
            weights: WeightSource::Safetensors(shards),
            stored_precision: Precision::F32,
            comet_hparams: None,
            tokenizer_config,
        })
    }

    /// The model config: `config.json`, under COMET's hparams when present.
    pub fn config(&self) -> Result<ModelConfig, ModelError> {
        let config = ModelConfig::from_json(&self.config_json)?;
        match &self.comet_hparams {
            Some(yaml) => config.with_comet(CometHparams::from_yaml(yaml)?),
            None => Ok(config),
        }
    }
}

/// A folder's `tokenizer_config.json`, with `chat_template.jinja`'s
/// template (which transformers prefers) set in it; none without either.
#[cfg(not(target_arch = "wasm32"))]
fn read_tokenizer_config(path: &std::path::Path) -> Result<Option<String>, ModelError> {
    let text = |name: &str| -> Result<Option<String>, ModelError> {
        let p = path.join(name);
        if !p.is_file() {
            return Ok(None);
        }
        std::fs::read_to_string(&p)
            .map(Some)
            .map_err(|source| ModelError::Io { path: p, source })
    };
    let config = text("tokenizer_config.json")?;
    match text("chat_template.jinja")? {
        None => Ok(config),
        Some(template) => {
            crate::models::chat::with_template(config.as_deref(), &template).map(Some)
        }
    }
}

/// The `tokenizer.json` of a checkpoint that ships a SentencePiece model
/// instead: T5's `spiece.model` (the family in `config_json` says T5) as
/// transformers' `T5TokenizerFast` converts it, with `tokenizer_config.json`'s
/// `extra_ids` sentinels (default 100); any other (BLEURT-20's `spm.model`)
/// as its slow tokenizer reads it, lower-casing first when
/// `tokenizer_config.json` says `do_lower_case`.
pub fn sentencepiece_tokenizer_json(
    spm: &[u8],
    tokenizer_config: Option<&str>,
    config_json: &str,
) -> Result<Vec<u8>, ModelError> {
    let settings = tokenizer_config.and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok());
    let setting = |key: &str| settings.as_ref().and_then(|c| c.get(key).cloned());
    let t5 = ModelConfig::from_json(config_json)
        .is_ok_and(|c| matches!(c.family, crate::models::Family::T5(_)));
    let tokenizer = if t5 {
        let extra_ids = setting("extra_ids")
            .and_then(|v| v.as_u64())
            .map_or(100, |n| n as usize);
        if extra_ids > 1000 {
            return Err(ModelError::Config(format!(
                "tokenizer_config.json asks for {extra_ids} extra ids (T5 has 100)"
            )));
        }
        LmTokenizer::t5_from_sentencepiece(spm, extra_ids)
            .map_err(|e| ModelError::Config(format!("spiece.model: {e}")))?
    } else {
        let lowercase = setting("do_lower_case")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        LmTokenizer::from_sentencepiece("spm.model", spm, lowercase)
            .map_err(|e| ModelError::Config(format!("spm.model: {e}")))?
    };
    Ok(tokenizer.to_json()?.into_bytes())
}

/// The shard files of a sharded checkpoint, in first-use order, from its
/// `model.safetensors.index.json`.
pub fn shard_names(index_json: &str) -> Result<Vec<String>, ModelError> {
    let index: serde_json::Value = serde_json::from_str(index_json)
        .map_err(|e| ModelError::Weights(format!("model.safetensors.index.json: {e}")))?;
    let map = index
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| {
            ModelError::Weights("model.safetensors.index.json has no weight_map".into())
        })?;
    let mut names: Vec<String> = Vec::new();
    for file in map.values().filter_map(|v| v.as_str()) {
        if !names.iter().any(|n| n == file) {
            names.push(file.to_owned());
        }
    }
    Ok(names)
}
