//! Running a live-attention batch on the engine: its inputs built on the CPU, its maps from one
//! engine call per [`Piece`](super::plan::Piece), and each head's values made into a [`HeadMap`].
//!
//! Native and async like the engine itself, so the tests run it on the CPU tier; the job
//! ([`super::job`]) drives it: when to yield to the browser, when to hand a head over.

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::head_map::HeadMap;
use super::plan::pieces;
use super::request::Request;
use crate::attention::layer_inputs::{HeadRows, LayerInputs};
use crate::attention::{AttentionProblem, AttentionShape};
use crate::engine::{Engine, MapOutput};
use crate::event_loop::breathe;
use crate::model::Mask;

/// One batch's inputs: its query heads, their Q and K of the KV heads they read, `[heads, n, d]` each.
pub struct BatchInputs {
    pub heads: Vec<u32>,
    pub(super) q: Vec<f32>,
    pub(super) k: Vec<f32>,
    pub(super) h_kv: u32,
}

/// K of each KV head, computed once per job: consecutive batches of one KV group share it.
pub type KCache = HashMap<u32, Vec<f32>>;

/// Elements (rows times head width) of Q or K built between two yields to the event loop: a few ms
/// of wasm, so a batch of long inputs (65,536 tokens) never holds the page for long.
const INPUT_PIECE_ELEMENTS: usize = 1 << 20;

/// Builds a batch's Q and K on the CPU (the projections, positions and designed heads), a piece of
/// rows at a time, letting the browser in between pieces; `None` once `keep_going` says no (a newer
/// request), which it asks before each piece.
pub async fn batch_inputs(
    inputs: &LayerInputs,
    heads: &[u32],
    k_cache: &mut KCache,
    keep_going: &dyn Fn() -> bool,
) -> Option<BatchInputs> {
    let d = inputs.layout.head_dim;
    let mut kv_heads: Vec<u32> = heads.iter().map(|&h| inputs.layout.kv_head(h)).collect();
    kv_heads.dedup();
    let mut k = Vec::new();
    for &g in &kv_heads {
        match k_cache.entry(g) {
            Entry::Occupied(cached) => copy_in_pieces(&mut k, cached.get()).await,
            Entry::Vacant(slot) => {
                let mut rows = Vec::new();
                in_pieces(&inputs.k_rows(g), d, &mut rows, keep_going).await?;
                copy_in_pieces(&mut k, slot.insert(rows)).await;
            }
        }
    }
    let mut q = Vec::with_capacity(heads.len() * inputs.q_tokens().len() * d as usize);
    for &h in heads {
        in_pieces(&inputs.q_rows(h), d, &mut q, keep_going).await?;
    }
    Some(BatchInputs { heads: heads.to_vec(), q, k, h_kv: kv_heads.len() as u32 })
}

/// Appends every row of `head` to `out`, [`rows_per_piece`] rows at a time, letting the browser in
/// before a piece when the page has been held for a while (a batch of heads one piece long each must
/// not run as one task); `None` if `keep_going` says no before a piece.
async fn in_pieces(head: &HeadRows<'_>, d: u32, out: &mut Vec<f32>, keep_going: &dyn Fn() -> bool) -> Option<()> {
    let (len, step) = (head.len(), rows_per_piece(d));
    out.reserve(len * d as usize);
    for start in (0..len).step_by(step) {
        breathe().await;
        if !keep_going() {
            return None;
        }
        out.extend(head.rows(start..(start + step).min(len)));
    }
    Some(())
}

/// Appends `values` to `out`, [`INPUT_PIECE_ELEMENTS`] at a time, letting the browser in between
/// as [`in_pieces`] does (a K of 65,536 rows is 32 MB).
async fn copy_in_pieces(out: &mut Vec<f32>, values: &[f32]) {
    out.reserve(values.len());
    for piece in values.chunks(INPUT_PIECE_ELEMENTS) {
        breathe().await;
        out.extend_from_slice(piece);
    }
}

/// Rows in [`INPUT_PIECE_ELEMENTS`] at head width `d`, at least one.
fn rows_per_piece(d: u32) -> usize {
    (INPUT_PIECE_ELEMENTS / d.max(1) as usize).max(1)
}

/// How a running batch hears from its caller: whether to go on, where to report the fraction done,
/// and the clock its engine time is measured with.
pub struct Steering<'a> {
    pub keep_going: &'a dyn Fn() -> bool,
    pub progress: &'a dyn Fn(f64),
    pub now_ms: &'a dyn Fn() -> f64,
}

