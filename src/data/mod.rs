//! Loaders for the dataset formats Blindspot reads (tests/data and user
//! uploads). A malformed row never sinks the file: it is reported with its
//! line number and what is wrong, and the other rows are kept.
//!
//! Conventions from the papers (SPEC 4): in WMT and TED-MT files `ref_a` is
//! the gold hypothesis and `ref_b` the reference; in SummEval `ref` is the gold
//! hypothesis and the other `refs` are the references.

use serde::Serialize;
use serde_json::Value;

/// A problem with one row, kept alongside the rows that loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowProblem {
    /// 1-based line number in the file (for CSV, the physical line where the record starts).
    pub line: usize,
    /// What is wrong, in words.
    pub message: String,
}

/// Why a kept result (a report file, a download, the copy the page keeps
/// across visits) is refused when it is read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeptError {
    /// It is not JSON of the result's shape.
    #[error("not a valid {what}: {message}")]
    Parse {
        /// What was read (`stress suite report`...).
        what: &'static str,
        /// serde's account of the problem.
        message: String,
    },
    /// It parses but no run could have written it.
    #[error("the {what} is damaged: {damage}")]
    Damaged {
        /// What was read.
        what: &'static str,
        /// What is wrong inside it.
        damage: Damage,
    },
}

/// What is wrong inside a kept result (a check's finding: a count that does
/// not match, a value out of range, a verdict its scores do not give).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Damage(pub String);

/// A kept result read back: parsed, then held to `check`, so a damaged or
/// edited one is refused rather than indexed.
pub(crate) fn read_kept<T: serde::de::DeserializeOwned>(
    json: &str,
    what: &'static str,
    check: impl FnOnce(&T) -> Result<(), Damage>,
) -> Result<T, KeptError> {
    let kept: T = serde_json::from_str(json).map_err(|e| KeptError::Parse {
        what,
        message: e.to_string(),
    })?;
    check(&kept).map_err(|damage| KeptError::Damaged { what, damage })?;
    Ok(kept)
}

/// The rows that loaded and the problems with the others.
#[derive(Debug, Clone, Serialize)]
pub struct Loaded<T> {
    /// Rows that parsed, in file order.
    pub rows: Vec<T>,
    /// One entry per rejected row.
    pub problems: Vec<RowProblem>,
}

/// One stress-test item: a gold hypothesis with its references and source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// Identifier from the file, or the line number.
    pub id: String,
    /// The source text, where the format has one.
    pub src: Option<String>,
    /// The gold (human-written) hypothesis that injections perturb.
    pub gold: String,
    /// The references the metrics compare against.
    pub refs: Vec<String>,
}

/// One SummEval system output with its expert scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemOutput {
    /// System name (`M0`...).
    pub system: String,
    /// The summary.
    pub summary: String,
    /// Expert means per dimension (coherence, consistency, fluency, relevance).
    pub scores: Vec<(String, f64)>,
}

/// A SummEval document: the stress-test item plus scored system outputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummEvalDoc {
    /// Gold hypothesis (the original highlight), references and article.
    pub item: Item,
    /// System summaries with human scores.
    pub systems: Vec<SystemOutput>,
}

/// One MENLI preference case ([MENLI] §3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MenliCase {
    /// Error type (`add`, `neg`, `num`...).
    pub error: String,
    /// Case id.
    pub id: String,
    /// German source.
    pub source: String,
    /// Reference.
    pub reference: String,
    /// Paraphrase of the reference (the `_fixed` column when present and non-empty).
    pub paraphrase: String,
    /// Reference with one key error (reference-based test; `_fixed` preferred).
    pub adversarial_ref_based: String,
    /// Second translation with one key error (reference-free test).
    pub adversarial_ref_free: String,
}

/// Why a row of a dataset file is skipped (its [`RowProblem`]'s message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// The line is not JSON.
    #[error("invalid JSON ({0})")]
    Json(String),
    /// The line is JSON but not an object.
    #[error("not a JSON object (each line holds one object)")]
    NotObject,
    /// A field the format needs is missing.
    #[error("missing field '{0}'")]
    Missing(String),
    /// A field is not text.
    #[error("field '{0}' must be a string")]
    NotString(String),
    /// A row that breaks one of the format's rules.
    #[error("{0}")]
    Rule(String),
    /// A SummEval system output's problem.
    #[error("system {system}: {error}")]
    System {
        /// The system's name.
        system: String,
        /// Its problem.
        error: Box<RowError>,
    },
}

