//! The views' models, native and platform-free: for each view its link parameters, the figures it
//! derives and the work it plans. The Leptos components in `ui/` only bind these to signals and DOM.
//!
//! - [`heatmaps`]: the heatmap explorer: parameters, requests, GPU batches, head pictures and exports.

pub mod heatmaps;
