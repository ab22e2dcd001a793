//! Synthetic errors ("injections") applied to a hypothesis.
//!
//! Each injection has an id, a family, a level type with the papers' default
//! levels (../shared/SPEC.md section 2) and a deterministic `perturb` given a
//! seed. [`apply`] wraps every injection the same way: it validates the
//! level, runs it, and reports the changed spans (for highlighting) and the
//! noise ratio (word Levenshtein / gold length, halved for swap types). An
//! injection that finds nothing to change says so (`applied: false`, with the
//! reason) instead of returning the input as if it were changed.

pub mod character;
pub mod consistency;
pub mod fluency;
pub mod judge;
pub mod masked_lm;
pub mod menli;
pub mod other;
mod spans;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::text::sequences;
use crate::text::tagger::Tagger;
use crate::text::words::words;

/// The random stream every injection draws from: ChaCha8, stable across
/// platforms and crate versions.
pub type InjectRng = ChaCha8Rng;

/// Paper grouping, as shown in the playground palette.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// [BS] fluency errors.
    Fluency,
    /// [BS] consistency errors.
    Consistency,
    /// MENLI attacks (one key error each).
    Menli,
    /// DeepWordBug character operations ([ADV]).
    Character,
    /// Other [BS] tests (repetition, copy-source, prompt injection...).
    Other,
    /// The blind spots of LLM judges (instructions to the judge, master
    /// keys, verbosity, null answers).
    Judge,
}

crate::metrics::spec::named_enum!(
    Family,
    "injection family",
    [
        (Fluency, "fluency", "Fluency [BS]"),
        (Consistency, "consistency", "Consistency [BS]"),
        (Menli, "menli", "MENLI attacks"),
        (Character, "character", "Character (DeepWordBug)"),
        (Other, "other", "Other [BS]"),
        (Judge, "judge", "LLM judges"),
    ]
);

impl Family {
    /// The families a stress suite runs unless told otherwise (the papers'
    /// fluency and consistency tests).
    pub const SUITE_DEFAULT: [Family; 2] = [Family::Fluency, Family::Consistency];
}

/// Injection ids from names that are ids, families or `all`, each id once,
/// in the order given.
pub fn expand(names: &[impl AsRef<str>]) -> Result<Vec<&'static str>, InjectError> {
    let registry = registry();
    let mut ids: Vec<&'static str> = Vec::new();
    for name in names {
        let name = name.as_ref().trim();
        let family = name.parse::<Family>().ok();
        let expanded: Vec<&'static str> = if name == "all" || family.is_some() {
            registry
                .iter()
                .map(|i| i.info())
                .filter(|i| family.is_none_or(|f| i.family == f))
                .map(|i| i.id)
                .collect()
        } else {
            vec![create(name)?.info().id]
        };
        for id in expanded {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    Ok(ids)
}

/// What the level number means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LevelKind {
    /// Portion p in (0, 1]: each eligible item is hit with probability p, or
    /// p times the length of the text is affected.
    Portion,
    /// A count n of items (sentence pairs, words...).
    Count,
    /// k copies.
    Copies,
    /// Which of a fixed set of variants (1-based).
    Variant,
}

/// Registry information about one injection.
#[derive(Debug, Clone, Serialize)]
pub struct InjectionInfo {
    /// Stable id (`truncation`).
    pub id: &'static str,
    /// Display name.
    pub name: &'static str,
    /// Paper grouping.
    pub family: Family,
    /// What it does, one sentence.
    pub description: &'static str,
    /// Meaning of the level.
    pub level_kind: LevelKind,
    /// Whether the levels are amounts of one noise, which the rank rule
    /// wants scored lower in order. Not so for variants (an error's
    /// position, prompt strings) nor for the frequent n-grams' k (how many
    /// n-grams the text samples from, not how much of it is noise): those
    /// levels need only each score below the original.
    pub graded: bool,
    /// The papers' default levels, low to high.
    pub default_levels: &'static [f64],
    /// Swap-type error: the noise ratio is halved (Levenshtein has no swap).
    pub swap: bool,
    /// Needs the source text in the [`Context`].
    pub needs_source: bool,
    /// Needs other samples in the [`Context`].
    pub needs_samples: bool,
    /// Reads a whole dataset's n-gram counts ([`Context::ngram_corpus`])
    /// where a suite provides them.
    pub counts_corpus: bool,
    /// Needs a masked language model in the [`Context`].
    pub needs_masked_lm: bool,
    /// Needs a language-model tokenizer in the [`Context`].
    pub needs_lm_tokenizer: bool,
    /// Needs the part-of-speech tagger (always there natively; the browser
    /// fetches its weights first, see [`Tagger::install`]).
    pub needs_tagger: bool,
}

