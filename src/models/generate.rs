//! Text generation: a key/value cache, and greedy, sampled and beam-search
//! decoding over any model that gives next-token logits ([`Decoder`]).
//!
//! Decoding follows transformers' `generate`: sampling applies the
//! temperature, then top-k, then top-p (nucleus: the smallest set of most
//! likely tokens whose probability reaches `top_p`) to the logits before
//! drawing; beam search keeps `beams` hypotheses, extends each by its
//! `2 x beams` best tokens, sets a hypothesis aside when it ends in an
//! end-of-sequence token, and ranks finished ones by their summed
//! log-probability over (generated length)^`length_penalty`. The random
//! stream is ChaCha8 seeded by `seed`, drawn in f64 over f32 logits, so one
//! seed gives one text natively and in the browser (where the logits are
//! equal). Generation is asynchronous (WebGPU reads are) and reports each
//! step to a callback that can stop it.

use std::ops::ControlFlow;

use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::network::{Architecture, with_network};
use super::{ModelError, Plm, read_back};

/// One layer's keys and values so far, `[rows, heads, tokens, head size]`
/// each (`None` before the first step).
pub type LayerCache = Option<(Tensor<4>, Tensor<4>)>;

/// Every layer's keys and values for the tokens a decoder has read, so a
/// step computes only its new tokens.
#[derive(Debug, Default)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    /// An encoder-decoder's cross-attention keys and values over its
    /// source, per decoder layer (one copy per row).
    cross: Vec<(Tensor<4>, Tensor<4>)>,
}

impl KvCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes its keys and values hold (f32 on every device).
    pub fn bytes(&self) -> usize {
        let own = self.layers.iter().flatten();
        let cross = self.cross.iter();
        own.chain(cross)
            .map(|(k, v)| {
                4 * (k.dims().iter().product::<usize>() + v.dims().iter().product::<usize>())
            })
            .sum()
    }

    /// Tokens the cache holds (per row).
    pub fn tokens(&self) -> usize {
        self.layers
            .first()
            .and_then(Option::as_ref)
            .map_or(0, |(k, _)| k.dims()[2])
    }

    /// Layer `i`'s slot (created empty when new).
    pub(crate) fn layer(&mut self, i: usize) -> &mut LayerCache {
        if self.layers.len() <= i {
            self.layers.resize_with(i + 1, || None);
        }
        &mut self.layers[i]
    }

    /// Position ids `[rows, new]` of `new` tokens after the ones the cache
    /// holds.
    pub(crate) fn positions(&self, rows: usize, new: usize, device: &Device) -> Tensor<2, Int> {
        let past = self.tokens();
        let ids: Vec<i64> = (0..rows)
            .flat_map(|_| (past..past + new).map(|p| p as i64))
            .collect();
        Tensor::from_data(TensorData::new(ids, [rows, new]), device)
    }

    /// Sets the cross-attention keys and values of every decoder layer.
    pub(crate) fn set_cross(&mut self, cross: Vec<(Tensor<4>, Tensor<4>)>) {
        self.cross = cross;
    }

    /// Decoder layer `i`'s cross-attention keys and values, once set.
    pub(crate) fn cross(&self, i: usize) -> Option<&(Tensor<4>, Tensor<4>)> {
        self.cross.get(i)
    }

    /// Keeps the first `tokens` positions of every layer's keys and values
    /// (all of them when it holds fewer): what a text that shares only
    /// that prefix with the one read can continue from.
    pub fn truncate(&mut self, tokens: usize) {
        for (k, v) in self.layers.iter_mut().flatten() {
            let [rows, heads, held, width] = k.dims();
            if held > tokens {
                *k = k.clone().slice([0..rows, 0..heads, 0..tokens, 0..width]);
                *v = v.clone().slice([0..rows, 0..heads, 0..tokens, 0..width]);
            }
        }
    }

    /// Keeps the rows `rows` (in that order, repeats allowed): the beams
    /// that survive a step, each continuing one of the old rows.
    pub fn keep_rows(&mut self, rows: &[usize]) {
        let cross = self.cross.iter_mut().map(|(k, v)| (k, v));
        let own = self.layers.iter_mut().flatten().map(|(k, v)| (k, v));
        for (k, v) in own.chain(cross) {
            let device = k.device();
            let ids: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
            let index = Tensor::<1, Int>::from_data(TensorData::new(ids, [rows.len()]), &device);
            *k = k.clone().select(0, index.clone());
            *v = v.clone().select(0, index);
        }
    }
}

/// Every decoder layer's cross-attention keys and values over `memory`
/// (an encoder's output), from each layer's key and value projections and
/// head count: what [`KvCache::set_cross`] takes.
pub(crate) fn cross_keys_values<'a>(
    memory: &Tensor<3>,
    layers: impl Iterator<Item = (&'a burn::nn::Linear, &'a burn::nn::Linear, usize)>,
) -> Vec<(Tensor<4>, Tensor<4>)> {
    use super::dense::Project;
    layers
        .map(|(k, v, heads)| {
            (
                super::bert::split_heads(k.project(memory.clone()), heads),
                super::bert::split_heads(v.project(memory.clone()), heads),
            )
        })
        .collect()
}

/// Causal attention of `q` over the keys and values `slot` holds followed
/// by `k` and `v` (the mask offset by the ones held), which then join them.
pub(crate) fn attend_appending(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    slot: &mut LayerCache,
) -> Tensor<3> {
    let (k, v) = match slot.take() {
        Some((pk, pv)) => (Tensor::cat(vec![pk, k], 2), Tensor::cat(vec![pv, v], 2)),
        None => (k, v),
    };
    let out = super::attention::attend(q, k.clone(), v.clone(), None, true);
    *slot = Some((k, v));
    out
}

