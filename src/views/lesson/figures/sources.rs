//! What figures of several topics are computed from: the explorer's request and the model's window.

use crate::attention::layer_inputs::LayerLayout;
use crate::model::{LayerKind, Model};
use crate::views::heatmaps::request::{Request, Screen, build_request};
use crate::views::registry::Settings;

/// What the heatmaps view computes for the chosen layer (the screen only sets the pooled resolution).
pub(super) fn explorer(state: &Settings, model: &Model) -> Option<Request> {
    let layout = LayerLayout::of(model, state.model.layer);
    let screen = Screen { width_css_px: 1024.0, device_pixel_ratio: 1.0 };
    build_request(&state.input, &state.explorer, layout, screen).ok()
}

/// The window of the model's sliding layers, if it has any.
pub(super) fn model_window(model: &Model) -> Option<u64> {
    model.schedule.layers().iter().find_map(|k| match *k {
        LayerKind::Sliding { window_tokens } => Some(window_tokens),
        _ => None,
    })
}
