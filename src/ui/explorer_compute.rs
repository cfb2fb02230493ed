//! The explorer's computation: build the layer's inputs, run batches of heads on the engine, and hand
//! each finished head to its slot, yielding to the browser between steps so no frame waits long. A
//! newer request supersedes an older one at the next batch boundary.

use std::sync::Arc;

use leptos::prelude::*;

use super::browser;
use super::heatmap::{HeadMap, Shared};
use crate::attention::layer_inputs::LayerInputs;
use crate::attention::pooled::PooledMap;
use crate::attention::{AttentionShape, Mask};
use crate::engine::{Engine, MapOutput};
use crate::views::heatmaps::jobs::{Progress, batches, pooled_export_notice, query_chunks};
use crate::views::heatmaps::request::Request;

/// Where one head's finished map goes: its heatmap redraws when it is set.
pub type HeadSlot = RwSignal<Option<Shared>>;

/// Signals the computation writes into.
#[derive(Clone, Copy)]
pub struct Sinks {
    pub slots: RwSignal<Vec<HeadSlot>>,
    pub focused: RwSignal<Option<Shared>>,
    pub progress: RwSignal<Progress>,
    pub inputs: RwSignal<Option<Arc<LayerInputs>>>,
    pub latest: StoredValue<u64>,
}

/// Lets the browser run other tasks (input, rendering) before continuing.
pub async fn yield_now() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Runs the tasks already queued (effects of the signals just set) before continuing.
pub async fn micro_yield() {
    let _ = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&wasm_bindgen::JsValue::NULL)).await;
}

/// Longest stretch of drawing before the task lets the browser render and handle input: under the
/// 50 ms a frame may be blocked, and few yields (each can wait for the next frame).
const SLICE_MS: f64 = 35.0;

/// Multiply-adds of `Q·Kᵀ` per batch: about 60 ms of a 9 GFLOP/s software GPU, far less on a real one.
const GPU_BATCH_WORK: u64 = 1 << 28;
/// The CPU reference blocks the page while it runs: keep its batches to one small head.
const CPU_BATCH_WORK: u64 = 1 << 21;
/// Largest Q buffer of one batch (floats).
const MAX_Q_FLOATS: u64 = 16 << 20;