/// Parses JSON lines with `parse`, collecting problems; blank lines are skipped.
fn jsonl<T>(text: &str, mut parse: impl FnMut(&Value, usize) -> Result<T, RowError>) -> Loaded<T> {
    let mut loaded = Loaded {
        rows: Vec::new(),
        problems: Vec::new(),
    };
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let result = serde_json::from_str::<Value>(line)
            .map_err(|e| RowError::Json(e.to_string()))
            .and_then(|v| match v {
                Value::Object(_) => parse(&v, i + 1),
                _ => Err(RowError::NotObject),
            });
        match result {
            Ok(row) => loaded.rows.push(row),
            Err(error) => loaded.problems.push(RowProblem {
                line: i + 1,
                message: error.to_string(),
            }),
        }
    }
    loaded
}

fn string(v: &Value, key: &str) -> Result<String, RowError> {
    match v.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(RowError::NotString(key.to_owned())),
        None => Err(RowError::Missing(key.to_owned())),
    }
}

fn id_or_line(v: &Value, line: usize) -> String {
    match v.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => format!("line {line}"),
    }
}

/// The dataset formats stress suites read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatasetFormat {
    /// WMT21 / TED-MT JSONL: `ref_a` gold hypothesis, `ref_b` reference, `src`.
    Wmt,
    /// SummEval JSONL: `ref` gold hypothesis, the other `refs` references, `src` article.
    Summeval,
    /// JSONL with `hyp` (gold hypothesis), `ref` (string or list), optional `src`.
    Jsonl,
}

crate::metrics::spec::named_enum!(
    DatasetFormat,
    "dataset format",
    [(Wmt, "wmt"), (Summeval, "summeval"), (Jsonl, "jsonl")]
);

/// [`bundled_pairs`] as JSONL (`hyp`, `ref`, `id`): what the page offers as
/// a sample dataset.
pub const BUNDLED_PAIRS: &str = include_str!("sample.jsonl");

/// The preference suite's sample ([`load_menli_csv`]'s format): twelve
/// cases written for Blindspot, two per error type (`num`, `neg`, `name`,
/// `add`, `drop`, `pron`): a German source, an English reference, a second
/// translation, a paraphrase of the reference and each translation with one
/// key error.
pub const BUNDLED_PREFERENCE: &str = include_str!("sample_menli.csv");

/// The spurious-correlate audit's sample ([`load_summeval`]'s format): six
/// short news articles written for Blindspot, two references each and four
/// summaries (`lead`: the first two sentences, `short`: one terse sentence,
/// `wrong`: fluent with a factual error, `abstract`: a faithful rewrite),
/// rated 1-5 for coherence, consistency, fluency and relevance by one
/// Blindspot author. A demonstration of the audit, not research data: its
/// correlations say nothing about a metric beyond these 24 summaries.
pub const BUNDLED_AUDIT: &str = include_str!("sample_summeval.jsonl");

/// A dataset bundled with Blindspot, for the sections that run over one.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BundledSample {
    /// What reads it: `pairs` (stress suites, the attack's z scale),
    /// `preference` or `audit`.
    pub kind: &'static str,
    /// A file name for it (its extension tells the format).
    pub file: &'static str,
    /// One line on what it holds.
    pub about: &'static str,
    /// The file's text.
    #[serde(skip)]
    pub text: &'static str,
}

/// Every bundled sample, one per kind.
pub const BUNDLED_SAMPLES: [BundledSample; 3] = [
    BundledSample {
        kind: "pairs",
        file: "blindspot-sample.jsonl",
        about: "16 translation pairs written for Blindspot (JSONL: hyp gold, ref reference)",
        text: BUNDLED_PAIRS,
    },
    BundledSample {
        kind: "preference",
        file: "blindspot-preference.csv",
        about: "12 MENLI-style cases written for Blindspot, 2 per error type (num, neg, name, add, drop, pron), German sources",
        text: BUNDLED_PREFERENCE,
    },
    BundledSample {
        kind: "audit",
        file: "blindspot-audit.jsonl",
        about: "6 short articles written for Blindspot with 4 summaries each, rated 1-5 by one Blindspot author: a demonstration, not research data",
        text: BUNDLED_AUDIT,
    },
];

/// The bundled sample of `kind` (`pairs`, `preference` or `audit`).
pub fn bundled_sample(kind: &str) -> Option<&'static BundledSample> {
    BUNDLED_SAMPLES.iter().find(|s| s.kind == kind)
}

/// Sixteen translation-like pairs written for Blindspot (two English
/// renderings of one sentence each: `hyp` the gold text, `ref` the
/// reference): a demo set that needs no file, and the pair set a single
/// pair's attack takes its z scale from.
pub fn bundled_pairs() -> Vec<Item> {
    let loaded = load_pairs(BUNDLED_PAIRS);
    debug_assert!(loaded.problems.is_empty());
    loaded.rows
}

