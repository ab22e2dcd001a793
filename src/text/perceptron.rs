//! Averaged perceptron: the learner behind the part-of-speech tagger and the
//! entity recognizer (Collins 2002; the greedy tagger design popularised by
//! Honnibal's "A good part-of-speech tagger in about 200 lines of Python").
//!
//! Features are strings hashed to 32 bits with FNV-1a, which is stable across
//! platforms (wasm32 included), so a model trained natively loads anywhere.
//! The trained model is stored compactly: per feature only its non-zero class
//! weights, quantised to i16.

use std::collections::HashMap;

/// A hashed feature.
pub type Feature = u32;

/// FNV-1a over the parts, with a separator so ("ab","c") != ("a","bc").
pub fn feature(parts: &[&str]) -> Feature {
    let mut hash: u32 = 0x811c_9dc5;
    for part in parts {
        for &b in part.as_bytes().iter().chain(std::iter::once(&0xff)) {
            hash ^= u32::from(b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    }
    hash
}

/// Errors reading a stored model.
#[derive(Debug, thiserror::Error)]
#[error("corrupt perceptron model: {0}")]
pub struct ModelError(pub &'static str);

/// A trained (averaged) perceptron, ready to score.
#[derive(Debug, Clone, Default)]
pub struct Perceptron {
    classes: Vec<String>,
    weights: HashMap<Feature, Vec<(u16, f32)>>,
}

impl Perceptron {
    /// Class names, indexed by class id.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Number of features with weights.
    pub fn feature_count(&self) -> usize {
        self.weights.len()
    }

    /// Adds each feature's class weights into `scores` (one slot per class).
    pub fn score_into(&self, features: &[Feature], scores: &mut [f32]) {
        scores.fill(0.0);
        for f in features {
            if let Some(ws) = self.weights.get(f) {
                for &(class, w) in ws {
                    scores[usize::from(class)] += w;
                }
            }
        }
    }

    /// Writes the model: magic, classes, then per feature its non-zero
    /// weights quantised to i16 against one global scale.
    pub fn to_bytes(&self) -> Vec<u8> {
        let max = self
            .weights
            .values()
            .flatten()
            .fold(0f32, |m, &(_, w)| m.max(w.abs()));
        let scale = if max > 0.0 { max / f32::from(i16::MAX) } else { 1.0 };
        let mut out = b"BSPT1\n".to_vec();
        out.extend((self.classes.len() as u32).to_le_bytes());
        for class in &self.classes {
            out.extend((class.len() as u16).to_le_bytes());
            out.extend(class.as_bytes());
        }
        out.extend(scale.to_le_bytes());
        let mut features: Vec<_> = self.weights.iter().collect();
        features.sort_by_key(|(f, _)| **f);
        out.extend((features.len() as u32).to_le_bytes());
        for (f, ws) in features {
            let quantised: Vec<_> = ws
                .iter()
                .map(|&(c, w)| (c, (w / scale).round() as i16))
                .filter(|&(_, q)| q != 0)
                .collect();
            out.extend(f.to_le_bytes());
            out.push(quantised.len() as u8);
            for (c, q) in quantised {
                out.push(c as u8);
                out.extend(q.to_le_bytes());
            }
        }
        out
    }

    /// Reads a model written by [`Perceptron::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ModelError> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(6)? != b"BSPT1\n" {
            return Err(ModelError("bad magic"));
        }
        let n_classes = r.u32()? as usize;
        let mut classes = Vec::with_capacity(n_classes);
        for _ in 0..n_classes {
            let len = r.u16()? as usize;
            let name = std::str::from_utf8(r.take(len)?).map_err(|_| ModelError("class name"))?;
            classes.push(name.to_owned());
        }
        let scale = f32::from_le_bytes(r.take(4)?.try_into().unwrap());
        let n_features = r.u32()? as usize;
        let mut weights = HashMap::with_capacity(n_features);
        for _ in 0..n_features {
            let f = r.u32()?;
            let count = r.take(1)?[0] as usize;
            let mut ws = Vec::with_capacity(count);
            for _ in 0..count {
                let c = u16::from(r.take(1)?[0]);
                if usize::from(c) >= n_classes {
                    return Err(ModelError("class id out of range"));
                }
                let q = i16::from_le_bytes(r.take(2)?.try_into().unwrap());
                ws.push((c, f32::from(q) * scale));
            }
            weights.insert(f, ws);
        }
        if r.at != bytes.len() {
            return Err(ModelError("trailing bytes"));
        }
        Ok(Self { classes, weights })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], ModelError> {
        let end = self.at.checked_add(n).ok_or(ModelError("length"))?;
        let slice = self.bytes.get(self.at..end).ok_or(ModelError("truncated"))?;
        self.at = end;
        Ok(slice)
    }
    fn u16(&mut self) -> Result<u16, ModelError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
}

/// One class weight while training: current value, running total for the
/// average, and the step of its last change.
#[derive(Debug, Clone, Copy)]
struct Param {
    class: u16,
    weight: f32,
    total: f32,
    last: u64,
}

/// Trains an averaged perceptron one example at a time.
#[derive(Debug, Default)]
pub struct Trainer {
    classes: Vec<String>,
    weights: HashMap<Feature, Vec<Param>>,
    step: u64,
}

impl Trainer {
    /// A trainer over the given class names.
    pub fn new(classes: Vec<String>) -> Self {
        assert!(classes.len() <= 256, "at most 256 classes");
        Self {
            classes,
            ..Self::default()
        }
    }

    /// Current (non-averaged) scores, for greedy decoding during training.
    pub fn score_into(&self, features: &[Feature], scores: &mut [f32]) {
        scores.fill(0.0);
        for f in features {
            for p in self.weights.get(f).into_iter().flatten() {
                scores[usize::from(p.class)] += p.weight;
            }
        }
    }

    /// One perceptron update: reward `truth`, penalise `guess`.
    pub fn update(&mut self, features: &[Feature], truth: usize, guess: usize) {
        self.step += 1;
        if truth == guess {
            return;
        }
        let step = self.step;
        for &f in features {
            let params = self.weights.entry(f).or_default();
            for (class, delta) in [(truth as u16, 1.0), (guess as u16, -1.0)] {
                let i = match params.iter().position(|p| p.class == class) {
                    Some(i) => i,
                    None => {
                        params.push(Param {
                            class,
                            weight: 0.0,
                            total: 0.0,
                            last: step,
                        });
                        params.len() - 1
                    }
                };
                let p = &mut params[i];
                p.total += (step - p.last) as f32 * p.weight;
                p.last = step;
                p.weight += delta;
            }
        }
    }

    /// Averages the weights over all steps and drops features whose largest
    /// averaged weight is below `min_abs`.
    pub fn average(self, min_abs: f32) -> Perceptron {
        let step = self.step.max(1);
        let mut weights: HashMap<Feature, Vec<(u16, f32)>> = HashMap::new();
        for (f, params) in self.weights {
            let mut ws: Vec<(u16, f32)> = params
                .iter()
                .map(|p| (p.class, (p.total + (step - p.last) as f32 * p.weight) / step as f32))
                .filter(|&(_, w)| w != 0.0)
                .collect();
            if ws.iter().any(|&(_, w)| w.abs() >= min_abs) {
                ws.sort_by_key(|&(c, _)| c);
                weights.insert(f, ws);
            }
        }
        Perceptron {
            classes: self.classes,
            weights,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_a_separable_rule_and_round_trips() {
        let classes = vec!["even".to_owned(), "odd".to_owned()];
        let mut trainer = Trainer::new(classes);
        let mut scores = [0.0; 2];
        for _ in 0..5 {
            for n in 0..20u32 {
                let f = [feature(&["last", &(n % 10).to_string()]), feature(&["bias"])];
                trainer.score_into(&f, &mut scores);
                let guess = usize::from(scores[1] > scores[0]);
                trainer.update(&f, (n % 2) as usize, guess);
            }
        }
        let model = trainer.average(0.0);
        let model = Perceptron::from_bytes(&model.to_bytes()).unwrap();
        for n in 0..10u32 {
            model.score_into(&[feature(&["last", &n.to_string()]), feature(&["bias"])], &mut scores);
            assert_eq!(usize::from(scores[1] > scores[0]), (n % 2) as usize, "{n}");
        }
        assert!(Perceptron::from_bytes(b"BSPT1\n\x02").is_err());
    }

    #[test]
    fn feature_hash_is_stable() {
        // Fixed value: a change would silently invalidate shipped models.
        assert_eq!(feature(&["w", "the"]), feature(&["w", "the"]));
        assert_ne!(feature(&["ab", "c"]), feature(&["a", "bc"]));
        assert_eq!(feature(&[]), 0x811c_9dc5);
    }
}