pub async fn run(engine: std::rc::Rc<Engine>, req: Request, job: u64, started_ms: f64, sinks: Sinks) {
    let live = move || sinks.latest.try_get_value() == Some(job);
    let layout = req.layout.clone();
    let (n_q, n_kv, d) = (req.n_q(), req.n_kv(), layout.head_dim);
    let exact = req.exact();
    let on_gpu = engine.gpu_supports_dim(d);
    let note = (engine.is_gpu() && !on_gpu).then(|| {
        format!(
            "This layer's heads are {d} wide, more than the GPU kernels' 256: computed with the CPU reference instead."
        )
    });
    sinks.progress.try_set(Progress { job, total: req.heads.len(), on_gpu, note: note.clone(), ..Default::default() });

    let inputs_started = browser::now_ms();
    let inputs = Arc::new(LayerInputs::new(
        layout.clone(),
        req.tokens.as_ref().clone(),
        req.kv_tokens.as_ref().map(|t| t.as_ref().clone()),
        req.seed,
        req.teach,
    ));
    let mut inputs_ms = browser::now_ms() - inputs_started;
    // No yield before the first batch is on the GPU: what the page does with the inputs (and its
    // restyling for the new request) then runs while the GPU works.
    sinks.inputs.try_set(Some(inputs.clone()));

    let pairs = AttentionShape { h_q: 1, h_kv: 1, n_q, n_kv, d }.attended_pairs(req.mask).max(1);
    let per_head_work = pairs * u64::from(d);
    let max_work = if on_gpu { GPU_BATCH_WORK } else { CPU_BATCH_WORK };
    let group = layout.group_size();
    let all_heads = req.heads.len() as u32 == layout.n_q_heads;
    // Small layers go in one launch with the real GQA shape; otherwise one KV group (or part) at a time.
    let plan: Vec<Vec<u32>> = if on_gpu
        && all_heads
        && per_head_work * u64::from(layout.n_q_heads) <= max_work
        && u64::from(layout.n_q_heads * n_q * d) <= MAX_Q_FLOATS
    {
        vec![req.heads.clone()]
    } else {
        batches(&req.heads, group, per_head_work, u64::from(n_q * d), max_work, MAX_Q_FLOATS)
    };
    let row_tokens = req.tokens.clone();
    let col_tokens = req.kv_tokens.clone().unwrap_or_else(|| req.tokens.clone());
    let q_offset = if inputs.is_cross() { 0 } else { n_kv - n_q };
    let output_for = |cells: u32| {
        if exact {
            MapOutput::Exact
        } else {
            MapOutput::Pooled(PooledMap::whole(n_q, cells.min(n_q), cells.min(n_kv), req.pool))
        }
    };
    let make_map = |h: u32, values: Vec<f32>, output: MapOutput| {
        // Cross-attention in query chunks pools each chunk on its own: count the rows that came back.
        let (rows, cols, pooled) = match output {
            MapOutput::Exact => (n_q, n_kv, None),
            MapOutput::Pooled(map) => ((values.len() as u32 / map.cols.max(1)).max(1), map.cols, Some(map.pool)),
        };
        Arc::new(HeadMap {
            head: h,
            kv_head: layout.kv_head(h),
            teaching: inputs.teaching_head(h),
            rows,
            cols,
            values,
            pooled,
            n_q,
            n_kv,
            row_tokens: row_tokens.clone(),
            col_tokens: col_tokens.clone(),
            mask: req.mask,
            q_offset,
        })
    };

    let mut kernel_ms = 0.0;
    let mut draw_ms = 0.0;
    let done = std::cell::Cell::new(0);
    let slots = sinks.slots.try_get_untracked().unwrap_or_default();
    let slot_of = |h: u32| req.heads.iter().position(|&x| x == h).and_then(|i| slots.get(i).copied());
    let focus_map = std::cell::RefCell::new(None::<Arc<HeadMap>>);
    // Hands a finished head to its heatmap (whose effect draws it at this task's next await).
    let hand_over = |h: u32, values: Vec<f32>, output: MapOutput| {
        let map = make_map(h, values, output);
        if exact && req.focus == Some(h) {
            *focus_map.borrow_mut() = Some(map.clone());
        }
        if let Some(slot) = slot_of(h) {
            slot.try_set(Some(Shared(map)));
        }
        done.set(done.get() + 1);
        sinks.progress.try_update(|p| p.done = done.get());
    };

    // One batch: the heads' maps at `output` (several calls for cross-attention with more queries than keys).
    let compute = async |heads: &[u32], batch: &BatchInputs, output: MapOutput, kernel_ms: &mut f64| {
        sinks.progress.try_update(|p| {
            p.batch = heads.len();
            p.partial = 0.0;
        });
        let progress = |fraction: f64| _ = sinks.progress.try_update(|p| p.partial = fraction);
        let steer = Steering { keep_going: &live, progress: &progress };
        head_values(&engine, &inputs, heads, batch, req.mask, output, kernel_ms, &steer).await
    };

    // The first batch's inputs are waited for; each later batch's are built while the GPU computes
    // the one before.
    let mut k_cache = KCache::new();
    let t_first = browser::now_ms();
    let mut prepared = plan.first().map(|heads| batch_inputs(&inputs, heads, &mut k_cache));
    inputs_ms += browser::now_ms() - t_first;

    // A batch's results, when another batch follows, are handed to their heatmaps while the GPU
    // computes that one: the drawing effects run as this task awaits the GPU.
    let mut unshown: Option<(&Vec<u32>, Vec<Vec<f32>>)> = None;
    let output = output_for(req.thumb_cells);
    for (i, batch) in plan.iter().enumerate() {
        if !live() {
            return;
        }
        let Some(current) = prepared.take() else { return };
        let following = plan.get(i + 1);
        let (result, (next, shown_ms)) = overlapped(compute(batch, &current, output, &mut kernel_ms), || {
            let started = browser::now_ms();
            for (&h, vals) in unshown.take().into_iter().flat_map(|(heads, values)| heads.iter().zip(values)) {
                hand_over(h, vals, output);
            }
            let shown_ms = browser::now_ms() - started;
            (following.map(|heads| batch_inputs(&inputs, heads, &mut k_cache)), shown_ms)
        })
        .await;
        draw_ms += shown_ms;
        prepared = next;
        match result {
            Ok(values) if following.is_some() => unshown = Some((batch, values)),
            Ok(values) => {
                if !live() {
                    return;
                }
                let mut slice_start = browser::now_ms();
                let mut draw_started = slice_start;
                for (&h, vals) in batch.iter().zip(values) {
                    hand_over(h, vals, output);
                    // Each head's pixels are drawn by its own effect, which runs at the next await; let the
                    // browser in (a frame, input) whenever this task has held the thread for a while.
                    micro_yield().await;
                    if browser::now_ms() - slice_start > SLICE_MS {
                        draw_ms += browser::now_ms() - draw_started;
                        yield_now().await;
                        slice_start = browser::now_ms();
                        draw_started = slice_start;
                    }
                    if !live() {
                        return;
                    }
                }
                draw_ms += browser::now_ms() - draw_started;
                sinks.progress.try_update(|p| p.partial = 0.0);
            }
            Err(e) => {
                sinks.progress.try_update(|p| {
                    p.error = Some(e);
                    p.finished = true;
                });
                return;
            }
        }
    }

    // The enlarged head, pooled again at its own on-screen size.
    if let Some(f) = req.focus.filter(|&f| f < layout.n_q_heads)
        && focus_map.borrow().is_none()
    {
        let output = output_for(req.large_cells);
        let t_inputs = browser::now_ms();
        let batch = batch_inputs(&inputs, &[f], &mut k_cache);
        inputs_ms += browser::now_ms() - t_inputs;
        match compute(&[f], &batch, output, &mut kernel_ms).await {
            Ok(mut values) => *focus_map.borrow_mut() = Some(make_map(f, values.remove(0), output)),
            Err(e) => sinks.progress.try_update(|p| p.error = Some(e)).unwrap_or(()),
        }
    }
    if !live() {
        return;
    }
    sinks.focused.try_set(focus_map.into_inner().map(Shared));
    yield_now().await;
    if !live() {
        return;
    }
    let total_ms = browser::now_ms() - started_ms;
    sinks.progress.try_update(|p| {
        p.done = done.get();
        p.finished = true;
        p.total_ms = total_ms;
        p.kernel_ms = kernel_ms;
        p.inputs_ms = inputs_ms;
        p.draw_ms = draw_ms;
    });
}

