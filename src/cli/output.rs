//! Writing scores as JSONL, CSV or an aligned table.

use std::io::Write;

use blindspot::metrics::Score;
use clap::ValueEnum;

/// Output formats of `blindspot score`.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// One JSON object per pair, then one `{"corpus": ...}` object.
    Jsonl,
    /// A header, one row per pair, then a `corpus` row.
    Csv,
    /// Aligned columns for reading in a terminal, with signatures below.
    Table,
}

/// Writes per-pair scores, the corpus summary and the signatures.
pub fn write_scores(
    format: Format,
    ids: &[&str],
    rows: &[Vec<Score>],
    corpus: &[Score],
    sentence_signatures: &[String],
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match format {
        Format::Jsonl => {
            for (i, row) in rows.iter().enumerate() {
                let mut obj = serde_json::Map::new();
                obj.insert("pair".into(), (i + 1).into());
                for s in row {
                    obj.insert(s.metric.into(), s.value.into());
                }
                writeln!(out, "{}", serde_json::Value::Object(obj))?;
            }
            let summary: serde_json::Map<String, serde_json::Value> = corpus
                .iter()
                .zip(sentence_signatures)
                .map(|(s, sent_sig)| {
                    let value = serde_json::json!({
                        "value": s.value,
                        "parts": s.parts,
                        "signature": s.signature,
                        "sentence_signature": sent_sig,
                    });
                    (s.metric.to_string(), value)
                })
                .collect();
            writeln!(
                out,
                "{}",
                serde_json::json!({ "corpus": summary, "pairs": rows.len() })
            )?;
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(out);
            w.write_record(std::iter::once("pair").chain(ids.iter().copied()))?;
            for (i, row) in rows.iter().enumerate() {
                w.write_record(
                    std::iter::once((i + 1).to_string())
                        .chain(row.iter().map(|s| s.value.to_string())),
                )?;
            }
            w.write_record(
                std::iter::once("corpus".to_string())
                    .chain(corpus.iter().map(|s| s.value.to_string())),
            )?;
            w.flush()?;
        }
        Format::Table => {
            write!(out, "{:>6}", "pair")?;
            for id in ids {
                write!(out, " {id:>10}")?;
            }
            writeln!(out)?;
            for (i, row) in rows.iter().enumerate() {
                write!(out, "{:>6}", i + 1)?;
                for s in row {
                    write!(out, " {:>10.4}", s.value)?;
                }
                writeln!(out)?;
            }
            write!(out, "{:>6}", "corpus")?;
            for s in corpus {
                write!(out, " {:>10.4}", s.value)?;
            }
            writeln!(out)?;
            writeln!(out)?;
            for (s, sent_sig) in corpus.iter().zip(sentence_signatures) {
                writeln!(out, "{}", s.signature)?;
                if *sent_sig != s.signature {
                    writeln!(out, "{sent_sig}  (per pair)")?;
                }
            }
            out.flush()?;
        }
    }
    Ok(())
}
