//! Encoder passes on a real GPU (burn-wgpu, natively through Vulkan) against
//! the CPU (burn-flex, all cores) in the same process: all-MiniLM-L6-v2's
//! shape and roberta-large's, random weights (timing does not depend on
//! them), 30 tokens, batch 1 (a keystroke) and 32 (a suite), every hidden
//! state computed and the last one read back, as a metric does.
//!
//! ```sh
//! cargo bench --features gpu --bench gpu                # burn's autotune on (the CLI's build)
//! cargo bench --features gpu-wgpu --bench gpu           # autotune and fusion off
//! cargo bench --features gpu-fusion --bench gpu         # burn's fusion on, autotune off
//! BLINDSPOT_GPU_BUILD=spirv cargo bench --features gpu-wgpu,burn/vulkan --bench gpu
//! BLINDSPOT_GPU_DTYPE=f16 cargo bench --features gpu --bench gpu   # f16 compute on the GPU
//! BLINDSPOT_GPU_INT8=1 cargo bench --features gpu --bench gpu       # int8 weights kept int8
//! cargo bench --features gpu --bench gpu -- gpu_                   # the GPU rows only
//! ```
//!
//! Before timing, each model's GPU pass is compared with the CPU's on the
//! same weights and tokens (largest absolute difference of the last hidden
//! state, and of BERTScore's F1 computed from those states, printed
//! as `parity`), so a fused or f16 pass that disagrees shows beside its time.
//! `scripts/bench_gpu_torch.py` times PyTorch on the same shapes and batches
//! for the ratios in BENCHMARKS.md.
//!
//! With `BLINDSPOT_GPU_MODEL=PATH` (a checkpoint folder or a prepared `.bpk`,
//! such as `blindspot prepare models/all-MiniLM-L6-v2 minilm.bpk --quant q8`),
//! the engine's own BERTScore of the 16 pairs in `src/data/sample.jsonl` runs
//! with that model on the CPU and on the GPU at the chosen dtype: the largest
//! F1 difference is printed (`parity bertscore`) and the GPU's call is timed.
//!
//! With `BLINDSPOT_CPU_THREADS=1,2,4,8,16` only the CPU runs, no GPU needed:
//! both shapes at batch 32 in rayon pools of those sizes (burn-flex's and
//! rten-gemm's threads), to see where the passes stop scaling with cores;
//! `scripts/bench_gpu_torch.py` reads the same variable for PyTorch's CPU.
//! With `BLINDSPOT_CPU_PARTS=1` as well, the parts of one layer instead of
//! whole passes (`bench_layer_parts`).
//!
//! The CPU rows run as the engine loads a model natively: every projection's
//! weight packed once into rten-gemm's panels (`Network::packed_weights`).
//! `BLINDSPOT_CPU_PANELS=0` leaves them unpacked, so each product copies its
//! weight into panels first (the engine before 2026-11-27): one build times
//! both. Their row names say which (`cpu_flex` / `cpu_flex_unpacked`; with
//! `BLINDSPOT_GPU_INT8=1`, `cpu_flex_int8`: burn's quantized matmul).

use blindspot::metrics::bertscore::{self, TokenEmbeddings, Weights};
use blindspot::models::bert::BertModel;
use blindspot::models::dense::{self, PackedWeights, Project};
use blindspot::models::norm::add_norm;
use blindspot::models::weights::{F32_PANELS, cast_floats};
use blindspot::models::{Batch, ModelConfig, ModelFiles, Network, Plm, read_back_blocking};
use burn::module::Module;
use burn::tensor::{Device, FloatDType};
use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group};
use std::hint::black_box;
use std::time::Duration;

// The CLI's allocator (src/main.rs), so the CPU rows run as the CLI does (the
// BENCHMARKS.md's GPU tables before 2026-11-26 ran their CPU rows on glibc's malloc),
// with its settings (`main` below).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// all-MiniLM-L6-v2's config.json, as far as the encoder's shape goes.
const MINILM: &str = r#"{"model_type": "bert", "architectures": ["BertModel"],
  "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
  "intermediate_size": 1536, "vocab_size": 30522, "max_position_embeddings": 512,
  "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0, "hidden_act": "gelu"}"#;

