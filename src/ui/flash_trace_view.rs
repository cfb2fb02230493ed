//! The online softmax from the kernel's own trace (lesson 11): the focused head's first tokens through
//! the traced build of the tiled forward on the engine (or the CPU twin's trace without WebGPU), one
//! query row played back a key step at a time with the tile cursor on Q, Kᵀ and O. The played row and
//! step are the link's (`trow`, `tstep`), read through memos so that moving them redraws the player
//! alone. What is shown is decided in `views/heatmaps/flash_trace.rs`.

use std::sync::Arc;

use leptos::prelude::*;

use super::engine_signal::{EngineSignal, newest_job};
use super::params::{edit, set_param};
use crate::attention::layer_inputs::LayerInputs;
use crate::attention::tokens::display_token;
use crate::cpu::reference::{self, Forward};
use crate::engine::TracedForward;
use crate::model::Mask;
use crate::state::AppState;
use crate::views::heatmaps::flash_trace::{
    PlayStep, cursor, one_pass_difference, playback, played_row, played_step, source_label, trace_example,
};

/// A number for a `data-` attribute that JavaScript's `Number()` reads back (−∞ as `-Infinity`).
fn js_number(x: f64) -> String {
    if x == f64::NEG_INFINITY { "-Infinity".into() } else { x.to_string() }
}

/// Four decimals, or four digits of a number too small for them (a rescale of 1e-7 is not 0).
fn shown(x: f64) -> String {
    match x {
        f64::NEG_INFINITY => "−∞".into(),
        x if x != 0.0 && x.abs() < 1e-3 => format!("{x:.3e}"),
        x => format!("{x:.4}"),
    }
}

/// The traced run of query head `head`'s first tokens under `mask`, and its player.
#[component]
pub fn FlashTracePanel(
    state: RwSignal<AppState>,
    inputs: Arc<LayerInputs>,
    head: u32,
    mask: Mask,
    engine: EngineSignal,
) -> impl IntoView {
    let example = Arc::new(trace_example(&inputs, head, mask));
    // The one-pass softmax (every score, one softmax, then P·V, in f64) the trace must end on.
    let one_pass = Arc::new(reference::flash_attention(&example.problem()));
    let labels: Vec<String> =
        example.q_tokens.iter().enumerate().map(|(i, t)| format!("{i} {}", display_token(t))).collect();
    let ex = example.clone();
    let result = newest_job(
        engine,
        move || ex.clone(),
        |engine, ex, _| async move { engine.flash_trace(&ex.problem()).await.map(|t| (Arc::new(t), engine.describe())) },
    );
    let mask = example.mask;
    view! {
        <div class="step flash-trace" data-testid="flash-trace">
            <h4>{format!("The online softmax, from the kernel: head {head}'s first {} tokens", example.shape.n_q)}</h4>
            {move || match result.get() {
                None => view! { <p class="status">"Tracing the tiled kernel…"</p> }.into_any(),
                Some(Err(why)) => view! { <p class="status error" data-testid="flash-trace-error">{why}</p> }.into_any(),
                Some(Ok((traced, adapter))) => view! { <TracePlayer state traced adapter mask labels=labels.clone() one_pass=one_pass.clone()/> }.into_any(),
            }}
        </div>
    }
}

/// The row picker, the step buttons, the cursor and the steps so far. The row and step live in the
/// link: each control writes its key, and the player follows the link's memos.
#[component]
fn TracePlayer(
    state: RwSignal<AppState>,
    traced: Arc<TracedForward>,
    adapter: String,
    mask: Mask,
    labels: Vec<String>,
    one_pass: Arc<Forward>,
) -> impl IntoView {
    let n_q = traced.trace.shape.n_q;
    let asked_row = Memo::new(move |_| state.with(|s| s.explorer.trace_row));
    let asked_step = Memo::new(move |_| state.with(|s| s.explorer.trace_step));
    let row = Memo::new(move |_| played_row(asked_row.get(), n_q));
    let t = traced.clone();
    let steps = Memo::new(move |_| playback(&t.trace, mask, row.get()));
    let last = Memo::new(move |_| steps.with(|s| s.len().saturating_sub(1)));
    let step = Memo::new(move |_| played_step(asked_step.get(), steps.with(Vec::len)));
    let form = traced.form.map(|f| f.name());
    let (rows, keys) = (traced.trace.rows_per_tile, traced.trace.keys_per_step);
    view! {
        <div data-testid="flash-trace-player" data-form=form.unwrap_or("twin") data-row=move || row.get()
            data-steps=move || steps.with(Vec::len) data-tile-rows=rows data-tile-keys=keys>
            <p class="hint">{source_label(form, &adapter)}
                {format!(" A workgroup takes {rows} query rows and walks their keys {keys} at a time; the table grows by one \
                  step each time you press “next step”, exactly as the kernel's loop went.")}
            </p>
            <TraceControls state labels row=row.into() step=step.into() last=last.into()/>
            <TraceCursor traced=traced.clone() mask row=row.into() step=step.into()/>
            <TraceSteps steps=steps.into() step=step.into()/>
            <TraceResult traced one_pass row=row.into() at_end=Signal::derive(move || step.get() >= last.get())/>
        </div>
    }
}

