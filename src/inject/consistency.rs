//! Consistency errors of [BS] Table 16 that need no tagger (SPEC 2.2).
//! Negation, entity and verb/noun switching need the tagger; BERT-diverge
//! needs the masked LM of the PLM engine.

use rand::Rng;
use rand::seq::index::sample;

use super::{
    Context, Family, InjectRng, Injection, InjectionInfo, LevelKind, NotApplicable, info, join,
};
use crate::text::sentences::sentences;

/// All consistency injections in this file.
pub static ALL: [&dyn Injection; 2] = [&SentenceSwitching, &SentenceReplacement];

/// Swap n random pairs of sentences (never the last one: open-ended text).
pub struct SentenceSwitching;
static SENTENCE_SWITCHING: InjectionInfo = InjectionInfo {
    swap: true,
    ..info(
        "sentence_switching",
        "Sentence switching",
        Family::Consistency,
        LevelKind::Count,
        &[1.0, 2.0],
        "Swaps n random pairs of sentences, never moving the last sentence.",
    )
};
impl Injection for SentenceSwitching {
    fn info(&self) -> &'static InjectionInfo {
        &SENTENCE_SWITCHING
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        _: &Context,
    ) -> Result<String, NotApplicable> {
        let mut s = sentences(text);
        if s.len() < 3 {
            return Err(NotApplicable(format!(
                "needs at least three sentences (the last one stays in place), found {}",
                s.len()
            )));
        }
        // n distinct pairs, so a second swap never undoes the first.
        let movable = s.len() - 1;
        let pairs: Vec<(usize, usize)> = (0..movable)
            .flat_map(|i| (i + 1..movable).map(move |j| (i, j)))
            .collect();
        for k in sample(rng, pairs.len(), (n as usize).min(pairs.len())) {
            s.swap(pairs[k].0, pairs[k].1);
        }
        Ok(join(&s))
    }
}

/// Replace n sentences by random sentences from other samples.
pub struct SentenceReplacement;
static SENTENCE_REPLACEMENT: InjectionInfo = InjectionInfo {
    needs_samples: true,
    ..info(
        "sentence_replacement",
        "Sentence replacement",
        Family::Consistency,
        LevelKind::Count,
        &[1.0, 2.0],
        "Replaces n random sentences by sentences drawn from other samples.",
    )
};
impl Injection for SentenceReplacement {
    fn info(&self) -> &'static InjectionInfo {
        &SENTENCE_REPLACEMENT
    }
    fn perturb(
        &self,
        text: &str,
        n: f64,
        rng: &mut InjectRng,
        ctx: &Context,
    ) -> Result<String, NotApplicable> {
        let mut own = sentences(text);
        let pool: Vec<&str> = ctx
            .samples
            .iter()
            .flat_map(|s| sentences(s))
            .filter(|s| !own.contains(s))
            .collect();
        if own.is_empty() || pool.is_empty() {
            return Err(NotApplicable(
                "no sentences to replace or none to draw from".into(),
            ));
        }
        for i in sample(rng, own.len(), (n as usize).min(own.len())) {
            own[i] = pool[rng.random_range(0..pool.len())];
        }
        Ok(join(&own))
    }
}
