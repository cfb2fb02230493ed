//! What a head does on one text, measured from its attention probabilities: four scores, each a mean
//! attention probability, and the labels the scores earn. The definitions are the training crate's
//! (`tools/train/src/quality.rs`), so a label shown on the page means what its table in
//! `tools/train/README.md` measured; that table measures induction on repeated random sequences,
//! where the latest earlier occurrence of a query's token is its place in the first copy (unless
//! the random draw repeated an id), and the page measures it on whatever text it is shown.
//!
//! For query `q` (0-based) over tokens `ids`:
//! - previous: weight on key `q - 1`, over queries 1..;
//! - sink: weight on key 0, over the queries that can see it (1..);
//! - local: weight on the `LOCAL_KEYS` most recent keys (the query included), over queries from
//!   `LOCAL_KEYS - 1` on;
//! - induction: for a query whose token occurred before at `p` (its latest earlier occurrence), with
//!   `p + 1 < q - 1` so that the target is not simply the previous token, the weight on key `p + 1`:
//!   the token that followed last time, which an induction head copies forward. Only queries whose
//!   target the layer's mask lets them see count.
//!
//! A score the text cannot measure (too short, no repeated token) is `None`.

use std::collections::HashMap;

use crate::model::mask::Mask;

/// Keys counted as local.
pub const LOCAL_KEYS: usize = 8;

/// The labels' thresholds: a head earns a label when its score reaches it.
pub const PREVIOUS_LABEL: f64 = 0.5;
pub const INDUCTION_LABEL: f64 = 0.4;
pub const SINK_LABEL: f64 = 0.5;
pub const LOCAL_LABEL: f64 = 0.9;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HeadScores {
    pub previous: Option<f64>,
    pub induction: Option<f64>,
    pub sink: Option<f64>,
    pub local: Option<f64>,
}

impl HeadScores {
    /// Scores of one head: `probs` is (tokens, tokens), row `q` the weights of query `q`; nothing is
    /// measured when its size does not match `ids`.
    pub fn measure(probs: &[f32], ids: &[u32], mask: Mask) -> HeadScores {
        let t = ids.len();
        if t.checked_mul(t) != Some(probs.len()) {
            return HeadScores::default();
        }
        let p = |q: usize, k: usize| f64::from(probs[q * t + k]);
        let previous = mean((1..t).map(|q| p(q, q - 1)));
        let sink = mean((1..t).filter(|&q| mask.visible(q as u32, 0)).map(|q| p(q, 0)));
        let local = mean((LOCAL_KEYS - 1..t).map(|q| (q + 1 - LOCAL_KEYS..=q).map(|k| p(q, k)).sum()));
        let induction =
            mean(induction_targets(ids).filter(|&(q, k)| mask.visible(q as u32, k as u32)).map(|(q, k)| p(q, k)));
        HeadScores { previous, induction, sink, local }
    }

    /// The labels earned, strongest claim first.
    pub fn labels(&self) -> Vec<&'static str> {
        let earned = |score: Option<f64>, threshold: f64| score.is_some_and(|s| s >= threshold);
        [
            (self.induction, INDUCTION_LABEL, "induction"),
            (self.previous, PREVIOUS_LABEL, "previous-token"),
            (self.sink, SINK_LABEL, "sink"),
            (self.local, LOCAL_LABEL, "local"),
        ]
        .into_iter()
        .filter(|&(score, threshold, _)| earned(score, threshold))
        .map(|(_, _, label)| label)
        .collect()
    }

    /// `{"previous":0.91,"induction":null,"sink":0.05,"local":0.6}`: two decimals, `null` where the
    /// text cannot measure a score (the page's `data-scores`).
    pub fn to_json(&self) -> String {
        let show = |s: Option<f64>| s.map_or("null".to_string(), |v| format!("{:.2}", v));
        format!(
            "{{\"previous\":{},\"induction\":{},\"sink\":{},\"local\":{}}}",
            show(self.previous),
            show(self.induction),
            show(self.sink),
            show(self.local)
        )
    }
}

impl HeadScores {
    /// The scores in a line under a thumbnail: `prev 0.80 · ind – · sink 0.02 · local 0.95`
    /// (a dash where the text cannot measure one).
    pub fn summary(&self) -> String {
        let show = |s: Option<f64>| s.map_or("–".to_string(), |v| format!("{v:.2}"));
        format!(
            "prev {} · ind {} · sink {} · local {}",
            show(self.previous),
            show(self.induction),
            show(self.sink),
            show(self.local)
        )
    }
}