/// How the next token is chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Decoding {
    /// The most likely token each step.
    Greedy,
    /// A token drawn from the (warped) distribution.
    Sample(Sampling),
    /// Beam search.
    Beam {
        /// Hypotheses kept (transformers' `num_beams`).
        beams: usize,
        /// Finished hypotheses rank by summed log-probability over
        /// (generated length)^this; above 0 favours longer ones
        /// (transformers' default 1).
        length_penalty: f64,
    },
}

/// Sampling's settings, transformers' names and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sampling {
    /// Logits are divided by this before anything else (1: unchanged).
    pub temperature: f64,
    /// Only the `top_k` most likely tokens can be drawn (0: all).
    pub top_k: usize,
    /// Only the most likely tokens whose probabilities sum to `top_p` can
    /// be drawn (1: all).
    pub top_p: f64,
    /// Seed of the random stream.
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_k: 50,
            top_p: 1.0,
            seed: 0,
        }
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenerateOptions {
    /// Tokens to generate at most.
    pub max_new_tokens: usize,
    /// How each token is chosen.
    pub decoding: Decoding,
    /// End a text at the model's end-of-sequence token.
    pub stop_at_eos: bool,
    /// The end token cannot come before this many new tokens
    /// (transformers' `min_new_tokens`; 0: no minimum).
    pub min_new_tokens: usize,
    /// No n-gram of this size occurs twice in the decoder's sequence, the
    /// prompt included (transformers' `no_repeat_ngram_size`; 0: off).
    pub no_repeat_ngram_size: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            max_new_tokens: 50,
            decoding: Decoding::Greedy,
            stop_at_eos: true,
            min_new_tokens: 0,
            no_repeat_ngram_size: 0,
        }
    }
}

/// The tokens a step may not choose, as transformers' logits processors
/// ban them (`MinNewTokensLengthLogitsProcessor`,
/// `NoRepeatNGramLogitsProcessor`): their scores become minus infinity.
struct Bans<'a> {
    eos: &'a [u32],
    min_new_tokens: usize,
    ngram: usize,
    /// The prompt, which the n-grams include.
    prompt: &'a [u32],
}

impl Bans<'_> {
    /// Sets to minus infinity the scores of the tokens that cannot follow
    /// `tokens` (the new tokens so far, after the prompt).
    fn apply<T: Copy + PartialOrd>(&self, tokens: &[u32], scores: &mut [T], minus_infinity: T) {
        // A forced token (one score left: ForcedEos's last step) stays, as
        // transformers applies its forced-EOS processor after the bans.
        if scores
            .iter()
            .filter(|&&x| x > minus_infinity)
            .take(2)
            .count()
            == 1
        {
            return;
        }
        let mut ban = |t: u32| {
            if let Some(x) = scores.get_mut(t as usize) {
                *x = minus_infinity;
            }
        };
        if tokens.len() < self.min_new_tokens {
            self.eos.iter().for_each(|&t| ban(t));
        }
        let n = self.ngram;
        let len = self.prompt.len() + tokens.len();
        // Fewer than n tokens hold no earlier n-gram.
        if n == 0 || len < n {
            return;
        }
        let at = |i: usize| {
            if i < self.prompt.len() {
                self.prompt[i]
            } else {
                tokens[i - self.prompt.len()]
            }
        };
        // Every earlier n-gram whose first n - 1 tokens are the last n - 1.
        for start in 0..=len - n {
            if (0..n - 1).all(|j| at(start + j) == at(len - (n - 1) + j)) {
                ban(at(start + n - 1));
            }
        }
    }

    fn active(&self) -> bool {
        self.min_new_tokens > 0 || self.ngram > 0
    }
}

/// Beams at most: each is a row of every step's pass.
pub const MAX_BEAMS: usize = 64;

impl GenerateOptions {
    /// Checks the settings before any pass.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |what: String| Err(ModelError::Input(what));
        if self.max_new_tokens == 0 {
            return bad("max_new_tokens must be at least 1".into());
        }
        if self.min_new_tokens > self.max_new_tokens {
            return bad(format!(
                "min_new_tokens ({}) exceeds max_new_tokens ({})",
                self.min_new_tokens, self.max_new_tokens
            ));
        }
        match &self.decoding {
            Decoding::Greedy => Ok(()),
            Decoding::Sample(s) if !(s.temperature.is_finite() && s.temperature > 0.0) => {
                bad(format!(
                    "temperature must be a number above 0 (got {})",
                    s.temperature
                ))
            }
            Decoding::Sample(s) if !(s.top_p > 0.0 && s.top_p <= 1.0) => {
                bad(format!("top_p must be in (0, 1] (got {})", s.top_p))
            }
            Decoding::Sample(_) => Ok(()),
            Decoding::Beam { beams, .. } if !(1..=MAX_BEAMS).contains(beams) => {
                bad(format!("beams must be 1 to {MAX_BEAMS} (got {beams})"))
            }
            Decoding::Beam { length_penalty, .. } if !length_penalty.is_finite() => bad(format!(
                "length_penalty must be a number (got {length_penalty})"
            )),
            Decoding::Beam { .. } => Ok(()),
        }
    }
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    /// The model wrote its end-of-sequence token.
    Eos,
    /// `max_new_tokens` were written.
    Length,
    /// The model's positions ran out.
    ModelLimit,
    /// The callback asked to stop.
    Stopped,
}

