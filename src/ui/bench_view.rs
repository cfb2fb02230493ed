//! The benchmark view: the tiled kernel against the naive one (and the heatmaps' row softmax) on this
//! visitor's GPU, as a table.
//!
//! A link that names `n`, `d`, `mask` or `window` runs just the matching cases as soon as the GPU is
//! ready; otherwise the user picks and starts them. Timings on a software adapter (SwiftShader) are
//! shown as such: correct, but not what a real GPU does.

use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::browser;
use super::engine_signal::EngineSignal;
use crate::attention::mask::MaskKind;
use crate::engine::Engine;
use crate::gpu::bench::{self, BenchResult, DEFAULT_HEAD_DIMS, DEFAULT_WINDOW, Repetitions, SEQUENCE_LENGTHS};
use crate::model::units::format_bytes;
use crate::state::AppState;

/// Repetitions per case in the browser: fewer than natively, the page must stay responsive.
const BROWSER_REPS: Repetitions = Repetitions { max: 5, budget_ms: 2000.0 };

#[component]
pub fn BenchView(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let rows = RwSignal::new(Vec::<BenchResult>::new());
    let progress = RwSignal::new(String::new());
    let running = RwSignal::new(false);
    let stop_requested = StoredValue::new(false);
    let fma_gflops = RwSignal::new(None::<f64>);

    let run = move |engine: Rc<Engine>| {
        if running.get_untracked() {
            return;
        }
        let cases = bench::cases(&state.with_untracked(|s| s.bench.filter(&s.input)));
        running.set(true);
        stop_requested.set_value(false);
        rows.set(Vec::new());
        spawn_local(async move {
            let Some((ctx, kernels)) = engine.gpu() else { return };
            progress.try_set("Measuring this GPU's FMA throughput…".into());
            let peak = match fma_gflops.try_get_untracked().flatten() {
                Some(peak) => peak,
                None => match bench::measure_fma_gflops(ctx, kernels, browser::now_ms).await {
                    Ok(peak) => peak,
                    Err(e) => {
                        progress.try_set(format!("Could not measure the GPU: {e}"));
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
                progress.try_set(format!(
                    "Case {} of {}: {} kernel, n = {}, {} heads, d = {}, {}…",
                    i + 1,
                    cases.len(),
                    case.kernel.name(),
                    case.shape.n_q,
                    case.shape.h_q,
                    case.shape.d,
                    case.mask
                ));
                match bench::run_case(ctx, kernels, case, peak, BROWSER_REPS, browser::now_ms).await {
                    Ok(result) => {
                        rows.try_update(|r| r.push(result));
                    }
                    Err(e) => {
                        progress.try_set(format!("Case {} failed: {e}", i + 1));
                        break;
                    }
                }
            }
            if stop_requested.try_get_value() == Some(true) {
                progress.try_set("Stopped.".into());
            } else if rows.try_with_untracked(|r| r.len()) == Some(cases.len()) {
                progress.try_set(format!("Done: {} cases.", cases.len()));
            }
            running.try_set(false);
        });
    };

    // A link that names a case runs it once the GPU is ready.
    let auto_started = StoredValue::new(false);
    Effect::new(move |_| {
        let Some(engine) = engine.get() else { return };
        let named = state.with_untracked(|s| {
            s.input.seq_tokens.is_some() || s.bench.head_dim.is_some() || s.input.mask_given || s.input.window_given
        });
        if named && engine.is_gpu() && !auto_started.get_value() {
            auto_started.set_value(true);
            run(engine);
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
                "so each result reads as a fraction of what this adapter can do."
            </p>
            {move || engine.with(|e| match e.as_deref() {
                None => view! { <p class="status">"Starting the GPU…"</p> }.into_any(),
                Some(Engine::Cpu { reason }) => view! {
                    <p class="status error" data-testid="bench-unavailable">
                        "The benchmark times GPU kernels, and there is no WebGPU here (" {reason.clone()} ")."
                    </p>
                }.into_any(),
                Some(Engine::WebGpu { ctx, .. }) => view! {
                    <p class="status" data-testid="bench-adapter">
                        {format!("Adapter: {}. Timing: {}.", ctx.adapter,
                            if ctx.timestamps { "GPU timestamp queries" } else { "wall clock around submit and readback" })}
                        {ctx.adapter.is_cpu.then_some(
                            " This is a CPU-emulated GPU: timings are not representative of real hardware. The tiled kernel is \
                             timed in its unrolled form, the fastest here; compiling it takes seconds per head width (not \
                             timed), which is why the explorer uses its loop form.",
                        )}
                    </p>
                }.into_any(),
            })}
            <BenchControls state=state/>
            <div class="bench-actions">
                <button type="button" class="copy" data-testid="bench-run"
                    disabled=move || running.get() || !engine.with(|e| e.as_ref().is_some_and(|e| e.is_gpu()))
                    on:click=move |_| { if let Some(e) = engine.get_untracked() { run(e) } }>
                    {move || format!("Run {} cases", case_count())}
                </button>
                <button type="button" class="dismiss" data-testid="bench-stop" disabled=move || !running.get()
                    on:click=move |_| stop_requested.set_value(true)>"Stop"</button>
                <span class="status" data-testid="bench-progress">{move || progress.get()}</span>
            </div>
            {move || fma_gflops.get().map(|p| view! {
                <p class="status" data-testid="bench-fma" data-value=p>{format!("Measured WGSL FMA throughput: {p:.1} GFLOP/s")}</p>
            })}
            <table class="bench-table">
                <thead><tr>
                    <th>"kernel"</th><th>"n"</th><th>"heads (q / kv)"</th><th>"d"</th><th>"mask"</th>
                    <th>"median ms"</th><th>"min ms"</th><th>"GFLOP/s"</th><th>"of FMA peak"</th><th>"GPU memory"</th>
                </tr></thead>
                <tbody>
                    {move || rows.get().into_iter().map(|r| view! { <BenchRow result=r/> }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

#[component]
fn BenchRow(result: BenchResult) -> impl IntoView {
    let fmt_ms = |ms: Option<f64>| ms.map_or_else(|| "—".to_string(), |ms| format!("{ms:.2}"));
    let mask = if result.window > 0 { format!("{} {}", result.mask, result.window) } else { result.mask.to_string() };
    let fits = result.ms_median.is_some();
    view! {
        <tr data-testid="bench-row" data-kernel=result.kernel data-n=result.n data-d=result.d data-mask=result.mask
            data-fits=fits.to_string()
            data-ms=result.ms_median.map(|m| m.to_string()).unwrap_or_default()
            data-gflops=result.gflops.map(|g| g.to_string()).unwrap_or_default()>
            <td>{result.kernel}</td>
            <td>{result.n}</td>
            <td>{format!("{} / {}", result.h_q, result.h_kv)}</td>
            <td>{result.d}</td>
            <td>{mask}</td>
            <td>{fmt_ms(result.ms_median)}</td>
            <td>{fmt_ms(result.ms_min)}</td>
            <td>{result.gflops.map_or_else(|| "—".into(), |g| format!("{g:.2}"))}</td>
            <td>{result.fraction_of_peak().map_or_else(|| "—".into(), |f| format!("{:.0} %", f * 100.0))}</td>
            <td>{match &result.note {
                Some(note) => format!("{note} ({})", format_bytes(u128::from(result.peak_bytes))),
                None => format_bytes(u128::from(result.peak_bytes)),
            }}</td>
        </tr>
    }
}

/// Narrowing the case list: each choice rewrites the link.
#[component]
fn BenchControls(state: RwSignal<AppState>) -> impl IntoView {
    let option =
        |value: String, label: String, selected: bool| view! { <option value=value selected=selected>{label}</option> };
    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default()>
            <label>"n"
                <select data-testid="bench-n" on:change=move |ev| {
                    let n = event_target_value(&ev).parse::<u32>().ok();
                    state.update(|s| s.input.seq_tokens = n);
                }>
                    {move || {
                        let current = state.with(|s| s.input.seq_tokens);
                        let mut list: Vec<u32> = SEQUENCE_LENGTHS.to_vec();
                        if let Some(n) = current.filter(|n| !list.contains(n)) { list.push(n) }
                        std::iter::once(option("all".into(), "all".into(), current.is_none()))
                            .chain(list.into_iter().map(|n| option(n.to_string(), n.to_string(), current == Some(n))))
                            .collect_view()
                    }}
                </select>
            </label>
            <label>"d"
                <select data-testid="bench-d" on:change=move |ev| {
                    let d = event_target_value(&ev).parse::<u32>().ok();
                    state.update(|s| s.bench.head_dim = d);
                }>
                    {move || {
                        let current = state.with(|s| s.bench.head_dim);
                        std::iter::once(option("all".into(), "all".into(), current.is_none()))
                            .chain(DEFAULT_HEAD_DIMS.into_iter().map(|d| option(d.to_string(), d.to_string(), current == Some(d))))
                            .collect_view()
                    }}
                </select>
            </label>
            <label>"mask"
                <select data-testid="bench-mask" on:change=move |ev| {
                    let kind = event_target_value(&ev).parse::<MaskKind>().ok();
                    state.update(|s| match kind {
                        Some(kind) => { s.input.mask = kind; s.input.mask_given = true; }
                        None => s.input.mask_given = false,
                    });
                }>
                    {move || {
                        let current = state.with(|s| s.input.mask_given.then_some(s.input.mask));
                        std::iter::once(option("all".into(), "full, causal, sliding".into(), current.is_none()))
                            .chain(MaskKind::ALL.into_iter().map(|k| option(k.name().into(), k.name().into(), current == Some(k))))
                            .collect_view()
                    }}
                </select>
            </label>
            <label>"window"
                <input type="number" min="1" data-testid="bench-window"
                    prop:value=move || state.with(|s| if s.input.window_given { s.input.window_tokens } else { DEFAULT_WINDOW })
                    on:change=move |ev| {
                        if let Ok(w) = event_target_value(&ev).trim().parse::<u32>()
                            && w >= 1 { state.update(|s| { s.input.window_tokens = w; s.input.window_given = true; }) }
                    }/>
            </label>
        </form>
    }
}
