//! Adversarial search ([ADV], [BS] §6, SPEC 1.3): find small edits of a
//! gold hypothesis that a metric over-penalises, that make it inconsistent
//! with itself, or that raise it while the text degrades.
//!
//! Every metric is attacked the same way, through the metric engine: the
//! search only sees scores, so lexical and model-based metrics need no
//! attack code of their own. Scores are z-normalised by the mean and
//! standard deviation (population, numpy's default) of the metric's scores
//! of the original texts of the dataset attacked ([`ZNorm`]).
//!
//! A search is a state machine ([`Attack`]): each [`Attack::step`] does one
//! unit of work (a word position, a beam iteration, a generation), so the
//! page can show progress and stop between steps; the CLI loops to the end.
//! Every strategy is deterministic for a seed: candidates are generated and
//! scored in a fixed order, and randomness comes from one seeded ChaCha8.

mod edits;
mod search;

use serde::{Deserialize, Serialize};

pub use edits::Neighbours;
pub use search::{
    Attack, AttackProgress, AttackTools, HelperError, ScorePool, check, score_hypotheses,
};

use super::suite::Shard;
use crate::data::{Damage, Item};
use crate::inject::Edit;
use crate::metrics::spec::{ParseError, named_enum};
use crate::metrics::{Engine, EngineError, MetricSpec, Segment};

/// What the search is after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Goal {
    /// f(x) - f(x') above a z threshold (default 1.0) under the fluency
    /// constraint ([ADV]).
    OverPenalise,
    /// f(x, ref) - f(x', ref) above 0.4 z while f(x, x) - f(x', x) stays
    /// below 0.3 z ([ADV], for metrics that can score a text against
    /// itself). Both drops are in the same z units, the spread of f(x, ref)
    /// over the dataset (f(x, x) is constant for most metrics, so it has no
    /// spread of its own).
    Inconsistency,
    /// Raise f while the noise ratio reaches a preset value (default 0.3)
    /// ([BS] §6).
    Raise,
}

named_enum!(
    Goal,
    "attack goal",
    [
        (OverPenalise, "over-penalise"),
        (Inconsistency, "inconsistency"),
        (Raise, "raise"),
    ]
);

impl Goal {
    /// One line for `--help` and the page.
    pub fn description(self) -> &'static str {
        match self {
            Goal::OverPenalise => {
                "lower the score of a good text by more than the threshold (z units) with small edits"
            }
            Goal::Inconsistency => {
                "drop the score against the reference by more than the threshold (z) while the score \
                 against the original text drops by less than the self threshold"
            }
            Goal::Raise => "raise the score while edits degrade the text to the noise target",
        }
    }

    /// The metric-query budget per item (the raising search tries every
    /// word at each step, so it needs more).
    pub fn default_budget(self) -> usize {
        match self {
            Goal::OverPenalise | Goal::Inconsistency => 500,
            Goal::Raise => 3000,
        }
    }

    /// The z threshold ([ADV]: 1.0 for over-penalisation, 0.4 for the
    /// reference drop of self-inconsistency; raising: any rise).
    pub fn default_threshold(self) -> f64 {
        match self {
            Goal::OverPenalise => 1.0,
            Goal::Inconsistency => 0.4,
            Goal::Raise => 0.0,
        }
    }

    /// The strategy used when none is named.
    pub fn default_strategy(self) -> Strategy {
        match self {
            Goal::OverPenalise | Goal::Inconsistency => Strategy::DeepWordBug,
            Goal::Raise => Strategy::TokenGreedy,
        }
    }
}

/// How candidates are generated and searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Delete words in order of importance (leave-one-out).
    InputReduction,
    /// DeepWordBug: character edits (swap, substitute, delete, insert) of
    /// words in order of importance.
    DeepWordBug,
    /// CLARE: a masked LM's replace / insert / merge, beam search.
    Clare,
    /// Faster Alzantot: genetic search over input-embedding neighbour
    /// substitutions.
    Genetic,
    /// [BS] §6: at each step the best single-word edit of every untouched
    /// word (delete, the masked LM's top-k, the embedding neighbours).
    TokenGreedy,
}

named_enum!(
    Strategy,
    "attack strategy",
    [
        (InputReduction, "input-reduction"),
        (DeepWordBug, "deepwordbug"),
        (Clare, "clare"),
        (Genetic, "genetic"),
        (TokenGreedy, "token-greedy"),
    ]
);

