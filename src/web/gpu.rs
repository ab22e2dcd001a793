//! The browser's WebGPU device, initialised once through burn-wgpu, and a
//! self-test that proves the path works before any model relies on it.

use std::cell::RefCell;

use burn::tensor::{Device, Tensor, TensorData};
use futures::FutureExt;
use futures::future::{LocalBoxFuture, Shared};
use serde::Serialize;

type DeviceInit = Shared<LocalBoxFuture<'static, Result<Device, String>>>;

thread_local! {
    /// The one device initialisation: in flight, done, or failed.
    static WEBGPU: RefCell<Option<DeviceInit>> = const { RefCell::new(None) };
}

/// The shared WebGPU device. `init_async` runs once: callers that arrive while
/// it is in flight await the same future (a second `init_async` fails with "a
/// server is still registered"), and later calls get the device or the same
/// failure.
pub async fn webgpu_device() -> Result<Device, String> {
    let init = WEBGPU.with(|cell| {
        cell.borrow_mut()
            .get_or_insert_with(|| {
                async {
                    Device::wgpu_options()
                        .init_async()
                        .await
                        .map_err(|e| format!("WebGPU unavailable: {e}"))
                }
                .boxed_local()
                .shared()
            })
            .clone()
    });
    init.await
}

/// Outcome of [`matmul_self_test`].
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelfTestReport {
    /// True when WebGPU and CPU agree within [`TOLERANCE`].
    pub ok: bool,
    /// Largest absolute difference between WebGPU and the CPU reference.
    pub max_abs_diff: f32,
    /// `[m, k, n]` of the product.
    pub shape: [usize; 3],
    /// A few entries of the WebGPU result, for display.
    pub sample: Vec<f32>,
}

/// f32 sums over k = 96 terms of magnitude <= 1: 1e-4 leaves room for a
/// different summation order on the GPU and nothing more.
pub const TOLERANCE: f32 = 1e-4;

fn matrix(rows: usize, cols: usize, salt: usize) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| (((i * 7 + salt * 13) % 23) as f32 - 11.0) / 11.0)
        .collect()
}

/// Multiplies a 37x96 by a 96x29 matrix on WebGPU and compares every entry
/// with a plain CPU product. Reads back with `into_data_async` (synchronous
/// reads are not possible on WebGPU).
pub async fn matmul_self_test() -> Result<SelfTestReport, String> {
    let (m, k, n) = (37, 96, 29);
    let (a, b) = (matrix(m, k, 1), matrix(k, n, 2));
    let device = webgpu_device().await?;
    let ta = Tensor::<2>::from_data(TensorData::new(a.clone(), [m, k]), &device);
    let tb = Tensor::<2>::from_data(TensorData::new(b.clone(), [k, n]), &device);
    let data = ta
        .matmul(tb)
        .into_data_async()
        .await
        .map_err(|e| format!("WebGPU readback failed: {e:?}"))?;
    let gpu: Vec<f32> = data
        .try_into_vec::<f32>()
        .map_err(|e| format!("unexpected WebGPU result type: {e:?}"))?;
    let mut max_abs_diff = 0.0f32;
    for i in 0..m {
        for j in 0..n {
            let cpu: f32 = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
            max_abs_diff = max_abs_diff.max((cpu - gpu[i * n + j]).abs());
        }
    }
    Ok(SelfTestReport {
        ok: max_abs_diff <= TOLERANCE,
        max_abs_diff,
        shape: [m, k, n],
        sample: gpu[..4].to_vec(),
    })
}