/// An [`InjectionInfo`] with the common defaults (no swap, no context needs);
/// override fields with struct-update syntax.
pub(crate) const fn info(
    id: &'static str,
    name: &'static str,
    family: Family,
    level_kind: LevelKind,
    default_levels: &'static [f64],
    description: &'static str,
) -> InjectionInfo {
    InjectionInfo {
        id,
        name,
        family,
        description,
        level_kind,
        graded: !matches!(level_kind, LevelKind::Variant),
        default_levels,
        swap: false,
        needs_source: false,
        needs_samples: false,
        counts_corpus: false,
        needs_masked_lm: false,
        needs_lm_tokenizer: false,
        needs_tagger: false,
    }
}

/// The same [`InjectionInfo`] marked as needing the tagger.
pub(crate) const fn tagged(info: InjectionInfo) -> InjectionInfo {
    InjectionInfo {
        needs_tagger: true,
        ..info
    }
}

/// Why a tagger-based injection cannot run: the weights are not installed.
pub const TAGGER_MISSING: &str =
    "the part-of-speech tagger (its weights, tagger/en_core_web_sm.safetensors, are not loaded)";

/// The English tagger, for injections marked [`tagged`].
pub(crate) fn tagger() -> Result<&'static Tagger, NotApplicable> {
    Tagger::english().ok_or_else(|| NotApplicable(format!("needs {TAGGER_MISSING}")))
}

/// What some injections need besides the text.
#[derive(Clone, Copy, Default)]
pub struct Context<'a> {
    /// The source (translation input, article).
    pub source: Option<&'a str>,
    /// Other samples of the dataset, for sentence replacement.
    pub samples: &'a [&'a str],
    /// A masked language model, for BERT-diverge (provided by the PLM engine).
    pub masked_lm: Option<&'a dyn masked_lm::MaskedLm>,
    /// A language model's tokenizer, for positioned errors (GPT-2's by default).
    pub lm_tokenizer: Option<&'a crate::models::tokenizer::LmTokenizer>,
    /// The text is open-ended generation (a continuation that may stop
    /// mid-thought): sentence switching then leaves its last sentence in place.
    pub open_ended: bool,
    /// The whole dataset's n-gram counts, for the frequent n-grams (a suite
    /// builds it once); without it they count `samples`.
    pub ngram_corpus: Option<&'a other::NgramCorpus>,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("source", &self.source)
            .field("samples", &self.samples.len())
            .field("masked_lm", &self.masked_lm.map(|m| m.name()))
            .field("lm_tokenizer", &self.lm_tokenizer.map(|t| t.name()))
            .field("open_ended", &self.open_ended)
            .field("ngram_corpus", &self.ngram_corpus.map(|c| c.texts))
            .finish()
    }
}

/// How an output span differs from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EditKind {
    /// New or changed words.
    Changed,
    /// Words were deleted here (zero-width span).
    Deleted,
}

/// A changed region of the output text, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Edit {
    /// Start byte in the output.
    pub start: usize,
    /// End byte in the output (equal to `start` for deletions).
    pub end: usize,
    /// What happened.
    pub kind: EditKind,
}

/// The result of applying an injection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Injected {
    /// The perturbed text (the input unchanged when `applied` is false).
    pub text: String,
    /// Whether anything changed.
    pub applied: bool,
    /// Why nothing changed, when `applied` is false.
    pub reason: Option<String>,
    /// Changed spans of `text`.
    pub edits: Vec<Edit>,
    /// Word Levenshtein / number of input words (halved for swap types).
    pub noise_ratio: f64,
}

/// Errors from [`apply`] and [`create`].
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum InjectError {
    /// Unknown id.
    #[error("unknown injection '{0}' (see `blindspot injections`)")]
    Unknown(String),
    /// The level is out of range for the injection's level type.
    #[error("{id}: level {level} is invalid: {expected}")]
    InvalidLevel {
        /// Injection id.
        id: &'static str,
        /// The level given.
        level: f64,
        /// What is allowed.
        expected: &'static str,
    },
    /// A needed input is missing from the context.
    #[error("{id} needs {what}")]
    MissingContext {
        /// Injection id.
        id: &'static str,
        /// What is missing.
        what: &'static str,
    },
    /// The caller stopped the work.
    #[error("stopped")]
    Stopped,
    /// The model the injection asks failed.
    #[error("{id}: the masked language model failed: {message}")]
    Model {
        /// Injection id.
        id: &'static str,
        /// The model's error.
        message: String,
    },
}

