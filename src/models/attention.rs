//! Scaled dot-product attention over heads: [`attend`].
//!
//! On the CPU in f32 every head is computed where the projections left it:
//! a head of `q`, `k` or `v` is a block of columns of its projection's
//! `[tokens, hidden]` rows, read in place through its strides, and each
//! head's result is written into its columns of the merged `[batch, tokens,
//! hidden]` output. burn's attention op (burn-flex) first copies `q`, `k`
//! and `v` to `[batch, heads, tokens, head_dim]`, and merging its output's
//! heads copies once more: four copies of the activations per layer, 8% of
//! a native MiniLM batch of 32 on two cores (BENCHMARKS.md). Each
//! head's arithmetic is burn-flex's short-sequence path: the `gemm` crate's
//! products on one thread per head, the scale applied after the product,
//! hidden scores minus infinity (whose exponential is an early return in
//! libm), a row hidden entirely giving zeros. Sequences long enough for
//! burn-flex's tiled path (over 512 tokens) and every other device (WebGPU)
//! run burn's op, with the padding mask widened to one tile per text.

use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, DType, Device, Tensor, TensorData};
use burn_flex::{Flex, FlexTensor};

use super::dense::primitive;

/// softmax(q kᵀ / sqrt(d)) v, heads merged back to `[batch, tokens,
/// hidden]`, hiding the keys that `padding` (`[batch, 1, 1, keys]`, true
/// for padding) marks and, when `causal`, every later position. `q` is
/// `[batch, heads, queries, d]`, `k` and `v` `[batch, heads, keys, d]`.
pub(crate) fn attend(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    padding: Option<Tensor<4, Bool>>,
    causal: bool,
) -> Tensor<3> {
    let cpu = Device::flex();
    let on_cpu = [&q, &k, &v]
        .iter()
        .all(|t| t.device() == cpu && t.dtype() == DType::F32)
        && padding.as_ref().is_none_or(|p| p.device() == cpu);
    if on_cpu {
        let qp = primitive(q.clone());
        let kp = primitive(k.clone());
        let vp = primitive(v.clone());
        let mask = padding.clone().map(|p| {
            p.try_into_primitive::<Flex>()
                .expect("a tensor on the flex device is a Flex tensor")
        });
        if let Some(out) = in_place(&qp, &kp, &vp, mask.as_ref(), causal) {
            return out;
        }
    }
    burns_op(q, k, v, padding, causal)
}

/// [`attend`] through burn's attention op, the padding mask widened to one
/// tile per text (`[batch, 1, queries, keys]`, which burn-flex reads in
/// place for every head).
fn burns_op(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    padding: Option<Tensor<4, Bool>>,
    causal: bool,
) -> Tensor<3> {
    let [b, heads, l, _] = q.dims();
    let [_, _, keys, dv] = v.dims();
    let mask = padding.map(|p| p.expand([b, 1, l, keys]));
    let options = AttentionModuleOptions {
        is_causal: causal,
        ..AttentionModuleOptions::default()
    };
    let out = burn::tensor::module::attention(q, k, v, mask, None, options);
    out.swap_dims(1, 2).reshape([b, l, heads * dv])
}

/// A 4-d f32 tensor read in place: its storage, the offset of its first
/// element and its strides, checked to stay inside the storage.
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    offset: usize,
    strides: [usize; 4],
}

impl<'a> View<'a> {
    /// `None` for a layout that is not 4-d, a negative stride, or a last
    /// dimension that is not dense (the `gemm` crate picks its kernel by
    /// whether strides are 1, and burn-flex's op reads dense rows: a dense
    /// last dimension keeps the same kernels, hence the same bits).
    fn of(t: &'a FlexTensor) -> Option<Self> {
        let layout = t.layout();
        let shape = layout.shape();
        if shape.num_dims() != 4 || t.dtype() != DType::F32 {
            return None;
        }
        let mut strides = [0usize; 4];
        for (s, &st) in strides.iter_mut().zip(layout.strides()) {
            *s = usize::try_from(st).ok()?;
        }
        if strides[3] != 1 && shape[3] > 1 {
            return None;
        }
        let data = t.storage::<f32>();
        let offset = layout.start_offset();
        let last = (0..4)
            .map(|i| shape[i].saturating_sub(1) * strides[i])
            .sum::<usize>()
            + offset;
        (shape.num_elements() == 0 || last < data.len()).then_some(Self {
            data,
            offset,
            strides,
        })
    }

