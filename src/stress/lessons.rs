//! Lessons: each paper's headline blind spot as a short sequence of steps.
//! A step sets up texts (written for Blindspot, no dataset text), applies
//! an injection or runs an attack, scores the metrics through the engine
//! and checks its claim on the numbers it just computed: a claim that does
//! not hold on them is reported as not holding, never shown as a fact.
//! The page shows the steps ([`registry`]) and runs them ([`run_step`]);
//! the tests run the same steps natively.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use super::attack::{
    Attack, AttackConfig, AttackOutcome, AttackTools, Goal, Strategy, pair_z_norm,
};
use crate::inject::{self, Context};
use crate::metrics::mauve;
use crate::metrics::{Engine, EngineError, MetricId, MetricSpec, ModelSlot, Segment};
use crate::models::{LmTokenizer, ModelError};

/// A lesson: one finding of one paper.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lesson {
    /// Stable id (the page's links use it).
    pub id: String,
    /// Title.
    pub title: String,
    /// Where the finding comes from.
    pub paper: String,
    /// The finding in two sentences.
    pub finding: String,
    /// The model the paper used where ours differs (shown with the offer to load it).
    pub paper_model: Option<String>,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl Lesson {
    /// What the lesson's steps score with, in words ("lexical metrics and
    /// MiniLM", "GPT-2"), from the model kinds of their metrics.
    pub fn runs_with(&self) -> String {
        use crate::metrics::ModelKind;
        let kinds: Vec<Option<ModelKind>> = self
            .steps
            .iter()
            .flat_map(|s| &s.metrics)
            .map(|m| match m.parse::<MetricId>() {
                Ok(id) => id.info().model,
                // MAUVE's features are GPT-2's.
                Err(_) => Some(ModelKind::CausalLm),
            })
            .collect();
        let has = |k: Option<ModelKind>| kinds.contains(&k);
        let parts: Vec<&str> = [
            (has(None), "lexical metrics"),
            (has(Some(ModelKind::Encoder)), "MiniLM"),
            (has(Some(ModelKind::Nli)), "an NLI model"),
            (has(Some(ModelKind::CausalLm)), "GPT-2"),
            (has(Some(ModelKind::MaskedLm)), "a masked LM"),
            (has(Some(ModelKind::Seq2SeqLm)), "UniEval's T5"),
            (has(Some(ModelKind::ChatLm)), "an LLM judge"),
        ]
        .into_iter()
        .filter_map(|(on, words)| on.then_some(words))
        .collect();
        match parts.as_slice() {
            [] => "the lexical metrics".to_owned(),
            [one] => (*one).to_owned(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        }
    }
}

/// The texts a step starts from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Texts {
    /// Source (article, sentence to translate), may be empty.
    pub source: String,
    /// Reference.
    pub reference: String,
    /// Hypothesis.
    pub hypothesis: String,
}

/// What a step does to the hypothesis.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Action {
    /// Only score.
    Score,
    /// Apply an injection at a level with a seed.
    Inject {
        /// Injection id.
        injection: String,
        /// Level.
        level: f64,
        /// Seed.
        seed: u64,
    },
    /// Score other hypotheses beside the first.
    Compare {
        /// `(label, text)` of each other hypothesis.
        others: Vec<(String, String)>,
    },
    /// Run the spurious-correlate audit ([SPUR]) on the bundled SummEval-format
    /// sample (6 articles × 4 summaries written for Blindspot); the step's
    /// "texts" are then the audit's columns and its numbers Kendall's τ.
    Audit {
        /// Score each summary against its article instead of the references,
        /// as a reference-free metric does.
        reference_free: bool,
    },
    /// Corrupt 10 GPT-2 tokens of the hypothesis at the start, in the
    /// middle and at the end (a positioned-error injection's variants 1, 2
    /// and 3): the step's texts are the hypothesis and the three.
    Positioned {
        /// Injection id (`positioned_random` or `positioned_shuffle`).
        injection: String,
        /// Seed.
        seed: u64,
    },
    /// The same over the lesson's passages ([`passages`]), looking at what
    /// MAUVE sees of each text, its features (the last token's final hidden
    /// state, [`mauve::features`]): the cosine between a passage's features
    /// and its corrupted copy's, averaged over the passages, per position
    /// (the clean passages against themselves first).
    PositionedFeatures {
        /// Injection id.
        injection: String,
        /// Seed of the first passage (the next ones add their index).
        seed: u64,
        /// Which model featurises the texts.
        features: Featuriser,
    },
    /// Run an adversarial search on the hypothesis.
    Attack {
        /// The metric attacked.
        metric: String,
        /// Goal.
        goal: Goal,
        /// Strategy.
        strategy: Strategy,
        /// Query budget.
        budget: usize,
    },
}