/// Why an injection could not change the text.
#[derive(Debug, Clone, PartialEq)]
pub struct NotApplicable(pub String);

/// One perturbation.
pub trait Injection: Send + Sync {
    /// Registry information.
    fn info(&self) -> &'static InjectionInfo;
    /// Produces the perturbed text, or the reason it cannot.
    fn perturb(
        &self,
        text: &str,
        level: f64,
        rng: &mut InjectRng,
        ctx: &Context,
    ) -> Result<String, NotApplicable>;
    /// The word-by-word rewrite of an injection driven by a masked LM
    /// ([`InjectionInfo::needs_masked_lm`]), which [`apply`] and
    /// [`apply_many`] run instead of `perturb`, asking the model as it goes;
    /// `None` for the others.
    fn rewrite(
        &self,
        _text: &str,
        _level: f64,
        _rng: InjectRng,
    ) -> Option<Result<masked_lm::Rewrite, NotApplicable>> {
        None
    }
}

/// Every registered injection, grouped by family.
pub fn registry() -> Vec<&'static dyn Injection> {
    let mut all: Vec<&'static dyn Injection> = Vec::new();
    all.extend(fluency::ALL.iter().copied());
    all.extend(consistency::ALL.iter().copied());
    all.extend(menli::ALL.iter().copied());
    all.extend(character::ALL.iter().copied());
    all.extend(other::ALL.iter().copied());
    all.extend(judge::ALL.iter().copied());
    all.extend(masked_lm::ALL.iter().copied());
    all
}

/// Looks up an injection by id.
pub fn create(id: &str) -> Result<&'static dyn Injection, InjectError> {
    registry()
        .into_iter()
        .find(|i| i.info().id == id)
        .ok_or_else(|| InjectError::Unknown(id.to_string()))
}

/// The largest count or number of copies a level may ask for.
pub(crate) const MAX_COUNT: usize = 10_000;

fn check_level(info: &'static InjectionInfo, level: f64) -> Result<(), InjectError> {
    let (ok, expected) = match info.level_kind {
        LevelKind::Portion => (level > 0.0 && level <= 1.0, "a portion in (0, 1]"),
        LevelKind::Count | LevelKind::Copies => (
            level >= 1.0 && level.fract() == 0.0 && level <= MAX_COUNT as f64,
            "a whole number from 1",
        ),
        LevelKind::Variant => (
            level >= 1.0 && level.fract() == 0.0 && level <= info.default_levels.len() as f64,
            "a variant number",
        ),
    };
    if ok {
        Ok(())
    } else {
        Err(InjectError::InvalidLevel {
            id: info.id,
            level,
            expected,
        })
    }
}

/// Applies `injection` at `level` with `seed`: validated, deterministic, with
/// edits and noise ratio.
pub fn apply(
    injection: &dyn Injection,
    text: &str,
    level: f64,
    seed: u64,
    ctx: &Context,
) -> Result<Injected, InjectError> {
    let info = injection.info();
    check(info, level, ctx)?;
    if info.needs_masked_lm {
        let job = Job {
            text,
            level,
            seed,
            ctx: *ctx,
        };
        return apply_blocking(injection, job);
    }
    let mut rng = InjectRng::seed_from_u64(seed);
    Ok(injected(
        info,
        text,
        injection.perturb(text, level, &mut rng, ctx),
    ))
}

/// [`apply_many`] on one job, blocking on its masked LM.
#[cfg(not(target_arch = "wasm32"))]
fn apply_blocking(injection: &dyn Injection, job: Job) -> Result<Injected, InjectError> {
    let mut out = futures::executor::block_on(apply_many(injection, &[job], async || true))?;
    Ok(out.remove(0))
}

/// In the browser a WebGPU read cannot block: the page calls [`apply_many`].
#[cfg(target_arch = "wasm32")]
fn apply_blocking(injection: &dyn Injection, _job: Job) -> Result<Injected, InjectError> {
    Err(InjectError::Model {
        id: injection.info().id,
        message: "in the browser the masked language model is asked asynchronously \
                  (inject::apply_many)"
            .into(),
    })
}

