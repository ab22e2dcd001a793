//! Adversarial search natively: one WMT21 segment of about 30 words attacked
//! with chrF and DeepWordBug (budget 500 queries; the bar: under a
//! second), and with MiniLM-BERTScore (budget 150), reported per search and
//! as queries per second.
//!
//! `cargo bench --bench attack`.

use std::rc::Rc;

use blindspot::data::{Item, load_wmt};
use blindspot::metrics::engine::EngineError;
use blindspot::metrics::{Engine, MetricSpec, ModelSlot, ModelStore, Settings};
use blindspot::models::{ModelFiles, Plm, Precision};
use blindspot::stress::attack::{Attack, AttackConfig, AttackTools, Goal, Strategy, ZNorm, z_norm};
use burn::tensor::Device;
use criterion::{Criterion, criterion_group};
use futures::executor::block_on;

// The CLI's allocator (src/main.rs), so passes here run as they do there
// (with its settings: `main` below).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct MiniLm(Rc<Plm>);

impl ModelStore for MiniLm {
    fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Ok(self.0.clone())
    }
}

fn items() -> Vec<Item> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wmt21_de_en.jsonl");
    let mut items = load_wmt(&std::fs::read_to_string(path).expect("shared data")).rows;
    items.truncate(100);
    items
}

/// One search to its end; returns the queries it used.
fn attack(
    engine: &Engine,
    spec: &MetricSpec,
    config: &AttackConfig,
    z: ZNorm,
    item: &Item,
) -> usize {
    let tools = AttackTools::default();
    let refs: Vec<&str> = item.refs.iter().map(String::as_str).collect();
    block_on(async {
        let mut a = Attack::new(engine, spec, config, &tools, z, &item.gold, &refs, None)
            .await
            .expect("starts");
        while !a.step().await.expect("steps") {}
        a.outcome(0, &item.id).queries
    })
}

fn bench_attack(c: &mut Criterion) {
    let items = items();
    // The first segment of 28 to 32 words.
    let item = items
        .iter()
        .find(|i| (28..=32).contains(&i.gold.split_whitespace().count()))
        .expect("a 30-word segment")
        .clone();
    let mut group = c.benchmark_group("attack");
    group.sample_size(10);

    let spec = Settings::default()
        .specs(&["chrf"])
        .expect("chrf")
        .remove(0);
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    config.budget = 500;
    // Never met, so the search uses the whole budget or runs out of edits.
    config.threshold = 1e9;
    let lexical = Engine::lexical();
    let z = block_on(z_norm(&lexical, &spec, &items)).expect("z");
    let queries = attack(&lexical, &spec, &config, z, &item);
    eprintln!("chrf deepwordbug: {queries} queries per search");
    group.bench_function("chrf-deepwordbug-500", |b| {
        b.iter(|| attack(&lexical, &spec, &config, z, &item))
    });

    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/all-MiniLM-L6-v2");
    let plm = Plm::load(
        "all-MiniLM-L6-v2",
        ModelFiles::from_path(dir.as_ref()).expect("MiniLM (scripts/fetch_models.py)"),
        &Device::flex(),
        Precision::F32,
    )
    .expect("loads");
    let engine = Engine::new(MiniLm(Rc::new(plm)));
    let spec = Settings::default()
        .specs(&["bertscore-f"])
        .expect("bertscore")
        .remove(0);
    config.budget = 150;
    let z = block_on(z_norm(&engine, &spec, &items[..20])).expect("z");
    let queries = attack(&engine, &spec, &config, z, &item);
    eprintln!("bertscore-f deepwordbug: {queries} queries per search");
    group.bench_function("bertscore-minilm-deepwordbug-150", |b| {
        b.iter(|| attack(&engine, &spec, &config, z, &item))
    });
    group.finish();
}

criterion_group!(benches, bench_attack);

// criterion_main!, with the CLI's allocator settings first.
fn main() {
    blindspot::allocator::keep_freed_pages();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