/// One batch's inputs: Q of its query heads and K of the KV heads they read, `[heads, n, d]` each.
pub struct BatchInputs {
    q: Vec<f32>,
    k: Vec<f32>,
    h_kv: u32,
}

/// K of each KV head, computed once per job: consecutive batches of one KV group share it.
pub type KCache = std::collections::HashMap<u32, Vec<f32>>;

/// Builds a batch's Q and K on the CPU (the projections, positions and designed heads).
pub fn batch_inputs(inputs: &LayerInputs, heads: &[u32], k_cache: &mut KCache) -> BatchInputs {
    let mut kv_heads: Vec<u32> = heads.iter().map(|&h| inputs.layout.kv_head(h)).collect();
    kv_heads.dedup();
    let mut k = Vec::new();
    for &g in &kv_heads {
        k.extend_from_slice(k_cache.entry(g).or_insert_with(|| inputs.k_head(g)));
    }
    BatchInputs { q: inputs.q_heads(heads), k, h_kv: kv_heads.len() as u32 }
}

/// How a running batch hears from its caller: whether to go on, and where to report the fraction done.
pub struct Steering<'a> {
    pub keep_going: &'a dyn Fn() -> bool,
    pub progress: &'a dyn Fn(f64),
}

/// Starts `gpu_work` (its synchronous part, uploads and submission, runs at the first poll), runs
/// `cpu_work` while the GPU computes, then finishes `gpu_work`.
pub async fn overlapped<F: Future, T>(gpu_work: F, cpu_work: impl FnOnce() -> T) -> (F::Output, T) {
    let mut gpu_work = std::pin::pin!(gpu_work);
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(gpu_work.as_mut().poll(cx))).await;
    let cpu = cpu_work();
    let out = match first {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => gpu_work.await,
    };
    (out, cpu)
}

