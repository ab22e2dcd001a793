//! PLM engine throughput: all-MiniLM-L6-v2 forward passes on the CPU
//! (burn-flex), fp32 and int8, batch 1 (a keystroke) and batch 32 (a suite),
//! on WMT21 reference sentences; model load time (fp32, int8 rounded at load,
//! int8 .bpk); and BERTScore throughput (pairs per second) on 64 WMT21
//! system/reference pairs.
//!
//! `cargo bench --bench plm`; `scripts/bench_torch.py` times PyTorch on the
//! same sentences and batches so BENCHMARKS.md can give ratios.

use blindspot::models::{ModelFiles, Plm, Precision, read_back_blocking, weights};
use burn::tensor::Device;
use criterion::{Criterion, criterion_group};

// The CLI's allocator (src/main.rs), so passes here run as they do there
// (with its settings: `main` below).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/all-MiniLM-L6-v2");

fn wmt_rows(n: usize) -> Vec<serde_json::Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wmt21_de_en.jsonl");
    std::fs::read_to_string(path)
        .expect("tests/data/wmt21_de_en.jsonl")
        .lines()
        .take(n)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The first `n` WMT21 segments: (first system's output, ref_a), as
/// scripts/bench_torch.py reads them.
fn pairs(n: usize) -> (Vec<String>, Vec<String>) {
    wmt_rows(n)
        .iter()
        .map(|row| {
            let systems = row["systems"].as_object().unwrap();
            let first = systems.keys().min().unwrap();
            (
                systems[first].as_str().unwrap().to_owned(),
                row["ref_a"].as_str().unwrap().to_owned(),
            )
        })
        .unzip()
}

fn bench_bertscore(c: &mut Criterion) {
    let plm = Plm::load(
        "minilm",
        ModelFiles::from_path(MODEL.as_ref()).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap();
    let (hyps, refs) = pairs(64);
    let hyps: Vec<&str> = hyps.iter().map(String::as_str).collect();
    let refs: Vec<Vec<&str>> = refs.iter().map(|r| vec![r.as_str()]).collect();
    let mut group = c.benchmark_group("bertscore");
    group.sample_size(10);
    group.throughput(criterion::Throughput::Elements(hyps.len() as u64));
    group.bench_function("minilm_l6_64_pairs", |b| {
        b.iter(|| {
            futures::executor::block_on(blindspot::metrics::bertscore::score_set(
                &plm, &hyps, &refs, 6, false,
            ))
            .unwrap()
        })
    });
    group.finish();
}

fn sentences(n: usize) -> Vec<String> {
    wmt_rows(n)
        .iter()
        .map(|row| row["ref_a"].as_str().unwrap().to_owned())
        .collect()
}

fn bench_forward(c: &mut Criterion) {
    let device = Device::flex();
    let texts = sentences(32);
    let mut group = c.benchmark_group("minilm_forward");
    group.sample_size(10);
    for precision in [Precision::F32, Precision::Int8] {
        let plm = Plm::load(
            "minilm",
            ModelFiles::from_path(MODEL.as_ref()).unwrap(),
            &device,
            precision,
        )
        .unwrap();
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| plm.encode(t).unwrap().tokens.iter().map(|t| t.id).collect())
            .collect();
        for batch in [1usize, 32] {
            let name = format!("{precision:?}_batch{batch}");
            group.bench_function(&name, |b| {
                b.iter(|| {
                    let out = plm.forward(&ids[..batch]).unwrap();
                    read_back_blocking(out.hidden_states.last().unwrap().clone()).unwrap()
                })
            });
        }
    }
    group.finish();
}

fn bench_load(c: &mut Criterion) {
    let device = Device::flex();
    let int8 = weights::prepare(
        ModelFiles::from_path(MODEL.as_ref()).unwrap(),
        Precision::Int8,
    )
    .unwrap();
    let mut group = c.benchmark_group("minilm_load");
    group.sample_size(10);
    // int8_safetensors: the page's int8 load without a prepared file, the f32
    // safetensors rounded at load, embedding tables included.
    for (name, precision) in [
        ("f32_safetensors", Precision::F32),
        ("int8_safetensors", Precision::Int8),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                Plm::load(
                    "minilm",
                    ModelFiles::from_path(MODEL.as_ref()).unwrap(),
                    &device,
                    precision,
                )
                .unwrap()
            })
        });
    }
    group.bench_function("int8_bpk", |b| {
        b.iter(|| {
            Plm::load(
                "minilm",
                ModelFiles::from_burnpack(int8.clone()).unwrap(),
                &device,
                Precision::Int8,
            )
            .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_forward, bench_load, bench_bertscore);

// criterion_main!, with the CLI's allocator settings first.
fn main() {
    blindspot::allocator::keep_freed_pages();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