/// Runs `gpu_work` and `cpu_work` together, the GPU's first: its synchronous part (uploads, submission)
/// runs at the first poll, then whichever can go on goes on (both yield to the event loop in pieces).
pub async fn overlapped<F: Future, C: Future>(gpu_work: F, cpu_work: C) -> (F::Output, C::Output) {
    use std::task::Poll;
    let (mut gpu_work, mut cpu_work) = (std::pin::pin!(gpu_work), std::pin::pin!(cpu_work));
    let (mut gpu, mut cpu) = (None, None);
    std::future::poll_fn(|cx| {
        if gpu.is_none()
            && let Poll::Ready(out) = gpu_work.as_mut().poll(cx)
        {
            gpu = Some(out);
        }
        if cpu.is_none()
            && let Poll::Ready(out) = cpu_work.as_mut().poll(cx)
        {
            cpu = Some(out);
        }
        if gpu.is_some() && cpu.is_some() { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    match (gpu, cpu) {
        (Some(gpu), Some(cpu)) => (gpu, cpu),
        _ => unreachable!("the poll above finishes only with both results"),
    }
}

/// The maps of a batch's heads (exact or pooled), one engine call per piece of the batch. `steer` hears how far it got after each piece and may stop it early (a newer request),
/// leaving the maps incomplete. Time spent awaiting the engine is added to `kernel_ms`.
pub async fn head_values(
    engine: &Engine,
    inputs: &LayerInputs,
    batch: &BatchInputs,
    mask: Mask,
    output: MapOutput,
    kernel_ms: &mut f64,
    steer: &Steering<'_>,
) -> Result<Vec<Vec<f32>>, String> {
    let (n_q, n_kv, d) = (inputs.q_tokens().len() as u32, inputs.kv_tokens().len() as u32, inputs.layout.head_dim);
    let heads = batch.heads.len();
    let shape = AttentionShape { h_q: heads as u32, h_kv: batch.h_kv, n_q, n_kv, d };
    let scale = 1.0 / (d as f32).sqrt();
    let mut per_head: Vec<Vec<f32>> = vec![Vec::new(); heads];
    for piece in pieces(shape, mask, output, inputs.is_cross(), engine.gpu_supports_dim(d)) {
        if !(steer.keep_going)() {
            return Ok(per_head);
        }
        let q = queries(&batch.q, shape, piece.row0, piece.rows);
        let piece_shape = AttentionShape { n_q: piece.rows.1 - piece.rows.0, ..shape };
        let started = (steer.now_ms)();
        let out =
            engine.head_maps(&AttentionProblem::scores(&q, &batch.k, piece_shape, mask, scale), piece.output).await?;
        *kernel_ms += (steer.now_ms)() - started;
        let each = out.len() / heads;
        for (i, chunk) in out.chunks(each.max(1)).enumerate() {
            per_head[i].extend_from_slice(chunk);
        }
        (steer.progress)(piece.done_after);
    }
    Ok(per_head)
}

/// Each head's query rows `a..b` of the chunk starting at `row0`, as one buffer (`q_all` is
/// `[heads, n_q, d]`); the whole buffer when that is all of it.
fn queries(q_all: &[f32], shape: AttentionShape, row0: u32, (a, b): (u32, u32)) -> Cow<'_, [f32]> {
    if a == 0 && b == shape.n_q {
        return q_all.into();
    }
    let (d, n_q) = (shape.d as usize, shape.n_q as usize);
    let len = (b - a) as usize * d;
    let mut q = Vec::with_capacity(shape.h_q as usize * len);
    for i in 0..shape.h_q as usize {
        q.extend_from_slice(&q_all[(i * n_q + (row0 + a) as usize) * d..][..len]);
    }
    q.into()
}

/// Makes finished values into heads' maps, with what every map of one job shares.
pub struct HeadMaker {
    inputs: Arc<LayerInputs>,
    mask: Mask,
    row_tokens: Arc<Vec<String>>,
    col_tokens: Arc<Vec<String>>,
}

impl HeadMaker {
    /// `req`'s tokens are shared with every map, not copied (a long head has 65,536 of them).
    pub fn new(inputs: Arc<LayerInputs>, req: &Request) -> Self {
        let row_tokens = req.tokens.clone();
        let col_tokens = req.kv_tokens.clone().unwrap_or_else(|| row_tokens.clone());
        Self { inputs, mask: req.mask, row_tokens, col_tokens }
    }

    /// Head `h`'s map from its values at `output`.
    pub fn make(&self, h: u32, values: Vec<f32>, output: MapOutput) -> Arc<HeadMap> {
        let (n_q, n_kv) = (self.row_tokens.len() as u32, self.col_tokens.len() as u32);
        // Cross-attention in query chunks pools each chunk on its own: count the rows that came back.
        let (rows, cols, pooled) = match output {
            MapOutput::Exact => (n_q, n_kv, None),
            MapOutput::Pooled(map) => ((values.len() as u32 / map.cols.max(1)).max(1), map.cols, Some(map.pool)),
        };
        Arc::new(HeadMap {
            head: h,
            kv_head: self.inputs.layout.kv_head(h),
            teaching: self.inputs.teaching_head(h),
            rows,
            cols,
            values,
            pooled,
            n_q,
            n_kv,
            row_tokens: self.row_tokens.clone(),
            col_tokens: self.col_tokens.clone(),
            mask: self.mask,
            q_offset: if self.inputs.is_cross() { 0 } else { n_kv - n_q },
            scores: None,
        })
    }
}
