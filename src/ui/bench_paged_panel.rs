//! The benchmark view's paged-decode rows: one decode step over 4,096 cached tokens of a Llama 3 8B
//! layer, K and V read contiguously (the app's decode cache) and through a page table whose pages are
//! scattered over one pool (the KV view's decode demo's layout). What is said of them is decided in
//! `views/bench/paged.rs`.

use std::rc::Rc;

use leptos::prelude::*;

use super::bench_ops::{OpPanel, fma_peak};
use super::browser;
use crate::engine::Engine;
use crate::gpu::bench::Repetitions;
use crate::gpu::bench_lm::OpResult;
use crate::gpu::bench_paged::{self, PAGED_HEADS, PAGED_TOKENS};
use crate::model::paging::PAGE_TOKENS;
use crate::views::bench::paged::paged_summary;

/// Repetitions per row: as few as the attention cases take in the browser.
const REPS: Repetitions = Repetitions { max: 5, budget_ms: 2000.0, max_run_ms: None };

#[component]
pub fn BenchPagedPanel(engine: Rc<Engine>, fma_gflops: RwSignal<Option<f64>>) -> impl IntoView {
    let (h_q, h_kv, d) = PAGED_HEADS;
    let explain = format!(
        "One query per head over {PAGED_TOKENS} cached tokens of a Llama 3 8B layer ({h_q} query heads, \
        {h_kv} KV heads, d = {d}; seeded synthetic values): K and V read from one contiguous cache, by the launch the \
        app's decode makes and by the tiled loop the paged kernel shares, then through a page table of \
        {PAGE_TOKENS}-token pages scattered over the pool, as the KV view's decode demo reads them."
    );
    let time = move |rows, status| {
        let engine = engine.clone();
        async move { time_paged(&engine, fma_gflops, rows, status).await }
    };
    view! { <OpPanel id="bench-paged" title="Paged KV: one decode step" explain button="Time paged decode" time/> }
}

/// Measures the peak (once per page), then the three rows; what to say after them.
async fn time_paged(
    engine: &Rc<Engine>,
    fma_gflops: RwSignal<Option<f64>>,
    rows: RwSignal<Vec<OpResult>>,
    status: RwSignal<String>,
) -> Result<String, String> {
    let Some((ctx, kernels)) = engine.gpu() else { return Err("no WebGPU".into()) };
    let peak = fma_peak(ctx, kernels, fma_gflops, status).await?;
    status.try_set("Timing the three decode launches…".into());
    let timed =
        bench_paged::run_paged_decode(ctx, kernels, peak, REPS, browser::now_ms).await.map_err(|e| e.to_string())?;
    let said = paged_summary(&timed).unwrap_or_else(|| "Done.".into());
    rows.try_set(timed);
    Ok(said)
}
