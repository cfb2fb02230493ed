//! The paged decode's rows of the benchmark: one decode step (one query per head) over 4,096 cached
//! tokens of a Llama 3 8B layer (32 query heads, 8 KV heads, d = 128), read contiguously (the decode
//! cache's layout, by the kernel the app's decode picks on this adapter, and by the same tiled loop
//! the paged kernel uses) and through a page table whose pages are scattered over the pool. Timed as
//! the other rows ([`bench`]), flops counted as the attention rows count them (4 d per attended pair).

use crate::attention::AttentionShape;
use crate::attention::inputs::SplitMix64;
use crate::gpu::bench::{self, Repetitions};
use crate::gpu::bench_lm::OpResult;
use crate::gpu::flash_io::{FlashBuffers, FlashLaunch};
use crate::gpu::flash_tiles::FlashTiles;
use crate::gpu::launch::Dispatch;
use crate::gpu::paged_attention::PagedLaunch;
use crate::gpu::{GpuContext, GpuError, Kernels};
use crate::model::Mask;
use crate::model::paging::PAGE_TOKENS;

/// The cached tokens of the rows.
pub const PAGED_TOKENS: u32 = 4096;
/// Llama 3 8B's attention layer: query heads, KV heads, head width.
pub const PAGED_HEADS: (u32, u32, u32) = (32, 8, 128);

/// The row timing the app's own decode launch (contiguous cache), and the paged row, by name.
pub const CONTIGUOUS_APP: &str = "decode contiguous (app's)";
pub const PAGED_SCATTERED: &str = "decode paged (scattered)";

/// A page table over `pages` pages in a seeded shuffled order (a pool after many requests came and
/// went), a permutation of `0..pages`.
pub fn scattered_table(pages: u32, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    let mut table: Vec<u32> = (0..pages).collect();
    for i in (1..table.len()).rev() {
        table.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    table
}

/// The rows: contiguous as the app's decode launches it, contiguous through the paged kernel's own
/// tiled loop, and paged. Leaves the forward kernel's tiles as the adapter chooses them.
pub async fn run_paged_decode(
    ctx: &GpuContext,
    kernels: &Kernels,
    fma_gflops: f64,
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<Vec<OpResult>, GpuError> {
    let (shape, [q, k, v]) = decode_step(ctx)?;
    let AttentionShape { h_q, h_kv, d, n_kv: n, .. } = shape;
    // The same bytes of K and V serve as a [h_kv, n, d] cache and as a pool of n / 16 pages
    // [page, h_kv, 16, d].
    let o = ctx.storage_output("o", u64::from(h_q * d) * 4)?;
    let lse = ctx.storage_output("lse", u64::from(h_q) * 4)?;
    let buffers = FlashBuffers { q: &q, k: &k, v: &v, o: &o, lse: &lse };
    let pages = n / PAGE_TOKENS as u32;
    let table = ctx.storage_from("page table", &scattered_table(pages, 7))?;
    let (mask, scale) = (Mask::Causal, 1.0 / (d as f32).sqrt());
    let flat = FlashLaunch { shape, kv_stride: n, mask, scale };
    let paged = PagedLaunch { shape, table_pages: pages, pool_pages: pages, mask, scale };
    let what = format!("1 query x {n} cached, {h_q}/{h_kv} heads, d {d}");
    let flops = 4 * u64::from(d) * u64::from(h_q) * u64::from(n);
    let mut rows = Vec::new();
    let contiguous = kernels.flash.prepare(ctx, &buffers, flat)?;
    rows.push(timed(ctx, CONTIGUOUS_APP, &what, &[&contiguous], flops, fma_gflops, reps, now_ms).await?);
    // The generic tiled loop, as the paged kernel runs it (forcing the adapter's own tiles skips the
    // subgroup form on CPU adapters).
    kernels.flash.force_tiles(Some(FlashTiles::choose(&ctx.limits, ctx.adapter.is_cpu, d)));
    let same_loop = kernels.flash.prepare(ctx, &buffers, flat);
    kernels.flash.force_tiles(None);
    rows.push(timed(ctx, "decode contiguous (tiled)", &what, &[&same_loop?], flops, fma_gflops, reps, now_ms).await?);
    let scattered = kernels.paged.prepare(ctx, &buffers, &table, paged)?;
    rows.push(timed(ctx, PAGED_SCATTERED, &what, &[&scattered], flops, fma_gflops, reps, now_ms).await?);
    Ok(rows)
}

/// The decode rows' one step (one query per head over [`PAGED_TOKENS`] cached tokens of a
/// [`PAGED_HEADS`] layer): its shape, and seeded Q (`[h_q, d]`), K and V (`[h_kv, n, d]`) on the GPU.
pub fn decode_step(ctx: &GpuContext) -> Result<(AttentionShape, [wgpu::Buffer; 3]), GpuError> {
    let (h_q, h_kv, d) = PAGED_HEADS;
    let n = PAGED_TOKENS;
    let mut rng = SplitMix64::new(0xdec0);
    let mut random = |len: u32| -> Vec<f32> { (0..len).map(|_| rng.next_signed_unit()).collect() };
    let q = ctx.storage_from("q", &random(h_q * d))?;
    let k = ctx.storage_from("k", &random(h_kv * n * d))?;
    let v = ctx.storage_from("v", &random(h_kv * n * d))?;
    Ok((AttentionShape { h_q, h_kv, n_q: 1, n_kv: n, d }, [q, k, v]))
}

/// One decode row: `dispatches` (one step) timed in one submission, `flops` counted for it.
#[expect(clippy::too_many_arguments, reason = "one row's name, launches and timing settings")]
pub async fn timed(
    ctx: &GpuContext,
    name: &str,
    shape: &str,
    dispatches: &[&Dispatch],
    flops: u64,
    fma_gflops: f64,
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<OpResult, GpuError> {
    let samples = bench::timed_samples(ctx, dispatches, reps, now_ms).await?;
    let st = bench::stats(&samples).ok_or_else(|| GpuError::InvalidInput("no repetitions".into()))?;
    Ok(OpResult {
        name: name.into(),
        shape: shape.into(),
        launches: dispatches.len() as u32,
        ms_median: st.median_ms,
        ms_min: st.min_ms,
        gflops: bench::gflops(flops, st.median_ms),
        fma_gflops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scattered_table_is_a_permutation_of_the_pool() {
        let table = scattered_table(256, 7);
        let mut sorted = table.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..256).collect::<Vec<u32>>());
        assert_ne!(table, sorted, "scattered, not in order");
        // 4,096 tokens of 16 = 256 pages; 4 x 128 x 32 x 4,096 = 67,108,864 flops a step.
        assert_eq!(PAGED_TOKENS / PAGE_TOKENS as u32, 256);
    }
}
