//! Getting weights into a network, one file per role:
//!
//! - `files`: a checkpoint's files (a folder, the page's downloads) as
//!   [`ModelFiles`];
//! - `formats`: reading weights into a module tree: Hugging Face
//!   safetensors (one file or shards) through burn-store with PyTorch's
//!   layout adapted, PyTorch pickles natively (COMET's Lightning
//!   checkpoints, BLEURT's `pytorch_model.bin`), and prepared `.bpk` files;
//! - `quant`: int8 quantization (burn's Q8S, one scale per block) and casts;
//! - `pack`: a loaded network's projections packed for the CPU's products;
//! - `fairseq`: PRISM's fairseq checkpoint folder as [`ModelFiles`];
//! - `bpk`: the prepared format, a (quantized) network with its config and
//!   tokenizer in one file ([`prepare`] writes it, [`ModelFiles::from_burnpack`]
//!   reads it).

mod bpk;
mod fairseq;
mod files;
mod formats;
mod pack;
mod quant;

pub use bpk::prepare;
pub use fairseq::vocab_json_tokenizer;
pub use files::{ModelFiles, sentencepiece_tokenizer_json, shard_names};
pub(crate) use formats::load;
pub use formats::load_safetensors;
pub(crate) use pack::packed_weights;
pub use pack::{F32_PANELS, INTEGER_PRODUCTS};
#[cfg(test)]
pub(crate) use quant::int8_values;
pub use quant::{cast_floats, int8_scheme, quantize};
pub(crate) use quant::{dequantize_all, dequantize_lookups};

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
    /// Linear-layer weights rounded to 4 bits (−7..=7, burn's Q4S), one f32
    /// scale per block of [`QUANT_BLOCK`] values, held in int8's storage
    /// (embedding tables int8): computed as int8 is. The numbers are 4-bit
    /// ones; files and memory are int8's size.
    Q4,
}

/// A precision name that is none of f32, fp32, none, q8, int8, q4, int4.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown precision `{0}` (f32, q8 or q4)")]
pub struct UnknownPrecision(pub String);

impl std::str::FromStr for Precision {
    type Err = UnknownPrecision;
    fn from_str(s: &str) -> Result<Self, UnknownPrecision> {
        match s {
            "f32" | "fp32" | "none" => Ok(Self::F32),
            "q8" | "int8" => Ok(Self::Int8),
            "q4" | "int4" => Ok(Self::Q4),
            other => Err(UnknownPrecision(other.to_owned())),
        }
    }
}

/// The name signatures and the page use (`f32`, `int8`, `q4`), as serialised.
impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::Int8 => "int8",
            Self::Q4 => "q4",
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
