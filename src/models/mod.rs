//! Pretrained language models on burn: Hugging Face checkpoints loaded from
//! bytes, optionally int8-quantized, run on the CPU (burn-flex) or, in the
//! browser, on WebGPU.
//!
//! A family is one module holding its module tree, its forward passes, the
//! map from its checkpoints' keys and its part of `config.json`:
//! [`bert`] (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA, BLEURT), [`deberta`],
//! [`gpt2`], [`bart`], [`t5`], and [`comet`] (COMET's estimators on a BERT-family
//! encoder). Around them:
//!
//! - [`config`]: `config.json` into [`ModelConfig`] (the shared fields; each
//!   family reads its own);
//! - [`network`]: [`Network`], one variant per family, and the
//!   [`network::Architecture`] trait every family implements;
//! - [`weights`]: checkpoint files, formats, int8 quantization, packing and
//!   the prepared `.bpk` format;
//! - [`plm`]: a loaded model ([`Plm`]) and what metrics ask of it;
//! - [`batch`]: padded batches and passes within a budget;
//! - [`attention`], [`dense`], [`norm`], [`qgemm`]: the layers' CPU kernels;
//! - [`tokenizer`]: `tokenizer.json` through the `tokenizers` crate;
//! - [`registry`]: the default checkpoint of each metric.

pub mod attention;
pub mod attention_view;
pub mod bart;
pub mod batch;
pub mod bert;
pub mod chat;
pub mod comet;
pub mod config;
pub mod deberta;
pub mod dense;
pub mod generate;
pub mod gpt2;
pub mod llama;
pub mod network;
pub mod norm;
pub mod plm;
pub mod qgemm;
pub mod registry;
pub mod t5;
pub mod tokenizer;
pub mod weights;

use burn::tensor::{Tensor, activation};

pub use batch::{Batch, GPU_LENGTH_STEP, PassLimit, passes};
pub use config::{Activation, Family, Head, ModelConfig};
pub use network::Network;
pub use plm::{ForwardOutput, Plm};
pub use tokenizer::{LmToken, LmTokenizer, ModelEncoding};
pub use weights::{ModelFiles, Precision};

/// Everything that can go wrong loading or running a model, worded for the
/// person who picked the model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// `config.json` unreadable or incomplete.
    #[error("model config: {0}")]
    Config(String),
    /// An architecture, head or option we do not implement.
    #[error("unsupported model: {0}")]
    Unsupported(String),
    /// The texts given cannot be read this way (an empty text, a missing
    /// reference, one reference for idf weights...).
    #[error("{0}")]
    Input(String),
    /// Weights unreadable, incomplete or of the wrong shape.
    #[error("model weights: {0}")]
    Weights(String),
    /// Tokenizer missing or broken.
    #[error(transparent)]
    Tokenizer(#[from] tokenizer::TokenizerError),
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file the model needs is not there.
    #[error("{0}")]
    Missing(String),
    /// The device failed (WebGPU lost, out of memory, readback failed).
    #[error("device: {0}")]
    Device(String),
}

/// Applies a feed-forward activation.
pub(crate) fn activate<const D: usize>(x: Tensor<D>, act: Activation) -> Tensor<D> {
    match act {
        Activation::Gelu => dense::gelu(x),
        Activation::GeluTanh => activation::gelu_approximate(x),
        Activation::Relu => activation::relu(x),
        Activation::Silu => activation::silu(x),
    }
}

/// Reads a tensor back to the host. Asynchronous because WebGPU reads are;
/// on the CPU the future is ready at once.
pub async fn read_back<const D: usize>(t: Tensor<D>) -> Result<(Vec<f32>, [usize; D]), ModelError> {
    let dims = t.dims();
    let half = t.dtype() == burn::tensor::DType::F16;
    let data = t
        .into_data_async()
        .await
        .map_err(|e| ModelError::Device(format!("readback failed: {e:?}")))?;
    let values = data
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| ModelError::Device(format!("unexpected tensor data: {e:?}")))?;
    // A NaN or an infinity must never become a score (a NaN similarity
    // reads as 0 in a max). f16 saturates at 65504; in f32 it takes broken
    // weights.
    if !all_finite(&values) {
        return Err(if half {
            ModelError::Device(
                "the f16 pass overflowed (values beyond f16's range): use a device that \
                 computes in f32 (`--device gpu`)"
                    .into(),
            )
        } else {
            ModelError::Weights(
                "the model computed NaN or infinite values: its weights (or config.json) \
                 are broken"
                    .into(),
            )
        });
    }
    Ok((values, dims))
}

/// Whether no value is NaN or infinite. Tests the exponent bits without an
/// early exit, so it vectorizes: a masked LM's readback holds millions.
fn all_finite(values: &[f32]) -> bool {
    const EXPONENT: u32 = 0x7f80_0000;
    values.chunks(256).all(|c| {
        c.iter().fold(0u32, |acc, v| {
            acc | u32::from(v.to_bits() & EXPONENT == EXPONENT)
        }) == 0
    })
}

/// [`read_back`] for native callers (CPU devices only: a WebGPU read cannot block).
#[cfg(not(target_arch = "wasm32"))]
pub fn read_back_blocking<const D: usize>(
    t: Tensor<D>,
) -> Result<(Vec<f32>, [usize; D]), ModelError> {
    futures::executor::block_on(read_back(t))
}

#[cfg(test)]
mod tests {
    use super::all_finite;

    #[test]
    fn all_finite_finds_one_nan_or_infinity_anywhere() {
        let mut values = vec![1.5f32; 1000];
        assert!(all_finite(&values));
        assert!(all_finite(&[
            f32::MAX,
            f32::MIN,
            -0.0,
            f32::MIN_POSITIVE / 2.0
        ]));
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for at in [0, 255, 256, 999] {
                values[at] = bad;
                assert!(!all_finite(&values), "{bad} at {at}");
                values[at] = 1.5;
            }
        }
    }
}
