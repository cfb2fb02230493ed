//! The one mask type: which keys a query may see, computed from positions (never from a stored
//! matrix). The model arithmetic counts its pairs, the CPU reference and the GPU kernels apply it.
//!
//! Conventions (0-based positions, query `q`, key `j`):
//! - full: every pair (encoders, cross-attention);
//! - causal: `j <= q`;
//! - sliding window `W`: `0 <= q - j < W` (the query sees itself and the `W - 1` keys before it);
//! - chunked `C`: `j <= q` and `j / C == q / C` (Llama 4's local layers: attention restarts at each
//!   chunk boundary).

use std::fmt;

use super::schedule::LayerKind;

/// An attention mask. Positions are absolute token indices in the key/value sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mask {
    /// Every query sees every key (encoders, cross-attention).
    Full,
    /// Query `i` sees keys `0..=i`.
    Causal,
    /// Query `i` sees keys `i-W+1 ..= i` (Mistral, Gemma local layers). A window of 0 acts as 1 when
    /// applied; pair counting takes it as it is (nothing attended).
    Sliding { window_tokens: u64 },
    /// Causal inside blocks of `C` tokens (Llama 4 local layers). A chunk of 0 acts as 1 when applied.
    Chunked { chunk_tokens: u64 },
}

impl Mask {
    /// The mask a layer of `kind` applies during prefill: the one conversion every caller uses.
    /// `None` means a layer without softmax attention (state-space, linear-attention, convolution and
    /// feed-forward-only layers).
    pub const fn of_layer(kind: LayerKind) -> Option<Mask> {
        Some(match kind {
            LayerKind::Global => Mask::Causal,
            LayerKind::Sliding { window_tokens } => Mask::Sliding { window_tokens },
            LayerKind::Chunked { chunk_tokens } => Mask::Chunked { chunk_tokens },
            LayerKind::Stateful(_) | LayerKind::FeedForward => return None,
        })
    }

    /// Whether the query at absolute position `q_pos` may attend to the key at `k_pos`.
    pub fn visible(self, q_pos: u32, k_pos: u32) -> bool {
        let (lo, hi) = self.key_range(q_pos, u32::MAX);
        lo <= k_pos && k_pos < hi
    }

    /// The half-open range of key positions `[lo, hi)` visible to query `q_pos`, clipped to `n_kv` keys.
    /// The range is empty (`lo >= hi`) when a query sees no key at all (e.g. it lies past the keys).
    pub fn key_range(self, q_pos: u32, n_kv: u32) -> (u32, u32) {
        let causal_hi = q_pos.saturating_add(1).min(n_kv);
        let seen = u64::from(q_pos) + 1;
        // Both results are at most `q_pos`, so they fit back into u32.
        let lo = match self {
            Mask::Full | Mask::Causal => 0,
            Mask::Sliding { window_tokens } => seen - window_tokens.clamp(1, seen),
            Mask::Chunked { chunk_tokens } => u64::from(q_pos) - u64::from(q_pos) % chunk_tokens.max(1),
        };
        let lo = u32::try_from(lo).unwrap_or(q_pos);
        if self == Mask::Full { (0, n_kv) } else { (lo, causal_hi) }
    }

    /// Whether the block of query rows `i_a..i_b` and keys `j_a..j_b` holds any pair the mask lets
    /// through (queries sit at `q_offset + i`). Every mask's visible range `[lo, hi)` grows with the
    /// position, so the first row whose range reaches past `j_a` has the lowest `lo` of the rows that do.
    pub fn block_visible(self, q_offset: u32, n_kv: u32, (i_a, i_b): (u32, u32), (j_a, j_b): (u32, u32)) -> bool {
        if i_a >= i_b || j_a >= j_b {
            return false;
        }
        let hi = |i: u32| self.key_range(q_offset + i, n_kv).1;
        // Smallest i in [i_a, i_b) with hi(i) > j_a (binary search on a non-decreasing function).
        let (mut a, mut b) = (i_a, i_b);
        while a < b {
            let mid = a + (b - a) / 2;
            if hi(mid) > j_a { b = mid } else { a = mid + 1 }
        }
        a < i_b && self.key_range(q_offset + a, n_kv).0 < j_b
    }

    /// Number of (query, key) pairs the mask lets through in a square prefill of `n` tokens, exactly.
    ///
    /// - full: `n^2`; causal: `n(n+1)/2`;
    /// - sliding `W`: query `q` sees `min(q+1, W)` keys, so `n(n+1)/2` while `n <= W`, then
    ///   `W(W+1)/2 + (n-W)W`;
    /// - chunked `C`: `k = n / C` full chunks of `C(C+1)/2` each plus a partial chunk of `r = n mod C`:
    ///   `k C(C+1)/2 + r(r+1)/2`.
    ///
    /// A zero window or chunk attends nothing. Computed in `u128`: no overflow for any `u64` `n`.
    pub const fn attended_pairs(self, n_tokens: u64) -> u128 {
        let n = n_tokens as u128;
        match self {
            Mask::Full => n * n,
            Mask::Causal => triangle(n),
            Mask::Sliding { window_tokens } => {
                let w = window_tokens as u128;
                if n <= w { triangle(n) } else { triangle(w) + (n - w) * w }
            }
            Mask::Chunked { chunk_tokens } => {
                let c = chunk_tokens as u128;
                if c == 0 {
                    return 0;
                }
                (n / c) * triangle(c) + triangle(n % c)
            }
        }
    }

