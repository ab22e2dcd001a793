//! Dense (fully connected) layers: `x W + b`, where most of a transformer
//! pass goes, and the feed-forward GELU between them ([`gelu`]).
//!
//! In the browser's CPU backend (burn-flex in wasm) the product runs through
//! [`crate::kernels`]'s `strips`, which reads the weight in place, where the weight is dense
//! and its width a multiple of 8 (every projection of the encoders here),
//! and through rten-gemm otherwise (a strided weight: tied LM heads), instead
//! of burn-flex's own matmul (the `gemm` crate): on the page's MiniLM passes
//! rten-gemm's simd128 kernel (8 x 8 tiles, the bias added in the same pass)
//! took 15% less time than gemm's (3 x 4), which made BERTScore 1.16x faster
//! end to end, and `strips`, which does not copy the weight into panels
//! on every call, 1.11-1.19x more (BENCHMARKS.md). Natively the
//! product runs through rten-gemm: its AVX-512 kernel ran 1.7-2.0x gemm's
//! on 1600 x 384 x 1536 (one thread and 16, on the AMD development machine
//! and on a 16-core Xeon); with the parallel [`gelu`], on 16 cores MiniLM
//! at batch 32 took 42-44 ms against 65-72 and roberta-large's shape at
//! batch 1 68 ms against 112.
//! A model's f32 projections are packed into rten-gemm's panels once, at
//! load ([`PackedWeights`]): copying the weight into panels on every call
//! had made one short text slower through rten-gemm than through gemm (2.3
//! ms against 1.9 on 2 cores). On WebGPU burn's `linear` runs.
//!
//! Tensors are read in place through burn's backend-extension API (no copy
//! of the weights; the input is copied only when it is not contiguous).

use super::qgemm::QuantMatrix;
use crate::kernels::{STRIP, strips};
use burn::module::{Param, ParamId};
use burn::nn::Linear;
use burn::tensor::DType;
use burn::tensor::{Device, Tensor, TensorData, module};
use burn_flex::{Flex, FlexTensor};
use rten_gemm::{
    BiasVector, GemmExecutor, GemmInputA, GemmInputB, GemmUninitOptions, PackedBMatrix,
};
use rten_simd::SimdUnaryOp;
use rten_tensor::NdTensorView;
use rten_vecmath::{ExtendInit, Gelu};
use std::sync::Arc;

/// A linear layer's forward pass, [`linear`] for burn's [`Linear`].
pub trait Project {
    /// `x W + b` over the last dimension of `x`.
    fn project<const D: usize>(&self, x: Tensor<D>) -> Tensor<D>;
}

impl Project for Linear {
    fn project<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        project(x, &self.weight, self.bias.as_ref())
    }
}

/// `x W + b` for a layer's parameters: through the weight's packing when
/// it has one that runs it ([`PackedWeights`]), else [`linear`].
pub fn project<const D: usize>(
    x: Tensor<D>,
    weight: &Param<Tensor<2>>,
    bias: Option<&Param<Tensor<1>>>,
) -> Tensor<D> {
    let w = weight.val();
    // Only a packing of this very weight runs it: its id finds it, and the
    // packing checks the rest (a prepared file keeps its parameters' ids, so
    // two loads of one file, at two precisions, share them).
    if x.device() == Device::flex()
        && x.dtype() == DType::F32
        && let Some(p) = registry::find(weight.id, &w)
    {
        return p.project(x, bias.map(|b| b.val()));
    }
    linear(x, w, bias.map(|b| b.val()))
}

/// `x Eᵀ` for a head tied to the embedding table `E` (`[vocab, hidden]`):
/// through the table's integer packing when the model has one
/// ([`PackedWeights::add_tied_head`]), else [`linear`] of the transposed
/// table.
pub fn project_tied<const D: usize>(x: Tensor<D>, table: &Param<Tensor<2>>) -> Tensor<D> {
    let t = table.val();
    if x.device() == Device::flex()
        && x.dtype() == DType::F32
        && let Some(p) = registry::find(table.id, &t)
    {
        return p.project(x, None);
    }
    linear(x, t.transpose(), None)
}

