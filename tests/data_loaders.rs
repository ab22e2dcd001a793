//! The loaders read every file in tests/data completely and cleanly.

use blindspot::data::{load_menli_csv, load_summeval, load_wmt};

fn read(file: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn wmt_and_ted_use_ref_a_as_gold_and_ref_b_as_reference() {
    let wmt = load_wmt(&read("wmt21_de_en.jsonl"));
    assert_eq!((wmt.rows.len(), wmt.problems.len()), (1000, 0));
    assert_eq!(
        wmt.rows[0].gold,
        "Biker reacts lightning fast and prevents worse."
    );
    assert_eq!(
        wmt.rows[0].refs,
        ["Biker reacts lighting-fast and prevents the worst"]
    );
    let ted = load_wmt(&read("ted_mt_zh_en.jsonl"));
    assert_eq!((ted.rows.len(), ted.problems.len()), (100, 0));
}

#[test]
fn summeval_keeps_ten_references_and_sixteen_scored_systems() {
    let docs = load_summeval(&read("summeval.jsonl"));
    assert_eq!((docs.rows.len(), docs.problems.len()), (100, 0));
    for doc in &docs.rows {
        assert_eq!(
            doc.item.refs.len(),
            10,
            "the gold 'ref' is not among its own references"
        );
        assert!(!doc.item.refs.contains(&doc.item.gold));
        assert_eq!(doc.systems.len(), 16);
        assert!(doc.systems.iter().all(|s| s.scores.len() == 4));
    }
}

#[test]
fn summeval_rows_with_other_human_scores_are_problems_not_nan() {
    let lines: Vec<String> = read("summeval.jsonl")
        .lines()
        .take(4)
        .map(String::from)
        .collect();
    let drop = |line: &str, system_only: bool| {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        for (i, (_, out)) in v["systems"].as_object_mut().unwrap().iter_mut().enumerate() {
            if !system_only || i == 0 {
                out["scores"].as_object_mut().unwrap().remove("fluency");
            }
        }
        v.to_string()
    };
    // Row 1 lacks fluency everywhere, row 3 in one system: both refused,
    // even though row 1 comes first.
    let text = [
        drop(&lines[0], false),
        lines[1].clone(),
        drop(&lines[2], true),
        lines[3].clone(),
    ]
    .join("\n");
    let docs = load_summeval(&text);
    assert_eq!(docs.rows.len(), 2);
    let problems: Vec<usize> = docs.problems.iter().map(|p| p.line).collect();
    assert_eq!(problems, [1, 3]);
    assert!(docs.problems[0].message.contains("most rows have"));
    assert!(docs.problems[1].message.contains("needs the same ones"));
    // A stress suite reads only the texts: every row stays there.
    let items = blindspot::data::load_items(blindspot::data::DatasetFormat::Summeval, &text);
    assert_eq!((items.rows.len(), items.problems.len()), (4, 0));
}

#[test]
fn menli_suite_has_twelve_error_types_of_two_hundred() {
    let suite = load_menli_csv(&read("menli_wmt20_de.csv")).unwrap();
    assert_eq!((suite.rows.len(), suite.problems.len()), (2400, 0));
    let mut counts = std::collections::BTreeMap::new();
    for case in &suite.rows {
        *counts.entry(case.error.as_str()).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), 12);
    assert!(counts.values().all(|&n| n == 200));
}
