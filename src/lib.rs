//! Attention Lab: attention computed on the visitor's own GPU, explained.
//!
//! Data flows one way: URL -> [`state`] -> [`views`] ([`model`] arithmetic, [`gpu`] jobs) -> `ui`.
//! - [`state`]: the views' parameter sets composed, and the link they are read from and written to.
//! - [`views`]: one native module per view: its parameters, derived figures and planned GPU jobs.
//! - [`model`]: pure arithmetic of attention layouts (KV cache, parameters, FLOPs).
//! - [`catalog`]: the models the app knows: presets by id, and Hugging Face config import with its report.
//! - [`attention`]: masks, inputs (tokens, embeddings, projections) and the f64 CPU reference of every kernel.
//! - [`gpu`]: device setup and one module per WGSL shader in `shaders/`, same name.
//! - [`lm`]: a real language model's pieces: tokenizer (byte-level BPE), checkpoint, forward pass.
//! - `ui` (wasm only): Leptos components binding the view models to signals and DOM; they run the
//!   views' jobs on the [`engine`] and never build pipelines or compute figures.

pub mod attention;
pub mod catalog;
pub mod colormap;
pub mod cpu;
pub mod engine;
pub mod event_loop;
pub mod gpu;
pub mod live_attention;
pub mod lm;
pub mod model;
pub mod paged_decode;
pub mod state;
pub mod views;

#[cfg(target_arch = "wasm32")]
pub mod ui;
