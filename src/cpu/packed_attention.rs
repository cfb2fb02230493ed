//! Twin of `shaders/packed_attention.wgsl`: attention over a packed quantised KV cache. It decodes
//! each visible key's K and V vector from its words (and fp8's scale from the cache's tail; KIVI's
//! blocks and f32 rows), as the shader does ([`unpack_rows`], [`kivi_unpack`]), then computes what
//! [`flash_attention`] computes over those values (f64 sums).

use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::flash_attention::flash_attention;
use crate::cpu::kv_pack::{kivi_unpack, unpack_rows};
use crate::model::Mask;
use crate::model::kv_packed::PackedCaches;
use crate::model::kv_quant::KvTensor;

/// One launch: `q` is `[h_q, n_q, d]` (the last `n_q` of `n_kv` positions); `k` and `v` are packed
/// caches `[h_kv, kv_stride, words]` of which rows `0..n_kv` are read (or KIVI's, of `n_kv` tokens).
pub struct PackedProblem<'a> {
    pub q: &'a [f32],
    pub k: &'a [u32],
    pub v: &'a [u32],
    pub shape: AttentionShape,
    pub kv_stride: u32,
    pub caches: PackedCaches,
    pub mask: Mask,
    pub scale: f32,
}

/// O `[h_q, n_q, d]` of `p`, or why its sizes do not fit.
pub fn packed_attention(p: &PackedProblem) -> Result<Vec<f32>, String> {
    let s = p.shape;
    s.validate()?;
    let needed = [KvTensor::K, KvTensor::V].map(|t| p.caches.words(t, s.h_kv, p.kv_stride));
    let kivi_tokens = match p.caches {
        PackedCaches::Kivi(kivi) => kivi.tokens == s.n_kv && kivi.tokens <= kivi.capacity,
        PackedCaches::Rows(_) => true,
    };
    let short = (p.k.len() as u64) < needed[0] || (p.v.len() as u64) < needed[1];
    if p.caches.d() != s.d || p.kv_stride < s.n_kv || short || !kivi_tokens {
        return Err(format!(
            "packed attention: {} KV heads x {} rows (of {}) at d = {} do not fit caches of {} and {} words",
            s.h_kv,
            s.n_kv,
            p.kv_stride,
            s.d,
            p.k.len(),
            p.v.len()
        ));
    }
    let (k, v) = (unpack(p, p.k, KvTensor::K), unpack(p, p.v, KvTensor::V));
    let problem = AttentionProblem::new(p.q, &k, &v, s, p.mask, p.scale);
    problem.validate(true)?;
    Ok(flash_attention(&problem).o)
}

/// Rows `0..n_kv` of each KV head of `cache` (`tensor`), decoded: `[h_kv, n_kv, d]`.
fn unpack(p: &PackedProblem, cache: &[u32], tensor: KvTensor) -> Vec<f32> {
    match p.caches {
        PackedCaches::Rows(layout) => unpack_rows(cache, &layout, p.shape.h_kv, p.kv_stride, p.shape.n_kv),
        PackedCaches::Kivi(kivi) => kivi_unpack(cache, p.shape.h_kv, &kivi, tensor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kv_pack::{PackRows, kv_pack};
    use crate::model::kv_packed::PackedLayout;
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
        let p = PackedProblem {
            q: &q,
            k: &k,
            v: &v,
            shape,
            kv_stride: 3,
            caches: layout.into(),
            mask: Mask::Causal,
            scale: 1.0,
        };
        let o = packed_attention(&p).unwrap();
        assert!((o[0] - 3.0).abs() < 1e-6 && (o[1] - 7.0).abs() < 1e-6, "{o:?}");
        // A cache one row short of its stride is refused.
        assert!(packed_attention(&PackedProblem { k: &k[..2], ..p }).unwrap_err().contains("do not fit"));
    }
    #[test]
    fn kivi_attends_over_the_values_kv_quant_rounds() {
        // GQA 4/2, 37 tokens, d = 16, KIVI int2 G = 8 R = 4: K packs 32 tokens in 4 blocks, V 33.
        use crate::cpu::kv_pack::kivi_pack;
        use crate::cpu::kv_quant::kv_quant;
        use crate::model::kv_packed::KiviCache;
        use crate::model::kv_quant::KvLayout;
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 37, n_kv: 37, d: 16 };
        let scheme = KvScheme::Kivi { bits: 2, group: 8, recent: 4 };
        let kivi = KiviCache::of(scheme, 16, 37).unwrap();
        let wave = |n: u32, f: f32| (0..n).map(|i| (i as f32 * f).sin()).collect::<Vec<f32>>();
        let (q, k, v) = (wave(4 * 37 * 16, 0.37), wave(2 * 37 * 16, 0.53), wave(2 * 37 * 16, 0.71));
        let (pk, pv) = (kivi_pack(&k, 2, &kivi, KvTensor::K).unwrap(), kivi_pack(&v, 2, &kivi, KvTensor::V).unwrap());
        let p = PackedProblem {
            q: &q,
            k: &pk,
            v: &pv,
            shape,
            kv_stride: 37,
            caches: PackedCaches::Kivi(kivi),
            mask: Mask::Causal,
            scale: 0.25,
        };
        let o = packed_attention(&p).unwrap();
        let layout = KvLayout { heads: 2, tokens: 37, d: 16, head_stride: 37 * 16, token_stride: 16 };
        let (mut rk, mut rv) = (k.clone(), v.clone());
        kv_quant(&mut rk, layout, &scheme.pass(KvTensor::K, 37).unwrap());
        kv_quant(&mut rv, layout, &scheme.pass(KvTensor::V, 37).unwrap());
        let want = flash_attention(&AttentionProblem::new(&q, &rk, &rv, shape, Mask::Causal, 0.25)).o;
        assert_eq!(o, want);
        // A cache of another text's length is refused.
        let other = PackedProblem { shape: AttentionShape { n_q: 36, n_kv: 36, ..shape }, ..p };
        assert!(packed_attention(&other).unwrap_err().contains("do not fit"));
    }
}
