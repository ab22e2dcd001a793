//! UniEval against the released scorer's arithmetic (maszhongming/UniEval,
//! reproduced step for step by scripts/t5_parity.py) on the tiny random
//! T5 v1.1 (`tests/fixtures/t5/tiny`): the four summarization dimensions and
//! overall on 12 SummEval summaries, 9 of whose inputs are cut at 1024
//! tokens; the fact evaluator; the sentences our splitter finds; int8; and
//! the errors a user meets.

use std::rc::Rc;

use blindspot::metrics::engine::{Engine, EngineError, ModelStore};
use blindspot::metrics::unieval::{
    self, Dimension, UniEvalFactOptions, UniEvalOptions, question, units,
};
use blindspot::metrics::{Column, MetricSpec, ModelSlot, Segment};
use blindspot::models::{ModelFiles, Plm, Precision};
use burn::tensor::Device;
use futures::executor::block_on;
use serde_json::Value;

use crate::common;

/// The issue's bar.
const TOLERANCE: f64 = 1e-5;

struct One(Rc<Plm>);

impl ModelStore for One {
    fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Ok(self.0.clone())
    }
}

fn load(precision: Precision) -> Plm {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/t5/tiny");
    Plm::load(
        "tiny-t5",
        ModelFiles::from_path(&dir).unwrap(),
        &Device::flex(),
        precision,
    )
    .unwrap()
}

/// `(summary, source, reference)` of each golden item, from tests/data.
fn items(g: &Value) -> Vec<(String, String, String)> {
    let rows = common::rows("summeval.jsonl");
    g["unieval"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| {
            let row = &rows[it["line"].as_u64().unwrap() as usize - 1];
            let system = it["system"].as_str().unwrap();
            (
                common::field(row, &format!("systems/{system}/summary")),
                common::field(row, "src"),
                common::field(row, "ref"),
            )
        })
        .collect()
}

fn specs() -> Vec<MetricSpec> {
    Dimension::ALL
        .iter()
        .map(|&dimension| {
            MetricSpec::UniEval(UniEvalOptions {
                model: None,
                dimension,
            })
        })
        .chain([MetricSpec::UniEvalFact(UniEvalFactOptions { model: None })])
        .collect()
}

fn score(plm: Plm, items: &[(String, String, String)]) -> Vec<Column> {
    let refs: Vec<[&str; 1]> = items.iter().map(|t| [t.2.as_str()]).collect();
    let segments: Vec<Segment> = items
        .iter()
        .zip(&refs)
        .map(|(t, r)| Segment {
            hyp: &t.0,
            refs: r,
            src: Some(&t.1),
        })
        .collect();
    block_on(Engine::new(One(Rc::new(plm))).score(&specs(), &segments)).unwrap()
}

#[test]
fn dimensions_match_the_released_scorer() {
    let g = common::golden("t5_parity.json");
    let items = items(&g);
    let want = g["unieval"]["items"].as_array().unwrap();
    for ((summary, _, _), w) in items.iter().zip(want) {
        assert_eq!(
            units(Dimension::Fluency, summary).len() as u64,
            w["sentences"].as_u64().unwrap(),
            "our splitter and the script's disagree on {summary:?}"
        );
    }
    let columns = score(load(Precision::F32), &items);
    let keys = [
        "coherence",
        "consistency",
        "fluency",
        "relevance",
        "overall",
        "consistency",
    ];
    for (column, key) in columns.iter().zip(keys) {
        let theirs: Vec<f64> = want.iter().map(|w| w[key].as_f64().unwrap()).collect();
        let d = common::max_deviation(&column.values(), &theirs);
        assert!(
            d <= TOLERANCE,
            "{}: off by {d:e}",
            column.spec.id().as_str()
        );
    }
    // The cut inputs are flagged: 9 of the coherence inputs pass 1024 tokens.
    let coherence = &columns[0];
    let cut = coherence
        .scores
        .iter()
        .filter(|s| {
            s.parts
                .iter()
                .any(|p| p.name == "truncated" && p.value == 1.0)
        })
        .count() as u64;
    assert_eq!(cut, g["unieval"]["cut"].as_u64().unwrap());
    // Overall's parts are the four dimensions and the sentence count.
    let parts: Vec<&str> = columns[4].scores[1].parts.iter().map(|p| p.name).collect();
    assert_eq!(
        parts,
        [
            "coherence",
            "consistency",
            "fluency",
            "relevance",
            "sentences",
            "truncated"
        ]
    );
}

