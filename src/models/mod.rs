//! Pretrained language models on burn: Hugging Face checkpoints (BERT
//! family, GPT-2, BART) loaded from bytes, optionally int8-quantized, run on the
//! CPU (burn-flex) or, in the browser, on WebGPU.
//!
//! - [`config`]: `config.json` into [`ModelConfig`];
//! - [`bert`], [`gpt2`], [`bart`]: the architectures, module trees mirroring the checkpoints;
//! - [`attention`]: scaled dot-product attention, on the CPU reading the heads in place;
//! - [`comet`]: COMET's estimators on a BERT-family encoder (hparams.yaml + Lightning checkpoint);
//! - [`weights`]: safetensors (sharded too) and prepared `.bpk` files, quantization;
//! - [`tokenizer`]: `tokenizer.json` through the `tokenizers` crate;
//! - [`registry`]: the default checkpoint of each metric.

pub mod attention;
pub mod bart;
pub mod bert;
pub mod comet;
pub mod config;
pub mod deberta;
pub mod dense;
pub mod gpt2;
pub mod norm;
pub mod qgemm;
pub mod registry;
pub mod tokenizer;
pub mod weights;

use burn::tensor::{Bool, Device, Int, Tensor, TensorData, activation};

pub use config::{Activation, Family, Head, ModelConfig};
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

/// A padded batch of token sequences, ready for a forward pass.
pub struct Batch {
    /// Token ids `[batch, tokens]`, right-padded with the padding id.
    pub ids: Tensor<2, Int>,
    /// Position ids `[batch, tokens]`.
    pub positions: Tensor<2, Int>,
    /// Segment ids `[batch, tokens]` (all 0 unless a BERT text pair).
    pub types: Tensor<2, Int>,
    /// `[batch, 1, 1, tokens]`: true for padding, which attention hides.
    pub padding: Tensor<4, Bool>,
    /// Real length of each sequence.
    pub lengths: Vec<usize>,
}

impl Batch {
    /// Pads `sequences` (already tokenized and within the model's limit)
    /// into one batch on `device`; all segment ids 0.
    pub fn new(sequences: &[Vec<u32>], config: &ModelConfig, device: &Device) -> Self {
        Self::with_types(sequences, None, config, device)
    }

    /// [`Batch::new`] with segment ids per token (text pairs).
    pub fn with_types(
        sequences: &[Vec<u32>],
        types: Option<&[Vec<u32>]>,
        config: &ModelConfig,
        device: &Device,
    ) -> Self {
        Self::padded(sequences, types, 0, config, device)
    }

    /// [`Batch::with_types`] padded to `length` tokens, or to the longest
    /// sequence where that is longer.
    pub fn padded(
        sequences: &[Vec<u32>],
        types: Option<&[Vec<u32>]>,
        length: usize,
        config: &ModelConfig,
        device: &Device,
    ) -> Self {
        let b = sequences.len();
        let longest = sequences.iter().map(Vec::len).max().unwrap_or(0);
        let l = longest.max(length).max(1);
        let mut ids = Vec::with_capacity(b * l);
        let mut positions = Vec::with_capacity(b * l);
        let mut segment = Vec::with_capacity(b * l);
        let mut padding = Vec::with_capacity(b * l);
        for (s, seq) in sequences.iter().enumerate() {
            let seq_types = types.map(|t| &t[s]);
            let offsets = bert::position_ids(config.family, config.pad_token_id, seq, l);
            for (i, &offset) in offsets.iter().enumerate() {
                let real = i < seq.len();
                segment.push(seq_types.and_then(|t| t.get(i)).map_or(0, |&t| t as i64));
                ids.push(if real {
                    seq[i] as i64
                } else {
                    config.pad_token_id as i64
                });
                // Padding is masked out; any valid position will do.
                positions.push(if real { offset } else { 0 });
                padding.push(!real);
            }
        }
        Self {
            ids: Tensor::from_data(TensorData::new(ids, [b, l]), device),
            positions: Tensor::from_data(TensorData::new(positions, [b, l]), device),
            types: Tensor::from_data(TensorData::new(segment, [b, l]), device),
            padding: Tensor::from_data(TensorData::new(padding, [b, 1, 1, l]), device),
            lengths: sequences.iter().map(Vec::len).collect(),
        }
    }
}