    /// The kernels' encoding (keep in sync with `MASK_*` in `shaders/include/attention_masks.wgsl`): kind
    /// and its size in tokens, at least 1. Sizes past `u32::MAX` clamp to it: no sequence a kernel
    /// runs is that long, so such a mask is causal in effect, as it is on the CPU.
    pub fn to_gpu(self) -> (u32, u32) {
        let tokens = |t: u64| u32::try_from(t).unwrap_or(u32::MAX).max(1);
        match self {
            Mask::Full => (0, 0),
            Mask::Causal => (1, 0),
            Mask::Sliding { window_tokens } => (2, tokens(window_tokens)),
            Mask::Chunked { chunk_tokens } => (3, tokens(chunk_tokens)),
        }
    }

    /// The kinds' names, as links and selects write them (`mask=sliding`).
    pub const KIND_NAMES: [&'static str; 4] = ["full", "causal", "sliding", "chunked"];

    /// The URL / UI name of the mask's kind.
    pub const fn kind_name(self) -> &'static str {
        match self {
            Mask::Full => "full",
            Mask::Causal => "causal",
            Mask::Sliding { .. } => "sliding",
            Mask::Chunked { .. } => "chunked",
        }
    }

    /// The mask of the kind named `kind`: sliding with `window_tokens`, chunked with `chunk_tokens`.
    pub fn named(kind: &str, window_tokens: u64, chunk_tokens: u64) -> Result<Mask, String> {
        [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens }, Mask::Chunked { chunk_tokens }]
            .into_iter()
            .find(|m| m.kind_name() == kind)
            .map(|m| m.resized(window_tokens, chunk_tokens))
            .ok_or_else(|| format!("unknown mask \"{kind}\" (expected full, causal, sliding or chunked)"))
    }

    /// The same kind with `window_tokens` as a sliding window or `chunk_tokens` as a chunk (at least
    /// 1 each); full and causal have no size.
    pub fn resized(self, window_tokens: u64, chunk_tokens: u64) -> Mask {
        match self {
            Mask::Full | Mask::Causal => self,
            Mask::Sliding { .. } => Mask::Sliding { window_tokens: window_tokens.max(1) },
            Mask::Chunked { .. } => Mask::Chunked { chunk_tokens: chunk_tokens.max(1) },
        }
    }
}

const fn triangle(n: u128) -> u128 {
    n * (n + 1) / 2
}

