//! The explorer's binding of live attention ([`crate::live_attention`]) to its signals: a job's heads
//! go to their slots, its progress and inputs to the status line and panels, its enlarged head to
//! the focus panel, a loaded model's candidates to the next-token panel. The job itself (its
//! batches, pieces, yields and cancellation) is the service's.

use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;

use super::heatmap::Shared;
use super::next_token_panel::PredictionSignal;
use super::trained_compute::Prediction;
use crate::attention::layer_inputs::LayerInputs;
use crate::engine::Engine;
use crate::live_attention::{self, HeadMap, JobClock, LiveSink, Progress, Request, Weights};
use crate::views::heatmaps::trained::next_tokens;

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

/// One job's sink: the signals, the slots it was started with, and (for a loaded model) where its
/// candidates go.
struct JobSinks {
    sinks: Sinks,
    job: u64,
    slots: Vec<HeadSlot>,
    next_token: Option<(Rc<live_attention::LoadedLm>, PredictionSignal)>,
}

impl LiveSink for JobSinks {
    fn wanted(&self) -> bool {
        self.sinks.jobs.try_with_value(|c| c.is_current(self.job)) == Some(true)
    }

    fn progress(&self, change: &dyn Fn(&mut Progress)) {
        self.sinks.progress.try_update(|p| change(p));
    }

    fn inputs(&self, inputs: Option<Arc<LayerInputs>>) {
        self.sinks.inputs.try_set(inputs);
    }

    fn head_ready(&self, slot: usize, map: Arc<HeadMap>) {
        if let Some(slot) = self.slots.get(slot) {
            slot.try_set(Some(Shared(map)));
        }
    }

    fn focused(&self, map: Option<Arc<HeadMap>>) {
        self.sinks.focused.try_set(map.map(Shared));
    }

    fn next_token(&self, ids: &[u32], logits: Result<&[f32], &str>) {
        let Some((lm, prediction)) = &self.next_token else { return };
        let shown = logits
            .map(|logits| Prediction { ids: ids.to_vec(), candidates: next_tokens(&lm.tokenizer, logits) })
            .map_err(str::to_owned);
        prediction.try_set(Some(shown));
    }
}

/// Runs `req` as job `job` with synthetic weights, or with `loaded`'s (whose candidates go to its
/// prediction signal), binding its results to `sinks`.
pub async fn run(
    engine: Rc<Engine>,
    req: Request,
    job: u64,
    started_ms: f64,
    sinks: Sinks,
    loaded: Option<(Rc<live_attention::LoadedLm>, PredictionSignal)>,
) {
    let slots = sinks.slots.try_get_untracked().unwrap_or_default();
    let weights = loaded.as_ref().map_or(Weights::Synthetic, |(lm, _)| Weights::Loaded(lm.clone()));
    let sink = JobSinks { sinks, job, slots, next_token: loaded };
    live_attention::run(&engine, &weights, &req, job, started_ms, &sink).await;
}
