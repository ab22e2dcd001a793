//! A loaded model ([`Plm`]): config, tokenizer and network on one device,
//! and the passes metrics ask of it (hidden states, heads' logits).

use burn::tensor::{Device, FloatDType, Tensor};

use super::network::{Architecture, Network, with_network};
use super::weights::{F32_PANELS, INTEGER_PRODUCTS, ModelFiles, Precision};
use super::{
    Batch, GPU_LENGTH_STEP, LmTokenizer, ModelConfig, ModelEncoding, ModelError, PassLimit, dense,
    passes,
};

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
    /// The last texts a causal LM read (through [`Plm::next_token_logits`]
    /// or a one-row generation) and their keys and values, the latest
    /// first, a few and at most [`PREFIX_BYTES`] (the latest always kept): a
    /// text that starts like one of them (a judge's instructions and article
    /// before the summary being typed, a sampled answer asked again, each of
    /// several judges' prompts in turn) reads only what follows the start
    /// it shares with the closest.
    pub prefix: std::sync::Mutex<Vec<(Vec<u32>, super::generate::KvCache)>>,
    /// Its chat template (tokenizer_config.json's or chat_template.jinja),
    /// none for a model without one, or why it could not be read (a model
    /// whose template does not parse still loads for what needs none).
    pub chat_template: Result<Option<super::chat::ChatTemplate>, String>,
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
        with_network!(&self.network, m => m.num_params())
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
        let chat_template = match files.tokenizer_config.as_deref() {
            Some(text) => {
                super::chat::ChatTemplate::from_tokenizer_config(text).map_err(|e| e.to_string())
            }
            None => Ok(None),
        };
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
            && precision != Precision::F32
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
                GPU_LENGTH_STEP
            },
            prefix: std::sync::Mutex::new(Vec::new()),
            chat_template,
        })
    }
}

/// One forward pass's results, still on the device.
pub struct ForwardOutput {
    /// Embedding output then each layer's (`num_layers + 1`, `[batch, tokens, hidden]`).
    pub hidden_states: Vec<Tensor<3>>,
    /// Real length of each sequence.
    pub lengths: Vec<usize>,
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
        let hidden_states = with_network!(&self.network, m => m.hidden_states(&batch, layers));
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
    pub(crate) fn check_ids<'a>(
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
        with_network!(&self.network, m => m.input_embeddings())
    }

    /// Next-token logits `[batch, tokens, vocab]` of a causal LM (GPT-2).
    pub fn lm_logits(&self, out: &ForwardOutput) -> Result<Tensor<3>, ModelError> {
        with_network!(&self.network, m => m.causal_lm_logits(last_hidden(out)))
            .ok_or_else(|| self.missing_head("causal language-model head"))
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
        with_network!(&self.network, m => m.mlm_logits(hidden))
            .ok_or_else(|| self.missing_head("masked-LM head"))
    }

    /// Sequence-classification logits `[batch, labels]`.
    pub fn class_logits(&self, out: &ForwardOutput) -> Result<Tensor<2>, ModelError> {
        with_network!(&self.network, m => m.class_logits(last_hidden(out)))
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
        let sources = self.batch(sources, None);
        let targets = self.batch(decoder_inputs, None);
        with_network!(&self.network, m => m.seq2seq_logits(&sources, &targets))
            .ok_or_else(|| self.missing_head("encoder-decoder language-model head"))
    }
}

/// An encoder-decoder's log-probabilities of target tokens.
impl Plm {
    /// For each `(source ids, label ids)` pair, log P(label k | source,
    /// labels before k) for every label (nats), the decoder reading
    /// `decoder_start labels[..n-1]` (transformers' `shift_tokens_right`,
    /// fairseq's `prev_output_tokens`) and the logits divided by
    /// `temperature` before the softmax. Identical pairs run once; pairs
    /// are batched by length within `budget` padded tokens of the longer
    /// side (a long source costs as much attention memory as a long target).
    pub async fn label_logprobs(
        &self,
        pairs: &[(Vec<u32>, Vec<u32>)],
        temperature: f32,
        budget: usize,
    ) -> Result<Vec<Vec<f64>>, ModelError> {
        use burn::tensor::{Int, TensorData, activation};
        let decoder = self
            .config
            .decoder()
            .ok_or_else(|| self.missing_head("encoder-decoder language-model head"))?;
        if pairs.iter().any(|(s, t)| s.is_empty() || t.is_empty()) {
            return Err(ModelError::Input("empty input sequence".into()));
        }
        let start = decoder.start_token_id;
        let pad = i64::from(self.config.pad_token_id);
        let mut distinct: Vec<&(Vec<u32>, Vec<u32>)> = Vec::new();
        let mut index: std::collections::HashMap<&(Vec<u32>, Vec<u32>), usize> =
            std::collections::HashMap::new();
        let slots: Vec<usize> = pairs
            .iter()
            .map(|pair| {
                *index.entry(pair).or_insert_with(|| {
                    distinct.push(pair);
                    distinct.len() - 1
                })
            })
            .collect();
        let size = |i: usize| distinct[i].0.len().max(distinct[i].1.len());
        let mut order: Vec<usize> = (0..distinct.len()).collect();
        order.sort_by_key(|&i| size(i));
        let mut scored: Vec<Vec<f64>> = vec![Vec::new(); distinct.len()];
        for chunk in self.passes(&order, |&i| size(i), PassLimit::Tokens(budget)) {
            let sources: Vec<Vec<u32>> = chunk.iter().map(|&i| distinct[i].0.clone()).collect();
            let labels: Vec<&Vec<u32>> = chunk.iter().map(|&i| &distinct[i].1).collect();
            let inputs: Vec<Vec<u32>> = labels
                .iter()
                .map(|l| {
                    std::iter::once(start)
                        .chain(l[..l.len() - 1].iter().copied())
                        .collect()
                })
                .collect();
            let mut logits = self.seq2seq_logits(&sources, &inputs)?;
            if temperature != 1.0 {
                logits = logits.div_scalar(temperature);
            }
            let [b, t, _] = logits.dims();
            let mut wanted = vec![pad; b * t];
            for (r, row) in labels.iter().enumerate() {
                for (k, &id) in row.iter().enumerate() {
                    wanted[r * t + k] = i64::from(id);
                }
            }
            let wanted: Tensor<3, Int> =
                Tensor::from_data(TensorData::new(wanted, [b, t, 1]), &self.device);
            let picked = activation::log_softmax(logits, 2).gather(2, wanted);
            let (values, _) = super::read_back(picked.reshape([b, t])).await?;
            for (r, &i) in chunk.iter().enumerate() {
                scored[i] = (0..labels[r].len())
                    .map(|k| f64::from(values[r * t + k]))
                    .collect();
            }
        }
        Ok(slots.into_iter().map(|s| scored[s].clone()).collect())
    }
}

