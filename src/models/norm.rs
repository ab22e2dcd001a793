//! A residual sum and its layer norm, `norm(x + residual)`, which a
//! post-norm layer computes twice.
//!
//! burn's ops compute it in two passes over the activations: burn-flex adds
//! on the calling thread alone, then its layer norm fills a new zeroed
//! buffer before normalising the rows in parallel. On 16 cores that pair
//! took the same 0.46 ms at 4, 8 and 16 threads (MiniLM's shape, batch 32;
//! a layer's two were a fifth of it at 16 threads, against a twelfth at 4;
//! BENCHMARKS.md). On the CPU in f32, [`add_norm`] makes it one pass per row
//! (the sum, its mean and centred variance, the scaled and shifted values:
//! rten-vecmath's vectorised kernels), written into an operand nothing else
//! holds, natively rows in parallel. A row's values depend on that row
//! alone, however the rows are split. Elsewhere (WebGPU) burn's ops run.

use super::dense::{dense, primitive, writable};
use burn::nn::LayerNorm;
use burn::tensor::{DType, Device, Tensor, TensorData};
use burn_flex::{Flex, FlexTensor};
use rten_simd::SimdOp;
use rten_vecmath::{Normalize, NormalizeOptions, Sum, SumSquareSub};

/// `norm(x + residual)` over the last dimension (`epsilon` is the norm's).
pub fn add_norm<const D: usize>(
    norm: &LayerNorm,
    epsilon: f64,
    x: Tensor<D>,
    residual: Tensor<D>,
) -> Tensor<D> {
    let width = norm.gamma.dims()[0];
    let on_cpu = |t: &Tensor<D>| t.device() == Device::flex() && t.dtype() == DType::F32;
    // f32 parameters too (a model's norms are; anything else takes burn's
    // path rather than a panic).
    let f32_params = norm.gamma.dtype() == DType::F32
        && norm.beta.as_ref().is_none_or(|b| b.dtype() == DType::F32);
    if !(on_cpu(&x) && on_cpu(&residual) && f32_params)
        || x.dims() != residual.dims()
        || x.dims()[D - 1] != width
        || width == 0
    {
        return norm.forward(x + residual);
    }
    let dims = x.dims();
    let gamma = primitive(norm.gamma.val());
    let beta = norm.beta.as_ref().map(|b| primitive(b.val()));
    let (gamma, beta) = (dense(&gamma), beta.as_ref().map(dense));
    let gamma = gamma.as_slice::<f32>().expect("dense f32");
    let beta = beta
        .as_ref()
        .map(|b| b.as_slice::<f32>().expect("dense f32"));
    let (x, residual) = (primitive(x), primitive(residual));
    let eps = epsilon as f32;
    // The sum is written into whichever operand nothing else holds (the
    // projection's output, in a layer), else into a copy of the residual.
    let (mut out, other) = match (writable(&residual), writable(&x)) {
        (true, _) => (residual, x),
        (false, true) => (x, residual),
        (false, false) => {
            let copy = dense(&residual)
                .as_slice::<f32>()
                .expect("dense f32")
                .to_vec();
            (FlexTensor::from_data(TensorData::new(copy, dims)), x)
        }
    };
    let other = dense(&other);
    let other = other.as_slice::<f32>().expect("dense f32");
    let n = other.len();
    let values = &mut out.storage_mut::<f32>()[..n];
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        let chunk = (ADD_NORM_CHUNK / width).max(1) * width;
        if n >= 2 * chunk {
            values
                .par_chunks_mut(chunk)
                .zip(other.par_chunks(chunk))
                .for_each(|(v, o)| rows(v, o, gamma, beta, eps));
            return Tensor::from_primitive::<Flex>(out);
        }
    }
    rows(values, other, gamma, beta, eps);
    Tensor::from_primitive::<Flex>(out)
}

/// Values per task of a native [`add_norm`] in parallel (whole rows; on
/// the caller's thread alone below twice this): a layer of MiniLM at batch
/// 32 has 369 thousand, one text about 12 thousand.
#[cfg(not(target_arch = "wasm32"))]
const ADD_NORM_CHUNK: usize = 1 << 14;

