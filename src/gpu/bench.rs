//! The kernel benchmark, platform-free: the case list, timing statistics, and an async runner for one
//! case that the native `bench` binary and the browser's `view=bench` page both use.
//!
//! Time comes from GPU timestamp queries where the device grants them, otherwise from the caller's
//! wall clock (`now_ms`: `Instant` natively, `performance.now()` in the browser) around submit-and-wait.

use serde::Serialize;

use crate::attention::AttentionShape;
use crate::attention::inputs::SplitMix64;
use crate::gpu::flash_backward_io::{BackwardBuffers, grads_len};
use crate::gpu::flash_io::{FlashBuffers, FlashLaunch};
use crate::gpu::launch::{self, Dispatch};
use crate::gpu::naive_attention::{self, NaiveBuffers};
use crate::gpu::row_softmax::{RowBuffers, RowLaunch, RowOutput};
use crate::gpu::{GpuContext, GpuError, Kernels};
use crate::model::Mask;
use crate::model::limits;

/// Which implementation a case runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchKernel {
    /// `flash_attention.wgsl`: tiled, online softmax, O(n) memory.
    Tiled,
    /// `naive_attention.wgsl`: three passes through an n x n score matrix.
    Naive,
    /// `row_softmax.wgsl`: every probability in one pass, no P·V (the explorer's whole heatmaps).
    Rows,
    /// `flash_backward.wgsl`: dQ, dK, dV from dO (all its launches; the forward it reads runs untimed
    /// first). Only when named: the default list (and the bench page's) stays forward-only.
    Backward,
    /// `flash_attention_coop.wgsl`: the tiled forward on the GPU's matrix units (f16 inputs, f32
    /// sums), where the device has them. Native only: the `bench` binary adds it after each tiled case
    /// ([`with_coop_rows`]) or runs it alone (`--kernel coop`); browsers have no matrix units for wgpu.
    Coop,
}

impl BenchKernel {
    /// The kernels a case list without a named kernel runs.
    pub const ALL: [BenchKernel; 3] = [BenchKernel::Tiled, BenchKernel::Naive, BenchKernel::Rows];
    /// Every kernel a filter may name.
    pub const NAMED: [BenchKernel; 4] =
        [BenchKernel::Tiled, BenchKernel::Naive, BenchKernel::Rows, BenchKernel::Backward];

    pub fn name(self) -> &'static str {
        match self {
            BenchKernel::Tiled => "tiled",
            BenchKernel::Naive => "naive",
            BenchKernel::Rows => "rows",
            BenchKernel::Backward => "backward",
            BenchKernel::Coop => "coop",
        }
    }
}

impl std::str::FromStr for BenchKernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMED
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown kernel \"{s}\" (expected tiled, naive, rows or backward)"))
    }
}

/// One benchmark case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchCase {
    pub kernel: BenchKernel,
    pub shape: AttentionShape,
    pub mask: Mask,
}

impl BenchCase {
    /// 4 d flops per attended (query, key) pair: 2 d for the score, 2 d for the P·V update (which
    /// the row softmax does not do). The backward counts 2.5x the forward's ([`BACKWARD_FLOPS`]).
    pub fn flops(&self) -> u64 {
        let per_pair = match self.kernel {
            BenchKernel::Rows => 2,
            BenchKernel::Backward => 10,
            BenchKernel::Tiled | BenchKernel::Naive | BenchKernel::Coop => 4,
        };
        per_pair * u64::from(self.shape.d) * self.shape.attended_pairs(self.mask)
    }
}

/// Narrows the case list (each `None` keeps every value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BenchFilter {
    pub n: Option<u32>,
    pub d: Option<u32>,
    /// The one mask to run, with its size.
    pub mask: Option<Mask>,
    pub kernel: Option<BenchKernel>,
    /// The window of the sliding cases when no mask is named; [`DEFAULT_WINDOW`] when `None`.
    pub window: Option<u64>,
}