    /// Where `(batch, head)`'s matrix starts.
    fn head(&self, b: usize, h: usize) -> *const f32 {
        self.data[self.offset + b * self.strides[0] + h * self.strides[1]..].as_ptr()
    }
}

/// A raw pointer handed to the threads that write disjoint parts of one
/// output.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: every (batch, head) task writes only its own rows x columns
// block of the output, so no two threads write the same element.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Out {
    /// The element `i` places on (a method, so closures take the whole
    /// `Out`, which is `Send`, rather than its raw pointer).
    ///
    /// # Safety
    /// `i` must lie inside the allocation.
    unsafe fn at(self, i: usize) -> *mut f32 {
        unsafe { self.0.add(i) }
    }
}

/// Multiply-adds per call below which the heads run on the calling thread
/// (burn-flex's threshold for its own attention).
#[cfg(not(target_arch = "wasm32"))]
const PARALLEL_WORK: usize = 256 * 1024;

/// Scores per head above which burn's op runs instead: burn-flex's own limit
/// for computing a head's whole score matrix (1 MB); longer sequences take
/// its tiled path, which keeps a tile of scores at a time.
const WHOLE_SCORES: usize = 256 * 1024;

/// [`attend`] on burn-flex, reading the heads in place; `None` where the
/// shapes are not plain multi-head attention with a `[batch or 1, 1, 1,
/// keys]` mask, or a head's scores exceed [`WHOLE_SCORES`] (burn's op then
/// runs).
fn in_place(
    q: &FlexTensor,
    k: &FlexTensor,
    v: &FlexTensor,
    mask: Option<&FlexTensor>,
    causal: bool,
) -> Option<Tensor<3>> {
    let (qv, kv, vv) = (View::of(q)?, View::of(k)?, View::of(v)?);
    let [b, heads, l, d] = dims(q);
    let [kb, kh, keys, kd] = dims(k);
    let [vb, vh, vkeys, dv] = dims(v);
    if [kb, vb] != [b, b]
        || [kh, vh] != [heads, heads]
        || kd != d
        || vkeys != keys
        || d == 0
        || l * keys > WHOLE_SCORES
    {
        return None;
    }
    // One flag per (text, key), true where hidden.
    let hidden: Option<Vec<bool>> = match mask {
        None => None,
        Some(m) => {
            let shape = m.layout().shape();
            let ok = shape.num_dims() == 4
                && (shape[0] == b || shape[0] == 1)
                && shape[1] == 1
                && shape[2] == 1
                && shape[3] == keys;
            if !ok {
                return None;
            }
            let m = m.to_contiguous();
            let flags = m.bytes();
            Some(
                (0..b)
                    .flat_map(|bi| {
                        let row = if shape[0] == 1 { 0 } else { bi * keys };
                        flags[row..row + keys].iter().map(|&f| f != 0)
                    })
                    .collect(),
            )
        }
    };
    let width = heads * dv;
    let n = b * l * width;
    let mut out: Vec<f32> = Vec::with_capacity(n);
    if keys == 0 {
        out.resize(n, 0.0);
    } else if n > 0 {
        let scale = (1.0 / (d as f64).sqrt()) as f32;
        let shape = HeadShape {
            queries: l,
            keys,
            d,
            dv,
            width,
        };
        let dst = Out(out.as_mut_ptr());
        let run = |scores: &mut Vec<f32>, task: usize| {
            let (bi, h) = (task / heads, task % heads);
            let hide = hidden.as_ref().map(|f| &f[bi * keys..(bi + 1) * keys]);
            // SAFETY: the views were checked to lie inside their storage;
            // this task writes rows `bi * l..(bi + 1) * l`, columns
            // `h * dv..(h + 1) * dv` of the `n`-element output, which no
            // other task writes.
            unsafe {
                let o = dst.at(bi * l * width + h * dv);
                head((qv, kv, vv), (bi, h), o, scores, shape, scale, hide, causal)
            };
        };
        let tasks = b * heads;
        #[cfg(not(target_arch = "wasm32"))]
        let threaded = tasks > 1 && tasks * l * keys * (d + dv) >= PARALLEL_WORK;
        #[cfg(target_arch = "wasm32")]
        let threaded = false;
        if threaded {
            #[cfg(not(target_arch = "wasm32"))]
            {
                use rayon::prelude::*;
                (0..tasks)
                    .into_par_iter()
                    .for_each_init(|| vec![0.0f32; l * keys], run);
            }
        } else {
            let mut scores = vec![0.0f32; l * keys];
            for task in 0..tasks {
                run(&mut scores, task);
            }
        }
        // SAFETY: the tasks wrote every element (each head's product writes
        // all its rows x columns).
        unsafe { out.set_len(n) };
    }
    let out = FlexTensor::from_data(TensorData::new(out, [b, l, width]));
    Some(Tensor::from_primitive::<Flex>(out))
}

