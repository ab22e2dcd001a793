//! MAUVE (Pillutla et al. 2021) with mauve-text 0.4.0's defaults: how far
//! apart two sets of texts are as distributions.
//!
//! Features are each text's last-token final hidden state ([`features`]).
//! [`compute`] then follows mauve-text's `compute_mauve`: stack Q over P,
//! L2-normalise the rows, PCA keeping the fewest components that explain 90%
//! of the variance, k-means with `max(2, round(min(n_p, n_q)/10))` clusters
//! (5 restarts, 500 iterations, fixed seed), a histogram per set, the
//! divergence curve `exp(-c KL)` over 25 mixture weights with c = 5, and the
//! area under it. PCA is an SVD from linfa-linalg; k-means is linfa's
//! (k-means++ initialisation, where mauve-text's faiss draws random points,
//! so values agree up to the spread initialisation causes).

use linfa::DatasetBase;
use linfa::traits::{Fit, Predict};
use linfa_clustering::KMeans;
use linfa_linalg::svd::{SVD, SvdSort};
use ndarray::{Array2, Axis};
use rand_xoshiro::Xoshiro256Plus;
use rand_xoshiro::rand_core::SeedableRng;
use serde::{Deserialize, Serialize};

use super::Signature;
use crate::data::{Damage, KeptError, read_kept};
use crate::models::{ModelError, PassLimit, Plm, read_back};

/// Texts per forward pass when featurising.
pub const BATCH: usize = 16;

/// MAUVE's settings (mauve-text's defaults from [`Options::default`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Number of clusters; None: `max(2, round(min(n_p, n_q) / 10))`.
    pub clusters: Option<usize>,
    /// Fraction of variance the PCA keeps.
    pub explained_variance: f64,
    /// k-means restarts (the lowest inertia wins).
    pub restarts: usize,
    /// k-means iterations per restart.
    pub max_iterations: u64,
    /// Mixture weights on the divergence curve.
    pub curve_points: usize,
    /// Scaling constant c in `exp(-c KL)`.
    pub scaling: f64,
    /// Seed of the k-means initialisation.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            clusters: None,
            explained_variance: 0.9,
            restarts: 5,
            max_iterations: 500,
            curve_points: 25,
            scaling: 5.0,
            seed: 25,
        }
    }
}

/// A MAUVE result with what it was computed from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mauve {
    /// Area under the divergence curve, 0 to 1 (1: same distribution).
    pub mauve: f64,
    /// Frontier integral (0: same distribution).
    pub frontier_integral: f64,
    /// MAUVE with Krichevsky-Trofimov smoothed histograms (MAUVE*).
    pub mauve_star: f64,
    /// Cluster histogram of P (the hypotheses).
    pub p_hist: Vec<f64>,
    /// Cluster histogram of Q (the references).
    pub q_hist: Vec<f64>,
    /// Divergence curve points `(exp(-c KL(Q|R)), exp(-c KL(P|R)))`,
    /// extremes included.
    pub curve: Vec<(f64, f64)>,
    /// Clusters used.
    pub clusters: usize,
    /// PCA dimensions kept.
    pub dimensions: usize,
}

/// Errors of a MAUVE computation.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MauveError {
    /// A set is too small to cluster.
    #[error("MAUVE compares distributions: each set needs at least 2 texts (got {p} and {q})")]
    TooFew {
        /// Size of P.
        p: usize,
        /// Size of Q.
        q: usize,
    },
    /// Feature widths differ.
    #[error("feature widths differ: {0} and {1}")]
    Widths(usize, usize),
    /// More clusters than points.
    #[error("{clusters} clusters for {points} points")]
    Clusters {
        /// Requested clusters.
        clusters: usize,
        /// Points available.
        points: usize,
    },
    /// A numeric step failed (features with NaN, a degenerate SVD).
    #[error("MAUVE: {0}")]
    Numeric(String),
    /// The featurising model failed.
    #[error("{0}")]
    Model(String),
    /// The caller's progress callback asked to stop.
    #[error("stopped before every text was featurised")]
    Stopped,
}

