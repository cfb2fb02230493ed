//! The KV-cache view: the exact figures, a per-layer-type breakdown that shows why, a GPU memory
//! budget with the longest context that fits, the memory-against-context chart, and the live decode
//! animation. What each shows is derived in [`crate::views::kv`]; this file only lays it out.

use leptos::prelude::*;

use crate::model::budget::format_gb;
use crate::model::plot::Axis;
use crate::model::{DType, Model};
use crate::state::AppState;
use crate::ui::chart::LineChart;
use crate::ui::decode_demo::DecodeDemo;
use crate::ui::engine_signal::EngineSignal;
use crate::ui::model_picker::{KeyFigures, ModelPicker};
use crate::ui::params::set_param;
use crate::views::kv::breakdown::{BreakdownRow, breakdown_table};
use crate::views::kv::budget::{FitSummary, budget_choices, fit_summary, weights_option_text};
use crate::views::kv::chart::{decode_marker, kv_chart};

#[component]
pub fn KvView(state: RwSignal<AppState>, model: Memo<Model>, engine: EngineSignal) -> impl IntoView {
    // The decode animation's position: (tokens of request A, bytes of the model's cache at that length).
    let decode_marker = RwSignal::new(None::<(u64, u128)>);
    view! {
        <section class="kv-view">
            <ModelPicker state=state model=model/>
            <KeyFigures state=state model=model/>
            <Breakdown state=state model=model/>
            <Budget state=state model=model/>
            <KvChart state=state model=model marker=decode_marker/>
            <DecodeDemo state=state model=model engine=engine marker=decode_marker/>
        </section>
    }
}

/// One row per layer type: the columns a calculator needs to be right about.
#[component]
fn Breakdown(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let table = Memo::new(move |_| model.with(|m| state.with(|s| breakdown_table(m, &s.kv))));
    view! {
        <section class="panel breakdown">
            <h3>"Why: the cache by layer type"</h3>
            {move || {
                let Some(t) = table.get() else {
                    return view! { <p class="status error">"These sizes are too large to represent."</p> }.into_any();
                };
                let state_column = t.state_total_text.is_some();
                view! {
                    <div class="table-scroll">
                        <table class="data">
                            <thead><tr>
                                <th scope="col">"Layer type"</th><th scope="col">"Layers storing a cache"</th>
                                <th scope="col">"KV heads"</th><th scope="col">"Head dim"</th>
                                <th scope="col">"Elements per token per layer"</th>
                                <th scope="col">{t.tokens_heading}</th>
                                <th scope="col">{t.bytes_heading}</th>
                                {state_column.then(|| view! { <th scope="col">"Recurrent state per sequence"</th> })}
                            </tr></thead>
                            <tbody>{t.rows.into_iter().map(|r| view! { <BreakdownRowView row=r state_column=state_column/> }).collect_view()}</tbody>
                            <tfoot><tr>
                                <th scope="row">"Total"</th><td colspan="5"></td>
                                <td class="num">{t.total_text}</td>
                                {t.state_total_text.map(|text| view! { <td class="num">{text}</td> })}
                            </tr></tfoot>
                        </table>
                    </div>
                    {t.state_note.map(|note| view! { <p class="explain" data-testid="state-note">{note}</p> })}
                    {t.mla_note.map(|note| view! { <p class="explain" data-testid="mla-note">{note}</p> })}
                    {t.sliding_note.map(|note| view! { <p class="explain" data-testid="sliding-note">{note}</p> })}
                }.into_any()
            }}
            <p class="explain">
                "A layer caches K and V for each of its KV heads (not its query heads: with GQA several query heads "
                "share one), unless K = V, and only for the tokens it can still attend to: all of them for a global "
                "layer, the last W for a sliding window, the current chunk for chunked attention. MLA caches one "
                "compressed latent and a shared RoPE key per token, whatever the head count (DeepSeek V3.2 also its "
                "lightning indexer's key). Layers that reuse "
                "another layer's cache store nothing."
            </p>
        </section>
    }
}

#[component]
fn BreakdownRowView(row: BreakdownRow, state_column: bool) -> impl IntoView {
    let state_cell = state_column.then(|| match row.state_text {
        Some((text, formula)) => {
            view! { <td class="num">{text}<br/><small class="formula">{formula}</small></td> }.into_any()
        }
        None => view! { <td class="num">"none"</td> }.into_any(),
    });
    view! {
        <tr data-testid="kv-breakdown-row" data-kind=row.kind_noun data-bytes=row.bytes.to_string()
            data-cached-tokens=row.cached_tokens.to_string() data-layers=row.layer_count.to_string()
            data-state-bytes=row.state_bytes.to_string()>
            <th scope="row">{row.kind_name}</th>
            <td>{row.layers}</td>
            <td>{row.kv_heads}</td>
            <td>{row.head_dims}</td>
            <td>{row.elements_per_token}</td>
            <td>{row.cached_tokens_text}<br/><small>{row.cached_tokens_reason}</small></td>
            <td class="num">{row.bytes_text}<br/><small class="formula">{row.formula}</small></td>
            {state_cell}
        </tr>
    }
}

