//! int8 quantization in burn's Q8S scheme (symmetric, one f32 scale per
//! block of [`QUANT_BLOCK`] values), computed as burn computes it but in one
//! pass; q4 (4-bit levels, −7..=7, one scale per block, as burn's Q4S
//! rounds) held in the same int8 storage; and casts of a whole module.

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::quantization::{
    Calibration, QuantScheme, QuantStore, QuantValue, QuantizedBytes, ScaleDtype, compute_q_params,
    compute_range,
};
use burn::tensor::{DType, Device, FloatDType, Shape, Tensor, TensorData};

use super::{Precision, QUANT_BLOCK};

/// The int8 scheme: symmetric Q8S, one f32 scale per [`QUANT_BLOCK`] values.
pub fn int8_scheme() -> QuantScheme {
    QuantScheme::default()
        .with_value(QuantValue::Q8S)
        .with_store(QuantStore::Native)
        .per_block([QUANT_BLOCK], ScaleDtype::F32)
}

/// Quantizes the weights of every linear projection (attention, feed-forward,
/// heads) to `precision` for compute; with `lookups`, the embedding tables
/// too, to int8 at either precision ([`Network::load`] turns them back to
/// f32, rounded, since a lookup would otherwise dequantize the whole table
/// on every pass). Norms and biases stay f32, and so does a matrix whose
/// width is not a multiple of [`QUANT_BLOCK`] (a 3-class NLI head). At q4 a
/// projection's values are 4-bit levels in int8's storage ([`int8_scheme`]):
/// every int8 path (prepared files, integer products) carries them as they
/// are. At f32 the module is returned as it is.
pub fn quantize<M: Module>(module: M, precision: Precision, lookups: bool) -> M {
    let levels = match precision {
        Precision::F32 => return module,
        Precision::Int8 => QuantValue::Q8S,
        Precision::Q4 => QuantValue::Q4S,
    };
    module.map(&mut Int8Mapper {
        path: Vec::new(),
        scheme: int8_scheme(),
        mode: Mode::Quantize { lookups, levels },
    })
}

/// Dequantizes everything but the linear projections (embedding tables read
/// from an int8 file).
pub(crate) fn dequantize_lookups<M: Module>(module: M) -> M {
    module.map(&mut Int8Mapper {
        path: Vec::new(),
        scheme: int8_scheme(),
        mode: Mode::DequantizeLookups,
    })
}

/// Dequantizes every weight (int8 values kept, stored as f32).
pub(crate) fn dequantize_all<M: Module>(module: M) -> M {
    module.map(&mut Int8Mapper {
        path: Vec::new(),
        scheme: int8_scheme(),
        mode: Mode::DequantizeAll,
    })
}

enum Mode {
    /// Projections rounded to `levels` (Q8S or Q4S), lookups to Q8S.
    Quantize {
        lookups: bool,
        levels: QuantValue,
    },
    DequantizeLookups,
    DequantizeAll,
}

/// An int8 weight's values as f32, exactly as burn's `dequantize` gives
/// them (the value times its block's scale), in one pass: burn-flex's
/// dequantize locates every element's block with divisions, a third of an
/// int8 MiniLM's load time before. `None` for a tensor that is not in
/// [`int8_scheme`] with whole blocks per row, and for a tensor off the CPU
/// (its values are read back synchronously, which WebGPU in a browser does
/// not allow): burn's path then serves.
pub(crate) fn int8_values<const D: usize>(tensor: &Tensor<D>) -> Option<Vec<f32>> {
    let DType::QFloat(scheme) = tensor.dtype() else {
        return None;
    };
    if tensor.device() != Device::flex() {
        return None;
    }
    let block = QUANT_BLOCK as usize;
    let whole_blocks = scheme.value == QuantValue::Q8S
        && scheme.tensor_scale().is_none()
        && scheme
            .block_size()
            .is_some_and(|b| b.as_slice() == [QUANT_BLOCK])
        && tensor.dims()[D - 1].is_multiple_of(block);
    if !whole_blocks {
        return None;
    }
    let data = tensor.clone().into_data();
    let shape = data.shape().clone();
    let (values, scales) = QuantizedBytes {
        bytes: data.into_bytes(),
        scheme,
        shape,
    }
    .into_vec_i8();
    if scales.global.is_some() || scales.block.len() * block != values.len() {
        return None;
    }
    Some(
        values
            .chunks_exact(block)
            .zip(&scales.block)
            .flat_map(|(chunk, &scale)| chunk.iter().map(move |&v| scale * f32::from(v)))
            .collect(),
    )
}

