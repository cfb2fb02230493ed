//! A job over synthetic weights, as the page runs it: the plan ([`JobPlan`]) one piece at a time,
//! each finished head handed to the sink, yielding to the browser between steps so no frame waits
//! long, and each batch's heads handed over while the next batch computes.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use super::batch::{BatchInputs, HeadMaker, KCache, Steering, batch_inputs, head_values, overlapped};
use super::head_map::HeadMap;
use super::plan::{JobPlan, Progress};
use super::request::Request;
use super::sink::LiveSink;
use crate::attention::layer_inputs::LayerInputs;
use crate::engine::{Engine, MapOutput};
use crate::event_loop::{breathe, micro_yield, now_ms, yield_now};

/// Runs `req` as job `job`: its inputs, then its batches (each drawn while the next computes), then
/// the enlarged head, then the finished progress. Stops at the next piece once a newer job starts.
pub(super) async fn run(engine: &Engine, req: &Request, job: u64, started_ms: f64, sink: &dyn LiveSink) {
    let plan = JobPlan::new(req, engine.is_gpu(), engine.gpu_supports_dim(req.layout.head_dim));
    let progress =
        Progress { job, total: req.heads.len(), on_gpu: plan.on_gpu, note: plan.note.clone(), ..Default::default() };
    sink.progress(&|p| *p = progress.clone());

    let inputs_started = now_ms();
    let inputs = Arc::new(req.inputs());
    let inputs_ms = now_ms() - inputs_started;
    // No yield before the first batch is on the GPU: what the page does with the inputs (and its
    // restyling for the new request) then runs while the GPU works.
    sink.inputs(Some(inputs.clone()));
    let maker = HeadMaker::new(inputs.clone(), req);
    let run = JobRun { engine, req, sink, inputs, maker, focus_map: RefCell::new(None), done: Cell::new(0) };
    let mut times = Times { inputs_ms, kernel_ms: 0.0, draw_ms: 0.0 };
    let mut k_cache = KCache::new();
    if !run.batches(&plan, &mut k_cache, &mut times).await {
        return;
    }
    if !run.focused_head(&plan, &mut k_cache, &mut times).await {
        return;
    }
    run.finish(started_ms, &times).await;
}

/// Where a job's time went, as the status line reports it (see [`Progress`]).
struct Times {
    inputs_ms: f64,
    kernel_ms: f64,
    draw_ms: f64,
}

/// One job under way: what it computes, where its heads go, and how many are done.
struct JobRun<'a> {
    engine: &'a Engine,
    req: &'a Request,
    sink: &'a dyn LiveSink,
    inputs: Arc<LayerInputs>,
    maker: HeadMaker,
    /// The enlarged head's map: from the grid when exact, else computed at its own size.
    focus_map: RefCell<Option<Arc<HeadMap>>>,
    done: Cell<usize>,
}

