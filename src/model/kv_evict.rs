//! Which cached tokens an evicting KV cache keeps, decided one decoding step at a time: at step t
//! token t's key and value join the cache, keys past the layer's own window leave it, and the policy
//! evicts down to K kept tokens; query t then reads only the kept entries, and its attention over
//! them is the only thing the policy learns of step t. A policy therefore decides at t from the
//! queries before t and the positions up to t, never from later ones ([`EvictingCache`]'s API admits
//! no more). One cache per layer: its kept set is shared by the layer's heads, and a policy that
//! scores keys by attention sums the scores over the layer's query heads.
//!
//! The policies, each after the paper it follows:
//! - `full`: keep everything the layer's own mask lets through (the reference, KL 0);
//! - `window`: the most recent K tokens;
//! - `sinks` (StreamingLLM, Xiao et al. 2023): the first S = min(4, K/2) tokens as attention sinks
//!   plus the most recent K - S;
//! - `h2o` (Zhang et al. 2023): the most recent ceil(K/2) plus the heavy hitters: when one must go,
//!   the older token with the least attention accumulated over every query so far;
//! - `snapkv` (Li et al. 2024), in decoding: the most recent W = min(8, ceil(K/2)) tokens are the
//!   observation window; an older token's score is the attention the latest W queries gave it,
//!   max-pooled over positions within 2 of it (the clustering SnapKV pools for), and the
//!   lowest-scored one goes.
//!
//! Ties go to the oldest token.

use std::collections::VecDeque;

use crate::model::mask::Mask;

/// An eviction policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictPolicy {
    Full,
    Window,
    Sinks,
    HeavyHitters,
    SnapKv,
}

/// The compared policies, in the order the page lists them.
pub const POLICIES: [EvictPolicy; 5] =
    [EvictPolicy::Full, EvictPolicy::Window, EvictPolicy::Sinks, EvictPolicy::HeavyHitters, EvictPolicy::SnapKv];

/// StreamingLLM's attention sinks (at most K/2 of them).
pub const MAX_SINKS: usize = 4;
/// SnapKV's observation window (at most ceil(K/2) queries).
pub const MAX_OBSERVATION: usize = 8;
/// SnapKV's pooling: a key's score is the largest of the keys within this many positions.
pub const POOL_RADIUS: u32 = 2;

impl EvictPolicy {
    /// The name `policy=` and `data-name` use.
    pub fn name(self) -> &'static str {
        match self {
            EvictPolicy::Full => "full",
            EvictPolicy::Window => "window",
            EvictPolicy::Sinks => "sinks",
            EvictPolicy::HeavyHitters => "h2o",
            EvictPolicy::SnapKv => "snapkv",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        POLICIES.into_iter().find(|p| p.name() == name)
    }
}

/// S for K kept tokens.
pub fn sinks(keep: usize) -> usize {
    MAX_SINKS.min(keep / 2)
}

/// SnapKV's W for K kept tokens.
pub fn observation(keep: usize) -> usize {
    MAX_OBSERVATION.min(keep - keep / 2).max(1)
}

/// One layer's evicting cache, run one decoding step at a time ([`Self::admit`], then
/// [`Self::observe`]).
#[derive(Clone, Debug)]
pub struct EvictingCache {
    policy: EvictPolicy,
    keep: usize,
    /// Cached positions, ascending.
    cached: Vec<u32>,
    /// H2O: the attention each position received so far, summed over the queries that read it.
    accumulated: Vec<f64>,
    /// SnapKV: the latest queries' attention (positions read, weights), oldest first.
    observed: VecDeque<(Vec<u32>, Vec<f64>)>,
}

impl EvictingCache {
    /// A cache keeping `keep` tokens (at least 1: the query's own).
    pub fn new(policy: EvictPolicy, keep: usize) -> Self {
        Self { policy, keep: keep.max(1), cached: Vec::new(), accumulated: Vec::new(), observed: VecDeque::new() }
    }

    /// Step `t`: token t joins, positions before `lo` (outside the layer's own window) leave, and the
    /// policy evicts down to K. Returns the kept positions, ascending: what query t reads.
    pub fn admit(&mut self, t: u32, lo: u32) -> &[u32] {
        self.cached.retain(|&p| p >= lo && p < t);
        self.cached.push(t);
        if self.accumulated.len() <= t as usize {
            self.accumulated.resize(t as usize + 1, 0.0);
        }
        while self.policy != EvictPolicy::Full && self.cached.len() > self.keep {
            let victim = self.victim();
            self.cached.remove(victim);
        }
        &self.cached
    }