impl Strategy {
    /// One line for `--help` and the page.
    pub fn description(self) -> &'static str {
        match self {
            Strategy::InputReduction => "delete words, most important first",
            Strategy::DeepWordBug => {
                "character edits (swap, substitute, delete, insert) of words, most important first"
            }
            Strategy::Clare => {
                "masked-LM replace / insert / merge, beam search (needs a masked LM)"
            }
            Strategy::Genetic => {
                "genetic word substitution with input-embedding neighbours (needs an encoder's embeddings)"
            }
            Strategy::TokenGreedy => {
                "best single-word edit each step: delete, masked-LM top-k, embedding neighbours"
            }
        }
    }

    /// Needs a masked LM.
    pub fn needs_masked_lm(self) -> bool {
        self == Strategy::Clare
    }

    /// Needs input-embedding neighbours.
    pub fn needs_neighbours(self) -> bool {
        self == Strategy::Genetic
    }
}

/// An attack's settings. Defaults are the papers' ([`AttackConfig::new`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttackConfig {
    /// What the search is after.
    pub goal: Goal,
    /// How it searches.
    pub strategy: Strategy,
    /// Metric queries per item (distinct texts scored; cached repeats are free).
    pub budget: usize,
    /// Seconds per item (None: no limit).
    pub time_budget_s: Option<f64>,
    /// Seed of every random choice.
    pub seed: u64,
    /// The goal's z threshold.
    pub threshold: f64,
    /// Inconsistency: the largest allowed drop against the original text (z).
    pub self_threshold: f64,
    /// Raise: the noise ratio (word edits / words) the text must reach.
    pub noise_target: f64,
    /// The most the fluency LM's perplexity may rise (used when an LM is given).
    pub max_ppl_rise: f64,
    /// Candidates per position from a masked LM or the embedding neighbours.
    pub candidates: usize,
    /// CLARE: beam width.
    pub beam: usize,
    /// CLARE: iterations.
    pub iterations: usize,
    /// Genetic: population size.
    pub population: usize,
    /// Genetic: generations.
    pub generations: usize,
}

impl AttackConfig {
    /// The papers' settings for `goal` with `strategy`: budget and threshold
    /// per goal, inconsistency's self threshold 0.3, noise target 0.3,
    /// perplexity rise 10, top-8 candidates, beam 2 x 10 iterations,
    /// population 30 x 15 generations.
    pub fn new(goal: Goal, strategy: Strategy) -> Self {
        Self {
            goal,
            strategy,
            budget: goal.default_budget(),
            time_budget_s: None,
            seed: 0,
            threshold: goal.default_threshold(),
            self_threshold: 0.3,
            noise_target: 0.3,
            max_ppl_rise: 10.0,
            candidates: 8,
            beam: 2,
            iterations: 10,
            population: 30,
            generations: 15,
        }
    }

    /// Refuses settings the search cannot run with.
    pub fn validate(&self) -> Result<(), AttackError> {
        let bad = |what: &str| Err(AttackError::Config(what.to_owned()));
        if self.budget == 0 {
            return bad("the query budget must be at least 1");
        }
        if self.time_budget_s.is_some_and(|t| t.is_nan() || t <= 0.0) {
            return bad("the time budget must be positive");
        }
        if !self.threshold.is_finite() || !self.self_threshold.is_finite() {
            return bad("thresholds must be finite numbers");
        }
        if self.noise_target.is_nan() || self.noise_target <= 0.0 || self.noise_target > 1.0 {
            return bad("the noise target must be in (0, 1]");
        }
        if self.max_ppl_rise.is_nan() || self.max_ppl_rise < 0.0 {
            return bad("the perplexity rise must be 0 or more");
        }
        if self.candidates == 0 || self.beam == 0 || self.iterations == 0 {
            return bad("candidates, beam and iterations must be at least 1");
        }
        if self.population < 2 || self.generations == 0 {
            return bad("the population must be at least 2 and generations at least 1");
        }
        Ok(())
    }
}

/// z-normalisation statistics of a metric over a dataset's original texts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ZNorm {
    /// Mean score.
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Texts it was computed over.
    pub count: usize,
}