impl fmt::Display for Mask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mask::Full | Mask::Causal => f.write_str(self.kind_name()),
            Mask::Sliding { window_tokens } => write!(f, "sliding (window {window_tokens})"),
            Mask::Chunked { chunk_tokens } => write!(f, "chunked (chunk {chunk_tokens})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sliding(window_tokens: u64) -> Mask {
        Mask::Sliding { window_tokens }
    }

    fn chunked(chunk_tokens: u64) -> Mask {
        Mask::Chunked { chunk_tokens }
    }

    fn visible_keys(mask: Mask, q: u32, n: u32) -> Vec<u32> {
        (0..n).filter(|&k| mask.visible(q, k)).collect()
    }

    #[test]
    fn masks_by_hand() {
        assert_eq!(visible_keys(Mask::Full, 2, 5), vec![0, 1, 2, 3, 4]);
        assert_eq!(visible_keys(Mask::Causal, 2, 5), vec![0, 1, 2]);
        // window 2: query 4 sees 3 and 4; query 0 sees only itself.
        assert_eq!(visible_keys(sliding(2), 4, 6), vec![3, 4]);
        assert_eq!(visible_keys(sliding(2), 0, 6), vec![0]);
        assert_eq!(visible_keys(sliding(1), 3, 6), vec![3]);
        assert_eq!(visible_keys(sliding(0), 3, 6), vec![3]);
        // chunk 3: blocks {0,1,2} {3,4,5}; query 4 sees 3 and 4.
        assert_eq!(visible_keys(chunked(3), 4, 6), vec![3, 4]);
        assert_eq!(visible_keys(chunked(3), 2, 6), vec![0, 1, 2]);
    }

    #[test]
    fn wide_window_and_chunk_equal_causal() {
        for q in 0..20 {
            let causal = visible_keys(Mask::Causal, q, 20);
            assert_eq!(visible_keys(sliding(20), q, 20), causal);
            assert_eq!(visible_keys(chunked(64), q, 20), causal);
            assert_eq!(visible_keys(sliding(1 << 40), q, 20), causal);
            assert_eq!(visible_keys(chunked(1 << 40), q, 20), causal);
        }
        assert_eq!(sliding(1 << 40).key_range(u32::MAX - 1, u32::MAX), (0, u32::MAX));
    }

    #[test]
    fn key_range_clips_to_keys() {
        assert_eq!(Mask::Causal.key_range(10, 4), (0, 4));
        assert_eq!(sliding(3).key_range(10, 4), (8, 4)); // empty: lo >= hi
        assert_eq!(Mask::Full.key_range(0, 7), (0, 7));
    }

    #[test]
    fn block_visibility_matches_brute_force() {
        for mask in [Mask::Full, Mask::Causal, sliding(3), chunked(4)] {
            for (n_q, n_kv) in [(12u32, 12u32), (5, 12)] {
                let off = n_kv - n_q;
                for i_a in 0..n_q {
                    for i_b in i_a + 1..=n_q {
                        for j_a in 0..n_kv {
                            for j_b in j_a + 1..=n_kv {
                                let brute = (i_a..i_b).any(|i| (j_a..j_b).any(|j| mask.visible(off + i, j)));
                                assert_eq!(
                                    mask.block_visible(off, n_kv, (i_a, i_b), (j_a, j_b)),
                                    brute,
                                    "{mask:?} {i_a}..{i_b} x {j_a}..{j_b}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Pairs counted one by one from the conventions in the module doc, not from `key_range`.
    fn brute_pairs(mask: Mask, n: u64) -> u128 {
        let mut count = 0u128;
        for q in 0..n {
            for j in 0..n {
                let visible = match mask {
                    Mask::Full => true,
                    Mask::Causal => j <= q,
                    Mask::Sliding { window_tokens } => j <= q && q - j < window_tokens,
                    Mask::Chunked { chunk_tokens } => j <= q && j / chunk_tokens == q / chunk_tokens,
                };
                count += u128::from(visible);
            }
        }
        count
    }

    #[test]
    fn pair_counts_match_brute_force_and_the_applied_mask() {
        for n in 0..40u32 {
            for w in 1..12 {
                for mask in [Mask::Full, Mask::Causal, sliding(w), chunked(w)] {
                    let counted = mask.attended_pairs(u64::from(n));
                    assert_eq!(counted, brute_pairs(mask, u64::from(n)), "{mask:?} n={n}");
                    let applied: u128 = (0..n).map(|q| visible_keys(mask, q, n).len() as u128).sum();
                    assert_eq!(counted, applied, "{mask:?} n={n}");
                }
            }
        }
    }

    #[test]
    fn pair_counts_by_hand() {
        // causal n=4: 1+2+3+4 = 10
        assert_eq!(Mask::Causal.attended_pairs(4), 10);
        // sliding W=3, n=6: 1+2+3+3+3+3 = 15 = 3*4/2 + 3*3
        assert_eq!(sliding(3).attended_pairs(6), 15);
        // chunked C=4, n=10: chunks of 4,4,2 -> 10 + 10 + 3 = 23
        assert_eq!(chunked(4).attended_pairs(10), 23);
        assert_eq!(chunked(0).attended_pairs(10), 0);
        // No overflow at the largest context.
        assert!(Mask::Full.attended_pairs(u64::MAX) > 0);
        assert!(Mask::Causal.attended_pairs(u64::MAX) > 0);
    }

    #[test]
    fn every_layer_kind_has_its_mask() {
        assert_eq!(Mask::of_layer(LayerKind::Global), Some(Mask::Causal));
        assert_eq!(Mask::of_layer(LayerKind::Sliding { window_tokens: 4096 }), Some(sliding(4096)));
        assert_eq!(Mask::of_layer(LayerKind::Chunked { chunk_tokens: 8192 }), Some(chunked(8192)));
    }

    #[test]
    fn kernel_encoding_clamps_sizes() {
        assert_eq!(Mask::Full.to_gpu(), (0, 0));
        assert_eq!(Mask::Causal.to_gpu(), (1, 0));
        assert_eq!(sliding(4096).to_gpu(), (2, 4096));
        assert_eq!(chunked(8192).to_gpu(), (3, 8192));
        assert_eq!(sliding(1 << 40).to_gpu(), (2, u32::MAX));
        assert_eq!(chunked(0).to_gpu(), (3, 1));
    }

    #[test]
    fn kinds_parse_and_print() {
        for kind in Mask::KIND_NAMES {
            assert_eq!(Mask::named(kind, 5, 7).map(Mask::kind_name), Ok(kind));
        }
        assert!(Mask::named("diagonal", 5, 7).is_err());
        assert_eq!(Mask::named("sliding", 0, 0), Ok(sliding(1)));
        assert_eq!(Mask::named("chunked", 5, 7), Ok(chunked(7)));
        assert_eq!(sliding(3).resized(9, 2), sliding(9));
        assert_eq!(sliding(1024).to_string(), "sliding (window 1024)");
        assert_eq!(chunked(8).to_string(), "chunked (chunk 8)");
    }
}
