//! The backward view: the softmax's Jacobian for one query row of the explorer's head, drawn as a
//! small signed heatmap, with the same row at every score scale; the head's gradients through
//! attention's backward, checked against the twin (the live-attention service runs them); and, for
//! real weights, gradients on the model (`model_gradients.rs`). What it shows is worked out in
//! [`crate::views::backward`]; this file only lays it out.

use leptos::prelude::*;

use crate::live_attention::{GradCheck, gradient_check};
use crate::model::Model;
use crate::state::AppState;
use crate::ui::engine_signal::{EngineSignal, newest_job};
use crate::ui::model_gradients::ModelGradientsPanel;
use crate::ui::model_picker::ModelSelect;
use crate::ui::params::write_typed;
use crate::ui::text_field::TextField;
use crate::ui::user_checkpoint::shows_real_weights;
use crate::views::backward::grad_check::{grad_heading, grad_request, group_sum_line};
use crate::views::backward::jacobian::{RowJacobian, row_jacobian};
use crate::views::backward::panel::{
    cells, facts_line, heading, picture_caption, scale_choices, scale_rows, undrawn_note, weights_note,
};

#[component]
pub fn BackwardView(state: RwSignal<AppState>, model: Memo<Model>, engine: EngineSignal) -> impl IntoView {
    let row = Memo::new(move |_| model.with(|m| state.with(|s| row_jacobian(s, m))));
    let shown_head = Signal::derive(move || row.with(|r| r.as_ref().map_or(0, |r| r.head)));
    let real_weights = Signal::derive(move || state.with(|s| shows_real_weights(&s.model)));
    view! {
        <section class="backward-view">
            <JacobianControls state=state model=model shown_head=shown_head/>
            {move || match row.get() {
                Ok(r) => view! { <JacobianPanel r=r real_weights=real_weights.get()/> }.into_any(),
                Err(why) => view! { <p class="status error" data-testid="jacobian-error">{why}</p> }.into_any(),
            }}
            <GradCheckPanel state model engine/>
            <ModelGradientsPanel state engine/>
        </section>
    }
}

