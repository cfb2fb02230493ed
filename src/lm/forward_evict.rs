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

    /// The README's eviction table, cell by cell (`cargo test --lib forward::evict -- --nocapture`
    /// prints it): per K the bytes read at the last token, then window, sinks, H2O and SnapKV-style
    /// as KL (3 significant digits) / top-1 / loss, and the dropped mass at K = 8 and 32.
    const README_TABLE: [(usize, u64, [&str; 4]); 5] = [
        (
            4,
            8_192,
            ["0.399 / 0.745 / 3.731", "0.680 / 0.582 / 4.212", "0.637 / 0.571 / 4.173", "0.399 / 0.745 / 3.731"],
        ),
        (
            8,
            16_384,
            ["0.239 / 0.755 / 3.545", "0.336 / 0.684 / 3.655", "0.313 / 0.673 / 3.606", "0.232 / 0.735 / 3.597"],
        ),
        (
            16,
            32_768,
            ["0.155 / 0.827 / 3.538", "0.142 / 0.827 / 3.520", "0.159 / 0.816 / 3.432", "0.146 / 0.765 / 3.542"],
        ),
        (
            32,
            65_536,
            ["0.0905 / 0.898 / 3.573", "0.0162 / 0.918 / 3.586", "0.0163 / 0.929 / 3.532", "0.0176 / 0.918 / 3.628"],
        ),
        (
            48,
            98_304,
            ["0.0513 / 0.949 / 3.566", "0.0611 / 0.949 / 3.561", "0.00357 / 0.990 / 3.579", "0.00247 / 0.990 / 3.588"],
        ),
    ];
    const README_DROPPED: [(usize, [&str; 4]); 2] =
        [(8, ["41 %", "48 %", "47 %", "39 %"]), (32, ["6 %", "7 %", "10 %", "8 %"])];

    /// KL as the README writes it: three significant digits.
    fn three_digits(x: f64) -> String {
        if x == 0.0 {
            return "0".into();
        }
        let decimals = (2 - x.abs().log10().floor() as i32).max(3) as usize;
        format!("{x:.decimals$}")
    }

    #[test]
    fn keep_everything_costs_nothing_and_eviction_costs_what_the_readme_says() {
        let ck = shipped();
        let tokenizer = shipped_tokenizer();
        let ids = tokenizer.encode(OWNERSHIP_RULES);
        let full = forward(&ck, &ids).unwrap();
        assert_eq!(ids.len(), 98, "the README's table is over 98 tokens");
        let mut stale = Vec::new();
        for (keep, readme_bytes, readme_cells) in README_TABLE {
            for (i, policy) in POLICIES.into_iter().enumerate() {
                let mut pass = CpuPass::new(&ck, &ids, ids.len()).unwrap().with_eviction(policy, keep);
                while pass.step() {}
                let record = pass.take_eviction().unwrap();
                let out = pass.finish();
                let q = quality(&full.logits, &out.logits, &ids).unwrap();
                let bytes = bytes_at_last_step(&record.kept, 2, 32);
                let cell = format!("{} / {:.3} / {:.3}", three_digits(q.kl), q.top1, q.loss.unwrap());
                let dropped = format!("{:.0} %", 100.0 * record.mean_dropped());
                println!("K {keep:>3} {:>7} {bytes:>6} B  {cell}  dropped {dropped}", policy.name());
                if policy == EvictPolicy::Full {
                    // The same keys in the same order: the very same arithmetic.
                    assert_eq!(out.logits, full.logits);
                    assert_eq!((q.kl, q.top1, record.mean_dropped()), (0.0, 1.0, 0.0));
                    continue;
                }
                if (bytes, cell.as_str()) != (readme_bytes, readme_cells[i - 1]) {
                    stale.push(format!("{policy:?} K = {keep}: {bytes} B, {cell} (loss {:.5})", q.loss.unwrap()));
                }
                let readme_dropped = README_DROPPED.iter().find(|(k, _)| *k == keep).map(|(_, cells)| cells[i - 1]);
                if readme_dropped.is_some_and(|cell| cell != dropped) {
                    stale.push(format!("{policy:?} K = {keep}: dropped {dropped}"));
                }
                if keep < 32 {
                    assert!(q.kl > 1e-4 && record.mean_dropped() > 0.0, "{policy:?} K={keep}: KL {}", q.kl);
                }
            }
        }
        assert!(stale.is_empty(), "cells the README's table does not hold: {stale:#?}");
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
