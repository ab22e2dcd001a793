//! Blindspot: stress-test text-generation metrics.
//!
//! The core is a pipeline of independent stages, each in its own module:
//!
//! 1. [`text`]: text processing with the exact string semantics the reference
//!    implementations rely on (Python whitespace, NLTK's Porter stemmer).
//! 2. [`inject`]: synthetic errors from the papers, deterministic per seed,
//!    with changed spans and the noise ratio.
//! 3. [`metrics`]: lexical metrics (BLEU, chrF, ROUGE) behind one [`metrics::Metric`]
//!    trait and a registry of ids.
//! 4. [`data`]: loaders for the dataset formats, keeping good rows and
//!    reporting bad ones by line.
//! 5. [`stress`]: stress tests over injection levels and the rank-rule verdict.
//!
//! The CLI (`src/main.rs`) and the browser bindings (`web`, wasm only) are thin
//! shells over this core.

#![warn(missing_docs)]

pub mod data;
pub mod inject;
pub mod kernels;
pub mod metrics;
pub mod models;
pub mod stress;
pub mod text;

#[cfg(target_arch = "wasm32")]
pub mod web;

#[cfg(all(feature = "cli", not(target_arch = "wasm32")))]
pub mod allocator;