/// How the backward's FLOPs are counted (the bench prints it): the matmuls of the usual FlashAttention
/// convention, not the work the kernel does (it recomputes Q·Kᵀ for dK/dV and dQ apart: 7 products).
pub const BACKWARD_FLOPS: &str = "backward flops = 2.5 x 4 d x attended pairs (five n x n x d products \
     against the forward's two; causal attends about half the pairs)";

pub const SEQUENCE_LENGTHS: [u32; 6] = [256, 1024, 2048, 4096, 8192, 16384];
/// (h_q, h_kv): multi-head, and grouped-query with 4 query heads per KV head.
pub const HEAD_LAYOUTS: [(u32, u32); 2] = [(8, 8), (32, 8)];
/// Head widths the benchmark runs when the link names none: the common ones, then Gemma 4's global
/// 512 and MLA's absorbed 576 (heads wider than the kernels' narrow path, `limits::NARROW_HEAD_DIM`).
pub const BENCH_DEFAULT_HEAD_DIMS: [u32; 4] = [64, 128, 512, 576];
/// The default list runs heads wider than `limits::NARROW_HEAD_DIM` up to this many tokens: a case is
/// 4-9x the work of d = 64 or 128, and at 16,384 tokens one run takes minutes on a software adapter.
pub const WIDE_HEADS_MAX_N: u32 = 4096;
pub const DEFAULT_WINDOW: u64 = 256;

/// The case list: n x heads x d x mask x kernel, filtered. A filter's `n`/`d` outside the default
/// lists still runs (one custom size).
pub fn cases(filter: &BenchFilter) -> Vec<BenchCase> {
    let lengths: Vec<u32> = filter.n.map_or(SEQUENCE_LENGTHS.to_vec(), |n| vec![n]);
    let dims: Vec<u32> = filter.d.map_or(BENCH_DEFAULT_HEAD_DIMS.to_vec(), |d| vec![d]);
    let window_tokens = filter.window.unwrap_or(DEFAULT_WINDOW);
    let masks = filter.mask.map_or(vec![Mask::Full, Mask::Causal, Mask::Sliding { window_tokens }], |m| vec![m]);
    let mut out = Vec::new();
    for &n in &lengths {
        for (h_q, h_kv) in HEAD_LAYOUTS {
            let named = filter.n.is_some() || filter.d.is_some();
            for &d in dims.iter().filter(|&&d| named || d <= limits::NARROW_HEAD_DIM || n <= WIDE_HEADS_MAX_N) {
                for &mask in &masks {
                    for kernel in filter.kernel.map_or(BenchKernel::ALL.to_vec(), |k| vec![k]) {
                        let shape = AttentionShape { h_q, h_kv, n_q: n, n_kv: n, d };
                        out.push(BenchCase { kernel, shape, mask });
                    }
                }
            }
        }
    }
    out
}

/// The native benchmark's list: `cases` with each tiled case followed by the same case on the matrix
/// units, so the two forms print side by side (a row says why where the adapter has none).
pub fn with_coop_rows(cases: Vec<BenchCase>) -> Vec<BenchCase> {
    let coop =
        |c: &BenchCase| (c.kernel == BenchKernel::Tiled).then_some(BenchCase { kernel: BenchKernel::Coop, ..*c });
    cases.iter().flat_map(|c| std::iter::once(*c).chain(coop(c))).collect()
}

/// Median and minimum of the repetitions, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub median_ms: f64,
    pub min_ms: f64,
}

pub fn stats(samples_ms: &[f64]) -> Option<Stats> {
    if samples_ms.is_empty() {
        return None;
    }
    let mut sorted = samples_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median_ms = if sorted.len() % 2 == 1 { sorted[mid] } else { (sorted[mid - 1] + sorted[mid]) / 2.0 };
    Some(Stats { median_ms, min_ms: sorted[0] })
}

/// GFLOP/s of `flops` done in `ms` milliseconds.
pub fn gflops(flops: u64, ms: f64) -> f64 {
    flops as f64 / (ms * 1e6)
}