/// MAUVE of two sets of texts with what the CLI and the page show.
#[derive(Clone, Debug, Serialize)]
pub struct MauveScore {
    /// The result.
    pub result: Mauve,
    /// Its signature.
    pub signature: Signature,
    /// Texts of P kept (blank entries dropped).
    pub hypotheses: usize,
    /// Texts of Q kept.
    pub references: usize,
}

/// A [`MauveScore`] read back from JSON (`blindspot mauve --json`, or the
/// copy the page keeps across visits), its signature as text. A damaged or
/// edited one is refused: MAUVE, MAUVE*, the frontier integral and every
/// curve point in [0, 1], on each side a histogram (a distribution) with a
/// bin per cluster, MAUVE's signature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MauveRecord {
    /// The result.
    pub result: Mauve,
    /// Its signature.
    pub signature: String,
    /// Texts of P kept.
    pub hypotheses: usize,
    /// Texts of Q kept.
    pub references: usize,
}

impl MauveRecord {
    /// Reads and checks a record written as JSON.
    pub fn from_json(json: &str) -> Result<Self, KeptError> {
        read_kept(json, "MAUVE result", Self::check)
    }

    fn check(record: &Self) -> Result<(), Damage> {
        let r = &record.result;
        let unit = |v: f64| (0.0..=1.0).contains(&v);
        let histogram =
            |h: &[f64]| h.iter().all(|&v| unit(v)) && (h.iter().sum::<f64>() - 1.0).abs() < 1e-6;
        let problem = if !record.signature.starts_with("mauve|") {
            Some("its signature is not MAUVE's")
        } else if record.hypotheses < 2 || record.references < 2 || r.dimensions == 0 {
            Some("it counts too few texts or dimensions")
        } else if ![r.mauve, r.mauve_star, r.frontier_integral]
            .into_iter()
            .all(unit)
        {
            Some("its values are out of range")
        } else if r.curve.is_empty() || !r.curve.iter().all(|&(x, y)| unit(x) && unit(y)) {
            Some("its divergence curve leaves the unit square")
        } else if r.clusters == 0 || r.p_hist.len() != r.clusters || r.q_hist.len() != r.clusters {
            Some("its histograms do not have a bin per cluster")
        } else if !histogram(&r.p_hist) || !histogram(&r.q_hist) {
            Some("its histograms are not distributions")
        } else {
            None
        };
        match problem {
            Some(p) => Err(Damage(p.to_owned())),
            None => Ok(()),
        }
    }
}

fn as_strs(texts: &[String]) -> Vec<&str> {
    texts.iter().map(String::as_str).collect()
}

