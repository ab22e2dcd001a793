//! Getting weights into a network: Hugging Face safetensors (one file or
//! shards) through burn-store with the PyTorch adapter, PyTorch pickles
//! natively (COMET's Lightning checkpoints, BLEURT's `pytorch_model.bin`),
//! int8 quantization
//! (burn's Q8S, per block), and the prepared `.bpk` format that carries a
//! (quantized) network with its config and tokenizer in one file.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::burn_pack::{Bytes, Reader};
use burn::store::{
    BurnpackStore, FloatCastAdapter, KeyRemapper, ModuleAdapter, ModuleContext, ModuleSnapshot,
    PyTorchToBurnAdapter, SafetensorsStore, bridge,
};
use burn::tensor::quantization::{
    Calibration, QuantScheme, QuantStore, QuantValue, QuantizedBytes, ScaleDtype, compute_q_params,
    compute_range,
};
use burn::tensor::{DType, Device, FloatDType, Shape, Tensor, TensorData};

use super::comet::{CometHparams, CometModel};
use super::config::{Family, Head, ModelConfig};
use super::dense::{PackedWeights, primitive};
use super::tokenizer::LmTokenizer;
use super::{ModelError, Network, Plm, bart, bert, deberta, gpt2};
use burn_flex::FlexTensor;

/// Weight precision a model runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// As in the checkpoint (cast to f32).
    F32,
    /// Linear-layer weights int8, symmetric, one f32 scale per block of
    /// [`QUANT_BLOCK`] values; computed dequantized, or as integer products
    /// ([`super::qgemm`]) on the browser's CPU.
    Int8,
}

/// A precision name that is none of f32, fp32, none, q8, int8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown precision `{0}` (f32 or q8)")]
pub struct UnknownPrecision(pub String);

impl std::str::FromStr for Precision {
    type Err = UnknownPrecision;
    fn from_str(s: &str) -> Result<Self, UnknownPrecision> {
        match s {
            "f32" | "fp32" | "none" => Ok(Self::F32),
            "q8" | "int8" => Ok(Self::Int8),
            other => Err(UnknownPrecision(other.to_owned())),
        }
    }
}

/// The name signatures and the page use (`f32`, `int8`), as serialised.
impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::Int8 => "int8",
        })
    }
}

/// Values sharing one int8 scale.
pub const QUANT_BLOCK: u8 = 32;

/// Where a network's weights come from.
pub enum WeightSource {
    /// `model.safetensors`, or every shard of a sharded checkpoint.
    Safetensors(Vec<Vec<u8>>),
    /// The network part of a prepared `.bpk` file.
    Burnpack(Vec<u8>),
    /// A PyTorch pickle: COMET's Lightning `checkpoints/model.ckpt` (the
    /// tensors under `state_dict`) or a Hugging Face `pytorch_model.bin`
    /// (the tensors at the top). burn-store reads these from files only.
    #[cfg(not(target_arch = "wasm32"))]
    Torch {
        /// The file.
        path: std::path::PathBuf,
        /// The key the state dict is under, if not at the top.
        state_dict_key: Option<&'static str>,
    },
}

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
}