/// One result row; the JSON keys are the contract of `bench --json` and the bench page.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchResult {
    pub kernel: &'static str,
    pub n: u32,
    pub h_q: u32,
    pub h_kv: u32,
    pub d: u32,
    pub mask: &'static str,
    /// Sliding window or chunk size (0 for full and causal).
    pub window: u32,
    /// `None` when the case does not fit this device.
    pub ms_median: Option<f64>,
    pub ms_min: Option<f64>,
    /// From the median time.
    pub gflops: Option<f64>,
    /// The adapter's measured WGSL FMA throughput (`fma_peak.wgsl`), for "% of peak".
    pub fma_gflops: f64,
    /// GPU memory the case needs: inputs, outputs and (naive) the score matrix.
    pub peak_bytes: u64,
    /// Why the case did not run (e.g. "does not fit").
    pub note: Option<String>,
}

impl BenchResult {
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Fraction of the measured FMA peak reached (from the median).
    pub fn fraction_of_peak(&self) -> Option<f64> {
        self.gflops.map(|g| g / self.fma_gflops)
    }
}

/// Repetitions after the warm-up; stops early once `budget_ms` of measuring has passed (keeping >= 2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Repetitions {
    pub max: u32,
    pub budget_ms: f64,
    /// Longest one run of a case may take, judged before anything is allocated from the adapter's
    /// measured FMA rate (a bound no kernel beats): a case past it is skipped. A dispatch cannot be
    /// stopped once submitted, and on a software adapter one large case would hold the GPU (every tab's)
    /// for minutes. `None`: no bound (the native benchmark runs every case).
    pub max_run_ms: Option<f64>,
}

impl Default for Repetitions {
    fn default() -> Self {
        Self { max: 7, budget_ms: 3000.0, max_run_ms: None }
    }
}

/// Why `case` is skipped on an adapter whose FMA peak is `fma_gflops`, if one run of it would take
/// longer than `max_run_ms` even at that peak.
pub fn too_long_for_adapter(case: &BenchCase, fma_gflops: f64, max_run_ms: Option<f64>) -> Option<String> {
    let limit = max_run_ms?;
    let fastest_ms = case.flops() as f64 / (fma_gflops * 1e6);
    (fma_gflops > 0.0 && fastest_ms > limit).then(|| {
        format!(
            "skipped: one run is {:.1} GFLOP, at least {:.0} s at this adapter's measured {:.1} GFLOP/s, and a run \
             may hold the GPU for at most {:.0} s here",
            case.flops() as f64 / 1e9,
            fastest_ms / 1000.0,
            fma_gflops,
            limit / 1000.0
        )
    })
}

/// Bytes of the GPU buffers a case allocates (padded rows, as the kernels use them).
pub fn peak_bytes(case: &BenchCase) -> u64 {
    let s = case.shape;
    let d = u64::from(launch::padded_dim(s.d));
    let q_o = 2 * u64::from(s.h_q) * u64::from(s.n_q) * d * 4;
    let k_v = 2 * u64::from(s.h_kv) * u64::from(s.n_kv) * d * 4;
    let lse = u64::from(s.h_q) * u64::from(s.n_q) * 4;
    let scores = match case.kernel {
        BenchKernel::Naive => naive_attention::scores_bytes(&s),
        BenchKernel::Rows => RowOutput::Probabilities.len(&s) * 4,
        BenchKernel::Tiled | BenchKernel::Coop => 0,
        // dO and dQ; dK and dV; D.
        BenchKernel::Backward => q_o + k_v + lse,
    };
    q_o + k_v + lse + scores
}

/// Measures this adapter's WGSL FMA throughput in GFLOP/s (best of a few runs).
pub async fn measure_fma_gflops(ctx: &GpuContext, kernels: &Kernels, now_ms: fn() -> f64) -> Result<f64, GpuError> {
    // Enough work to dwarf launch overhead on a CPU adapter, still milliseconds on a discrete GPU.
    let workgroups = if ctx.adapter.is_cpu { 64 } else { 4096 };
    let fma = kernels.fma_peak.prepare(ctx, workgroups, 4096)?;
    let mut best_ms = f64::INFINITY;
    for _ in 0..4 {
        best_ms = best_ms.min(time_once(ctx, &[&fma.dispatch], now_ms).await?);
    }
    Ok(gflops(fma.flops, best_ms))
}