/// `tensor` rounded to int8 in `scheme`: burn's scales (`compute_q_params`
/// of each block's min and max), and the values exactly as burn-flex's
/// `quantize` rounds them, `(x / scale).round().clamp(a, b)`, one block of
/// [`QUANT_BLOCK`] at a time ([`int8_rounded`]). burn-flex's loop finds
/// each element's block with divisions and calls libm's `roundf`: most of
/// an int8 load from f32 weights (the page's int8 models) before. Tensors
/// [`int8_rounded`] does not take go through burn.
fn quantize_int8<const D: usize>(tensor: Tensor<D>, scheme: &QuantScheme) -> Tensor<D> {
    let range = compute_range(scheme, &tensor, &Calibration::MinMax);
    let qparams = compute_q_params(scheme, range);
    let Some(scales) = int8_scales(&tensor, scheme, &qparams.scales) else {
        return tensor.quantize(scheme, qparams);
    };
    let device = tensor.device();
    // Taken, not copied, where this is the last reference to the values.
    let data = tensor.into_data();
    match data.as_slice::<f32>() {
        Ok(values) => {
            let range = scheme.value.range();
            Tensor::from_data(
                int8_rounded(values, data.shape(), scheme, &scales, range),
                &device,
            )
        }
        Err(_) => Tensor::from_data(data, &device).quantize(scheme, qparams),
    }
}

/// The scales [`int8_rounded`] uses, as burn-flex's `quantize` would
/// (`validated_scale`), for an f32 tensor on the CPU in [`int8_scheme`]
/// whose rows are whole blocks; `None` for anything else.
fn int8_scales<const D: usize>(
    tensor: &Tensor<D>,
    scheme: &QuantScheme,
    scales: &Tensor<1>,
) -> Option<Vec<f32>> {
    let block = QUANT_BLOCK as usize;
    let cpu = Device::flex();
    if *scheme != int8_scheme()
        || tensor.device() != cpu
        || scales.device() != cpu
        || tensor.dtype() != DType::F32
        || !tensor.dims()[D - 1].is_multiple_of(block)
    {
        return None;
    }
    let scales = scales
        .to_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .ok()?;
    if scales.len() * block != tensor.shape().num_elements() {
        return None;
    }
    let dtype = scheme.scale_dtype();
    Some(
        scales
            .into_iter()
            .map(|s| match dtype.round_up(s) {
                s if s > 0.0 && s.is_finite() => s,
                _ => dtype.round_up(f32::MIN_POSITIVE),
            })
            .collect(),
    )
}

/// `values` (row-major, `scales.len()` whole blocks) rounded to the integers
/// `a..=b` one block at a time, as burn-flex's `quantize` rounds them, and
/// stored in `scheme`.
fn int8_rounded(
    values: &[f32],
    shape: &Shape,
    scheme: &QuantScheme,
    scales: &[f32],
    (a, b): (f32, f32),
) -> TensorData {
    let mut out = Vec::with_capacity(values.len());
    for (chunk, &scale) in values.chunks_exact(QUANT_BLOCK as usize).zip(scales) {
        let inv = 1.0 / scale;
        out.extend(chunk.iter().map(|&x| round_to_int8(x * inv, a, b)));
    }
    TensorData::quantized(out, shape.clone(), *scheme, scales, None)
}

