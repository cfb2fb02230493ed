//! Twin of `shaders/packed_attention.wgsl`: attention over a packed quantised KV cache. It decodes
//! each visible key's K and V vector from its words (and fp8's scale from the cache's tail), as the
//! shader does ([`unpack_rows`]), then computes what [`flash_attention`] computes over those values (f64 sums).

use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::flash_attention::flash_attention;
use crate::cpu::kv_pack::unpack_rows;
use crate::model::Mask;
use crate::model::kv_packed::PackedLayout;

/// One launch: `q` is `[h_q, n_q, d]` (the last `n_q` of `n_kv` positions); `k` and `v` are packed
/// caches `[h_kv, kv_stride, words]` of which rows `0..n_kv` are read.
pub struct PackedProblem<'a> {
    pub q: &'a [f32],
    pub k: &'a [u32],
    pub v: &'a [u32],
    pub shape: AttentionShape,
    pub kv_stride: u32,
    pub layout: PackedLayout,
    pub mask: Mask,
    pub scale: f32,
}

/// O `[h_q, n_q, d]` of `p`, or why its sizes do not fit.
pub fn packed_attention(p: &PackedProblem) -> Result<Vec<f32>, String> {
    let s = p.shape;
    s.validate()?;
    let words = u64::from(p.layout.words());
    let needed = p.layout.cache_words(s.h_kv, p.kv_stride);
    if p.layout.d != s.d || p.kv_stride < s.n_kv || (p.k.len() as u64) < needed || (p.v.len() as u64) < needed {
        return Err(format!(
            "packed attention: {} KV heads x {} rows (of {}) of {words} words at d = {} do not fit caches of {} and {} \
             words",
            s.h_kv,
            s.n_kv,
            p.kv_stride,
            s.d,
            p.k.len(),
            p.v.len()
        ));
    }
    let (k, v) = (unpack(p, p.k), unpack(p, p.v));
    let problem = AttentionProblem::new(p.q, &k, &v, s, p.mask, p.scale);
    problem.validate(true)?;
    Ok(flash_attention(&problem).o)
}

/// Rows `0..n_kv` of each KV head of `cache`, decoded: `[h_kv, n_kv, d]`.
fn unpack(p: &PackedProblem, cache: &[u32]) -> Vec<f32> {
    unpack_rows(cache, &p.layout, p.shape.h_kv, p.kv_stride, p.shape.n_kv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kv_pack::{PackRows, kv_pack};
    use crate::model::kv_quant::KvScheme;

    #[test]
    fn one_query_over_two_fp16_keys_by_hand() {
        // d = 2, scale 1: q = (ln 3, 0); keys (1, 0) and (0, 0) score ln 3 and 0 -> p = 3/4, 1/4;
        // O = 3/4 (4, 8) + 1/4 (0, 4) = (3, 7). Every value is exact in f16.
        let layout = PackedLayout::of(KvScheme::Fp16, 2).unwrap();
        let rows = PackRows { heads: 1, tokens: 2, capacity: 3, start: 0 };
        let (mut k, mut v) = (vec![0u32; 3], vec![0u32; 3]);
        kv_pack(&[1.0, 0.0, 0.0, 0.0], &mut k, rows, layout).unwrap();
        kv_pack(&[4.0, 8.0, 0.0, 4.0], &mut v, rows, layout).unwrap();
        let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 1, n_kv: 2, d: 2 };
        let q = [3f32.ln(), 0.0];
        let p = PackedProblem { q: &q, k: &k, v: &v, shape, kv_stride: 3, layout, mask: Mask::Causal, scale: 1.0 };
        let o = packed_attention(&p).unwrap();
        assert!((o[0] - 3.0).abs() < 1e-6 && (o[1] - 7.0).abs() < 1e-6, "{o:?}");
        // A cache one row short of its stride is refused.
        assert!(packed_attention(&PackedProblem { k: &k[..2], ..p }).unwrap_err().contains("do not fit"));
    }
}