fn dims(t: &FlexTensor) -> [usize; 4] {
    let s = t.layout().shape();
    [s[0], s[1], s[2], s[3]]
}

/// The sizes of one head's products; `width` is the output's row length.
#[derive(Clone, Copy)]
struct HeadShape {
    queries: usize,
    keys: usize,
    d: usize,
    dv: usize,
    width: usize,
}

/// One (batch, head): scores = q kᵀ, the masked softmax of `scores * scale`
/// per row, then `scores v` written to `out` (row stride `width`).
///
/// # Safety
/// The views must lie inside their storage (checked by [`View::of`]) and
/// `out` must point to `queries` rows of `dv` writable elements, `width`
/// apart.
#[allow(clippy::too_many_arguments)]
unsafe fn head(
    (q, k, v): (View<'_>, View<'_>, View<'_>),
    (bi, h): (usize, usize),
    out: *mut f32,
    scores: &mut [f32],
    s: HeadShape,
    scale: f32,
    hidden: Option<&[bool]>,
    causal: bool,
) {
    // scores[queries, keys] = q kᵀ (kᵀ: k read with its strides swapped)
    unsafe {
        product(
            [s.queries, s.keys, s.d],
            (scores.as_mut_ptr(), s.keys),
            (q.head(bi, h), q.strides[2], q.strides[3]),
            (k.head(bi, h), k.strides[3], k.strides[2]),
        )
    };
    // Later keys are hidden from a query when causal (queries are the last
    // `queries` of the keys' positions).
    let offset = s.keys as isize - s.queries as isize;
    for (qi, row) in scores.chunks_exact_mut(s.keys).enumerate() {
        let mut max = f32::NEG_INFINITY;
        for (ki, x) in row.iter_mut().enumerate() {
            let hide =
                hidden.is_some_and(|f| f[ki]) || (causal && ki as isize > qi as isize + offset);
            let val = if hide { f32::NEG_INFINITY } else { *x * scale };
            *x = val;
            max = max.max(val);
        }
        if max == f32::NEG_INFINITY {
            row.fill(0.0);
            continue;
        }
        let mut sum = 0.0f32;
        for x in row.iter_mut() {
            let e = (*x - max).exp();
            *x = e;
            sum += e;
        }
        let inv = 1.0 / sum;
        for x in row.iter_mut() {
            *x *= inv;
        }
    }
    // out[queries, dv] = softmax(scores) v
    unsafe {
        product(
            [s.queries, s.dv, s.keys],
            (out, s.width),
            (scores.as_ptr(), s.keys, 1),
            (v.head(bi, h), v.strides[2], v.strides[3]),
        )
    };
}

/// `dst = lhs rhs` for `[m, n, k]`, on the calling thread, through the
/// `gemm` crate: `dst` dense rows `row` apart, each operand a pointer and its
/// row and column strides. As burn-flex's attention calls it (`dst` written,
/// not read).
///
/// # Safety
/// Every element the shapes and strides address must be in bounds.
unsafe fn product(
    [m, n, k]: [usize; 3],
    (dst, row): (*mut f32, usize),
    (lhs, lhs_rs, lhs_cs): (*const f32, usize, usize),
    (rhs, rhs_rs, rhs_cs): (*const f32, usize, usize),
) {
    let i = |x: usize| x as isize;
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            i(row),
            false,
            lhs,
            i(lhs_cs),
            i(lhs_rs),
            rhs,
            i(rhs_cs),
            i(rhs_rs),
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// The attention probabilities `[batch, heads, queries, keys]`:
/// softmax(q kᵀ / sqrt(d) + bias), keys `padding` marks hidden and, when
/// `causal`, later positions; `unscaled` drops the 1/sqrt(d) (T5). For
/// inspection (the attention view), not for passes: it holds every score.
pub(crate) fn probabilities(
    q: Tensor<4>,
    k: Tensor<4>,
    bias: Option<Tensor<4>>,
    padding: Option<Tensor<4, Bool>>,
    causal: bool,
    unscaled: bool,
) -> Tensor<4> {
    let [b, heads, l, d] = q.dims();
    let [_, _, keys, _] = k.dims();
    let scale = if unscaled {
        1.0
    } else {
        1.0 / (d as f64).sqrt()
    };
    let mut scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale);
    if let Some(bias) = bias {
        scores = scores + bias.expand([b, heads, l, keys]);
    }
    if let Some(p) = padding {
        scores = scores.mask_fill(p.expand([b, heads, l, keys]), f32::NEG_INFINITY);
    }
    if causal {
        let later: Vec<bool> = (0..l)
            .flat_map(|i| (0..keys).map(move |j| j + l > i + keys))
            .collect();
        let mask =
            Tensor::<2, Bool>::from_data(TensorData::new(later, [l, keys]), &scores.device());
        scores = scores.mask_fill(
            mask.unsqueeze::<4>().expand([b, heads, l, keys]),
            f32::NEG_INFINITY,
        );
    }
    burn::tensor::activation::softmax(scores, 3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::bert::split_heads;
    use crate::models::dense::tests::values;

    fn tensor<const D: usize>(shape: [usize; D], seed: u32) -> Tensor<D> {
        let n = shape.iter().product();
        Tensor::from_data(TensorData::new(values(n, seed), shape), &Device::flex())
    }

    /// burn's op (burn-flex copies the strided heads first), heads merged.
    fn reference(
        q: Tensor<4>,
        k: Tensor<4>,
        v: Tensor<4>,
        padding: Option<Tensor<4, Bool>>,
        causal: bool,
    ) -> Vec<f32> {
        burns_op(q, k, v, padding, causal)
            .into_data()
            .try_to_vec::<f32>()
            .unwrap()
    }

    /// [`in_place`] against burn's op on the same inputs: the same shape
    /// and bits.
    fn check(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, pad: Option<Tensor<4, Bool>>, causal: bool) {
        let [b, heads, l, _] = q.dims();
        let dv = v.dims()[3];
        let got = ours(q.clone(), k.clone(), v.clone(), pad.clone(), causal);
        assert_eq!(got.dims(), [b, l, heads * dv]);
        let want = reference(q, k, v, pad, causal);
        assert_same(&got.into_data().try_to_vec::<f32>().unwrap(), &want);
    }

    /// [`in_place`] itself, which must run (not fall back to burn's op).
    fn ours(
        q: Tensor<4>,
        k: Tensor<4>,
        v: Tensor<4>,
        padding: Option<Tensor<4, Bool>>,
        causal: bool,
    ) -> Tensor<3> {
        let mask = padding.map(|p| p.try_into_primitive::<Flex>().unwrap());
        in_place(
            &primitive(q),
            &primitive(k),
            &primitive(v),
            mask.as_ref(),
            causal,
        )
        .expect("runs in place")
    }

    fn padding(b: usize, keys: usize, lens: &[usize]) -> Tensor<4, Bool> {
        let flags: Vec<bool> = (0..b)
            .flat_map(|bi| (0..keys).map(move |ki| ki >= lens[bi]))
            .collect();
        Tensor::from_data(TensorData::new(flags, [b, 1, 1, keys]), &Device::flex())
    }

    /// The same bits: each head runs the same kernels in the same order as
    /// burn-flex's op, only reading and writing through strides.
    fn assert_same(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len());
        let worst = got
            .iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            got.iter()
                .zip(want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "max abs difference {worst}"
        );
    }

    #[test]
    fn heads_read_in_place_match_burns_op_with_padding() {
        // Projections' outputs [batch, tokens, hidden] split into heads
        // (strided views), 3 texts with padding; enough work to run the
        // heads on threads natively.
        let (b, l, heads, d) = (3, 40, 4, 16);
        let x = |seed| split_heads(tensor([b, l, heads * d], seed), heads);
        let pad = padding(b, l, &[40, 23, 1]);
        check(x(1), x(2), x(3), Some(pad), false);
    }

    #[test]
    fn causal_slices_of_one_projection_match_burns_op() {
        // GPT-2's q, k and v: blocks of heads of one [b, l, 3 * hidden]
        // product (offsets into it, rows 3 * hidden apart).
        let (b, l, heads, d) = (2, 7, 3, 8);
        let qkv = split_heads(tensor([b, l, 3 * heads * d], 9), 3 * heads);
        let part = |i: usize| {
            qkv.clone()
                .slice([0..b, i * heads..(i + 1) * heads, 0..l, 0..d])
        };
        check(part(0), part(1), part(2), None, true);
    }

    #[test]
    fn cross_attention_to_a_longer_memory_matches_burns_op() {
        // BART's decoder: 5 queries over 9 keys, causal offset and padding.
        let (b, heads, d) = (2, 2, 8);
        let q = split_heads(tensor([b, 5, heads * d], 4), heads);
        let kv = |seed| split_heads(tensor([b, 9, heads * d], seed), heads);
        let pad = padding(b, 9, &[9, 6]);
        for causal in [false, true] {
            check(q.clone(), kv(5), kv(6), Some(pad.clone()), causal);
        }
    }

    #[test]
    fn sequences_beyond_whole_scores_take_burns_op() {
        // 520 x 520 scores per head: not in place, burn-flex's tiled path.
        let (b, l, heads, d) = (1, 520, 1, 4);
        assert!(l * l > WHOLE_SCORES);
        let x = |seed| split_heads(tensor([b, l, heads * d], seed), heads);
        let pad = padding(b, l, &[500]);
        let mask = pad.clone().try_into_primitive::<Flex>().unwrap();
        let (q, k, v) = (primitive(x(1)), primitive(x(2)), primitive(x(3)));
        assert!(in_place(&q, &k, &v, Some(&mask), false).is_none());
        let got = attend(x(1), x(2), x(3), Some(pad.clone()), false);
        assert_eq!(got.dims(), [b, l, heads * d]);
        let want = reference(x(1), x(2), x(3), Some(pad), false);
        assert_same(&got.into_data().try_to_vec::<f32>().unwrap(), &want);
    }

    #[test]
    fn one_query_few_keys_and_a_shared_mask_match_burns_op() {
        // One query (a decoder's step: gemm's vector paths), one or two keys
        // (a text of [CLS] [SEP]), and one mask row for every text.
        for (b, queries, keys) in [(2, 1, 9), (2, 3, 2), (3, 1, 1)] {
            let (heads, d) = (2, 8);
            let q = split_heads(tensor([b, queries, heads * d], 7), heads);
            let kv = |seed| split_heads(tensor([b, keys, heads * d], seed), heads);
            let shared = padding(1, keys, &[keys.div_ceil(2)]);
            check(q, kv(8), kv(9), Some(shared), false);
        }
    }

    #[test]
    fn a_text_whose_keys_are_all_hidden_gives_zeros() {
        let (b, l, heads, d) = (2, 4, 2, 4);
        let x = |seed| split_heads(tensor([b, l, heads * d], seed), heads);
        let got = ours(x(1), x(2), x(3), Some(padding(b, l, &[4, 0])), false);
        let got: Vec<f32> = got.into_data().try_to_vec::<f32>().unwrap();
        assert!(got[l * heads * d..].iter().all(|&x| x == 0.0));
        assert!(got[..l * heads * d].iter().any(|&x| x != 0.0));
    }
}
