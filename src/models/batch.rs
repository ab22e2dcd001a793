//! Token sequences into padded batches, and sequences into passes within a
//! budget.

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use super::{ModelConfig, bert};

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

#[cfg(test)]
mod tests {
    use super::{PassLimit, passes};

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