/// Metadata keys of a prepared file.
const META_CONFIG: &str = "blindspot.config_json";
const META_TOKENIZER: &str = "blindspot.tokenizer_json";
const META_PRECISION: &str = "blindspot.precision";
const META_COMET: &str = "blindspot.comet_hparams_yaml";

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
        })
    }

    /// Reads a checkpoint folder (`config.json`, `tokenizer.json`,
    /// `model.safetensors` or the shards `model.safetensors.index.json`
    /// lists), a COMET folder (the hub repository's `hparams.yaml` and
    /// `checkpoints/model.ckpt` with the encoder's `config.json` and
    /// `tokenizer.json` beside them) or a prepared `.bpk` file.
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
        let tokenizer = path.join("tokenizer.json");
        let spm = path.join("spm.model");
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
            let deberta_v1 = config.and_then(|c| c.deberta).is_some_and(|d| d.v1);
            let (v, m) = (text(&vocab)?, text(&merges)?);
            let tok = if family == Some(Family::Gpt2) {
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
            let options = super::tokenizer::WordPieceOptions::from_config(config.as_deref());
            let tok = LmTokenizer::bert_wordpiece(&vocab_txt, options)
                .map_err(|e| ModelError::Config(format!("vocab.txt: {e}")))?;
            Some(tok.to_json()?.into_bytes())
        } else if spm.is_file() {
            let config = std::fs::read_to_string(path.join("tokenizer_config.json")).ok();
            Some(sentencepiece_tokenizer_json(
                &read(&spm)?,
                config.as_deref(),
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
                comet_hparams: Some(super::comet::checkpoint_hparams(&yaml, &ckpt)?),
                weights: WeightSource::Torch {
                    path: ckpt,
                    state_dict_key: Some("state_dict"),
                },
                stored_precision: Precision::F32,
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

/// The `tokenizer.json` of a checkpoint that ships a SentencePiece
/// `spm.model` instead (BLEURT-20), built in Rust as its slow tokenizer
/// reads it, lower-casing first when `tokenizer_config.json` (if given) says
/// `do_lower_case`.
pub fn sentencepiece_tokenizer_json(
    spm: &[u8],
    tokenizer_config: Option<&str>,
) -> Result<Vec<u8>, ModelError> {
    let lowercase = tokenizer_config
        .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
        .and_then(|c| c.get("do_lower_case").and_then(|v| v.as_bool()))
        .unwrap_or(false);
    let tokenizer = LmTokenizer::from_sentencepiece("spm.model", spm, lowercase)
        .map_err(|e| ModelError::Config(format!("spm.model: {e}")))?;
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

fn remapper(pairs: &[(impl AsRef<str>, impl AsRef<str>)]) -> KeyRemapper {
    pairs.iter().fold(KeyRemapper::new(), |r, (from, to)| {
        r.add_pattern(from.as_ref(), to.as_ref())
            .expect("key map patterns are valid regexes")
    })
}

/// Loads a PyTorch checkpoint's state dict (under `state_dict_key` when
/// given) into `module`, renaming keys with `key_map`.
#[cfg(not(target_arch = "wasm32"))]
fn load_torch<M: Module + ModuleSnapshot>(
    module: &mut M,
    path: &std::path::Path,
    state_dict_key: Option<&str>,
    key_map: &[(impl AsRef<str>, impl AsRef<str>)],
) -> Result<(), ModelError> {
    let mut store = burn::store::PytorchStore::from_file(path);
    if let Some(key) = state_dict_key {
        store = store.with_top_level_key(key);
    }
    let mut store = store
        .map_indices_contiguous(false)
        .remap(remapper(key_map))
        .allow_partial(true);
    let result = module.load_from(&mut store).map_err(|e| {
        ModelError::Weights(format!(
            "{}: {e} (is it a PyTorch checkpoint{}?)",
            path.display(),
            state_dict_key
                .map(|k| format!(" with a {k}"))
                .unwrap_or_default()
        ))
    })?;
    if let Some(e) = result.errors.first() {
        return Err(ModelError::Weights(e.to_string()));
    }
    if let Some((p, _)) = result.missing.first() {
        return Err(ModelError::Weights(format!(
            "{} tensors missing from the checkpoint, e.g. `{p}` (does config.json{} belong \
             to this checkpoint?)",
            result.missing.len(),
            if state_dict_key.is_some() {
                " (and hparams.yaml)"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

fn adapter() -> impl ModuleAdapter + 'static {
    TorchLayout.chain(FloatCastAdapter::to(DType::F32))
}

/// PyTorch's layout to burn's, as [`PyTorchToBurnAdapter`] does (norms'
/// `weight`/`bias` are burn's `gamma`/`beta`; a linear weight `[out, in]` is
/// burn's `[in, out]`), with the linear weights transposed and cast to f32
/// in one pass (the `transpose` crate's cache-blocked loops). burn-store's
/// own transpose copies one element at a time through byte slices into a
/// buffer it then copies again for alignment: loading roberta-large's shape
/// (1.3 GB) spent about 70% of its 4 s there.
#[derive(Clone)]
struct TorchLayout;

impl ModuleAdapter for TorchLayout {
    fn adapt(&self, tensor: PackTensor, ctx: ModuleContext<'_>) -> PackTensor {
        let linear_weight = ctx.module_type() == Some("Struct:Linear")
            && tensor.name.rsplit('.').next() == Some("weight")
            && tensor.shape.len() == 2
            && tensor.dtype.is_float();
        if !linear_weight {
            return PyTorchToBurnAdapter.adapt(tensor, ctx);
        }
        let (rows, cols) = (tensor.shape[0], tensor.shape[1]);
        let name = tensor.name.clone();
        bridge::map_data(
            tensor,
            name,
            DType::F32,
            Shape::from([cols, rows]),
            move |data| {
                let values = match data.as_slice::<f32>() {
                    Ok(values) => transpose(values, rows, cols),
                    // f16 / bf16 / f64 checkpoints, cast on the way.
                    Err(_) => transpose(&data.iter::<f32>().collect::<Vec<_>>(), rows, cols),
                };
                TensorData::new(values, [cols, rows])
            },
        )
    }

    fn get_alternative_param_name(&self, param_name: &str, module_type: &str) -> Option<String> {
        PyTorchToBurnAdapter.get_alternative_param_name(param_name, module_type)
    }

    fn clone_box(&self) -> Box<dyn ModuleAdapter> {
        Box::new(self.clone())
    }
}

/// The transpose of a row-major `rows × cols` matrix.
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    transpose::transpose(values, &mut out, cols, rows);
    out
}

/// Loads safetensors shards into `module`, renaming keys with `key_map`.
/// Fails when a tensor the module needs is in no shard, has another shape,
/// or a shard is not safetensors.
pub fn load_safetensors<M: Module + ModuleSnapshot>(
    module: &mut M,
    shards: Vec<Vec<u8>>,
    key_map: &[(impl AsRef<str>, impl AsRef<str>)],
) -> Result<(), ModelError> {
    let mut missing: Option<Vec<String>> = None;
    for (i, shard) in shards.into_iter().enumerate() {
        if safetensors::SafeTensors::deserialize(&shard).is_err() {
            return Err(ModelError::Weights(format!(
                "weight file {} is not a safetensors file (truncated download or wrong file?)",
                i + 1
            )));
        }
        let mut store = SafetensorsStore::from_bytes(Some(shard))
            .with_from_adapter(adapter())
            .remap(remapper(key_map))
            .allow_partial(true);
        let result = module
            .load_from(&mut store)
            .map_err(|e| ModelError::Weights(e.to_string()))?;
        if let Some(e) = result.errors.first() {
            return Err(ModelError::Weights(format!(
                "{e}{}",
                if result.errors.len() > 1 {
                    format!(" (and {} more)", result.errors.len() - 1)
                } else {
                    String::new()
                }
            )));
        }
        let now: Vec<String> = result.missing.into_iter().map(|(p, _)| p).collect();
        missing = Some(match missing {
            None => now,
            Some(before) => before.into_iter().filter(|p| now.contains(p)).collect(),
        });
    }
    match missing {
        None => Err(ModelError::Weights("no weight files".into())),
        Some(m) if !m.is_empty() => Err(ModelError::Weights(format!(
            "{} tensors missing from the checkpoint, e.g. `{}` (is it the architecture config.json names?)",
            m.len(),
            m[0]
        ))),
        Some(_) => Ok(()),
    }
}

/// The int8 scheme: symmetric Q8S, one f32 scale per [`QUANT_BLOCK`] values.
pub fn int8_scheme() -> QuantScheme {
    QuantScheme::default()
        .with_value(QuantValue::Q8S)
        .with_store(QuantStore::Native)
        .per_block([QUANT_BLOCK], ScaleDtype::F32)
}

/// Quantizes the weights of every linear projection (attention, feed-forward,
/// heads) to int8 for compute; with `lookups`, the embedding tables too
/// ([`Network::load`] turns them back to f32, rounded, since a lookup would
/// otherwise dequantize the whole table on every pass). Norms and biases
/// stay f32, and so does a matrix whose width is not a multiple of
/// [`QUANT_BLOCK`] (a 3-class NLI head).
pub fn quantize<M: Module>(module: M, lookups: bool) -> M {
    module.map(&mut Int8Mapper {
        path: Vec::new(),
        scheme: int8_scheme(),
        mode: Mode::Quantize { lookups },
    })
}

/// Dequantizes everything but the linear projections (embedding tables read
/// from an int8 file).
fn dequantize_lookups<M: Module>(module: M) -> M {
    module.map(&mut Int8Mapper {
        path: Vec::new(),
        scheme: int8_scheme(),
        mode: Mode::DequantizeLookups,
    })
}

/// Dequantizes every weight (int8 values kept, stored as f32).
fn dequantize_all<M: Module>(module: M) -> M {
    module.map(&mut Int8Mapper {
        path: Vec::new(),
        scheme: int8_scheme(),
        mode: Mode::DequantizeAll,
    })
}

enum Mode {
    Quantize { lookups: bool },
    DequantizeLookups,
    DequantizeAll,
}

/// An int8 weight's values as f32, exactly as burn's `dequantize` gives
/// them (the value times its block's scale), in one pass: burn-flex's
/// dequantize locates every element's block with divisions, a third of an
/// int8 MiniLM's load time before. `None` for a tensor that is not in
/// [`int8_scheme`] with whole blocks per row, and for a tensor off the CPU
/// (its values are read back synchronously, which WebGPU in a browser does
/// not allow): burn's path then serves.
pub(crate) fn int8_values<const D: usize>(tensor: &Tensor<D>) -> Option<Vec<f32>> {
    let DType::QFloat(scheme) = tensor.dtype() else {
        return None;
    };
    if tensor.device() != Device::flex() {
        return None;
    }
    let block = QUANT_BLOCK as usize;
    let whole_blocks = scheme.value == QuantValue::Q8S
        && scheme.tensor_scale().is_none()
        && scheme
            .block_size()
            .is_some_and(|b| b.as_slice() == [QUANT_BLOCK])
        && tensor.dims()[D - 1].is_multiple_of(block);
    if !whole_blocks {
        return None;
    }
    let data = tensor.clone().into_data();
    let shape = data.shape().clone();
    let (values, scales) = QuantizedBytes {
        bytes: data.into_bytes(),
        scheme,
        shape,
    }
    .into_vec_i8();
    if scales.global.is_some() || scales.block.len() * block != values.len() {
        return None;
    }
    Some(
        values
            .chunks_exact(block)
            .zip(&scales.block)
            .flat_map(|(chunk, &scale)| chunk.iter().map(move |&v| scale * f32::from(v)))
            .collect(),
    )
}

/// `tensor` rounded to int8 in `scheme`: burn's scales (`compute_q_params`
/// of each block's min and max), and the values exactly as burn-flex's
/// `quantize` rounds them, `(x / scale).round().clamp(a, b)`, one block of
/// [`QUANT_BLOCK`] at a time ([`int8_rounded`]). burn-flex's loop finds
/// each element's block with divisions and calls libm's `roundf`: most of
/// an int8 load from f32 weights (the page's int8 models) before. Tensors
/// [`int8_rounded`] does not take go through burn.
fn quantize_int8<const D: usize>(tensor: Tensor<D>, scheme: &QuantScheme) -> Tensor<D> {
    let range = compute_range(scheme, &tensor, &Calibration::MinMax);
    let qparams = compute_q_params(scheme, range);
    let Some(scales) = int8_scales(&tensor, scheme, &qparams.scales) else {
        return tensor.quantize(scheme, qparams);
    };
    let device = tensor.device();
    // Taken, not copied, where this is the last reference to the values.
    let data = tensor.into_data();
    match data.as_slice::<f32>() {
        Ok(values) => {
            Tensor::from_data(int8_rounded(values, data.shape(), scheme, &scales), &device)
        }
        Err(_) => Tensor::from_data(data, &device).quantize(scheme, qparams),
    }
}

/// The scales [`int8_rounded`] uses, as burn-flex's `quantize` would
/// (`validated_scale`), for an f32 tensor on the CPU in [`int8_scheme`]
/// whose rows are whole blocks; `None` for anything else.
fn int8_scales<const D: usize>(
    tensor: &Tensor<D>,
    scheme: &QuantScheme,
    scales: &Tensor<1>,
) -> Option<Vec<f32>> {
    let block = QUANT_BLOCK as usize;
    let cpu = Device::flex();
    if *scheme != int8_scheme()
        || tensor.device() != cpu
        || scales.device() != cpu
        || tensor.dtype() != DType::F32
        || !tensor.dims()[D - 1].is_multiple_of(block)
    {
        return None;
    }
    let scales = scales
        .to_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .ok()?;
    if scales.len() * block != tensor.shape().num_elements() {
        return None;
    }
    let dtype = scheme.scale_dtype();
    Some(
        scales
            .into_iter()
            .map(|s| match dtype.round_up(s) {
                s if s > 0.0 && s.is_finite() => s,
                _ => dtype.round_up(f32::MIN_POSITIVE),
            })
            .collect(),
    )
}

/// `values` (row-major, `scales.len()` whole blocks) rounded to int8 one
/// block at a time, as burn-flex's `quantize` rounds them.
fn int8_rounded(values: &[f32], shape: &Shape, scheme: &QuantScheme, scales: &[f32]) -> TensorData {
    let (a, b) = scheme.value.range();
    let mut out = Vec::with_capacity(values.len());
    for (chunk, &scale) in values.chunks_exact(QUANT_BLOCK as usize).zip(scales) {
        let inv = 1.0 / scale;
        out.extend(chunk.iter().map(|&x| round_to_int8(x * inv, a, b)));
    }
    TensorData::quantized(out, shape.clone(), *scheme, scales, None)
}

/// `t.round().clamp(a, b) as i8` (halves away from zero; NaN gives 0) for
/// the integer bounds `a, b` of an 8-bit scheme, without libm's `roundf`
/// (a call per value natively, a software routine in wasm) and without
/// branches, so the loop over a block vectorises.
fn round_to_int8(t: f32, a: f32, b: f32) -> i8 {
    let t = t.clamp(-128.0, 128.0);
    let whole = t as i32; // toward zero, exact in this range; NaN gives 0
    let frac = t - whole as f32; // exact
    let rounded = whole + i32::from(frac >= 0.5) - i32::from(frac <= -0.5);
    rounded.clamp(a as i32, b as i32) as i8
}

/// `tensor` dequantized to f32 ([`int8_values`] where it applies).
fn dequantize<const D: usize>(tensor: Tensor<D>) -> Tensor<D> {
    match int8_values(&tensor) {
        Some(values) => {
            Tensor::from_data(TensorData::new(values, tensor.shape()), &tensor.device())
        }
        None => tensor.dequantize(),
    }
}

/// Walks a module, quantizing or dequantizing the weights [`quantize`] names.
struct Int8Mapper {
    path: Vec<String>,
    scheme: QuantScheme,
    mode: Mode,
}

/// Modules whose `weight` is a linear projection.
const PROJECTIONS: [&str; 23] = [
    "query",
    "key",
    "value",
    "output",
    "intermediate",
    "dense",
    "out",
    "c_attn",
    "c_proj",
    "c_fc",
    "q_proj",
    "k_proj",
    "v_proj",
    "out_proj",
    "fc1",
    "fc2",
    "query_proj",
    "key_proj",
    "value_proj",
    "pos_key_proj",
    "pos_query_proj",
    "attention_output",
    "in_proj",
];

/// Modules whose `weight` is a lookup table.
const LOOKUPS: [&str; 6] = [
    "word_embeddings",
    "position_embeddings",
    "wte",
    "wpe",
    "shared",
    "embed_positions",
];

impl ModuleMapper for Int8Mapper {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let owner = weight_owner(&self.path);
        let is_projection = PROJECTIONS.contains(&owner);
        let is_lookup = LOOKUPS.contains(&owner);
        match self.mode {
            Mode::DequantizeLookups | Mode::DequantizeAll => {
                let keep = is_projection && matches!(self.mode, Mode::DequantizeLookups);
                if keep || !matches!(param.val().dtype(), DType::QFloat(_)) {
                    return param;
                }
                param.map(dequantize)
            }
            Mode::Quantize { lookups } => {
                let dims = param.shape().dims::<D>();
                let wanted = is_projection || (lookups && is_lookup);
                let quantized = matches!(param.val().dtype(), DType::QFloat(_));
                if !wanted || quantized || D != 2 || dims[D - 1] % QUANT_BLOCK as usize != 0 {
                    return param;
                }
                let scheme = self.scheme;
                param.map(|tensor| quantize_int8(tensor, &scheme))
            }
        }
    }
}

/// Whether [`Plm::load`] gives an int8 model on the CPU integer products:
/// in the browser, where they are 2.2-2.8x faster than f32 ones (simd128
/// has a 16-bit dot product and no fused multiply-add). Natively the f32
/// products (gemm's AVX-512 or AVX2 kernels, on every core) stay.
pub const INTEGER_PRODUCTS: bool = cfg!(target_arch = "wasm32");

/// Whether [`Plm::load`] packs an f32 model's projections on the CPU into
/// rten-gemm's panels once ([`PackedWeights::add_panels`]): natively, where
/// every product otherwise copies its weight into panels first. In the
/// browser the products read dense weights in place.
pub const F32_PANELS: bool = cfg!(not(target_arch = "wasm32"));

/// Finds a module's projection weights to pack: int8 ones for integer
/// products, and f32 ones on the CPU for rten-gemm's panels when `panels`.
struct Packer<'a> {
    path: Vec<String>,
    packed: &'a mut PackedWeights,
    panels: bool,
    f32_weights: Vec<(ParamId, FlexTensor)>,
}

impl ModuleVisitor for Packer<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let projection = PROJECTIONS.contains(&weight_owner(&self.path));
        let weight = param.val();
        if !projection || D != 2 {
            return;
        }
        if matches!(weight.dtype(), DType::QFloat(_)) {
            let dims = weight.dims();
            let values = int8_values(&weight).unwrap_or_else(|| {
                weight
                    .dequantize()
                    .into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .expect("f32 after convert")
            });
            self.packed
                .add_integer(param.id, &values, dims[0], dims[D - 1]);
        } else if self.panels && weight.dtype() == DType::F32 && weight.device() == Device::flex() {
            self.f32_weights.push((param.id, primitive(weight)));
        }
    }
}

/// The module owning the parameter at `path` when the parameter is its
/// `weight` (`""` otherwise): what [`PROJECTIONS`] and [`LOOKUPS`] name.
fn weight_owner(path: &[String]) -> &str {
    match path {
        [.., owner, last] if last == "weight" => owner,
        _ => "",
    }
}

/// Applies one expression to whichever module a [`Network`] holds, giving
/// back a network of the same kind.
macro_rules! each_network {
    ($network:expr, $m:ident => $body:expr) => {
        match $network {
            Network::Bert($m) => Network::Bert($body),
            Network::Gpt2($m) => Network::Gpt2($body),
            Network::Comet($m) => Network::Comet($body),
            Network::Bart($m) => Network::Bart($body),
            Network::Deberta($m) => Network::Deberta($body),
        }
    };
}

/// Casts every float parameter of a module to one dtype.
struct CastFloats(FloatDType);

impl ModuleMapper for CastFloats {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let dtype = self.0;
        param.map(|t| t.cast(dtype))
    }
}

/// `module` with every float parameter cast to `dtype`.
pub fn cast_floats<M: Module>(module: M, dtype: FloatDType) -> M {
    module.map(&mut CastFloats(dtype))
}

impl Network {
    /// The network `config` describes with `weights` loaded, at `precision`
    /// (weights stored int8 stay int8; f32 weights are quantized when asked).
    pub fn load(
        config: &ModelConfig,
        weights: WeightSource,
        stored: Precision,
        precision: Precision,
        device: &Device,
        keep_int8: bool,
    ) -> Result<Self, ModelError> {
        // int8 rounding happens on the CPU, then the f32 result moves to the
        // target device (quantization ops on WebGPU are not checked yet).
        // COMET loads on the CPU too: its mixture weights are read once there.
        let target = device;
        let cpu = Device::flex();
        // A device configured for f16 (`--device gpu-f16`) gets the network
        // loaded in f32 on the CPU, moved, then cast. Only BERT-family
        // encoders, for their hidden states: BERTScore under f16 was measured
        // (README, "A real GPU"); log-probabilities and classifiers were not
        // (a masked-LM checkpoint loads, `Plm::mlm_logits` refuses there).
        let compute = target.settings().float_dtype;
        match compute {
            FloatDType::F32 => {}
            FloatDType::F16
                if config.comet.is_none()
                    && matches!(config.head, Head::None | Head::MaskedLm)
                    && matches!(
                        config.family,
                        Family::Bert | Family::Roberta | Family::DistilBert | Family::Electra
                    ) => {}
            other => {
                return Err(ModelError::Unsupported(format!(
                    "{} does not run at {other:?}: only BERT-family encoders (their hidden \
                     states: BERTScore, MoverScore, MAUVE features) are offered in f16; \
                     load it on a device that computes in f32 (`--device gpu`)",
                    config.architecture
                )));
            }
        }
        let on_cpu =
            precision == Precision::Int8 || config.comet.is_some() || compute != FloatDType::F32;
        let device = if on_cpu { &cpu } else { target };
        let mut network = match (&config.comet, config.family) {
            (Some(hparams), _) => Network::Comet(CometModel::new(config, hparams, device)),
            (None, Family::Gpt2) => Network::Gpt2(gpt2::Gpt2Model::new(config, device)),
            (None, Family::Bart) => Network::Bart(bart::BartModel::new(config, device)),
            (None, Family::Deberta) => Network::Deberta(deberta::DebertaModel::new(config, device)),
            (None, _) => Network::Bert(bert::BertModel::new(config, device)),
        };
        if stored == Precision::Int8 && precision == Precision::F32 {
            return Err(ModelError::Unsupported(
                "this prepared file holds int8 weights; load it at int8".into(),
            ));
        }
        network.load_weights(weights, config)?;
        // An int8 load from f32 weights rounds what [`prepare`] rounds, the
        // embedding tables included, so one `int8` signature means one set of
        // numbers whether the page rounded the hub's file or the site served a
        // prepared one: the path of `prepare` and then of a load of its file.
        let network = match (stored, precision) {
            (Precision::Int8, _) => each_network!(network, m => dequantize_lookups(m)),
            (Precision::F32, Precision::Int8) => {
                each_network!(network, m => dequantize_lookups(quantize(m, true)))
            }
            (Precision::F32, Precision::F32) => network,
        };
        // Compute is dequantized unless `keep_int8` (the caller then packs
        // the projections for integer products, [`PackedWeights`]):
        // burn-flex would dequantize a quantized weight on every use (a
        // MiniLM pass takes 1.3 s instead of 13 ms), and quantized kernels
        // on WebGPU are not yet checked against the CPU. So the int8 values
        // are expanded to f32 once, after loading: int8 is what is
        // downloaded and cached, the numbers are the int8 model's, the
        // speed is f32's.
        let mut network = if precision == Precision::Int8 && !keep_int8 {
            each_network!(network, m => dequantize_all(m))
        } else {
            network
        };
        if let Network::Comet(m) = &mut network {
            m.resolve_mix()?;
        }
        let network = if on_cpu {
            each_network!(network, m => m.to_device(target))
        } else {
            network
        };
        Ok(if compute == FloatDType::F32 {
            network
        } else {
            each_network!(network, m => cast_floats(m, compute))
        })
    }

    /// Packs every int8 projection for integer products (none when the
    /// network was loaded without `keep_int8`) and, with `panels`, every f32
    /// projection on the CPU into rten-gemm's panels: they run while the
    /// value this returns lives.
    pub fn packed_weights(&self, panels: bool) -> PackedWeights {
        let mut packed = PackedWeights::default();
        let mut packer = Packer {
            path: Vec::new(),
            packed: &mut packed,
            panels,
            f32_weights: Vec::new(),
        };
        match self {
            Network::Bert(m) => m.visit(&mut packer),
            Network::Gpt2(m) => m.visit(&mut packer),
            Network::Comet(m) => m.visit(&mut packer),
            Network::Bart(m) => m.visit(&mut packer),
            Network::Deberta(m) => m.visit(&mut packer),
        }
        let f32_weights = packer.f32_weights;
        packed.add_panels(f32_weights);
        packed
    }

    fn load_weights(
        &mut self,
        source: WeightSource,
        config: &ModelConfig,
    ) -> Result<(), ModelError> {
        let family = config.family;
        let comet_map = || {
            config
                .comet
                .as_ref()
                .map(|h| h.key_map(family))
                .unwrap_or_default()
        };
        match source {
            WeightSource::Safetensors(shards) => match self {
                Network::Bert(m) => load_safetensors(m, shards, &bert::checkpoint_key_map(family)),
                Network::Gpt2(m) => load_safetensors(m, shards, &gpt2::checkpoint_key_map()),
                Network::Comet(m) => load_safetensors(m, shards, &comet_map()),
                Network::Bart(m) => {
                    let names: Vec<String> = shards
                        .iter()
                        .filter_map(|s| safetensors::SafeTensors::deserialize(s).ok())
                        .flat_map(|st| {
                            st.names()
                                .into_iter()
                                .map(str::to_owned)
                                .collect::<Vec<_>>()
                        })
                        .collect();
                    load_safetensors(m, shards, &bart::checkpoint_key_map(&names))
                }
                Network::Deberta(m) => load_safetensors(m, shards, &deberta::checkpoint_key_map()),
            },
            #[cfg(not(target_arch = "wasm32"))]
            WeightSource::Torch {
                path,
                state_dict_key,
            } => match self {
                Network::Comet(m) => load_torch(m, &path, state_dict_key, &comet_map()),
                Network::Bert(m) => {
                    load_torch(m, &path, state_dict_key, &bert::checkpoint_key_map(family))
                }
                Network::Gpt2(m) => {
                    load_torch(m, &path, state_dict_key, &gpt2::checkpoint_key_map())
                }
                // A pickle holds every tied copy, model.shared included.
                Network::Bart(m) => load_torch(
                    m,
                    &path,
                    state_dict_key,
                    &bart::checkpoint_key_map(&["model.shared.weight".to_owned()]),
                ),
                Network::Deberta(m) => {
                    load_torch(m, &path, state_dict_key, &deberta::checkpoint_key_map())
                }
            },
            WeightSource::Burnpack(bytes) => {
                let mut store = BurnpackStore::from_bytes(Some(Bytes::from_bytes_vec(bytes)));
                let result = match self {
                    Network::Bert(m) => m.load_from(&mut store),
                    Network::Gpt2(m) => m.load_from(&mut store),
                    Network::Comet(m) => m.load_from(&mut store),
                    Network::Bart(m) => m.load_from(&mut store),
                    Network::Deberta(m) => m.load_from(&mut store),
                }
                .map_err(|e| ModelError::Weights(format!("prepared model: {e}")))?;
                if let Some(e) = result.errors.first() {
                    return Err(ModelError::Weights(format!("prepared model: {e}")));
                }
                if let Some((p, _)) = result.missing.first() {
                    return Err(ModelError::Weights(format!("prepared model lacks `{p}`")));
                }
                Ok(())
            }
        }
    }
}

impl Plm {
    /// Builds a model from its files on `device` at `precision`; an int8
    /// model on the CPU computes with integer products in the browser
    /// ([`INTEGER_PRODUCTS`]).
    pub fn load(
        name: &str,
        files: ModelFiles,
        device: &Device,
        precision: Precision,
    ) -> Result<Self, ModelError> {
        Self::load_with(name, files, device, precision, INTEGER_PRODUCTS)
    }

    /// [`Plm::load`], saying whether an int8 model on the CPU computes its
    /// projections with integer products (16-bit, [`super::qgemm`]) or in
    /// f32 from its int8 values.
    pub fn load_with(
        name: &str,
        files: ModelFiles,
        device: &Device,
        precision: Precision,
        integer: bool,
    ) -> Result<Self, ModelError> {
        let config = files.config()?;
        let tokenizer_json = files.tokenizer_json.ok_or_else(|| {
            ModelError::Missing(match &config.comet {
                Some(h) => format!(
                    "{name} has no tokenizer.json: COMET reads its encoder's, from \
                     https://huggingface.co/{}",
                    h.tokenizer_source()
                ),
                None if config.architecture.starts_with("Bleurt") => format!(
                    "{name} has neither spm.model nor tokenizer.json: BLEURT reads the \
                     SentencePiece model its hub repository ships (spm.model)"
                ),
                None => format!("{name} has no tokenizer.json"),
            })
        })?;
        let mut tokenizer = LmTokenizer::from_tokenizer_json(name, &tokenizer_json)?;
        tokenizer.set_max_length(config.max_tokens())?;
        if let Some(h) = &config.comet
            && h.encoder_model != "BERT"
            && tokenizer.pad_id() != Some(1)
        {
            // XLM-R and MiniLM COMETs read XLM-R's SentencePiece vocabulary (<pad> = 1);
            // another tokenizer would give numbers for the wrong tokens.
            return Err(ModelError::Config(format!(
                "{name}'s tokenizer.json is not XLM-R's (no <pad> at id 1): COMET's {} \
                 encoder reads the tokenizer of https://huggingface.co/{}",
                h.encoder_model,
                h.tokenizer_source()
            )));
        }
        let integer = integer
            && precision == Precision::Int8
            && *device == Device::flex()
            && device.settings().float_dtype == FloatDType::F32;
        let network = Network::load(
            &config,
            files.weights,
            files.stored_precision,
            precision,
            device,
            integer,
        )?;
        let on_cpu = *device == Device::flex() && device.settings().float_dtype == FloatDType::F32;
        let packed = network.packed_weights(F32_PANELS && on_cpu);
        static LOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Ok(Self {
            name: name.to_owned(),
            load_id: LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            config,
            tokenizer,
            network,
            device: device.clone(),
            precision,
            packed,
            length_step: if *device == Device::flex() {
                1
            } else {
                super::GPU_LENGTH_STEP
            },
        })
    }
}

/// Writes a prepared `.bpk`: the network at `precision` with the config and
/// tokenizer (and COMET's hparams) in its metadata, ready for a site to host.
pub fn prepare(files: ModelFiles, precision: Precision) -> Result<Vec<u8>, ModelError> {
    let config = files.config()?;
    if files.stored_precision == Precision::Int8 && precision == Precision::F32 {
        return Err(ModelError::Unsupported(
            "cannot prepare an f32 file from int8 weights".into(),
        ));
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
    let network = match precision {
        Precision::Int8 => each_network!(network, m => quantize(m, true)),
        Precision::F32 => network,
    };
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
    match &network {
        Network::Bert(m) => m.save_into(&mut store),
        Network::Gpt2(m) => m.save_into(&mut store),
        Network::Comet(m) => m.save_into(&mut store),
        Network::Bart(m) => m.save_into(&mut store),
        Network::Deberta(m) => m.save_into(&mut store),
    }
    .map_err(|e| ModelError::Weights(format!("writing the prepared model: {e}")))?;
    let bytes = store
        .get_bytes()
        .map_err(|e| ModelError::Weights(format!("writing the prepared model: {e}")))?;
    Ok(bytes.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
    use safetensors::{Dtype, tensor::TensorView};

    #[derive(Module, Debug)]
    struct Toy {
        dense: Linear,
        norm: LayerNorm,
    }

    /// A checkpoint of `Toy` in PyTorch's layout: `dense.weight` is
    /// `[out = 37, in = 70]` with value `(r * 70 + c) % 2000` at `(r, c)`.
    fn checkpoint(dtype: Dtype) -> Vec<u8> {
        let encode = |values: &[f32]| -> Vec<u8> {
            match dtype {
                Dtype::F16 => values
                    .iter()
                    .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                    .collect(),
                _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            }
        };
        // Integers below 2048 are exact in f16.
        let weight: Vec<f32> = (0..37 * 70).map(|i| (i % 2000) as f32).collect();
        let tensors = [
            ("dense.weight", vec![37, 70], encode(&weight)),
            ("dense.bias", vec![37], encode(&[0.5; 37])),
            ("norm.weight", vec![37], encode(&[2.0; 37])),
            ("norm.bias", vec![37], encode(&[-1.0; 37])),
        ];
        let views: Vec<(&str, TensorView)> = tensors
            .iter()
            .map(|(name, shape, bytes)| {
                (*name, TensorView::new(dtype, shape.clone(), bytes).unwrap())
            })
            .collect();
        safetensors::serialize(views, None).unwrap()
    }

    #[test]
    fn linear_weights_arrive_transposed_and_norms_renamed() {
        let device = Device::flex();
        for dtype in [Dtype::F32, Dtype::F16] {
            let mut toy = Toy {
                dense: LinearConfig::new(70, 37).init(&device),
                norm: LayerNormConfig::new(37).init(&device),
            };
            load_safetensors(&mut toy, vec![checkpoint(dtype)], &[] as &[(&str, &str)]).unwrap();
            let weight = toy.dense.weight.val();
            assert_eq!(weight.dims(), [70, 37]);
            assert_eq!(weight.dtype(), DType::F32);
            let got = weight.into_data().try_to_vec::<f32>().unwrap();
            for c in 0..70 {
                for r in 0..37 {
                    assert_eq!(
                        got[c * 37 + r],
                        ((r * 70 + c) % 2000) as f32,
                        "{dtype:?} ({r}, {c})"
                    );
                }
            }
            let values = |p: Param<Tensor<1>>| p.val().into_data().try_to_vec::<f32>().unwrap();
            let gamma = values(toy.norm.gamma);
            let beta = values(toy.norm.beta.unwrap());
            let bias = values(toy.dense.bias.unwrap());
            assert!(gamma.iter().all(|v| *v == 2.0), "{dtype:?}");
            assert!(beta.iter().all(|v| *v == -1.0), "{dtype:?}");
            assert!(bias.iter().all(|v| *v == 0.5), "{dtype:?}");
        }
    }

    #[test]
    fn int8_values_are_burns_dequantized_values() {
        let device = Device::flex();
        let scheme = int8_scheme();
        for [rows, cols] in [[3, 32], [30, 64], [64, 96]] {
            let values: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919) % 1000) as f32 / 97.0 - 5.0)
                .collect();
            let f32_tensor = Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), &device);
            assert!(
                int8_values(&f32_tensor).is_none(),
                "an f32 tensor is not int8"
            );
            let range = compute_range(&scheme, &f32_tensor, &Calibration::MinMax);
            let q = f32_tensor.quantize(&scheme, compute_q_params(&scheme, range));
            let ours = int8_values(&q).expect("int8 scheme, whole blocks");
            let burns = q
                .clone()
                .dequantize()
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            assert_eq!(ours.len(), burns.len());
            for (a, b) in ours.iter().zip(&burns) {
                assert_eq!(a.to_bits(), b.to_bits(), "[{rows}, {cols}]");
            }
            let tensor = dequantize(q).into_data().try_to_vec::<f32>().unwrap();
            assert_eq!(tensor, burns);
        }
    }

    /// The int8 rounding at load gives burn's quantized tensor byte for
    /// byte: ties (x.5 steps), a zero block, subnormals, NaN and infinities,
    /// and values beyond the scale.
    #[test]
    fn int8_rounding_is_burns_quantize() {
        let device = Device::flex();
        let scheme = int8_scheme();
        let mut special = vec![0.0f32; 32]; // a zero block
        special.extend((0..32).map(|i| f32::from_bits(1 + i as u32))); // subnormals
        // Scale 1 (the block's largest magnitude is 127): every half step a tie.
        special.extend((0..32).map(|i| {
            if i == 0 {
                127.0
            } else {
                (i as f32 - 16.0) + 0.5
            }
        }));
        special.extend((0..32).map(|i| [f32::NAN, f32::INFINITY, -f32::INFINITY, 1.0][i % 4]));
        for [rows, cols] in [[1, 32], [37, 64], [8, 96]] {
            let mut values: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919) % 1000) as f32 / 97.0 - 5.0)
                .collect();
            values[..special.len().min(rows * cols)]
                .copy_from_slice(&special[..special.len().min(rows * cols)]);
            let tensor = Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), &device);
            // And the same values as a transposed (non-contiguous) view.
            let transposed =
                Tensor::<2>::from_data(tensor.clone().transpose().into_data(), &device).transpose();
            for tensor in [tensor, transposed] {
                let qparams = compute_q_params(
                    &scheme,
                    compute_range(&scheme, &tensor, &Calibration::MinMax),
                );
                assert!(
                    int8_scales(&tensor, &scheme, &qparams.scales).is_some(),
                    "[{rows}, {cols}] takes the fast path"
                );
                let burns = tensor.clone().quantize(&scheme, qparams).into_data();
                let ours = quantize_int8(tensor, &scheme).into_data();
                assert_eq!(ours.dtype(), burns.dtype(), "[{rows}, {cols}]");
                assert_eq!(ours.shape(), burns.shape(), "[{rows}, {cols}]");
                assert_eq!(ours.as_bytes(), burns.as_bytes(), "[{rows}, {cols}]");
            }
        }
        // A width that is not whole blocks goes through burn.
        let odd = Tensor::<2>::from_data(TensorData::new(vec![1.0f32; 40], [2, 20]), &device);
        assert!(int8_scales(&odd, &scheme, &Tensor::zeros([2], &device)).is_none());
    }

    #[test]
    fn round_to_int8_is_burns_rounding() {
        let (a, b) = int8_scheme().value.range();
        let burns = |x: f32| x.round().clamp(a, b) as i8;
        let mut t = -130.0f32;
        while t <= 130.0 {
            for x in [
                t,
                t + 0.5,
                t.next_up(),
                (t + 0.5).next_down(),
                (t + 0.5).next_up(),
            ] {
                assert_eq!(round_to_int8(x, a, b), burns(x), "{x}");
            }
            t += 0.25;
        }
        for x in [
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            1e30,
            -1e30,
            -0.4,
            -0.0,
        ] {
            assert_eq!(round_to_int8(x, a, b), burns(x), "{x}");
        }
    }

    #[test]
    fn transpose_matches_its_definition() {
        for (rows, cols) in [(1, 1), (1, 33), (33, 1), (31, 65), (64, 64), (70, 37)] {
            let values: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let out = transpose(&values, rows, cols);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(out[c * rows + r], values[r * cols + c]);
                }
            }
        }
    }
}
