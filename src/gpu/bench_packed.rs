//! The packed quantised decode's rows of the benchmark: one decode step (one query per head) over
//! the paged rows' 4,096 cached tokens of a Llama 3 8B layer ([`decode_step`]), the cache packed in
//! each scheme Generate offers and in fp8 E4M3 (`kv_pack`; its scale set from the cached tokens) and
//! read by `packed_attention`, which dequantises as it reads. Timed as the other rows ([`bench`]), flops counted as the attention rows count them (4 d per
//! attended pair: the dequantising is not counted), beside the f32 cache's row of the paged rows.

use crate::attention::AttentionShape;
use crate::cpu::kv_pack::PackRows;
use crate::gpu::bench::Repetitions;
use crate::gpu::bench_lm::OpResult;
use crate::gpu::bench_paged::{decode_step, timed};
use crate::gpu::launch::Dispatch;
use crate::gpu::packed_attention::{PackedBuffers, PackedLaunch};
use crate::gpu::{GpuContext, GpuError, Kernels};
use crate::model::Mask;
use crate::model::kv_packed::PackedLayout;
use crate::model::kv_quant::{Fp8, KvScheme, ScaleScope};

/// The schemes timed: Generate's quantised caches.
pub const PACKED_SCHEMES: [KvScheme; 5] = [
    KvScheme::Fp16,
    KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor },
    KvScheme::Int8,
    KvScheme::IntGroup { bits: 4, group: 32 },
    KvScheme::IntGroup { bits: 2, group: 32 },
];

/// One row per scheme: the step's attention over the packed cache (packing it is not timed).
pub async fn run_packed_decode(
    ctx: &GpuContext,
    kernels: &Kernels,
    fma_gflops: f64,
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<Vec<OpResult>, GpuError> {
    let (shape, [q, k, v]) = decode_step(ctx)?;
    let AttentionShape { h_q, h_kv, d, n_kv: n, .. } = shape;
    let o = ctx.storage_output("o", u64::from(h_q * d) * 4)?;
    let (mask, scale) = (Mask::Causal, 1.0 / (d as f32).sqrt());
    let flops = 4 * u64::from(d) * u64::from(h_q) * u64::from(n);
    let rows = PackRows { heads: h_kv, tokens: n, capacity: n, start: 0 };
    let mut out = Vec::new();
    for scheme in PACKED_SCHEMES {
        let layout = PackedLayout::of(scheme, d).ok_or_else(|| GpuError::InvalidInput(scheme.name()))?;
        let bytes = layout.cache_words(h_kv, n) * 4;
        let (pk, pv) = (ctx.storage_output("packed K", bytes)?, ctx.storage_output("packed V", bytes)?);
        let packs = [
            kernels.kv_pack.prepare(ctx, &k, &pk, rows, layout)?,
            kernels.kv_pack.prepare(ctx, &v, &pv, rows, layout)?,
        ];
        Dispatch::submit_all(ctx, &packs.iter().flatten().collect::<Vec<_>>());
        let launch = PackedLaunch { shape, kv_stride: n, caches: layout.into(), mask, scale };
        let step = kernels.packed.prepare(ctx, &PackedBuffers { q: &q, k: &pk, v: &pv, o: &o }, launch)?;
        let name = format!("decode packed {}", scheme.name());
        let what = format!("1 query x {n} cached, {h_q}/{h_kv}, {} KiB K+V", 2 * bytes / 1024);
        let steps: Vec<&Dispatch> = step.iter().collect();
        out.push(timed(ctx, &name, &what, &steps, flops, fma_gflops, reps, now_ms).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::bench_paged::{PAGED_HEADS, PAGED_TOKENS};

    #[test]
    fn the_packed_caches_of_the_rows_by_hand() {
        // 8 KV heads x 4,096 tokens x (K, V) of d = 128: f32 is 32 MiB; int4-g32 is 128 x 4 bits + 4
        // groups x 32 bits = 20 words = 80 B a vector against 512 B: 5 MiB.
        let (_, h_kv, d) = PAGED_HEADS;
        let cache =
            |s| u64::from(h_kv) * u64::from(PAGED_TOKENS) * PackedLayout::of(s, d).unwrap().bytes_per_token_per_head();
        let f32_bytes = u64::from(h_kv) * u64::from(PAGED_TOKENS) * 2 * u64::from(d) * 4;
        assert_eq!(f32_bytes, 32 << 20);
        assert_eq!(cache(KvScheme::IntGroup { bits: 4, group: 32 }), 5 << 20);
        assert_eq!(cache(KvScheme::Fp16), 16 << 20);
    }
}