/// The projections of one loaded model packed once for their CPU products,
/// found by their parameters' ids while this value lives; dropping it (with
/// its model) frees them.
#[derive(Debug, Clone, Default)]
pub struct PackedWeights(Vec<Arc<Packing>>);

impl PackedWeights {
    /// Packs the `k × n` weight `values` (`[in, out]`, the int8 weight
    /// dequantized) as 16-bit integers ([`super::qgemm`]) for the layer whose
    /// quantized weight parameter is `id`.
    pub fn add_integer(&mut self, id: ParamId, values: &[f32], k: usize, n: usize) {
        self.add(id, Packing::Integer(QuantMatrix::new(values, k, n)));
    }

    /// Packs the head tied to the f32 embedding table `table` (`[vocab,
    /// hidden]`, on the CPU) of parameter `id` as 16-bit integers, for
    /// [`project_tied`]: an int8 model's head is then integer products too.
    pub fn add_tied_head(&mut self, id: ParamId, table: FlexTensor) {
        let &[n, k] = table.layout().shape().as_slice() else {
            return;
        };
        if table.dtype() != DType::F32 {
            return;
        }
        let matrix = match dense(&table).as_slice::<f32>() {
            Some(values) => QuantMatrix::new_transposed(values, k, n),
            None => return,
        };
        self.add(id, Packing::TiedHead { table, matrix });
    }

    /// Packs each f32 weight (`[in, out]`, on the CPU) into rten-gemm's
    /// panels (natively in parallel) for the layer whose parameter is its
    /// id: their products then skip copying the weight into panels on every
    /// call. Each packing holds its weight's storage, which is what it
    /// answers for, so the weights stay in memory beside their panels.
    pub fn add_panels(&mut self, weights: Vec<(ParamId, FlexTensor)>) {
        #[cfg(not(target_arch = "wasm32"))]
        use rayon::prelude::*;
        #[cfg(not(target_arch = "wasm32"))]
        let weights = weights.into_par_iter();
        #[cfg(target_arch = "wasm32")]
        let weights = weights.into_iter();
        let packings: Vec<_> = weights.map(|(id, w)| (id, Packing::panels(w))).collect();
        for (id, p) in packings {
            if let Some(p) = p {
                self.add(id, p);
            }
        }
    }

    fn add(&mut self, id: ParamId, p: Packing) {
        let p = Arc::new(p);
        registry::register(id, &p);
        self.0.push(p);
    }

    /// How many projections have a packing.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// None do.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many run as integer products.
    pub fn integers(&self) -> usize {
        self.0
            .iter()
            .filter(|p| matches!(***p, Packing::Integer(_) | Packing::TiedHead { .. }))
            .count()
    }
}

/// One projection's weight, packed for the product that runs it.
enum Packing {
    /// An int8 weight's values as 16-bit integers: the browser's products.
    Integer(QuantMatrix),
    /// A tied head's weight (the transposed f32 embedding table) as 16-bit
    /// integers, beside the table they were packed from: only that very
    /// table runs them (an f32 load of the same prepared file shares its
    /// parameter ids, not its storage).
    TiedHead {
        table: FlexTensor,
        matrix: QuantMatrix,
    },
    /// An f32 weight in rten-gemm's panels (natively), beside the weight
    /// whose storage they were packed from.
    Panels {
        weight: FlexTensor,
        panels: PackedBMatrix<f32>,
    },
}

impl std::fmt::Debug for Packing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Packing::Integer(q) => f.debug_tuple("Integer").field(q).finish(),
            Packing::TiedHead { matrix, .. } => f.debug_tuple("TiedHead").field(matrix).finish(),
            Packing::Panels { panels, .. } => f
                .debug_struct("Panels")
                .field("rows", &panels.rows())
                .field("cols", &panels.cols())
                .finish(),
        }
    }
}

impl Packing {
    /// `weight`'s panels, when it is a 2-D f32 matrix.
    fn panels(weight: FlexTensor) -> Option<Self> {
        let &[d_in, d_out] = weight.layout().shape().as_slice() else {
            return None;
        };
        if weight.dtype() != DType::F32 {
            return None;
        }
        let panels = with_weight(&weight, d_in, d_out, |b| {
            executor().with(|g| g.prepack_b(b))
        });
        Some(Packing::Panels { weight, panels })
    }