/// Runs one case: uploads seeded inputs, warms up, times repetitions.
pub async fn run_case(
    ctx: &GpuContext,
    kernels: &Kernels,
    case: &BenchCase,
    fma_gflops: f64,
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<BenchResult, GpuError> {
    let s = case.shape;
    let (mask_kind, mask_size) = case.mask.to_gpu();
    let mut result = BenchResult {
        kernel: case.kernel.name(),
        n: s.n_q,
        h_q: s.h_q,
        h_kv: s.h_kv,
        d: s.d,
        mask: case.mask.kind_name(),
        window: if mask_kind >= 2 { mask_size } else { 0 },
        ms_median: None,
        ms_min: None,
        gflops: None,
        fma_gflops,
        peak_bytes: peak_bytes(case),
        note: None,
    };
    let limit = limits::job_limit(Some(ctx.limits.max_buffer_size));
    if let Err(over) = limits::check_job_bytes(peak_bytes(case), limit) {
        result.note = Some(format!("skipped: this case {over}"));
        return Ok(result);
    }
    if let Some(note) = too_long_for_adapter(case, fma_gflops, reps.max_run_ms) {
        result.note = Some(note);
        return Ok(result);
    }
    if case.kernel == BenchKernel::Naive
        && let Err(bytes) = naive_attention::fits(ctx, &s)
    {
        result.note = Some(format!("does not fit: the score matrix needs {bytes} bytes"));
        return Ok(result);
    }
    let probs_bytes = RowOutput::Probabilities.len(&s) * 4;
    if case.kernel == BenchKernel::Rows && ctx.check_binding_size("the probabilities", probs_bytes).is_err() {
        result.note = Some(format!("does not fit: the probabilities need {probs_bytes} bytes"));
        return Ok(result);
    }
    let d_pad = launch::padded_dim(s.d);
    let padded = AttentionShape { d: d_pad, ..s };
    let scale = 1.0 / (s.d as f32).sqrt();
    let flash_launch = FlashLaunch { shape: padded, kv_stride: s.n_kv, mask: case.mask, scale };
    if case.kernel == BenchKernel::Coop
        && let Err(why) = kernels.flash.coop_plan(flash_launch)
    {
        result.note = Some(format!("not supported on this adapter ({why})"));
        return Ok(result);
    }
    let mut rng = SplitMix64::new(0x5eed);
    let mut random = |values: &mut [f32]| values.iter_mut().for_each(|x| *x = rng.next_signed_unit());
    let q = ctx.storage_seeded("q", padded.q_len(), &mut random).await?;
    let k = ctx.storage_seeded("k", padded.kv_len(), &mut random).await?;
    let v = ctx.storage_seeded("v", padded.kv_len(), &mut random).await?;
    let o = ctx.storage_output("o", (padded.q_len() * 4) as u64)?;
    let lse = ctx.storage_output("lse", u64::from(s.h_q * s.n_q) * 4)?;
    let dispatches: Vec<Dispatch> = match case.kernel {
        BenchKernel::Tiled | BenchKernel::Coop => {
            let buffers = FlashBuffers { q: &q, k: &k, v: &v, o: &o, lse: &lse };
            // The fastest form for this adapter, whatever the page uses (compile time is not timed);
            // the coop row's on the matrix units, with f16 inputs (checked above that it has them).
            let (unrolled_before, f16_before) = (kernels.flash.is_unrolled(), kernels.flash.f16_inputs());
            kernels.flash.set_unrolled(true);
            kernels.flash.set_f16_inputs(case.kernel == BenchKernel::Coop);
            let prepared = kernels.flash.prepare(ctx, &buffers, flash_launch);
            kernels.flash.set_unrolled(unrolled_before);
            kernels.flash.set_f16_inputs(f16_before);
            vec![prepared?]
        }
        BenchKernel::Naive => {
            let scores = ctx.storage_output("scores", naive_attention::scores_bytes(&s))?;
            let buffers = NaiveBuffers { q: &q, k: &k, v: &v, scores: &scores, o: &o, lse: &lse };
            kernels.naive.prepare(ctx, &buffers, padded, case.mask, scale)?.to_vec()
        }
        BenchKernel::Rows => {
            let out = ctx.storage_output("probabilities", probs_bytes)?;
            // The fastest form, not the quick-to-compile one a page may start with.
            kernels.rows.warm_up(ctx, padded, RowOutput::Probabilities);
            let launch = RowLaunch {
                shape: padded,
                q_offset: padded.q_offset(),
                mask: case.mask,
                scale,
                output: RowOutput::Probabilities,
            };
            vec![kernels.rows.prepare(ctx, &RowBuffers { q: &q, k: &k, out: &out }, launch)?]
        }
        BenchKernel::Backward => {
            let flash = FlashBuffers { q: &q, k: &k, v: &v, o: &o, lse: &lse };
            prepare_backward(ctx, kernels, &flash, flash_launch, &mut random).await?
        }
    };
    let refs: Vec<&Dispatch> = dispatches.iter().collect();
    let samples = timed_samples(ctx, &refs, reps, now_ms).await?;
    if let Some(st) = stats(&samples) {
        result.ms_median = Some(st.median_ms);
        result.ms_min = Some(st.min_ms);
        result.gflops = Some(gflops(case.flops(), st.median_ms));
    }
    Ok(result)
}

/// The backward's launches (two, or three for heads over 768 wide) over seeded dO, after one untimed
/// forward pass that fills O and lse.
async fn prepare_backward(
    ctx: &GpuContext,
    kernels: &Kernels,
    flash: &FlashBuffers<'_>,
    launch: FlashLaunch,
    random: &mut impl FnMut(&mut [f32]),
) -> Result<Vec<Dispatch>, GpuError> {
    let shape = launch.shape;
    let d_o = ctx.storage_seeded("dO", shape.q_len(), random).await?;
    let delta = ctx.storage_output("D", u64::from(shape.h_q) * u64::from(shape.n_q) * 4)?;
    let grads = ctx.storage_output("grads", grads_len(&shape) * 4)?;
    let unrolled_before = kernels.flash.is_unrolled();
    kernels.flash.set_unrolled(true);
    let forward = kernels.flash.prepare(ctx, flash, launch);
    kernels.flash.set_unrolled(unrolled_before);
    Dispatch::submit_all(ctx, &[&forward?]);
    let buffers = BackwardBuffers {
        q: flash.q,
        k: flash.k,
        v: flash.v,
        d_o: &d_o,
        lse: flash.lse,
        delta: &delta,
        grads: &grads,
        o: flash.o,
    };
    kernels.backward(ctx).prepare(ctx, &buffers, launch)
}

/// Warm-up before timing: at least one submission (pipeline compilation, first touch of memory) and
/// at least this long of repeated ones, so that a GPU idling at a low clock reaches its working one
/// (an H100 sampled 345 MHz idle and 1980 MHz busy, and with one warm-up submission the first
/// cases of a run came out up to 5x slow).
pub const WARM_UP_MS: f64 = 100.0;

/// Warm-up submissions at most (tiny launches on a fast GPU).
const MAX_WARM_UPS: u32 = 1000;

/// Milliseconds of each timed submission of `dispatches`, after the warm-up: `reps.max` of them, or
/// fewer (at least 2) once `reps.budget_ms` has passed.
pub async fn timed_samples(
    ctx: &GpuContext,
    dispatches: &[&Dispatch],
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<Vec<f64>, GpuError> {
    let start = now_ms();
    let mut warm_ups = 0;
    while warm_ups == 0 || (now_ms() - start < WARM_UP_MS && warm_ups < MAX_WARM_UPS) {
        time_once(ctx, dispatches, now_ms).await?;
        warm_ups += 1;
    }
    let mut samples = Vec::new();
    let start = now_ms();
    while samples.len() < reps.max as usize && (samples.len() < 2 || now_ms() - start < reps.budget_ms) {
        samples.push(time_once(ctx, dispatches, now_ms).await?);
    }
    Ok(samples)
}

/// Milliseconds one submission of `dispatches` takes: GPU timestamps when available, else wall clock.
pub async fn time_once(ctx: &GpuContext, dispatches: &[&Dispatch], now_ms: fn() -> f64) -> Result<f64, GpuError> {
    if !ctx.timestamps {
        let t0 = now_ms();
        Dispatch::submit_all(ctx, dispatches);
        ctx.wait_idle().await?;
        let ms = now_ms() - t0;
        // Without timestamps nothing reads a result back, so a failed submission would still be timed.
        ctx.check_job()?;
        return Ok(ms);
    }
    let queries = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
        label: Some("bench"),
        ty: wgpu::QueryType::Timestamp,
        count: 2,
    });
    let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("bench timestamps"),
        size: 16,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("bench timestamps staging"),
        size: 16,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    {
        let timestamp_writes = wgpu::ComputePassTimestampWrites {
            query_set: &queries,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        };
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("bench"),
            timestamp_writes: Some(timestamp_writes),
        });
        for d in dispatches {
            d.record(&mut pass);
        }
    }
    encoder.resolve_query_set(&queries, 0..2, &resolve, 0);
    encoder.copy_buffer_to_buffer(&resolve, 0, &staging, 0, 16);
    ctx.queue.submit([encoder.finish()]);
    let ticks: Vec<u64> = ctx.map_and_read(&staging).await?;
    let ns = ticks[1].saturating_sub(ticks[0]) as f64 * f64::from(ctx.queue.get_timestamp_period());
    Ok(ns / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_slower_than_the_limit_at_the_adapters_peak_is_skipped_before_it_starts() {
        // Tiled, 8 heads, n = 16,384, d = 256, full: 4 x 256 x 16,384^2 x 8 = 2,199.0 GFLOP; at a 10 GFLOP/s
        // peak at least 219.9 s, over a 10 s bound.
        let case = BenchCase {
            kernel: BenchKernel::Tiled,
            shape: AttentionShape { h_q: 8, h_kv: 8, n_q: 16_384, n_kv: 16_384, d: 256 },
            mask: Mask::Full,
        };
        assert_eq!(
            too_long_for_adapter(&case, 10.0, Some(10_000.0)).as_deref(),
            Some(
                "skipped: one run is 2199.0 GFLOP, at least 220 s at this adapter's measured 10.0 GFLOP/s, and a run \
                 may hold the GPU for at most 10 s here"
            )
        );
        // The native benchmark bounds nothing; a window of 1 key is quick anywhere.
        assert_eq!(too_long_for_adapter(&case, 10.0, None), None);
        let windowed = BenchCase { mask: Mask::Sliding { window_tokens: 1 }, ..case };
        assert_eq!(too_long_for_adapter(&windowed, 10.0, Some(10_000.0)), None);
    }

    #[test]
    fn the_native_list_puts_a_coop_row_after_each_tiled_one() {
        let filter = BenchFilter { n: Some(1024), d: Some(64), mask: Some(Mask::Causal), ..Default::default() };
        let kernels: Vec<&str> = with_coop_rows(cases(&filter)).iter().map(|c| c.kernel.name()).collect();
        // Two head layouts, each tiled, coop, naive, rows.
        assert_eq!(kernels, ["tiled", "coop", "naive", "rows", "tiled", "coop", "naive", "rows"]);
        let coop = with_coop_rows(cases(&filter))[1];
        assert_eq!(
            (coop.flops(), peak_bytes(&coop)),
            (
                BenchCase { kernel: BenchKernel::Tiled, ..coop }.flops(),
                peak_bytes(&BenchCase { kernel: BenchKernel::Tiled, ..coop })
            )
        );
        // The page's lists never hold it, and links cannot name it.
        assert!(cases(&BenchFilter::default()).iter().all(|c| c.kernel != BenchKernel::Coop));
        assert!("coop".parse::<BenchKernel>().is_err());
    }

    #[test]
    fn statistics_by_hand() {
        assert_eq!(stats(&[]), None);
        assert_eq!(stats(&[3.0, 1.0, 2.0]), Some(Stats { median_ms: 2.0, min_ms: 1.0 }));
        assert_eq!(stats(&[4.0, 1.0, 2.0, 3.0]), Some(Stats { median_ms: 2.5, min_ms: 1.0 }));
        // 2e9 flops in 1 s = 2 GFLOP/s.
        assert!((gflops(2_000_000_000, 1000.0) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn case_list_and_filters() {
        let all = cases(&BenchFilter::default());
        // 6 lengths x 2 layouts x 2 widths, and the 4 lengths up to 4,096 x 2 layouts x 2 wide widths;
        // x 3 masks x 3 kernels.
        assert_eq!(all.len(), (6 * 2 * 2 + 4 * 2 * 2) * 3 * 3);
        assert!(all.iter().any(|c| c.shape.d == 576 && c.shape.n_q == 4096));
        assert!(!all.iter().any(|c| c.shape.d == 512 && c.shape.n_q == 8192));
        let wide = cases(&BenchFilter { n: Some(16384), d: Some(512), ..Default::default() });
        assert_eq!(wide.len(), 2 * 3 * 3, "a named size always runs");
        let one = cases(&BenchFilter {
            n: Some(2048),
            d: Some(64),
            mask: Some(Mask::Causal),
            kernel: Some(BenchKernel::Tiled),
            window: None,
        });
        assert_eq!(one.len(), 2); // MHA and GQA
        assert!(one.iter().all(|c| c.shape.n_q == 2048 && c.mask == Mask::Causal && c.kernel == BenchKernel::Tiled));
        let sliding = cases(&BenchFilter::default()).into_iter().filter(|c| c.mask.kind_name() == "sliding");
        assert!(sliding.clone().count() > 0);
        assert!(sliding.into_iter().all(|c| c.mask == Mask::Sliding { window_tokens: 256 }));
    }

    #[test]
    fn the_default_tiled_cases_fit_the_job_limit_and_a_huge_link_does_not() {
        for case in cases(&BenchFilter::default()).iter().filter(|c| c.kernel == BenchKernel::Tiled) {
            assert!(limits::check_job_bytes(peak_bytes(case), limits::JOB_MAX_BYTES).is_ok(), "{case:?}");
        }
        let huge = cases(&BenchFilter { n: Some(131_072), d: Some(128), ..Default::default() });
        assert!(huge.iter().all(|c| limits::check_job_bytes(peak_bytes(c), limits::JOB_MAX_BYTES).is_err()));
    }

    #[test]
    fn flops_and_bytes_by_hand() {
        let case = BenchCase { kernel: BenchKernel::Naive, shape: AttentionShape::square(2, 4, 8), mask: Mask::Causal };
        // causal on 4 tokens: 10 pairs per head, 2 heads, 4 * 8 flops each.
        assert_eq!(case.flops(), 4 * 8 * 20);
        // Q, O: 2 * 2*4*8*4 = 512; K, V the same; lse 2*4*4 = 32; scores 2*4*4*4 = 128.
        assert_eq!(peak_bytes(&case), 512 + 512 + 32 + 128);
        let tiled = BenchCase { kernel: BenchKernel::Tiled, ..case };
        assert_eq!(peak_bytes(&tiled), 512 + 512 + 32);
        // The row softmax: 2 * 8 flops per pair; its output is the 128 bytes of probabilities.
        // The backward: 2.5 x 4 x 8 flops per pair; dO, dQ, dK, dV and D on top of the tiled's buffers.
        let backward = BenchCase { kernel: BenchKernel::Backward, ..case };
        assert_eq!(backward.flops(), 10 * 8 * 20);
        assert_eq!(peak_bytes(&backward), 2 * (512 + 512 + 32));
        assert_eq!("backward".parse::<BenchKernel>(), Ok(BenchKernel::Backward));
        assert!(cases(&BenchFilter::default()).iter().all(|c| c.kernel != BenchKernel::Backward));
        let rows = BenchCase { kernel: BenchKernel::Rows, ..case };
        assert_eq!(rows.flops(), 2 * 8 * 20);
        assert_eq!(peak_bytes(&rows), 512 + 512 + 32 + 128);
    }
}