/// roberta-large's config.json (BERTScore's default English model).
const ROBERTA_LARGE: &str = r#"{"model_type": "roberta", "architectures": ["RobertaModel"],
  "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
  "intermediate_size": 4096, "vocab_size": 50265, "max_position_embeddings": 514,
  "type_vocab_size": 1, "layer_norm_eps": 1e-5, "pad_token_id": 1, "hidden_act": "gelu"}"#;

const TOKENS: usize = 30;

/// The GPU, its float dtype set from `BLINDSPOT_GPU_DTYPE` (f32 or f16)
/// before any tensor lives there; initialised once per process.
fn gpu() -> (Device, FloatDType) {
    static GPU: std::sync::OnceLock<(Device, FloatDType)> = std::sync::OnceLock::new();
    GPU.get_or_init(init_gpu).clone()
}

fn init_gpu() -> (Device, FloatDType) {
    let (mut device, setup) = Device::wgpu_options()
        .init_with_setup()
        .unwrap_or_else(|e| panic!("no usable GPU (burn-wgpu): {e}"));
    let info = setup.adapter.get_info();
    println!(
        "adapter: {} ({:?}, driver {} {})",
        info.name, setup.backend, info.driver, info.driver_info
    );
    let dtype = match std::env::var("BLINDSPOT_GPU_DTYPE").as_deref() {
        Ok("f16") => FloatDType::F16,
        Ok("f32") | Err(_) => FloatDType::F32,
        Ok(other) => panic!("BLINDSPOT_GPU_DTYPE={other}: f32 or f16"),
    };
    assert!(
        device.supports_dtype(dtype),
        "this adapter does not compute in {dtype:?}"
    );
    device
        .configure(dtype)
        .unwrap_or_else(|e| panic!("configure {dtype:?}: {e:?}"));
    (device, dtype)
}

/// Which build this is, from the crate features; other burn features given
/// on the command line (`--features gpu-wgpu,burn/vulkan`) are named through
/// `BLINDSPOT_GPU_BUILD`.
fn build_label() -> String {
    std::env::var("BLINDSPOT_GPU_BUILD").unwrap_or_else(|_| {
        match (cfg!(feature = "gpu"), cfg!(feature = "gpu-fusion")) {
            // Both on: the pair burn issue 5257 reports wrong results with.
            (true, true) => "fusion_autotune",
            (true, false) => "autotune",
            (false, true) => "fusion",
            (false, false) => "nofusion",
        }
        .into()
    })
}

/// `batch` sequences of [`TOKENS`] ids: a start token, deterministic
/// ordinary ids, an end token (no padding, as in a batch of equal lengths).
fn sequences(config: &ModelConfig, batch: usize) -> Vec<Vec<u32>> {
    let (start, end) = match config.family {
        blindspot::models::Family::Roberta => (0, 2),
        _ => (101, 102),
    };
    (0..batch)
        .map(|s| {
            let mut ids = vec![start];
            ids.extend((1..TOKENS - 1).map(|i| 1000 + ((s * 7919 + i * 104_729) % 20_000) as u32));
            ids.push(end);
            ids
        })
        .collect()
}

/// `model`'s projections packed for the CPU as `Plm::load` packs them
/// natively, unless `BLINDSPOT_CPU_PANELS=0`, and the CPU rows' name for
/// that: the packings run while the returned value lives.
fn cpu_packing(model: &BertModel, config: &ModelConfig) -> (PackedWeights, &'static str) {
    let panels = match std::env::var("BLINDSPOT_CPU_PANELS").as_deref() {
        Ok("0") => false,
        Ok("1") | Err(_) => F32_PANELS,
        Ok(other) => panic!("BLINDSPOT_CPU_PANELS={other}: 1 (as the engine loads) or 0"),
    };
    // A clone shares the weights' storage, which is what the panels answer for.
    let packed = Network::Bert(model.clone()).packed_weights(panels);
    // Six projections a layer: query, key, value, output, intermediate, output.
    let want = if panels { 6 * config.num_layers } else { 0 };
    assert_eq!(packed.len(), want, "projections packed");
    (
        packed,
        if panels {
            "cpu_flex"
        } else {
            "cpu_flex_unpacked"
        },
    )
}