/// The literal `</s>` in a question is T5's end-of-sequence token, and
/// "Yes" and "No" are read as the released code reads them.
#[test]
fn questions_tokenize_as_transformers_tokenizes_them() {
    let g = common::golden("t5_parity.json");
    let plm = load(Precision::F32);
    let items = items(&g);
    let first = units(Dimension::Consistency, &items[0].0)[0];
    let ids = plm
        .tokenizer
        .encode_for_model(&question(Dimension::Consistency, first, &items[0].1).unwrap())
        .unwrap()
        .ids();
    let want: Vec<u64> = g["unieval"]["first_input_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let ours: Vec<u64> = ids.iter().take(want.len()).map(|&i| u64::from(i)).collect();
    assert_eq!(ours, want);
    let yes_no: Vec<u32> = ["Yes", "No"]
        .map(|w| plm.tokenizer.encode_for_model(w).unwrap().ids()[0])
        .to_vec();
    assert_eq!(
        Value::from(yes_no),
        g["unieval"]["yes_no"],
        "the first ids of Yes and No"
    );
}

#[test]
fn int8_stays_close_to_f32() {
    let g = common::golden("t5_parity.json");
    let items: Vec<_> = items(&g).into_iter().take(4).collect();
    let f32 = score(load(Precision::F32), &items);
    let int8 = score(load(Precision::Int8), &items);
    for (a, b) in f32.iter().zip(&int8) {
        let d = common::max_deviation(&a.values(), &b.values());
        assert!(d < 0.05, "{}: int8 off by {d}", a.spec.id().as_str());
        assert!(b.signature.to_string().contains("precision:int8"));
    }
    // Every projection whose width is whole blocks of 32 is int8: here the
    // query, key and value of 3 encoder and 2 decoder layers (self and
    // cross attention); the others are 24, 40 or 600 wide.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/t5/tiny");
    let files = ModelFiles::from_path(&dir).unwrap();
    let packed = Plm::load_with("tiny-t5", files, &Device::flex(), Precision::Int8, true)
        .unwrap()
        .packed;
    assert_eq!(packed.integers(), 3 * 3 + 2 * 6);
}

#[test]
fn missing_inputs_and_wrong_models_say_why() {
    let engine = Engine::new(One(Rc::new(load(Precision::F32))));
    let run = |dimension, refs: &[&str], src| {
        block_on(engine.score(
            &[MetricSpec::UniEval(UniEvalOptions {
                model: None,
                dimension,
            })],
            &[Segment {
                hyp: "The cat sat.",
                refs,
                src,
            }],
        ))
    };
    let e = run(Dimension::Relevance, &[], Some("doc"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs at least one reference"), "{e}");
    let e = run(Dimension::Coherence, &["r"], None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("has no source") && e.contains("unieval-coherence"),
        "{e}"
    );
    let e = run(Dimension::Overall, &["r"], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unieval-overall"), "{e}");
    // Fluency reads the hypothesis alone; an empty one is one empty sentence.
    let ok = run(Dimension::Fluency, &[], None).unwrap();
    assert!((0.0..=1.0).contains(&ok[0].values()[0]));
    let empty = block_on(engine.score(
        &[MetricSpec::UniEvalFact(UniEvalFactOptions { model: None })],
        &[Segment {
            hyp: "",
            refs: &[],
            src: Some("doc"),
        }],
    ))
    .unwrap();
    assert!((0.0..=1.0).contains(&empty[0].values()[0]));
    // An encoder in UniEval's slot.
    let minilm = ModelFiles::from_path(
        &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2"),
    )
    .unwrap();
    let minilm = Plm::load("all-MiniLM-L6-v2", minilm, &Device::flex(), Precision::F32).unwrap();
    let e = block_on(unieval::answers(&minilm, &["x".to_owned()]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not an encoder-decoder"), "{e}");
}

/// `blindspot score` reads a T5 folder for both evaluators and gives the
/// released scorer's numbers; without a source it says which metric needs it.
#[test]
fn cli_scores_unieval_from_a_folder() {
    let g = common::golden("t5_parity.json");
    let items = &items(&g)[..3];
    let want = g["unieval"]["items"].as_array().unwrap();
    let rows: Vec<Value> = items
        .iter()
        .map(|(hyp, src, r)| serde_json::json!({"hyp": hyp, "ref": r, "src": src}))
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/t5/tiny");
    let run = |rows: &[Value]| {
        common::score_rows(
            rows,
            &[
                "--metrics".into(),
                "unieval-overall,unieval-fluency,unieval-fact".into(),
                "--model".into(),
                format!("unieval={}", dir.display()),
                "--model".into(),
                format!("unieval-fact={}", dir.display()),
            ],
        )
    };
    let lines = common::jsonl_lines(&run(&rows));
    for (line, w) in lines[..items.len()].iter().zip(want) {
        for (key, golden) in [
            ("unieval-overall", "overall"),
            ("unieval-fluency", "fluency"),
            ("unieval-fact", "consistency"),
        ] {
            let d = (line[key].as_f64().unwrap() - w[golden].as_f64().unwrap()).abs();
            assert!(d <= TOLERANCE, "{key}: off by {d:e}");
        }
    }
    let out = run(&[serde_json::json!({"hyp": "a", "ref": "b"})]);
    common::assert_user_error(&out, "unieval-overall needs a source");
}
