//! The search: scoring candidates through the engine (de-duplicated,
//! cached, batched, budgeted) and the strategies' steps.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use rand::{Rng, SeedableRng};
use serde::Serialize;
use web_time::Instant;

use super::edits::{Cand, MlmOp, Neighbours, char_edits, core, mlm_edits, weighted_choice};
use super::{
    AttackConfig, AttackError, AttackOutcome, Goal, StopReason, Strategy, TrajectoryPoint, ZNorm,
    original_words,
};
use crate::inject::masked_lm::PlmMaskedLm;
use crate::inject::{InjectRng, diff};
use crate::metrics::perplexity::GptPplOptions;
use crate::metrics::{Engine, MetricSpec, Segment};

/// A scoring helper's failure, as the helper reported it (its worker's
/// error message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HelperError(pub String);

/// Helpers that score a share of each batch of candidates in parallel with
/// the search: the page's helper workers, each with its own copy of the
/// engine and the metric's model (wasm in a browser runs one thread per
/// worker). A helper scores exactly as [`score_hypotheses`] does.
pub trait ScorePool {
    /// How many helpers can take a share now (asked before each batch: a
    /// helper still loading its model does not count yet).
    fn size(&self) -> usize;
    /// Has helper `helper` (below [`ScorePool::size`]) score `texts` as
    /// hypotheses against `refs` (and `src`) with `spec`: one value per
    /// text, in order, or why it could not. The work starts when this is
    /// called, not when the future is first polled, so the search scores
    /// its own share meanwhile.
    fn score(
        &self,
        helper: usize,
        spec: &MetricSpec,
        texts: &[String],
        refs: &[&str],
        src: Option<&str>,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<f64>, HelperError>>>>;
}

/// Scores `texts` as hypotheses against `refs` (and `src`) with `spec` in
/// one engine call: the values and the metric's signature. The one way the
/// search queries a metric, in this process and in a [`ScorePool`]'s helpers.
pub async fn score_hypotheses(
    engine: &Engine,
    spec: &MetricSpec,
    texts: &[String],
    refs: &[&str],
    src: Option<&str>,
) -> Result<(Vec<f64>, String), AttackError> {
    let segments: Vec<Segment> = texts
        .iter()
        .map(|t| Segment { hyp: t, refs, src })
        .collect();
    let column = engine
        .score(std::slice::from_ref(spec), &segments)
        .await?
        .remove(0);
    Ok((column.values(), column.signature.to_string()))
}

/// What proposes edits and checks fluency, besides the metric.
#[derive(Default)]
pub struct AttackTools<'a> {
    /// A masked LM (CLARE; the raising search's top-k).
    pub masked_lm: Option<&'a PlmMaskedLm<'a>>,
    /// Input-embedding neighbours (genetic; the raising search).
    pub neighbours: Option<&'a Neighbours>,
    /// A causal-LM perplexity spec (`gpt-ppl` with its model) for the
    /// fluency constraint of the over-penalisation and inconsistency goals.
    pub fluency: Option<MetricSpec>,
    /// Helpers that score shares of each batch (none: all here).
    pub pool: Option<&'a dyn ScorePool>,
}

impl AttackTools<'_> {
    /// The fluency constraint's perplexity spec for a causal LM (`None`:
    /// the registry's default): every token scored, the first one after
    /// `<|endoftext|>`, so a one-word text has a perplexity too.
    pub fn fluency_spec(model: Option<String>) -> MetricSpec {
        MetricSpec::GptPpl(GptPplOptions { model, bos: true })
    }

    /// Their names, for the run's header: what `goal` uses (the raising
    /// search applies no fluency constraint).
    pub fn names(&self, goal: Goal) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(m) = self.masked_lm {
            out.push(format!("masked-lm:{}", m.model_name()));
        }
        if let Some(n) = self.neighbours {
            out.push(format!("neighbours:{}", n.name()));
        }
        if let Some(MetricSpec::GptPpl(fluency)) =
            self.fluency.as_ref().filter(|_| goal != Goal::Raise)
        {
            out.push(format!(
                "fluency:{}",
                fluency.model.as_deref().unwrap_or("default causal LM")
            ));
        }
        out
    }
}

