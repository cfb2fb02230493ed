//! [`CpuPass`] decoding through an evicting KV cache: before a layer's heads attend, its cache is run
//! over the text one position at a time ([`run_cache`]), each query's attention over the kept keys
//! (summed over the layer's query heads) told to the policy after the query has read them; the heads
//! then read only the kept keys. The attention each query would have paid the dropped keys (the
//! full cache's softmax with the same Q and K) is recorded as the mass thrown away.

use super::CpuPass;
use crate::model::kv_evict::{EvictPolicy, LayerEviction, evict_layer};

/// The Rust book's ownership section (chapter 4.1), which the shipped model read in training: the
/// text the README's eviction table and the GPU-against-CPU eviction test are measured on.
pub const OWNERSHIP_RULES: &str = "First, let's take a look at the ownership rules. Keep these rules \
    in mind as we work through the examples that illustrate them: Each value in Rust has an owner. There can \
    only be one owner at a time. When the owner goes out of scope, the value will be dropped. As a first \
    example of ownership, we'll look at the scope of some variables. A scope is the range within a program \
    for which an item is valid.";

/// What an evicting pass kept and threw away.
#[derive(Clone, Debug, PartialEq)]
pub struct EvictionRecord {
    pub policy: EvictPolicy,
    pub keep: usize,
    /// Per layer, per query, the kept positions it read (ascending).
    pub kept: Vec<Vec<Vec<u32>>>,
    /// Per layer, the full-cache attention mass on dropped keys, averaged over query heads and
    /// queries.
    pub dropped: Vec<f64>,
    /// Per layer, per query `i`, the full cache's attention over keys `0..=i`, averaged over the
    /// layer's query heads ([`crate::model::kv_evict::LayerEviction::full`]).
    pub full: Vec<Vec<Vec<f64>>>,
}

impl EvictionRecord {
    pub fn new(policy: EvictPolicy, keep: usize, layers: usize) -> Self {
        let (kept, dropped, full) =
            (Vec::with_capacity(layers), Vec::with_capacity(layers), Vec::with_capacity(layers));
        Self { policy, keep: keep.max(1), kept, dropped, full }
    }

    /// Adds the next layer's.
    pub fn push(&mut self, layer: LayerEviction) {
        self.kept.push(layer.kept);
        self.dropped.push(layer.dropped);
        self.full.push(layer.full);
    }

    /// The mass thrown away per query, averaged over every layer.
    pub fn mean_dropped(&self) -> f64 {
        if self.dropped.is_empty() { 0.0 } else { self.dropped.iter().sum::<f64>() / self.dropped.len() as f64 }
    }
}

impl CpuPass<'_> {
    /// Runs layer `l`'s cache over the text and records its kept sets and the mass they drop.
    pub(super) fn evict_layer(&mut self, l: usize) {
        let Some(record) = &self.eviction else { return };
        let (t, heads) = (self.ids.len() as u32, self.ck.model.n_q_heads as usize);
        let mask = self.ck.layers[l].mask;
        let attend = |head: usize, i: usize, keys: &[usize]| self.attend_row(head, i, keys);
        let layer = evict_layer(record.policy, record.keep, t, heads, mask, attend);
        self.eviction.as_mut().expect("checked above").push(layer);
    }
}

#[cfg(test)]
mod tests {
    use super::OWNERSHIP_RULES;
    use crate::lm::forward::{CpuPass, forward};
    use crate::lm::kv_quality::quality;
    use crate::lm::shipped_model::{shipped, shipped_tokenizer};
    use crate::model::kv_evict::{EvictPolicy, POLICIES, bytes_at_last_step};

    #[test]
    fn keep_everything_costs_nothing_and_eviction_costs_something() {
        let ck = shipped();
        let tokenizer = shipped_tokenizer();
        let ids = tokenizer.encode(OWNERSHIP_RULES);
        let full = forward(&ck, &ids).unwrap();
        println!("{} tokens", ids.len());
        for keep in [4, 8, 16, 32, 48] {
            for policy in POLICIES {
                let mut pass = CpuPass::new(&ck, &ids, ids.len()).unwrap().with_eviction(policy, keep);
                while pass.step() {}
                let record = pass.take_eviction().unwrap();
                let out = pass.finish();
                let q = quality(&full.logits, &out.logits, &ids).unwrap();
                let bytes = bytes_at_last_step(&record.kept, 2, 32);
                println!(
                    "K {keep:>3} {:>7} {bytes:>6} B  KL {:.3e}  top-1 {:.3}  loss {:.4}  dropped {:.4}",
                    policy.name(),
                    q.kl,
                    q.top1,
                    q.loss.unwrap(),
                    record.mean_dropped()
                );
                if policy == EvictPolicy::Full {
                    // The same keys in the same order: the very same arithmetic.
                    assert_eq!(out.logits, full.logits);
                    assert_eq!((q.kl, q.top1, record.mean_dropped()), (0.0, 1.0, 0.0));
                } else if keep < 32 {
                    assert!(q.kl > 1e-4 && record.mean_dropped() > 0.0, "{policy:?} K={keep}: KL {}", q.kl);
                }
            }
        }
    }

    #[test]
    fn the_heads_read_only_the_kept_keys() {
        let ck = shipped();
        let ids: Vec<u32> = (100..140).collect();
        let mut pass = CpuPass::new(&ck, &ids, 1).unwrap().with_eviction(EvictPolicy::Sinks, 8);
        while pass.step() {}
        let record = pass.take_eviction().unwrap();
        let out = pass.finish();
        let t = ids.len();
        for (layer, kept) in record.kept.iter().enumerate() {
            // Query 39 keeps the sinks 0..4 and 36..=39; its probabilities are 0 elsewhere and sum to 1.
            assert_eq!(kept[39], [0, 1, 2, 3, 36, 37, 38, 39]);
            for head in 0..8 {
                let row = &out.head(layer, head)[39 * t..][..t];
                let off: f32 =
                    row.iter().enumerate().filter(|(j, _)| !kept[39].contains(&(*j as u32))).map(|(_, p)| p).sum();
                assert_eq!(off, 0.0);
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            }
        }
    }
}
