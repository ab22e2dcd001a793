//! Reading checkpoint weights into a module tree: safetensors (one file or
//! shards) through burn-store with PyTorch's layout adapted, PyTorch
//! pickles natively, and prepared `.bpk` files, each renamed through the
//! family's key map ([`Architecture::key_map`]).

use burn::module::Module;
use burn::store::burn_pack::Bytes;
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{
    BurnpackStore, FloatCastAdapter, KeyRemapper, ModuleAdapter, ModuleContext, ModuleSnapshot,
    PyTorchToBurnAdapter, SafetensorsStore, bridge,
};
use burn::tensor::{DType, Shape, TensorData};

use super::WeightSource;
use crate::models::network::Architecture;
use crate::models::{ModelConfig, ModelError};

/// Loads the weights of `source` into `module`, renaming the checkpoint's
/// keys with its family's key map.
pub(crate) fn load<A: Architecture>(
    module: &mut A,
    source: WeightSource,
    config: &ModelConfig,
) -> Result<(), ModelError> {
    match source {
        WeightSource::Safetensors(shards) => {
            let names: Vec<String> = shards
                .iter()
                .filter_map(|s| safetensors::SafeTensors::deserialize(s).ok())
                .flat_map(|st| {
                    st.names()
                        .into_iter()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect();
            load_safetensors(module, shards, &A::key_map(config, Some(&names)))
        }
        #[cfg(not(target_arch = "wasm32"))]
        WeightSource::Torch {
            path,
            state_dict_key,
        } => load_torch(module, &path, state_dict_key, &A::key_map(config, None)),
        WeightSource::Burnpack(bytes) => load_burnpack(module, bytes),
    }
}

/// Loads the network part of a prepared `.bpk` file (its paths are the
/// module tree's own).
fn load_burnpack<M: Module + ModuleSnapshot>(
    module: &mut M,
    bytes: Vec<u8>,
) -> Result<(), ModelError> {
    let mut store = BurnpackStore::from_bytes(Some(Bytes::from_bytes_vec(bytes)));
    let result = module
        .load_from(&mut store)
        .map_err(|e| ModelError::Weights(format!("prepared model: {e}")))?;
    if let Some(e) = result.errors.first() {
        return Err(ModelError::Weights(format!("prepared model: {e}")));
    }
    if let Some((p, _)) = result.missing.first() {
        return Err(ModelError::Weights(format!("prepared model lacks `{p}`")));
    }
    Ok(())
}

fn remapper(pairs: &[(impl AsRef<str>, impl AsRef<str>)]) -> KeyRemapper {
    pairs.iter().fold(KeyRemapper::new(), |r, (from, to)| {
        r.add_pattern(from.as_ref(), to.as_ref())
            .expect("key map patterns are valid regexes")
    })
}

/// Loads a PyTorch checkpoint's state dict (under `state_dict_key` when
/// given) into `module`, renaming keys with `key_map`.
#[cfg(not(target_arch = "wasm32"))]
fn load_torch<M: Module + ModuleSnapshot>(
    module: &mut M,
    path: &std::path::Path,
    state_dict_key: Option<&str>,
    key_map: &[(impl AsRef<str>, impl AsRef<str>)],
) -> Result<(), ModelError> {
    let mut store = burn::store::PytorchStore::from_file(path);
    if let Some(key) = state_dict_key {
        store = store.with_top_level_key(key);
    }
    let mut store = store
        .map_indices_contiguous(false)
        .remap(remapper(key_map))
        .allow_partial(true);
    let result = module.load_from(&mut store).map_err(|e| {
        ModelError::Weights(format!(
            "{}: {e} (is it a PyTorch checkpoint{}?)",
            path.display(),
            state_dict_key
                .map(|k| format!(" with a {k}"))
                .unwrap_or_default()
        ))
    })?;
    if let Some(e) = result.errors.first() {
        return Err(ModelError::Weights(e.to_string()));
    }
    if let Some((p, _)) = result.missing.first() {
        return Err(ModelError::Weights(format!(
            "{} tensors missing from the checkpoint, e.g. `{p}` (does config.json{} belong \
             to this checkpoint?)",
            result.missing.len(),
            if state_dict_key.is_some() {
                " (and hparams.yaml)"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

fn adapter() -> impl ModuleAdapter + 'static {
    TorchLayout.chain(FloatCastAdapter::to(DType::F32))
}

/// PyTorch's layout to burn's, as [`PyTorchToBurnAdapter`] does (norms'
/// `weight`/`bias` are burn's `gamma`/`beta`; a linear weight `[out, in]` is
/// burn's `[in, out]`), with the linear weights transposed and cast to f32
/// in one pass (the `transpose` crate's cache-blocked loops). burn-store's
/// own transpose copies one element at a time through byte slices into a
/// buffer it then copies again for alignment: loading roberta-large's shape
/// (1.3 GB) spent about 70% of its 4 s there.
#[derive(Clone)]
struct TorchLayout;

impl ModuleAdapter for TorchLayout {
    fn adapt(&self, tensor: PackTensor, ctx: ModuleContext<'_>) -> PackTensor {
        let linear_weight = ctx.module_type() == Some("Struct:Linear")
            && tensor.name.rsplit('.').next() == Some("weight")
            && tensor.shape.len() == 2
            && tensor.dtype.is_float();
        if !linear_weight {
            return PyTorchToBurnAdapter.adapt(tensor, ctx);
        }
        let (rows, cols) = (tensor.shape[0], tensor.shape[1]);
        let name = tensor.name.clone();
        bridge::map_data(
            tensor,
            name,
            DType::F32,
            Shape::from([cols, rows]),
            move |data| {
                let values = match data.as_slice::<f32>() {
                    Ok(values) => transpose(values, rows, cols),
                    // f16 / bf16 / f64 checkpoints, cast on the way.
                    Err(_) => transpose(&data.iter::<f32>().collect::<Vec<_>>(), rows, cols),
                };
                TensorData::new(values, [cols, rows])
            },
        )
    }

    fn get_alternative_param_name(&self, param_name: &str, module_type: &str) -> Option<String> {
        PyTorchToBurnAdapter.get_alternative_param_name(param_name, module_type)
    }

    fn clone_box(&self) -> Box<dyn ModuleAdapter> {
        Box::new(self.clone())
    }
}

/// The transpose of a row-major `rows × cols` matrix.
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    transpose::transpose(values, &mut out, cols, rows);
    out
}

/// Loads safetensors shards into `module`, renaming keys with `key_map`.
/// Fails when a tensor the module needs is in no shard, has another shape,
/// or a shard is not safetensors.
pub fn load_safetensors<M: Module + ModuleSnapshot>(
    module: &mut M,
    shards: Vec<Vec<u8>>,
    key_map: &[(impl AsRef<str>, impl AsRef<str>)],
) -> Result<(), ModelError> {
    let mut missing: Option<Vec<String>> = None;
    for (i, shard) in shards.into_iter().enumerate() {
        if safetensors::SafeTensors::deserialize(&shard).is_err() {
            return Err(ModelError::Weights(format!(
                "weight file {} is not a safetensors file (truncated download or wrong file?)",
                i + 1
            )));
        }
        let mut store = SafetensorsStore::from_bytes(Some(shard))
            .with_from_adapter(adapter())
            .remap(remapper(key_map))
            .allow_partial(true);
        let result = module
            .load_from(&mut store)
            .map_err(|e| ModelError::Weights(e.to_string()))?;
        if let Some(e) = result.errors.first() {
            return Err(ModelError::Weights(format!(
                "{e}{}",
                if result.errors.len() > 1 {
                    format!(" (and {} more)", result.errors.len() - 1)
                } else {
                    String::new()
                }
            )));
        }
        let now: Vec<String> = result.missing.into_iter().map(|(p, _)| p).collect();
        missing = Some(match missing {
            None => now,
            Some(before) => before.into_iter().filter(|p| now.contains(p)).collect(),
        });
    }
    match missing {
        None => Err(ModelError::Weights("no weight files".into())),
        Some(m) if !m.is_empty() => Err(ModelError::Weights(format!(
            "{} tensors missing from the checkpoint, e.g. `{}` (is it the architecture config.json names?)",
            m.len(),
            m[0]
        ))),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::Param;
    use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
    use burn::tensor::{Device, Tensor};
    use safetensors::{Dtype, tensor::TensorView};

    #[derive(Module, Debug)]
    struct Toy {
        dense: Linear,
        norm: LayerNorm,
    }

    /// A checkpoint of `Toy` in PyTorch's layout: `dense.weight` is
    /// `[out = 37, in = 70]` with value `(r * 70 + c) % 2000` at `(r, c)`.
    fn checkpoint(dtype: Dtype) -> Vec<u8> {
        let encode = |values: &[f32]| -> Vec<u8> {
            match dtype {
                Dtype::F16 => values
                    .iter()
                    .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                    .collect(),
                _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            }
        };
        // Integers below 2048 are exact in f16.
        let weight: Vec<f32> = (0..37 * 70).map(|i| (i % 2000) as f32).collect();
        let tensors = [
            ("dense.weight", vec![37, 70], encode(&weight)),
            ("dense.bias", vec![37], encode(&[0.5; 37])),
            ("norm.weight", vec![37], encode(&[2.0; 37])),
            ("norm.bias", vec![37], encode(&[-1.0; 37])),
        ];
        let views: Vec<(&str, TensorView)> = tensors
            .iter()
            .map(|(name, shape, bytes)| {
                (*name, TensorView::new(dtype, shape.clone(), bytes).unwrap())
            })
            .collect();
        safetensors::serialize(views, None).unwrap()
    }

    #[test]
    fn linear_weights_arrive_transposed_and_norms_renamed() {
        let device = Device::flex();
        for dtype in [Dtype::F32, Dtype::F16] {
            let mut toy = Toy {
                dense: LinearConfig::new(70, 37).init(&device),
                norm: LayerNormConfig::new(37).init(&device),
            };
            load_safetensors(&mut toy, vec![checkpoint(dtype)], &[] as &[(&str, &str)]).unwrap();
            let weight = toy.dense.weight.val();
            assert_eq!(weight.dims(), [70, 37]);
            assert_eq!(weight.dtype(), DType::F32);
            let got = weight.into_data().try_to_vec::<f32>().unwrap();
            for c in 0..70 {
                for r in 0..37 {
                    assert_eq!(
                        got[c * 37 + r],
                        ((r * 70 + c) % 2000) as f32,
                        "{dtype:?} ({r}, {c})"
                    );
                }
            }
            let values = |p: Param<Tensor<1>>| p.val().into_data().try_to_vec::<f32>().unwrap();
            let gamma = values(toy.norm.gamma);
            let beta = values(toy.norm.beta.unwrap());
            let bias = values(toy.dense.bias.unwrap());
            assert!(gamma.iter().all(|v| *v == 2.0), "{dtype:?}");
            assert!(beta.iter().all(|v| *v == -1.0), "{dtype:?}");
            assert!(bias.iter().all(|v| *v == 0.5), "{dtype:?}");
        }
    }

    #[test]
    fn transpose_matches_its_definition() {
        for (rows, cols) in [(1, 1), (1, 33), (33, 1), (31, 65), (64, 64), (70, 37)] {
            let values: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let out = transpose(&values, rows, cols);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(out[c * rows + r], values[r * cols + c]);
                }
            }
        }
    }
}
