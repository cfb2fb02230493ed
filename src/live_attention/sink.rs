//! What a live-attention job hands its results to: the one thing a view implements to use it.

use std::sync::Arc;

use super::head_map::HeadMap;
use super::plan::Progress;
use crate::attention::layer_inputs::LayerInputs;

/// Where a job's results go, and how it hears that it is no longer wanted. Every call comes from the
/// job's own task, between its pieces.
pub trait LiveSink {
    /// Whether the job is still the latest: asked before every piece, and a job that is not stops there.
    fn wanted(&self) -> bool;
    /// Applies `change` to the job's [`Progress`] (the first change sets all of it).
    fn progress(&self, change: &dyn Fn(&mut Progress));
    /// The layer's inputs (every head's Q, K and V, from the synthetic weights) before the first
    /// batch; `None` for a loaded model, whose pass keeps them to itself.
    fn inputs(&self, inputs: Option<Arc<LayerInputs>>);
    /// The map of `req.heads[slot]`; the job yields to the event loop after each, so it can be drawn.
    fn head_ready(&self, slot: usize, map: Arc<HeadMap>);
    /// The focused head's map at its own size (`req.focus_cells`), or `None`: it is in the grid, or
    /// there is none.
    fn focused(&self, map: Option<Arc<HeadMap>>);
    /// A loaded model's logits after the text's last token (`ids`), or why its pass failed.
    fn next_token(&self, ids: &[u32], logits: Result<&[f32], &str>);
}
