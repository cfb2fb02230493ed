//! How a live-attention job is cut up for the engine: heads in batches, long heads in slices of
//! rows, cross-attention in chunks of queries; which job is the latest; and the progress it reports.
//!
//! A job is planned whole before it starts ([`JobPlan`], [`pieces`]); it then runs one piece per
//! engine call and checks that it is still wanted before each, so a newer request takes over at the
//! next piece (a batch, or a slice of a long head).

use super::request::Request;
use crate::attention::AttentionShape;
use crate::attention::pooled::PooledMap;
use crate::engine::MapOutput;
use crate::model::Mask;
use crate::model::limits::{BATCH_MAX_Q_FLOATS, CPU_BATCH_MULTIPLY_ADDS, GPU_BATCH_MULTIPLY_ADDS, KERNEL_MAX_HEAD_DIM};

/// Which job is the page's latest: each request starts one, and an older one stops at its next piece.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobClock {
    latest: u64,
}

impl JobClock {
    /// A new job, which supersedes every earlier one.
    pub fn start(&mut self) -> u64 {
        self.latest += 1;
        self.latest
    }

    /// Whether `job` is still the latest (a job that is not stops before its next piece).
    pub fn is_current(&self, job: u64) -> bool {
        job == self.latest
    }
}

/// What a request runs: where, in which batches of heads, and at which output size.
#[derive(Clone, Debug, PartialEq)]
pub struct JobPlan {
    /// The heads run on the GPU (else on the CPU reference: no GPU, or heads wider than its kernels).
    pub on_gpu: bool,
    /// Said under the status line when the GPU is there but the heads are too wide for it.
    pub note: Option<String>,
    /// Heads per engine batch, in order.
    pub batches: Vec<Vec<u32>>,
    /// Every head's maps (`map_cells`), and the focused head's (`focus_cells`).
    pub map_output: MapOutput,
    pub focus_output: MapOutput,
}

impl JobPlan {
    /// `engine_is_gpu`: WebGPU is there; `gpu_takes_width`: its kernels take this layer's head width.
    pub fn new(req: &Request, engine_is_gpu: bool, gpu_takes_width: bool) -> Self {
        let layout = &req.layout;
        let (n_q, n_kv, d) = (req.n_q(), req.n_kv(), layout.head_dim);
        let on_gpu = engine_is_gpu && gpu_takes_width;
        let note = (engine_is_gpu && !gpu_takes_width).then(|| {
            format!(
                "This layer's heads are {d} wide, more than the GPU kernels' {KERNEL_MAX_HEAD_DIM}: computed with the CPU reference instead."
            )
        });
        let pairs = AttentionShape { h_q: 1, h_kv: 1, n_q, n_kv, d }.attended_pairs(req.mask).max(1);
        let per_head_work = pairs * u64::from(d);
        let max_work = if on_gpu { GPU_BATCH_MULTIPLY_ADDS } else { CPU_BATCH_MULTIPLY_ADDS };
        let all_heads = req.heads.len() as u32 == layout.n_q_heads;
        // Small layers go in one launch with the real GQA shape; otherwise one KV group (or part) at a time.
        let batches = if on_gpu
            && all_heads
            && per_head_work * u64::from(layout.n_q_heads) <= max_work
            && u64::from(layout.n_q_heads * n_q * d) <= BATCH_MAX_Q_FLOATS
        {
            vec![req.heads.clone()]
        } else {
            batches(&req.heads, layout.group_size(), per_head_work, u64::from(n_q * d), max_work, BATCH_MAX_Q_FLOATS)
        };
        let output_for = |cells: u32| {
            if req.exact() {
                MapOutput::Exact
            } else {
                MapOutput::Pooled(PooledMap::whole(n_q, cells.min(n_q), cells.min(n_kv), req.pool))
            }
        };
        let (map_output, focus_output) = (output_for(req.map_cells), output_for(req.focus_cells));
        Self { on_gpu, note, batches, map_output, focus_output }
    }
}

/// One engine call of a batch: the query rows `rows` (within the chunk starting at `row0`), the output
/// it asks for, and the fraction of the batch done once it returns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Piece {
    pub row0: u32,
    pub rows: (u32, u32),
    pub output: MapOutput,
    pub done_after: f64,
}