/// One text for [`apply_many`]: the text, level, seed and context that
/// [`apply`] takes.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    /// The text to perturb.
    pub text: &'a str,
    /// The injection's level.
    pub level: f64,
    /// The seed.
    pub seed: u64,
    /// What the injection may need besides the text.
    pub ctx: Context<'a>,
}

/// Queries per model call of [`apply_many`].
const MASKED_BATCH: usize = 32;

/// [`apply`] to each job, with the same results. An injection driven by a
/// masked LM asks its model about every job's next position together, in
/// batches of 32, awaiting the model (so a WebGPU model works) and then
/// `between()`, where a caller's event loop turns; a `false` from it stops
/// the work ([`InjectError::Stopped`]). The others run [`apply`] per job.
pub async fn apply_many(
    injection: &dyn Injection,
    jobs: &[Job<'_>],
    between: impl AsyncFn() -> bool,
) -> Result<Vec<Injected>, InjectError> {
    let info = injection.info();
    for job in jobs {
        check(info, job.level, &job.ctx)?;
    }
    // Each job's rewrite and the model it asks, where the injection has one.
    let mut rewrites = Vec::with_capacity(jobs.len());
    for job in jobs {
        let rewrite = match job.ctx.masked_lm {
            Some(lm) => injection
                .rewrite(job.text, job.level, InjectRng::seed_from_u64(job.seed))
                .map(|r| (r, lm)),
            None => None,
        };
        rewrites.push(rewrite);
    }
    loop {
        // Every job that still asks something, grouped by model (in
        // practice one), one batch per model.
        let mut asking: Vec<(&dyn masked_lm::MaskedLm, Vec<usize>)> = Vec::new();
        for (j, r) in rewrites.iter().enumerate() {
            let Some((Ok(rewrite), lm)) = r else { continue };
            if !rewrite.asks() {
                continue;
            }
            match asking.iter_mut().find(|(m, _)| std::ptr::addr_eq(*m, *lm)) {
                Some((_, who)) => who.push(j),
                None => asking.push((*lm, vec![j])),
            }
        }
        if asking.is_empty() {
            break;
        }
        for (lm, who) in asking {
            for who in who.chunks(MASKED_BATCH) {
                let model_error = |message: String| InjectError::Model {
                    id: info.id,
                    message,
                };
                let answers = {
                    // Every job in `who` asks (checked above).
                    let queries: Vec<masked_lm::Query> = who
                        .iter()
                        .filter_map(|&j| match &rewrites[j] {
                            Some((Ok(rewrite), _)) => rewrite.query(),
                            _ => None,
                        })
                        .collect();
                    let answers = lm
                        .top_k(&queries, masked_lm::TOP_K)
                        .await
                        .map_err(|e| model_error(e.to_string()))?;
                    if answers.len() != who.len() || queries.len() != who.len() {
                        return Err(model_error(format!(
                            "{} answers to {} queries",
                            answers.len(),
                            who.len()
                        )));
                    }
                    answers
                };
                for (&j, answer) in who.iter().zip(answers) {
                    if let Some((Ok(rewrite), _)) = &mut rewrites[j] {
                        rewrite.answer(answer);
                    }
                }
                if !between().await {
                    return Err(InjectError::Stopped);
                }
            }
        }
    }
    Ok(jobs
        .iter()
        .zip(rewrites)
        .map(|(job, rewrite)| match rewrite {
            Some((rewrite, _)) => injected(info, job.text, rewrite.map(|r| r.finish())),
            None => {
                let mut rng = InjectRng::seed_from_u64(job.seed);
                let out = injection.perturb(job.text, job.level, &mut rng, &job.ctx);
                injected(info, job.text, out)
            }
        })
        .collect())
}

/// Whether `injection` can run at `level` with `ctx`.
fn check(info: &'static InjectionInfo, level: f64, ctx: &Context) -> Result<(), InjectError> {
    check_level(info, level)?;
    if info.needs_source && ctx.source.is_none_or(|s| s.trim().is_empty()) {
        return Err(InjectError::MissingContext {
            id: info.id,
            what: "a source text",
        });
    }
    if info.needs_samples && ctx.samples.is_empty() {
        return Err(InjectError::MissingContext {
            id: info.id,
            what: "other samples to draw from",
        });
    }
    if info.needs_masked_lm && ctx.masked_lm.is_none() {
        return Err(InjectError::MissingContext {
            id: info.id,
            what: "a masked language model (`--mlm-model DIR`; on the page, load a model with its MLM head)",
        });
    }
    if info.needs_lm_tokenizer && ctx.lm_tokenizer.is_none() {
        return Err(InjectError::MissingContext {
            id: info.id,
            what: "a language-model tokenizer (GPT-2's encoder.json and vocab.bpe, or a tokenizer.json)",
        });
    }
    if info.needs_tagger && Tagger::english().is_none() {
        return Err(InjectError::MissingContext {
            id: info.id,
            what: TAGGER_MISSING,
        });
    }
    Ok(())
}

/// The result of perturbing `text` into `perturbed`: its edits and noise
/// ratio, or unchanged with the reason.
fn injected(
    info: &'static InjectionInfo,
    text: &str,
    perturbed: Result<String, NotApplicable>,
) -> Injected {
    let unchanged = |reason: String| Injected {
        text: text.to_string(),
        applied: false,
        reason: Some(reason),
        edits: Vec::new(),
        noise_ratio: 0.0,
    };
    match perturbed {
        Err(NotApplicable(reason)) => unchanged(reason),
        Ok(out) if out == text => unchanged("nothing to change at this level and seed".into()),
        Ok(out) => {
            let (edits, distance) = diff(text, &out);
            let gold_len = words(text).len().max(1) as f64;
            let mut noise_ratio = distance as f64 / gold_len;
            if info.swap {
                noise_ratio /= 2.0;
            }
            Injected {
                text: out,
                applied: true,
                reason: None,
                edits,
                noise_ratio,
            }
        }
    }
}

/// Word-level alignment of `before` and `after`: the changed spans of
/// `after` and the word Levenshtein distance.
pub fn diff(before: &str, after: &str) -> (Vec<Edit>, usize) {
    let a = words(before);
    let b = words(after);
    // The common prefix and suffix cost nothing; injections change a few
    // words, so what is left is usually small.
    let prefix = a
        .iter()
        .zip(&b)
        .take_while(|(x, y)| x.text == y.text)
        .count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x.text == y.text)
        .count();
    let (a_mid, b_mid) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let (n, m) = (a_mid.len(), b_mid.len());
    // Where a deletion before the `j`-th middle word of `after` shows.
    let deleted_at = |j: usize| b.get(prefix + j).map_or(after.len(), |w| w.start);
    if (n + 1).saturating_mul(m + 1) > FULL_TABLE_CELLS {
        // Too large for a table with a backtrace (a book-length rewrite):
        // the exact distance in linear memory, the changed middle as one span.
        let distance =
            sequences::levenshtein(a_mid.iter().map(|w| w.text), b_mid.iter().map(|w| w.text));
        let edit = match (b_mid.first(), b_mid.last()) {
            (Some(first), Some(last)) => Edit {
                start: first.start,
                end: last.end,
                kind: EditKind::Changed,
            },
            _ => Edit {
                start: deleted_at(0),
                end: deleted_at(0),
                kind: EditKind::Deleted,
            },
        };
        return (vec![edit], distance);
    }
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    let differ = |i: usize, j: usize| usize::from(a_mid[i].text != b_mid[j].text);
    for i in 1..=n {
        for j in 1..=m {
            let sub = d[i - 1][j - 1] + differ(i - 1, j - 1);
            d[i][j] = sub.min(d[i - 1][j] + 1).min(d[i][j - 1] + 1);
        }
    }
    let mut edits = Vec::new();
    let (mut i, mut j) = (n, m);
    while i > 0 || j > 0 {
        if i > 0 && j > 0 && d[i][j] == d[i - 1][j - 1] + differ(i - 1, j - 1) {
            if differ(i - 1, j - 1) == 1 {
                edits.push(Edit {
                    start: b_mid[j - 1].start,
                    end: b_mid[j - 1].end,
                    kind: EditKind::Changed,
                });
            }
            i -= 1;
            j -= 1;
        } else if j > 0 && d[i][j] == d[i][j - 1] + 1 {
            edits.push(Edit {
                start: b_mid[j - 1].start,
                end: b_mid[j - 1].end,
                kind: EditKind::Changed,
            });
            j -= 1;
        } else {
            let at = deleted_at(j);
            edits.push(Edit {
                start: at,
                end: at,
                kind: EditKind::Deleted,
            });
            i -= 1;
        }
    }
    edits.reverse();
    edits.dedup();
    (edits, d[n][m])
}

