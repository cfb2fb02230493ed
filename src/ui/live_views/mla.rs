//! The MLA view: one MLA layer computed expanded and absorbed on the engine, the drawn head's two
//! heatmaps side by side, how far apart the forms are, and what each costs. What it shows is worked
//! out in [`crate::views::mla`]; this file only lays it out.

use std::sync::Arc;

use leptos::prelude::*;

use crate::state::AppState;
use crate::ui::engine_signal::{EngineSignal, newest_job};
use crate::ui::heatmap::{Heatmap, Shared};
use crate::ui::model_picker::ModelSelect;
use crate::ui::params::write_typed;
use crate::views::mla::compute::{MlaRun, run};
use crate::views::mla::maps::{head_map, planned_inputs};
use crate::views::mla::panel::{SYNTHETIC_NOTE, cost_caption, cost_rows, layer_line, tier_text, verdict};
use crate::views::mla::setup::setup;
use crate::views::mla::{KeyRotation, MAX_QHEADS, MAX_TOKENS};

#[component]
pub fn MlaView(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let layer = Memo::new(move |_| state.with(|s| setup(s)));
    view! {
        <section class="mla-view">
            <MlaControls state/>
            <p class="hint" data-testid="mla-layer">{move || state.with(|s| layer_line(&layer.get(), &s.mla))}</p>
            {move || layer.get().borrowed_note.map(|note| view! { <p class="status" data-testid="mla-borrowed">{note}</p> })}
            <p class="hint" data-testid="synthetic-note">{SYNTHETIC_NOTE}</p>
            <MlaComputed state engine/>
            <MlaCosts state/>
        </section>
    }
}

/// Both forms on the engine; a newer setting drops an older run's result.
#[component]
fn MlaComputed(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let result = newest_job(
        engine,
        move || state.with(|s| planned_inputs(s).map(|x| (x, s.mla.rot, s.mla.shown_head() as usize))),
        |engine, planned, _| async move {
            let (inputs, rot, head) = planned?;
            run(&engine, &inputs, rot, head).await
        },
    );
    let adapter = move || engine.with(|e| e.as_ref().map(|e| e.describe()).unwrap_or_default());
    view! {
        <section class="panel" data-testid="mla-panel">
            <h3>"One layer, two ways"</h3>
            {move || match result.get() {
                None => view! { <p class="status">"Computing both forms…"</p> }.into_any(),
                Some(Err(why)) => view! { <p class="status error" data-testid="mla-error">{why}</p> }.into_any(),
                Some(Ok(r)) => view! { <MlaResult r=r adapter=adapter() state/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn MlaResult(r: MlaRun, adapter: String, state: RwSignal<AppState>) -> impl IntoView {
    let sizes = state.with_untracked(|s| setup(s).sizes);
    let expanded = Shared(Arc::new(head_map(&r, false)));
    let absorbed = Shared(Arc::new(head_map(&r, true)));
    let scale = Signal::derive(move || state.with(|s| s.explorer.scale));
    view! {
        <p class="hint" data-testid="mla-tier" data-on-gpu=r.on_gpu.to_string()>{tier_text(r.on_gpu, &adapter, &sizes)}</p>
        <p data-testid="mla-max-diff" data-value=r.max_prob_diff.to_string() data-rot=r.rot.id()>
            {format!("Largest difference of probabilities between the forms, over {} heads and {} tokens: {:.2e}", r.heads, r.n, r.max_prob_diff)}
        </p>
        <p data-testid="mla-max-out-diff" data-value=r.max_out_diff.to_string()>
            {format!("Largest difference of the heads' outputs: {:.2e}", r.max_out_diff)}
        </p>
        <p class="status" data-testid="mla-verdict">{verdict(r.rot, r.max_prob_diff, sizes.rope)}</p>
        <p class="hint" data-testid="mla-reference" data-prob-error=r.reference_prob_error.to_string()
            data-out-error=r.reference_out_error.to_string()>
            {format!("Head {} of each form against the f64 reference of that form: probabilities within {:.1e}, outputs within {:.1e}.",
                r.head, r.reference_prob_error, r.reference_out_error)}
        </p>
        <div class="mla-maps">
            <div data-testid="mla-expanded"><h4>{format!("Expanded: head {}'s own {}-wide keys", r.head, sizes.qk_width())}</h4>
                <Heatmap map=Signal::derive(move || Some(expanded.clone())) scale=scale size_px=320.0/></div>
            <div data-testid="mla-absorbed"><h4>{format!("Absorbed: the one shared {}-wide latent key", sizes.latent_key_width())}</h4>
                <Heatmap map=Signal::derive(move || Some(absorbed.clone())) scale=scale size_px=320.0/></div>
        </div>
    }
}

/// The cost of each form at a prefill and at one decoded token.
#[component]
fn MlaCosts(state: RwSignal<AppState>) -> impl IntoView {
    let rows = move || state.with(|s| cost_rows(s, &setup(s).sizes));
    view! {
        <section class="panel">
            <h3>"What each form costs"</h3>
            <p class="hint">{move || state.with(|s| cost_caption(s, &setup(s).sizes))}</p>
            <table class="data" data-testid="mla-costs">
                <thead><tr><th>"phase"</th><th>"form"</th><th>"FLOPs"</th><th>"bytes moved"</th></tr></thead>
                <tbody>
                    {move || rows().into_iter().map(|row| view! {
                        <tr data-testid="mla-cost" data-phase=row.phase.id() data-form=row.form.id()
                            data-flops=row.flops.to_string() data-bytes=row.bytes.to_string()>
                            <td>{row.what}</td><td>{row.form.id()}</td>
                            <td class="num">{row.flops_text}</td><td class="num">{row.bytes_text}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// Every control writes its key through the link's parser; a refusal is said under the form.
#[component]
fn MlaControls(state: RwSignal<AppState>) -> impl IntoView {
    let refused = RwSignal::new(None::<String>);
    let write =
        move |key: &'static str, ev: leptos::ev::Event| write_typed(state, refused, key, &event_target_value(&ev));
    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default() data-testid="mla-controls">
            <label>"Model" <ModelSelect state/></label>
            <label>"Tokens"
                <input type="number" min="1" max=MAX_TOKENS data-testid="mla-tokens"
                    prop:value=move || state.with(|s| s.mla.tokens) on:change=move |ev| write("tokens", ev)/>
            </label>
            <label>"Query heads computed"
                <input type="number" min="1" max=MAX_QHEADS data-testid="mla-qheads"
                    prop:value=move || state.with(|s| s.mla.qheads) on:change=move |ev| write("qheads", ev)/>
            </label>
            <label>"Head drawn"
                <input type="number" min="0" max=MAX_QHEADS - 1 data-testid="mla-head"
                    prop:value=move || state.with(|s| s.mla.mhead) on:change=move |ev| write("mhead", ev)/>
            </label>
            <label>"RoPE"
                <select data-testid="mla-rot" on:change=move |ev| write("rot", ev)>
                    {KeyRotation::ALL.into_iter().map(|r| view! {
                        <option value=r.id() selected=move || state.with(|s| s.mla.rot == r)>{r.label()}</option>
                    }).collect_view()}
                </select>
            </label>
            {move || refused.get().map(|why| view! { <small class="field-error" role="alert" data-testid="mla-refused">{why}</small> })}
        </form>
    }
}