impl Action {
    /// Whether the step places errors on GPT-2 tokens (needs
    /// [`LessonModels::lm_tokenizer`]).
    pub fn uses_lm_tokenizer(&self) -> bool {
        matches!(
            self,
            Action::Positioned { .. } | Action::PositionedFeatures { .. }
        )
    }
}

/// Which loaded model gives MAUVE its features in a [`Action::PositionedFeatures`] step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Featuriser {
    /// The causal language model (GPT-2: MAUVE's default features).
    CausalLm,
    /// The BERTScore encoder (the bundled MiniLM offline).
    Encoder,
}

/// What a step claims, checked on its numbers. `a` and `b` index the
/// step's texts: 0 is the hypothesis, then the action's results in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Claim {
    /// `metric` scores text `b` at least `value[a] - slack` (it barely drops, or rises).
    Barely {
        /// Metric id.
        metric: String,
        /// Text compared with.
        a: usize,
        /// Text that should not score much lower.
        b: usize,
        /// The largest drop still called "barely".
        slack: f64,
    },
    /// `metric` scores text `a` above text `b`.
    Higher {
        /// Metric id.
        metric: String,
        /// Text that scores higher.
        a: usize,
        /// Text that scores lower.
        b: usize,
    },
    /// The drop from text 0 to text `a` exceeds the drop to text `b`.
    DropsMore {
        /// Metric id.
        metric: String,
        /// Text whose drop is larger.
        a: usize,
        /// Text whose drop is smaller.
        b: usize,
    },
    /// `metric` scores text `a` above every other text.
    Highest {
        /// Metric id.
        metric: String,
        /// Text that scores highest.
        a: usize,
    },
    /// `metric` scores text `a` below every other text.
    Lowest {
        /// Metric id.
        metric: String,
        /// Text that scores lowest.
        a: usize,
    },
    /// In an audit step, `metric` correlates more with the correlate column
    /// `correlate` than with the human column `human` (by |Kendall τ|, the
    /// audit's flag rule).
    TracksMore {
        /// Metric id.
        metric: String,
        /// The correlate's column label (`length`...).
        correlate: String,
        /// The human dimension's column label (`relevance`...).
        human: String,
    },
    /// The step's attack met its goal.
    AttackMet,
    /// A first look: the numbers later steps compare with.
    Baseline {
        /// Metric id.
        metric: String,
    },
}

/// One step of a lesson.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Title.
    pub title: String,
    /// What the step does and what to look for.
    pub explain: String,
    /// The texts it starts from.
    pub texts: Texts,
    /// What it does.
    pub action: Action,
    /// Metrics shown.
    pub metrics: Vec<String>,
    /// What the numbers should show.
    pub claim: Claim,
    /// Why it happens (shown once the step has run).
    pub why: String,
    /// The registry model the page offers to load when the step's model is
    /// missing (a BERTScore step offers the bundled MiniLM instead).
    pub model_offer: Option<String>,
}

/// The NLI model a lesson offers: small enough for a browser.
pub const BROWSER_NLI: &str = "cross-encoder/nli-distilroberta-base";

/// The causal language model a lesson offers (the paper's GPT-2).
pub const BROWSER_LM: &str = "gpt2";

/// The evaluator a lesson offers for UniEval (the paper's).
pub const UNIEVAL: &str = "MingZhong/unieval-sum";

/// The LLM judge a lesson offers: the smallest Qwen2.5 instruction model.
pub const JUDGE: &str = "Qwen/Qwen2.5-0.5B-Instruct";

/// The row id of a features step: the cosine between a text's MAUVE features
/// and its corrupted copy's.
pub const FEATURE_COSINE: &str = "mauve-feature-cosine";

/// Where a positioned error sits, by the injection's variant (1, 2, 3).
const POSITIONS: [&str; 3] = [
    "errors at the start",
    "errors in the middle",
    "errors at the end",
];