impl ZNorm {
    /// From the original texts' scores; refuses fewer than two texts or a
    /// zero spread (nothing to measure z units by).
    pub fn from_scores(scores: &[f64]) -> Result<Self, AttackError> {
        let n = scores.len();
        if n < 2 {
            return Err(AttackError::Config(format!(
                "z-normalisation needs the scores of at least two texts ({n} given): attack a \
                 dataset of two items or more"
            )));
        }
        let mean = scores.iter().sum::<f64>() / n as f64;
        let std = (scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        // An infinite score (BARTScore's range reaches -inf) makes the
        // spread infinite or NaN: said as it is, not as flat scores
        // ([`z_norm`] names the item).
        if !std.is_finite() {
            return Err(AttackError::Config(
                "the original texts' scores are not all finite: z units are undefined".into(),
            ));
        }
        if std <= 0.0 {
            return Err(AttackError::Config(
                "every original text scores the same: z units are undefined".into(),
            ));
        }
        Ok(Self {
            mean,
            std,
            count: n,
        })
    }

    /// Refuses statistics [`ZNorm::from_scores`] cannot give (a copy read
    /// back from a file or the page's storage).
    pub fn check(&self) -> Result<(), Damage> {
        if self.count < 2 || !self.mean.is_finite() || !self.std.is_finite() || self.std <= 0.0 {
            return Err(Damage(format!(
                "its z statistics are impossible (mean {}, std {} over {} texts)",
                self.mean, self.std, self.count
            )));
        }
        Ok(())
    }
}

/// Why an attack could not run.
#[derive(Debug, thiserror::Error)]
pub enum AttackError {
    /// Settings or input that cannot be used.
    #[error("{0}")]
    Config(String),
    /// Scoring failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<ParseError> for AttackError {
    fn from(e: ParseError) -> Self {
        AttackError::Config(e.to_string())
    }
}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    /// The goal was met.
    Success,
    /// The query budget ran out.
    Budget,
    /// The time budget ran out.
    Time,
    /// No edit was left to try.
    Exhausted,
    /// Stopped by the user.
    Stopped,
}

/// One point of the score trajectory: after `queries` queries, the best
/// candidate so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryPoint {
    /// Metric queries so far.
    pub queries: usize,
    /// Raw score of the current best candidate.
    pub score: f64,
    /// Its objective (z units; higher is closer to the goal).
    pub objective: f64,
    /// Its noise ratio.
    pub noise: f64,
}

/// One item's attack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttackOutcome {
    /// Index of the item in the dataset (0-based).
    pub item: usize,
    /// Its id.
    pub id: String,
    /// Whether the goal was met (constraints included).
    pub success: bool,
    /// Why the search ended.
    pub stop: StopReason,
    /// The text attacked.
    pub original: String,
    /// The successful text, or the best one found (the last one for raise).
    pub text: String,
    /// Changed spans of `text`.
    pub edits: Vec<Edit>,
    /// Metric queries used.
    pub queries: usize,
    /// Fluency-LM queries used.
    pub lm_queries: usize,
    /// Word-level edit distance to the original.
    pub words_changed: usize,
    /// `words_changed` / the original's words (the noise ratio).
    pub perturbation: f64,
    /// The original's score against the references.
    pub score: f64,
    /// The final text's score.
    pub final_score: f64,
    /// (final_score - score) / std: negative when the metric dropped.
    pub change_z: f64,
    /// Inconsistency: (f(x, x) - f(x', x)) / std.
    pub self_drop_z: Option<f64>,
    /// Fluency LM perplexity of the original and the final text.
    pub ppl: Option<(f64, f64)>,
    /// Best candidate after each step.
    pub trajectory: Vec<TrajectoryPoint>,
}