/// Refuses a metric, goal and strategy that cannot run together, or a
/// strategy without what it needs.
pub fn check(
    spec: &MetricSpec,
    config: &AttackConfig,
    tools: &AttackTools,
) -> Result<(), AttackError> {
    config.validate()?;
    let refuse = |m: String| Err(AttackError::Config(m));
    let info = spec.info();
    if let Some(what) = spec.whole_set() {
        return refuse(format!(
            "{what} depend on the whole set of texts scored together, so a candidate's score would \
             depend on the batch it was scored in: attack without them"
        ));
    }
    if !info.higher_is_better {
        return refuse(format!(
            "{} is lower-is-better, and the searches read a drop of the score as a penalty: \
             attack a higher-is-better metric",
            info.name
        ));
    }
    if config.goal == Goal::Inconsistency && !info.needs_reference {
        return refuse(format!(
            "the inconsistency goal scores a text against the original text as a reference; {} \
             takes no reference",
            info.id
        ));
    }
    if config.strategy.needs_masked_lm() && tools.masked_lm.is_none() {
        return refuse(format!(
            "the {} strategy needs a masked language model (a BERT or RoBERTa checkpoint with its \
             MLM head)",
            config.strategy
        ));
    }
    if config.strategy.needs_neighbours() && tools.neighbours.is_none() {
        return refuse(format!(
            "the {} strategy needs an encoder's input embeddings for word neighbours",
            config.strategy
        ));
    }
    Ok(())
}

/// A scored candidate.
#[derive(Debug, Clone)]
struct Eval {
    cand: Cand,
    text: String,
    score: f64,
    self_score: Option<f64>,
    /// z units; higher is closer to the goal.
    objective: f64,
    noise: f64,
    /// Within the goal's side constraint (inconsistency's self drop).
    valid: bool,
    /// Meets the goal (fluency not yet checked).
    meets: bool,
}

/// Where the search is.
enum State {
    Start,
    /// Word-importance order (original word indices) and the next to try.
    Ranked {
        order: Vec<usize>,
        next: usize,
    },
    Greedy,
    Beam {
        beam: Vec<Eval>,
        iteration: usize,
    },
    Genetic {
        population: Vec<Eval>,
        generation: usize,
    },
}

/// What the page shows while a search runs.
#[derive(Debug, Clone, Serialize)]
pub struct AttackProgress {
    /// Steps done.
    pub steps: usize,
    /// Metric queries used.
    pub queries: usize,
    /// The budget.
    pub budget: usize,
    /// The original's score.
    pub base: f64,
    /// The best text so far (the current one for raise).
    pub text: String,
    /// Its score.
    pub score: f64,
    /// Its objective (z).
    pub objective: f64,
    /// Its noise ratio.
    pub noise: f64,
    /// Why it ended, once it has.
    pub stop: Option<StopReason>,
}

/// One item's search. `step` until it returns true, then `outcome`.
pub struct Attack<'a> {
    engine: &'a Engine,
    spec: &'a MetricSpec,
    config: &'a AttackConfig,
    tools: &'a AttackTools<'a>,
    z: ZNorm,
    original: String,
    original_words: usize,
    refs: Vec<String>,
    src: Option<String>,
    base: f64,
    base_self: Option<f64>,
    base_ppl: Option<f64>,
    cache: HashMap<String, (f64, Option<f64>)>,
    ppl: HashMap<String, f64>,
    neighbour_cache: HashMap<String, Vec<String>>,
    queries: usize,
    lm_queries: usize,
    rng: InjectRng,
    started: Instant,
    state: State,
    steps: usize,
    current: Eval,
    best: Eval,
    success: Option<Eval>,
    stop: Option<StopReason>,
    trajectory: Vec<TrajectoryPoint>,
    /// Why the pool was given up (its shares are then scored here).
    pool_failure: RefCell<Option<String>>,
    /// The most helpers whose scores one batch used.
    helpers_used: Cell<usize>,
    /// The metric's signature.
    pub signature: String,
}