/// One metric's scores of the step's texts.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Metric id.
    pub metric: String,
    /// Display name.
    pub name: String,
    /// One value per text.
    pub values: Vec<f64>,
    /// The metric's signature.
    pub signature: String,
}

/// A claim checked on the step's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    /// Whether it held.
    pub held: bool,
    /// The claim, with the numbers it was checked on.
    pub statement: String,
}

/// What running a step gave.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// `(label, text)` of each text scored: the hypothesis first.
    pub texts: Vec<(String, String)>,
    /// One row per metric.
    pub rows: Vec<Row>,
    /// The attack's outcome, for attack steps.
    pub attack: Option<AttackOutcome>,
    /// The claim, checked.
    pub claim: Checked,
}

impl StepResult {
    /// The result of a step without an attack, its claim checked on `rows`.
    fn checked(s: &Step, texts: Vec<(String, String)>, rows: Vec<Row>) -> Self {
        let claim = check(&s.claim, &rows, &texts, None);
        Self {
            texts,
            rows,
            attack: None,
            claim,
        }
    }
}

/// Why a step could not run.
#[derive(Debug, thiserror::Error)]
pub enum LessonError {
    /// Unknown lesson or step.
    #[error("{0}")]
    NotFound(String),
    /// A metric needs a model that is not loaded.
    #[error("{0}")]
    Needs(String),
    /// Scoring, injecting or attacking failed.
    #[error("{0}")]
    Failed(String),
}

impl From<EngineError> for LessonError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::NoModel(m) => LessonError::Needs(m),
            other => LessonError::Failed(other.to_string()),
        }
    }
}

/// The lessons as written, one file each, in teaching order: prose and
/// steps are data (`src/stress/lessons/*.toml`), read once.
const FILES: [&str; 9] = [
    include_str!("lessons/1-truncation.toml"),
    include_str!("lessons/2-paraphrase.toml"),
    include_str!("lessons/3-small-edits.toml"),
    include_str!("lessons/4-raise.toml"),
    include_str!("lessons/5-position.toml"),
    include_str!("lessons/6-copy-source.toml"),
    include_str!("lessons/7-spurious.toml"),
    include_str!("lessons/8-injection.toml"),
    include_str!("lessons/9-judge.toml"),
];

/// The named text sets steps start from, and the passages of the
/// positioned-errors lesson.
const TEXTS: &str = include_str!("lessons/texts.toml");

/// `texts.toml`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextsFile {
    passages: Vec<String>,
    sets: std::collections::BTreeMap<String, Texts>,
}

/// A lesson file: a [`Lesson`] whose steps may name a text set.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LessonFile {
    id: String,
    title: String,
    paper: String,
    finding: String,
    #[serde(default)]
    paper_model: Option<String>,
    steps: Vec<StepFile>,
}

/// A step as written: its texts inline or a set's name.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StepFile {
    title: String,
    explain: String,
    texts: TextsRef,
    action: Action,
    metrics: Vec<String>,
    claim: Claim,
    why: String,
    #[serde(default)]
    model_offer: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TextsRef {
    Named(String),
    Inline(Texts),
}

/// The lessons and the passages, read from their files once.
struct Written {
    lessons: Vec<Lesson>,
    passages: Vec<String>,
}

static WRITTEN: LazyLock<Result<Written, String>> = LazyLock::new(read_written);

fn read_written() -> Result<Written, String> {
    let texts: TextsFile = toml::from_str(TEXTS).map_err(|e| format!("lessons/texts.toml: {e}"))?;
    let lessons = FILES
        .iter()
        .map(|file| {
            let l: LessonFile = toml::from_str(file).map_err(|e| format!("a lesson file: {e}"))?;
            let steps = l
                .steps
                .into_iter()
                .map(|s| {
                    let texts = match s.texts {
                        TextsRef::Inline(t) => t,
                        TextsRef::Named(name) => {
                            texts.sets.get(&name).cloned().ok_or_else(|| {
                                format!("lesson {}: no text set '{name}' in texts.toml", l.id)
                            })?
                        }
                    };
                    Ok(Step {
                        title: s.title,
                        explain: s.explain,
                        texts,
                        action: s.action,
                        metrics: s.metrics,
                        claim: s.claim,
                        why: s.why,
                        model_offer: s.model_offer,
                    })
                })
                .collect::<Result<_, String>>()?;
            Ok(Lesson {
                id: l.id,
                title: l.title,
                paper: l.paper,
                finding: l.finding,
                paper_model: l.paper_model,
                steps,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Written {
        lessons,
        passages: texts.passages,
    })
}

/// The lessons and passages as read, or why the files compiled in do not
/// read (a unit test keeps them reading).
fn written() -> Result<&'static Written, LessonError> {
    WRITTEN
        .as_ref()
        .map_err(|e| LessonError::Failed(format!("the lessons do not read: {e}")))
}

/// Every lesson, in teaching order.
pub fn registry() -> Result<&'static [Lesson], LessonError> {
    Ok(&written()?.lessons)
}

/// Eight short passages written for Blindspot: the positioned-errors lesson
/// corrupts them and compares their MAUVE features (the first is also its
/// single text).
pub fn passages() -> Result<&'static [String], LessonError> {
    Ok(&written()?.passages)
}