/// MAUVE between `hyps` (P) and `refs` (Q), one text per entry (blank
/// entries dropped, the rest trimmed), featurised by `plm`: the one entry
/// point of `blindspot mauve` and the page. `progress(texts featurised,
/// texts)` after each model pass over both sets; returning `false` stops
/// with [`MauveError::Stopped`].
pub async fn score_texts(
    plm: &Plm,
    hyps: &[String],
    refs: &[String],
    options: &Options,
    progress: impl AsyncFn(usize, usize) -> bool,
) -> Result<MauveScore, MauveError> {
    let keep = |texts: &[String]| -> Vec<String> {
        texts
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (p_texts, q_texts) = (keep(hyps), keep(refs));
    if p_texts.len() < 2 || q_texts.len() < 2 {
        return Err(MauveError::TooFew {
            p: p_texts.len(),
            q: q_texts.len(),
        });
    }
    let model = |e: ModelError| MauveError::Model(e.to_string());
    let total = p_texts.len() + q_texts.len();
    let p = features_with(plm, &as_strs(&p_texts), async |done| {
        progress(done, total).await
    })
    .await
    .map_err(model)?
    .ok_or(MauveError::Stopped)?;
    let q = features_with(plm, &as_strs(&q_texts), async |done| {
        progress(p_texts.len() + done, total).await
    })
    .await
    .map_err(model)?
    .ok_or(MauveError::Stopped)?;
    Ok(MauveScore {
        result: compute(&p, &q, options)?,
        signature: signature(&plm.name, options, &plm.precision_label()),
        hypotheses: p_texts.len(),
        references: q_texts.len(),
    })
}

/// Each text's last-token final hidden state, `[texts, hidden]`.
pub async fn features(plm: &Plm, texts: &[&str]) -> Result<Array2<f32>, ModelError> {
    let all = features_with(plm, texts, async |_| true).await?;
    Ok(all.expect("a progress that never stops"))
}

/// [`features`], with `progress(texts done)` after each model pass;
/// `None` when it returns `false`.
pub async fn features_with(
    plm: &Plm,
    texts: &[&str],
    progress: impl AsyncFn(usize) -> bool,
) -> Result<Option<Array2<f32>>, ModelError> {
    let encoded = texts
        .iter()
        .map(|t| plm.encode(t))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(i) = encoded.iter().position(|e| e.tokens.is_empty()) {
        return Err(ModelError::Input(format!(
            "text {} has no tokens to featurise",
            i + 1
        )));
    }
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| encoded[i].tokens.len());
    let width = plm.config.hidden_size;
    let mut out = Array2::<f32>::zeros((texts.len(), width));
    let mut done = 0;
    for chunk in plm.passes(
        &order,
        |&i| encoded[i].tokens.len(),
        PassLimit::Sequences(BATCH),
    ) {
        let ids: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].ids()).collect();
        let forward = plm.forward(&ids)?;
        let [b, l, _] = forward.hidden_states[0].dims();
        let mut select = vec![0f32; b * l];
        for (k, s) in ids.iter().enumerate() {
            select[k * l + s.len() - 1] = 1.0;
        }
        let select: burn::tensor::Tensor<3> = burn::tensor::Tensor::from_data(
            burn::tensor::TensorData::new(select, [b, 1, l]),
            &plm.device,
        );
        let last = forward
            .hidden_states
            .last()
            .expect("at least the embeddings")
            .clone();
        let (values, _) = read_back(select.matmul(last).reshape([b, width])).await?;
        for (k, &i) in chunk.iter().enumerate() {
            out.row_mut(i)
                .iter_mut()
                .zip(&values[k * width..(k + 1) * width])
                .for_each(|(o, v)| *o = *v);
        }
        done += chunk.len();
        if !progress(done).await {
            return Ok(None);
        }
    }
    Ok(Some(out))
}

/// The number of clusters mauve-text picks for sets of these sizes.
pub fn auto_clusters(p: usize, q: usize) -> usize {
    // Python's round(): halves to even.
    ((p.min(q) as f64 / 10.0).round_ties_even() as usize).max(2)
}

/// MAUVE of P (hypotheses' features) against Q (references' features).
pub fn compute(p: &Array2<f32>, q: &Array2<f32>, options: &Options) -> Result<Mauve, MauveError> {
    let (np, nq) = (p.nrows(), q.nrows());
    if np < 2 || nq < 2 {
        return Err(MauveError::TooFew { p: np, q: nq });
    }
    if p.ncols() != q.ncols() {
        return Err(MauveError::Widths(p.ncols(), q.ncols()));
    }
    let clusters = options.clusters.unwrap_or_else(|| auto_clusters(np, nq));
    if clusters < 1 || clusters > np + nq {
        return Err(MauveError::Clusters {
            clusters,
            points: np + nq,
        });
    }
    // Q first, as mauve-text stacks them; rows L2-normalised (in f64).
    let mut data: Array2<f64> = ndarray::concatenate(Axis(0), &[q.view(), p.view()])
        .map_err(|e| MauveError::Numeric(e.to_string()))?
        .mapv(f64::from);
    if data.iter().any(|x| !x.is_finite()) {
        return Err(MauveError::Numeric(
            "features contain NaN or infinity".into(),
        ));
    }
    normalise_rows(&mut data);
    let (reduced, dimensions) = pca(data, options.explained_variance)?;
    let labels = kmeans(reduced, clusters, options)?;
    let mut q_counts = vec![0f64; clusters];
    let mut p_counts = vec![0f64; clusters];
    for (i, &label) in labels.iter().enumerate() {
        if i < nq {
            q_counts[label] += 1.0;
        } else {
            p_counts[label] += 1.0;
        }
    }
    let normalise = |counts: &[f64], add: f64| {
        let total: f64 = counts.iter().map(|c| c + add).sum();
        counts.iter().map(|c| (c + add) / total).collect::<Vec<_>>()
    };
    let (p_hist, q_hist) = (normalise(&p_counts, 0.0), normalise(&q_counts, 0.0));
    let curve = divergence_curve(&p_hist, &q_hist, options);
    let star_curve = divergence_curve(
        &normalise(&p_counts, 0.5),
        &normalise(&q_counts, 0.5),
        options,
    );
    Ok(Mauve {
        mauve: area(&curve),
        frontier_integral: frontier_integral(&p_hist, &q_hist),
        mauve_star: area(&star_curve),
        p_hist,
        q_hist,
        curve,
        clusters,
        dimensions,
    })
}

