//! A fairseq translation checkpoint as PRISM releases it (m39v1:
//! `checkpoint.pt`, `spm.model`, `dict.src.txt`, `dict.tgt.txt`), read as
//! [`ModelFiles`] natively, so the CLI scores with it and `blindspot
//! prepare` turns it into a `.bpk` the page loads.
//!
//! The checkpoint is a pickle of `{"args": argparse.Namespace, "model":
//! state dict}`. A reader that does not run Python cannot see inside the
//! Namespace, so the architecture comes from the tensors' names and shapes
//! (widths, depths, feed-forward sizes, an embedding norm, a pre-norm
//! stack), with fairseq's transformer defaults for what shapes do not show
//! (ReLU, embeddings scaled by sqrt(d_model), 1024 positions). Head counts
//! do not show either: a `config.json` beside the checkpoint gives them
//! (`encoder_attention_heads`, `decoder_attention_heads`), else the release's
//! shape (d_model 1280: m39v1's 20 heads) does; any other checkpoint without
//! one is refused.

#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;

#[cfg(not(target_arch = "wasm32"))]
use burn::store::pytorch_reader::PytorchReader;

#[cfg(not(target_arch = "wasm32"))]
use super::{ModelFiles, Precision, WeightSource};
use crate::models::ModelError;
use crate::models::tokenizer::LmTokenizer;

#[cfg(not(target_arch = "wasm32"))]
/// PRISM m39v1's width and head count (`PrismConfig`'s defaults, from the
/// released `args`).
const M39V1_WIDTH: usize = 1280;
#[cfg(not(target_arch = "wasm32"))]
const M39V1_HEADS: usize = 20;

#[cfg(not(target_arch = "wasm32"))]
/// The positions fairseq's transformer reads by default
/// (`max_source_positions`, `max_target_positions`).
const MAX_POSITIONS: usize = 1024;

#[cfg(not(target_arch = "wasm32"))]
/// Whether `path` holds a fairseq checkpoint with its dictionary.
pub fn is_fairseq_folder(path: &Path) -> bool {
    path.join("checkpoint.pt").is_file()
        && (path.join("dict.tgt.txt").is_file() || path.join("dict.txt").is_file())
}

#[cfg(not(target_arch = "wasm32"))]
/// The head counts a `config.json` beside the checkpoint names.
#[derive(serde::Deserialize)]
struct Heads {
    encoder_attention_heads: Option<usize>,
    decoder_attention_heads: Option<usize>,
}

