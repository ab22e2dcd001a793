//! Reading pairs for the CLI: one-text-per-line files or JSONL.

use std::io::Read;

/// A problem with the input, phrased for the user.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// Path as given.
        path: String,
        /// Underlying I/O error.
        source: std::io::Error,
    },
    /// The file is not UTF-8.
    #[error("{path}: invalid UTF-8 on line {line}")]
    Utf8 {
        /// Path as given.
        path: String,
        /// 1-based line of the first invalid byte.
        line: usize,
    },
    /// Line-aligned files disagree in length.
    #[error("{path} has {found} lines but {hyps} has {expected}")]
    LineCount {
        /// The offending file.
        path: String,
        /// Its line count.
        found: usize,
        /// The hypothesis file.
        hyps: String,
        /// The hypothesis line count.
        expected: usize,
    },
    /// A JSONL line is malformed.
    #[error("{path} line {line}: {message}")]
    Jsonl {
        /// Path as given.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// No pairs at all.
    #[error("no input pairs: {0} is empty")]
    Empty(String),
    /// Standard input named twice.
    #[error("only one input can be read from stdin ('-')")]
    StdinTwice,
    /// No reference given for a metric that needs one.
    #[error("no references given: pass --refs FILE (or --input with a 'ref' field)")]
    NoReferences,
    /// A metric needs sources and some pair has none.
    #[error("{0} needs a source for every pair: pass --srcs FILE or a 'src' field")]
    MissingSource(&'static str),
}

/// Aligned hypotheses, references (one or more per pair) and optional sources.
#[derive(Debug, Default)]
pub struct Pairs {
    /// Hypotheses.
    pub hyps: Vec<String>,
    /// References per pair.
    pub refs: Vec<Vec<String>>,
    /// Sources per pair, where given.
    pub srcs: Vec<Option<String>>,
}

/// Reads a file (`-`: stdin) as UTF-8 text, without a byte-order mark.
pub fn read_text(path: &str) -> Result<String, InputError> {
    let mut bytes = Vec::new();
    let result = if path == "-" {
        std::io::stdin().lock().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map(|_| ())
    };
    result.map_err(|source| InputError::Read {
        path: display(path),
        source,
    })?;
    // A byte-order mark (editors on Windows write one) is not text.
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..valid]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        InputError::Utf8 {
            path: display(path),
            line,
        }
    })
}

fn display(path: &str) -> String {
    if path == "-" {
        "<stdin>".into()
    } else {
        path.into()
    }
}

/// A file's lines (`-`: stdin).
pub fn read_lines(path: &str) -> Result<Vec<String>, InputError> {
    Ok(lines(&read_text(path)?))
}

/// Splits into lines; a final newline does not start an extra empty line.
fn lines(text: &str) -> Vec<String> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect()
}

impl Pairs {
    /// Reads aligned one-text-per-line files; `refs` may be none unless
    /// `need_refs`.
    pub fn from_line_files(
        hyps: &str,
        refs: &[String],
        srcs: Option<&str>,
        need_refs: bool,
    ) -> Result<Self, InputError> {
        let stdin_uses = std::iter::once(hyps)
            .chain(refs.iter().map(String::as_str))
            .chain(srcs)
            .filter(|p| *p == "-");
        if stdin_uses.count() > 1 {
            return Err(InputError::StdinTwice);
        }
        if refs.is_empty() && need_refs {
            return Err(InputError::NoReferences);
        }
        let hyp_lines = lines(&read_text(hyps)?);
        if hyp_lines.is_empty() {
            return Err(InputError::Empty(display(hyps)));
        }
        let aligned = |path: &str| -> Result<Vec<String>, InputError> {
            let l = lines(&read_text(path)?);
            if l.len() != hyp_lines.len() {
                return Err(InputError::LineCount {
                    path: display(path),
                    found: l.len(),
                    hyps: display(hyps),
                    expected: hyp_lines.len(),
                });
            }
            Ok(l)
        };
        let ref_columns = refs
            .iter()
            .map(|p| aligned(p))
            .collect::<Result<Vec<_>, _>>()?;
        let srcs = match srcs {
            Some(p) => aligned(p)?.into_iter().map(Some).collect(),
            None => vec![None; hyp_lines.len()],
        };
        let refs = (0..hyp_lines.len())
            .map(|i| ref_columns.iter().map(|c| c[i].clone()).collect())
            .collect();
        Ok(Self {
            hyps: hyp_lines,
            refs,
            srcs,
        })
    }

    /// Reads JSONL with `hyp`, `ref` (string or list of strings; optional
    /// unless `need_refs`) and optional `src`. The CLI is strict: the first
    /// malformed line is an error.
    pub fn from_jsonl(path: &str, need_refs: bool) -> Result<Self, InputError> {
        let loaded = blindspot::data::load_pairs_with(&read_text(path)?, need_refs);
        if let Some(problem) = loaded.problems.into_iter().next() {
            return Err(InputError::Jsonl {
                path: display(path),
                line: problem.line,
                message: problem.message,
            });
        }
        if loaded.rows.is_empty() {
            return Err(InputError::Empty(display(path)));
        }
        let mut pairs = Self::default();
        for item in loaded.rows {
            pairs.hyps.push(item.gold);
            pairs.refs.push(item.refs);
            pairs.srcs.push(item.src);
        }
        Ok(pairs)
    }
}
