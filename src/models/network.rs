//! The network a checkpoint holds ([`Network`]: one variant per family's
//! module tree) and what every family's module offers the rest of the code
//! ([`Architecture`]): building its tree from the config, naming the
//! checkpoint's keys for it, and its forward passes. Code that works on
//! any network goes through [`with_network!`] and [`map_network!`] rather
//! than matching every variant.

use burn::module::{Module, Param};
use burn::store::ModuleSnapshot;
use burn::tensor::{Bool, Device, FloatDType, Int, Tensor};

use super::bart::BartModel;
use super::bert::BertModel;
use super::comet::CometModel;
use super::config::{Family, Head, ModelConfig};
use super::deberta::DebertaModel;
use super::dense::PackedWeights;
use super::generate::KvCache;
use super::gpt2::Gpt2Model;
use super::llama::LlamaModel;
use super::t5::T5Model;
use super::weights::{
    self, Precision, WeightSource, cast_floats, dequantize_all, dequantize_lookups, quantize,
};
use super::{Batch, ModelError};

/// What a family's network offers: its module tree built from the config,
/// the map from checkpoint keys to that tree, and its passes. The heads a
/// family lacks answer `None`.
pub trait Architecture: Module + ModuleSnapshot + Sized {
    /// The module tree `config` describes, freshly initialised (a
    /// checkpoint is loaded over it).
    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError>;

    /// Renames from the checkpoint's keys to this tree's parameter paths,
    /// in the order they apply (regexes and their replacements). `names`
    /// are the checkpoint's tensor names where the format lists them
    /// (safetensors); `None` for a PyTorch pickle, which holds every tied
    /// copy.
    fn key_map(config: &ModelConfig, names: Option<&[String]>) -> Vec<(String, String)>;

    /// The hidden states `0..=layers` of a padded batch (0: the
    /// embeddings). Encoders that can stop early run `layers` layers;
    /// the others return all of theirs.
    fn hidden_states(&self, batch: &Batch, layers: usize) -> Vec<Tensor<3>>;

    /// The input token-embedding table `[vocab, hidden]`.
    fn input_embeddings(&self) -> Tensor<2>;

    /// The embedding table a causal LM's head reads transposed, when it is
    /// tied to it ([`super::dense::project_tied`]).
    fn tied_head(&self) -> Option<&Param<Tensor<2>>> {
        None
    }

    /// Next-token logits `[batch, tokens, vocab]` of a causal LM.
    fn causal_lm_logits(&self, _last_hidden: Tensor<3>) -> Option<Tensor<3>> {
        None
    }

    /// The network as an encoder-decoder (BART, T5), whose passes the
    /// methods below build on; `None` for the others.
    fn encoder_decoder(&self) -> Option<&dyn EncoderDecoder> {
        None
    }

    /// An encoder-decoder's next-token logits `[batch, target tokens,
    /// vocab]`: `sources` encoded, `targets` (the decoder's inputs)
    /// decoded against them. `None` for a network without a decoder.
    fn seq2seq_logits(&self, sources: &Batch, targets: &Batch) -> Option<Tensor<3>> {
        let m = self.encoder_decoder()?;
        let memory = m.encode_last(sources);
        Some(m.lm_logits(m.decode(targets, memory, sources.padding.clone())))
    }

    /// Whether [`Architecture::decode_step`] works: a causal LM, or an
    /// encoder-decoder after [`Architecture::start_decoding`].
    fn can_decode(&self) -> bool {
        self.encoder_decoder().is_some()
    }

    /// An encoder-decoder reads `source` (one sequence) into `cache` for
    /// its decoder's cross-attention; `false` for a decoder-only network.
    fn start_decoding(&self, source: &Batch, cache: &mut KvCache) -> bool {
        match self.encoder_decoder() {
            Some(m) => {
                m.read_source(source, cache);
                true
            }
            None => false,
        }
    }

    /// Next-token logits `[rows, 1, vocab]` after `ids` (`[rows, new]`),
    /// which follow the tokens `cache` holds; their keys and values join
    /// it. `None` where the family cannot decode.
    fn decode_step(&self, ids: Tensor<2, Int>, cache: &mut KvCache) -> Option<Tensor<3>> {
        let m = self.encoder_decoder()?;
        let hidden = m.decode_cached(ids, cache)?;
        let [rows, new, width] = hidden.dims();
        // The head (a vocabulary-wide product) runs on the last position only.
        Some(m.lm_logits(hidden.slice([0..rows, new - 1..new, 0..width])))
    }