    /// Query t's attention over the positions [`Self::admit`] returned, in their order (summed over
    /// the layer's query heads).
    pub fn observe(&mut self, weights: &[f64]) {
        for (&p, &w) in self.cached.iter().zip(weights) {
            self.accumulated[p as usize] += w;
        }
        if self.policy == EvictPolicy::SnapKv {
            self.observed.push_back((self.cached.clone(), weights.to_vec()));
            while self.observed.len() > observation(self.keep) {
                self.observed.pop_front();
            }
        }
    }

    /// The index in `cached` of the token to evict (`cached` holds more than K).
    fn victim(&self) -> usize {
        let n = self.cached.len();
        match self.policy {
            EvictPolicy::Full | EvictPolicy::Window => 0,
            EvictPolicy::Sinks => sinks(self.keep),
            EvictPolicy::HeavyHitters => {
                let older = n - (self.keep - self.keep / 2);
                lowest(&self.cached[..older], |p| self.accumulated[p as usize])
            }
            EvictPolicy::SnapKv => {
                let older = n - observation(self.keep);
                let score = self.observation_scores();
                let pooled = |p: u32| {
                    let near = self.cached.iter().filter(|&&q| q.abs_diff(p) <= POOL_RADIUS);
                    near.map(|&q| score[q as usize]).fold(0.0, f64::max)
                };
                lowest(&self.cached[..older], pooled)
            }
        }
    }

    /// The attention each position got from the observation window's queries, summed.
    fn observation_scores(&self) -> Vec<f64> {
        let mut score = vec![0.0; self.accumulated.len()];
        for (positions, weights) in &self.observed {
            for (&p, &w) in positions.iter().zip(weights) {
                score[p as usize] += w;
            }
        }
        score
    }
}

/// The index of the lowest score among `positions` (the first, the oldest, on a tie).
fn lowest(positions: &[u32], score: impl Fn(u32) -> f64) -> usize {
    let mut best = 0;
    let mut best_score = f64::INFINITY;
    for (i, &p) in positions.iter().enumerate() {
        let s = score(p);
        if s < best_score {
            (best, best_score) = (i, s);
        }
    }
    best
}

/// Runs one layer's cache over `tokens` queries: `lo(t)` is the first key the layer's own mask lets
/// query t read, `attend(t, kept)` query t's attention over the kept positions summed over heads.
/// Returns each query's kept positions.
pub fn run_cache(
    policy: EvictPolicy,
    keep: usize,
    tokens: u32,
    lo: impl Fn(u32) -> u32,
    mut attend: impl FnMut(u32, &[u32]) -> Vec<f64>,
) -> Vec<Vec<u32>> {
    let mut cache = EvictingCache::new(policy, keep);
    let mut kept = Vec::with_capacity(tokens as usize);
    for t in 0..tokens {
        let read = cache.admit(t, lo(t)).to_vec();
        let weights = attend(t, &read);
        cache.observe(&weights);
        kept.push(read);
    }
    kept
}

/// What one layer's evicting cache did over a text.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerEviction {
    /// Per query, the kept positions it read (ascending).
    pub kept: Vec<Vec<u32>>,
    /// The full-cache attention mass on dropped keys, averaged over heads and queries.
    pub dropped: f64,
    /// Per query `i`, the attention the full cache would give each key `0..=i` (0 outside the layer's
    /// mask), averaged over heads: what the kept and dropped keys were worth.
    pub full: Vec<Vec<f64>>,
}