impl JobRun<'_> {
    /// Whether this job is still the latest (a newer request supersedes it).
    fn live(&self) -> bool {
        self.sink.wanted()
    }

    /// Hands a finished head to its heatmap (whose effect draws it at this task's next await).
    fn hand_over(&self, h: u32, values: Vec<f32>, output: MapOutput) {
        let map = self.maker.make(h, values, output);
        if self.req.exact() && self.req.focus == Some(h) {
            *self.focus_map.borrow_mut() = Some(map.clone());
        }
        if let Some(slot) = self.req.heads.iter().position(|&x| x == h) {
            self.sink.head_ready(slot, map);
        }
        self.done.set(self.done.get() + 1);
        self.sink.progress(&|p| p.done = self.done.get());
    }

    /// Hands heads over one at a time: each one's effect draws it at the micro-yield, and the browser
    /// gets the thread (a frame, input) whenever this task has held it for a while, so a frame never
    /// has many canvases and figures to lay out and paint at once. False if a newer request took over.
    async fn show(&self, heads: &[u32], values: Vec<Vec<f32>>, output: MapOutput, draw_ms: &mut f64) -> bool {
        for (&h, vals) in heads.iter().zip(values) {
            let started = now_ms();
            self.hand_over(h, vals, output);
            micro_yield().await;
            *draw_ms += now_ms() - started;
            breathe().await;
            if !self.live() {
                return false;
            }
        }
        true
    }

    /// One batch: the heads' maps at `output`, reporting how far it got.
    async fn compute(
        &self,
        batch: &BatchInputs,
        output: MapOutput,
        kernel_ms: &mut f64,
    ) -> Result<Vec<Vec<f32>>, String> {
        self.sink.progress(&|p| {
            p.batch = batch.heads.len();
            p.partial = 0.0;
        });
        let live = || self.live();
        let progress = |fraction: f64| self.sink.progress(&|p| p.partial = fraction);
        let steer = Steering { keep_going: &live, progress: &progress, now_ms: &now_ms };
        head_values(self.engine, &self.inputs, batch, self.req.mask, output, kernel_ms, &steer).await
    }

    /// Every batch of the plan, in order. False if the job stopped (superseded, or failed).
    async fn batches(&self, plan: &JobPlan, k_cache: &mut KCache, times: &mut Times) -> bool {
        let live = || self.live();
        // The first batch's inputs are waited for; each later batch's are built while the GPU computes
        // the one before.
        let t_first = now_ms();
        let mut prepared = match plan.batches.first() {
            Some(heads) => batch_inputs(&self.inputs, heads, k_cache, &live).await,
            None => None,
        };
        times.inputs_ms += now_ms() - t_first;

        // A batch's results, when another batch follows, are handed to their heatmaps while the GPU
        // computes that one: the drawing effects run as this task awaits the GPU.
        let mut unshown: Option<(&Vec<u32>, Vec<Vec<f32>>)> = None;
        let output = plan.map_output;
        for (i, batch) in plan.batches.iter().enumerate() {
            if !self.live() {
                return false;
            }
            let Some(current) = prepared.take() else { return false };
            let following = plan.batches.get(i + 1);
            let (result, (next, shown_ms)) = overlapped(self.compute(&current, output, &mut times.kernel_ms), async {
                let mut shown_ms = 0.0;
                if let Some((heads, values)) = unshown.take() {
                    self.show(heads, values, output, &mut shown_ms).await;
                }
                let next = match following {
                    Some(heads) => batch_inputs(&self.inputs, heads, k_cache, &live).await,
                    None => None,
                };
                (next, shown_ms)
            })
            .await;
            times.draw_ms += shown_ms;
            prepared = next;
            match result {
                Ok(values) if following.is_some() => unshown = Some((batch, values)),
                Ok(values) => {
                    if !self.live() || !self.show(batch, values, output, &mut times.draw_ms).await {
                        return false;
                    }
                    self.sink.progress(&|p| p.partial = 0.0);
                }
                Err(e) => {
                    self.sink.progress(&|p| {
                        p.error = Some(e.clone());
                        p.finished = true;
                    });
                    return false;
                }
            }
        }
        true
    }

    /// The enlarged head, pooled again at its own on-screen size (unless the grid had it exact). False
    /// if the job stopped while its inputs were built.
    async fn focused_head(&self, plan: &JobPlan, k_cache: &mut KCache, times: &mut Times) -> bool {
        let live = || self.live();
        if let Some(f) = self.req.focus.filter(|&f| f < self.req.layout.n_q_heads)
            && self.focus_map.borrow().is_none()
        {
            let t_inputs = now_ms();
            let Some(batch) = batch_inputs(&self.inputs, &[f], k_cache, &live).await else { return false };
            times.inputs_ms += now_ms() - t_inputs;
            match self.compute(&batch, plan.focus_output, &mut times.kernel_ms).await {
                Ok(mut values) => {
                    *self.focus_map.borrow_mut() = Some(self.maker.make(f, values.remove(0), plan.focus_output));
                }
                Err(e) => self.sink.progress(&|p| p.error = Some(e.clone())),
            }
        }
        true
    }

    /// The enlarged head's map, then (after a yield, if still the latest) the finished progress.
    async fn finish(self, started_ms: f64, times: &Times) {
        if !self.live() {
            return;
        }
        self.sink.focused(self.focus_map.take());
        yield_now().await;
        if !self.live() {
            return;
        }
        let total_ms = now_ms() - started_ms;
        let done = self.done.get();
        self.sink.progress(&|p| {
            p.done = done;
            p.finished = true;
            p.total_ms = total_ms;
            p.kernel_ms = times.kernel_ms;
            p.inputs_ms = times.inputs_ms;
            p.draw_ms = times.draw_ms;
        });
    }
}
