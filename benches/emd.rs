//! MoverScore's exact Earth mover's distance (`microlp`'s simplex) by size:
//! a sentence pair has 20-40 weighted tokens a side, a summary against its
//! reference 100-200, a document-length pair up to 510.
//!
//! `cargo bench --bench emd`.

use blindspot::metrics::moverscore::emd;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};

fn problem(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let uniform = vec![1.0 / n as f64; n];
    // Costs like MoverScore's: distances between unit vectors, 0.2 to 1.4.
    let cost = (0..n * n)
        .map(|_| 0.2 + 1.2 * rng.random::<f64>())
        .collect();
    (uniform.clone(), uniform, cost)
}

fn bench_emd(c: &mut Criterion) {
    let mut group = c.benchmark_group("emd");
    group.sample_size(10);
    for n in [20, 40, 100, 200] {
        let (a, b, cost) = problem(n, n as u64);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |bench, _| {
            bench.iter(|| emd(&a, &b, &cost).expect("solves"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_emd);
criterion_main!(benches);