    /// Whether this packing runs the weight `w`: an integer packing a
    /// quantized weight of its shape, panels and a tied head the very
    /// storage and layout they were packed from (a weight read again, or
    /// changed, has other storage).
    fn runs(&self, w: &Tensor<2>) -> bool {
        match self {
            Packing::Integer(q) => {
                matches!(w.dtype(), DType::QFloat(_)) && w.dims() == [q.rows(), q.cols()]
            }
            Packing::TiedHead { table: weight, .. } | Packing::Panels { weight, .. } => {
                w.device() == Device::flex() && w.dtype() == DType::F32 && {
                    let w = primitive(w.clone());
                    w.layout() == weight.layout()
                        && std::ptr::eq(w.storage::<f32>(), weight.storage::<f32>())
                }
            }
        }
    }

    /// `x W + b` for `x` on the CPU in f32.
    fn project<const D: usize>(&self, x: Tensor<D>, bias: Option<Tensor<1>>) -> Tensor<D> {
        let (d_in, d_out) = match self {
            Packing::Integer(q) | Packing::TiedHead { matrix: q, .. } => (q.rows(), q.cols()),
            Packing::Panels { panels, .. } => (panels.rows(), panels.cols()),
        };
        let mut dims = x.dims();
        let rows = input_rows(&dims, d_in, d_out);
        let x = primitive(x);
        let x = dense(&x);
        let x = x.as_slice::<f32>().expect("dense f32");
        let b = bias.map(primitive);
        let b = b.as_ref().map(dense);
        let bias = b.as_ref().map(|b| b.as_slice::<f32>().expect("dense f32"));
        let out = match self {
            Packing::Integer(q) | Packing::TiedHead { matrix: q, .. } => q.matmul(x, rows, bias),
            Packing::Panels { panels, .. } => {
                rten_product(x, GemmInputB::Packed(panels), bias, rows, d_in, d_out)
            }
        };
        dims[D - 1] = d_out;
        Tensor::from_primitive::<Flex>(FlexTensor::from_data(TensorData::new(out, dims)))
    }
}

/// The packings by parameter id, weakly: a model's [`PackedWeights`] own
/// them.
mod registry {
    use super::{Packing, ParamId, Tensor};
    use std::collections::HashMap;
    use std::sync::{Arc, RwLock, Weak};

    /// Every live packing of each id: two loads of one prepared file hold
    /// the same ids, and either may be dropped first. Read on every
    /// projection, from every thread at once, so lookups share the lock.
    static PACKED: RwLock<Option<HashMap<ParamId, Vec<Weak<Packing>>>>> = RwLock::new(None);

    pub fn register(id: ParamId, p: &Arc<Packing>) {
        let mut map = PACKED.write().unwrap_or_else(|e| e.into_inner());
        let map = map.get_or_insert_with(HashMap::new);
        map.retain(|_, v| {
            v.retain(|w| w.strong_count() > 0);
            !v.is_empty()
        });
        map.entry(id).or_default().push(Arc::downgrade(p));
    }

    /// A live packing of `id` that runs `w`.
    pub fn find(id: ParamId, w: &Tensor<2>) -> Option<Arc<Packing>> {
        let map = PACKED.read().unwrap_or_else(|e| e.into_inner());
        map.as_ref()?
            .get(&id)?
            .iter()
            .filter_map(Weak::upgrade)
            .find(|p| p.runs(w))
    }
}

/// `x W + b` over the last dimension of `x`, `weight` stored `[in, out]`
/// (burn's layout): the same as `burn::tensor::module::linear`, on the
/// CPU in f32 through `strips` (wasm) or rten-gemm, elsewhere burn's.
pub fn linear<const D: usize>(
    x: Tensor<D>,
    weight: Tensor<2>,
    bias: Option<Tensor<1>>,
) -> Tensor<D> {
    if rten_can_run(&x, &weight, bias.as_ref()) {
        rten_linear(x, weight, bias)
    } else {
        module::linear(x, weight, bias)
    }
}

