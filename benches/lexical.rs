//! Lexical metric throughput on real WMT21 pairs (`tests/data`).
//!
//! `cargo bench --bench lexical`. The playground re-scores one pair per
//! keystroke, so the per-pair cost of each metric is what matters; a pasted
//! document makes that pair long, so one group scores WMT21's 1000 segments
//! joined into a single pair of about 18k words a side.

use blindspot::metrics::{Segment, create, registry};
use criterion::{Criterion, criterion_group, criterion_main};

fn load_pairs(n: usize) -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wmt21_de_en.jsonl");
    let text = std::fs::read_to_string(path).expect("tests/data/wmt21_de_en.jsonl is readable");
    text.lines()
        .take(n)
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).expect("valid JSONL");
            (
                row["ref_a"].as_str().unwrap().to_string(),
                row["ref_b"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn bench_sentence(c: &mut Criterion) {
    let pairs = load_pairs(200);
    let mut group = c.benchmark_group("sentence_200_pairs");
    for info in registry().into_iter().filter(|i| i.model.is_none()) {
        let metric = create(info.id, false).unwrap();
        group.bench_function(info.id, |b| {
            b.iter(|| {
                for (hyp, reference) in &pairs {
                    let refs = [reference.as_str()];
                    let seg = Segment {
                        hyp,
                        refs: &refs,
                        src: None,
                    };
                    std::hint::black_box(metric.sentence_score(&seg).unwrap());
                }
            })
        });
    }
    group.finish();
}

fn bench_document(c: &mut Criterion) {
    let pairs = load_pairs(1000);
    let hyp = pairs
        .iter()
        .map(|p| p.0.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let reference = pairs
        .iter()
        .map(|p| p.1.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let refs = [reference.as_str()];
    let seg = Segment {
        hyp: &hyp,
        refs: &refs,
        src: None,
    };
    let mut group = c.benchmark_group("document_1000_segments");
    group.sample_size(10);
    for info in registry().into_iter().filter(|i| i.model.is_none()) {
        let metric = create(info.id, false).unwrap();
        group.bench_function(info.id, |b| {
            b.iter(|| std::hint::black_box(metric.sentence_score(&seg).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_sentence, bench_document);
criterion_main!(benches);