/// `value` of the original (`what` says which), refused when it is not
/// finite: a change from it cannot be measured, and JSON cannot hold it
/// (the search skips such candidates).
pub(super) fn finite_original(what: &str, value: f64) -> Result<f64, AttackError> {
    if value.is_finite() {
        return Ok(value);
    }
    Err(AttackError::Config(format!(
        "the text to attack {what} {value}, which is not finite: a change from it cannot be \
         measured"
    )))
}

impl<'a> Attack<'a> {
    /// Scores the original (against the references, against itself for
    /// inconsistency, its perplexity with a fluency LM) and checks that the
    /// strategy has what it needs.
    #[allow(clippy::too_many_arguments)]
    pub async fn new(
        engine: &'a Engine,
        spec: &'a MetricSpec,
        config: &'a AttackConfig,
        tools: &'a AttackTools<'a>,
        z: ZNorm,
        original: &str,
        refs: &[&str],
        src: Option<&str>,
    ) -> Result<Self, AttackError> {
        check(spec, config, tools)?;
        let refuse = |m: String| Err(AttackError::Config(m));
        if original.trim().is_empty() {
            return refuse("the text to attack is empty".into());
        }
        if z.std.is_nan() || z.std <= 0.0 {
            return refuse("the z standard deviation must be positive".into());
        }
        let cand = Cand::of(original);
        let placeholder = Eval {
            text: original.to_owned(),
            cand: cand.clone(),
            score: 0.0,
            self_score: None,
            objective: 0.0,
            noise: 0.0,
            valid: true,
            meets: false,
        };
        let mut attack = Attack {
            engine,
            spec,
            config,
            tools,
            z,
            original: original.to_owned(),
            original_words: original_words(original),
            refs: refs.iter().map(|r| (*r).to_owned()).collect(),
            src: src.map(str::to_owned),
            base: 0.0,
            base_self: None,
            base_ppl: None,
            cache: HashMap::new(),
            ppl: HashMap::new(),
            neighbour_cache: HashMap::new(),
            queries: 0,
            lm_queries: 0,
            rng: InjectRng::seed_from_u64(config.seed),
            started: Instant::now(),
            state: State::Start,
            steps: 0,
            current: placeholder.clone(),
            best: placeholder,
            success: None,
            stop: None,
            trajectory: Vec::new(),
            pool_failure: RefCell::new(None),
            helpers_used: Cell::new(0),
            signature: String::new(),
        };
        let (scores, signature) = attack.score_texts(&[original.to_owned()], false).await?;
        attack.signature = signature;
        attack.base = finite_original("scores", scores[0])?;
        if config.goal == Goal::Inconsistency {
            let (s, _) = attack.score_texts(&[original.to_owned()], true).await?;
            attack.base_self = Some(finite_original("scores against itself", s[0])?);
        }
        if attack.uses_fluency() {
            let ppl = attack.perplexity(original).await?;
            attack.base_ppl = Some(finite_original("has a perplexity of", ppl)?);
        }
        let first = attack.judge(cand, original.to_owned(), attack.base, attack.base_self);
        attack.current = first.clone();
        attack.best = first;
        attack.started = Instant::now();
        Ok(attack)
    }

    fn model_error(&self, e: crate::models::ModelError) -> AttackError {
        let name = self.tools.masked_lm.map_or("masked LM", |m| m.model_name());
        AttackError::Config(format!("{name}: {e}"))
    }

    fn uses_fluency(&self) -> bool {
        self.tools.fluency.is_some() && self.config.goal != Goal::Raise
    }

