//! The integration tests, one binary: each module below was its own test
//! target, and linking 19 binaries of burn (~200 MB each with line tables)
//! cost CI minutes and gigabytes of disk. `cargo test --test integration attack::`
//! runs one module. tests/f16.rs stays its own binary (its own process).

mod common;

mod attack;
mod attention_view;
mod bart;
mod bertscore;
mod bleurt;
mod chat_templates;
mod cli;
mod comet;
mod data_loaders;
mod docs;
mod engine;
mod generate;
mod golden_lexical;
mod inject_properties;
mod judges;
mod lessons;
mod llama;
mod mauve;
mod moverscore;
mod plm_metrics;
mod plm_parity;
mod prism;
mod published_vectors;
mod self_eval;
mod stress_suite;
mod t5;
mod tagger;
mod ter;
mod unieval;
mod www;
