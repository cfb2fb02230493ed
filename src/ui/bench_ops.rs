//! What the benchmark view's panels of named operations share (the trained model's kernels, the paged
//! decode): the adapter's FMA peak, measured once per page, the panel with its start button and
//! progress, and the table of timed operations.

use std::future::Future;

use leptos::prelude::*;
use leptos::task::spawn_local;

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

/// A panel of timed operations: a title, what it times, a start button, its progress and the table.
/// `id` names the panel's class and test ids: `{id}`, `{id}-run`, `{id}-progress` and `{id}-row`.
/// `time` fills the rows as they finish and returns what to say when it is done.
#[component]
pub fn OpPanel<F, Fut>(
    id: &'static str,
    title: &'static str,
    explain: String,
    button: &'static str,
    time: F,
) -> impl IntoView
where
    F: Fn(RwSignal<Vec<OpResult>>, RwSignal<String>) -> Fut + 'static,
    Fut: Future<Output = Result<String, String>> + 'static,
{
    let rows = RwSignal::new(Vec::<OpResult>::new());
    let status = RwSignal::new(String::new());
    let running = RwSignal::new(false);
    let run = move |_| {
        if running.get_untracked() {
            return;
        }
        running.set(true);
        rows.set(Vec::new());
        let job = time(rows, status);
        spawn_local(async move {
            status.try_set(job.await.unwrap_or_else(|e| format!("Stopped: {e}")));
            running.try_set(false);
        });
    };
    view! {
        <section class=format!("panel {id}") data-testid=id>
            <h3>{title}</h3>
            <p class="explain">{explain}</p>
            <div class="bench-actions">
                <button type="button" class="copy" data-testid=format!("{id}-run") disabled=move || running.get() on:click=run>
                    {button}
                </button>
                <span class="status" data-testid=format!("{id}-progress")>{move || status.get()}</span>
            </div>
            <OpTable rows row_testid=format!("{id}-row")/>
        </section>
    }
}

/// One row per timed operation, each with `data-` values a script reads (`row_testid` names them).
#[component]
pub fn OpTable(rows: RwSignal<Vec<OpResult>>, row_testid: String) -> impl IntoView {
    view! {
        <table class="bench-table">
            <thead><tr><th>"op"</th><th>"shape"</th><th>"launches"</th><th>"median ms"</th><th>"min ms"</th><th>"GFLOP/s"</th><th>"of FMA peak"</th></tr></thead>
            <tbody>
                {move || rows.get().into_iter().map(|r| view! {
                    <tr data-testid=row_testid.clone() data-op=r.name.clone() data-shape=r.shape.clone() data-launches=r.launches data-ms=r.ms_median data-gflops=r.gflops>
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
