//! Rule-based injection throughput on WMT21 sentences (`../shared/data`).
//!
//! `cargo bench --bench inject`: each iteration applies every registered
//! injection (the masked-LM ones need a model) at its first default level to
//! 200 single sentences.

use blindspot::inject::{Context, apply, registry};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn sentences() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/wmt21_de_en.jsonl"
    );
    std::fs::read_to_string(path)
        .expect("../shared/data/wmt21_de_en.jsonl is readable")
        .lines()
        .take(200)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["ref_a"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn bench_injections(c: &mut Criterion) {
    let texts = sentences();
    let samples: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ctx = Context {
        source: Some("Der Zug hatte zwei Stunden Verspätung."),
        samples: &samples[..20],
        masked_lm: None,
    };
    let injections: Vec<_> = registry()
        .into_iter()
        .filter(|i| !i.info().needs_masked_lm)
        .collect();
    let mut group = c.benchmark_group("inject");
    group.throughput(Throughput::Elements(
        (texts.len() * injections.len()) as u64,
    ));
    group.bench_function("all_rule_based_200_sentences", |b| {
        b.iter(|| {
            for inj in &injections {
                let level = inj.info().default_levels[0];
                for (seed, text) in texts.iter().enumerate() {
                    std::hint::black_box(apply(*inj, text, level, seed as u64, &ctx).unwrap());
                }
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench_injections);
criterion_main!(benches);