/// Applies a feed-forward activation.
pub(crate) fn activate<const D: usize>(x: Tensor<D>, act: Activation) -> Tensor<D> {
    match act {
        Activation::Gelu => dense::gelu(x),
        Activation::GeluTanh => activation::gelu_approximate(x),
        Activation::Relu => activation::relu(x),
    }
}

/// The network a checkpoint holds (one per loaded model, so the size of the
/// variants does not matter).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Network {
    /// A BERT-family encoder.
    Bert(bert::BertModel),
    /// A GPT-2 decoder.
    Gpt2(gpt2::Gpt2Model),
    /// A COMET estimator on its encoder.
    Comet(comet::CometModel),
    /// A BART encoder-decoder.
    Bart(bart::BartModel),
    /// A DeBERTa-v2/v3 encoder.
    Deberta(deberta::DebertaModel),
}

/// A loaded model: its config, tokenizer and network on one device.
#[derive(Debug)]
pub struct Plm {
    /// Model id or folder name.
    pub name: String,
    /// Unique to this load (two loads of one name differ): what caches key on.
    pub load_id: u64,
    /// What `config.json` said.
    pub config: ModelConfig,
    /// Its tokenizer, limited to the model's positions.
    pub tokenizer: LmTokenizer,
    /// The network.
    pub network: Network,
    /// Where it runs.
    pub device: Device,
    /// Weight precision.
    pub precision: Precision,
    /// Its projections packed once for their CPU products: an int8
    /// model's as integer products (the browser), an f32 model's in
    /// rten-gemm's panels (natively); empty elsewhere.
    pub packed: dense::PackedWeights,
    /// Passes are padded to a multiple of this many tokens (1 on the CPU,
    /// [`GPU_LENGTH_STEP`] elsewhere).
    pub length_step: usize,
}

impl Plm {
    /// Precision as signatures show it: the weights' (`f32`, `int8`), and
    /// f16 where the device computes in f16 (`f16`, `int8-f16`), i16 where
    /// int8 projections are integer products (`int8-i16`: the browser's
    /// CPU; BERTScore within 1e-3 of `int8`'s where measured).
    pub fn precision_label(&self) -> String {
        match (self.precision, self.device.settings().float_dtype) {
            (p, burn::tensor::FloatDType::F32) if self.packed.integers() > 0 => format!("{p}-i16"),
            (p, burn::tensor::FloatDType::F32) => p.to_string(),
            (Precision::F32, d) => format!("{d:?}").to_lowercase(),
            (p, d) => format!("{p}-{d:?}").to_lowercase(),
        }
    }

    /// The network's parameter count.
    pub fn parameters(&self) -> usize {
        use burn::module::Module;
        match &self.network {
            Network::Bert(m) => m.num_params(),
            Network::Gpt2(m) => m.num_params(),
            Network::Comet(m) => m.num_params(),
            Network::Bart(m) => m.num_params(),
            Network::Deberta(m) => m.num_params(),
        }
    }
}

/// One forward pass's results, still on the device.
pub struct ForwardOutput {
    /// Embedding output then each layer's (`num_layers + 1`, `[batch, tokens, hidden]`).
    pub hidden_states: Vec<Tensor<3>>,
    /// Real length of each sequence.
    pub lengths: Vec<usize>,
}

/// A GPU pass's token count is rounded up to a multiple of this. Each new
/// tensor shape can cost kernel compilations and, with autotune, tuning
/// runs, and texts give many lengths: BERTScore of 2000 WMT21 pairs made 88
/// passes of 42 different lengths (with steps of 16: at most 32 lengths up to
/// 512 tokens). On an H200 this took the CLI's second run from 17.6 s to
/// 12.3 s, for at most 15 padded positions per sequence, which a GPU computes
/// at little cost. The CPU pads nothing ([`CPU_PADDING`]).
pub const GPU_LENGTH_STEP: usize = 16;

/// The most padding a CPU pass may compute, as a share of its positions.
const CPU_PADDING: f64 = 0.125;