    /// Scores texts as hypotheses against the references (or, with
    /// `against_original`, against the original text). With a pool, the
    /// texts are split in equal shares, one per helper and one scored here
    /// meanwhile; a helper that fails has its share scored here, and the
    /// pool is not used again in this search ([`Attack::pool_failure`]).
    async fn score_texts(
        &self,
        texts: &[String],
        against_original: bool,
    ) -> Result<(Vec<f64>, String), AttackError> {
        let own = [self.original.as_str()];
        let refs: Vec<&str> = self.refs.iter().map(String::as_str).collect();
        let refs: &[&str] = if against_original { &own } else { &refs };
        let src = self.src.as_deref();
        let helpers = match self.tools.pool {
            Some(p) if texts.len() > 1 && self.pool_failure.borrow().is_none() => p.size(),
            _ => 0,
        };
        let Some(pool) = self.tools.pool.filter(|_| helpers > 0) else {
            return score_hypotheses(self.engine, self.spec, texts, refs, src).await;
        };
        let share = texts.len().div_ceil(helpers + 1);
        let mut shares = texts.chunks(share);
        let own_share = shares.next().unwrap_or_default();
        // Started before this share is scored, so the helpers work meanwhile.
        let remote: Vec<_> = shares
            .enumerate()
            .map(|(i, s)| (s, pool.score(i, self.spec, s, refs, src)))
            .collect();
        let (mut values, signature) =
            score_hypotheses(self.engine, self.spec, own_share, refs, src).await?;
        let mut helped = 0;
        for (share, pending) in remote {
            let failure = match pending.await {
                Ok(v) if v.len() == share.len() => {
                    values.extend(v);
                    helped += 1;
                    continue;
                }
                Ok(v) => format!(
                    "a helper returned {} scores for {} texts",
                    v.len(),
                    share.len()
                ),
                Err(e) => e.to_string(),
            };
            self.pool_failure.borrow_mut().get_or_insert(failure);
            let (v, _) = score_hypotheses(self.engine, self.spec, share, refs, src).await?;
            values.extend(v);
        }
        self.helpers_used.set(self.helpers_used.get().max(helped));
        Ok((values, signature))
    }

    /// The most helpers whose scores one batch used (0: all scored here).
    pub fn helpers_used(&self) -> usize {
        self.helpers_used.get()
    }

    /// Why the search stopped using its pool's helpers, if it did.
    pub fn pool_failure(&self) -> Option<String> {
        self.pool_failure.borrow().clone()
    }

    async fn perplexity(&mut self, text: &str) -> Result<f64, AttackError> {
        if let Some(p) = self.ppl.get(text) {
            return Ok(*p);
        }
        let spec = self.tools.fluency.as_ref().expect("checked by the caller");
        let seg = Segment {
            hyp: text,
            refs: &[],
            src: None,
        };
        let value = self
            .engine
            .score(std::slice::from_ref(spec), &[seg])
            .await?
            .remove(0)
            .values()[0];
        self.lm_queries += 1;
        // Perplexity specs score -perplexity (higher is better).
        self.ppl.insert(text.to_owned(), -value);
        Ok(-value)
    }

    fn judge(&self, cand: Cand, text: String, score: f64, self_score: Option<f64>) -> Eval {
        let noise = diff(&self.original, &text).1 as f64 / self.original_words as f64;
        let std = self.z.std;
        let c = self.config;
        let (objective, valid, meets) = match c.goal {
            Goal::OverPenalise => {
                let drop = (self.base - score) / std;
                (drop, true, drop > c.threshold)
            }
            Goal::Inconsistency => {
                let drop = (self.base - score) / std;
                let self_drop = (self.base_self.unwrap_or(0.0) - self_score.unwrap_or(0.0)) / std;
                let valid = self_drop < c.self_threshold;
                (drop, valid, valid && drop > c.threshold)
            }
            Goal::Raise => {
                let gain = (score - self.base) / std;
                (gain, true, noise >= c.noise_target && gain > c.threshold)
            }
        };
        Eval {
            cand,
            text,
            score,
            self_score,
            objective,
            noise,
            valid,
            meets,
        }
    }

    fn out_of_time(&self) -> bool {
        self.config
            .time_budget_s
            .is_some_and(|t| self.started.elapsed().as_secs_f64() >= t)
    }