/// One layer's cache run over `tokens` queries of `heads` query heads under the layer's own `mask`:
/// `attend(head, i, keys)` is head `head`'s softmax of query `i` over `keys`. The policy is told each
/// query's attention over its kept keys summed over heads.
pub fn evict_layer(
    policy: EvictPolicy,
    keep: usize,
    tokens: u32,
    heads: usize,
    mask: Mask,
    attend: impl Fn(usize, usize, &[usize]) -> Vec<f64>,
) -> LayerEviction {
    let mut dropped = 0.0;
    let mut full_rows = vec![Vec::new(); tokens as usize];
    let kept = run_cache(
        policy,
        keep,
        tokens,
        |i| mask.key_range(i, tokens).0,
        |i, kept| {
            let keys: Vec<usize> = kept.iter().map(|&p| p as usize).collect();
            let (lo, hi) = mask.key_range(i, tokens);
            let visible: Vec<usize> = (lo as usize..hi as usize).collect();
            let mut summed = vec![0.0; keys.len()];
            let mut mean = vec![0.0; hi as usize];
            for head in 0..heads {
                for (s, w) in summed.iter_mut().zip(attend(head, i as usize, &keys)) {
                    *s += w;
                }
                let mut full = vec![0.0; hi as usize];
                for (&j, w) in visible.iter().zip(attend(head, i as usize, &visible)) {
                    full[j] = w;
                    mean[j] += w / heads as f64;
                }
                dropped += dropped_mass(&full, kept);
            }
            full_rows[i as usize] = mean;
            summed
        },
    );
    let queries = (heads * tokens as usize).max(1);
    LayerEviction { kept, dropped: dropped / queries as f64, full: full_rows }
}

/// A layer's kept sets as one list for `kept_attention`: `kept.len() + 1` offsets, then every
/// query's positions. Refuses sets that are not ascending or reach `n_kv`.
pub fn kept_list(kept: &[Vec<u32>], n_kv: u32) -> Result<Vec<u32>, String> {
    let entries: usize = kept.iter().map(Vec::len).sum();
    let mut list = Vec::with_capacity(kept.len() + 1 + entries);
    let mut offset = 0u32;
    list.push(0);
    for set in kept {
        if set.windows(2).any(|w| w[0] >= w[1]) || set.last().is_some_and(|&p| p >= n_kv) {
            return Err(format!("a kept set {set:?} is not ascending below {n_kv}"));
        }
        offset = u32::try_from(set.len()).ok().and_then(|n| offset.checked_add(n)).ok_or("too many kept entries")?;
        list.push(offset);
    }
    list.extend(kept.iter().flatten());
    Ok(list)
}

/// Bytes one kept token costs one layer: K and V of every KV head, f32 (what the attention reads).
pub fn bytes_per_kept_token(kv_heads: u32, head_dim: u32) -> u64 {
    2 * u64::from(kv_heads) * u64::from(head_dim) * 4
}

/// Bytes the attention read over a pass: every layer's kept entries at every step.
pub fn bytes_read(kept: &[Vec<Vec<u32>>], kv_heads: u32, head_dim: u32) -> u64 {
    let entries: usize = kept.iter().flatten().map(Vec::len).sum();
    entries as u64 * bytes_per_kept_token(kv_heads, head_dim)
}

/// Bytes the attention read at the last step (every layer's cache at the text's end).
pub fn bytes_at_last_step(kept: &[Vec<Vec<u32>>], kv_heads: u32, head_dim: u32) -> u64 {
    let entries: usize = kept.iter().filter_map(|layer| layer.last()).map(Vec::len).sum();
    entries as u64 * bytes_per_kept_token(kv_heads, head_dim)
}