/// Stress-test items from a file in one of the formats: `wmt`
/// ([`load_wmt`]), `summeval` (the items of [`load_summeval`]) or `jsonl`
/// ([`load_pairs`]). The CLI and the page both read datasets through this.
pub fn load_items(format: DatasetFormat, text: &str) -> Loaded<Item> {
    match format {
        DatasetFormat::Wmt => load_wmt(text),
        DatasetFormat::Jsonl => load_pairs(text),
        DatasetFormat::Summeval => {
            // The human scores are the audit's: a suite reads only the texts.
            let docs = summeval(text, false);
            Loaded {
                rows: docs.rows.into_iter().map(|d| d.item).collect(),
                problems: docs.problems,
            }
        }
    }
}

/// WMT21 / TED-MT JSONL: `ref_a` is the gold hypothesis, `ref_b` the reference.
pub fn load_wmt(text: &str) -> Loaded<Item> {
    jsonl(text, |v, line| {
        Ok(Item {
            id: id_or_line(v, line),
            src: Some(string(v, "src")?),
            gold: string(v, "ref_a")?,
            refs: vec![string(v, "ref_b")?],
        })
    })
}

/// Generic JSONL pairs: `hyp`, `ref` (string or non-empty list), optional `src`.
pub fn load_pairs(text: &str) -> Loaded<Item> {
    load_pairs_with(text, true)
}

/// [`load_pairs`], where `ref` may be missing unless `need_refs` (scoring
/// with reference-free metrics only): a row without one has no references.
pub fn load_pairs_with(text: &str, need_refs: bool) -> Loaded<Item> {
    jsonl(text, |v, line| {
        let refs = match v.get("ref") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) if !items.is_empty() => items
                .iter()
                .map(|r| r.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| RowError::Rule("field 'ref' must hold strings only".into()))?,
            Some(_) => {
                return Err(RowError::Rule(
                    "field 'ref' must be a string or a non-empty list of strings".into(),
                ));
            }
            None if need_refs => return Err(RowError::Missing("ref".into())),
            None => Vec::new(),
        };
        let src = match v.get("src") {
            None | Some(Value::Null) => None,
            Some(_) => Some(string(v, "src")?),
        };
        Ok(Item {
            id: id_or_line(v, line),
            src,
            gold: string(v, "hyp")?,
            refs,
        })
    })
}

/// SummEval JSONL: `ref` is the gold hypothesis, the other `refs` the references.
/// Every summary must carry the same human scores (a correlation over
/// summaries with a score missing would be wrong, not smaller): a row whose
/// systems differ, or whose scores differ from those most rows have (the
/// first such set on a tie), is a problem, skipped.
pub fn load_summeval(text: &str) -> Loaded<SummEvalDoc> {
    summeval(text, true)
}

/// [`load_summeval`], checking the human scores only if `scored`.
fn summeval(text: &str, scored: bool) -> Loaded<SummEvalDoc> {
    let mut kept: Vec<(usize, Vec<String>)> = Vec::new();
    let mut loaded = jsonl(text, |v, line| {
        let gold = string(v, "ref")?;
        let all: Vec<String> = v
            .get("refs")
            .and_then(Value::as_array)
            .ok_or_else(|| RowError::Rule("missing list field 'refs'".into()))?
            .iter()
            .map(|r| {
                r.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| RowError::Rule("field 'refs' must hold strings only".into()))
            })
            .collect::<Result<_, _>>()?;
        let refs: Vec<String> = all.into_iter().filter(|r| *r != gold).collect();
        if refs.is_empty() {
            return Err(RowError::Rule("no reference besides the gold 'ref'".into()));
        }
        let mut systems = Vec::new();
        for (name, out) in v
            .get("systems")
            .and_then(Value::as_object)
            .ok_or_else(|| RowError::Rule("missing object field 'systems'".into()))?
        {
            let summary = string(out, "summary").map_err(|e| RowError::System {
                system: name.clone(),
                error: Box::new(e),
            })?;
            let scores = out
                .get("scores")
                .and_then(Value::as_object)
                .ok_or_else(|| {
                    RowError::Rule(format!("system {name}: missing object field 'scores'"))
                })?
                .iter()
                .map(|(k, s)| {
                    s.as_f64().map(|x| (k.clone(), x)).ok_or_else(|| {
                        RowError::Rule(format!("system {name}: score '{k}' is not a number"))
                    })
                })
                .collect::<Result<_, _>>()?;
            systems.push(SystemOutput {
                system: name.clone(),
                summary,
                scores,
            });
        }
        if scored {
            let keys = |out: &SystemOutput| {
                let mut keys: Vec<String> = out.scores.iter().map(|(k, _)| k.clone()).collect();
                keys.sort();
                keys
            };
            let row_keys = systems.first().map(keys).unwrap_or_default();
            if let Some(out) = systems.iter().find(|out| keys(out) != row_keys) {
                return Err(RowError::Rule(format!(
                    "system {} has human scores {:?}, system {} {row_keys:?} (every summary \
                     needs the same ones)",
                    out.system,
                    keys(out),
                    systems[0].system
                )));
            }
            kept.push((line, row_keys));
        }
        Ok(SummEvalDoc {
            item: Item {
                id: id_or_line(v, line),
                src: Some(string(v, "src")?),
                gold,
                refs,
            },
            systems,
        })
    });
    if !scored {
        return loaded;
    }
    // Across rows: the scores most rows carry (rows without systems add no
    // summary, and count for none).
    let mut counts: Vec<(&Vec<String>, usize)> = Vec::new();
    for (_, k) in kept.iter().filter(|(_, k)| !k.is_empty()) {
        match counts.iter_mut().find(|(c, _)| *c == k) {
            Some((_, n)) => *n += 1,
            None => counts.push((k, 1)),
        }
    }
    // The first of the most frequent: max_by_key takes the last maximum.
    let Some(common) = counts
        .iter()
        .rev()
        .max_by_key(|(_, n)| *n)
        .map(|(k, _)| (*k).clone())
    else {
        return loaded;
    };
    let rows = std::mem::take(&mut loaded.rows);
    for (row, (line, k)) in rows.into_iter().zip(&kept) {
        if *k == common || k.is_empty() {
            loaded.rows.push(row);
        } else {
            loaded.problems.push(RowProblem {
                line: *line,
                message: format!(
                    "human scores {k:?}, where most rows have {common:?} (every summary \
                     needs the same ones)"
                ),
            });
        }
    }
    loaded.problems.sort_by_key(|p| p.line);
    loaded
}