/// The maps of `heads` (exact or pooled, per head) from their [`BatchInputs`], computed on the
/// engine. Cross-attention with more queries than keys runs in query chunks, each pooled on its
/// own. On the GPU a pooled map with more work than one submission should hold is computed in
/// slices of rows; `steer` hears how far it got after each and may stop it early (a newer request),
/// leaving the maps incomplete. Time spent awaiting the engine is added to `kernel_ms`.
#[expect(clippy::too_many_arguments, reason = "a batch, its output and the job's bookkeeping")]
pub async fn head_values(
    engine: &Engine,
    inputs: &LayerInputs,
    heads: &[u32],
    batch: &BatchInputs,
    mask: Mask,
    output: MapOutput,
    kernel_ms: &mut f64,
    steer: &Steering<'_>,
) -> Result<Vec<Vec<f32>>, String> {
    let (n_q, n_kv, d) = (inputs.q_tokens().len() as u32, inputs.kv_tokens().len() as u32, inputs.layout.head_dim);
    let (h_q, h_kv) = (heads.len() as u32, batch.h_kv);
    let (q_all, k) = (&batch.q, &batch.k);
    let chunks = if inputs.is_cross() { query_chunks(n_q, n_kv) } else { vec![(0, n_q)] };
    let scale = 1.0 / (d as f32).sqrt();
    // Each head's queries a..b (of the chunk starting at row0), as one buffer.
    let queries = |row0: u32, (a, b): (u32, u32)| -> std::borrow::Cow<'_, [f32]> {
        if a == 0 && b == n_q {
            return q_all.as_slice().into();
        }
        let (d, len) = (d as usize, (b - a) as usize * d as usize);
        let mut q = Vec::with_capacity(h_q as usize * len);
        for i in 0..h_q as usize {
            q.extend_from_slice(&q_all[(i * n_q as usize + (row0 + a) as usize) * d..][..len]);
        }
        q.into()
    };
    let mut per_head: Vec<Vec<f32>> = vec![Vec::new(); heads.len()];
    let n_chunks = chunks.len() as f64;
    for (c, (row0, rows)) in chunks.into_iter().enumerate() {
        let pieces: Vec<MapOutput> = match output {
            MapOutput::Exact => vec![MapOutput::Exact],
            MapOutput::Pooled(map) => {
                let chunk_map = PooledMap::whole(rows, map.rows.min(rows), map.cols, map.pool);
                let work = AttentionShape { h_q, h_kv, n_q: rows, n_kv, d }.attended_pairs(mask) * u64::from(d);
                let parts = if engine.gpu_supports_dim(d) { work.div_ceil(GPU_BATCH_WORK) } else { 1 };
                chunk_map.slices(u32::try_from(parts).unwrap_or(u32::MAX)).into_iter().map(MapOutput::Pooled).collect()
            }
        };
        let n_pieces = pieces.len() as f64;
        for (p, piece) in pieces.into_iter().enumerate() {
            if !(steer.keep_going)() {
                return Ok(per_head);
            }
            let range = match piece {
                MapOutput::Exact => (0, rows),
                MapOutput::Pooled(slice) => slice.queries(),
            };
            let q = queries(row0, range);
            let shape = AttentionShape { h_q, h_kv, n_q: range.1 - range.0, n_kv, d };
            let t0 = browser::now_ms();
            let out = engine.head_maps(&q, k, shape, mask, scale, piece).await?;
            *kernel_ms += browser::now_ms() - t0;
            let each = out.len() / heads.len();
            for (i, chunk) in out.chunks(each.max(1)).enumerate() {
                per_head[i].extend_from_slice(chunk);
            }
            (steer.progress)((c as f64 + (p + 1) as f64 / n_pieces) / n_chunks);
        }
    }
    Ok(per_head)
}

/// What to export for a head: the map itself when it holds every probability; a pooled one
/// recomputed exactly (on the GPU, this head only) when it is small enough; otherwise the pooled
/// blocks, with a notice saying so.
pub async fn map_for_export(
    engine: &Engine,
    inputs: &LayerInputs,
    map: Arc<HeadMap>,
) -> Result<(Arc<HeadMap>, Option<String>), String> {
    if map.pooled.is_none() {
        return Ok((map, None));
    }
    let gpu = engine.gpu_supports_dim(inputs.layout.head_dim);
    if let Some(why) = pooled_export_notice(map.head, (map.n_q, map.n_kv), (map.rows, map.cols), gpu) {
        return Ok((map, Some(why)));
    }
    let same_input = inputs.q_tokens().len() as u32 == map.n_q && inputs.kv_tokens().len() as u32 == map.n_kv;
    if !same_input {
        return Err("The view changed while exporting; export again once it has finished.".into());
    }
    let batch = batch_inputs(inputs, &[map.head], &mut KCache::new());
    let steer = Steering { keep_going: &|| true, progress: &|_| {} };
    let mut values =
        head_values(engine, inputs, &[map.head], &batch, map.mask, MapOutput::Exact, &mut 0.0, &steer).await?;
    let exact = HeadMap { rows: map.n_q, cols: map.n_kv, values: values.remove(0), pooled: None, ..(*map).clone() };
    Ok((Arc::new(exact), None))
}
