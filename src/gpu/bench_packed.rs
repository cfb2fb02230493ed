//! The packed quantised decode's rows of the benchmark: one decode step (one query per head) over
//! the paged rows' 4,096 cached tokens of a Llama 3 8B layer ([`decode_step`]), the cache packed in
//! each scheme Generate offers (`kv_pack`; fp8's scale set from the cached tokens; KIVI's as a decode
//! cache holding them, its recent 16 and K's partial block in its f32 ring) and
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
use crate::model::kv_packed::{KiviCache, PackedCaches, PackedLayout};
use crate::model::kv_quant::{Fp8, KvScheme, KvTensor, ScaleScope};

/// The schemes timed: Generate's quantised caches.
pub const PACKED_SCHEMES: [KvScheme; 7] = [
    KvScheme::Fp16,
    KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor },
    KvScheme::Int8,
    KvScheme::IntGroup { bits: 4, group: 32 },
    KvScheme::IntGroup { bits: 2, group: 32 },
    KvScheme::Kivi { bits: 4, group: 32, recent: 16 },
    KvScheme::Kivi { bits: 2, group: 32, recent: 16 },
];

/// `scheme`'s cache of `n` tokens of head width `d`, as a decode cache with room for them holds it.
fn caches_of(scheme: KvScheme, d: u32, n: u32) -> Option<PackedCaches> {
    let kivi = || KiviCache::decoding(scheme, d, n).map(|kivi| PackedCaches::Kivi(kivi.holding(n)));
    PackedLayout::of(scheme, d).map(PackedCaches::Rows).or_else(kivi)
}

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
        let caches = caches_of(scheme, d, n).ok_or_else(|| GpuError::InvalidInput(scheme.name()))?;
        let bytes = |tensor| caches.words(tensor, h_kv, n) * 4;
        let (pk, pv) =
            (ctx.storage_output("packed K", bytes(KvTensor::K))?, ctx.storage_output("packed V", bytes(KvTensor::V))?);
        let pack = |x, packed, tensor| match caches {
            PackedCaches::Rows(layout) => kernels.kv_pack.prepare(ctx, x, packed, rows, layout),
            PackedCaches::Kivi(kivi) => kernels.kv_pack.prepare_kivi(ctx, x, packed, (h_kv, n), kivi, tensor),
        };
        let packs = [pack(&k, &pk, KvTensor::K)?, pack(&v, &pv, KvTensor::V)?];
        Dispatch::submit_all(ctx, &packs.iter().flatten().collect::<Vec<_>>());
        let launch = PackedLaunch { shape, kv_stride: n, caches, mask, scale };
        let step = kernels.packed.prepare(ctx, &PackedBuffers { q: &q, k: &pk, v: &pv, o: &o }, launch)?;
        let name = format!("decode packed {}", scheme.name());
        let kib = (bytes(KvTensor::K) + bytes(KvTensor::V)) / 1024;
        let what = format!("1 query x {n} cached, {h_q}/{h_kv}, {kib} KiB K+V");
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
        // KIVI int2 (G = 32, R = 16): K's 127 whole blocks (4,064 tokens; 4,080 are past the recent
        // 16) of 32 x 8 code words + 128 scale words = 384 words, and its 32 other tokens in the f32
        // ring (of R + G - 1 = 47 rows); V's 4,080 tokens of 8 + 4 words, 16 in its ring.
        let caches = caches_of(KvScheme::Kivi { bits: 2, group: 32, recent: 16 }, d, PAGED_TOKENS).unwrap();
        let words = |t| caches.words(t, h_kv, PAGED_TOKENS);
        assert_eq!(words(KvTensor::K), 8 * (127 * 384 + 47 * 128));
        assert_eq!(words(KvTensor::V), 8 * (4080 * 12 + 16 * 128));
    }
}