fn last_hidden(out: &ForwardOutput) -> Tensor<3> {
    out.hidden_states
        .last()
        .expect("a forward pass returns at least the embeddings")
        .clone()
}

/// Texts a model keeps the keys and values of for prefix reuse.
pub const PREFIX_ENTRIES: usize = 8;

/// Bytes those keys and values may hold in all (the latest text's are
/// kept whatever their size).
pub const PREFIX_BYTES: usize = 256 << 20;

impl Plm {
    /// A causal LM's next-token logits after `ids` (within its limit),
    /// reusing the keys and values of the longest start `ids` shares with
    /// the text read before (kept per model): only the rest is run. The
    /// second value is how many tokens were reused. The logits equal a full
    /// pass's up to the products' rounding (1e-5 in tests).
    pub async fn next_token_logits(&self, ids: &[u32]) -> Result<(Vec<f32>, usize), ModelError> {
        if ids.is_empty() {
            return Err(ModelError::Input("the text has no tokens".into()));
        }
        if ids.len() > self.config.max_tokens() {
            return Err(ModelError::Input(format!(
                "{} tokens exceed {}'s limit of {}",
                ids.len(),
                self.name,
                self.config.max_tokens()
            )));
        }
        let vocab = self.config.vocab_size;
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(ModelError::Input(format!(
                "token id {id} is outside {}'s vocabulary ({vocab})",
                self.name
            )));
        }
        if self.config.head != super::Head::CausalLm {
            return Err(self.missing_head("causal language-model head"));
        }
        let (mut cache, shared) = self.take_prefix(ids)?;
        let new: Vec<i64> = ids[shared..].iter().map(|&t| i64::from(t)).collect();
        let tensor = burn::tensor::Tensor::<2, burn::tensor::Int>::from_data(
            burn::tensor::TensorData::new(new, [1, ids.len() - shared]),
            &self.device,
        );
        let logits = with_network!(&self.network, m => m.decode_step(tensor, &mut cache))
            .ok_or_else(|| self.missing_head("causal language-model head"))?;
        let (values, _) = super::read_back(logits).await?;
        self.keep_prefix(ids.to_vec(), cache);
        Ok((values, shared))
    }

    /// The kept prefix cache sharing the longest start with `ids`, cut to
    /// that start (at most all but `ids`' last token, whose logits are
    /// wanted), and how many tokens that is; an empty cache when none
    /// shares a token. The cache is taken out while a pass runs: a failed
    /// pass leaves no half-read one.
    pub(crate) fn take_prefix(
        &self,
        ids: &[u32],
    ) -> Result<(super::generate::KvCache, usize), ModelError> {
        let mut kept = self
            .prefix
            .lock()
            .map_err(|_| ModelError::Input("the prefix cache was poisoned".into()))?;
        let shared = |read: &[u32]| read.iter().zip(ids).take_while(|(a, b)| a == b).count();
        let best = (0..kept.len())
            .map(|i| (shared(&kept[i].0), i))
            .max_by_key(|&(n, i)| (n, std::cmp::Reverse(i)));
        // At least the last token runs: its logits are the answer.
        let best = best.map(|(n, i)| (n.min(ids.len().saturating_sub(1)), i));
        Ok(match best {
            Some((n, i)) if n > 0 => {
                let (_, mut cache) = kept.remove(i);
                cache.truncate(n);
                (cache, n)
            }
            _ => (super::generate::KvCache::new(), 0),
        })
    }

    /// Keeps `cache`, which holds the keys and values of `read` (one row),
    /// as the latest prefix; the oldest go past [`PREFIX_ENTRIES`] texts or
    /// [`PREFIX_BYTES`].
    pub(crate) fn keep_prefix(&self, read: Vec<u32>, cache: super::generate::KvCache) {
        let Ok(mut kept) = self.prefix.lock() else {
            return;
        };
        kept.insert(0, (read, cache));
        kept.truncate(PREFIX_ENTRIES);
        let mut total = 0;
        let within = kept
            .iter()
            .position(|(_, c)| {
                total += c.bytes();
                total > PREFIX_BYTES
            })
            .unwrap_or(kept.len());
        kept.truncate(within.max(1));
    }
}