/// The explorer's head and its KV group through the backward on the engine, against the twin.
#[component]
fn GradCheckPanel(state: RwSignal<AppState>, model: Memo<Model>, engine: EngineSignal) -> impl IntoView {
    let result = newest_job(
        engine,
        move || model.with(|m| state.with(|s| grad_request(s, m))),
        |engine, planned, _| async move {
            let (req, head) = planned?;
            gradient_check(&engine, &req, head).await
        },
    );
    view! {
        <section class="panel" data-testid="grad-check-panel">
            <h3>"Gradients through attention, checked"</h3>
            {move || match result.get() {
                None => view! { <p class="status">"Running the backward pass…"</p> }.into_any(),
                Some(Err(why)) => view! { <p class="status error" data-testid="grad-check-error">{why}</p> }.into_any(),
                Some(Ok(c)) => view! { <GradCheckTable c/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn GradCheckTable(c: GradCheck) -> impl IntoView {
    view! {
        <p class="hint">{grad_heading(&c)}</p>
        <table class="data">
            <thead><tr><th>"tensor"</th><th>"relative error ‖GPU − twin‖ / ‖twin‖"</th><th>"largest |value|"</th></tr></thead>
            <tbody>
                {c.tensors.iter().map(|t| view! {
                    <tr data-testid="grad-check" data-tensor=t.tensor data-rel-error=t.rel_error.to_string() data-on-gpu=c.on_gpu.to_string()>
                        <td>{t.tensor}</td><td class="num">{format!("{:.2e}", t.rel_error)}</td><td class="num">{format!("{:.4}", t.largest)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        <p data-testid="grad-group-sum" data-error=c.group_sum_error.to_string()>{group_sum_line(&c)}</p>
    }
}

/// Every control writes its key through the link's parser; a refusal is said under the form.
#[component]
fn JacobianControls(state: RwSignal<AppState>, model: Memo<Model>, shown_head: Signal<u32>) -> impl IntoView {
    let refused = RwSignal::new(None::<String>);
    let write =
        move |key: &'static str, ev: leptos::ev::Event| write_typed(state, refused, key, &event_target_value(&ev));
    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default() data-testid="jacobian-controls">
            <label>"Model" <ModelSelect state/></label>
            <label>"Layer"
                <input type="number" min="0" data-testid="layer-input" prop:value=move || state.with(|s| s.model.layer)
                    on:change=move |ev| write("layer", ev)/>
            </label>
            <label>"Head"
                <input type="number" min="0" prop:max=move || model.with(|m| m.n_q_heads.saturating_sub(1))
                    data-testid="jacobian-head" prop:value=move || shown_head.get() on:change=move |ev| write("focus", ev)/>
            </label>
            <label>"Query row"
                <input type="number" min="0" data-testid="jacobian-row-input" placeholder="last"
                    prop:value=move || state.with(|s| s.backward.row.map(|r| r.to_string()).unwrap_or_default())
                    on:change=move |ev| write("row", ev)/>
            </label>
            <label>"Scores q·k times"
                <select data-testid="jacobian-scale" on:change=move |ev| write("jscale", ev)>
                    {move || state.with(|s| scale_choices(s.backward.jscale)).into_iter().map(|(id, label, chosen)| view! {
                        <option value=id selected=chosen>{label}</option>
                    }).collect_view()}
                </select>
            </label>
            <TextField state refused/>
            {move || refused.get().map(|why| view! { <small class="field-error" role="alert" data-testid="jacobian-refused">{why}</small> })}
        </form>
    }
}

#[component]
fn JacobianPanel(r: RowJacobian, real_weights: bool) -> impl IntoView {
    view! {
        <section class="panel" data-testid="jacobian-panel">
            <h3>{heading(&r)}</h3>
            <p class="hint">{r.layout_line.clone()}</p>
            <p class="hint" data-testid="synthetic-note">{weights_note(real_weights)}</p>
            {[r.head_note.clone(), r.row_note.clone()].into_iter().flatten().map(|note| view! {
                <p class="status" data-testid="jacobian-row-note">{note}</p>
            }).collect_view()}
            {r.jacobian.clone().map(|j| view! {
                <JacobianPicture jacobian=j keys=r.keys.clone() row=r.row trace=r.facts.trace
                    row_sum=r.largest_row_sum.unwrap_or(0.0)/>
                <p class="hint">{picture_caption(&r)}</p>
            })}
            {undrawn_note(&r).map(|note| view! { <p class="hint">{note}</p> })}
            <p data-testid="jacobian-facts">{facts_line(&r)}</p>
            <KeyList r=r.clone()/>
            <ScaleTable r=r/>
            <p class="explain">
                "Each entry is how much probability i moves when score j moves: p_i(1 − p_i) on the diagonal, \
                 −p_i·p_j off it. Every row sums to zero, since the probabilities always sum to one. A row that \
                 puts nearly everything on one key has a Jacobian near zero: whatever the loss asks for, its \
                 scores hardly change (vanishing gradients). A flat row has the largest trace, 1 − 1/n. \
                 Multiplying the scores by more sharpens the row and lowers its trace; attention's 1/√d keeps a \
                 wide head's rows from going one-hot."
            </p>
        </section>
    }
}

/// The Jacobian as a signed heatmap: red above zero (the diagonal), blue below; each cell's title
/// names the keys by position.
#[component]
fn JacobianPicture(jacobian: Vec<f64>, keys: Vec<u32>, row: u32, trace: f64, row_sum: f64) -> impl IntoView {
    let n = keys.len();
    let size = n.max(1);
    view! {
        <svg class="jacobian" data-testid="softmax-jacobian" data-row=row data-keys=n data-trace=trace.to_string()
            data-largest-row-sum=row_sum.to_string() viewBox=format!("0 0 {size} {size}") width="320" height="320"
            role="img" aria-label=format!("Softmax Jacobian of row {row}, {n} by {n}")>
            {cells(&jacobian, &keys).into_iter().map(|c| view! {
                <rect x=c.j y=c.i width="1" height="1" fill=c.color>
                    <title>{format!("∂p{}/∂s{} = {:.5}", c.key_i, c.key_j, c.value)}</title>
                </rect>
            }).collect_view()}
        </svg>
    }
}

/// The visible keys with their scores and probabilities.
#[component]
fn KeyList(r: RowJacobian) -> impl IntoView {
    view! {
        <table class="data" data-testid="jacobian-probs">
            <thead><tr><th>"key"</th><th>"token"</th><th>"score q·k"</th><th>"probability"</th></tr></thead>
            <tbody>
                {r.keys.iter().zip(&r.key_tokens).zip(r.scores.iter().zip(&r.probs)).map(|((k, t), (s, p))| view! {
                    <tr data-key=*k data-prob=p.to_string()>
                        <td class="num">{*k}</td><td>{t.clone()}</td>
                        <td class="num">{format!("{s:.3}")}</td><td class="num">{format!("{p:.4}")}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

/// The same row at every score scale, and a flat row over the same keys.
#[component]
fn ScaleTable(r: RowJacobian) -> impl IntoView {
    view! {
        <h4>"The same row at each scale of the scores"</h4>
        <table class="data" data-testid="jacobian-scales">
            <thead><tr><th>"scores times"</th><th>"top p"</th><th>"entropy (bits)"</th><th>"trace"</th><th>"Frobenius"</th></tr></thead>
            <tbody>
                {scale_rows(&r).into_iter().map(|row| view! {
                    <tr data-testid="jacobian-scale-row" data-scale=row.id data-trace=row.trace.to_string()
                        class:chosen=row.chosen>
                        <td>{row.label}</td>
                        {row.cells.into_iter().map(|c| view! { <td class="num">{c}</td> }).collect_view()}
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