/// A batch of `shape.h_q` heads (queries `shape.n_q`, keys `shape.n_kv`) as engine calls: cross-attention
/// with more queries than keys in chunks of queries (`cross`), and on the GPU a pooled map with more
/// work than one call should hold in slices of its rows, each pooled on its own.
pub fn pieces(shape: AttentionShape, mask: Mask, output: MapOutput, cross: bool, on_gpu: bool) -> Vec<Piece> {
    let chunks = if cross { query_chunks(shape.n_q, shape.n_kv) } else { vec![(0, shape.n_q)] };
    let n_chunks = chunks.len() as f64;
    let mut out = Vec::new();
    for (c, (row0, rows)) in chunks.into_iter().enumerate() {
        let outputs: Vec<MapOutput> = match output {
            MapOutput::Exact => vec![MapOutput::Exact],
            MapOutput::Pooled(map) => {
                let chunk_map = PooledMap::whole(rows, map.rows.min(rows), map.cols, map.pool);
                let work = AttentionShape { n_q: rows, ..shape }.attended_pairs(mask) * u64::from(shape.d);
                let parts = if on_gpu { work.div_ceil(GPU_BATCH_MULTIPLY_ADDS) } else { 1 };
                chunk_map.slices(u32::try_from(parts).unwrap_or(u32::MAX)).into_iter().map(MapOutput::Pooled).collect()
            }
        };
        let n_outputs = outputs.len() as f64;
        for (p, output) in outputs.into_iter().enumerate() {
            let rows = match output {
                MapOutput::Exact => (0, rows),
                MapOutput::Pooled(slice) => slice.queries(),
            };
            let done_after = (c as f64 + (p + 1) as f64 / n_outputs) / n_chunks;
            out.push(Piece { row0, rows, output, done_after });
        }
    }
    out
}

/// Progress and timings the page shows (and the benchmark reads).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Progress {
    pub job: u64,
    pub done: usize,
    pub total: usize,
    /// Heads in the batch being computed, and the fraction of it done (long heads come in slices).
    pub batch: usize,
    pub partial: f64,
    pub finished: bool,
    pub error: Option<String>,
    /// From the request to the last head's pixels.
    pub total_ms: f64,
    /// Awaiting the engine (uploads, kernels, readback).
    pub kernel_ms: f64,
    /// Building the heads' inputs (embeddings, projections, positions) on the CPU, where the GPU
    /// waited for them (later batches' inputs are built while the GPU computes).
    pub inputs_ms: f64,
    /// Handing results to the heatmaps and drawing them.
    pub draw_ms: f64,
    pub on_gpu: bool,
    pub note: Option<String>,
}

/// Splits query heads into GPU batches: heads of one KV group go together (they share its K/V), and a
/// batch stays under `max_work` (multiply-adds of `Q·Kᵀ`, about what the GPU does per batch) and
/// `max_q_floats` (the Q buffer), so long sequences show progress head by head.
pub fn batches(
    heads: &[u32],
    group: u32,
    per_head_work: u64,
    per_head_q_floats: u64,
    max_work: u64,
    max_q_floats: u64,
) -> Vec<Vec<u32>> {
    let g = group.max(1);
    let mut out: Vec<Vec<u32>> = Vec::new();
    for &h in heads {
        let fits = out.last().is_some_and(|b: &Vec<u32>| {
            let next = b.len() as u64 + 1;
            b[0] / g == h / g
                && next * per_head_work <= max_work.max(per_head_work)
                && next * per_head_q_floats <= max_q_floats.max(per_head_q_floats)
        });
        match out.last_mut() {
            Some(b) if fits => b.push(h),
            _ => out.push(vec![h]),
        }
    }
    out
}

/// Query rows in chunks of at most `n_kv`: the kernels take queries as the last rows of the keys, so
/// cross-attention with more queries than keys (full mask: rows are independent) runs in pieces.
pub fn query_chunks(n_q: u32, n_kv: u32) -> Vec<(u32, u32)> {
    let step = n_kv.max(1);
    (0..n_q.div_ceil(step)).map(|c| (c * step, (n_q - c * step).min(step))).collect()
}