    /// Scores candidates (new texts only, within the budget) and returns
    /// the scored ones in the order given; sets the stop reason when the
    /// budget or the time runs out.
    async fn evaluate(&mut self, cands: Vec<Cand>) -> Result<Vec<Eval>, AttackError> {
        let cost = if self.config.goal == Goal::Inconsistency {
            2
        } else {
            1
        };
        let texts: Vec<String> = cands.iter().map(Cand::text).collect();
        let mut new: Vec<String> = Vec::new();
        for t in &texts {
            if !self.cache.contains_key(t) && !new.contains(t) {
                new.push(t.clone());
            }
        }
        let left = self.config.budget.saturating_sub(self.queries) / cost;
        if new.len() > left {
            new.truncate(left);
            self.stop.get_or_insert(StopReason::Budget);
        }
        if self.out_of_time() {
            new.clear();
            self.stop.get_or_insert(StopReason::Time);
        }
        if !new.is_empty() {
            let (scores, _) = self.score_texts(&new, false).await?;
            let selfs = if self.config.goal == Goal::Inconsistency {
                Some(self.score_texts(&new, true).await?.0)
            } else {
                None
            };
            self.queries += new.len() * cost;
            for (i, t) in new.into_iter().enumerate() {
                self.cache
                    .insert(t, (scores[i], selfs.as_ref().map(|s| s[i])));
            }
        }
        Ok(cands
            .into_iter()
            .zip(texts)
            .filter_map(|(c, t)| {
                let &(score, self_score) = self.cache.get(&t)?;
                // A score that is not a number cannot be ranked, and an
                // infinite one cannot be written (JSON has no infinity): the
                // candidate is skipped rather than sorted first.
                if !score.is_finite() || self_score.is_some_and(|s| !s.is_finite()) {
                    return None;
                }
                Some(self.judge(c, t, score, self_score))
            })
            .collect())
    }

    async fn fluent(&mut self, e: &Eval) -> Result<bool, AttackError> {
        if !self.uses_fluency() {
            return Ok(true);
        }
        let ppl = self.perplexity(&e.text).await?;
        Ok(ppl <= self.base_ppl.unwrap_or(f64::INFINITY) + self.config.max_ppl_rise)
    }

    /// The `k` best valid, fluent, distinct candidates, best first (ties
    /// keep generation order). Records a success and the best so far.
    async fn pick(&mut self, mut evals: Vec<Eval>, k: usize) -> Result<Vec<Eval>, AttackError> {
        evals.retain(|e| e.valid);
        evals.sort_by(|a, b| b.objective.total_cmp(&a.objective));
        let mut out: Vec<Eval> = Vec::with_capacity(k);
        // The fluency LM is asked about a few candidates per pick at most.
        let mut checks = 3 * k + 5;
        for e in evals {
            if out.len() == k || checks == 0 {
                break;
            }
            if out.iter().any(|o| o.text == e.text) {
                continue;
            }
            if self.uses_fluency() {
                checks -= 1;
            }
            if !self.fluent(&e).await? {
                continue;
            }
            if e.objective > self.best.objective {
                self.best = e.clone();
            }
            if e.meets && self.success.is_none() {
                self.success = Some(e.clone());
            }
            out.push(e);
        }
        Ok(out)
    }

    /// Does one unit of work; true when the search has ended.
    pub async fn step(&mut self) -> Result<bool, AttackError> {
        if self.stop.is_some() {
            return Ok(true);
        }
        let state = std::mem::replace(&mut self.state, State::Start);
        let next = match state {
            State::Start => self.start().await?,
            State::Ranked { order, next } => self.ranked_step(order, next).await?,
            State::Greedy => self.greedy_step().await?,
            State::Beam { beam, iteration } => self.beam_step(beam, iteration).await?,
            State::Genetic {
                population,
                generation,
            } => self.genetic_step(population, generation).await?,
        };
        self.steps += 1;
        let shown = self.shown().clone();
        self.trajectory.push(TrajectoryPoint {
            queries: self.queries,
            score: shown.score,
            objective: shown.objective,
            noise: shown.noise,
        });
        if self.success.is_some() {
            self.stop = Some(StopReason::Success);
        } else if self.stop.is_none() {
            match next {
                Some(s) => self.state = s,
                None => self.stop = Some(StopReason::Exhausted),
            }
            if self.stop.is_none() && self.queries >= self.config.budget {
                self.stop = Some(StopReason::Budget);
            }
            if self.stop.is_none() && self.out_of_time() {
                self.stop = Some(StopReason::Time);
            }
        }
        Ok(self.stop.is_some())
    }