/// What bounds one forward pass.
#[derive(Clone, Copy, Debug)]
pub enum PassLimit {
    /// At most this many sequences.
    Sequences(usize),
    /// At most this many positions, padding included (a longer sequence
    /// gets a pass of its own).
    Tokens(usize),
}

/// Splits `items` (best sorted by length, shortest first) into forward
/// passes within `limit`; every sequence of a pass is padded to its longest.
/// With `cpu`, a pass also ends before a sequence that would make more than
/// 1/8 of its positions padding: on the CPU a padded position costs as much
/// as a real token (200 MENLI pairs in batches of 16: 38% of the positions
/// were padding, 11% with this rule), while on a GPU a pass's fixed cost
/// outweighs its padding.
pub fn passes<T>(items: &[T], len: impl Fn(&T) -> usize, limit: PassLimit, cpu: bool) -> Vec<&[T]> {
    let mut out = Vec::new();
    let (mut start, mut tokens, mut longest) = (0, 0, 0);
    for (i, item) in items.iter().enumerate() {
        let n = len(item);
        let count = i - start + 1;
        let padded = count * longest.max(n);
        let full = match limit {
            PassLimit::Sequences(max) => count > max.max(1),
            PassLimit::Tokens(budget) => padded > budget,
        };
        let wasteful = cpu && (padded - (tokens + n)) as f64 > CPU_PADDING * padded as f64;
        if count > 1 && (full || wasteful) {
            out.push(&items[start..i]);
            (start, tokens, longest) = (i, 0, 0);
        }
        tokens += n;
        longest = longest.max(n);
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

impl Plm {
    /// [`passes`] for this model's device (the padding rule on the CPU),
    /// with lengths as [`Plm::pass_length`] pads them.
    pub fn passes<'a, T>(
        &self,
        items: &'a [T],
        len: impl Fn(&T) -> usize,
        limit: PassLimit,
    ) -> Vec<&'a [T]> {
        // Budgets count the positions a pass computes: padded ones too.
        let padded = |item: &T| self.pass_length(len(item));
        passes(items, padded, limit, self.device == Device::flex())
    }

    /// The padded token count of a pass whose longest sequence has
    /// `longest` tokens: the next multiple of [`Plm::length_step`], within
    /// the model's limit.
    pub fn pass_length(&self, longest: usize) -> usize {
        let step = self.length_step.max(1);
        let limit = self.config.max_tokens().max(longest);
        longest.div_ceil(step).saturating_mul(step).min(limit)
    }

    /// One pass's padded batch on this model's device ([`Plm::pass_length`]).
    pub fn batch(&self, sequences: &[Vec<u32>], types: Option<&[Vec<u32>]>) -> Batch {
        let longest = sequences.iter().map(Vec::len).max().unwrap_or(0);
        let length = self.pass_length(longest);
        Batch::padded(sequences, types, length, &self.config, &self.device)
    }

    /// Tokenizes `text` as the model reads it (special tokens added, cut to
    /// the model's limit; `truncated` says when).
    pub fn encode(&self, text: &str) -> Result<ModelEncoding, ModelError> {
        Ok(self.tokenizer.encode_for_model(text)?)
    }

    /// Runs the network over token sequences and returns every hidden state.
    pub fn forward(&self, sequences: &[Vec<u32>]) -> Result<ForwardOutput, ModelError> {
        self.forward_with_types(sequences, None)
    }

    /// [`Plm::forward`] up to hidden state `layer` (0 = embeddings): the
    /// encoders (BERT family, DeBERTa) skip the layers above it, so BERTScore
    /// at layer 17 of roberta-large runs 17 of its 24 layers. The output
    /// holds hidden states `0..=layer` (all of them for the other networks).
    pub fn forward_to_layer(
        &self,
        sequences: &[Vec<u32>],
        layer: usize,
    ) -> Result<ForwardOutput, ModelError> {
        self.run(sequences, None, Some(layer))
    }

    /// [`Plm::forward`] with segment ids (text pairs for cross-encoders).
    pub fn forward_with_types(
        &self,
        sequences: &[Vec<u32>],
        types: Option<&[Vec<u32>]>,
    ) -> Result<ForwardOutput, ModelError> {
        self.run(sequences, types, None)
    }

    fn run(
        &self,
        sequences: &[Vec<u32>],
        types: Option<&[Vec<u32>]>,
        up_to: Option<usize>,
    ) -> Result<ForwardOutput, ModelError> {
        let limit = self.config.max_tokens();
        if let Some(long) = sequences.iter().find(|s| s.len() > limit) {
            return Err(ModelError::Input(format!(
                "{} tokens exceed {}'s limit of {limit}",
                long.len(),
                self.name
            )));
        }
        if sequences.is_empty() || sequences.iter().any(Vec::is_empty) {
            return Err(ModelError::Input("empty input sequence".into()));
        }
        self.check_ids(sequences.iter())?;
        let batch = self.batch(sequences, types);
        let layers = up_to.map_or(self.config.num_layers, |l| l.min(self.config.num_layers));
        let hidden_states = match &self.network {
            Network::Bert(m) => m.forward_layers(&batch, layers).hidden_states,
            Network::Gpt2(m) => m.forward(&batch).hidden_states,
            Network::Comet(m) => m.encoder.forward(&batch).hidden_states,
            // An encoder-decoder's hidden states are its encoder's.
            Network::Bart(m) => m.encode(&batch),
            Network::Deberta(m) => m.forward_layers(&batch, layers),
        };
        Ok(ForwardOutput {
            hidden_states,
            lengths: batch.lengths,
        })
    }
}

