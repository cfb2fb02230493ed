//! How the explorer's work is cut up for the GPU: heads in batches, long heads in slices of rows,
//! cross-attention in chunks of queries; and what an export can recompute.
//!
//! A job is planned whole before it starts ([`JobPlan`], [`pieces`]); the page then runs it one piece
//! per engine call and checks [`JobClock::is_current`] before each, so a newer request takes over at
//! the next piece (a batch, or a slice of a long head).

use crate::attention::AttentionShape;
use crate::attention::pooled::PooledMap;
use crate::engine::MapOutput;
use crate::model::Mask;
use crate::views::heatmaps::request::Request;

/// Multiply-adds of `Q·Kᵀ` per engine call: about 60 ms of a 9 GFLOP/s software GPU, far less on a real one.
pub const GPU_BATCH_WORK: u64 = 1 << 28;
/// The CPU reference blocks the page while it runs: keep its batches to one small head.
pub const CPU_BATCH_WORK: u64 = 1 << 21;
/// Largest Q buffer of one batch (floats).
pub const MAX_Q_FLOATS: u64 = 16 << 20;

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
    /// The thumbnails' maps, and the enlarged head's.
    pub thumb_output: MapOutput,
    pub large_output: MapOutput,
}

impl JobPlan {
    /// `engine_is_gpu`: WebGPU is there; `gpu_takes_width`: its kernels take this layer's head width.
    pub fn new(req: &Request, engine_is_gpu: bool, gpu_takes_width: bool) -> Self {
        let layout = &req.layout;
        let (n_q, n_kv, d) = (req.n_q(), req.n_kv(), layout.head_dim);
        let on_gpu = engine_is_gpu && gpu_takes_width;
        let note = (engine_is_gpu && !gpu_takes_width).then(|| {
            format!(
                "This layer's heads are {d} wide, more than the GPU kernels' 256: computed with the CPU reference instead."
            )
        });
        let pairs = AttentionShape { h_q: 1, h_kv: 1, n_q, n_kv, d }.attended_pairs(req.mask).max(1);
        let per_head_work = pairs * u64::from(d);
        let max_work = if on_gpu { GPU_BATCH_WORK } else { CPU_BATCH_WORK };
        let all_heads = req.heads.len() as u32 == layout.n_q_heads;
        // Small layers go in one launch with the real GQA shape; otherwise one KV group (or part) at a time.
        let batches = if on_gpu
            && all_heads
            && per_head_work * u64::from(layout.n_q_heads) <= max_work
            && u64::from(layout.n_q_heads * n_q * d) <= MAX_Q_FLOATS
        {
            vec![req.heads.clone()]
        } else {
            batches(&req.heads, layout.group_size(), per_head_work, u64::from(n_q * d), max_work, MAX_Q_FLOATS)
        };
        let output_for = |cells: u32| {
            if req.exact() {
                MapOutput::Exact
            } else {
                MapOutput::Pooled(PooledMap::whole(n_q, cells.min(n_q), cells.min(n_kv), req.pool))
            }
        };
        let (thumb_output, large_output) = (output_for(req.thumb_cells), output_for(req.large_cells));
        Self { on_gpu, note, batches, thumb_output, large_output }
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
                let parts = if on_gpu { work.div_ceil(GPU_BATCH_WORK) } else { 1 };
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

/// Largest head an export writes with every probability (64 MiB of f32).
pub const EXACT_EXPORT_MAX_CELLS: u64 = 1 << 24;

/// Why the export of a pooled head (`n` = (n_q, n_kv), shown as `cells` = (rows, cols)) holds its
/// pooled blocks instead of every probability; `None` when every probability can be recomputed for
/// it (it fits [`EXACT_EXPORT_MAX_CELLS`] and the GPU takes its head width).
pub fn pooled_export_notice(head: u32, n: (u32, u32), cells: (u32, u32), gpu: bool) -> Option<String> {
    let all = u64::from(n.0) * u64::from(n.1);
    let reason = if all > EXACT_EXPORT_MAX_CELLS {
        format!("its {} x {} = {all} probabilities are more than an export holds ({EXACT_EXPORT_MAX_CELLS})", n.0, n.1)
    } else if !gpu {
        "without the GPU only the pooled blocks are computed".to_owned()
    } else {
        return None;
    };
    Some(format!("Head {head}: {reason}, so the file holds its {} x {} pooled blocks.", cells.0, cells.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::layer_inputs::LayerLayout;
    use crate::model::Model;
    use crate::model::presets::preset;
    use crate::views::attention_input::AttentionInput;
    use crate::views::heatmaps::params::ExplorerParams;
    use crate::views::heatmaps::request::{Screen, build_request};
    use crate::views::link::LinkParams;

    const WIDE: Screen = Screen { width_css_px: 1280.0, device_pixel_ratio: 2.0 };

    fn request(model: &Model, link: &[(&str, &str)]) -> Request {
        let (mut input, mut explorer) = (AttentionInput::default(), ExplorerParams::default());
        for &(key, value) in link {
            if AttentionInput::KEYS.contains(&key) {
                input.set(key, value).unwrap();
            } else {
                explorer.set(key, value).unwrap();
            }
        }
        build_request(&input, &explorer, LayerLayout::of(model, 0), WIDE).unwrap()
    }

    fn llama() -> &'static Model {
        preset("llama-3-8b").unwrap()
    }

    #[test]
    fn a_short_sentence_is_one_launch_of_every_head_on_the_gpu() {
        let plan = JobPlan::new(&request(llama(), &[]), true, true);
        assert_eq!(plan.batches, vec![(0..32).collect::<Vec<_>>()]);
        assert_eq!((plan.on_gpu, plan.note.clone()), (true, None));
        assert_eq!((plan.thumb_output, plan.large_output), (MapOutput::Exact, MapOutput::Exact));
    }

    #[test]
    fn the_cpu_reference_runs_one_kv_group_at_a_time() {
        // 12 tokens, causal: 78 pairs x 128 dims = 9,984 multiply-adds a head; a group of 4 is 39,936,
        // under the CPU's 2^21 but the one-launch shortcut is the GPU's.
        let plan = JobPlan::new(&request(llama(), &[]), false, false);
        assert_eq!(plan.batches.len(), 8);
        assert_eq!(plan.batches[1], vec![4, 5, 6, 7]);
        assert!(!plan.on_gpu && plan.note.is_none());
    }

    #[test]
    fn long_heads_go_one_at_a_time_pooled_to_the_screen() {
        // n = 8192, causal: 8192 x 8193 / 2 = 33,558,528 pairs x 128 = 4,295,491,584 multiply-adds a
        // head, more than 2^28: each head is its own batch.
        let plan = JobPlan::new(&request(llama(), &[("n", "8192"), ("heads", "0-3")]), true, true);
        assert_eq!(plan.batches, vec![vec![0], vec![1], vec![2], vec![3]]);
        // 160 CSS px x 2 = 320 cells a side for thumbnails; 640 x 2 = 1280 for the enlarged head.
        let MapOutput::Pooled(thumb) = plan.thumb_output else { panic!("{:?}", plan.thumb_output) };
        let MapOutput::Pooled(large) = plan.large_output else { panic!("{:?}", plan.large_output) };
        assert_eq!((thumb.rows, thumb.cols, large.rows, large.cols), (320, 320, 1280, 1280));
    }

    #[test]
    fn heads_wider_than_the_kernels_say_so() {
        let wide = Model::simple(2, 2048, 4); // 512 dims a head
        let plan = JobPlan::new(&request(&wide, &[]), true, false);
        assert!(!plan.on_gpu);
        assert_eq!(
            plan.note.as_deref(),
            Some(
                "This layer's heads are 512 wide, more than the GPU kernels' 256: computed with the CPU reference instead."
            )
        );
    }

    #[test]
    fn a_long_pooled_head_comes_in_slices_that_cover_it_once() {
        let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 8192, n_kv: 8192, d: 128 };
        let map = PooledMap::whole(8192, 320, 320, crate::attention::pooled::Pool::Max);
        // 4,295,491,584 multiply-adds / 2^28 = 16.002: 17 slices on the GPU, one call on the CPU.
        let on_gpu = pieces(shape, Mask::Causal, MapOutput::Pooled(map), false, true);
        assert_eq!(on_gpu.len(), 17);
        assert_eq!(on_gpu.first().unwrap().rows.0, 0);
        assert_eq!(on_gpu.last().unwrap().rows.1, 8192);
        assert!(on_gpu.windows(2).all(|w| w[0].rows.1 == w[1].rows.0 && w[0].done_after < w[1].done_after));
        assert_eq!(on_gpu.last().unwrap().done_after, 1.0);
        assert_eq!(pieces(shape, Mask::Causal, MapOutput::Pooled(map), false, false).len(), 1);
    }

    #[test]
    fn cross_attention_with_more_queries_than_keys_runs_in_chunks() {
        let shape = AttentionShape { h_q: 2, h_kv: 1, n_q: 5, n_kv: 2, d: 64 };
        let got: Vec<(u32, (u32, u32), f64)> = pieces(shape, Mask::Full, MapOutput::Exact, true, true)
            .iter()
            .map(|p| (p.row0, p.rows, p.done_after))
            .collect();
        assert_eq!(got, vec![(0, (0, 2), 1.0 / 3.0), (2, (0, 2), 2.0 / 3.0), (4, (0, 1), 1.0)]);
    }

    #[test]
    fn a_newer_job_supersedes_every_older_one() {
        let mut clock = JobClock::default();
        let first = clock.start();
        assert!(clock.is_current(first));
        let second = clock.start();
        assert!(!clock.is_current(first) && clock.is_current(second));
    }

    #[test]
    fn a_selection_batches_by_its_own_kv_groups() {
        // n = 512: 131,328 pairs x 128 = 16.8 M multiply-adds a head, so groups fit whole; heads 1 and
        // 3 read KV head 0, head 6 reads KV head 1.
        let req = request(llama(), &[("heads", "1,3,6"), ("n", "512")]);
        assert_eq!(JobPlan::new(&req, true, true).batches, vec![vec![1, 3], vec![6]]);
    }

    #[test]
    fn pooled_exports_hold_every_probability_up_to_64_mib() {
        // 4096 x 4096 = 2^24 cells: exactly at the limit.
        assert_eq!(pooled_export_notice(3, (4096, 4096), (160, 160), true), None);
        assert_eq!(
            pooled_export_notice(3, (4097, 4096), (160, 160), true).as_deref(),
            Some(
                "Head 3: its 4097 x 4096 = 16781312 probabilities are more than an export holds (16777216), so the file holds its 160 x 160 pooled blocks."
            )
        );
        assert!(pooled_export_notice(0, (512, 512), (160, 160), false).is_some_and(|n| n.contains("without the GPU")));
    }

    #[test]
    fn batches_follow_groups_and_budgets() {
        let heads: Vec<u32> = (0..8).collect();
        // Group of 4, room for everything: one batch per KV group.
        assert_eq!(batches(&heads, 4, 10, 10, 1000, 1000), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        // Work for two heads per batch.
        assert_eq!(batches(&heads, 4, 10, 10, 20, 1000), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        // A head bigger than the budget still runs, alone.
        assert_eq!(batches(&[0, 1], 2, 50, 10, 20, 1000), vec![vec![0], vec![1]]);
        // Non-contiguous selections across groups.
        assert_eq!(batches(&[1, 3, 6], 4, 1, 1, 100, 100), vec![vec![1, 3], vec![6]]);
    }

    #[test]
    fn cross_attention_queries_come_in_chunks_of_the_keys() {
        assert_eq!(query_chunks(5, 2), vec![(0, 2), (2, 2), (4, 1)]);
        assert_eq!(query_chunks(3, 7), vec![(0, 3)]);
    }
}