/// All three on the CPU, in f32.
fn rten_can_run<const D: usize>(
    x: &Tensor<D>,
    weight: &Tensor<2>,
    bias: Option<&Tensor<1>>,
) -> bool {
    let cpu = Device::flex();
    let f32 = burn::tensor::DType::F32;
    x.device() == cpu
        && weight.device() == cpu
        && x.dtype() == f32
        && weight.dtype() == f32
        && bias.is_none_or(|b| b.device() == cpu && b.dtype() == f32)
}

/// The rows of an input of shape `dims` to a `[d_in, d_out]` weight (all
/// but its last dimension), which must be `d_in` wide.
fn input_rows<const D: usize>(dims: &[usize; D], d_in: usize, d_out: usize) -> usize {
    assert_eq!(
        dims[D - 1],
        d_in,
        "linear: input width {} for a [{d_in}, {d_out}] weight",
        dims[D - 1]
    );
    dims[..D - 1].iter().product()
}

/// [`linear`] through rten-gemm; the caller checked [`rten_can_run`].
fn rten_linear<const D: usize>(
    x: Tensor<D>,
    weight: Tensor<2>,
    bias: Option<Tensor<1>>,
) -> Tensor<D> {
    let dims = x.dims();
    let [d_in, d_out] = weight.dims();
    let rows = input_rows(&dims, d_in, d_out);
    let x = primitive(x);
    let w = primitive(weight);
    let b = bias.map(primitive);
    let out = gemm_f32(&x, &w, b.as_ref(), rows, d_in, d_out);
    let mut shape = dims;
    shape[D - 1] = d_out;
    let out = FlexTensor::from_data(TensorData::new(out, shape));
    Tensor::from_primitive::<Flex>(out)
}

/// Exact (erf) GELU, `0.5 x (1 + erf(x / sqrt 2))`: on the CPU in f32
/// through rten-vecmath's vectorised kernel (its erf within 6.7e-7 of
/// libm's, A&S 7.1.26), in place when `x` is the only reference to its
/// data and that data is contiguous from its start; elsewhere burn's.
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if x.device() != Device::flex() || x.dtype() != burn::tensor::DType::F32 {
        return burn::tensor::activation::gelu(x);
    }
    let dims = x.dims();
    let mut t = primitive(x);
    let n = t.layout().num_elements();
    if writable(&t) {
        let values = &mut t.storage_mut::<f32>()[..n];
        #[cfg(not(target_arch = "wasm32"))]
        if n >= 2 * GELU_CHUNK {
            use rayon::prelude::*;
            values
                .par_chunks_mut(GELU_CHUNK)
                .for_each(|chunk| Gelu {}.map_mut(chunk));
            return Tensor::from_primitive::<Flex>(t);
        }
        Gelu {}.map_mut(values);
        return Tensor::from_primitive::<Flex>(t);
    }
    let src = dense(&t);
    let mut out = Vec::with_capacity(n);
    out.extend_init(|dst| Gelu {}.map(src.as_slice::<f32>().expect("dense f32"), dst));
    Tensor::from_primitive::<Flex>(FlexTensor::from_data(TensorData::new(out, dims)))
}

/// Values per task of a native [`gelu`] in parallel (on the caller's
/// thread alone below twice this): a feed-forward layer of MiniLM at batch
/// 32 has 1.5 million, which one thread computed while the others waited
/// (that batch: 135 -> 115 ms on 2 cores, 70 -> 63 ms on 16); one text
/// has 46 thousand.
#[cfg(not(target_arch = "wasm32"))]
const GELU_CHUNK: usize = 1 << 15;

/// Whether `t`'s values can be overwritten in place: nothing else holds
/// them, and they are contiguous from the start of their buffer.
pub(crate) fn writable(t: &FlexTensor) -> bool {
    t.is_unique() && t.layout().is_contiguous() && t.layout().start_offset() == 0
}

