//! The benchmark view: the tiled kernel against the naive one (and the heatmaps' row softmax) on this
//! visitor's GPU, as a table.
//!
//! A link that names `n`, `d`, `mask` or `window` runs just the matching cases as soon as the GPU is
//! ready; otherwise the user picks and starts them. Timings on a software adapter (SwiftShader) are
//! shown as such: correct, but not what a real GPU does.

use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::engine::Engine;
use crate::gpu::bench::{self, BenchCase, BenchResult, Repetitions};
use crate::state::AppState;
use crate::ui::bench_lm_panel::BenchLmPanel;
use crate::ui::bench_paged_panel::BenchPagedPanel;
use crate::ui::browser;
use crate::ui::engine_signal::EngineSignal;
use crate::ui::params::{edit, set_param};
use crate::views::bench::controls::{self, SelectOption};
use crate::views::bench::rows::RowCells;
use crate::views::bench::status;

/// Repetitions per case in the browser: fewer than natively, the page must stay responsive.
/// A run may hold the GPU for 10 s at most: on a software adapter (about 10 GFLOP/s) the 32-head,
/// d = 128 cases at n = 2,048 still run, and a case of minutes is skipped with the reason.
const BROWSER_REPS: Repetitions = Repetitions { max: 5, budget_ms: 2000.0, max_run_ms: Some(10_000.0) };

#[component]
pub fn BenchView(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let bench = BenchRun {
        rows: RwSignal::new(Vec::<BenchResult>::new()),
        progress: RwSignal::new(String::new()),
        running: RwSignal::new(false),
        stop_requested: StoredValue::new(false),
        fma_gflops: RwSignal::new(None::<f64>),
    };
    let BenchRun { rows, progress, running, stop_requested, fma_gflops } = bench;

    // A link that names a case runs it once the GPU is ready.
    let auto_started = StoredValue::new(false);
    Effect::new(move |_| {
        let Some(engine) = engine.get() else { return };
        let named = state.with_untracked(|s| s.bench.names_a_case(&s.input));
        if named && engine.is_gpu() && !auto_started.get_value() {
            auto_started.set_value(true);
            bench.start(state, engine);
        }
    });

    let case_count = move || bench::cases(&state.with(|s| s.bench.filter(&s.input))).len();
    view! {
        <section class="bench">
            <h2>"Kernel benchmark"</h2>
            <p class="explain">
                "Times the tiled (FlashAttention-style) kernel against the naive three-pass one on this GPU, and "
                "the row softmax the heatmaps use (every probability, no P·V). "
                "FLOPs count 4·d per attended query-key pair (2·d for the row softmax); the FMA peak comes from a small WGSL microkernel, "
                "so each result reads as a fraction of what this adapter can do. "
                "The backward (dQ, dK, dV from dO, FlashAttention-2's two passes; pick it under \"kernel\") counts "
                {bench::BACKWARD_FLOPS} "."
            </p>
            <AdapterLine engine=engine/>
            <BenchControls state=state/>
            <div class="bench-actions">
                <button type="button" class="copy" data-testid="bench-run"
                    disabled=move || running.get() || !engine.with(|e| e.as_ref().is_some_and(|e| e.is_gpu()))
                    on:click=move |_| { if let Some(e) = engine.get_untracked() { bench.start(state, e) } }>
                    {move || status::run_label(case_count())}
                </button>
                <button type="button" class="dismiss" data-testid="bench-stop" disabled=move || !running.get()
                    on:click=move |_| stop_requested.set_value(true)>"Stop"</button>
                <span class="status" data-testid="bench-progress">{move || progress.get()}</span>
            </div>
            {move || fma_gflops.get().map(|p| view! {
                <p class="status" data-testid="bench-fma" data-value=p>{status::fma_text(p)}</p>
            })}
            <BenchTable rows=rows/>
            {move || engine.get().filter(|e| e.is_gpu()).map(|e| view! { <BenchLmPanel engine=e fma_gflops=fma_gflops/> })}
            {move || engine.get().filter(|e| e.is_gpu()).map(|e| view! { <BenchPagedPanel engine=e fma_gflops=fma_gflops/> })}
        </section>
    }
}

/// A run of the chosen cases: the rows measured, what it is doing, and the FMA peak (measured once).
#[derive(Clone, Copy)]
struct BenchRun {
    rows: RwSignal<Vec<BenchResult>>,
    progress: RwSignal<String>,
    running: RwSignal<bool>,
    stop_requested: StoredValue<bool>,
    fma_gflops: RwSignal<Option<f64>>,
}

impl BenchRun {
    /// Starts the cases the link's filter picks, unless a run is going.
    fn start(self, state: RwSignal<AppState>, engine: Rc<Engine>) {
        if self.running.get_untracked() {
            return;
        }
        let cases = bench::cases(&state.with_untracked(|s| s.bench.filter(&s.input)));
        self.running.set(true);
        self.stop_requested.set_value(false);
        self.rows.set(Vec::new());
        spawn_local(self.run(engine, cases));
    }

