//! A loaded network's projection weights packed once for the CPU's
//! products: int8 ones as integer products (the browser), f32 ones in
//! rten-gemm's panels (natively).

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::{DType, Device, Tensor};
use burn_flex::FlexTensor;

use super::quant::{PROJECTIONS, int8_values, weight_owner};
use crate::models::dense::{PackedWeights, primitive};

/// Whether [`Plm::load`] gives an int8 model on the CPU integer products:
/// in the browser, where they are 2.2-2.8x faster than f32 ones (simd128
/// has a 16-bit dot product and no fused multiply-add). Natively the f32
/// products (gemm's AVX-512 or AVX2 kernels, on every core) stay.
pub const INTEGER_PRODUCTS: bool = cfg!(target_arch = "wasm32");

/// Whether [`Plm::load`] packs an f32 model's projections on the CPU into
/// rten-gemm's panels once ([`PackedWeights::add_panels`]): natively, where
/// every product otherwise copies its weight into panels first. In the
/// browser the products read dense weights in place.
pub const F32_PANELS: bool = cfg!(not(target_arch = "wasm32"));

/// Finds a module's projection weights to pack: int8 ones for integer
/// products, and f32 ones on the CPU for rten-gemm's panels when `panels`.
struct Packer<'a> {
    path: Vec<String>,
    packed: &'a mut PackedWeights,
    panels: bool,
    f32_weights: Vec<(ParamId, FlexTensor)>,
}

impl ModuleVisitor for Packer<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let projection = PROJECTIONS.contains(&weight_owner(&self.path));
        let weight = param.val();
        if !projection || D != 2 {
            return;
        }
        if matches!(weight.dtype(), DType::QFloat(_)) {
            let dims = weight.dims();
            let values = int8_values(&weight).unwrap_or_else(|| {
                weight
                    .dequantize()
                    .into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .expect("f32 after convert")
            });
            self.packed
                .add_integer(param.id, &values, dims[0], dims[D - 1]);
        } else if self.panels && weight.dtype() == DType::F32 && weight.device() == Device::flex() {
            self.f32_weights.push((param.id, primitive(weight)));
        }
    }
}

/// Packs every int8 projection of `module` for integer products, and then
/// its head tied to the embedding table `tied` when that is an f32 table on
/// the CPU; with `panels`, every f32 projection on the CPU into rten-gemm's
/// panels: they run while the value this returns lives.
pub(crate) fn packed_weights<M: Module>(
    module: &M,
    panels: bool,
    tied: Option<&Param<Tensor<2>>>,
) -> PackedWeights {
    let mut packed = PackedWeights::default();
    let mut packer = Packer {
        path: Vec::new(),
        packed: &mut packed,
        panels,
        f32_weights: Vec::new(),
    };
    module.visit(&mut packer);
    let f32_weights = packer.f32_weights;
    packed.add_panels(f32_weights);
    if let Some(table) = tied
        && packed.integers() > 0
    {
        let t = table.val();
        if t.device() == Device::flex() && t.dtype() == DType::F32 {
            packed.add_tied_head(table.id, primitive(t));
        }
    }
    packed
}