/// The models a lesson step may use besides the model-free metrics.
#[derive(Default)]
pub struct LessonModels<'a> {
    /// The BERTScore model (a loaded model's name, or a folder natively).
    pub bertscore: Option<String>,
    /// The NLI model MENLI runs on.
    pub nli: Option<String>,
    /// The causal language model GPT-PPL runs on (also MAUVE's GPT-2 features).
    pub causal_lm: Option<String>,
    /// The encoder-decoder UniEval runs on (its evaluator, a T5).
    pub seq2seq_lm: Option<String>,
    /// The LLM judge (an instruction model with a chat template) G-Eval,
    /// GEMBA-DA and the pairwise judge run on.
    pub judge: Option<String>,
    /// GPT-2's tokenizer, for the positioned errors.
    pub lm_tokenizer: Option<&'a LmTokenizer>,
    /// Word neighbours for the raising search.
    pub neighbours: Option<&'a super::attack::Neighbours>,
}

/// A registry model's size as the page writes it, in brackets: " (329 MB)", " (1.6 GB)".
fn size(id: &str) -> String {
    crate::models::registry::find(id).map_or(String::new(), |m| {
        if m.size_mb >= 1000.0 {
            format!(" ({:.1} GB)", m.size_mb / 1000.0)
        } else {
            format!(" ({} MB)", m.size_mb)
        }
    })
}

fn bertscore_model(models: &LessonModels) -> Result<String, LessonError> {
    models.bertscore.clone().ok_or_else(|| {
        LessonError::Needs(
            "this step shows BERTScore: load a BERTScore model (the bundled MiniLM is enough)"
                .into(),
        )
    })
}

fn causal_lm(models: &LessonModels) -> Result<String, LessonError> {
    models.causal_lm.clone().ok_or_else(|| {
        LessonError::Needs(format!(
            "this step needs a causal language model: load one, e.g. {BROWSER_LM}{} (the paper's GPT-2)",
            size(BROWSER_LM)
        ))
    })
}

fn judge(models: &LessonModels) -> Result<String, LessonError> {
    models.judge.clone().ok_or_else(|| {
        LessonError::Needs(format!(
            "this step asks an LLM judge: load an instruction model with a chat template, e.g. \
             {JUDGE}{}",
            size(JUDGE)
        ))
    })
}

fn spec(id: &str, models: &LessonModels) -> Result<MetricSpec, LessonError> {
    let metric: MetricId = id
        .parse()
        .map_err(|e: crate::metrics::ParseError| LessonError::Failed(e.to_string()))?;
    let mut spec = MetricSpec::default_for(metric);
    match &mut spec {
        MetricSpec::BertScore(b) => b.model = Some(bertscore_model(models)?),
        MetricSpec::GptPpl(g) => g.model = Some(causal_lm(models)?),
        MetricSpec::UniEval(u) => {
            u.model = Some(models.seq2seq_lm.clone().ok_or_else(|| {
                LessonError::Needs(format!(
                    "this step asks UniEval's evaluator: load it, {UNIEVAL}{} (a T5, the \
                     paper's; a very large download)",
                    size(UNIEVAL)
                ))
            })?)
        }
        MetricSpec::GEval(g) => g.model = Some(judge(models)?),
        MetricSpec::GembaDa(g) => g.model = Some(judge(models)?),
        MetricSpec::GembaMqm(g) => g.model = Some(judge(models)?),
        MetricSpec::Pairwise(p) => p.model = Some(judge(models)?),
        MetricSpec::CustomJudge(j) => j.model = Some(judge(models)?),
        MetricSpec::Menli(m) => m.model = Some(models.nli.clone().ok_or_else(|| {
            LessonError::Needs(format!(
                "this step asks an NLI model: load one, e.g. {BROWSER_NLI}{}, small enough for a \
                     browser (MENLI used microsoft/deberta-large-mnli{})",
                size(BROWSER_NLI),
                size("microsoft/deberta-large-mnli")
            ))
        })?),
        _ => {}
    }
    Ok(spec)
}