/// The attention mass a query's full-cache probabilities (`full`, over every key) put on keys not
/// kept.
pub fn dropped_mass(full: &[f64], kept: &[u32]) -> f64 {
    let kept_mass: f64 = kept.iter().filter_map(|&p| full.get(p as usize)).sum();
    (full.iter().sum::<f64>() - kept_mass).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kept sets of a cache over `tokens` queries with a causal mask and given attention rows (each
    /// row's weight for a position; missing positions 0).
    fn run(policy: EvictPolicy, keep: usize, rows: &[Vec<f64>]) -> Vec<Vec<u32>> {
        run_cache(
            policy,
            keep,
            rows.len() as u32,
            |_| 0,
            |t, kept| kept.iter().map(|&p| rows[t as usize].get(p as usize).copied().unwrap_or(0.0)).collect(),
        )
    }

    fn uniform(tokens: usize) -> Vec<Vec<f64>> {
        (0..tokens).map(|t| vec![1.0 / (t + 1) as f64; t + 1]).collect()
    }

    #[test]
    fn full_keeps_everything_the_mask_lets_through() {
        let kept = run(EvictPolicy::Full, 2, &uniform(4));
        assert_eq!(kept[3], [0, 1, 2, 3]);
        // A sliding layer's own window of 2: positions before t - 1 leave.
        let kept = run_cache(EvictPolicy::Full, 8, 5, |t| t.saturating_sub(1), |_, k| vec![0.0; k.len()]);
        assert_eq!(kept, [vec![0], vec![0, 1], vec![1, 2], vec![2, 3], vec![3, 4]]);
    }

    #[test]
    fn window_keeps_the_most_recent() {
        let kept = run(EvictPolicy::Window, 3, &uniform(6));
        assert_eq!(kept[1], [0, 1]);
        assert_eq!(kept[5], [3, 4, 5]);
    }

    #[test]
    fn sinks_keep_the_first_tokens_and_a_window() {
        // K = 6: S = 3, recent 3. K = 8: S = 4 (the cap), recent 4. K = 1: no sink.
        assert_eq!((sinks(6), sinks(8), sinks(20), sinks(1)), (3, 4, 4, 0));
        let kept = run(EvictPolicy::Sinks, 6, &uniform(10));
        assert_eq!(kept[9], [0, 1, 2, 7, 8, 9]);
        assert_eq!(kept[6], [0, 1, 2, 4, 5, 6]);
        assert_eq!(run(EvictPolicy::Sinks, 1, &uniform(3))[2], [2]);
    }

    #[test]
    fn h2o_evicts_the_older_token_with_least_accumulated_attention() {
        // K = 4: recent 2, heavy 2. Query rows (weights per position, exact in binary):
        // q0: [1]; q1: [0.75, 0.25]; q2: [0.25, 0.5, 0.25]; q3: [0.25, 0.5, 0, 0.25].
        // Accumulated before step 4: p0 1 + 0.75 + 0.25 + 0.25 = 2.25, p1 0.25 + 0.5 + 0.5 = 1.25,
        // p2 0.25 + 0 = 0.25, p3 0.25. At step 4 the cache holds 0..=4; the older candidates are 0,
        // 1, 2 (3 and 4 are recent): p2 goes, though p3 has as little (it is recent).
        let rows = vec![
            vec![1.0],
            vec![0.75, 0.25],
            vec![0.25, 0.5, 0.25],
            vec![0.25, 0.5, 0.0, 0.25],
            vec![0.5, 0.0, 0.25, 0.125, 0.125],
        ];
        let kept = run(EvictPolicy::HeavyHitters, 4, &rows);
        assert_eq!(kept[3], [0, 1, 2, 3]);
        assert_eq!(kept[4], [0, 1, 3, 4]);
    }

    #[test]
    fn snapkv_scores_by_the_latest_queries_pooled() {
        // K = 4: W = 2 (recent 2). Positions 0..=6 are scored by queries t - 2 and t - 1 only, pooled
        // over ±2 cached positions. Rows: query 2 puts 0.8 on p0; query 3 puts 0.6 on p0;
        // at step 4 the cache holds 0..=4, older candidates 0, 1, 2. Observation (q2, q3) scores
        // p0 1.4, p1 0.1 + 0.1 = 0.2, p2 0.1 + 0.2 = 0.3; pooled within ±2 all reach p0's 1.4 (p1,
        // p2 are within 2 of p0): a tie, the oldest (p0) goes: pooling protects the neighbours of
        // a hit, not only the hit. H2O would keep p0.
        let rows = vec![
            vec![1.0],
            vec![0.5, 0.5],
            vec![0.8, 0.1, 0.1],
            vec![0.6, 0.1, 0.2, 0.1],
            vec![0.0, 0.0, 0.0, 0.5, 0.5],
        ];
        let kept = run(EvictPolicy::SnapKv, 4, &rows);
        assert_eq!(kept[4], [1, 2, 3, 4]);
        assert_eq!(observation(4), 2);
        assert_eq!(observation(1), 1);
        assert_eq!(observation(40), MAX_OBSERVATION);
    }

    #[test]
    fn snapkv_keeps_what_the_latest_queries_read() {
        // K = 4 (W = 2) over ten tokens: queries 0-5 read p0 (weight 1), queries 6-9 read p6.
        let mut rows: Vec<Vec<f64>> = Vec::new();
        for t in 0..10usize {
            let mut r = vec![0.0; t + 1];
            // Every query from 1 on attends to p6 once it exists, else to p0.
            if t >= 6 {
                r[6] = 1.0
            } else {
                r[0] = 1.0
            }
            rows.push(r);
        }
        let kept = run(EvictPolicy::SnapKv, 4, &rows);
        // Step by step: at 4 the older candidates 0, 1, 2 all pool to p0's 2 (queries 2, 3): p0, the
        // oldest, goes; at 5 and 6 nothing older scores: 1, then 2 go; at 7 queries 5, 6 score p6 1,
        // which p4 and p5 reach: p3 goes; at 8 and 9 p4..p7 all pool to p6's 2: 4, then 5 go.
        assert_eq!(kept[9], [6, 7, 8, 9]);
        // H2O keeps p0 (6 queries' attention accumulated) and p6 instead: 1 to 5 and 7 go in turn.
        let h2o = run(EvictPolicy::HeavyHitters, 4, &rows);
        assert_eq!(h2o[9], [0, 6, 8, 9]);
    }

    #[test]
    fn no_policy_looks_ahead() {
        // Two attention histories equal up to query 5 and different after: every policy's kept sets
        // up to step 6 (decided from queries 0..=5) are the same, and no step keeps a later token.
        let a: Vec<Vec<f64>> = (0..12).map(|t| (0..=t).map(|p| ((p * 7 + t * 3) % 5) as f64).collect()).collect();
        let mut b = a.clone();
        for row in &mut b[6..] {
            row.iter_mut().for_each(|w| *w = 10.0 - *w);
        }
        for policy in POLICIES {
            for keep in [1, 3, 5, 8] {
                let (ka, kb) = (run(policy, keep, &a), run(policy, keep, &b));
                assert_eq!(ka[..=6], kb[..=6], "{policy:?} K={keep}");
                for (t, kept) in ka.iter().enumerate() {
                    assert!(kept.iter().all(|&p| p as usize <= t) && kept.contains(&(t as u32)));
                    let cap = if policy == EvictPolicy::Full { t + 1 } else { keep.min(t + 1) };
                    assert_eq!(kept.len(), cap, "{policy:?} K={keep} t={t}");
                }
            }
        }
    }

    #[test]
    fn bytes_and_dropped_mass_by_hand() {
        // The trained model: 2 KV heads of width 32: K and V, f32 = 2 x 2 x 32 x 4 = 512 B a token.
        assert_eq!(bytes_per_kept_token(2, 32), 512);
        // Two layers, three steps: 1 + 2 + 2 and 1 + 2 + 3 entries = 11; last step 2 + 3 = 5.
        let kept = vec![vec![vec![0], vec![0, 1], vec![1, 2]], vec![vec![0], vec![0, 1], vec![0, 1, 2]]];
        assert_eq!(bytes_read(&kept, 2, 32), 11 * 512);
        assert_eq!(bytes_at_last_step(&kept, 2, 32), 5 * 512);
        // Full probabilities (0.5, 0.25, 0.25), keys 0 and 2 kept: 0.25 thrown away.
        assert_eq!(dropped_mass(&[0.5, 0.25, 0.25], &[0, 2]), 0.25);
        assert_eq!(dropped_mass(&[0.5, 0.5], &[0, 1]), 0.0);
    }

    #[test]
    fn kept_list_by_hand() {
        // Offsets 0, 1, 3, then the positions.
        assert_eq!(kept_list(&[vec![0], vec![0, 1]], 2).unwrap(), [0, 1, 3, 0, 0, 1]);
        assert!(kept_list(&[vec![1, 0]], 2).is_err());
        assert!(kept_list(&[vec![0, 2]], 2).is_err());
    }

    #[test]
    fn evict_layer_counts_the_mass_dropped_per_head_and_query() {
        // Two heads, uniform attention, causal, window K = 2 over 3 tokens: query 2 drops key 0,
        // worth 1/3 to each head; averaged over 2 heads x 3 queries: (2 x 1/3) / 6 = 1/9.
        let uniform = |_: usize, _: usize, keys: &[usize]| vec![1.0 / keys.len() as f64; keys.len()];
        let layer = evict_layer(EvictPolicy::Window, 2, 3, 2, Mask::Causal, uniform);
        assert_eq!(layer.kept, [vec![0], vec![0, 1], vec![1, 2]]);
        assert!((layer.dropped - 1.0 / 9.0).abs() < 1e-15, "{}", layer.dropped);
        // The full cache's rows, the mean of both heads: 1; 1/2, 1/2; 1/3 each.
        let third = 1.0 / 3.0;
        assert_eq!(layer.full, [vec![1.0], vec![0.5, 0.5], vec![third, third, third]]);
    }

    #[test]
    fn names_round_trip() {
        for p in POLICIES {
            assert_eq!(EvictPolicy::from_name(p.name()), Some(p));
        }
        assert_eq!(EvictPolicy::from_name("lru"), None);
    }
}
