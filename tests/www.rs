//! The page draws; the core describes. `www/` must not carry its own list
//! of metrics: no metric id or kind as a string literal, and none of the
//! core's option labels, option help, card texts or metric descriptions
//! copied into it. A card's controls come from the schema the core exports
//! (`metricChoices`); this test fails when such a list comes back.

use std::path::Path;

use blindspot::metrics::registry::kinds;
use blindspot::metrics::{MetricId, registry};

/// Every file the page is built from, with its text.
fn www() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("www");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "js" || e == "html"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    files.sort();
    assert!(files.len() > 5, "www/ has the page's files");
    files
}

/// The places `needle` appears in the page's files, as `file:line`.
fn places(files: &[(String, String)], needle: &str) -> Vec<String> {
    files
        .iter()
        .flat_map(|(name, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, line)| line.contains(needle))
                .map(move |(i, _)| format!("{name}:{}", i + 1))
        })
        .collect()
}

#[test]
fn the_page_names_no_metric_id_or_kind() {
    let files = www();
    let mut names: Vec<&str> = MetricId::ALL.iter().map(|id| id.as_str()).collect();
    names.extend(kinds().iter().map(|k| k.kind));
    names.sort_unstable();
    names.dedup();
    let mut found = Vec::new();
    for name in names {
        for quote in ['"', '\'', '`'] {
            for at in places(&files, &format!("{quote}{name}{quote}")) {
                found.push(format!("{at}: {quote}{name}{quote}"));
            }
        }
        for at in places(&files, &format!("-{name}\"")) {
            found.push(format!("{at}: an id built on {name}"));
        }
    }
    assert!(
        found.is_empty(),
        "metric ids and kinds come from the core's registry, not from www/:\n{}",
        found.join("\n")
    );
}

/// The texts the core owns: option labels, option help, choice labels,
/// card paragraphs and metric descriptions.
fn core_texts() -> Vec<String> {
    let mut texts: Vec<String> = Vec::new();
    let mut text = |s: &str| {
        // Short words ("Task", "Model") may appear in the page's own prose.
        if s.chars().count() >= 14 {
            texts.push(s.to_owned());
        }
    };
    for kind in kinds() {
        text(kind.about.about);
        text(kind.about.truncated);
        let Some(props) = kind.options.get("properties").and_then(|p| p.as_object()) else {
            continue;
        };
        for p in props.values() {
            for key in ["title", "description", "x-null-label"] {
                if let Some(s) = p.get(key).and_then(|v| v.as_str()) {
                    text(s);
                }
            }
            for label in p
                .get("x-labels")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
            {
                text(label.as_str().unwrap_or_default());
            }
            for choice in p
                .get("x-choices")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
            {
                text(choice["label"].as_str().unwrap_or_default());
            }
        }
    }
    for info in registry() {
        text(info.description);
        text(info.reads);
    }
    // A description is checked by its first sentence-sized piece too, so a
    // copy that was edited a little still shows.
    let pieces: Vec<String> = texts
        .iter()
        .filter(|t| t.len() > 48)
        .map(|t| t.chars().take(40).collect())
        .collect();
    texts.extend(pieces);
    texts
}

#[test]
fn the_page_copies_no_option_label_help_or_description() {
    let files = www();
    let mut found = Vec::new();
    for text in core_texts() {
        for at in places(&files, &text) {
            found.push(format!("{at}: {text:?}"));
        }
    }
    assert!(
        found.is_empty(),
        "labels, help and descriptions come from the core's schema (metricChoices), \
         not from www/:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_option_the_page_offers_has_a_label_and_a_control_type() {
    for kind in kinds() {
        let props = kind.options["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{}: options are an object schema", kind.kind));
        for (name, p) in props {
            assert!(
                p.get("title").and_then(|t| t.as_str()).is_some(),
                "{}.{name} has a title (its label)",
                kind.kind
            );
            assert!(
                p.get("description").and_then(|t| t.as_str()).is_some(),
                "{}.{name} has a description (its help)",
                kind.kind
            );
            let types: Vec<&str> = match &p["type"] {
                serde_json::Value::String(t) => vec![t.as_str()],
                serde_json::Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).collect(),
                other => panic!("{}.{name}: type {other}", kind.kind),
            };
            assert!(
                types
                    .iter()
                    .any(|t| ["boolean", "integer", "number", "string"].contains(t)),
                "{}.{name}: a type the page has a control for ({types:?})",
                kind.kind
            );
            if let Some(labels) = p.get("x-labels") {
                assert_eq!(
                    labels.as_array().map(Vec::len),
                    p["enum"]
                        .as_array()
                        .map(|e| e.iter().filter(|v| !v.is_null()).count()),
                    "{}.{name}: a label per choice",
                    kind.kind
                );
            }
        }
        assert_eq!(
            serde_json::to_value(&kind.defaults).unwrap()["metric"],
            kind.kind,
            "the default spec is the kind's"
        );
    }
}