/// `t.round().clamp(a, b) as i8` (halves away from zero; NaN gives 0) for
/// the integer bounds `a, b` of an 8-bit scheme, without libm's `roundf`
/// (a call per value natively, a software routine in wasm) and without
/// branches, so the loop over a block vectorises.
fn round_to_int8(t: f32, a: f32, b: f32) -> i8 {
    let t = t.clamp(-128.0, 128.0);
    let whole = t as i32; // toward zero, exact in this range; NaN gives 0
    let frac = t - whole as f32; // exact
    let rounded = whole + i32::from(frac >= 0.5) - i32::from(frac <= -0.5);
    rounded.clamp(a as i32, b as i32) as i8
}

/// `tensor` (whole blocks per row) rounded to 4-bit levels as burn's Q4S
/// rounds (symmetric: the scale is a block's largest magnitude over 7, the
/// values `(x / scale).round().clamp(-7, 7)`), held in [`int8_scheme`]'s
/// storage. Read on the CPU (quantization happens there at load and in
/// `prepare`), whatever the device and float type.
fn quantize_q4<const D: usize>(tensor: Tensor<D>) -> Tensor<D> {
    let device = tensor.device();
    let shape = tensor.shape();
    let values = tensor
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("f32 after convert");
    let (a, b) = QuantValue::Q4S.range();
    let dtype = ScaleDtype::F32;
    let scales: Vec<f32> = values
        .chunks_exact(QUANT_BLOCK as usize)
        .map(|block| {
            let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            // burn's `compute_q_params`: 2 · max(|min|, |max|) / (b − a).
            match dtype.round_up(2.0 * amax / (b - a)) {
                s if s > 0.0 && s.is_finite() => s,
                _ => dtype.round_up(f32::MIN_POSITIVE),
            }
        })
        .collect();
    Tensor::from_data(
        int8_rounded(&values, &shape, &int8_scheme(), &scales, (a, b)),
        &device,
    )
}

/// `tensor` dequantized to f32 ([`int8_values`] where it applies).
fn dequantize<const D: usize>(tensor: Tensor<D>) -> Tensor<D> {
    match int8_values(&tensor) {
        Some(values) => {
            Tensor::from_data(TensorData::new(values, tensor.shape()), &tensor.device())
        }
        None => tensor.dequantize(),
    }
}

/// Walks a module, quantizing or dequantizing the weights [`quantize`] names.
struct Int8Mapper {
    path: Vec<String>,
    scheme: QuantScheme,
    mode: Mode,
}

/// Modules whose `weight` is a linear projection.
pub(super) const PROJECTIONS: &[&str] = &[
    "query",
    "key",
    "value",
    "output",
    "intermediate",
    "dense",
    "out",
    "c_attn",
    "c_proj",
    "c_fc",
    "q_proj",
    "k_proj",
    "v_proj",
    "out_proj",
    "fc1",
    "fc2",
    "query_proj",
    "key_proj",
    "value_proj",
    "pos_key_proj",
    "pos_query_proj",
    "attention_output",
    "in_proj",
    // Llama, Qwen2 and Qwen3.
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
    "lm_head",
    // T5.
    "q",
    "k",
    "v",
    "o",
    "wi_0",
    "wi_1",
    "wo",
];

/// Modules whose `weight` is a lookup table.
const LOOKUPS: [&str; 6] = [
    "word_embeddings",
    "position_embeddings",
    "wte",
    "wpe",
    "shared",
    "embed_positions",
];