    /// Each layer's attention probabilities `[batch, heads, queries, keys]`
    /// over a padded batch (the attention view); `None` where the family
    /// does not offer them.
    fn attention_probabilities(&self, _batch: &Batch) -> Option<Vec<Tensor<4>>> {
        None
    }

    /// Masked-LM logits `[batch, tokens, vocab]` from (rows of) the last
    /// hidden state.
    fn mlm_logits(&self, _hidden: Tensor<3>) -> Option<Tensor<3>> {
        None
    }

    /// Sequence-classification logits `[batch, labels]`.
    fn class_logits(&self, _last_hidden: Tensor<3>) -> Option<Tensor<2>> {
        None
    }
}

/// The passes of an encoder-decoder (BART, T5) that scoring and decoding
/// share; [`Architecture`]'s seq2seq methods build on them.
pub trait EncoderDecoder {
    /// The encoder's output for a right-padded batch.
    fn encode_last(&self, batch: &Batch) -> Tensor<3>;

    /// The decoder's last hidden state `[batch, target tokens, hidden]` for
    /// the decoder inputs in `targets`, attending to `memory` (the encoder's
    /// output for a batch whose padding `memory_padding` marks).
    fn decode(
        &self,
        targets: &Batch,
        memory: Tensor<3>,
        memory_padding: Tensor<4, Bool>,
    ) -> Tensor<3>;

    /// Reads `source` (one sequence) for decoding: the cross-attention keys
    /// and values over the encoder's output go into `cache`.
    fn read_source(&self, source: &Batch, cache: &mut KvCache);

    /// The decoder's last hidden state for `ids`, which follow the tokens
    /// `cache` holds; `None` before [`EncoderDecoder::read_source`].
    fn decode_cached(&self, ids: Tensor<2, Int>, cache: &mut KvCache) -> Option<Tensor<3>>;

    /// Next-token logits `[batch, tokens, vocab]` from the decoder's state.
    fn lm_logits(&self, hidden: Tensor<3>) -> Tensor<3>;
}

/// The rename that reads a checkpoint's shared embeddings from one of their
/// tied copies, for a file that lacks all of `shared` (the first of `tied`
/// that `names` holds becomes `shared.weight`); `None` when one is there or
/// no copy is.
pub(crate) fn tied_copy(
    names: &[String],
    shared: &[&str],
    tied: &[&str],
) -> Option<(String, String)> {
    let has = |n: &str| names.iter().any(|x| x == n);
    if shared.iter().any(|s| has(s)) {
        return None;
    }
    let copy = tied.iter().find(|t| has(t))?;
    Some((format!("^{}$", regex::escape(copy)), "shared.weight".into()))
}

/// Static key renames as [`Architecture::key_map`] returns them.
pub(crate) fn owned_map(pairs: Vec<(&str, &str)>) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

/// The network a checkpoint holds (one per loaded model, so the size of the
/// variants does not matter).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Network {
    /// A BERT-family encoder.
    Bert(BertModel),
    /// A GPT-2 decoder.
    Gpt2(Gpt2Model),
    /// A COMET estimator on its encoder.
    Comet(CometModel),
    /// A BART encoder-decoder.
    Bart(BartModel),
    /// A DeBERTa-v2/v3 encoder.
    Deberta(DebertaModel),
    /// A T5 encoder-decoder.
    T5(T5Model),
    /// A Llama-family decoder LLM.
    Llama(LlamaModel),
}

/// Evaluates one expression with whichever module a [`Network`] holds bound
/// to `$m` (each variant's type implements [`Architecture`]).
macro_rules! with_network {
    ($network:expr, $m:ident => $body:expr) => {
        match $network {
            $crate::models::Network::Bert($m) => $body,
            $crate::models::Network::Gpt2($m) => $body,
            $crate::models::Network::Comet($m) => $body,
            $crate::models::Network::Bart($m) => $body,
            $crate::models::Network::Deberta($m) => $body,
            $crate::models::Network::T5($m) => $body,
            $crate::models::Network::Llama($m) => $body,
        }
    };
}
pub(crate) use with_network;