    /// Ends the search now (the page's stop button).
    pub fn stop(&mut self) {
        self.stop.get_or_insert(StopReason::Stopped);
    }

    /// The candidate the search stands on: the success, the current text
    /// for raise (it moves even when a step lowers the score), the best
    /// otherwise.
    fn shown(&self) -> &Eval {
        match (&self.success, self.config.goal) {
            (Some(s), _) => s,
            (None, Goal::Raise) => &self.current,
            (None, _) => &self.best,
        }
    }

    /// Where the search stands.
    pub fn progress(&self) -> AttackProgress {
        let e = self.shown();
        AttackProgress {
            steps: self.steps,
            queries: self.queries,
            budget: self.config.budget,
            base: self.base,
            text: e.text.clone(),
            score: e.score,
            objective: e.objective,
            noise: e.noise,
            stop: self.stop,
        }
    }

    /// The result for item `item` with id `id`.
    pub fn outcome(&self, item: usize, id: &str) -> AttackOutcome {
        let e = self.shown();
        let (edits, distance) = diff(&self.original, &e.text);
        AttackOutcome {
            item,
            id: id.to_owned(),
            success: self.success.is_some(),
            stop: self.stop.unwrap_or(StopReason::Stopped),
            original: self.original.clone(),
            text: e.text.clone(),
            edits,
            queries: self.queries,
            lm_queries: self.lm_queries,
            words_changed: distance,
            perturbation: distance as f64 / self.original_words as f64,
            score: self.base,
            final_score: e.score,
            change_z: (e.score - self.base) / self.z.std,
            self_drop_z: match (self.base_self, e.self_score) {
                (Some(b), Some(s)) => Some((b - s) / self.z.std),
                _ => None,
            },
            ppl: self
                .base_ppl
                .map(|b| (b, self.ppl.get(&e.text).copied().unwrap_or(b))),
            trajectory: self.trajectory.clone(),
        }
    }

    // ---- strategies -------------------------------------------------

    async fn start(&mut self) -> Result<Option<State>, AttackError> {
        Ok(Some(match self.config.strategy {
            Strategy::InputReduction | Strategy::DeepWordBug => {
                // Leave-one-out importance: how far deleting each word goes
                // towards the goal (input reduction's candidates too).
                let cur = self.current.cand.clone();
                let slots = cur.editable();
                let cands: Vec<Cand> = slots.iter().filter_map(|&i| cur.delete(i)).collect();
                let scored = self.evaluate(cands.clone()).await?;
                let objective: HashMap<String, f64> = scored
                    .iter()
                    .map(|e| (e.text.clone(), e.objective))
                    .collect();
                let mut order: Vec<(f64, usize)> = slots
                    .iter()
                    .zip(&cands)
                    .filter_map(|(&i, c)| {
                        let o = objective.get(&c.text())?;
                        Some((*o, cur.slots[i].origin?))
                    })
                    .collect();
                order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                let mut order: Vec<usize> = order.into_iter().map(|o| o.1).collect();
                if cands.is_empty() && self.config.strategy == Strategy::DeepWordBug {
                    // One word: nothing to rank by deleting it; edit it anyway.
                    order = slots.iter().filter_map(|&i| cur.slots[i].origin).collect();
                }
                State::Ranked { order, next: 0 }
            }
            Strategy::TokenGreedy => return self.greedy_step().await,
            Strategy::Clare => State::Beam {
                beam: vec![self.current.clone()],
                iteration: 0,
            },
            Strategy::Genetic => {
                let seed = vec![self.current.clone(); self.config.population];
                let population = self.perturb(seed).await?;
                State::Genetic {
                    population,
                    generation: 0,
                }
            }
        }))
    }

