//! The CPU twin of `gpu::KvCache` (`src/gpu/kv_cache.rs`): a K/V cache that grows by one token per
//! decode step, in plain memory allocated once for `capacity_tokens` tokens.

/// K and V per KV head, each `[len_tokens, d]`, room reserved for `capacity_tokens` rows.
pub struct CpuKvCache {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    d: u32,
    capacity_tokens: u32,
    len_tokens: u32,
}

impl CpuKvCache {
    pub fn new(h_kv: u32, d: u32, capacity_tokens: u32) -> Result<Self, String> {
        if h_kv == 0 || d == 0 || capacity_tokens == 0 {
            return Err(format!("a KV cache needs h_kv, d and capacity >= 1 (got {h_kv}, {d}, {capacity_tokens})"));
        }
        let per_head = capacity_tokens as usize * d as usize;
        let heads = || (0..h_kv).map(|_| Vec::with_capacity(per_head)).collect();
        Ok(Self { k: heads(), v: heads(), d, capacity_tokens, len_tokens: 0 })
    }

    /// Appends one token: `k_token` and `v_token` are `[h_kv, d]`.
    pub fn append(&mut self, k_token: &[f32], v_token: &[f32]) -> Result<(), String> {
        let d = self.d as usize;
        let want = self.k.len() * d;
        if k_token.len() != want || v_token.len() != want {
            return Err(format!("one token's K and V must hold h_kv * d = {want} values"));
        }
        if self.len_tokens >= self.capacity_tokens {
            return Err(format!("the KV cache is full ({} tokens)", self.capacity_tokens));
        }
        for (h, (kh, vh)) in self.k.iter_mut().zip(self.v.iter_mut()).enumerate() {
            kh.extend_from_slice(&k_token[h * d..][..d]);
            vh.extend_from_slice(&v_token[h * d..][..d]);
        }
        self.len_tokens += 1;
        Ok(())
    }

    pub fn len_tokens(&self) -> u32 {
        self.len_tokens
    }

    pub fn h_kv(&self) -> u32 {
        u32::try_from(self.k.len()).unwrap_or(u32::MAX)
    }

    pub fn d(&self) -> u32 {
        self.d
    }

    /// K as `[h_kv, len_tokens, d]`, the layout the attention twins read.
    pub fn keys(&self) -> Vec<f32> {
        self.k.concat()
    }

    /// V as `[h_kv, len_tokens, d]`.
    pub fn values(&self) -> Vec<f32> {
        self.v.concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_append_per_head_until_full() {
        let mut cache = CpuKvCache::new(2, 2, 2).unwrap();
        // One token of 2 heads x 2 dims: head 0 gets [1, 2], head 1 gets [3, 4].
        cache.append(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        cache.append(&[9.0, 10.0, 11.0, 12.0], &[0.0; 4]).unwrap();
        assert_eq!(cache.keys(), [1.0, 2.0, 9.0, 10.0, 3.0, 4.0, 11.0, 12.0]);
        assert_eq!(cache.values(), [5.0, 6.0, 0.0, 0.0, 7.0, 8.0, 0.0, 0.0]);
        assert_eq!((cache.len_tokens(), cache.h_kv(), cache.d()), (2, 2, 2));
        assert_eq!(cache.append(&[0.0; 4], &[0.0; 4]), Err("the KV cache is full (2 tokens)".into()));
        assert!(cache.append(&[0.0; 3], &[0.0; 3]).unwrap_err().contains("h_kv * d = 4"));
        assert!(CpuKvCache::new(0, 2, 2).is_err());
    }
}