/// A generated continuation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generation {
    /// The new token ids (an ending end-of-sequence token included).
    pub tokens: Vec<u32>,
    /// Their summed log-probability under the model (natural log, before
    /// any temperature or filtering).
    pub log_prob: f64,
    /// Why it ended.
    pub end: End,
    /// Tokens the model ran for it, rows counted apart (the prompt's that
    /// its prefix cache did not hold, and the new ones fed back); 0 where
    /// the decoder does not count.
    #[serde(skip)]
    pub decoded: usize,
}

/// A model that reads tokens and gives the next token's logits, row by row.
// WebGPU reads make the futures non-`Send`, by design.
#[allow(async_fn_in_trait)]
pub trait Decoder {
    /// Reads `tokens[row]` (the same count for every row) after what each
    /// row has read so far; returns each row's next-token logits.
    async fn next_logits(&mut self, tokens: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError>;

    /// Keeps rows `rows` (in that order, repeats allowed) for the next step.
    fn keep_rows(&mut self, rows: &[usize]);

    /// Tokens each row can still read.
    fn room(&self) -> usize;
}

/// Generates after `prompt` (non-empty) with `decoder`, which has read
/// nothing yet. `eos` are the ids that end a text; `on_step` sees the best
/// continuation so far after every step and stops the generation with
/// `Break`. It is async so that the page can yield to its event loop there
/// (where a Stop arrives).
pub async fn generate(
    decoder: &mut impl Decoder,
    prompt: &[u32],
    options: &GenerateOptions,
    eos: &[u32],
    on_step: impl AsyncFnMut(&[u32]) -> ControlFlow<()>,
) -> Result<Generation, ModelError> {
    generate_counting(decoder, prompt, 0, options, eos, on_step).await
}

/// [`generate`] where the last `counted` tokens of the prompt are ones
/// transformers counts as generated (an encoder-decoder's forced first
/// token): they count towards `min_new_tokens` and a beam's length, as
/// there.
pub async fn generate_counting(
    decoder: &mut impl Decoder,
    prompt: &[u32],
    counted: usize,
    options: &GenerateOptions,
    eos: &[u32],
    on_step: impl AsyncFnMut(&[u32]) -> ControlFlow<()>,
) -> Result<Generation, ModelError> {
    options.validate()?;
    if prompt.is_empty() {
        return Err(ModelError::Input(
            "generation needs a prompt of at least one token".into(),
        ));
    }
    if prompt.len() > decoder.room() {
        return Err(ModelError::Input(format!(
            "the prompt's {} tokens leave the model no room to generate ({} at most)",
            prompt.len(),
            decoder.room()
        )));
    }
    let eos = if options.stop_at_eos { eos } else { &[] };
    let bans = Bans {
        eos,
        min_new_tokens: options.min_new_tokens.saturating_sub(counted),
        ngram: options.no_repeat_ngram_size,
        prompt,
    };
    match &options.decoding {
        Decoding::Greedy => one_path(decoder, prompt, options, &bans, None, on_step).await,
        Decoding::Sample(s) => one_path(decoder, prompt, options, &bans, Some(s), on_step).await,
        Decoding::Beam {
            beams,
            length_penalty,
        } => {
            let search = BeamSearch {
                beams: *beams,
                length_penalty: *length_penalty,
                max_new_tokens: options.max_new_tokens,
                eos,
                bans: &bans,
                counted,
            };
            search.run(decoder, prompt, on_step).await
        }
    }
}

/// Greedy decoding (`sampling: None`) or sampling: one continuation.
async fn one_path(
    decoder: &mut impl Decoder,
    prompt: &[u32],
    options: &GenerateOptions,
    bans: &Bans<'_>,
    sampling: Option<&Sampling>,
    mut on_step: impl AsyncFnMut(&[u32]) -> ControlFlow<()>,
) -> Result<Generation, ModelError> {
    let eos = bans.eos;
    let mut rng = ChaCha8Rng::seed_from_u64(sampling.map_or(0, |s| s.seed));
    let mut logits = decoder.next_logits(&[prompt.to_vec()]).await?;
    let mut tokens = Vec::new();
    let mut log_prob = 0.0;
    let mut allowed = Vec::new();
    loop {
        let row = &logits[0];
        let choose_from = if bans.active() {
            allowed.clone_from(row);
            bans.apply(&tokens, &mut allowed, f32::NEG_INFINITY);
            &allowed
        } else {
            row
        };
        let token = match sampling {
            None => argmax(choose_from),
            Some(s) => sample(choose_from, s, &mut rng),
        };
        log_prob += log_softmax(row)[token];
        tokens.push(token as u32);
        let end = if eos.contains(&(token as u32)) {
            Some(End::Eos)
        } else if on_step(&tokens).await.is_break() {
            Some(End::Stopped)
        } else if tokens.len() >= options.max_new_tokens {
            Some(End::Length)
        } else if decoder.room() == 0 {
            Some(End::ModelLimit)
        } else {
            None
        };
        if let Some(end) = end {
            if end == End::Eos {
                // The callback sees the ending token too.
                let _ = on_step(&tokens).await;
            }
            return Ok(Generation {
                decoded: 0,
                tokens,
                log_prob,
                end,
            });
        }
        logits = decoder.next_logits(&[vec![token as u32]]).await?;
    }
}

/// The index of the largest logit (the first of equals, as `torch.argmax`).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in logits.iter().enumerate() {
        if x > logits[best] {
            best = i;
        }
    }
    best
}