/// `text` with a positioned error at the start, in the middle and at the end.
fn positioned(
    injection: &str,
    text: &str,
    seed: u64,
    models: &LessonModels,
) -> Result<Vec<String>, LessonError> {
    let tokenizer = models.lm_tokenizer.ok_or_else(|| {
        LessonError::Needs(
            "this step corrupts GPT-2 tokens: load GPT-2's tokenizer (its vocabulary)".into(),
        )
    })?;
    let inj = inject::create(injection).map_err(|e| LessonError::Failed(e.to_string()))?;
    let ctx = Context {
        lm_tokenizer: Some(tokenizer),
        ..Context::default()
    };
    (1..=POSITIONS.len())
        .map(|variant| {
            let o = inject::apply(inj, text, variant as f64, seed, &ctx)
                .map_err(|e| LessonError::Failed(e.to_string()))?;
            // An unchanged text would make "moved less" claims hold vacuously.
            if !o.applied {
                return Err(LessonError::Failed(format!(
                    "{injection} did not apply: {}",
                    o.reason.unwrap_or_default()
                )));
            }
            Ok(o.text)
        })
        .collect()
}

/// Runs step `step` of lesson `lesson`: applies its action, scores its
/// texts and checks its claim on those numbers.
pub async fn run_step(
    engine: &Engine,
    lesson: &str,
    step: usize,
    models: &LessonModels<'_>,
) -> Result<StepResult, LessonError> {
    let lessons = registry()?;
    let l = lessons
        .iter()
        .find(|l| l.id == lesson)
        .ok_or_else(|| LessonError::NotFound(format!("no lesson {lesson:?}")))?;
    let s = l.steps.get(step).ok_or_else(|| {
        LessonError::NotFound(format!("lesson {lesson:?} has {} steps", l.steps.len()))
    })?;
    match &s.action {
        Action::Audit { reference_free } => {
            return audit_step(engine, s, *reference_free, models).await;
        }
        Action::PositionedFeatures {
            injection,
            seed,
            features,
        } => {
            return positioned_features_step(engine, s, injection, *seed, *features, models).await;
        }
        _ => {}
    }
    let t = &s.texts;
    let src = (!t.source.is_empty()).then_some(t.source.as_str());
    let mut texts: Vec<(String, String)> = vec![("hypothesis".into(), t.hypothesis.clone())];
    let mut attack = None;
    match &s.action {
        Action::Score => {}
        Action::Inject {
            injection,
            level,
            seed,
        } => {
            let inj = inject::create(injection).map_err(|e| LessonError::Failed(e.to_string()))?;
            let ctx = Context {
                source: src,
                ..Context::default()
            };
            let out = inject::apply(inj, &t.hypothesis, *level, *seed, &ctx)
                .map_err(|e| LessonError::Failed(e.to_string()))?;
            texts.push((inj.info().name.to_owned(), out.text));
        }
        Action::Compare { others } => {
            texts.extend(others.iter().map(|(l, t)| (l.clone(), t.clone())));
        }
        Action::Positioned { injection, seed } => {
            let variants = positioned(injection, &t.hypothesis, *seed, models)?;
            texts[0].0 = "clean".into();
            texts.extend(POSITIONS.iter().map(|p| (*p).to_owned()).zip(variants));
        }
        Action::Audit { .. } | Action::PositionedFeatures { .. } => {
            unreachable!("audit and set steps return above")
        }
        Action::Attack {
            metric,
            goal,
            strategy,
            budget,
        } => {
            let spec = spec(metric, models)?;
            let mut config = AttackConfig::new(*goal, *strategy);
            config.budget = *budget;
            let tools = AttackTools {
                neighbours: models.neighbours,
                ..AttackTools::default()
            };
            let fail = |e: super::attack::AttackError| LessonError::Failed(e.to_string());
            let z = pair_z_norm(engine, &spec, &t.hypothesis, &[t.reference.as_str()])
                .await
                .map_err(fail)?;
            let mut a = Attack::new(
                engine,
                &spec,
                &config,
                &tools,
                z,
                &t.hypothesis,
                &[t.reference.as_str()],
                None,
            )
            .await
            .map_err(fail)?;
            while !a.step().await.map_err(fail)? {}
            let o = a.outcome(0, "lesson");
            texts.push(("found by the search".into(), o.text.clone()));
            attack = Some(o);
        }
    }
    let refs = [t.reference.as_str()];
    let segments: Vec<Segment> = texts
        .iter()
        .map(|(_, h)| Segment {
            hyp: h,
            refs: &refs,
            src,
        })
        .collect();
    let specs: Vec<MetricSpec> = s
        .metrics
        .iter()
        .map(|m| spec(m, models))
        .collect::<Result<_, _>>()?;
    let columns = engine.score(&specs, &segments).await?;
    let rows: Vec<Row> = columns
        .into_iter()
        .zip(&s.metrics)
        .map(|(c, id)| Row {
            metric: id.clone(),
            name: c.spec.id().info().name.to_owned(),
            values: c.values(),
            signature: c.signature.to_string(),
        })
        .collect();
    let claim = check(&s.claim, &rows, &texts, attack.as_ref());
    Ok(StepResult {
        texts,
        rows,
        attack,
        claim,
    })
}

