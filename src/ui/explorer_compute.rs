//! The explorer's computation as the page runs it: the native plan ([`JobPlan`]) one piece at a time,
//! each finished head handed to its slot, yielding to the browser between steps so no frame waits
//! long. A newer request supersedes an older one at the next piece ([`JobClock`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;

use super::browser;
use super::heatmap::Shared;
use crate::attention::layer_inputs::LayerInputs;
use crate::engine::{Engine, MapOutput};
use crate::event_loop::{breathe, yield_now};
use crate::views::heatmaps::compute::{
    BatchInputs, HeadMaker, KCache, Steering, batch_inputs, head_values, overlapped,
};
use crate::views::heatmaps::head_map::HeadMap;
use crate::views::heatmaps::jobs::{JobClock, JobPlan, Progress};
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
    pub jobs: StoredValue<JobClock>,
}

/// Runs the tasks already queued (effects of the signals just set) before continuing.
pub async fn micro_yield() {
    let _ = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&wasm_bindgen::JsValue::NULL)).await;
}

#[expect(clippy::too_many_lines, reason = "to be split into smaller components (issue 31)")]
pub async fn run(engine: Rc<Engine>, req: Request, job: u64, started_ms: f64, sinks: Sinks) {
    let live = move || sinks.jobs.try_with_value(|c| c.is_current(job)) == Some(true);
    let plan = JobPlan::new(&req, engine.is_gpu(), engine.gpu_supports_dim(req.layout.head_dim));
    let progress =
        Progress { job, total: req.heads.len(), on_gpu: plan.on_gpu, note: plan.note.clone(), ..Default::default() };
    sinks.progress.try_set(progress);

    let inputs_started = browser::now_ms();
    let inputs = Arc::new(req.inputs());
    let mut inputs_ms = browser::now_ms() - inputs_started;
    // No yield before the first batch is on the GPU: what the page does with the inputs (and its
    // restyling for the new request) then runs while the GPU works.
    sinks.inputs.try_set(Some(inputs.clone()));
    let maker = HeadMaker::new(inputs.clone(), &req);

    let mut kernel_ms = 0.0;
    let mut draw_ms = 0.0;
    let done = Cell::new(0);
    let slots = sinks.slots.try_get_untracked().unwrap_or_default();
    let slot_of = |h: u32| req.heads.iter().position(|&x| x == h).and_then(|i| slots.get(i).copied());
    let focus_map = RefCell::new(None::<Arc<HeadMap>>);
    // Hands a finished head to its heatmap (whose effect draws it at this task's next await).
    let hand_over = |h: u32, values: Vec<f32>, output: MapOutput| {
        let map = maker.make(h, values, output);
        if req.exact() && req.focus == Some(h) {
            *focus_map.borrow_mut() = Some(map.clone());
        }
        if let Some(slot) = slot_of(h) {
            slot.try_set(Some(Shared(map)));
        }
        done.set(done.get() + 1);
        sinks.progress.try_update(|p| p.done = done.get());
    };
    // Hands heads over one at a time: each one's effect draws it at the micro-yield, and the browser
    // gets the thread (a frame, input) whenever this task has held it for a while, so a frame never
    // has many canvases and figures to lay out and paint at once. False if a newer request took over.
    let show = async |heads: &[u32], values: Vec<Vec<f32>>, output: MapOutput, draw_ms: &mut f64| {
        for (&h, vals) in heads.iter().zip(values) {
            let started = browser::now_ms();
            hand_over(h, vals, output);
            micro_yield().await;
            *draw_ms += browser::now_ms() - started;
            breathe().await;
            if !live() {
                return false;
            }
        }
        true
    };

    // One batch: the heads' maps at `output`, reporting how far it got.
    let compute = async |batch: &BatchInputs, output: MapOutput, kernel_ms: &mut f64| {
        sinks.progress.try_update(|p| {
            p.batch = batch.heads.len();
            p.partial = 0.0;
        });
        let progress = |fraction: f64| _ = sinks.progress.try_update(|p| p.partial = fraction);
        let steer = Steering { keep_going: &live, progress: &progress, now_ms: &browser::now_ms };
        head_values(&engine, &inputs, batch, req.mask, output, kernel_ms, &steer).await
    };

    // The first batch's inputs are waited for; each later batch's are built while the GPU computes
    // the one before.
    let mut k_cache = KCache::new();
    let t_first = browser::now_ms();
    let mut prepared = match plan.batches.first() {
        Some(heads) => batch_inputs(&inputs, heads, &mut k_cache, &live).await,
        None => None,
    };
    inputs_ms += browser::now_ms() - t_first;

    // A batch's results, when another batch follows, are handed to their heatmaps while the GPU
    // computes that one: the drawing effects run as this task awaits the GPU.
    let mut unshown: Option<(&Vec<u32>, Vec<Vec<f32>>)> = None;
    let output = plan.thumb_output;
    for (i, batch) in plan.batches.iter().enumerate() {
        if !live() {
            return;
        }
        let Some(current) = prepared.take() else { return };
        let following = plan.batches.get(i + 1);
        let (result, (next, shown_ms)) = overlapped(compute(&current, output, &mut kernel_ms), async {
            let mut shown_ms = 0.0;
            if let Some((heads, values)) = unshown.take() {
                show(heads, values, output, &mut shown_ms).await;
            }
            let next = match following {
                Some(heads) => batch_inputs(&inputs, heads, &mut k_cache, &live).await,
                None => None,
            };
            (next, shown_ms)
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
                if !show(batch, values, output, &mut draw_ms).await {
                    return;
                }
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
    if let Some(f) = req.focus.filter(|&f| f < req.layout.n_q_heads)
        && focus_map.borrow().is_none()
    {
        let t_inputs = browser::now_ms();
        let Some(batch) = batch_inputs(&inputs, &[f], &mut k_cache, &live).await else { return };
        inputs_ms += browser::now_ms() - t_inputs;
        match compute(&batch, plan.large_output, &mut kernel_ms).await {
            Ok(mut values) => *focus_map.borrow_mut() = Some(maker.make(f, values.remove(0), plan.large_output)),
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