/// Natural-log softmax in f64.
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
    let sum: f64 = logits.iter().map(|&x| (x as f64 - max).exp()).sum();
    let log_sum = max + sum.ln();
    logits.iter().map(|&x| x as f64 - log_sum).collect()
}

/// The sampling distribution after temperature, top-k and top-p, as
/// transformers' warpers leave it (filtered tokens at probability 0).
pub fn sampling_probabilities(logits: &[f32], s: &Sampling) -> Vec<f64> {
    let mut scores: Vec<f64> = logits.iter().map(|&x| x as f64 / s.temperature).collect();
    let n = scores.len();
    if s.top_k > 0 && s.top_k < n {
        // Keep every score at least the k-th largest (ties at it stay).
        let mut sorted = scores.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[s.top_k - 1];
        for x in &mut scores {
            if *x < kth {
                *x = f64::NEG_INFINITY;
            }
        }
    }
    if s.top_p < 1.0 {
        // Ascending order; drop the tokens whose cumulative probability
        // (from the least likely) stays at or below 1 - top_p, keeping the
        // most likely one.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
        let probs = softmax(&order.iter().map(|&i| scores[i]).collect::<Vec<_>>());
        let mut cumulative = 0.0;
        for (rank, &i) in order.iter().enumerate() {
            cumulative += probs[rank];
            if cumulative <= 1.0 - s.top_p && rank + 1 < n {
                scores[i] = f64::NEG_INFINITY;
            }
        }
    }
    softmax(&scores)
}

fn softmax(scores: &[f64]) -> Vec<f64> {
    let max = scores.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
    let exp: Vec<f64> = scores.iter().map(|&x| (x - max).exp()).collect();
    let sum: f64 = exp.iter().sum();
    exp.into_iter().map(|e| e / sum).collect()
}

/// Draws a token from [`sampling_probabilities`] with one uniform number.
pub fn sample(logits: &[f32], s: &Sampling, rng: &mut ChaCha8Rng) -> usize {
    let probs = sampling_probabilities(logits, s);
    let u: f64 = rng.random();
    let mut cumulative = 0.0;
    let mut last = 0;
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            cumulative += p;
            last = i;
            if u < cumulative {
                return i;
            }
        }
    }
    // Rounding left the sum a hair under u: the last token that can be drawn.
    last
}

/// A hypothesis: its tokens and summed log-probability.
#[derive(Debug, Clone)]
struct Hypothesis {
    tokens: Vec<u32>,
    log_prob: f64,
}

struct BeamSearch<'a> {
    beams: usize,
    length_penalty: f64,
    max_new_tokens: usize,
    eos: &'a [u32],
    bans: &'a Bans<'a>,
    /// Prompt tokens a hypothesis's length counts (a forced first token).
    counted: usize,
}

impl BeamSearch<'_> {
    fn normalised(&self, log_prob: f64, length: usize) -> f64 {
        let length = length + self.counted;
        log_prob / (length.max(1) as f64).powf(self.length_penalty)
    }

    async fn run(
        &self,
        decoder: &mut impl Decoder,
        prompt: &[u32],
        mut on_step: impl AsyncFnMut(&[u32]) -> ControlFlow<()>,
    ) -> Result<Generation, ModelError> {
        let mut running = vec![Hypothesis {
            tokens: Vec::new(),
            log_prob: 0.0,
        }];
        let mut finished: Vec<(f64, Hypothesis)> = Vec::new();
        let mut logits = decoder.next_logits(&[prompt.to_vec()]).await?;
        for step in 1..=self.max_new_tokens {
            let next = self.extend(&running, &logits, &mut finished);
            let done = next.is_empty()
                || (finished.len() >= self.beams
                    && finished.last().map(|f| f.0)
                        >= Some(self.normalised(next[0].1.log_prob, step)));
            if done {
                return Ok(self.best(finished, End::Eos));
            }
            let stopped = on_step(&next[0].1.tokens).await.is_break();
            running = next.iter().map(|(_, h)| h.clone()).collect();
            let end = if stopped {
                Some(End::Stopped)
            } else if step == self.max_new_tokens {
                Some(End::Length)
            } else if decoder.room() == 0 {
                Some(End::ModelLimit)
            } else {
                None
            };
            if let Some(end) = end {
                for h in running {
                    let score = self.normalised(h.log_prob, h.tokens.len());
                    finished.push((score, h));
                }
                return Ok(self.best(finished, end));
            }
            let rows: Vec<usize> = next.iter().map(|(row, _)| *row).collect();
            decoder.keep_rows(&rows);
            let last: Vec<Vec<u32>> = running
                .iter()
                .map(|h| vec![*h.tokens.last().expect("a step adds a token")])
                .collect();
            logits = decoder.next_logits(&last).await?;
        }
        unreachable!("the last step returns")
    }

    /// One step: the `2 x beams` best extensions over all rows, ending ones
    /// set aside (if among the best `beams`), the rest the next beams
    /// (`(row they extend, hypothesis)`, best first).
    fn extend(
        &self,
        running: &[Hypothesis],
        logits: &[Vec<f32>],
        finished: &mut Vec<(f64, Hypothesis)>,
    ) -> Vec<(usize, Hypothesis)> {
        let width = 2 * self.beams;
        let mut candidates: Vec<(f64, usize, usize)> = Vec::new();
        for (row, h) in running.iter().enumerate() {
            // Bans apply to the log-probabilities, as transformers' beam
            // search processes them (the others keep their values).
            let mut lp = log_softmax(&logits[row]);
            self.bans.apply(&h.tokens, &mut lp, f64::NEG_INFINITY);
            // This row's best `width` tokens are all the step can take from it.
            let mut order: Vec<usize> = (0..lp.len()).collect();
            let keep = width.min(order.len());
            order.select_nth_unstable_by(keep - 1, |&a, &b| lp[b].total_cmp(&lp[a]));
            for &t in &order[..keep] {
                candidates.push((h.log_prob + lp[t], row, t));
            }
        }
        // Best first; among equals the earlier row, then the lower id.
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut next = Vec::with_capacity(self.beams);
        for (rank, &(log_prob, row, token)) in candidates.iter().take(width).enumerate() {
            let mut tokens = running[row].tokens.clone();
            tokens.push(token as u32);
            let h = Hypothesis { tokens, log_prob };
            if self.eos.contains(&(token as u32)) {
                if rank < self.beams {
                    let score = self.normalised(log_prob, h.tokens.len());
                    finished.push((score, h));
                }
            } else {
                next.push((row, h));
            }
            if next.len() == self.beams {
                break;
            }
        }
        // Keep the best `beams` finished ones, best first.
        finished.sort_by(|a, b| b.0.total_cmp(&a.0));
        finished.truncate(self.beams);
        next
    }

    fn best(&self, finished: Vec<(f64, Hypothesis)>, end: End) -> Generation {
        let (_, h) = finished
            .into_iter()
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .expect("a search ends with a hypothesis");
        let end = match h.tokens.last() {
            Some(t) if self.eos.contains(t) => End::Eos,
            _ if end == End::Eos => End::Length,
            _ => end,
        };
        Generation {
            decoded: 0,
            tokens: h.tokens,
            log_prob: h.log_prob,
            end,
        }
    }
}