fn pass(model: &BertModel, config: &ModelConfig, ids: &[Vec<u32>], device: &Device) -> Vec<f32> {
    let batch = Batch::new(ids, config, device);
    let out = model.forward(&batch);
    let last = out.hidden_states.last().unwrap().clone();
    read_back_blocking(last).unwrap().0
}

/// The larger difference, NaN if either is (`f32::max` would drop a NaN).
fn worst(m: f32, d: f32) -> f32 {
    if m.is_nan() || d.is_nan() {
        f32::NAN
    } else {
        m.max(d)
    }
}

/// Sequence `s` of `states` (`[32, TOKENS, hidden]`) as BERTScore's token
/// embeddings, special tokens left out.
fn embeddings(states: &[f32], s: usize, hidden: usize) -> TokenEmbeddings {
    let inner = 1..TOKENS - 1;
    let mut rows =
        states[(s * TOKENS + inner.start) * hidden..(s * TOKENS + inner.end) * hidden].to_vec();
    for row in rows.chunks_exact_mut(hidden) {
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        row.iter_mut().for_each(|v| *v /= norm);
    }
    TokenEmbeddings {
        ids: inner.clone().map(|i| i as u32).collect(),
        spans: inner.map(|_| 0..0).collect(),
        rows,
        width: hidden,
        truncated: false,
    }
}

/// BERTScore F1 (the metric's own greedy matching, uniform weights) of
/// sequence `2p` against `2p + 1`.
fn pair_f1(states: &[f32], p: usize, hidden: usize) -> f64 {
    let (a, b) = (
        embeddings(states, 2 * p, hidden),
        embeddings(states, 2 * p + 1, hidden),
    );
    bertscore::score_pair(&a, &b, &Weights::default()).f
}

fn bench_encoders(c: &mut Criterion) {
    if thread_counts().is_some() {
        return;
    }
    let (gpu, dtype) = gpu();
    let cpu = Device::flex();
    let build = build_label();
    let int8 = std::env::var("BLINDSPOT_GPU_INT8").is_ok_and(|v| v == "1");
    for (name, json) in [("minilm", MINILM), ("roberta_large", ROBERTA_LARGE)] {
        let config = ModelConfig::from_json(json).unwrap();
        let on_cpu = BertModel::new(&config, &cpu);
        // int8: the engine's quantization (linear weights Q8S, one scale per
        // block), rounded on the CPU, the quantized tensors moved as they are,
        // so the GPU runs burn's quantized matmul.
        let on_cpu = if int8 {
            blindspot::models::weights::quantize(on_cpu, blindspot::models::Precision::Int8, false)
        } else {
            on_cpu
        };
        // The int8 rows' CPU pass runs burn's quantized matmul, unpacked.
        let (_packed, cpu_label) = if int8 {
            (PackedWeights::default(), "cpu_flex_int8")
        } else {
            cpu_packing(&on_cpu, &config)
        };
        let mut on_gpu = on_cpu.clone().to_device(&gpu);
        if dtype != FloatDType::F32 {
            on_gpu = cast_floats(on_gpu, dtype);
        }
        let gpu_label = format!("gpu_{dtype:?}{}_{build}", if int8 { "_int8" } else { "" });
        // Parity on batch 32 before any timing.
        let ids = sequences(&config, 32);
        let want = pass(&on_cpu, &config, &ids, &cpu);
        let got = pass(&on_gpu, &config, &ids, &gpu);
        let max_abs = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, worst);
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        println!(
            "parity {name} {gpu_label} vs cpu: max abs diff {max_abs:.3e} \
             (largest |value| {scale:.3})"
        );
        let hidden = config.hidden_size;
        let f1_diff = (0..16)
            .map(|p| (pair_f1(&want, p, hidden) - pair_f1(&got, p, hidden)).abs() as f32)
            .fold(0f32, worst);
        println!(
            "parity {name} {gpu_label}: BERTScore F1 of 16 sequence pairs from these states, \
             max abs difference {f1_diff:.3e}"
        );
        let mut group = c.benchmark_group(format!("{name}_{TOKENS}tok"));
        // Flat sampling: a CPU pass of roberta-large at batch 32 takes about a
        // second, and linear sampling would run it n(n+1)/2 times.
        group
            .sample_size(20)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        for batch in [1usize, 32] {
            let ids = sequences(&config, batch);
            group.bench_function(BenchmarkId::new(&gpu_label, batch), |b| {
                b.iter(|| pass(&on_gpu, &config, &ids, &gpu))
            });
            group.bench_function(BenchmarkId::new(cpu_label, batch), |b| {
                b.iter(|| pass(&on_cpu, &config, &ids, &cpu))
            });
        }
        group.finish();
    }
}