#[cfg(not(target_arch = "wasm32"))]
/// Reads a fairseq folder (see the module documentation).
pub fn read_folder(path: &Path) -> Result<ModelFiles, ModelError> {
    let read_text = |name: &str| {
        let p = path.join(name);
        std::fs::read_to_string(&p).map_err(|source| ModelError::Io { path: p, source })
    };
    let ckpt = path.join("checkpoint.pt");
    let reader = PytorchReader::with_top_level_key(&ckpt, "model").map_err(|e| {
        ModelError::Weights(format!(
            "{}: {e} (a fairseq checkpoint holds its state dict under `model`)",
            ckpt.display()
        ))
    })?;
    let shape = |name: &str| -> Result<Vec<usize>, ModelError> {
        reader.get(name).map(|t| t.shape().to_vec()).ok_or_else(|| {
            ModelError::Weights(format!(
                "{} has no `{name}`: not a fairseq transformer checkpoint",
                ckpt.display()
            ))
        })
    };
    let keys = reader.keys();
    if keys.iter().any(|k| k == "encoder.layer_norm.weight") {
        return Err(ModelError::Unsupported(
            "pre-norm fairseq transformers (a final encoder norm) are not supported: \
             PRISM's is post-norm"
                .into(),
        ));
    }
    let embed = shape("encoder.embed_tokens.weight")?;
    let [vocab, width] = embed[..] else {
        return Err(ModelError::Weights(
            "encoder.embed_tokens.weight is not a matrix".into(),
        ));
    };
    let depth = |stack: &str| {
        let prefix = format!("{stack}.layers.");
        keys.iter()
            .filter_map(|k| {
                k.strip_prefix(&prefix)?
                    .split('.')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .max()
            .map_or(0, |n| n + 1)
    };
    let (encoder_layers, decoder_layers) = (depth("encoder"), depth("decoder"));
    let ffn = |stack: &str| -> Result<usize, ModelError> {
        Ok(shape(&format!("{stack}.layers.0.fc1.weight"))?[0])
    };
    let heads = match std::fs::read_to_string(path.join("config.json")) {
        Ok(text) => {
            let h: Heads = serde_json::from_str(&text)
                .map_err(|e| ModelError::Config(format!("config.json is not valid: {e}")))?;
            match (h.encoder_attention_heads, h.decoder_attention_heads) {
                (Some(e), Some(d)) => (e, d),
                _ => {
                    return Err(ModelError::Config(
                        "config.json beside a fairseq checkpoint must name \
                         encoder_attention_heads and decoder_attention_heads"
                            .into(),
                    ));
                }
            }
        }
        Err(_) if width == M39V1_WIDTH => (M39V1_HEADS, M39V1_HEADS),
        Err(_) => {
            return Err(ModelError::Config(format!(
                "the head counts of a fairseq checkpoint are in its pickled args, which \
                 cannot be read without Python: put {{\"encoder_attention_heads\": N, \
                 \"decoder_attention_heads\": N}} in a config.json beside checkpoint.pt \
                 (d_model is {width}; PRISM's m39v1 has 20 heads at 1280)"
            )));
        }
    };
    let dict_name = if path.join("dict.tgt.txt").is_file() {
        "dict.tgt.txt"
    } else {
        "dict.txt"
    };
    let dict_text = read_text(dict_name)?;
    if path.join("dict.src.txt").is_file() && read_text("dict.src.txt")? != dict_text {
        return Err(ModelError::Unsupported(
            "dict.src.txt and dict.tgt.txt differ: PRISM's model shares one dictionary".into(),
        ));
    }
    let dictionary = LmTokenizer::fairseq_dictionary(&dict_text)
        .map_err(|e| ModelError::Config(format!("{dict_name}: {e}")))?;
    if dictionary.len() != vocab {
        return Err(ModelError::Config(format!(
            "{dict_name} gives {} ids but the embeddings have {vocab} rows: they do not \
             belong together",
            dictionary.len()
        )));
    }
    let spm = path.join("spm.model");
    let spm = std::fs::read(&spm).map_err(|source| ModelError::Io { path: spm, source })?;
    let tokenizer = LmTokenizer::fairseq_sentencepiece(&spm, &dictionary)
        .map_err(|e| ModelError::Config(format!("spm.model with {dict_name}: {e}")))?;
    let config = serde_json::json!({
        "model_type": "prism",
        "architectures": ["PrismForConditionalGeneration"],
        "vocab_size": vocab,
        "d_model": width,
        "encoder_layers": encoder_layers,
        "decoder_layers": decoder_layers,
        "encoder_attention_heads": heads.0,
        "decoder_attention_heads": heads.1,
        "encoder_ffn_dim": ffn("encoder")?,
        "decoder_ffn_dim": ffn("decoder")?,
        "max_position_embeddings": MAX_POSITIONS,
        "activation_function": "relu",
        "scale_embedding": true,
        "layernorm_embedding": keys.iter().any(|k| k == "encoder.layernorm_embedding.weight"),
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "decoder_start_token_id": 2,
    });
    Ok(ModelFiles {
        config_json: config.to_string(),
        tokenizer_json: Some(tokenizer.to_json()?.into_bytes()),
        weights: WeightSource::Torch {
            path: ckpt,
            state_dict_key: Some("model"),
        },
        stored_precision: Precision::F32,
        comet_hparams: None,
        tokenizer_config: None,
    })
}

/// The tokenizer of the hub port's folder layout (`spm.model` with
/// `prism_vocab.json`, the dictionary as token → id).
/// Its size must be `config.json`'s `vocab_size`: pieces the dictionary
/// lacks read as `<unk>` only past the embeddings' last row.
pub fn vocab_json_tokenizer(
    spm: &[u8],
    vocab_json: &str,
    config_json: &str,
) -> Result<Vec<u8>, ModelError> {
    let map: std::collections::BTreeMap<String, u32> = serde_json::from_str(vocab_json)
        .map_err(|e| ModelError::Config(format!("prism_vocab.json is not valid: {e}")))?;
    let rows = serde_json::from_str::<serde_json::Value>(config_json)
        .ok()
        .and_then(|c| c.get("vocab_size")?.as_u64());
    if let Some(rows) = rows.filter(|&r| r as usize != map.len()) {
        return Err(ModelError::Config(format!(
            "prism_vocab.json has {} entries but config.json's vocab_size is {rows}: they do \
             not belong together",
            map.len()
        )));
    }
    let mut dictionary = vec![String::new(); map.len()];
    for (token, id) in map {
        match dictionary.get_mut(id as usize) {
            Some(slot) if slot.is_empty() => *slot = token,
            _ => {
                return Err(ModelError::Config(format!(
                    "prism_vocab.json gives {token:?} the id {id}, which is taken or past \
                     its size: its ids must be 0..n, once each"
                )));
            }
        }
    }
    let tokenizer = LmTokenizer::fairseq_sentencepiece(spm, &dictionary)
        .map_err(|e| ModelError::Config(format!("spm.model with prism_vocab.json: {e}")))?;
    Ok(tokenizer.to_json()?.into_bytes())
}