/// The budget, whether the weights count, and what fits.
#[component]
fn Budget(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let summary = Memo::new(move |_| model.with(|m| state.with(|s| fit_summary(m, &s.kv))));
    let budget_text = RwSignal::new(state.with_untracked(|s| format_gb(s.kv.budget_bytes)));
    let budget_error = RwSignal::new(None::<String>);
    view! {
        <section class="panel budget">
            <h3>"Does it fit? A GPU memory budget"</h3>
            <form class="controls inline" on:submit=|ev| ev.prevent_default()>
                <label>
                    "Budget (GB = 10^9 bytes)"
                    <input type="text" inputmode="decimal" data-testid="budget-input"
                        prop:value=move || budget_text.get()
                        on:change=move |ev| {
                            let text = event_target_value(&ev);
                            budget_error.set(set_param(state, "budget", &text).err());
                            budget_text.set(text);
                        }/>
                </label>
                <div class="chips" role="group" aria-label="Common GPU memory sizes">
                    {budget_choices().into_iter().map(|c| {
                        let bytes = c.bytes;
                        view! {
                            <button type="button" class="chip" data-testid="budget-preset" data-gb=c.gb title=c.title
                                class:active=move || state.with(|s| s.kv.budget_bytes == bytes)
                                on:click=move |_| {
                                    budget_error.set(None);
                                    budget_text.set(c.gb.to_string());
                                    let _ = set_param(state, "budget", &c.gb.to_string());
                                }>
                                {c.text}
                            </button>
                        }
                    }).collect_view()}
                </div>
                <label>
                    "Weights"
                    <select data-testid="weights-select" on:change=move |ev| {
                        let _ = set_param(state, "weights", &event_target_value(&ev));
                    }>
                        <option value="off" selected=move || state.with(|s| s.kv.weights.is_none())>"not counted (cache only)"</option>
                        {DType::ALL.into_iter().map(|d| view! {
                            <option value=d.url_name() selected=move || state.with(|s| s.kv.weights == Some(d))>
                                {weights_option_text(d)}
                            </option>
                        }).collect_view()}
                    </select>
                </label>
            </form>
            {move || budget_error.get().map(|e| view! { <p class="status error" data-testid="budget-error">{e}</p> })}
            {move || match summary.get() {
                None => view! { <p class="status error">"These sizes are too large to represent."</p> }.into_any(),
                Some(s) => view! { <FitSummaryView summary=s/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn FitSummaryView(summary: FitSummary) -> impl IntoView {
    let s = summary;
    view! {
        <p class="big"><strong data-testid="budget-fit" data-value=s.fit_value data-room=s.kv_room_bytes.to_string()>{s.headline}</strong></p>
        <p data-testid="budget-weights" data-value=s.weights_bytes.to_string()>{s.weights_line}</p>
        <p data-testid="budget-at-ctx" data-fits=s.ctx_fits.to_string()>{s.at_ctx} " The chosen context " <strong>{s.verdict}</strong> "."</p>
        <p data-testid="budget-sequences" data-value=s.sequences_value>{s.sequences_line}</p>
        <p class="hint">"Activations, the runtime's workspace and fragmentation also take memory; real deployments keep a margin. Quantisation scales are not counted."</p>
    }
}

/// The memory-against-context chart with the budget line and the decode marker.
#[component]
fn KvChart(state: RwSignal<AppState>, model: Memo<Model>, marker: RwSignal<Option<(u64, u128)>>) -> impl IntoView {
    let data = Memo::new(move |_| model.with(|m| state.with(|s| kv_chart(m, &s.kv))));
    let marker_point = Signal::derive(move || marker.get().map(|(tokens, bytes)| decode_marker(tokens, bytes)));
    view! {
        <section class="panel chart">
            <div class="chart-head">
                <h3>"KV memory against context length"</h3>
                <label>
                    "Axes "
                    <select data-testid="axis-select" on:change=move |ev| {
                        let _ = set_param(state, "axis", &event_target_value(&ev));
                    }>
                        {Axis::ALL.into_iter().map(|a| view! {
                            <option value=a.name() selected=move || state.with(|s| s.kv.axis == a)>{a.name()}</option>
                        }).collect_view()}
                    </select>
                </label>
            </div>
            {move || match data.get() {
                Some(d) => view! { <LineChart data=d marker=marker_point testid="kv-chart"/> }.into_any(),
                None => view! { <p class="status error">"These sizes are too large to chart."</p> }.into_any(),
            }}
            <p class="explain">
                "Each line is one layer type (all its layers together) and the total. A sliding-window or chunked "
                "layer stops growing at its window: its line goes flat, while global layers keep growing. The dashed "
                "line is the budget left for the cache; where the total crosses it is the longest context that fits. "
                "A model with state-space, linear-attention or convolution layers also keeps a recurrent state of "
                "fixed size per sequence: its own flat line, and the total is then memory per sequence, cache plus state."
            </p>
        </section>
    }
}