/// A [`Decoder`] whose step `last` (1-based) can only end the text: every
/// logit but `eos`'s is minus infinity and `eos`'s is 0, as transformers'
/// `ForcedEOSTokenLogitsProcessor` leaves the scores (the forced token adds
/// 0 to a text's log-probability, and beams rank as there).
pub struct ForcedEos<D> {
    inner: D,
    eos: u32,
    last: usize,
    steps: usize,
}

impl<D: Decoder> ForcedEos<D> {
    /// `inner`, its step `last` forced to `eos`.
    pub fn new(inner: D, eos: u32, last: usize) -> Self {
        Self {
            inner,
            eos,
            last,
            steps: 0,
        }
    }
}

impl<D: Decoder> Decoder for ForcedEos<D> {
    async fn next_logits(&mut self, tokens: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut logits = self.inner.next_logits(tokens).await?;
        self.steps += 1;
        if self.steps == self.last {
            for row in &mut logits {
                row.fill(f32::NEG_INFINITY);
                if let Some(x) = row.get_mut(self.eos as usize) {
                    *x = 0.0;
                }
            }
        }
        Ok(logits)
    }

    fn keep_rows(&mut self, rows: &[usize]) {
        self.inner.keep_rows(rows);
    }

    fn room(&self) -> usize {
        self.inner.room()
    }
}

/// A loaded model that can generate (a causal LM, or an encoder-decoder
/// once it has read its source) with its key/value cache, as a [`Decoder`].
pub struct ModelDecoder<'a> {
    plm: &'a Plm,
    cache: KvCache,
    /// The tokens the cache holds while it holds one row of a decoder-only
    /// model's text, to be kept as the model's prefix cache when decoding
    /// ends; `None` once it holds anything else (a source, several rows, a
    /// failed step).
    read: Option<Vec<u32>>,
    /// Tokens run so far, rows counted apart.
    ran: usize,
}

impl<'a> ModelDecoder<'a> {
    /// `plm` with an empty cache; an error for a model that cannot
    /// generate (no causal or encoder-decoder language-model head).
    pub fn new(plm: &'a Plm) -> Result<Self, ModelError> {
        let can = with_network!(&plm.network, m => m.can_decode());
        if !can {
            return Err(ModelError::Unsupported(format!(
                "{} cannot generate text: it has no causal or encoder-decoder language-model \
                 head (its config.json says {:?}); load a GPT-2, BART or T5 checkpoint",
                plm.name, plm.config.architecture
            )));
        }
        Ok(Self {
            plm,
            cache: KvCache::new(),
            read: Some(Vec::new()),
            ran: 0,
        })
    }

    /// An encoder-decoder reads the source its text is generated from
    /// (token ids within the model's limit); `false` for a decoder-only model.
    pub fn read_source(&mut self, source: &[u32]) -> Result<bool, ModelError> {
        if source.is_empty() {
            return Err(ModelError::Input("empty input sequence".into()));
        }
        self.check_ids(source)?;
        let batch = super::Batch::new(&[source.to_vec()], &self.plm.config, &self.plm.device);
        let encoder =
            with_network!(&self.plm.network, m => m.start_decoding(&batch, &mut self.cache));
        if encoder {
            self.read = None;
        }
        Ok(encoder)
    }

    fn check_ids(&self, ids: &[u32]) -> Result<(), ModelError> {
        let vocab = self.plm.config.vocab_size;
        match ids.iter().find(|&&id| id as usize >= vocab) {
            Some(id) => Err(ModelError::Input(format!(
                "token id {id} is outside {}'s vocabulary ({vocab})",
                self.plm.name
            ))),
            None => Ok(()),
        }
    }
}

