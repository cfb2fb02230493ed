//! The Leptos user interface (browser only). Components bind [`crate::state::AppState`] and the view
//! models of [`crate::views`] to signals and DOM, and run the views' jobs on the
//! [`crate::engine::Engine`]; they never plan jobs, compute figures or build GPU pipelines.
//! No function here is over 80 lines (`clippy.toml`): what a component decides is view-model code in
//! [`crate::views`], with native tests.

#![warn(clippy::too_many_lines)]

mod app;
mod bench_lm_panel;
mod bench_ops;
mod bench_paged_panel;
mod browser;
mod chart;
mod decode_demo;
mod engine_signal;
mod explorer_compute;
pub(crate) mod explorer_controls;
mod export;
mod flash_trace_view;
mod focus_panel;
mod gpu_watch;
mod head_mix;
mod heatmap;
mod layer_strip;
mod lesson_view;
mod live_views;
mod memory_common;
mod memory_evict_view;
mod model_gradients;
mod model_picker;
mod next_token_panel;
mod params;
mod rope_panel;
mod step_through;
mod text_field;
mod trained_compute;
mod trained_variants_panel;
mod user_checkpoint;
mod view_lessons;

/// Entry point: a panic hook that leaves a readable panel instead of a dead page, the engine's start,
/// then the app.
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        browser::show_panic_panel(&info.to_string());
    }));
    let backend = crate::state::AppState::backend_in_query(&browser::location_search());
    let starting = app::EarlyEngine::start(backend);
    // The page is built in the next task, after the engine's first step has sent the adapter request:
    // on SwiftShader the device took 50-130 ms to come up, which used to start only after the 90 ms
    // mount (measured with performance marks, 2-core machine).
    leptos::prelude::set_timeout(
        move || {
            leptos::mount::mount_to_body(move || app::App(app::AppProps { starting }));
            // index.html's "Loading…" stays until the page is built (init() resolves before that).
            browser::remove_loading_note();
        },
        std::time::Duration::ZERO,
    );
}