/// MENLI adversarial-suite CSV (`error, id, source, ref, r, hyp_para,
/// hyp_adv_based, hyp_adv_free` and optional `*_fixed` columns).
pub fn load_menli_csv(text: &str) -> Result<Loaded<MenliCase>, RowProblem> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| RowProblem {
            line: 1,
            message: format!("unreadable header ({e})"),
        })?
        .clone();
    let column = |name: &str| headers.iter().position(|h| h == name);
    let required = [
        "error",
        "id",
        "source",
        "ref",
        "hyp_para",
        "hyp_adv_based",
        "hyp_adv_free",
    ];
    if let Some(missing) = required.iter().find(|c| column(c).is_none()) {
        return Err(RowProblem {
            line: 1,
            message: format!("missing column '{missing}'"),
        });
    }
    let col = |name: &str| column(name).expect("checked above");
    let mut loaded = Loaded {
        rows: Vec::new(),
        problems: Vec::new(),
    };
    for record in reader.records() {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line() as usize);
                loaded.problems.push(RowProblem {
                    line,
                    message: format!("unreadable row ({e})"),
                });
                continue;
            }
        };
        let line = record.position().map_or(0, |p| p.line() as usize);
        if record.len() != headers.len() {
            loaded.problems.push(RowProblem {
                line,
                message: format!(
                    "{} fields where the header has {}",
                    record.len(),
                    headers.len()
                ),
            });
            continue;
        }
        let fixed_or = |name: &str| {
            column(&format!("{name}_fixed"))
                .map(|i| &record[i])
                .filter(|s| !s.is_empty())
                .unwrap_or(&record[col(name)])
                .to_string()
        };
        loaded.rows.push(MenliCase {
            error: record[col("error")].to_string(),
            id: record[col("id")].to_string(),
            source: record[col("source")].to_string(),
            reference: record[col("ref")].to_string(),
            paraphrase: fixed_or("hyp_para"),
            adversarial_ref_based: fixed_or("hyp_adv_based"),
            adversarial_ref_free: record[col("hyp_adv_free")].to_string(),
        });
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_rows_are_reported_and_the_rest_kept() {
        let text = "{\"hyp\": \"a\", \"ref\": \"b\"}\n\n{\"hyp\": 1, \"ref\": \"b\"}\nnot json\n{\"hyp\": \"c\", \"ref\": [\"d\", \"e\"], \"src\": \"s\"}\n";
        let loaded = load_pairs(text);
        assert_eq!(loaded.rows.len(), 2);
        assert_eq!(loaded.rows[1].refs, ["d", "e"]);
        assert_eq!(
            loaded.problems[0],
            RowProblem {
                line: 3,
                message: "field 'hyp' must be a string".into()
            }
        );
        assert_eq!(loaded.problems[1].line, 4);
        assert!(loaded.problems[1].message.starts_with("invalid JSON"));
    }

    #[test]
    fn menli_csv_needs_its_columns() {
        let err = load_menli_csv("error,id\nadd,1\n").unwrap_err();
        assert_eq!(err.message, "missing column 'source'");
    }
}