/// The CPU tensor under a tensor the caller checked is on burn-flex.
pub(crate) fn primitive<const D: usize>(t: Tensor<D>) -> FlexTensor {
    t.try_into_primitive::<Flex>()
        .expect("a tensor on the flex device is a Flex tensor")
}

/// `rows x d_in` times `d_in x d_out` (plus the bias), row-major out.
fn gemm_f32(
    x: &FlexTensor,
    w: &FlexTensor,
    bias: Option<&FlexTensor>,
    rows: usize,
    d_in: usize,
    d_out: usize,
) -> Vec<f32> {
    let x = dense(x);
    let x = x.as_slice::<f32>().expect("dense f32");
    let bias = bias.map(dense);
    let bias = bias
        .as_ref()
        .map(|b| b.as_slice::<f32>().expect("dense f32"));
    // In wasm, a tied head's weight is the embeddings transposed (a
    // `[d_out, d_in]` matrix read through strides): for a few rows, dot
    // products with its rows in place; a packed product would first copy all
    // of it. Natively rten-gemm keeps it, so a prepared panel of the same
    // weight gives the same bits.
    if cfg!(target_arch = "wasm32")
        && rows <= FEW_ROWS
        && let Some(rows_w) = transposed_rows(w, d_in, d_out)
    {
        let mut out = crate::kernels::dots(x, rows_w, rows, d_in, d_out);
        if let Some(b) = bias {
            for row in out.chunks_exact_mut(d_out) {
                for (o, v) in row.iter_mut().zip(b) {
                    *o += v;
                }
            }
        }
        return out;
    }
    // In wasm a dense weight (every projection here) is read in place by
    // `strips`; natively rten-gemm's packed kernel is faster.
    if let Some(w) = w
        .as_slice::<f32>()
        .filter(|_| cfg!(target_arch = "wasm32") && d_out > 0 && d_out.is_multiple_of(STRIP))
    {
        return strips(x, w, bias, rows, d_in, d_out);
    }
    with_weight(w, d_in, d_out, |b| {
        rten_product(x, GemmInputB::Unpacked(b), bias, rows, d_in, d_out)
    })
}

/// Input rows up to which a transposed weight is read by dot products
/// ([`crate::kernels::dots`]): a generation step's (beams included).
const FEW_ROWS: usize = 8;

/// The `[d_out, d_in]` row-major values under `w` when it is their
/// transpose viewed as `[d_in, d_out]`.
fn transposed_rows(w: &FlexTensor, d_in: usize, d_out: usize) -> Option<&[f32]> {
    let (_, _, rs, cs) = w.layout().as_2d_strides()?;
    if rs != 1 || cs != d_in as isize {
        return None;
    }
    let start = w.layout().start_offset();
    w.storage::<f32>().get(start..start + d_in * d_out)
}

