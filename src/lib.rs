//! Attention Lab: attention computed on the visitor's own GPU, explained.
//!
//! Data flows one way: URL -> [`state`] -> ([`model`] arithmetic, [`gpu`] kernels) -> `ui` views.
//! - [`model`]: pure arithmetic of attention layouts (KV cache, parameters, FLOPs), presets, config import.
//! - [`attention`]: masks, inputs (tokens, embeddings, projections) and the f64 CPU reference of every kernel.
//! - [`gpu`]: device setup and one module per WGSL shader in `shaders/`, same name.
//! - `ui` (wasm only): Leptos components; they ask `gpu` and `model` for results and never build pipelines.

pub mod attention;
pub mod colormap;
pub mod engine;
pub mod gpu;
pub mod model;
pub mod state;
pub mod views;

#[cfg(target_arch = "wasm32")]
pub mod ui;