/// Scales each row to unit length (zero rows stay zero), as MAUVE prepares
/// its features.
pub fn normalise_rows(data: &mut Array2<f64>) {
    for mut row in data.rows_mut() {
        let norm = row.dot(&row).sqrt();
        if norm > 0.0 {
            row /= norm;
        }
    }
}

/// Centres the rows, projects them on the principal axes and keeps the
/// fewest that explain `explained` of the variance (sklearn's PCA with
/// `n_components=None`, then mauve-text's cut).
fn pca(data: Array2<f64>, explained: f64) -> Result<(Array2<f64>, usize), MauveError> {
    let mean = data.mean_axis(Axis(0)).expect("at least one row");
    let centred = data - &mean;
    let (_, sigma, vt) = centred
        .svd(false, true)
        .map_err(|e| MauveError::Numeric(format!("PCA: {e}")))?
        .sort_svd_desc();
    let vt = vt.expect("asked for V^T");
    let variances: Vec<f64> = sigma.iter().map(|s| s * s).collect();
    let total: f64 = variances.iter().sum();
    let mut cumulative = 0.0;
    let mut keep = variances.len();
    for (i, v) in variances.iter().enumerate() {
        cumulative += v / total;
        if cumulative >= explained {
            keep = i + 1;
            break;
        }
    }
    if total == 0.0 {
        // Every point identical: one axis carries (no) variance.
        keep = 1;
    }
    let axes = vt.slice(ndarray::s![..keep, ..]);
    Ok((centred.dot(&axes.t()), keep))
}

fn kmeans(data: Array2<f64>, clusters: usize, options: &Options) -> Result<Vec<usize>, MauveError> {
    let dataset = DatasetBase::from(data);
    let rng = Xoshiro256Plus::seed_from_u64(options.seed);
    let model = KMeans::params_with_rng(clusters, rng)
        .n_runs(options.restarts)
        .max_n_iterations(options.max_iterations)
        .tolerance(1e-10)
        .fit(&dataset)
        .map_err(|e| MauveError::Numeric(format!("k-means: {e}")))?;
    Ok(model.predict(dataset.records()).to_vec())
}

fn kl(p: &[f64], q: &[f64]) -> f64 {
    let mut total = 0.0;
    for (&a, &b) in p.iter().zip(q) {
        if a != 0.0 && b == 0.0 {
            return f64::INFINITY;
        }
        if a != 0.0 {
            total += a * (a / b).ln();
        }
    }
    total
}

fn divergence_curve(p: &[f64], q: &[f64], options: &Options) -> Vec<(f64, f64)> {
    let n = options.curve_points;
    let mut raw = vec![(0.0, f64::INFINITY)];
    for k in 0..n {
        // np.linspace(1e-6, 1 - 1e-6, n)
        let w = if n == 1 {
            1e-6
        } else {
            1e-6 + (1.0 - 2e-6) * k as f64 / (n - 1) as f64
        };
        let r: Vec<f64> = p
            .iter()
            .zip(q)
            .map(|(a, b)| w * a + (1.0 - w) * b)
            .collect();
        raw.push((kl(q, &r), kl(p, &r)));
    }
    raw.push((f64::INFINITY, 0.0));
    raw.into_iter()
        .map(|(x, y)| ((-options.scaling * x).exp(), (-options.scaling * y).exp()))
        .collect()
}