    /// Moves to `e` when the goal allows: always for raise (the text must
    /// degrade), otherwise only when it is closer to the goal.
    fn advance(&mut self, e: Option<Eval>) -> bool {
        match e {
            Some(e) if self.config.goal == Goal::Raise || e.objective > self.current.objective => {
                self.current = e;
                true
            }
            _ => false,
        }
    }

    async fn ranked_step(
        &mut self,
        order: Vec<usize>,
        next: usize,
    ) -> Result<Option<State>, AttackError> {
        let Some(&origin) = order.get(next) else {
            return Ok(None);
        };
        let cur = self.current.cand.clone();
        let at = cur
            .slots
            .iter()
            .position(|s| s.origin == Some(origin) && !s.touched);
        if let Some(i) = at {
            let cands: Vec<Cand> = match self.config.strategy {
                Strategy::InputReduction => cur.delete(i).into_iter().collect(),
                _ => {
                    let word = &cur.slots[i].word;
                    let c = core(word).to_owned();
                    char_edits(&c, &mut self.rng)
                        .iter()
                        .map(|w| cur.replace(i, w))
                        .collect()
                }
            };
            let scored = self.evaluate(cands).await?;
            let best = self.pick(scored, 1).await?.into_iter().next();
            self.advance(best);
        }
        Ok((next + 1 < order.len()).then_some(State::Ranked {
            order,
            next: next + 1,
        }))
    }

    /// Replacements of slot `i` by its input-embedding neighbours.
    /// Slot `i`'s input-embedding neighbours (computed once per word).
    fn neighbours_of(&mut self, cand: &Cand, i: usize) -> &[String] {
        let Some(n) = self.tools.neighbours else {
            return &[];
        };
        let word = core(&cand.slots[i].word).to_owned();
        let k = self.config.candidates;
        self.neighbour_cache
            .entry(word)
            .or_insert_with_key(|w| n.nearest(w, k))
    }

    /// Replacements of slot `i` by its input-embedding neighbours.
    fn neighbour_edits(&mut self, cand: &Cand, i: usize) -> Vec<Cand> {
        let near = self.neighbours_of(cand, i).to_vec();
        near.iter().map(|w| cand.replace(i, w)).collect()
    }

    async fn greedy_step(&mut self) -> Result<Option<State>, AttackError> {
        let cur = self.current.cand.clone();
        let k = self.config.candidates;
        let slots = cur.editable();
        let mut cands = Vec::new();
        for &i in &slots {
            cands.extend(cur.delete(i));
            cands.extend(self.neighbour_edits(&cur, i));
        }
        if let Some(mlm) = self.tools.masked_lm {
            let jobs: Vec<(&Cand, usize, MlmOp)> =
                slots.iter().map(|&i| (&cur, i, MlmOp::Replace)).collect();
            cands.extend(
                mlm_edits(mlm, &jobs, k)
                    .await
                    .map_err(|e| self.model_error(e))?,
            );
        }
        if cands.is_empty() {
            return Ok(None);
        }
        let scored = self.evaluate(cands).await?;
        let best = self.pick(scored, 1).await?.into_iter().next();
        Ok(self.advance(best).then_some(State::Greedy))
    }