impl Decoder for ModelDecoder<'_> {
    async fn next_logits(&mut self, tokens: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        let rows = tokens.len();
        let new = tokens.first().map_or(0, Vec::len);
        if rows == 0 || new == 0 || tokens.iter().any(|t| t.len() != new) {
            return Err(ModelError::Input(
                "a decoding step reads the same tokens per row".into(),
            ));
        }
        if new > self.room() {
            return Err(ModelError::Input(format!(
                "{} tokens exceed {}'s limit of {}",
                self.cache.tokens() + new,
                self.plm.name,
                self.plm.config.max_tokens()
            )));
        }
        for row in tokens {
            self.check_ids(row)?;
        }
        // A one-row text from the start continues the model's kept prefix
        // where it shares that prefix's start.
        let mut skip = 0;
        if rows == 1 && self.cache.tokens() == 0 && self.read.as_ref().is_some_and(Vec::is_empty) {
            let (cache, shared) = self.plm.take_prefix(&tokens[0])?;
            if shared > 0 {
                self.cache = cache;
                self.read = Some(tokens[0][..shared].to_vec());
                skip = shared;
            }
        }
        let read = std::mem::take(&mut self.read);
        let ids: Vec<i64> = tokens
            .iter()
            .flat_map(|t| &t[skip..])
            .map(|&t| i64::from(t))
            .collect();
        let ids =
            Tensor::<2, Int>::from_data(TensorData::new(ids, [rows, new - skip]), &self.plm.device);
        let logits = with_network!(&self.plm.network, m => m.decode_step(ids, &mut self.cache))
            .ok_or_else(|| {
                ModelError::Input(format!(
                    "{} decodes after reading a source: call read_source first",
                    self.plm.name
                ))
            })?;
        let (values, [_, _, v]) = read_back(logits).await?;
        self.ran += rows * (new - skip);
        // Only a step that ran keeps its record of what the cache holds.
        self.read = read.filter(|_| rows == 1).map(|mut r| {
            r.extend_from_slice(&tokens[0][skip..]);
            r
        });
        Ok(values.chunks(v).map(<[f32]>::to_vec).collect())
    }

    fn keep_rows(&mut self, rows: &[usize]) {
        if rows != [0] {
            self.read = None;
        }
        self.cache.keep_rows(rows);
    }

    fn room(&self) -> usize {
        self.plm
            .config
            .max_tokens()
            .saturating_sub(self.cache.tokens())
    }
}

impl Drop for ModelDecoder<'_> {
    /// Keeps a one-row text's keys and values as the model's prefix cache.
    fn drop(&mut self) {
        if let Some(read) = self.read.take()
            && !read.is_empty()
            && read.len() == self.cache.tokens()
        {
            self.plm.keep_prefix(read, std::mem::take(&mut self.cache));
        }
    }
}

/// A generated text, with its token ids.
#[derive(Debug, Clone, Serialize)]
pub struct Continuation {
    /// The input's token ids: a causal LM's prompt, an encoder-decoder's
    /// source.
    pub input_tokens: Vec<u32>,
    /// The generation.
    #[serde(flatten)]
    pub generation: Generation,
    /// The new tokens as text (special tokens left out).
    pub text: String,
}

impl Plm {
    /// Generates from `input` as `options` say: a causal LM continues it,
    /// an encoder-decoder (BART) reads it as the source and writes a new
    /// text from its decoder start (and `forced_bos_token_id`, where the
    /// config names one). `on_step` sees the best text's new tokens after
    /// every step and can stop it.
    pub async fn generate(
        &self,
        input: &str,
        options: &GenerateOptions,
        on_step: impl AsyncFnMut(&[u32]) -> ControlFlow<()>,
    ) -> Result<Continuation, ModelError> {
        let encoding = self.tokenizer.encode_for_model(input)?;
        let input_tokens = encoding.ids();
        if encoding.truncated {
            return Err(ModelError::Input(format!(
                "the input is longer than {}'s limit of {} tokens",
                self.name,
                self.config.max_tokens()
            )));
        }
        let generation = self.generate_ids(&input_tokens, options, on_step).await?;
        let text = self.tokenizer.decode_text(&generation.tokens)?;
        Ok(Continuation {
            input_tokens,
            generation,
            text,
        })
    }