/// Calls `f` with the `d_in x d_out` weight `w` as a matrix view.
fn with_weight<R>(
    w: &FlexTensor,
    d_in: usize,
    d_out: usize,
    f: impl FnOnce(NdTensorView<'_, f32, 2>) -> R,
) -> R {
    // A weight read from a PyTorch checkpoint may be a transposed view (a
    // tied LM head): rten-gemm reads it in place through its strides;
    // anything else is copied to a dense matrix first.
    let strided = match w.layout().as_2d_strides() {
        Some((_, _, rs, cs)) if rs > 0 && cs > 0 => NdTensorView::from_data_with_strides(
            [d_in, d_out],
            &w.storage::<f32>()[w.layout().start_offset()..],
            [rs as usize, cs as usize],
        )
        .ok(),
        _ => None,
    };
    match strided {
        Some(view) => f(view),
        None => {
            let w = dense(w);
            f(NdTensorView::from_data(
                [d_in, d_out],
                w.as_slice::<f32>().expect("dense f32"),
            ))
        }
    }
}

/// rten-gemm's `rows x d_in` times the weight `b` (plus the bias),
/// row-major out.
fn rten_product(
    x: &[f32],
    b: GemmInputB<'_, f32>,
    bias: Option<&[f32]>,
    rows: usize,
    d_in: usize,
    d_out: usize,
) -> Vec<f32> {
    // rten-gemm computes a single row with its vector kernel, whose sums
    // round differently from its matrix kernel's (which gives each row the
    // same bits whatever the row count): a one-row product runs as two equal
    // rows, so a text's numbers do not depend on whether it was scored alone
    // or beside others (a classifier head on one pooled vector, say).
    let twice;
    let (rows_run, x) = if rows == 1 {
        twice = [x, x].concat();
        (2, &twice[..])
    } else {
        (rows, x)
    };
    let a = NdTensorView::from_data([rows_run, d_in], x);
    // Written by the product alone (not zeroed first): zeroing the output
    // on the calling thread was about 4% of a native pass at batch 32, with
    // the other threads waiting.
    let len = rows_run * d_out;
    let mut out = Vec::with_capacity(len);
    executor().with(|gemm| {
        out.extend_init(|spare| {
            gemm.gemm_uninit(
                &mut spare[..len],
                GemmInputA::Unpacked(a),
                b,
                GemmUninitOptions {
                    bias: bias.map(BiasVector::Row),
                    ..GemmUninitOptions::default()
                },
            )
            // Also the panels' kernel: rten-gemm refuses panels packed for
            // another, and every thread's executor picks the same one (by
            // the CPU's features), so panels packed on one thread run here.
            .expect("shapes checked by the caller")
        })
    });
    out.truncate(rows * d_out);
    out
}

/// `t` itself when it is one dense run of f32s, else a dense copy.
pub(crate) fn dense(t: &FlexTensor) -> std::borrow::Cow<'_, FlexTensor> {
    if t.as_slice::<f32>().is_some() {
        std::borrow::Cow::Borrowed(t)
    } else {
        std::borrow::Cow::Owned(t.to_contiguous())
    }
}