/// An audit step: the bundled SummEval-format sample audited with the
/// step's metrics; one column per human dimension, then per correlate.
async fn audit_step(
    engine: &Engine,
    s: &Step,
    reference_free: bool,
    models: &LessonModels<'_>,
) -> Result<StepResult, LessonError> {
    let sample = crate::data::bundled_sample("audit")
        .ok_or_else(|| LessonError::Failed("no bundled audit sample".into()))?;
    let mut docs = crate::data::load_summeval(sample.text).rows;
    if reference_free {
        for d in &mut docs {
            let article = d.item.src.clone().unwrap_or_default();
            d.item.gold = article;
            d.item.refs.clear();
        }
    }
    let specs: Vec<MetricSpec> = s
        .metrics
        .iter()
        .map(|m| spec(m, models))
        .collect::<Result<_, _>>()?;
    let report = super::audit::run_audit(
        "bundled sample",
        &docs,
        &specs,
        engine,
        None,
        async |_, _| true,
    )
    .await?;
    let about = |c: &str| match c {
        "length" => "summary length in words".to_owned(),
        "coverage" => "share of the summary's words found in the article".to_owned(),
        "density" => "mean squared length of the copied fragments, per word".to_owned(),
        human => format!("the sample's {human} ratings (1–5, one author: a demonstration)"),
    };
    let texts: Vec<(String, String)> = report
        .dimensions
        .iter()
        .chain(&report.correlates)
        .map(|c| (c.clone(), about(c)))
        .collect();
    let rows: Vec<Row> = report
        .metrics
        .iter()
        .zip(&s.metrics)
        .map(|(m, id)| Row {
            metric: (*id).to_owned(),
            name: format!("{} (Kendall τ)", m.metric.name),
            values: m
                .human
                .iter()
                .chain(&m.correlates)
                .map(|c| c.kendall)
                .collect(),
            signature: m.metric.signature.clone(),
        })
        .collect();
    Ok(StepResult::checked(s, texts, rows))
}