/// Loads `path` on `device` as the engine does (an int8 file at int8, else
/// f32; on a device configured for f16 the engine casts it).
fn load_real(path: &std::path::Path, device: &Device) -> Plm {
    let files = ModelFiles::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let precision = files.stored_precision;
    Plm::load("model", files, device, precision)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The engine's BERTScore (last layer, no idf) of the sample pairs.
fn sample_f1(plm: &Plm, pairs: &[(String, String)]) -> Vec<f64> {
    let hyps: Vec<&str> = pairs.iter().map(|(h, _)| h.as_str()).collect();
    let refs: Vec<Vec<&str>> = pairs.iter().map(|(_, r)| vec![r.as_str()]).collect();
    let layer = plm.config.num_layers;
    let (scores, _) = futures::executor::block_on(bertscore::score_texts(
        plm,
        &hyps,
        &refs,
        layer,
        bertscore::Idf::Off,
        None,
    ))
    .unwrap_or_else(|e| panic!("BERTScore: {e}"));
    scores.iter().map(|s| s.score.f).collect()
}

fn bench_real_model(c: &mut Criterion) {
    if thread_counts().is_some() {
        return;
    }
    let Ok(path) = std::env::var("BLINDSPOT_GPU_MODEL") else {
        return;
    };
    // The real model runs as the engine loads it: int8 kept int8 is the
    // encoder rows' question only.
    if std::env::var("BLINDSPOT_GPU_INT8").is_ok_and(|v| v == "1") {
        return;
    }
    let path = std::path::Path::new(&path);
    let (gpu, dtype) = gpu();
    let build = build_label();
    let pairs: Vec<(String, String)> = include_str!("../src/data/sample.jsonl")
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["hyp"].as_str().unwrap().into(),
                v["ref"].as_str().unwrap().into(),
            )
        })
        .collect();
    let on_cpu = load_real(path, &Device::flex());
    let on_gpu = load_real(path, &gpu);
    let want = sample_f1(&on_cpu, &pairs);
    let got = sample_f1(&on_gpu, &pairs);
    let diff = want
        .iter()
        .zip(&got)
        .map(|(a, b)| (a - b).abs() as f32)
        .fold(0f32, worst);
    let label = format!("gpu_{dtype:?}_{build}");
    println!(
        "parity bertscore {label} vs cpu: {} pairs of src/data/sample.jsonl, {} \
         (last layer, {}), F1 max abs diff {diff:.3e} (cpu F1 {:.4}..{:.4})",
        pairs.len(),
        path.display(),
        on_cpu.config.num_layers,
        want.iter().copied().fold(f64::INFINITY, f64::min),
        want.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let mut group = c.benchmark_group("bertscore_sample16");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function(&label, |b| b.iter(|| sample_f1(&on_gpu, &pairs)));
    group.bench_function("cpu_flex", |b| b.iter(|| sample_f1(&on_cpu, &pairs)));
    group.finish();
}

