//! The prepared format: a burn-store `.bpk` file holding the network (int8
//! or f32) with `config.json`, `tokenizer.json` and COMET's hparams in its
//! metadata, so a site hosts one file per model.

use burn::store::burn_pack::{Bytes, Reader};
use burn::store::{BurnpackStore, ModuleSnapshot};
use burn::tensor::Device;

use super::{ModelFiles, Precision, UnknownPrecision, WeightSource, quantize};
use crate::models::ModelError;
use crate::models::network::{Network, map_network, with_network};

/// Metadata keys of a prepared file.
const META_CONFIG: &str = "blindspot.config_json";
const META_TOKENIZER: &str = "blindspot.tokenizer_json";
const META_PRECISION: &str = "blindspot.precision";
const META_COMET: &str = "blindspot.comet_hparams_yaml";
const META_TOKENIZER_CONFIG: &str = "blindspot.tokenizer_config_json";

impl ModelFiles {
    /// A prepared `.bpk` file (written by [`prepare`]).
    pub fn from_burnpack(bytes: Vec<u8>) -> Result<Self, ModelError> {
        let reader = Reader::from_bytes(Bytes::from_bytes_vec(bytes.clone()))
            .map_err(|e| ModelError::Weights(format!("not a prepared model (.bpk) file: {e}")))?;
        let meta = reader.metadata();
        let get = |key: &str| {
            meta.get(key).cloned().ok_or_else(|| {
                ModelError::Weights(format!(
                    "the .bpk file lacks `{key}`: was it written by `blindspot prepare`?"
                ))
            })
        };
        let stored_precision = get(META_PRECISION)?
            .parse()
            .map_err(|e: UnknownPrecision| ModelError::Weights(e.to_string()))?;
        Ok(Self {
            config_json: get(META_CONFIG)?,
            tokenizer_json: meta.get(META_TOKENIZER).map(|t| t.clone().into_bytes()),
            weights: WeightSource::Burnpack(bytes),
            stored_precision,
            comet_hparams: meta.get(META_COMET).cloned(),
            tokenizer_config: meta.get(META_TOKENIZER_CONFIG).cloned(),
        })
    }
}

/// Writes a prepared `.bpk`: the network at `precision` with the config and
/// tokenizer (and COMET's hparams) in its metadata, ready for a site to host.
pub fn prepare(files: ModelFiles, precision: Precision) -> Result<Vec<u8>, ModelError> {
    let config = files.config()?;
    let stored = files.stored_precision;
    if stored != Precision::F32 && precision != stored {
        return Err(ModelError::Unsupported(format!(
            "cannot prepare a file at {precision} from {stored} weights"
        )));
    }
    // Load as stored, then quantize projections and lookup tables for storage.
    let network = Network::load(
        &config,
        files.weights,
        files.stored_precision,
        files.stored_precision,
        &Device::flex(),
        false,
    )?;
    let network = map_network!(network, m => quantize(m, precision, true));
    let mut store = BurnpackStore::from_bytes(None)
        .metadata(META_CONFIG, files.config_json)
        .metadata(META_PRECISION, precision.to_string());
    if let Some(tokenizer) = files.tokenizer_json {
        let text = String::from_utf8(tokenizer)
            .map_err(|_| ModelError::Config("tokenizer.json is not UTF-8".into()))?;
        store = store.metadata(META_TOKENIZER, text);
    }
    if let Some(hparams) = files.comet_hparams {
        store = store.metadata(META_COMET, hparams);
    }
    if let Some(config) = files.tokenizer_config {
        store = store.metadata(META_TOKENIZER_CONFIG, config);
    }
    with_network!(&network, m => m.save_into(&mut store))
        .map_err(|e| ModelError::Weights(format!("writing the prepared model: {e}")))?;
    let bytes = store
        .get_bytes()
        .map_err(|e| ModelError::Weights(format!("writing the prepared model: {e}")))?;
    Ok(bytes.to_vec())
}