/// A positioned-errors step over the [`passages`]: how far each passage's
/// MAUVE features move when its error sits at each position.
async fn positioned_features_step(
    engine: &Engine,
    s: &Step,
    injection: &str,
    seed: u64,
    features: Featuriser,
    models: &LessonModels<'_>,
) -> Result<StepResult, LessonError> {
    let name = match features {
        Featuriser::CausalLm => causal_lm(models)?,
        Featuriser::Encoder => bertscore_model(models)?,
    };
    let plm = engine.model(ModelSlot::Mauve, Some(&name))?;
    // Set k holds every passage with its error at position k.
    let passages = passages()?;
    let mut sets: Vec<Vec<String>> = vec![Vec::new(); POSITIONS.len()];
    for (i, p) in passages.iter().enumerate() {
        for (set, v) in sets
            .iter_mut()
            .zip(positioned(injection, p, seed + i as u64, models)?)
        {
            // Trimmed as MAUVE's CLI and page take texts (a random first
            // token may start with a space).
            set.push(v.trim().to_owned());
        }
    }
    let model = |e: ModelError| LessonError::Failed(format!("{}: {e}", plm.name));
    // As MAUVE prepares them: each row L2-normalised, then centred on the
    // mean of every text here (its PCA centres), so a direction all texts
    // share (GPT-2's states have a few huge ones) does not hide the change.
    let clean: Vec<&str> = passages.iter().map(String::as_str).collect();
    let mut all = vec![mauve::features(&plm, &clean).await.map_err(model)?];
    for set in &sets {
        let texts: Vec<&str> = set.iter().map(String::as_str).collect();
        all.push(mauve::features(&plm, &texts).await.map_err(model)?);
    }
    let views: Vec<_> = all.iter().map(|a| a.view()).collect();
    let mut stacked = ndarray::concatenate(ndarray::Axis(0), &views)
        .map_err(|e| LessonError::Failed(e.to_string()))?
        .mapv(f64::from);
    mauve::normalise_rows(&mut stacked);
    let mean = stacked.mean_axis(ndarray::Axis(0)).expect("texts");
    stacked -= &mean;
    let n = passages.len();
    let values: Vec<f64> = (0..all.len())
        .map(|k| {
            let cosines = (0..n).map(|i| {
                let (a, b) = (stacked.row(i), stacked.row(k * n + i));
                a.dot(&b) / (a.dot(&a).sqrt() * b.dot(&b).sqrt())
            });
            cosines.sum::<f64>() / n as f64
        })
        .collect();
    let texts: Vec<(String, String)> = std::iter::once(("clean".to_owned(), passages[0].clone()))
        .chain(
            POSITIONS
                .iter()
                .zip(&sets)
                .map(|(p, set)| ((*p).to_owned(), set[0].clone())),
        )
        .collect();
    let signature = crate::metrics::Signature::new(FEATURE_COSINE)
        .with("model", &plm.name)
        .with("feat", "last-token")
        .with("prep", "l2+centred")
        .with("inj", injection)
        .with("seed", seed)
        .with("n", n)
        .with("prec", plm.precision_label());
    let rows = vec![Row {
        metric: FEATURE_COSINE.into(),
        name: format!(
            "MAUVE features' cosine to the clean passage ({}, mean of {n})",
            plm.name
        ),
        values,
        signature: signature.to_string(),
    }];
    Ok(StepResult::checked(s, texts, rows))
}