impl ModuleMapper for Int8Mapper {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let owner = weight_owner(&self.path);
        let is_projection = PROJECTIONS.contains(&owner);
        let is_lookup = LOOKUPS.contains(&owner);
        match self.mode {
            Mode::DequantizeLookups | Mode::DequantizeAll => {
                let keep = is_projection && matches!(self.mode, Mode::DequantizeLookups);
                if keep || !matches!(param.val().dtype(), DType::QFloat(_)) {
                    return param;
                }
                param.map(dequantize)
            }
            Mode::Quantize { lookups, levels } => {
                let dims = param.shape().dims::<D>();
                let wanted = is_projection || (lookups && is_lookup);
                let quantized = matches!(param.val().dtype(), DType::QFloat(_));
                if !wanted || quantized || D != 2 || dims[D - 1] % QUANT_BLOCK as usize != 0 {
                    return param;
                }
                let scheme = self.scheme;
                if is_projection && levels == QuantValue::Q4S {
                    param.map(quantize_q4)
                } else {
                    param.map(|tensor| quantize_int8(tensor, &scheme))
                }
            }
        }
    }
}

/// The module owning the parameter at `path` when the parameter is its
/// `weight` (`""` otherwise): what [`PROJECTIONS`] and [`LOOKUPS`] name.
pub(super) fn weight_owner(path: &[String]) -> &str {
    match path {
        [.., owner, last] if last == "weight" => owner,
        _ => "",
    }
}

/// Casts every float parameter of a module to one dtype.
struct CastFloats(FloatDType);

impl ModuleMapper for CastFloats {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let dtype = self.0;
        param.map(|t| t.cast(dtype))
    }
}