impl AttackOutcome {
    /// Refuses an outcome no search could have given with z statistics `z`
    /// (a copy read back from a file or the page's storage): the edits,
    /// words changed and perturbation are derived again from the two texts,
    /// the change in z from the two scores, and the trajectory must be the
    /// search's (queries rising, finite scores).
    pub fn check(&self, z: &ZNorm) -> Result<(), Damage> {
        let bad = |what: &str| Err(Damage(format!("item {} ({what})", self.id)));
        if self.success != (self.stop == StopReason::Success) {
            return bad("its success and its reason for stopping disagree");
        }
        let (edits, distance) = crate::inject::diff(&self.original, &self.text);
        if edits != self.edits || distance != self.words_changed {
            return bad("its edits are not those between the original and the text found");
        }
        if self.perturbation != distance as f64 / original_words(&self.original) as f64 {
            return bad("its perturbation is not the words changed over the original's words");
        }
        if !self.score.is_finite() || !self.final_score.is_finite() {
            // (JSON cannot hold an infinite or NaN score either.)
            return bad("its scores are not finite numbers");
        }
        let change = (self.final_score - self.score) / z.std;
        if (self.change_z - change).abs() > 1e-9 * change.abs().max(1.0) {
            return bad("its change in z is not its score change over the z spread");
        }
        if self.self_drop_z.is_some_and(|d| !d.is_finite())
            || self
                .ppl
                .is_some_and(|(a, b)| !(a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0))
        {
            return bad("its self-drop or perplexities are not finite");
        }
        let mut queries = 0;
        for p in &self.trajectory {
            if p.queries < queries
                || p.queries > self.queries
                || !(p.score.is_finite() && p.objective.is_finite() && p.noise.is_finite())
            {
                return bad("its trajectory is not a search's");
            }
            queries = p.queries;
        }
        Ok(())
    }
}

/// The words of the text attacked, at least 1: what the perturbation (the
/// noise ratio) divides words changed by.
pub(crate) fn original_words(original: &str) -> usize {
    crate::text::words::words(original).len().max(1)
}

/// The attack paper's summary of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttackSummary {
    /// Items attacked.
    pub attempted: usize,
    /// Items where the goal was met.
    pub succeeded: usize,
    /// succeeded / attempted.
    pub success_rate: f64,
    /// Mean metric queries per item.
    pub mean_queries: f64,
    /// Mean perturbation (% of words) over successful items.
    pub mean_perturbed_pct: f64,
    /// Mean score change in z units over all items.
    pub mean_change_z: f64,
}

impl AttackSummary {
    /// Summarises outcomes.
    pub fn of(outcomes: &[AttackOutcome]) -> Self {
        let n = outcomes.len();
        let won: Vec<&AttackOutcome> = outcomes.iter().filter(|o| o.success).collect();
        let mean = |v: &mut dyn Iterator<Item = f64>, k: usize| {
            if k == 0 {
                0.0
            } else {
                v.sum::<f64>() / k as f64
            }
        };
        Self {
            attempted: n,
            succeeded: won.len(),
            success_rate: if n == 0 {
                0.0
            } else {
                won.len() as f64 / n as f64
            },
            mean_queries: mean(&mut outcomes.iter().map(|o| o.queries as f64), n),
            mean_perturbed_pct: mean(&mut won.iter().map(|o| 100.0 * o.perturbation), won.len()),
            mean_change_z: mean(&mut outcomes.iter().map(|o| o.change_z), n),
        }
    }
}

/// A run's header: everything that decides its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttackHeader {
    /// Always `attack` (tells a part file from a suite's).
    pub kind: String,
    /// `blindspot X.Y.Z`.
    pub tool: String,
    /// Dataset name.
    pub dataset: String,
    /// The metric attacked.
    pub metric: String,
    /// Its signature.
    pub signature: String,
    /// Settings.
    pub config: AttackConfig,
    /// What proposes edits and checks fluency (model names).
    pub tools: Vec<String>,
    /// z statistics over all items (every shard computes the same).
    pub z: ZNorm,
    /// Items in the dataset (all shards).
    pub items: usize,
    /// The shard this file holds, or None for a whole run.
    pub shard: Option<Shard>,
}

/// A run or one shard of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttackRun {
    /// Settings and statistics.
    pub header: AttackHeader,
    /// One outcome per item attacked, in item order.
    pub outcomes: Vec<AttackOutcome>,
}

impl AttackRun {
    /// The summary over the outcomes.
    pub fn summary(&self) -> AttackSummary {
        AttackSummary::of(&self.outcomes)
    }

    /// Refuses a run no search could have written (a part read back by
    /// `blindspot merge` or `stress --attack`): a valid z scale and shard,
    /// each outcome checked against it ([`AttackOutcome::check`]), items in
    /// order inside the shard's range.
    pub fn check(&self) -> Result<(), Damage> {
        let h = &self.header;
        h.z.check()?;
        let range = match h.shard {
            Some(s) if !s.is_valid() => {
                return Err(Damage(format!(
                    "its shard {}/{} is not a shard",
                    s.index, s.count
                )));
            }
            Some(s) => s.range(h.items),
            None => 0..h.items,
        };
        let mut next = range.start;
        for o in &self.outcomes {
            if o.item < next || o.item >= range.end {
                return Err(Damage(format!(
                    "item {} is out of order or outside the items {}..{} it covers",
                    o.item, range.start, range.end
                )));
            }
            next = o.item + 1;
            o.check(&h.z)?;
        }
        Ok(())
    }