fn check(
    claim: &Claim,
    rows: &[Row],
    texts: &[(String, String)],
    attack: Option<&AttackOutcome>,
) -> Checked {
    let row = |m: &str| rows.iter().find(|r| r.metric == m);
    let f = |v: f64| format!("{v:.4}");
    let label = |i: usize| texts[i].0.as_str();
    match claim {
        Claim::Barely {
            metric,
            a,
            b,
            slack,
        } => {
            let r = row(metric).expect("a claim's metric is shown");
            let drop = r.values[*a] - r.values[*b];
            let moved = if drop > 0.0 {
                format!("drops by {}", f(drop))
            } else if drop < 0.0 {
                format!("rises by {}", f(-drop))
            } else {
                "does not move".to_owned()
            };
            Checked {
                held: drop <= *slack,
                statement: format!(
                    "{} {moved} for the {}: {} → {} (the claim: a drop of at most {slack})",
                    r.name,
                    label(*b),
                    f(r.values[*a]),
                    f(r.values[*b]),
                ),
            }
        }
        Claim::Baseline { metric } => {
            let r = row(metric).expect("shown");
            Checked {
                held: true,
                statement: format!("{} of the {}: {}", r.name, label(0), f(r.values[0])),
            }
        }
        Claim::Higher { metric, a, b } => {
            let r = row(metric).expect("shown");
            let held = r.values[*a] > r.values[*b];
            Checked {
                held,
                statement: format!(
                    "{} {} the {} ({}) to the {} ({})",
                    r.name,
                    if held { "prefers" } else { "does not prefer" },
                    label(*a),
                    f(r.values[*a]),
                    label(*b),
                    f(r.values[*b])
                ),
            }
        }
        Claim::DropsMore { metric, a, b } => {
            let r = row(metric).expect("shown");
            let (da, db) = (r.values[0] - r.values[*a], r.values[0] - r.values[*b]);
            Checked {
                held: da > db,
                statement: format!(
                    "{} {} for the {} ({}) than for the {} ({})",
                    r.name,
                    if da > db {
                        "drops more"
                    } else {
                        "does not drop more"
                    },
                    label(*a),
                    f(da),
                    label(*b),
                    f(db)
                ),
            }
        }
        Claim::Highest { metric, a } | Claim::Lowest { metric, a } => {
            let r = row(metric).expect("shown");
            let highest = matches!(claim, Claim::Highest { .. });
            let others: Vec<String> = (0..r.values.len())
                .filter(|&i| i != *a)
                .map(|i| format!("{} {}", label(i), f(r.values[i])))
                .collect();
            let beyond = |i: usize| {
                if highest {
                    r.values[*a] > r.values[i]
                } else {
                    r.values[*a] < r.values[i]
                }
            };
            let held = (0..r.values.len()).all(|i| i == *a || beyond(i));
            let side = if highest { "above" } else { "below" };
            Checked {
                held,
                statement: format!(
                    "{} scores the {} ({}) {}{side} every other text ({})",
                    r.name,
                    label(*a),
                    f(r.values[*a]),
                    if held { "" } else { "not " },
                    others.join(", ")
                ),
            }
        }
        Claim::TracksMore {
            metric,
            correlate,
            human,
        } => {
            let r = row(metric).expect("shown");
            let at = |c: &str| {
                texts
                    .iter()
                    .position(|(l, _)| l == c)
                    .expect("a claim's columns are the audit's")
            };
            let (c, h) = (r.values[at(correlate)], r.values[at(human)]);
            Checked {
                held: c.abs() > h.abs(),
                statement: format!(
                    "{} correlates {} with {correlate} (τ {}) than with the {human} ratings (τ {})",
                    r.name.trim_end_matches(" (Kendall τ)"),
                    if c.abs() > h.abs() { "more" } else { "less" },
                    f(c),
                    f(h)
                ),
            }
        }
        Claim::AttackMet => {
            let o = attack.expect("an attack step");
            Checked {
                held: o.success,
                statement: format!(
                    "the search {} its goal: {} → {} ({:+.2} z) with {} of the words changed, {} queries",
                    if o.success { "met" } else { "did not meet" },
                    f(o.score),
                    f(o.final_score),
                    o.change_z,
                    format_args!("{:.0}%", 100.0 * o.perturbation),
                    o.queries
                ),
            }
        }
    }
}

#[cfg(test)]
mod written_tests {
    use super::*;

    #[test]
    fn the_lesson_files_read_and_name_only_what_exists() {
        let lessons = registry().unwrap();
        assert_eq!(lessons.len(), FILES.len());
        assert_eq!(passages().unwrap().len(), 8);
        let mut ids = std::collections::HashSet::new();
        for l in lessons {
            assert!(ids.insert(&l.id), "lesson {} twice", l.id);
            assert!(!l.steps.is_empty(), "{}", l.id);
            for s in &l.steps {
                for m in &s.metrics {
                    assert!(
                        m.parse::<MetricId>().is_ok() || m == FEATURE_COSINE,
                        "{}: no metric {m}",
                        l.id
                    );
                }
                match &s.action {
                    Action::Inject { injection, .. }
                    | Action::Positioned { injection, .. }
                    | Action::PositionedFeatures { injection, .. } => {
                        assert!(inject::create(injection).is_ok(), "{}: {injection}", l.id);
                    }
                    Action::Attack { metric, .. } => assert!(s.metrics.contains(metric)),
                    _ => {}
                }
                let metric = match &s.claim {
                    Claim::Barely { metric, .. }
                    | Claim::Higher { metric, .. }
                    | Claim::DropsMore { metric, .. }
                    | Claim::Highest { metric, .. }
                    | Claim::Lowest { metric, .. }
                    | Claim::TracksMore { metric, .. }
                    | Claim::Baseline { metric } => Some(metric),
                    Claim::AttackMet => None,
                };
                if let Some(metric) = metric {
                    assert!(s.metrics.contains(metric), "{}: {metric} not shown", l.id);
                }
            }
        }
    }

    #[test]
    fn a_lesson_file_with_an_unknown_field_or_text_set_does_not_read() {
        let typo = FILES[0].replacen("finding =", "findng =", 1);
        assert!(toml::from_str::<LessonFile>(&typo).is_err());
        let texts: TextsFile = toml::from_str(TEXTS).unwrap();
        assert!(!texts.sets.contains_key("no-such-set"));
    }
}