    /// [`Plm::generate`] from token ids (special tokens included, within
    /// the model's limit).
    pub async fn generate_ids(
        &self,
        input: &[u32],
        options: &GenerateOptions,
        on_step: impl AsyncFnMut(&[u32]) -> ControlFlow<()>,
    ) -> Result<Generation, ModelError> {
        let mut decoder = ModelDecoder::new(self)?;
        let mut options = options.clone();
        let prompt = match self.config.decoder() {
            Some(d) if decoder.read_source(input)? => {
                let mut prompt = vec![d.start_token_id];
                prompt.extend(d.forced_bos_token_id);
                // transformers counts a forced first token as a new one.
                if d.forced_bos_token_id.is_some() {
                    options.validate()?;
                    if options.max_new_tokens == 1 {
                        return Ok(Generation {
                            tokens: Vec::new(),
                            log_prob: 0.0,
                            end: End::Length,
                            decoded: 0,
                        });
                    }
                    options.max_new_tokens -= 1;
                }
                prompt
            }
            _ => input.to_vec(),
        };
        let options = &options;
        // The forced first token, in the prompt here, is generated there.
        let counted = usize::from(
            self.config
                .decoder()
                .is_some_and(|d| d.forced_bos_token_id.is_some()),
        );
        let eos = &self.config.eos_token_ids;
        // A checkpoint that names `forced_eos_token_id` (BART's) ends a text
        // that reaches the length limit with it, as transformers does.
        let forced = self.config.decoder().and_then(|d| d.forced_eos_token_id);
        let (generation, ran) = match forced.filter(|_| options.stop_at_eos) {
            Some(id) => {
                let mut forced = ForcedEos::new(decoder, id, options.max_new_tokens);
                let g = generate_counting(&mut forced, &prompt, counted, options, eos, on_step);
                (g.await?, forced.inner.ran)
            }
            None => {
                let g = generate_counting(&mut decoder, &prompt, counted, options, eos, on_step);
                (g.await?, decoder.ran)
            }
        };
        Ok(Generation {
            decoded: ran,
            ..generation
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoder whose logits depend only on the last token read, from a
    /// table: `table[last][next]`.
    struct Table {
        table: Vec<Vec<f32>>,
        rows: Vec<u32>,
        read: usize,
        limit: usize,
    }

    impl Table {
        fn new(table: Vec<Vec<f32>>) -> Self {
            Self {
                table,
                rows: Vec::new(),
                read: 0,
                limit: 100,
            }
        }
    }

    impl Decoder for Table {
        async fn next_logits(&mut self, tokens: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
            if self.rows.is_empty() {
                self.rows = vec![0; tokens.len()];
            }
            assert_eq!(tokens.len(), self.rows.len(), "rows kept match rows read");
            self.read += tokens[0].len();
            self.rows = tokens.iter().map(|t| *t.last().unwrap()).collect();
            Ok(self
                .rows
                .iter()
                .map(|&r| self.table[r as usize].clone())
                .collect())
        }

        fn keep_rows(&mut self, rows: &[usize]) {
            self.rows = rows.iter().map(|&r| self.rows[r]).collect();
        }

        fn room(&self) -> usize {
            self.limit - self.read
        }
    }

    fn run(
        table: &mut Table,
        decoding: Decoding,
        max: usize,
        eos: &[u32],
    ) -> Result<Generation, ModelError> {
        let options = GenerateOptions {
            max_new_tokens: max,
            decoding,
            stop_at_eos: true,
            ..GenerateOptions::default()
        };
        futures::executor::block_on(generate(table, &[0], &options, eos, async |_| {
            ControlFlow::Continue(())
        }))
    }

    /// ln p as logits (softmax of logs of probabilities summing to 1
    /// gives them back).
    fn probs(p: &[f32]) -> Vec<f32> {
        p.iter().map(|x| x.ln()).collect()
    }

    #[test]
    fn greedy_follows_the_most_likely_token_and_stops_at_eos_or_length() {
        // 0 -> 1 -> 2 -> 3 (eos).
        let t = vec![
            probs(&[0.1, 0.6, 0.2, 0.1]),
            probs(&[0.1, 0.1, 0.7, 0.1]),
            probs(&[0.1, 0.1, 0.1, 0.7]),
            probs(&[0.25, 0.25, 0.25, 0.25]),
        ];
        let g = run(&mut Table::new(t.clone()), Decoding::Greedy, 10, &[3]).unwrap();
        assert_eq!(g.tokens, [1, 2, 3]);
        assert_eq!(g.end, End::Eos);
        assert!((g.log_prob - (0.6f64.ln() + 0.7f64.ln() + 0.7f64.ln())).abs() < 1e-6);
        let g = run(&mut Table::new(t.clone()), Decoding::Greedy, 2, &[3]).unwrap();
        assert_eq!((g.tokens, g.end), (vec![1, 2], End::Length));
        // Two tokens read: the prompt and the first generated; the second
        // need not be read.
        let mut short = Table::new(t);
        short.limit = 2;
        let g = run(&mut short, Decoding::Greedy, 10, &[3]).unwrap();
        assert_eq!((g.tokens, g.end), (vec![1, 2], End::ModelLimit));
    }

    #[test]
    fn beam_search_finds_what_greedy_misses() {
        // Greedy takes 1 (0.5) then at best 0.4; 2 (0.4) leads to 0.9.
        let t = vec![
            probs(&[0.05, 0.5, 0.4, 0.05]),
            probs(&[0.3, 0.3, 0.0001, 0.3999]),
            probs(&[0.05, 0.0001, 0.0499, 0.9]),
            probs(&[0.25, 0.25, 0.25, 0.25]),
        ];
        let g = run(&mut Table::new(t.clone()), Decoding::Greedy, 2, &[]).unwrap();
        assert_eq!(g.tokens, [1, 3]);
        let beam = |beams| Decoding::Beam {
            beams,
            length_penalty: 1.0,
        };
        let b = run(&mut Table::new(t.clone()), beam(2), 2, &[]).unwrap();
        assert_eq!((b.tokens.clone(), b.end), (vec![2, 3], End::Length));
        assert!((b.log_prob - (0.4f64.ln() + 0.9f64.ln())).abs() < 1e-6);
        // One beam is greedy.
        let one = run(&mut Table::new(t.clone()), beam(1), 2, &[]).unwrap();
        assert_eq!(one.tokens, [1, 3]);
        // With 3 as the end: both beams finish at length 2; the better one wins.
        let e = run(&mut Table::new(t), beam(2), 5, &[3]).unwrap();
        assert_eq!((e.tokens, e.end), (vec![2, 3], End::Eos));
    }

    #[test]
    fn top_k_and_top_p_filter_as_transformers_does() {
        let logits = probs(&[0.5, 0.3, 0.15, 0.05]);
        let s = |top_k, top_p| Sampling {
            top_k,
            top_p,
            ..Sampling::default()
        };
        let p = sampling_probabilities(&logits, &s(2, 1.0));
        assert!((p[0] - 0.625).abs() < 1e-6 && (p[1] - 0.375).abs() < 1e-6);
        assert_eq!(&p[2..], [0.0, 0.0]);
        // Cumulative from the least likely: 0.05, 0.2, 0.5, 1. top_p 0.75
        // drops those at or below 0.25: tokens 3 and 2.
        let p = sampling_probabilities(&logits, &s(0, 0.75));
        assert!(p[2] == 0.0 && p[3] == 0.0 && p[1] > 0.0);
        // top_p 0.85 keeps token 2 as well (0.2 > 0.15).
        assert!(sampling_probabilities(&logits, &s(0, 0.85))[2] > 0.0);
        // A tiny top_p keeps the most likely token only.
        assert_eq!(
            sampling_probabilities(&logits, &s(0, 1e-9)),
            [1.0, 0.0, 0.0, 0.0]
        );
        // Temperature sharpens.
        let cold = sampling_probabilities(
            &logits,
            &Sampling {
                temperature: 0.5,
                ..s(0, 1.0)
            },
        );
        assert!(cold[0] > 0.5 && (cold.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn sampling_is_reproducible_per_seed_and_top_k_one_is_greedy() {
        let t: Vec<Vec<f32>> = (0..6)
            .map(|r| {
                probs(&[
                    0.3,
                    0.25,
                    0.2,
                    0.15,
                    0.06 + 0.01 * r as f32,
                    0.04 - 0.005 * r as f32,
                ])
            })
            .collect();
        let sample = |seed, top_k| {
            Decoding::Sample(Sampling {
                seed,
                top_k,
                ..Sampling::default()
            })
        };
        let a = run(&mut Table::new(t.clone()), sample(7, 0), 20, &[]).unwrap();
        let b = run(&mut Table::new(t.clone()), sample(7, 0), 20, &[]).unwrap();
        assert_eq!(a, b);
        let others: Vec<_> = (0..5)
            .map(|seed| {
                run(&mut Table::new(t.clone()), sample(seed, 0), 20, &[])
                    .unwrap()
                    .tokens
            })
            .collect();
        assert!(
            others.iter().any(|o| *o != a.tokens),
            "seeds draw different texts"
        );
        let greedy = run(&mut Table::new(t.clone()), Decoding::Greedy, 20, &[]).unwrap();
        assert_eq!(
            run(&mut Table::new(t), sample(3, 1), 20, &[]).unwrap(),
            greedy
        );
    }

    #[test]
    fn the_callback_sees_each_step_and_can_stop() {
        let t = vec![probs(&[0.1, 0.9]), probs(&[0.1, 0.9])];
        let options = GenerateOptions {
            max_new_tokens: 10,
            ..GenerateOptions::default()
        };
        for decoding in [
            Decoding::Greedy,
            Decoding::Beam {
                beams: 2,
                length_penalty: 1.0,
            },
        ] {
            let mut seen = Vec::new();
            let options = GenerateOptions {
                decoding,
                ..options.clone()
            };
            let g = futures::executor::block_on(generate(
                &mut Table::new(t.clone()),
                &[0],
                &options,
                &[],
                async |tokens: &[u32]| {
                    seen.push(tokens.len());
                    if tokens.len() == 3 {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                },
            ))
            .unwrap();
            assert_eq!(seen, [1, 2, 3]);
            assert_eq!((g.tokens.len(), g.end), (3, End::Stopped));
        }
    }

    #[test]
    fn options_read_from_json_with_defaults() {
        let o: GenerateOptions =
            serde_json::from_str(r#"{"decoding": {"method": "sample", "top_k": 5}}"#).unwrap();
        let want = Sampling {
            top_k: 5,
            ..Sampling::default()
        };
        assert_eq!(o.decoding, Decoding::Sample(want));
        assert_eq!(o.max_new_tokens, 50);
        let o: GenerateOptions = serde_json::from_str(
            r#"{"max_new_tokens": 3, "decoding": {"method": "beam", "beams": 2, "length_penalty": 0.5}}"#,
        )
        .unwrap();
        assert_eq!(o.max_new_tokens, 3);
        assert!(
            serde_json::from_str::<GenerateOptions>(r#"{"decoding": {"method": "nope"}}"#).is_err()
        );
        assert!(serde_json::from_str::<GenerateOptions>(r#"{"max_tokens": 3}"#).is_err());
    }

    #[test]
    fn bad_settings_and_prompts_are_refused() {
        let t = vec![probs(&[0.5, 0.5])];
        let refused = |options: GenerateOptions, prompt: &[u32]| {
            futures::executor::block_on(generate(
                &mut Table::new(t.clone()),
                prompt,
                &options,
                &[],
                async |_| ControlFlow::Continue(()),
            ))
            .unwrap_err()
            .to_string()
        };
        let with = |decoding| GenerateOptions {
            decoding,
            ..GenerateOptions::default()
        };
        assert!(refused(GenerateOptions::default(), &[]).contains("prompt"));
        let zero = GenerateOptions {
            max_new_tokens: 0,
            ..GenerateOptions::default()
        };
        assert!(refused(zero, &[0]).contains("max_new_tokens"));
        let hot = Sampling {
            temperature: 0.0,
            ..Sampling::default()
        };
        assert!(refused(with(Decoding::Sample(hot)), &[0]).contains("temperature"));
        let p = Sampling {
            top_p: 1.5,
            ..Sampling::default()
        };
        assert!(refused(with(Decoding::Sample(p)), &[0]).contains("top_p"));
        let beams = Decoding::Beam {
            beams: 0,
            length_penalty: 1.0,
        };
        assert!(refused(with(beams), &[0]).contains("beams"));
        assert!(refused(GenerateOptions::default(), &[0; 101]).contains("no room"));
    }
}