/// The row picker and the step buttons: each writes the link (a new row starts at its first step).
#[component]
fn TraceControls(
    state: RwSignal<AppState>,
    labels: Vec<String>,
    row: Signal<u32>,
    step: Signal<usize>,
    last: Signal<usize>,
) -> impl IntoView {
    let go = move |to: usize| _ = set_param(state, "tstep", &to.to_string());
    let options = labels
        .into_iter()
        .enumerate()
        .map(|(i, l)| view! { <option value=i prop:selected=move || row.get() as usize == i>{l}</option> })
        .collect_view();
    view! {
        <div class="controls">
            <label>"Query row "
                <select data-testid="flash-trace-row" on:change=move |ev| {
                    _ = edit(state, &[("trow", Some(event_target_value(&ev).as_str())), ("tstep", None)]);
                }>{options}</select>
            </label>
            <button type="button" class="secondary" data-testid="flash-trace-prev"
                on:click=move |_| go(step.get_untracked().saturating_sub(1))>"◀ previous step"</button>
            <button type="button" class="secondary" data-testid="flash-trace-next"
                on:click=move |_| go((step.get_untracked() + 1).min(last.get_untracked()))>"next step ▶"</button>
            <button type="button" class="secondary" data-testid="flash-trace-end"
                on:click=move |_| go(last.get_untracked())>"last step"</button>
        </div>
    }
}

/// Q, Kᵀ and O as strips of cells, the cursor on the played row, its tile and the step's keys.
#[component]
fn TraceCursor(traced: Arc<TracedForward>, mask: Mask, row: Signal<u32>, step: Signal<usize>) -> impl IntoView {
    let strip = |name: &'static str, cells: Vec<&'static str>| {
        let cells = cells.into_iter().map(|c| view! { <span class=c></span> }).collect_view();
        view! { <div class="trace-strip" data-testid=format!("flash-trace-{name}")><span class="strip-name">{name}</span>{cells}</div> }
    };
    view! {
        <div class="trace-cursor">
            {move || {
                let c = cursor(&traced.trace, mask, row.get(), step.get());
                view! { {strip("Q", c.q)}{strip("Kᵀ", c.k)}{strip("O", c.o)} }
            }}
            <p class="hint">"Q and O: the played row (dark) and the rest of its workgroup's rows. Kᵀ: the step's keys \
                (dark), keys already folded in, keys still ahead, keys the kernel never loaded for this workgroup \
                (blank), and keys this row may not see (struck through)."</p>
        </div>
    }
}

/// The steps played so far, one table row each.
#[component]
fn TraceSteps(steps: Signal<Vec<PlayStep>>, step: Signal<usize>) -> impl IntoView {
    let body = move || {
        steps.with(|all| {
            all.iter()
                .take(step.get() + 1)
                .enumerate()
                .map(|(n, s)| {
                    view! {
                        <tr data-testid="flash-trace-step" data-step=n data-key0=s.key0 data-m=js_number(s.m)
                            data-l=s.l.to_string() data-alpha=s.alpha.to_string() data-o0=s.o0.to_string()
                            class:current=move || n == step.get()>
                            <th scope="row">{format!("{}: keys {}–{}", n + 1, s.key0, s.key_end - 1)}</th>
                            <td class="num">{format!("{} of {}", s.visible_keys, s.key_end - s.key0)}</td>
                            <td class="num">{shown(s.m)}</td>
                            <td class="num">{shown(s.alpha)}</td>
                            <td class="num">{shown(s.l)}</td>
                            <td class="num">{shown(s.o0)}</td>
                        </tr>
                    }
                })
                .collect_view()
        })
    };
    view! {
        <div class="table-scroll"><table class="data steps-table">
            <thead><tr><th>"step"</th><th scope="col">"keys seen"</th><th scope="col">"running max m"</th>
                <th scope="col">"rescale exp(m_old − m_new)"</th><th scope="col">"running sum l"</th>
                <th scope="col">"o0 = acc0 / l"</th></tr></thead>
            <tbody>{body}</tbody>
        </table></div>
    }
}

/// After the last step: acc / l against the one-pass softmax's output row.
#[component]
fn TraceResult(
    traced: Arc<TracedForward>,
    one_pass: Arc<Forward>,
    row: Signal<u32>,
    at_end: Signal<bool>,
) -> impl IntoView {
    move || {
        let r = row.get();
        let diff = one_pass_difference(&traced.trace, &one_pass, r)?;
        let d = traced.trace.shape.d;
        // The one-pass log-sum-exp of the row, which the trace's last m + ln(l) must equal.
        let lse = one_pass.lse.get(r as usize).map_or(f64::NAN, |&x| f64::from(x));
        at_end.get().then(|| {
            view! {
                <p class="hint" data-testid="flash-trace-result" data-row=r data-max-diff=diff.to_string()
                    data-one-pass-lse=js_number(lse)>
                    {format!("After the last step O = acc / l. Against the one-pass softmax's output row (every score \
                      first, then one softmax, then P·V), the largest difference over its {d} columns is {diff:.1e}.")}
                </p>
            }
        })
    }
}