/// One f32 executor per thread (it picks the best kernel the CPU has once).
fn executor() -> &'static std::thread::LocalKey<GemmExecutor<f32>> {
    thread_local! {
        static GEMM: GemmExecutor<f32> = GemmExecutor::default();
    }
    &GEMM
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) use crate::kernels::tests::values;

    fn tensor<const D: usize>(shape: [usize; D], seed: u32) -> Tensor<D> {
        let n = shape.iter().product();
        Tensor::from_data(TensorData::new(values(n, seed), shape), &Device::flex())
    }

    fn max_diff<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> f32 {
        assert_eq!(a.dims(), b.dims());
        (a - b).abs().max().into_scalar()
    }

    /// `project` (what every projection and GPT-2's `Conv1D` call) runs an
    /// int8 weight's packed integer product while its [`PackedWeights`]
    /// live, close to the f32 product of the int8 values; after they are
    /// dropped, burn's product of the quantized weight. An f32 weight never
    /// takes a packing.
    #[test]
    fn project_runs_the_packed_product_while_it_lives() {
        use burn::tensor::quantization::{Calibration, compute_q_params, compute_range};
        let scheme = super::super::weights::int8_scheme();
        let f32_weight = tensor([64, 32], 4);
        let range = compute_range(&scheme, &f32_weight, &Calibration::MinMax);
        let quantized = f32_weight.quantize(&scheme, compute_q_params(&scheme, range));
        let weight = Param::from_tensor(quantized.clone());
        let bias = Param::from_tensor(tensor([32], 5));
        let x = tensor([2, 5, 64], 6);
        let float = module::linear(x.clone(), quantized.clone().dequantize(), Some(bias.val()));
        let mut packed = PackedWeights::default();
        let values = super::super::weights::int8_values(&quantized).expect("int8 scheme");
        packed.add_integer(weight.id, &values, 64, 32);
        assert_eq!((packed.len(), packed.integers()), (1, 1));
        let integer = project(x.clone(), &weight, Some(&bias));
        let d = max_diff(integer.clone(), float.clone());
        assert!(d > 0.0 && d < 2e-3, "integer product off by {d}");
        // An f32 parameter with the same id is not routed to the packing.
        let same_id = Param::initialized(weight.id, quantized.clone().dequantize());
        let plain = project(x.clone(), &same_id, Some(&bias));
        assert!(max_diff(plain, float.clone()) < 1e-5);
        drop(packed);
        let after = project(x, &weight, Some(&bias));
        assert!(max_diff(after, float) < 1e-5);
    }

    /// An f32 weight's panels run `project` while they live and give the
    /// same bits as the product that packs the weight on every call, for
    /// one row, many, a width that is not a multiple of the kernel's and a
    /// transposed weight (a tied LM head). They run only the storage they
    /// were packed from: a weight with the same id and other storage (a
    /// second load of one file, at another precision) takes its own product.
    #[test]
    fn panels_run_only_their_own_weight_and_give_the_same_bits() {
        let bits = |t: Tensor<3>| t.into_data().try_to_vec::<f32>().unwrap();
        // 300 x 200 spans two of rten-gemm's depth blocks (256) and, on more
        // than one thread, two column blocks, the last panel part-filled.
        for [d_in, d_out] in [[40, 24], [300, 200]] {
            let dense = |seed| tensor([d_in, d_out], seed);
            let transposed = |seed| tensor([d_out, d_in], seed).transpose();
            let makers: [&dyn Fn(u32) -> Tensor<2>; 2] = [&dense, &transposed];
            for make in makers {
                let w = make(2);
                let weight = Param::from_tensor(w.clone());
                let bias = Param::from_tensor(tensor([d_out], 3));
                let mut packed = PackedWeights::default();
                packed.add_panels(vec![(weight.id, primitive(weight.val()))]);
                assert_eq!((packed.len(), packed.integers()), (1, 0));
                assert!(registry::find(weight.id, &weight.val()).is_some());
                for shape in [[1, 1, d_in], [1, 2, d_in], [3, 7, d_in]] {
                    let x = tensor(shape, 1);
                    let ours = project(x.clone(), &weight, Some(&bias));
                    let unpacked = rten_linear(x.clone(), w.clone(), Some(bias.val()));
                    assert_eq!(bits(ours.clone()), bits(unpacked));
                    let theirs = module::linear(x, w.clone(), Some(bias.val()));
                    assert!(max_diff(ours, theirs) < 1e-4);
                }
                // The same id and layout, other storage and values.
                let other = Param::initialized(weight.id, make(9));
                assert!(registry::find(other.id, &other.val()).is_none());
                let x = tensor([3, 7, d_in], 1);
                let own = project(x.clone(), &other, Some(&bias));
                let expected = rten_linear(x.clone(), other.val(), Some(bias.val()));
                assert_eq!(bits(own), bits(expected));
                drop(packed);
                assert!(registry::find(weight.id, &weight.val()).is_none());
            }
        }
    }

    /// The CPU product (natively rten-gemm for every weight; the page's
    /// `strips` has its own test in `crate::kernels`) equals burn's `linear` for dense
    /// and strided inputs, transposed weights (as tied LM heads use them)
    /// and no bias.
    #[test]
    fn matches_burns_linear() {
        let x = tensor([3, 7, 40], 1);
        let w = tensor([40, 24], 2);
        let b = tensor([24], 3);
        let ours = rten_linear(x.clone(), w.clone(), Some(b.clone()));
        let theirs = module::linear(x.clone(), w.clone(), Some(b.clone()));
        assert!(max_diff(ours, theirs) < 1e-5);

        // A non-contiguous input: [7, 3, 40] swapped to [3, 7, 40].
        let xt = tensor([7, 3, 40], 4).swap_dims(0, 1);
        let ours = rten_linear(xt.clone(), w.clone(), None);
        let theirs = module::linear(xt, w.clone(), None);
        assert!(max_diff(ours, theirs) < 1e-5);

        // A transposed weight, read through its strides, on 2-D input.
        let table = tensor([50, 40], 5);
        let x2 = tensor([5, 40], 6);
        let ours = rten_linear(x2.clone(), table.clone().transpose(), None);
        let theirs = x2.matmul(table.transpose());
        assert!(max_diff(ours, theirs) < 1e-5);

        // Through `linear`, one row and many.
        for rows in [1, 70] {
            let x = tensor([rows, 40], 7);
            let ours = linear(x.clone(), w.clone(), Some(b.clone()));
            let theirs = module::linear(x, w.clone(), Some(b.clone()));
            assert!(max_diff(ours, theirs) < 1e-5, "{rows} rows");
        }
    }

    /// A row's outputs have the same bits whether it is multiplied alone
    /// or with other rows (rten-gemm's one-row kernel sums differently).
    #[test]
    fn a_row_alone_gets_the_bits_it_gets_in_a_batch() {
        let w = tensor([384, 96], 30);
        let b = tensor([96], 31);
        let rows = tensor([5, 384], 32);
        let all = linear(rows.clone(), w.clone(), Some(b.clone())).into_data();
        let all = all.as_slice::<f32>().unwrap();
        for r in 0..5 {
            let alone = linear(rows.clone().narrow(0, r, 1), w.clone(), Some(b.clone()));
            let alone = alone.into_data();
            assert_eq!(
                alone.as_slice::<f32>().unwrap(),
                &all[r * 96..(r + 1) * 96],
                "row {r}"
            );
        }
        // And through a strided weight (rten-gemm in wasm too).
        let table = tensor([96, 384], 33).transpose();
        let all = rten_linear(rows.clone(), table.clone(), None).into_data();
        let alone = rten_linear(rows.narrow(0, 2, 1), table, None).into_data();
        assert_eq!(
            alone.as_slice::<f32>().unwrap(),
            &all.as_slice::<f32>().unwrap()[2 * 96..3 * 96]
        );
    }

    /// A width that is not a multiple of 8 (rten-gemm in the page too) is
    /// still burn's product.
    #[test]
    fn other_widths_match_burns_linear() {
        let x = tensor([2, 5, 40], 23);
        let w = tensor([40, 12], 24);
        let b = tensor([12], 25);
        let ours = rten_linear(x.clone(), w.clone(), Some(b.clone()));
        assert!(max_diff(ours, module::linear(x, w, Some(b))) < 1e-5);
    }

    /// The vectorised GELU is burn's (libm's erf) within the kernel's error,
    /// in place, on a shared tensor (left as it was) and on a strided view,
    /// over the range FFN inputs take and beyond.
    #[test]
    fn gelu_matches_burns() {
        let spread = |t: Tensor<3>| t * 24.0;
        let x = spread(tensor([4, 9, 64], 10));
        let theirs = burn::tensor::activation::gelu(x.clone());
        let before = x.clone().into_data();
        let shared = gelu(x.clone());
        assert_eq!(x.into_data(), before, "a shared input is not written to");
        assert!(max_diff(shared, theirs.clone()) < 4e-6);
        let own = gelu(spread(tensor([4, 9, 64], 10)));
        assert!(max_diff(own, theirs) < 4e-6);
        let xt = spread(tensor([9, 4, 64], 11)).swap_dims(0, 1);
        let strided = gelu(xt.clone());
        assert!(max_diff(strided, burn::tensor::activation::gelu(xt)) < 4e-6);
        // Large enough for the native path's parallel chunks (and a
        // last, shorter chunk).
        let big = spread(tensor([3, 41, 1536], 13));
        let theirs = burn::tensor::activation::gelu(big.clone());
        let ours = gelu(spread(tensor([3, 41, 1536], 13)));
        assert!(max_diff(ours, theirs) < 4e-6);
        // Not the identity or a tanh approximation.
        let x = spread(tensor([2, 3, 16], 12));
        let tanh = burn::tensor::activation::gelu_approximate(x.clone());
        assert!(max_diff(gelu(x), tanh) > 1e-4);
    }

    /// A wrong product would not pass: the check above sees a bias left out.
    /// (And every input it uses can run through rten-gemm.)
    #[test]
    fn the_check_sees_a_missing_bias() {
        let x = tensor([2, 3, 8], 7);
        let w = tensor([8, 4], 8);
        let b = tensor([4], 9);
        assert!(rten_can_run(&x, &w, Some(&b)));
        let with = rten_linear(x.clone(), w.clone(), Some(b));
        let without = module::linear(x, w, None);
        assert!(max_diff(with, without) > 1e-3);
    }
}
