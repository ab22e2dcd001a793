//! An LLM judge on a keystroke: G-Eval's fluency prompt (about 300 tokens
//! through the chat template) scored from scratch, and with the prompt's
//! start read before (`Plm::next_token_logits` keeps its keys and values),
//! as when the summary's last word changes.
//!
//! The judge is `BLINDSPOT_JUDGE_MODEL` (a folder: a Llama or Qwen with its
//! tokenizer_config.json), by default the tiny random Qwen2 of the tests;
//! `scripts/judge_bench_model.py` writes a random SmolLM2-135M-shaped one.
//! `cargo bench --bench judge`.

use blindspot::metrics::geval::{Dimension, Role, judge_input, prompt};
use blindspot::models::{ModelFiles, Plm, Precision};
use burn::tensor::Device;
use criterion::{Criterion, criterion_group};
use futures::executor::block_on;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SUMMARY: &str = "Harwick's council will close the Mill Street pool after the summer and build a \
    new pool next to the secondary school; repairs would have cost more than three years of the \
    town's sport budget, and until the new pool opens a weekly bus will take swimmers to the \
    neighbouring town. The new pool should open in two years, and the council will pay for the bus";

fn bench_keystroke(c: &mut Criterion) {
    let dir = std::env::var("BLINDSPOT_JUDGE_MODEL").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/llm/qwen2").to_owned()
    });
    let load = || {
        Plm::load(
            "judge",
            ModelFiles::from_path(dir.as_ref()).unwrap(),
            &Device::flex(),
            Precision::F32,
        )
        .unwrap()
    };
    let (fresh, cached) = (load(), load());
    let input = |summary: &str| {
        judge_input(
            &fresh,
            &prompt(Dimension::Fluency, "", summary),
            Role::User,
            true,
        )
        .unwrap()
        .0
    };
    // Two texts that differ in the summary's last word.
    let (a, b) = (
        input(&format!("{SUMMARY}.")),
        input(&format!("{SUMMARY}es.")),
    );
    eprintln!("judge prompt: {} tokens", b.len());
    let mut group = c.benchmark_group("judge-keystroke");
    group.sample_size(10);
    group.bench_function("full prompt", |bench| {
        bench.iter(|| {
            // A cleared cache: every token of the prompt runs.
            fresh.prefix.lock().unwrap().clear();
            block_on(fresh.next_token_logits(&b)).unwrap()
        })
    });
    // Each iteration one keystroke: only the other text's start is in the
    // cache (the model keeps several texts; the older ones are dropped here).
    let mut flip = false;
    block_on(cached.next_token_logits(&a)).unwrap();
    group.bench_function("prompt start reused", |bench| {
        bench.iter(|| {
            flip = !flip;
            cached.prefix.lock().unwrap().truncate(1);
            block_on(cached.next_token_logits(if flip { &b } else { &a })).unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_keystroke);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