    async fn run(self, engine: Rc<Engine>, cases: Vec<BenchCase>) {
        let Self { rows, progress, running, stop_requested, fma_gflops } = self;
        let Some((ctx, kernels)) = engine.gpu() else { return };
        progress.try_set(status::MEASURING_PEAK.into());
        let peak = match fma_gflops.try_get_untracked().flatten() {
            Some(peak) => peak,
            None => match bench::measure_fma_gflops(ctx, kernels, browser::now_ms).await {
                Ok(peak) => peak,
                Err(e) => {
                    progress.try_set(status::peak_failed_text(e));
                    running.try_set(false);
                    return;
                }
            },
        };
        fma_gflops.try_set(Some(peak));
        for (i, case) in cases.iter().enumerate() {
            if stop_requested.try_get_value() != Some(false) {
                break;
            }
            progress.try_set(status::case_text(i, cases.len(), case));
            match bench::run_case(ctx, kernels, case, peak, BROWSER_REPS, browser::now_ms).await {
                Ok(result) => {
                    rows.try_update(|r| r.push(result));
                }
                Err(e) => {
                    progress.try_set(status::case_failed_text(i, e));
                    break;
                }
            }
        }
        let stopped = stop_requested.try_get_value() == Some(true);
        let done = rows.try_with_untracked(Vec::len).unwrap_or(0);
        if let Some(line) = status::finished_text(stopped, done, cases.len()) {
            progress.try_set(line);
        }
        running.try_set(false);
    }
}

/// Which adapter the timings come from, or why there are none.
#[component]
fn AdapterLine(engine: EngineSignal) -> impl IntoView {
    view! {
        {move || engine.with(|e| match e.as_deref() {
            None => view! { <p class="status">"Starting the GPU…"</p> }.into_any(),
            Some(Engine::Cpu { reason }) => view! {
                <p class="status error" data-testid="bench-unavailable">{status::unavailable_text(reason)}</p>
            }.into_any(),
            Some(Engine::WebGpu { ctx, .. }) => view! {
                <p class="status" data-testid="bench-adapter">{status::adapter_text(&ctx.adapter, ctx.timestamps)}</p>
            }.into_any(),
        })}
    }
}

/// The measured cases, one row each.
#[component]
fn BenchTable(rows: RwSignal<Vec<BenchResult>>) -> impl IntoView {
    view! {
        <table class="bench-table">
            <thead><tr>
                <th>"kernel"</th><th>"n"</th><th>"heads (q / kv)"</th><th>"d"</th><th>"mask"</th>
                <th>"median ms"</th><th>"min ms"</th><th>"GFLOP/s"</th><th>"of FMA peak"</th><th>"GPU memory"</th>
            </tr></thead>
            <tbody>
                {move || rows.get().into_iter().map(|r| view! { <BenchRow result=r/> }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn BenchRow(result: BenchResult) -> impl IntoView {
    let cells = RowCells::of(&result);
    view! {
        <tr data-testid="bench-row" data-kernel=result.kernel data-n=result.n data-d=result.d data-mask=result.mask
            data-window=result.window data-fits=cells.fits_value data-ms=cells.ms_value data-gflops=cells.gflops_value>
            <td>{result.kernel}</td>
            <td>{result.n}</td>
            <td>{cells.heads}</td>
            <td>{result.d}</td>
            <td>{cells.mask}</td>
            <td>{cells.median_ms}</td>
            <td>{cells.min_ms}</td>
            <td>{cells.gflops}</td>
            <td>{cells.of_peak}</td>
            <td>{cells.memory}</td>
        </tr>
    }
}

fn option_views(options: Vec<SelectOption>) -> impl IntoView {
    options.into_iter().map(|o| view! { <option value=o.value selected=o.selected>{o.label}</option> }).collect_view()
}

/// One select of the case filter picked: through the link's parser, `all` clearing the key.
fn pick(state: RwSignal<AppState>, key: &str, ev: &leptos::ev::Event) {
    let value = event_target_value(ev);
    let (key, value) = controls::filter_change(key, &value);
    let _ = edit(state, &[(key, value)]);
}

/// Narrowing the case list: each choice rewrites the link.
#[component]
fn BenchControls(state: RwSignal<AppState>) -> impl IntoView {
    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default()>
            <label>"n"
                <select data-testid="bench-n" on:change=move |ev| pick(state, "n", &ev)>
                    {move || option_views(state.with(|s| controls::n_options(&s.input)))}
                </select>
            </label>
            <label>"d"
                <select data-testid="bench-d" on:change=move |ev| pick(state, "d", &ev)>
                    {move || option_views(state.with(|s| controls::d_options(&s.bench)))}
                </select>
            </label>
            <label>"kernel"
                <select data-testid="bench-kernel" on:change=move |ev| pick(state, "kernel", &ev)>
                    {move || option_views(state.with(|s| controls::kernel_options(&s.bench)))}
                </select>
            </label>
            <label>"mask"
                <select data-testid="bench-mask" on:change=move |ev| pick(state, "mask", &ev)>
                    {move || option_views(state.with(|s| controls::mask_options(&s.input)))}
                </select>
            </label>
            <label>{move || state.with(|s| controls::size_key(&s.input))}
                <input type="number" min="1" data-testid="bench-window"
                    prop:value=move || state.with(|s| controls::mask_size(&s.input))
                    on:change=move |ev| { let _ = set_param(state, state.with_untracked(|s| controls::size_key(&s.input)), &event_target_value(&ev)); }/>
            </label>
        </form>
    }
}