/// mauve-text's area: the mean of the trapezoid areas with the points
/// sorted by x and by y.
fn area(curve: &[(f64, f64)]) -> f64 {
    let trapezoid = |mut pts: Vec<(f64, f64)>| {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts.windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[1].1 + w[0].1) / 2.0)
            .sum::<f64>()
    };
    let by_x = trapezoid(curve.to_vec());
    let by_y = trapezoid(curve.iter().map(|&(x, y)| (y, x)).collect());
    0.5 * (by_x + by_y)
}

fn frontier_integral(p: &[f64], q: &[f64]) -> f64 {
    let mut total = 0.0;
    for (&a, &b) in p.iter().zip(q) {
        if a == 0.0 && b == 0.0 {
            continue;
        } else if a == 0.0 {
            total += b / 4.0;
        } else if b == 0.0 {
            total += a / 4.0;
        } else if (a - b).abs() > 1e-8 {
            total += 0.25 * (a + b) - 0.5 * (a * b * (a.ln() - b.ln()) / (a - b));
        }
    }
    total * 2.0
}

/// Signature: features, clusters, PCA, k-means and curve settings.
pub fn signature(model: &str, options: &Options, precision: &str) -> Signature {
    Signature::new("mauve")
        .with("model", model)
        .with("feat", "last-token")
        .with("pca", options.explained_variance)
        .with(
            "k",
            options
                .clusters
                .map_or("auto".to_owned(), |k| k.to_string()),
        )
        .with("redo", options.restarts)
        .with("iter", options.max_iterations)
        .with("curve", options.curve_points)
        .with("c", options.scaling)
        .with("seed", options.seed)
        .with("precision", precision)
        .with("ref", "mauve-text-0.4.0")
        .versioned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_area_and_frontier_match_mauve_text() {
        // mauve-text 0.4.0's get_divergence_curve_for_multinomials + sklearn
        // auc and get_fronter_integral on these histograms.
        for (p, q, mauve, frontier) in [
            (
                [0.2, 0.3, 0.5],
                [0.3, 0.3, 0.4],
                0.9961500329134327,
                0.01043383250668195,
            ),
            (
                [0.7, 0.0, 0.3],
                [0.2, 0.5, 0.3],
                0.21935533601807633,
                0.34922636882129693,
            ),
        ] {
            let curve = divergence_curve(&p, &q, &Options::default());
            assert_eq!(curve.len(), 27);
            assert!((area(&curve) - mauve).abs() < 1e-12, "{}", area(&curve));
            assert!((frontier_integral(&p, &q) - frontier).abs() < 1e-12);
        }
    }

    #[test]
    fn disjoint_histograms_give_mauve_near_zero() {
        let (p, q) = ([1.0, 0.0], [0.0, 1.0]);
        let curve = divergence_curve(&p, &q, &Options::default());
        assert!(area(&curve) < 0.05, "{}", area(&curve));
        assert!((frontier_integral(&p, &q) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn identical_histograms_give_three_quarters_as_in_mauve_text() {
        // mauve-text 0.4.0 on equal histograms (e.g. compute_mauve with the
        // same features twice) gives 0.7500000000000007, not 1: the curve's
        // extreme point (1, 0) ties with the 25 points (1, 1) in x, and the
        // area sorted by x runs from (0, 1) straight to (1, 0).
        let p = [0.375, 0.625];
        let curve = divergence_curve(&p, &p, &Options::default());
        assert!((area(&curve) - 0.75).abs() < 1e-12, "{}", area(&curve));
    }

    #[test]
    fn cluster_count_follows_mauve_text() {
        assert_eq!(auto_clusters(5, 500), 2);
        assert_eq!(auto_clusters(200, 200), 20);
        assert_eq!(auto_clusters(105, 300), 10);
    }

    #[test]
    fn small_sets_are_refused() {
        let one = Array2::<f32>::zeros((1, 4));
        let two = Array2::<f32>::ones((2, 4));
        assert_eq!(
            compute(&one, &two, &Options::default()),
            Err(MauveError::TooFew { p: 1, q: 2 })
        );
        let wide = Array2::<f32>::ones((2, 5));
        assert_eq!(
            compute(&two, &wide, &Options::default()),
            Err(MauveError::Widths(4, 5))
        );
    }
}
