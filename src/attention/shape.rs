//! The shape of one attention call, shared by the CPU reference and the GPU kernels.

/// Q is `[h_q, n_q, d]`, K and V are `[h_kv, n_kv, d]`, all row-major f32.
///
/// Queries are the *last* `n_q` positions of the `n_kv`-long sequence (prefill against a cache, decode),
/// so query row `i` sits at absolute position `n_kv - n_q + i` for the mask. Cross-attention (queries from
/// another text) uses [`crate::model::Mask::Full`], where positions do not matter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    pub h_q: u32,
    pub h_kv: u32,
    pub n_q: u32,
    pub n_kv: u32,
    pub d: u32,
}

impl AttentionShape {
    /// A self-attention shape: `n` queries over the same `n` keys.
    pub fn square(heads: u32, n: u32, d: u32) -> Self {
        Self { h_q: heads, h_kv: heads, n_q: n, n_kv: n, d }
    }

    /// Absolute position of query row 0.
    pub fn q_offset(&self) -> u32 {
        self.n_kv.saturating_sub(self.n_q)
    }

    /// Query heads that share one KV head (1 for MHA, `h_q` for MQA).
    pub fn group_size(&self) -> u32 {
        self.h_q / self.h_kv.max(1)
    }

    /// The KV head query head `h` reads.
    pub fn kv_head(&self, h: u32) -> u32 {
        h / self.group_size().max(1)
    }

    /// Why this shape cannot run, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.h_q == 0 || self.h_kv == 0 || self.n_q == 0 || self.n_kv == 0 || self.d == 0 {
            return Err(format!("every dimension must be at least 1 (got {self:?})"));
        }
        if !self.h_q.is_multiple_of(self.h_kv) {
            return Err(format!("{} query heads cannot be split evenly over {} KV heads", self.h_q, self.h_kv));
        }
        if self.n_q > self.n_kv {
            return Err(format!("{} queries cannot be the last rows of only {} keys", self.n_q, self.n_kv));
        }
        Ok(())
    }

    pub fn q_len(&self) -> usize {
        (self.h_q * self.n_q * self.d) as usize
    }

    pub fn kv_len(&self) -> usize {
        (self.h_kv * self.n_kv * self.d) as usize
    }

    /// Number of (query, key) pairs the mask lets through, summed over query heads.
    pub fn attended_pairs(&self, mask: crate::model::Mask) -> u64 {
        let per_head: u64 = (0..self.n_q)
            .map(|i| {
                let (lo, hi) = mask.key_range(self.q_offset() + i, self.n_kv);
                u64::from(hi.saturating_sub(lo))
            })
            .sum();
        per_head * u64::from(self.h_q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Mask;

    #[test]
    fn groups_and_offsets() {
        let s = AttentionShape { h_q: 32, h_kv: 8, n_q: 1, n_kv: 10, d: 64 };
        assert_eq!(s.group_size(), 4);
        assert_eq!(s.kv_head(0), 0);
        assert_eq!(s.kv_head(7), 1);
        assert_eq!(s.kv_head(31), 7);
        assert_eq!(s.q_offset(), 9);
        assert!(s.validate().is_ok());
        assert!(AttentionShape { h_q: 6, h_kv: 4, ..s }.validate().is_err());
        assert!(AttentionShape { n_q: 11, ..s }.validate().is_err());
    }

    #[test]
    fn attended_pairs_by_hand() {
        let s = AttentionShape::square(2, 4, 8);
        // causal on 4 tokens: 1+2+3+4 = 10 per head, 2 heads.
        assert_eq!(s.attended_pairs(Mask::Causal), 20);
        assert_eq!(s.attended_pairs(Mask::Full), 32);
        // window 2: 1+2+2+2 = 7 per head.
        assert_eq!(s.attended_pairs(Mask::Sliding { window_tokens: 2 }), 14);
    }
}
