//! What the benchmark view's panels of named operations share (the trained model's kernels, the paged
//! decode): the adapter's FMA peak, measured once per page, and the table of timed operations.

use leptos::prelude::*;

use super::browser;
use crate::gpu::bench;
use crate::gpu::bench_lm::OpResult;
use crate::gpu::{GpuContext, Kernels};

/// The adapter's FMA peak: the page's measurement, or measured now (and kept for the page).
pub async fn fma_peak(
    ctx: &GpuContext,
    kernels: &Kernels,
    fma_gflops: RwSignal<Option<f64>>,
    status: RwSignal<String>,
) -> Result<f64, String> {
    if let Some(peak) = fma_gflops.try_get_untracked().flatten() {
        return Ok(peak);
    }
    status.try_set("Measuring the FMA peak…".into());
    let peak = bench::measure_fma_gflops(ctx, kernels, browser::now_ms).await.map_err(|e| e.to_string())?;
    fma_gflops.try_set(Some(peak));
    Ok(peak)
}

/// One row per timed operation, each with `data-` values a script reads (`row_testid` names them).
#[component]
pub fn OpTable(rows: RwSignal<Vec<OpResult>>, row_testid: &'static str) -> impl IntoView {
    view! {
        <table class="bench-table">
            <thead><tr><th>"op"</th><th>"shape"</th><th>"launches"</th><th>"median ms"</th><th>"min ms"</th><th>"GFLOP/s"</th><th>"of FMA peak"</th></tr></thead>
            <tbody>
                {move || rows.get().into_iter().map(|r| view! {
                    <tr data-testid=row_testid data-op=r.name.clone() data-shape=r.shape.clone() data-launches=r.launches data-ms=r.ms_median data-gflops=r.gflops>
                        <td>{r.name.clone()}</td>
                        <td>{r.shape.clone()}</td>
                        <td>{r.launches}</td>
                        <td>{format!("{:.2}", r.ms_median)}</td>
                        <td>{format!("{:.2}", r.ms_min)}</td>
                        <td>{format!("{:.2}", r.gflops)}</td>
                        <td>{format!("{:.1} %", 100.0 * r.fraction_of_peak())}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
