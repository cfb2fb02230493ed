//! Figures of the benchmark's case (`n`, `d` and the mask of the link): the pairs and FLOPs it counts,
//! by the code that turns its timings into GFLOP/s, and the score matrix only the naive kernel stores.

use super::written::{Figure, Unit, number, whole};
use crate::attention::AttentionShape;
use crate::gpu::bench::{BenchCase, BenchKernel, HEAD_LAYOUTS, cases};
use crate::gpu::naive_attention::scores_bytes;
use crate::model::Model;
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings, _model: &Model) -> Option<Figure> {
    let [(mha_heads, kv_heads), (gqa_heads, _)] = HEAD_LAYOUTS;
    let listed = cases(&state.bench.filter(&state.input));
    // The first tiled case the link's filter lists with `h_q` query heads.
    let case = |h_q: u32| listed.iter().copied().find(|c| c.kernel == BenchKernel::Tiled && c.shape.h_q == h_q);
    let one_head = |c: BenchCase| AttentionShape { h_q: 1, h_kv: 1, ..c.shape };
    let (unit, value): (Unit, u64) = match name {
        "bench_tokens" => (Unit::Tokens, case(mha_heads)?.shape.n_q.into()),
        "bench_head_dim" => (Unit::Count, case(mha_heads)?.shape.d.into()),
        "bench_pairs" => {
            let c = case(mha_heads)?;
            (Unit::Count, one_head(c).attended_pairs(c.mask))
        }
        "bench_mask_fraction" => {
            let c = case(mha_heads)?;
            let all = u64::from(c.shape.n_q) * u64::from(c.shape.n_kv);
            return Some(number(one_head(c).attended_pairs(c.mask) as f64 / all.max(1) as f64, Unit::Number));
        }
        "bench_head_flops" => {
            let c = case(mha_heads)?;
            (Unit::Flops, BenchCase { shape: one_head(c), ..c }.flops())
        }
        "bench_mha_heads" => (Unit::Count, mha_heads.into()),
        "bench_gqa_heads" => (Unit::Count, gqa_heads.into()),
        "bench_kv_heads" => (Unit::Count, kv_heads.into()),
        "bench_mha_flops" => (Unit::Flops, case(mha_heads)?.flops()),
        "bench_gqa_flops" => (Unit::Flops, case(gqa_heads)?.flops()),
        "bench_naive_scores_bytes" => (Unit::Bytes, scores_bytes(&case(mha_heads)?.shape)),
        _ => return None,
    };
    Some(whole(value.into(), unit))
}

#[cfg(test)]
mod tests {
    use super::super::tests::exact;

    #[test]
    fn one_small_case_by_hand() {
        // n = 256, d = 64, full: 256 x 256 = 65,536 pairs a head, 4 x 64 FLOPs each = 16,777,216; 8 heads
        // 134,217,728, 32 heads 536,870,912. The naive kernel's scores: 8 x 65,536 x 4 B = 2,097,152 B.
        let q = "n=256&d=64&mask=full";
        for (name, value) in [
            ("bench_tokens", "256"),
            ("bench_head_dim", "64"),
            ("bench_pairs", "65536"),
            ("bench_mask_fraction", "1"),
            ("bench_head_flops", "16777216"),
            ("bench_mha_heads", "8"),
            ("bench_gqa_heads", "32"),
            ("bench_kv_heads", "8"),
            ("bench_mha_flops", "134217728"),
            ("bench_gqa_flops", "536870912"),
            ("bench_naive_scores_bytes", "2097152"),
        ] {
            assert_eq!(exact(name, q), value, "{name}");
        }
        // Causal: 1 + 2 + ... + 256 = 32,896 pairs (0.502 of 65,536), 4 x 64 x 32,896 x 8 = 67,371,008.
        let q = "n=256&d=64&mask=causal";
        assert_eq!((exact("bench_pairs", q), exact("bench_mask_fraction", q)), ("32896".into(), "0.502".into()));
        assert_eq!(exact("bench_mha_flops", q), "67371008");
        // A window of 64: 1 + 2 + ... + 64 for the first 64 queries, then 64 each: 2,080 + 192 x 64 = 14,368.
        let q = "n=256&d=64&mask=sliding&window=64";
        assert_eq!(
            (exact("bench_pairs", q), exact("bench_head_flops", q)),
            ("14368".into(), (4 * 64 * 14_368).to_string())
        );
        // Without a window in the link the benchmark's sliding cases use 256: causal's pairs at n = 256.
        assert_eq!(exact("bench_pairs", "n=256&d=64&mask=sliding"), "32896");
    }
}