    async fn beam_step(
        &mut self,
        beam: Vec<Eval>,
        iteration: usize,
    ) -> Result<Option<State>, AttackError> {
        let mlm = self.tools.masked_lm.expect("checked in new");
        let k = self.config.candidates;
        let jobs: Vec<(&Cand, usize, MlmOp)> = beam
            .iter()
            .flat_map(|m| {
                m.cand.editable().into_iter().flat_map(move |i| {
                    [MlmOp::Replace, MlmOp::Insert, MlmOp::Merge].map(|op| (&m.cand, i, op))
                })
            })
            .collect();
        let cands = mlm_edits(mlm, &jobs, k)
            .await
            .map_err(|e| self.model_error(e))?;
        let scored = self.evaluate(cands).await?;
        let beam = self.pick(scored, self.config.beam).await?;
        let Some(first) = beam.first() else {
            return Ok(None);
        };
        self.current = first.clone();
        Ok(
            (iteration + 1 < self.config.iterations).then_some(State::Beam {
                beam,
                iteration: iteration + 1,
            }),
        )
    }

    /// Faster Alzantot's perturbation of each member: one random editable
    /// word (weighted by its neighbour count) replaced by its best
    /// neighbour; all members' candidates scored in one batch.
    async fn perturb(&mut self, members: Vec<Eval>) -> Result<Vec<Eval>, AttackError> {
        let mut groups: Vec<(Eval, Vec<Cand>)> = Vec::with_capacity(members.len());
        for m in members {
            let slots = m.cand.editable();
            let weights: Vec<f64> = slots
                .iter()
                .map(|&i| self.neighbours_of(&m.cand, i).len() as f64)
                .collect();
            let cands = if weights.iter().any(|w| *w > 0.0) {
                let pick = weighted_choice(&weights, &mut self.rng);
                self.neighbour_edits(&m.cand, slots[pick])
            } else {
                vec![]
            };
            groups.push((m, cands));
        }
        let all: Vec<Cand> = groups
            .iter()
            .flat_map(|(m, c)| std::iter::once(m.cand.clone()).chain(c.iter().cloned()))
            .collect();
        let scored = self.evaluate(all).await?;
        let by_text: HashMap<String, Eval> =
            scored.into_iter().map(|e| (e.text.clone(), e)).collect();
        let mut out = Vec::with_capacity(groups.len());
        for (m, cands) in groups {
            let options: Vec<Eval> = cands
                .iter()
                .filter_map(|c| by_text.get(&c.text()).cloned())
                .collect();
            // The perturbation is applied whenever there is one (as in
            // TextAttack's genetic search); a member whose own text went
            // unscored (the budget ran out) is dropped.
            match self.pick(options, 1).await?.into_iter().next() {
                Some(best) => out.push(best),
                None => out.extend(by_text.get(&m.cand.text()).cloned()),
            }
        }
        Ok(out)
    }

    async fn genetic_step(
        &mut self,
        mut population: Vec<Eval>,
        generation: usize,
    ) -> Result<Option<State>, AttackError> {
        if population.is_empty() {
            return Ok(None);
        }
        population.sort_by(|a, b| {
            b.valid
                .cmp(&a.valid)
                .then(b.objective.total_cmp(&a.objective))
        });
        let elite = population[0].clone();
        self.current = elite.clone();
        // Parents drawn by softmax(fitness / 0.3), TextAttack's temperature.
        let top = elite.objective;
        let weights: Vec<f64> = population
            .iter()
            .map(|e| {
                if e.valid {
                    ((e.objective - top) / 0.3).exp()
                } else {
                    0.0
                }
            })
            .collect();
        let mut children = Vec::with_capacity(population.len() - 1);
        for _ in 1..population.len() {
            let a = &population[weighted_choice(&weights, &mut self.rng)];
            let b = &population[weighted_choice(&weights, &mut self.rng)];
            let mut child = a.cand.clone();
            if a.cand.slots.len() == b.cand.slots.len() {
                for (i, slot) in child.slots.iter_mut().enumerate() {
                    if self.rng.random_bool(0.5) {
                        *slot = b.cand.slots[i].clone();
                    }
                }
            }
            let text = child.text();
            children.push(Eval {
                cand: child,
                text,
                valid: false,
                ..a.clone()
            });
        }
        let mut next = vec![elite];
        next.extend(self.perturb(children).await?);
        Ok(
            (generation + 1 < self.config.generations).then_some(State::Genetic {
                population: next,
                generation: generation + 1,
            }),
        )
    }
}