    /// The run as a suite report lists it: what was attacked, how, and the
    /// summary. Refuses a shard (its summary would cover part of the items).
    pub fn entry(&self) -> Result<AttackEntry, AttackError> {
        let h = &self.header;
        if let Some(shard) = h.shard {
            return Err(AttackError::Config(format!(
                "the attack on {} is shard {}/{}: combine the parts with `blindspot merge` first",
                h.dataset, shard.index, shard.count
            )));
        }
        Ok(AttackEntry {
            header: h.clone(),
            summary: self.summary(),
        })
    }
}

/// An attack run's summary in a stress suite's report: its header and the
/// summary (the items' outcomes stay in the run's own results).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttackEntry {
    /// What was attacked, how, and with which models.
    pub header: AttackHeader,
    /// Success rate, queries, perturbation and change, as the attack paper reports them.
    pub summary: AttackSummary,
}

/// The z statistics of `spec` over the items' gold texts against their
/// references.
pub async fn z_norm(
    engine: &Engine,
    spec: &MetricSpec,
    items: &[Item],
) -> Result<ZNorm, AttackError> {
    let refs: Vec<Vec<&str>> = items
        .iter()
        .map(|i| i.refs.iter().map(String::as_str).collect())
        .collect();
    let segments: Vec<Segment> = items
        .iter()
        .zip(&refs)
        .map(|(item, refs)| Segment {
            hyp: &item.gold,
            refs,
            src: item.src.as_deref(),
        })
        .collect();
    let column = engine
        .score(std::slice::from_ref(spec), &segments)
        .await?
        .remove(0);
    let values = column.values();
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(AttackError::Config(format!(
            "item {} (id {}) scores {}, which is not finite: z units are undefined",
            i + 1,
            items[i].id,
            values[i]
        )));
    }
    ZNorm::from_scores(&values)
}

/// The z statistics for attacking one pair (the page, the lessons): the
/// metric's spread over [`bundled_pairs`](crate::data::bundled_pairs) and
/// the pair itself. Metrics that read a source are refused: the bundled
/// pairs have none.
pub async fn pair_z_norm(
    engine: &Engine,
    spec: &MetricSpec,
    hypothesis: &str,
    refs: &[&str],
) -> Result<ZNorm, AttackError> {
    let mut pairs = crate::data::bundled_pairs();
    let bundled = pairs.len();
    if spec.info().needs_source {
        return Err(AttackError::Config(format!(
            "{} reads a source, and a single pair's z scale comes from {bundled} bundled pairs, \
             which have none: attack it with `blindspot attack` on a dataset with sources",
            spec.info().name
        )));
    }
    pairs.push(Item {
        id: "pair".into(),
        src: None,
        gold: hypothesis.to_owned(),
        refs: refs.iter().map(|r| (*r).to_owned()).collect(),
    });
    z_norm(engine, spec, &pairs).await.map_err(|e| {
        AttackError::Config(format!(
            "cannot set the z scale over the {bundled} bundled pairs and this one: {e}"
        ))
    })
}

