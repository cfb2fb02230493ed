//! Live attention as a service any view can call: "these tokens, this model (a preset's layout with
//! synthetic weights, or a loaded model's real ones), this layer and these heads" in, each head's
//! probabilities out (every cell, or pooled to a size), with the layer's Q/K/V and the heads' outputs
//! ([`head_outputs`]) on request, on the GPU or the CPU reference. Progress, cancellation (a newer request supersedes: the job stops at its
//! next piece), slicing into pieces and the size limits are handled here once; a view binds the
//! results through a [`LiveSink`].
//!
//! Platform-free: the browser's part is the clock and the yields of [`crate::event_loop`], so the
//! native tests run every job on the CPU tier. It sits above `engine`, `attention` and `lm`, below
//! `views` (which plan what to ask for) and `ui` (which binds a sink to signals). A head's export
//! ([`map_for_export`]) is recomputed here too, and so are a loaded model's gradients on a text and a
//! step of gradient descent on one layer ([`text_gradients`]).

pub mod batch;
pub mod export;
pub mod generate;
pub mod gradients;
pub mod head_map;
pub mod kv_groups;
pub mod loaded;
pub mod loaded_job;
mod model_pass;
pub mod outputs;
pub mod plan;
pub mod request;
mod sink;
mod synthetic;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
pub mod text_gradients;

use std::rc::Rc;

pub use export::map_for_export;
pub use gradients::{GradCheck, TensorCheck, gradient_check};
pub use head_map::HeadMap;
pub use loaded::{GpuDecoder, LoadedLm, TrainedPass};
pub use model_pass::ComparedPass;
pub use outputs::head_outputs;
pub use plan::{JobClock, Progress};
pub use request::Request;
pub use sink::LiveSink;
pub use text_gradients::{GradAsk, TextGradients, text_gradients};

use crate::engine::Engine;

/// Whose weights a job runs: synthetic ones seeded from the request (a preset's layout), or a
/// loaded model's (the trained model, a dropped checkpoint), which read the request's token ids.
#[derive(Clone)]
pub enum Weights {
    Synthetic,
    Loaded(Rc<LoadedLm>),
}

/// Runs `req` on `engine` with `weights` as job `job` (the number its progress carries), started at
/// `started_ms` on [`crate::event_loop::now_ms`]'s clock, handing results to `sink` until it
/// finishes or `sink` stops wanting it.
pub async fn run(
    engine: &Rc<Engine>,
    weights: &Weights,
    req: &Request,
    job: u64,
    started_ms: f64,
    sink: &dyn LiveSink,
) {
    match weights {
        Weights::Synthetic => synthetic::run(engine, req, job, started_ms, sink).await,
        Weights::Loaded(lm) => loaded_job::run(engine, lm, req, job, started_ms, sink).await,
    }
}
