//! Blindspot: stress-test text-generation metrics.
//!
//! The core is a set of independent layers, each in its own module:
//!
//! 1. [`text`]: text processing with the exact string semantics the reference
//!    implementations rely on (Python whitespace, NLTK's Porter stemmer,
//!    spaCy's tagger).
//! 2. [`inject`]: synthetic errors from the papers, deterministic per seed,
//!    with changed spans and the noise ratio.
//! 3. [`kernels`]: numeric kernels shared by the model engine and the tagger.
//! 4. [`models`]: the language-model engine (one module per architecture
//!    family, int8, burn-flex on the CPU and burn-wgpu on the GPU).
//! 5. [`metrics`]: one module per metric, named once in a registry, scored
//!    through one [`metrics::Engine`].
//! 6. [`data`]: loaders for the dataset formats, keeping good rows and
//!    reporting bad ones by line.
//! 7. [`stress`]: sweeps and the rank-rule verdict, stress, preference and
//!    audit suites, adversarial search and the lessons.
//!
//! The CLI (`src/main.rs`, `src/cli`) and the browser bindings (`web`, wasm
//! only) are thin shells over this core; `docs/architecture.md` says more.

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
