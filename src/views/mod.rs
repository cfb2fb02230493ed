//! The views' models, native and platform-free: for each view its link parameters, the figures it
//! derives and the work it plans. The Leptos components in `ui/` only bind these to signals and DOM.
//!
//! - [`link`]: the link's vocabulary (query strings, notices, the [`link::LinkParams`] contract).
//! - [`model_choice`] and [`attention_input`]: parameter sets several views share.
//! - [`heatmaps`]: the heatmap explorer: parameters, requests, GPU batches, head pictures and exports.
//! - [`layer_kinds`]: each kind of layer in words (the layer strip), and what a layer or a model
//!   without softmax attention shows instead of heatmaps and of a paged cache.
//! - [`decode`]: the decode animation: its lanes, script, reference check, and what the panel shows.
//! - [`kv`], [`compare`]: those views' parameters, figures, tables and chart series; [`model_figures`]:
//!   the model picker's contract figures, config source and import, which both show.
//! - [`chart`]: the data and geometry of the hand-drawn SVG charts.
//! - [`formulas`] (the KV arithmetic written out) and [`describe`] (a model's config facts, a
//!   variant's label, a layer's positions in words): the sentences the page shows about a model.
//! - [`bench`]: the benchmark's parameters; [`backward`]: the softmax Jacobian of one query row;
//!   [`memory`]: quantised KV caches measured on the trained model (bytes per token against quality);
//!   [`mla`]: one MLA layer computed expanded and absorbed on the engine, and what each form costs.
//! - [`gpu_recovery`]: new devices after a lost GPU, then the CPU reference.
//! - [`url_writes`]: how often the link is rewritten while the reader types.
//! - [`registry`]: every view listed once ([`view_class::ViewClass`]: its id, title and link keys),
//!   and [`registry::Settings`], what they all read from the link; the link's write order.

pub mod attention_input;
pub mod backward;
pub mod bench;
pub mod chart;
pub mod compare;
pub mod decode;
pub mod describe;
pub mod formulas;
pub mod gpu_recovery;
pub mod heatmaps;
pub mod kv;
pub mod layer_kinds;
pub mod lesson;
pub mod link;
pub mod memory;
pub mod mla;
pub mod model_choice;
pub mod model_figures;
pub mod registry;
pub mod url_writes;
pub mod view_class;
