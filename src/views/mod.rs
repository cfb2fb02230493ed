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
//!   [`mla`]: one MLA layer computed expanded and absorbed on the engine, and what each form costs;
//!   [`distance`]: how far back each head of the explorer's layer looks (its attention mass by distance).
//! - [`gpu_recovery`]: new devices after a lost GPU, then the CPU reference.
//! - [`url_writes`]: how often the link is rewritten while the reader types.
//! - `every_view!` below: every view listed once (each a [`view_class::ViewClass`]: its id, title
//!   and link keys) and the link's write order; [`registry`] makes from them [`registry::View`],
//!   [`registry::Settings`] (what they all read from the link) and [`registry::WRITE_ORDER`].
//!
//! A new view is its folder, its `pub mod` line, one line in `every_view!` and its keys at the end of
//! the write order (CONTRIBUTING.md, "Adding a view").

/// Every view once, in the order of their tabs (`Variant => field: Class`, the field holding the
/// view's own link parameters), and the order in which a link's keys are written: `registry.rs`
/// builds from them the [`registry::View`] switch, [`registry::Settings`] and
/// [`registry::WRITE_ORDER`] (`list_views!`).
/// A new view's keys go at the end of the order, never between: every link written so far must read
/// back byte for byte. `view`, `backend` and `edited` belong to the app state, the others to a view.
macro_rules! every_view {
    ($make:ident) => {
        $make! {
            views {
                Heatmaps => explorer: crate::views::heatmaps::params::Heatmaps,
                Kv => kv: crate::views::kv::Kv,
                Compare => compare: crate::views::compare::Compare,
                Lesson => lesson: crate::views::lesson::params::Lessons,
                Bench => bench: crate::views::bench::Bench,
                Backward => backward: crate::views::backward::BackwardView,
                Memory => memory: crate::views::memory::Memory,
                Mla => mla: crate::views::mla::MlaView,
                Distance => distance: crate::views::distance::DistanceView,
            }
            write_order [
                "view", "text", "mask", "window", "chunk", "seed", "backend", "scale", "model", "cfg", "ctx", "dtype", "layer",
                "axis", "budget", "weights", "variants", "n", "d", "tok", "src", "heads", "pool", "focus", "teach", "tiles",
                "steps", "mix", "lesson", "step", "edited", "rope", "row", "jscale", "tech", "group", "recent", "scheme", "keep",
                "policy", "tokens", "qheads", "mhead", "rot", "gencache", "kernel", "target", "eta", "trow", "tstep",
                "near",
            ]
        }
    };
}

pub mod attention_input;
pub mod backward;
pub mod bench;
pub mod chart;
pub mod compare;
pub mod decode;
pub mod describe;
pub mod distance;
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
