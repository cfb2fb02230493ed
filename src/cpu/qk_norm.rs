//! Twin of `shaders/qk_norm.wgsl`: RMSNorm of each query and key head of the fused Q/K/V projection,
//! in place (Qwen3's and Gemma 3's per-head norm).

use crate::cpu::rms_norm::rms_norm;

/// Each query and key head of `qkv` (`[tokens, (h_q + 2 h_kv) d]`) replaced by its RMSNorm times
/// `offset + weight` (`weight` is `[2, d]`: the query heads' weight, then the key heads'); value heads
/// stay as they are.
pub fn qk_norm(qkv: &mut [f32], weight: &[f32], (h_q, h_kv): (usize, usize), eps: f32, offset: f32) {
    let d = weight.len() / 2;
    let heads = h_q + 2 * h_kv;
    for (c, head) in qkv.chunks_exact_mut(d.max(1)).enumerate() {
        let slot = c % heads.max(1);
        if slot < h_q + h_kv {
            let w = if slot < h_q { &weight[..d] } else { &weight[d..] };
            let normed = rms_norm(head, w, eps, offset);
            head.copy_from_slice(&normed);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn query_and_key_heads_by_hand_values_untouched() {
        // One token, one query, one key and one value head of width 2: [3, 4 | 1, 1 | 5, 6].
        // Query: rms = sqrt((9 + 16) / 2), times weight 2 -> [3, 4] * 2 / sqrt(12.5).
        // Key: rms 1, times weight 1 -> [1, 1]. Value: untouched.
        let mut qkv = [3.0, 4.0, 1.0, 1.0, 5.0, 6.0];
        super::qk_norm(&mut qkv, &[2.0, 2.0, 1.0, 1.0], (1, 1), 0.0, 0.0);
        let s = 2.0 / 12.5f32.sqrt();
        assert!((qkv[0] - 3.0 * s).abs() < 1e-6 && (qkv[1] - 4.0 * s).abs() < 1e-6, "{qkv:?}");
        assert_eq!(qkv[2..], [1.0, 1.0, 5.0, 6.0]);
    }
}