/// Cells of the largest edit table [`diff`] builds for its backtrace (16 MB
/// of memory at most); beyond, the distance is computed in linear
/// memory and the changed middle reported as one span.
const FULL_TABLE_CELLS: usize = 2_000_000;

/// Joins words with single spaces.
pub(crate) fn join(words: &[impl AsRef<str>]) -> String {
    words
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Upper-cases the first letter of every sentence ([BS]: after a deletion the
/// first letter of each sentence is re-capitalised). A word starts a sentence
/// when it is the first word or follows terminal punctuation that is not an
/// abbreviation; the case of the following word is not consulted, since the
/// deletion may just have removed the capitalised one.
pub(crate) fn recapitalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut at_start = true;
    for w in words(text) {
        out.push_str(&text[last..w.start]);
        match w.text.char_indices().find(|(_, c)| c.is_alphanumeric()) {
            Some((i, c)) if at_start && c.is_lowercase() => {
                out.push_str(&w.text[..i]);
                out.extend(c.to_uppercase());
                out.push_str(&w.text[i + c.len_utf8()..]);
            }
            _ => out.push_str(w.text),
        }
        last = w.end;
        at_start = crate::text::sentences::ends_sentence(w.text);
    }
    out.push_str(&text[last..]);
    out
}

/// `ceil(p * n)` items, at least one when p > 0 and n > 0.
pub(crate) fn ceil_portion(p: f64, n: usize) -> usize {
    ((p * n as f64).ceil() as usize).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_reports_changed_and_deleted_spans() {
        let (edits, d) = diff("the cat sat on the mat", "the dog sat the mat");
        assert_eq!(d, 2);
        assert_eq!(
            edits[0],
            Edit {
                start: 4,
                end: 7,
                kind: EditKind::Changed
            }
        );
        assert_eq!(
            edits[1],
            Edit {
                start: 12,
                end: 12,
                kind: EditKind::Deleted
            }
        );
    }

    #[test]
    fn diff_of_a_book_length_rewrite_is_one_span_and_the_exact_distance() {
        // 1600 words, every third replaced (the first and the last among them:
        // no common prefix or suffix) and one other dropped: past the table's
        // cells, so the distance comes from the linear-memory path.
        let before: Vec<String> = (0..1600).map(|i| format!("w{i}")).collect();
        let mut after: Vec<String> = before
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i % 3 == 0 {
                    format!("x{i}")
                } else {
                    w.clone()
                }
            })
            .collect();
        after.remove(800);
        const { assert!(1601 * 1600 > FULL_TABLE_CELLS) };
        assert_eq!(after.len(), 1599);
        let (before, after) = (before.join(" "), after.join(" "));
        let (edits, d) = diff(&before, &after);
        assert_eq!(d, 534 + 1, "534 words replaced, one dropped");
        assert_eq!(
            edits,
            [Edit {
                start: 0,
                end: after.len(),
                kind: EditKind::Changed
            }]
        );
    }

    #[test]
    fn recapitalize_sentence_starts() {
        assert_eq!(
            recapitalize("cat sat. dog ran! \"who?\" ok"),
            "Cat sat. Dog ran! \"Who?\" Ok"
        );
        assert_eq!(
            recapitalize("see fig. three, Mr. smith"),
            "See fig. three, Mr. smith"
        );
        assert_eq!(recapitalize("the end. Then more."), "The end. Then more.");
    }

    #[test]
    fn ids_are_unique_and_levels_valid() {
        let all = registry();
        let mut ids: Vec<_> = all.iter().map(|i| i.info().id).collect();
        ids.sort();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n);
        for inj in all {
            for &level in inj.info().default_levels {
                assert!(
                    check_level(inj.info(), level).is_ok(),
                    "{} {level}",
                    inj.info().id
                );
            }
        }
    }

    #[test]
    fn invalid_levels_and_missing_context_are_errors() {
        let t = create("truncation").unwrap();
        assert!(matches!(
            apply(t, "a b c", 1.5, 0, &Context::default()),
            Err(InjectError::InvalidLevel { .. })
        ));
        let c = create("copy_source").unwrap();
        assert!(matches!(
            apply(c, "a b c", 1.0, 0, &Context::default()),
            Err(InjectError::MissingContext { .. })
        ));
        assert!(matches!(create("nope"), Err(InjectError::Unknown(_))));
    }
}
