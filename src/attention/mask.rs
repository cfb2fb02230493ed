//! Which keys a query may see, computed from positions (never from a stored matrix).

use std::fmt;
use std::str::FromStr;

use crate::model::schedule::LayerKind;

/// An attention mask. Positions are absolute token indices in the key/value sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mask {
    /// Every query sees every key (encoders, cross-attention).
    Full,
    /// Query `i` sees keys `0..=i`.
    Causal,
    /// Query `i` sees keys `i-window+1 ..= i` (Mistral, Gemma local layers). `window >= 1`.
    Sliding { window: u32 },
    /// Causal inside blocks of `chunk` tokens (Llama 4 local layers). `chunk >= 1`.
    Chunked { chunk: u32 },
}

impl Mask {
    /// The mask a layer of `kind` applies, the one conversion every caller uses. `None` means a layer
    /// without attention (state-space and linear-attention layers, which a later import brings); every
    /// kind today has attention. Windows and chunks past `u32::MAX` tokens are clamped to it: no
    /// sequence is that long, so such a layer is causal in effect.
    pub fn of_layer(kind: LayerKind) -> Option<Mask> {
        let tokens = |w: u64| u32::try_from(w).unwrap_or(u32::MAX).max(1);
        Some(match kind {
            LayerKind::Global => Mask::Causal,
            LayerKind::Sliding { window_tokens } => Mask::Sliding { window: tokens(window_tokens) },
            LayerKind::Chunked { chunk_tokens } => Mask::Chunked { chunk: tokens(chunk_tokens) },
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
        match self {
            Mask::Full => (0, n_kv),
            Mask::Causal => (0, causal_hi),
            Mask::Sliding { window } => (q_pos.saturating_add(1).saturating_sub(window.max(1)), causal_hi),
            Mask::Chunked { chunk } => (q_pos - q_pos % chunk.max(1), causal_hi),
        }
    }

    /// The kernel's encoding (keep in sync with `MASK_*` in `shaders/*.wgsl`): kind and its size parameter.
    pub fn to_gpu(self) -> (u32, u32) {
        match self {
            Mask::Full => (0, 0),
            Mask::Causal => (1, 0),
            Mask::Sliding { window } => (2, window.max(1)),
            Mask::Chunked { chunk } => (3, chunk.max(1)),
        }
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

    /// The URL / UI name of the mask kind.
    pub fn kind_name(self) -> &'static str {
        match self {
            Mask::Full => "full",
            Mask::Causal => "causal",
            Mask::Sliding { .. } => "sliding",
            Mask::Chunked { .. } => "chunked",
        }
    }
}

impl fmt::Display for Mask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mask::Full | Mask::Causal => f.write_str(self.kind_name()),
            Mask::Sliding { window } => write!(f, "sliding (window {window})"),
            Mask::Chunked { chunk } => write!(f, "chunked (chunk {chunk})"),
        }
    }
}

/// The mask kind alone, as named in URLs (`mask=sliding`); its size comes from `window` / `chunk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskKind {
    Full,
    Causal,
    Sliding,
    Chunked,
}

impl MaskKind {
    pub const ALL: [MaskKind; 4] = [MaskKind::Full, MaskKind::Causal, MaskKind::Sliding, MaskKind::Chunked];

    pub fn name(self) -> &'static str {
        match self {
            MaskKind::Full => "full",
            MaskKind::Causal => "causal",
            MaskKind::Sliding => "sliding",
            MaskKind::Chunked => "chunked",
        }
    }

    /// The mask of this kind, with `window` for sliding and `chunk` for chunked.
    pub fn with_sizes(self, window: u32, chunk: u32) -> Mask {
        match self {
            MaskKind::Full => Mask::Full,
            MaskKind::Causal => Mask::Causal,
            MaskKind::Sliding => Mask::Sliding { window: window.max(1) },
            MaskKind::Chunked => Mask::Chunked { chunk: chunk.max(1) },
        }
    }
}

impl FromStr for MaskKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MaskKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown mask \"{s}\" (expected full, causal, sliding or chunked)"))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn block_visibility_matches_brute_force() {
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window: 3 }, Mask::Chunked { chunk: 4 }] {
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
    use super::*;

    fn visible_keys(mask: Mask, q: u32, n: u32) -> Vec<u32> {
        (0..n).filter(|&k| mask.visible(q, k)).collect()
    }

    #[test]
    fn masks_by_hand() {
        assert_eq!(visible_keys(Mask::Full, 2, 5), vec![0, 1, 2, 3, 4]);
        assert_eq!(visible_keys(Mask::Causal, 2, 5), vec![0, 1, 2]);
        // window 2: query 4 sees 3 and 4; query 0 sees only itself.
        assert_eq!(visible_keys(Mask::Sliding { window: 2 }, 4, 6), vec![3, 4]);
        assert_eq!(visible_keys(Mask::Sliding { window: 2 }, 0, 6), vec![0]);
        assert_eq!(visible_keys(Mask::Sliding { window: 1 }, 3, 6), vec![3]);
        // chunk 3: blocks {0,1,2} {3,4,5}; query 4 sees 3 and 4.
        assert_eq!(visible_keys(Mask::Chunked { chunk: 3 }, 4, 6), vec![3, 4]);
        assert_eq!(visible_keys(Mask::Chunked { chunk: 3 }, 2, 6), vec![0, 1, 2]);
    }

    #[test]
    fn wide_window_and_chunk_equal_causal() {
        for q in 0..20 {
            let causal = visible_keys(Mask::Causal, q, 20);
            assert_eq!(visible_keys(Mask::Sliding { window: 20 }, q, 20), causal);
            assert_eq!(visible_keys(Mask::Chunked { chunk: 64 }, q, 20), causal);
        }
    }

    #[test]
    fn key_range_clips_to_keys() {
        assert_eq!(Mask::Causal.key_range(10, 4), (0, 4));
        assert_eq!(Mask::Sliding { window: 3 }.key_range(10, 4), (8, 4)); // empty: lo >= hi
        assert_eq!(Mask::Full.key_range(0, 7), (0, 7));
    }

    #[test]
    fn every_layer_kind_has_its_mask_and_huge_windows_clamp() {
        assert_eq!(Mask::of_layer(LayerKind::Global), Some(Mask::Causal));
        assert_eq!(Mask::of_layer(LayerKind::Sliding { window_tokens: 4096 }), Some(Mask::Sliding { window: 4096 }));
        assert_eq!(Mask::of_layer(LayerKind::Chunked { chunk_tokens: 8192 }), Some(Mask::Chunked { chunk: 8192 }));
        let huge = 1u64 << 40;
        assert_eq!(
            Mask::of_layer(LayerKind::Sliding { window_tokens: huge }),
            Some(Mask::Sliding { window: u32::MAX })
        );
        assert_eq!(Mask::of_layer(LayerKind::Chunked { chunk_tokens: huge }), Some(Mask::Chunked { chunk: u32::MAX }));
        assert_eq!(Mask::of_layer(LayerKind::Sliding { window_tokens: 0 }), Some(Mask::Sliding { window: 1 }));
    }

    #[test]
    fn kinds_parse_and_print() {
        for kind in MaskKind::ALL {
            assert_eq!(kind.name().parse::<MaskKind>(), Ok(kind));
        }
        assert!("diagonal".parse::<MaskKind>().is_err());
        assert_eq!(MaskKind::Sliding.with_sizes(0, 0), Mask::Sliding { window: 1 });
    }
}