/// What each score measures and the score a label needs, for the page (the thresholds are the
/// constants above).
pub fn score_legend() -> String {
    format!(
        "Scores are mean attention on this text: prev = on the token just before (label previous-token at \
         ≥ {PREVIOUS_LABEL}), ind = on the token that followed the last earlier occurrence of the query's \
         token (induction at ≥ {INDUCTION_LABEL}; needs a repeated token), sink = on the first token (sink \
         at ≥ {SINK_LABEL}), local = on the {LOCAL_KEYS} most recent tokens (local at ≥ {LOCAL_LABEL})."
    )
}

/// (query, key) pairs an induction head would attend: each query whose token appeared before at `p`
/// (latest earlier occurrence) with `p + 1 < q - 1`, paired with key `p + 1`.
fn induction_targets(ids: &[u32]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut last_seen: HashMap<u32, usize> = HashMap::new();
    ids.iter().enumerate().filter_map(move |(q, id)| {
        let target = last_seen.insert(*id, q).map(|p| p + 1).filter(|&k| k + 1 < q);
        target.map(|k| (q, k))
    })
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A (t, t) head whose query `q` puts all its weight on `key(q)`.
    fn pointing(t: usize, key: impl Fn(usize) -> usize) -> Vec<f32> {
        let mut p = vec![0.0; t * t];
        for q in 0..t {
            p[q * t + key(q)] = 1.0;
        }
        p
    }

    #[test]
    fn a_previous_token_head() {
        // Tokens a b c a b c d e e (9): every query q >= 1 looks at q - 1.
        let ids = [1, 2, 3, 1, 2, 3, 4, 5, 5];
        let s = HeadScores::measure(&pointing(9, |q| q.saturating_sub(1)), &ids, Mask::Causal);
        assert_eq!(s.previous, Some(1.0));
        // Sink: only query 1 looks at key 0: 1/8.
        assert_eq!(s.sink, Some(0.125));
        // Local: queries 7 and 8 put everything in their last 8 keys.
        assert_eq!(s.local, Some(1.0));
        // Induction targets: q3 (a, first at 0) -> key 1; q4 (b) -> 2; q5 (c) -> 3; q8 (e, at 7):
        // 8 is not > 7 + 2, so no. A previous-token head puts nothing on keys 1, 2, 3 from 3, 4, 5.
        assert_eq!(s.induction, Some(0.0));
        assert_eq!(s.labels(), vec!["previous-token", "local"]);
        assert_eq!(s.to_json(), r#"{"previous":1.00,"induction":0.00,"sink":0.12,"local":1.00}"#);
        assert_eq!(s.summary(), "prev 1.00 · ind 0.00 · sink 0.12 · local 1.00");
    }

    #[test]
    fn an_induction_head_and_the_mask() {
        let ids = [1, 2, 3, 1, 2, 3];
        let targets: Vec<_> = induction_targets(&ids).collect();
        assert_eq!(targets, vec![(3, 1), (4, 2), (5, 3)]);
        let head = pointing(6, |q| if q >= 3 { q - 2 } else { 0 });
        let s = HeadScores::measure(&head, &ids, Mask::Causal);
        assert_eq!(s.induction, Some(1.0));
        assert_eq!(s.local, None, "fewer than 8 tokens");
        assert_eq!(s.labels(), vec!["induction"]);
        // A 2-token window hides every target (q - 2 is outside it), and key 0 from query 2 on.
        let windowed = HeadScores::measure(&head, &ids, Mask::Sliding { window_tokens: 2 });
        assert_eq!(windowed.induction, None);
        assert_eq!(windowed.sink, Some(1.0), "only query 1 still sees key 0, and looks there");
    }

    #[test]
    fn texts_that_cannot_measure_give_null() {
        assert_eq!(HeadScores::measure(&[1.0; 3], &[1, 2], Mask::Causal), HeadScores::default(), "wrong size");
        let s = HeadScores::measure(&[1.0], &[7], Mask::Causal);
        assert_eq!(s, HeadScores::default());
        assert_eq!(s.to_json(), r#"{"previous":null,"induction":null,"sink":null,"local":null}"#);
        assert!(s.labels().is_empty());
        assert_eq!(s.summary(), "prev – · ind – · sink – · local –");
        let legend = score_legend();
        assert!(legend.contains("previous-token at ≥ 0.5") && legend.contains("local at ≥ 0.9"), "{legend}");
    }
}