/// Attacks the items of `shard` (all when None) one after the other;
/// `progress(done, total)` after each.
#[allow(clippy::too_many_arguments)]
pub async fn run_attacks(
    engine: &Engine,
    dataset: &str,
    items: &[Item],
    spec: &MetricSpec,
    config: &AttackConfig,
    tools: &AttackTools<'_>,
    shard: Option<Shard>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<AttackRun, AttackError> {
    check(spec, config, tools)?;
    let z = z_norm(engine, spec, items).await?;
    let range = shard.map_or(0..items.len(), |s| s.range(items.len()));
    let total = range.len();
    let mut outcomes = Vec::with_capacity(total);
    let mut signature = String::new();
    for (done, i) in range.enumerate() {
        let item = &items[i];
        let refs: Vec<&str> = item.refs.iter().map(String::as_str).collect();
        let mut attack = Attack::new(
            engine,
            spec,
            config,
            tools,
            z,
            &item.gold,
            &refs,
            item.src.as_deref(),
        )
        .await
        .map_err(|e| match e {
            // Say which item (the others may be fine).
            AttackError::Config(m) => {
                AttackError::Config(format!("item {} (id {}): {m}", i + 1, item.id))
            }
            e => e,
        })?;
        while !attack.step().await? {}
        signature.clone_from(&attack.signature);
        outcomes.push(attack.outcome(i, &item.id));
        progress(done + 1, total);
    }
    if signature.is_empty() {
        signature = z_signature(engine, spec, items).await?;
    }
    Ok(AttackRun {
        header: AttackHeader {
            kind: "attack".into(),
            tool: format!("blindspot {}", crate::metrics::VERSION),
            dataset: dataset.to_owned(),
            metric: spec.id().as_str().to_owned(),
            signature,
            config: config.clone(),
            tools: tools.names(config.goal),
            z,
            items: items.len(),
            shard,
        },
        outcomes,
    })
}

/// The metric's signature when no item was attacked (an empty shard).
async fn z_signature(
    engine: &Engine,
    spec: &MetricSpec,
    items: &[Item],
) -> Result<String, AttackError> {
    let item = &items[0];
    let refs: Vec<&str> = item.refs.iter().map(String::as_str).collect();
    let seg = Segment {
        hyp: &item.gold,
        refs: &refs,
        src: item.src.as_deref(),
    };
    Ok(engine
        .score(std::slice::from_ref(spec), &[seg])
        .await?
        .remove(0)
        .signature
        .to_string())
}

/// Combines the shards of a run into the run an unsharded call gives.
pub fn merge(parts: Vec<AttackRun>) -> Result<AttackRun, AttackError> {
    let bad = |m: String| Err(AttackError::Config(m));
    let Some(first) = parts.first() else {
        return bad("no parts to merge".into());
    };
    let mut header = first.header.clone();
    header.shard = None;
    for p in &parts {
        let mut h = p.header.clone();
        h.shard = None;
        if h != header {
            return bad(
                "the parts come from different runs (dataset, metric, settings, models or z \
                 statistics differ)"
                    .into(),
            );
        }
    }
    let mut outcomes: Vec<AttackOutcome> = parts.into_iter().flat_map(|p| p.outcomes).collect();
    outcomes.sort_by_key(|o| o.item);
    let covered: std::collections::BTreeSet<usize> = outcomes.iter().map(|o| o.item).collect();
    if covered.len() != header.items || outcomes.len() != header.items {
        return bad(format!(
            "the parts cover {} of {} items ({} outcomes): give every shard once",
            covered.len(),
            header.items,
            outcomes.len()
        ));
    }
    Ok(AttackRun { header, outcomes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z_norm_is_population_std_and_refuses_flat_scores() {
        let z = ZNorm::from_scores(&[1.0, 3.0]).unwrap();
        assert_eq!((z.mean, z.std, z.count), (2.0, 1.0, 2));
        assert!(ZNorm::from_scores(&[0.5, 0.5]).is_err());
        assert!(ZNorm::from_scores(&[0.5]).is_err());
    }

    #[test]
    fn a_score_that_is_not_finite_is_said_not_called_flat() {
        for scores in [vec![0.5, f64::NEG_INFINITY, 0.7], vec![0.5, 0.7, f64::NAN]] {
            let e = ZNorm::from_scores(&scores).unwrap_err().to_string();
            assert!(e.contains("not all finite"), "{e}");
        }
    }

    #[test]
    fn an_original_that_is_not_finite_is_refused() {
        use super::search::finite_original;
        assert_eq!(finite_original("scores", 0.3).unwrap(), 0.3);
        for (what, value, said) in [
            ("scores", f64::NEG_INFINITY, "scores -inf"),
            (
                "scores against itself",
                f64::NAN,
                "scores against itself NaN",
            ),
            (
                "has a perplexity of",
                f64::INFINITY,
                "has a perplexity of inf",
            ),
        ] {
            let e = finite_original(what, value).unwrap_err().to_string();
            assert!(e.starts_with(&format!("the text to attack {said}")), "{e}");
        }
    }

    #[test]
    fn names_round_trip() {
        for g in Goal::ALL {
            assert_eq!(g.as_str().parse::<Goal>().unwrap(), *g);
            AttackConfig::new(*g, g.default_strategy())
                .validate()
                .unwrap();
        }
        for s in Strategy::ALL {
            assert_eq!(s.as_str().parse::<Strategy>().unwrap(), *s);
        }
        assert!("fgsm".parse::<Strategy>().is_err());
    }
}