/// `module` with every float parameter cast to `dtype`.
pub fn cast_floats<M: Module>(module: M, dtype: FloatDType) -> M {
    module.map(&mut CastFloats(dtype))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_values_are_burns_dequantized_values() {
        let device = Device::flex();
        let scheme = int8_scheme();
        for [rows, cols] in [[3, 32], [30, 64], [64, 96]] {
            let values: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919) % 1000) as f32 / 97.0 - 5.0)
                .collect();
            let f32_tensor = Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), &device);
            assert!(
                int8_values(&f32_tensor).is_none(),
                "an f32 tensor is not int8"
            );
            let range = compute_range(&scheme, &f32_tensor, &Calibration::MinMax);
            let q = f32_tensor.quantize(&scheme, compute_q_params(&scheme, range));
            let ours = int8_values(&q).expect("int8 scheme, whole blocks");
            let burns = q
                .clone()
                .dequantize()
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            assert_eq!(ours.len(), burns.len());
            for (a, b) in ours.iter().zip(&burns) {
                assert_eq!(a.to_bits(), b.to_bits(), "[{rows}, {cols}]");
            }
            let tensor = dequantize(q).into_data().try_to_vec::<f32>().unwrap();
            assert_eq!(tensor, burns);
        }
    }

    /// The int8 rounding at load gives burn's quantized tensor byte for
    /// byte: ties (x.5 steps), a zero block, subnormals, NaN and infinities,
    /// and values beyond the scale.
    #[test]
    fn int8_rounding_is_burns_quantize() {
        let device = Device::flex();
        let scheme = int8_scheme();
        let mut special = vec![0.0f32; 32]; // a zero block
        special.extend((0..32).map(|i| f32::from_bits(1 + i as u32))); // subnormals
        // Scale 1 (the block's largest magnitude is 127): every half step a tie.
        special.extend((0..32).map(|i| {
            if i == 0 {
                127.0
            } else {
                (i as f32 - 16.0) + 0.5
            }
        }));
        special.extend((0..32).map(|i| [f32::NAN, f32::INFINITY, -f32::INFINITY, 1.0][i % 4]));
        for [rows, cols] in [[1, 32], [37, 64], [8, 96]] {
            let mut values: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919) % 1000) as f32 / 97.0 - 5.0)
                .collect();
            values[..special.len().min(rows * cols)]
                .copy_from_slice(&special[..special.len().min(rows * cols)]);
            let tensor = Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), &device);
            // And the same values as a transposed (non-contiguous) view.
            let transposed =
                Tensor::<2>::from_data(tensor.clone().transpose().into_data(), &device).transpose();
            for tensor in [tensor, transposed] {
                let qparams = compute_q_params(
                    &scheme,
                    compute_range(&scheme, &tensor, &Calibration::MinMax),
                );
                assert!(
                    int8_scales(&tensor, &scheme, &qparams.scales).is_some(),
                    "[{rows}, {cols}] takes the fast path"
                );
                let burns = tensor.clone().quantize(&scheme, qparams).into_data();
                let ours = quantize_int8(tensor, &scheme).into_data();
                assert_eq!(ours.dtype(), burns.dtype(), "[{rows}, {cols}]");
                assert_eq!(ours.shape(), burns.shape(), "[{rows}, {cols}]");
                assert_eq!(ours.as_bytes(), burns.as_bytes(), "[{rows}, {cols}]");
            }
        }
        // A width that is not whole blocks goes through burn.
        let odd = Tensor::<2>::from_data(TensorData::new(vec![1.0f32; 40], [2, 20]), &device);
        assert!(int8_scales(&odd, &scheme, &Tensor::zeros([2], &device)).is_none());
    }

    /// q4 rounds as burn's own Q4S quantization (values and scales), held
    /// in int8's scheme so every int8 path reads it.
    #[test]
    fn q4_rounding_is_burns_q4s() {
        let device = Device::flex();
        let q4s = QuantScheme::default()
            .with_value(QuantValue::Q4S)
            .with_store(QuantStore::Native)
            .per_block([QUANT_BLOCK], ScaleDtype::F32);
        let decoded = |data: TensorData| {
            let DType::QFloat(scheme) = data.dtype() else {
                panic!("{:?}", data.dtype())
            };
            let shape = data.shape().clone();
            QuantizedBytes {
                bytes: data.into_bytes(),
                scheme,
                shape,
            }
            .into_vec_i8()
        };
        let mut special = vec![0.0f32; 32]; // a zero block
        // Scale 1 (the block's largest magnitude is 7): ties at every half.
        special.extend((0..32).map(|i| if i == 0 { 7.0 } else { (i % 15) as f32 - 7.5 }));
        for [rows, cols] in [[2, 32], [37, 64], [8, 96]] {
            let mut values: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919) % 1000) as f32 / 97.0 - 5.0)
                .collect();
            values[..special.len()].copy_from_slice(&special);
            let tensor = Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), &device);
            let qparams =
                compute_q_params(&q4s, compute_range(&q4s, &tensor, &Calibration::MinMax));
            let (burn_values, burn_scales) =
                decoded(tensor.clone().quantize(&q4s, qparams).into_data());
            let ours = quantize_q4(tensor.clone());
            assert_eq!(ours.dtype(), DType::QFloat(int8_scheme()));
            let (values, scales) = decoded(ours.clone().into_data());
            assert_eq!(values, burn_values, "[{rows}, {cols}]");
            assert_eq!(scales.block, burn_scales.block, "[{rows}, {cols}]");
            assert!(values.iter().all(|v| (-7..=7).contains(v)));
            // Read back as any int8 weight is.
            let dequantized = int8_values(&ours).unwrap();
            assert_eq!(dequantized[32 + 3], values[32 + 3] as f32 * scales.block[1]);
        }
    }

    #[test]
    fn round_to_int8_is_burns_rounding() {
        let (a, b) = int8_scheme().value.range();
        let burns = |x: f32| x.round().clamp(a, b) as i8;
        let mut t = -130.0f32;
        while t <= 130.0 {
            for x in [
                t,
                t + 0.5,
                t.next_up(),
                (t + 0.5).next_down(),
                (t + 0.5).next_up(),
            ] {
                assert_eq!(round_to_int8(x, a, b), burns(x), "{x}");
            }
            t += 0.25;
        }
        for x in [
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            1e30,
            -1e30,
            -0.4,
            -0.0,
        ] {
            assert_eq!(round_to_int8(x, a, b), burns(x), "{x}");
        }
    }
}