impl Plm {
    /// Refuses ids outside the embedding table (bart-large-cnn's tokenizer
    /// gives `<mask>` the id 50264 of a 50264-row table): an embedding lookup
    /// would panic on the CPU and read past the table on WebGPU.
    fn check_ids<'a>(
        &self,
        sequences: impl Iterator<Item = &'a Vec<u32>>,
    ) -> Result<(), ModelError> {
        let vocab = self.config.vocab_size;
        for s in sequences {
            if let Some(&id) = s.iter().find(|&&id| id as usize >= vocab) {
                let token = self.tokenizer.id_to_token(id).unwrap_or_default();
                return Err(ModelError::Input(format!(
                    "the text holds token {token:?} (id {id}), which {}'s tokenizer knows but its \
                     embeddings do not (vocab_size {vocab}): remove it from the text",
                    self.name
                )));
            }
        }
        Ok(())
    }

    fn missing_head(&self, what: &str) -> ModelError {
        ModelError::Unsupported(format!(
            "{} has no {what} (its config.json says {:?}); pick a checkpoint with one",
            self.name, self.config.architecture
        ))
    }

    /// The input token-embedding table `[vocab, hidden]` (what word
    /// neighbours are measured in).
    pub fn input_embeddings(&self) -> Tensor<2> {
        match &self.network {
            Network::Bert(m) => m.embeddings.word_embeddings.weight.val(),
            Network::Gpt2(m) => m.wte.weight.val(),
            Network::Comet(m) => m.encoder.embeddings.word_embeddings.weight.val(),
            Network::Bart(m) => m.shared.weight.val(),
            Network::Deberta(m) => m.embeddings.word_embeddings.weight.val(),
        }
    }

    /// Next-token logits `[batch, tokens, vocab]` of a causal LM (GPT-2).
    pub fn lm_logits(&self, out: &ForwardOutput) -> Result<Tensor<3>, ModelError> {
        match &self.network {
            Network::Gpt2(m) => Ok(m.lm_logits(last_hidden(out))),
            Network::Bert(_) | Network::Comet(_) | Network::Bart(_) | Network::Deberta(_) => {
                Err(self.missing_head("causal language-model head"))
            }
        }
    }

    /// Masked-LM logits `[batch, tokens, vocab]` from `hidden` (the last
    /// hidden state, or rows of it).
    pub fn mlm_logits(&self, hidden: Tensor<3>) -> Result<Tensor<3>, ModelError> {
        let compute = self.device.settings().float_dtype;
        if compute != burn::tensor::FloatDType::F32 {
            // Log-probabilities over the vocabulary at f16 were never measured.
            return Err(ModelError::Unsupported(format!(
                "{}'s masked-LM log-probabilities are not offered at {compute:?}: \
                 use a device that computes in f32 (`--device gpu`)",
                self.name
            )));
        }
        match &self.network {
            Network::Bert(m) => m.mlm_logits(hidden),
            Network::Gpt2(_) | Network::Comet(_) | Network::Bart(_) | Network::Deberta(_) => None,
        }
        .ok_or_else(|| self.missing_head("masked-LM head"))
    }

    /// Sequence-classification logits `[batch, labels]`.
    pub fn class_logits(&self, out: &ForwardOutput) -> Result<Tensor<2>, ModelError> {
        match &self.network {
            Network::Bert(m) => m.class_logits(last_hidden(out)),
            Network::Deberta(m) => m.class_logits(last_hidden(out)),
            Network::Gpt2(_) | Network::Comet(_) | Network::Bart(_) => None,
        }
        .ok_or_else(|| self.missing_head("sequence-classification head"))
    }

    /// An encoder-decoder's next-token logits `[batch, target tokens,
    /// vocab]`: `sources[i]` encoded, `decoder_inputs[i]` decoded against
    /// it (both already tokenized and within the model's limit).
    pub fn seq2seq_logits(
        &self,
        sources: &[Vec<u32>],
        decoder_inputs: &[Vec<u32>],
    ) -> Result<Tensor<3>, ModelError> {
        let Network::Bart(m) = &self.network else {
            return Err(self.missing_head("encoder-decoder language-model head"));
        };
        let limit = self.config.max_tokens();
        let all = sources.iter().chain(decoder_inputs);
        if let Some(long) = all.clone().find(|s| s.len() > limit) {
            return Err(ModelError::Input(format!(
                "{} tokens exceed {}'s limit of {limit}",
                long.len(),
                self.name
            )));
        }
        if sources.len() != decoder_inputs.len()
            || sources.is_empty()
            || all.clone().any(Vec::is_empty)
        {
            return Err(ModelError::Input("empty input sequence".into()));
        }
        self.check_ids(all.clone())?;
        let memory_batch = self.batch(sources, None);
        let memory = m.encode_last(&memory_batch);
        let targets = self.batch(decoder_inputs, None);
        Ok(m.lm_logits(m.decode(&targets, memory, memory_batch.padding)))
    }
}