/// `values = norm(values + other)`, row by row (`gamma.len()` values each).
fn rows(values: &mut [f32], other: &[f32], gamma: &[f32], beta: Option<&[f32]>, eps: f32) {
    let width = gamma.len();
    for (row, other) in values.chunks_mut(width).zip(other.chunks(width)) {
        for (v, o) in row.iter_mut().zip(other) {
            *v += o;
        }
        let mean = Sum::new(row).dispatch() / width as f32;
        let variance = SumSquareSub::new(row, mean).dispatch() / width as f32;
        Normalize::new_mut(
            row,
            NormalizeOptions {
                pre_scale_bias: mean,
                scale: 1.0 / (variance + eps).sqrt(),
                element_scale: Some(gamma),
                element_bias: beta,
                ..NormalizeOptions::default()
            },
        )
        .dispatch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::dense::tests::values;
    use burn::nn::LayerNormConfig;
    use burn::tensor::TensorData;

    fn tensor<const D: usize>(shape: [usize; D], seed: u32, scale: f32) -> Tensor<D> {
        let n = shape.iter().product();
        let v = values(n, seed).into_iter().map(|v| v * scale).collect();
        Tensor::from_data(TensorData::new(v, shape), &Device::flex())
    }

    fn max_diff(a: Tensor<3>, b: Tensor<3>) -> f32 {
        assert_eq!(a.dims(), b.dims());
        (a - b).abs().max().into_scalar()
    }

    #[test]
    fn add_norm_is_burns_norm_of_the_sum_whichever_operand_it_writes() {
        // One short text (the caller's thread) and a batch whose rows split
        // over tasks natively (MiniLM's width at batch 32 x 30 tokens);
        // a width that is no multiple of a vector.
        for (shape, eps) in [
            ([1, 7, 384], 1e-12),
            ([32, 30, 384], 1e-12),
            ([3, 50, 1030], 1e-5),
        ] {
            let width = shape[2];
            let mut norm = LayerNormConfig::new(width)
                .with_epsilon(eps)
                .init(&Device::flex());
            norm.gamma = burn::module::Param::from_tensor(tensor([width], 1, 2.0) + 1.0);
            norm.beta = Some(burn::module::Param::from_tensor(tensor([width], 2, 1.0)));
            // Activations of a few units with a large mean, as hidden states have.
            let x = tensor(shape, 3, 8.0) + 3.0;
            let r = tensor(shape, 4, 4.0);
            let burns = norm.forward(x.clone() + r.clone());
            // The residual unique (a layer's case), x unique, neither.
            let fresh = |t: &Tensor<3>| t.clone() * 1.0;
            let cases = [
                add_norm(&norm, eps, x.clone(), fresh(&r)),
                add_norm(&norm, eps, fresh(&x), r.clone()),
                add_norm(&norm, eps, x.clone(), r.clone()),
            ];
            for (case, ours) in cases.into_iter().enumerate() {
                let d = max_diff(ours, burns.clone());
                assert!(d < 2e-6, "{shape:?}, case {case}: {d}");
            }
            // The operands that were not written are unchanged.
            assert_eq!(max_diff(x.clone(), tensor(shape, 3, 8.0) + 3.0), 0.0);
            assert_eq!(max_diff(r.clone(), tensor(shape, 4, 4.0)), 0.0);
        }
    }

    #[test]
    fn a_rows_values_do_not_depend_on_the_other_rows() {
        // Natively the rows split over tasks: the same row alone and inside
        // a batch gives the same bits.
        let width = 384;
        let norm = LayerNormConfig::new(width).init(&Device::flex());
        let x = tensor([40, 30, width], 5, 6.0);
        let r = tensor([40, 30, width], 6, 3.0);
        let all = add_norm(&norm, 1e-5, x.clone(), r.clone());
        let one = |t: &Tensor<3>| t.clone().slice([17..18, 0..30, 0..width]);
        let alone = add_norm(&norm, 1e-5, one(&x), one(&r));
        assert_eq!(max_diff(one(&all), alone), 0.0);
    }
}