/// The thread counts of `BLINDSPOT_CPU_THREADS` (comma-separated), if set.
fn thread_counts() -> Option<Vec<usize>> {
    let list = std::env::var("BLINDSPOT_CPU_THREADS").ok()?;
    Some(
        list.split(',')
            .map(|n| match n.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => panic!("BLINDSPOT_CPU_THREADS={list}: thread counts such as 1,2,4,8,16"),
            })
            .collect(),
    )
}

/// The CPU passes at batch 32 in rayon pools of each size in
/// `BLINDSPOT_CPU_THREADS`: every parallel loop of the pass (burn-flex's
/// attention and element-wise ops, rten-gemm's blocks, the GELU chunks) runs
/// in the pool it is installed in.
fn bench_cpu_threads(c: &mut Criterion) {
    let Some(counts) = thread_counts() else {
        return;
    };
    let cpu = Device::flex();
    for (name, json) in [("minilm", MINILM), ("roberta_large", ROBERTA_LARGE)] {
        let config = ModelConfig::from_json(json).unwrap();
        let model = BertModel::new(&config, &cpu);
        let (_packed, label) = cpu_packing(&model, &config);
        let ids = sequences(&config, 32);
        let parts = std::env::var("BLINDSPOT_CPU_PARTS").is_ok_and(|v| v == "1");
        let what = if parts { "_parts" } else { "" };
        let mut group = c.benchmark_group(format!(
            "cpu_threads_{name}_{TOKENS}tok_batch32_{label}{what}"
        ));
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        for &threads in &counts {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a rayon pool");
            if parts {
                bench_layer_parts(&mut group, &model, &config, &ids, threads, &pool);
            } else {
                group.bench_function(BenchmarkId::from_parameter(threads), |b| {
                    b.iter(|| pool.install(|| pass(&model, &config, &ids, &cpu)))
                });
            }
        }
        group.finish();
    }
}

/// With `BLINDSPOT_CPU_PARTS=1` the thread sweep times the parts of one
/// layer instead of whole passes, each from the same input (the embeddings'
/// output of `ids`): `attention` (the four projections and the
/// heads' scores), `attention_projections` (those four alone), `add_norm` (a
/// residual sum and its layer norm), `up_gelu` (the feed-forward up
/// projection and its GELU) and `down` (its down projection). A layer is
/// `attention + up_gelu + down + 2 add_norm`, so the part that stops
/// scaling with threads shows by name.
fn bench_layer_parts(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    model: &BertModel,
    config: &ModelConfig,
    ids: &[Vec<u32>],
    threads: usize,
    pool: &rayon::ThreadPool,
) {
    let cpu = Device::flex();
    let batch = Batch::new(ids, config, &cpu);
    let x = model.forward_layers(&batch, 0).hidden_states.remove(0);
    let layer = &model.layers[0];
    let a = &layer.attention;
    let inner = dense::gelu(layer.intermediate.project(x.clone()));
    // Parts take milliseconds: five of them fit the time of one pass.
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    // burn-flex runs each op when it is called: the values need no read-back.
    let mut time = |part: &str, f: &(dyn Fn() + Sync)| {
        group.bench_function(BenchmarkId::new(part, threads), |b| {
            b.iter(|| pool.install(f))
        });
    };
    time("attention", &|| {
        black_box(a.forward(x.clone(), batch.padding.clone()));
    });
    time("attention_projections", &|| {
        for p in [&a.query, &a.key, &a.value, &a.output] {
            black_box(p.project(x.clone()));
        }
    });
    // A layer writes its sum into the projection's output; here both
    // operands are shared, so `add_norm` copies one first.
    time("add_norm", &|| {
        black_box(add_norm(
            &layer.attention_norm,
            layer.norm_eps,
            x.clone(),
            x.clone(),
        ));
    });
    time("up_gelu", &|| {
        black_box(dense::gelu(layer.intermediate.project(x.clone())));
    });
    time("down", &|| {
        black_box(layer.output.project(inner.clone()));
    });
}

criterion_group!(benches, bench_real_model, bench_encoders, bench_cpu_threads);

// criterion_main!, with the CLI's allocator settings first.
fn main() {
    blindspot::allocator::keep_freed_pages();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
