//! Span-level rewriting for the tagger-based injections: replace byte spans
//! of the original text (spacing and punctuation around them stay as they
//! were) and swap random pairs of spans.

use std::ops::Range;

use rand::seq::index::sample;

use super::{InjectRng, NotApplicable};

/// Rewrites `text` with each span replaced; their order does not matter. A
/// span overlapping an earlier one (callers never make one) is left out
/// rather than cut the text wrongly.
pub(crate) fn replace_spans(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(text.len() + 16);
    let mut last = 0;
    for (range, replacement) in edits {
        if range.start < last {
            continue;
        }
        out.push_str(&text[last..range.start]);
        out.push_str(&replacement);
        last = range.end;
    }
    out.push_str(&text[last..]);
    out
}

/// Swaps `n` random pairs among `items` (span, text): each item moves at most
/// once and a pair is only swapped when its texts differ (compared
/// lowercase), so every swap changes the text. Returns the edits (span, new
/// text); `what` names the items in the reason when fewer than two distinct
/// ones exist.
pub(crate) fn swap_random_pairs(
    items: &[(Range<usize>, String)],
    n: usize,
    rng: &mut InjectRng,
    what: &str,
) -> Result<Vec<(Range<usize>, String)>, NotApplicable> {
    let mut order: Vec<usize> = sample(rng, items.len(), items.len()).into_vec();
    let mut edits = Vec::new();
    let mut pairs = 0;
    while pairs < n && order.len() >= 2 {
        let a = order.remove(0);
        let Some(k) = order
            .iter()
            .position(|&b| items[b].1.to_lowercase() != items[a].1.to_lowercase())
        else {
            continue;
        };
        let b = order.remove(k);
        edits.push((items[a].0.clone(), items[b].1.clone()));
        edits.push((items[b].0.clone(), items[a].1.clone()));
        pairs += 1;
    }
    if pairs == 0 {
        return Err(NotApplicable(format!(
            "fewer than two different {what} to swap"
        )));
    }
    Ok(edits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn replaces_and_swaps_spans() {
        let text = "cats chase mice";
        assert_eq!(
            replace_spans(text, vec![(11..15, "dogs".into()), (0..4, "owls".into())]),
            "owls chase dogs"
        );
        let items = vec![(0..4, "cats".to_owned()), (11..15, "mice".to_owned())];
        let mut rng = InjectRng::seed_from_u64(1);
        let edits = swap_random_pairs(&items, 1, &mut rng, "nouns").unwrap();
        assert_eq!(replace_spans(text, edits), "mice chase cats");
        let same = vec![(0..4, "cats".to_owned()), (11..15, "Cats".to_owned())];
        assert!(swap_random_pairs(&same, 1, &mut rng, "nouns").is_err());
    }
}