/// Applies one expression to whichever module a [`Network`] holds, giving
/// back a network of the same kind.
macro_rules! map_network {
    ($network:expr, $m:ident => $body:expr) => {
        match $network {
            Network::Bert($m) => Network::Bert($body),
            Network::Gpt2($m) => Network::Gpt2($body),
            Network::Comet($m) => Network::Comet($body),
            Network::Bart($m) => Network::Bart($body),
            Network::Deberta($m) => Network::Deberta($body),
            Network::T5($m) => Network::T5($body),
            Network::Llama($m) => Network::Llama($body),
        }
    };
}
pub(crate) use map_network;

impl Network {
    /// The network `config` describes with the weights of `source` loaded, at `precision`
    /// (weights stored int8 stay int8; f32 weights are quantized when asked).
    pub fn load(
        config: &ModelConfig,
        source: WeightSource,
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
        // (BENCHMARKS.md, "Real GPU"); log-probabilities and classifiers were not
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
            precision != Precision::F32 || config.comet.is_some() || compute != FloatDType::F32;
        let device = if on_cpu { &cpu } else { target };
        let mut network = Self::build(config, device)?;
        if stored != Precision::F32 && precision != stored {
            return Err(ModelError::Unsupported(format!(
                "this prepared file holds {stored} weights; load it at {stored}"
            )));
        }
        with_network!(&mut network, m => weights::load(m, source, config))?;
        // An int8 load from f32 weights rounds what [`prepare`] rounds, the
        // embedding tables included, so one `int8` signature means one set of
        // numbers whether the page rounded the hub's file or the site served a
        // prepared one: the path of `prepare` and then of a load of its file.
        let network = match (stored, precision) {
            (Precision::F32, Precision::F32) => network,
            (Precision::F32, p) => {
                map_network!(network, m => dequantize_lookups(quantize(m, p, true)))
            }
            _ => map_network!(network, m => dequantize_lookups(m)),
        };
        // Compute is dequantized unless `keep_int8` (the caller then packs
        // the projections for integer products, [`PackedWeights`]):
        // burn-flex would dequantize a quantized weight on every use (a
        // MiniLM pass takes 1.3 s instead of 13 ms), and quantized kernels
        // on WebGPU are not yet checked against the CPU. So the int8 values
        // are expanded to f32 once, after loading: int8 is what is
        // downloaded and cached, the numbers are the int8 model's, the
        // speed is f32's.
        let mut network = if precision != Precision::F32 && !keep_int8 {
            map_network!(network, m => dequantize_all(m))
        } else {
            network
        };
        if let Network::Comet(m) = &mut network {
            m.resolve_mix()?;
        }
        let network = if on_cpu {
            map_network!(network, m => m.to_device(target))
        } else {
            network
        };
        Ok(if compute == FloatDType::F32 {
            network
        } else {
            map_network!(network, m => cast_floats(m, compute))
        })
    }

    /// Packs every int8 projection for integer products (none when the
    /// network was loaded without `keep_int8`) and, with `panels`, every f32
    /// projection on the CPU into rten-gemm's panels: they run while the
    /// value this returns lives.
    pub fn packed_weights(&self, panels: bool) -> PackedWeights {
        with_network!(self, m => weights::packed_weights(m, panels, m.tied_head()))
    }

    /// The empty module tree `config` describes, on `device`: a COMET
    /// estimator when the config carries its hparams, else the family's
    /// network.
    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError> {
        Ok(match config.family {
            _ if config.comet.is_some() => Network::Comet(CometModel::build(config, device)?),
            Family::Gpt2 => Network::Gpt2(Gpt2Model::build(config, device)?),
            Family::Bart(_) => Network::Bart(BartModel::build(config, device)?),
            Family::Deberta(_) => Network::Deberta(DebertaModel::build(config, device)?),
            Family::T5(_) => Network::T5(T5Model::build(config, device)?),
            Family::Llama(_) => Network::Llama(LlamaModel::build(config, device)?),
            Family::Bert | Family::Roberta | Family::DistilBert | Family::Electra => {
                Network::Bert(BertModel::build(config, device)?)
            }
        })
    }
}
