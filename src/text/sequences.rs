//! Word-sequence comparisons that long texts make expensive: the longest
//! common subsequence (ROUGE-L) and the Levenshtein distance (the noise ratio
//! of a book-length rewrite). Both run bit-parallel in rapidfuzz, 64 cells of
//! the quadratic table per word operation, over token ids.

use rustc_hash::FxHashMap as HashMap;

/// Two token sequences as ids: equal tokens, equal ids. Past 256 distinct
/// tokens the ids go by frequency, so the common ones stay under 256, which
/// rapidfuzz looks up in an array rather than a map (an 18k-word pair's
/// ROUGE-L took 40% less time than with ids in order of appearance).
fn token_ids<'t>(
    a: impl IntoIterator<Item = &'t str>,
    b: impl IntoIterator<Item = &'t str>,
) -> (Vec<u32>, Vec<u32>) {
    let mut ids: HashMap<&'t str, u32> = HashMap::default();
    let mut id_of = |t: &'t str| {
        let next = ids.len() as u32;
        *ids.entry(t).or_insert(next)
    };
    let mut a: Vec<u32> = a.into_iter().map(&mut id_of).collect();
    let mut b: Vec<u32> = b.into_iter().map(&mut id_of).collect();
    let distinct = ids.len();
    if distinct > 256 {
        let mut count = vec![0u32; distinct];
        for &id in a.iter().chain(&b) {
            count[id as usize] += 1;
        }
        let mut by_count: Vec<u32> = (0..distinct as u32).collect();
        by_count.sort_by_key(|&id| std::cmp::Reverse(count[id as usize]));
        let mut rank = vec![0u32; distinct];
        for (r, &id) in by_count.iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        for id in a.iter_mut().chain(b.iter_mut()) {
            *id = rank[*id as usize];
        }
    }
    (a, b)
}

/// Length of the longest common subsequence: the number rouge-score's
/// `_lcs_table` ends with (`cargo bench --bench lexical`: 18k words a side in
/// 23 ms, where that table took 630 ms).
pub fn lcs_length<'t>(
    a: impl IntoIterator<Item = &'t str>,
    b: impl IntoIterator<Item = &'t str>,
) -> usize {
    let (a, b) = token_ids(a, b);
    rapidfuzz::distance::lcs_seq::similarity(a.iter().copied(), b.iter().copied())
}

/// Levenshtein distance (insertions, deletions and substitutions of a token,
/// each costing 1).
pub fn levenshtein<'t>(
    a: impl IntoIterator<Item = &'t str>,
    b: impl IntoIterator<Item = &'t str>,
) -> usize {
    let (a, b) = token_ids(a, b);
    rapidfuzz::distance::levenshtein::distance(a.iter().copied(), b.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The textbook tables, as the oracles: rouge-score's `_lcs_table` with
    /// `lcs`, else Levenshtein's.
    fn table(a: &[String], b: &[String], lcs: bool) -> usize {
        let mut prev: Vec<usize> = (0..=b.len()).map(|j| if lcs { 0 } else { j }).collect();
        for (i, x) in a.iter().enumerate() {
            let mut cur = vec![if lcs { 0 } else { i + 1 }; b.len() + 1];
            for (j, y) in b.iter().enumerate() {
                cur[j + 1] = match (lcs, x == y) {
                    (true, true) => prev[j] + 1,
                    (true, false) => prev[j + 1].max(cur[j]),
                    (false, same) => (prev[j] + usize::from(!same))
                        .min(prev[j + 1] + 1)
                        .min(cur[j] + 1),
                };
            }
            prev = cur;
        }
        prev[b.len()]
    }

    fn words(rng: &mut impl Rng, n: usize, vocab: usize) -> Vec<String> {
        (0..n)
            .map(|_| format!("w{}", rng.random_range(0..vocab)))
            .collect()
    }

    fn strs(v: &[String]) -> impl Iterator<Item = &str> {
        v.iter().map(String::as_str)
    }

    #[test]
    fn bit_parallel_results_equal_the_tables() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // Lengths around the 64-bit word and alphabets below and above 256 ids
        // (rapidfuzz keeps ids under 256 in an array, the rest in a map).
        for (len, vocab) in [
            (0, 5),
            (1, 2),
            (63, 3),
            (64, 4),
            (65, 2),
            (130, 10),
            (300, 40),
            (700, 600),
        ] {
            for _ in 0..4 {
                let a = words(&mut rng, len, vocab);
                // Unrelated texts, one side empty where `len` is 0, and an
                // edit of `a` (long common stretches, as a typed change).
                let mut edited = a.clone();
                for _ in 0..3.min(len) {
                    let at = rng.random_range(0..edited.len());
                    match rng.random_range(0..3) {
                        0 => edited[at] = "new".into(),
                        1 => drop(edited.remove(at)),
                        _ => edited.insert(at, "new".into()),
                    }
                }
                for b in [
                    words(&mut rng, len + len / 3 + 10 * usize::from(len == 0), vocab),
                    edited,
                ] {
                    for (x, y) in [(&a, &b), (&b, &a)] {
                        assert_eq!(
                            lcs_length(strs(x), strs(y)),
                            table(x, y, true),
                            "{len} tokens over {vocab}"
                        );
                        assert_eq!(
                            levenshtein(strs(x), strs(y)),
                            table(x, y, false),
                            "{len} tokens over {vocab}"
                        );
                    }
                }
            }
        }
    }
}