fn last_hidden(out: &ForwardOutput) -> Tensor<3> {
    out.hidden_states
        .last()
        .expect("a forward pass returns at least the embeddings")
        .clone()
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
mod pass_tests {
    use super::{PassLimit, all_finite, passes};

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

    #[test]
    fn passes_keep_the_padded_size_within_a_token_budget() {
        let lengths = [10usize, 10, 100, 300, 600];
        let p = passes(&lengths, |&n| n, PassLimit::Tokens(512), false);
        assert_eq!(p, vec![&[10, 10, 100][..], &[300], &[600]]);
        // Unsorted items are bounded by their longest.
        let p = passes(
            &[100usize, 10, 200, 10],
            |&n| n,
            PassLimit::Tokens(512),
            false,
        );
        assert_eq!(p, vec![&[100, 10][..], &[200, 10]]);
    }

    #[test]
    fn cpu_passes_end_before_too_much_padding() {
        let lengths = [12usize, 12, 13, 14, 20, 21, 22, 36];
        // A GPU takes whole batches.
        assert_eq!(
            passes(&lengths, |&n| n, PassLimit::Sequences(32), false),
            vec![&lengths[..]]
        );
        assert_eq!(
            passes(&lengths, |&n| n, PassLimit::Sequences(3), false),
            vec![&[12, 12, 13][..], &[14, 20, 21], &[22, 36]]
        );
        // On the CPU at most 1/8 of a pass's positions are padding: 4 x 14
        // positions hold 51 tokens (9% padding), 5 x 20 would hold 71.
        let p = passes(&lengths, |&n| n, PassLimit::Sequences(32), true);
        assert_eq!(p, vec![&[12, 12, 13, 14][..], &[20, 21, 22], &[36]]);
        for pass in &p {
            let padded = pass.len() * pass.iter().max().unwrap();
            let tokens: usize = pass.iter().sum();
            assert!((padded - tokens) as f64 <= 0.125 * padded as f64);
        }
        // Every item exactly once, in order.
        assert_eq!(p.concat(), lengths);
    }
}
