//! The compare view: the chosen model re-expressed as each KV-saving variant, with exact bytes and
//! the ratio to MHA at the chosen context and dtype, the same at every dtype, the attention
//! parameters each variant keeps or saves, where the prefill FLOPs go, and what one decoded token
//! costs in FLOPs and bytes beside the prefill. What each panel shows is
//! derived in [`crate::views::compare`]; this file only lays it out.

use leptos::prelude::*;

use crate::ui::params::edit;

use crate::model::Model;
use crate::state::AppState;
use crate::ui::chart::BarTrack;
use crate::ui::model_picker::{KeyFigures, ModelPicker};
use crate::ui::trained_variants_panel::TrainedVariantsPanel;
use crate::views::compare::bars::{BarRow, bars, bars_heading};
use crate::views::compare::decode::{DecodeRow, decode_heading, decode_rows};
use crate::views::compare::dtype_matrix::{DtypeRow, dtype_headings, dtype_matrix, matrix_heading};
use crate::views::compare::flops::{FlopRow, crossover_line, flop_rows, flops_heading, has_mixers};
use crate::views::compare::knobs::{Knob, Knobs, gqa_choices};
use crate::views::compare::param_deltas::{ParamRow, param_rows};

#[component]
pub fn CompareView(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    view! {
        <section class="compare-view">
            <ModelPicker state=state model=model/>
            <KeyFigures state=state model=model/>
            <VariantKnobs state=state model=model/>
            <Bars state=state model=model/>
            <DtypeMatrix state=state model=model/>
            <ParamDeltas state=state model=model/>
            <Flops state=state model=model/>
            <Decode state=state model=model/>
            <TrainedVariantsPanel/>
        </section>
    }
}

/// The parameters of the parameterised variants: GQA groups, window, hybrid ratio, MLA rank, sharing.
#[component]
fn VariantKnobs(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let knobs = Memo::new(move |_| model.with(|m| state.with(|s| Knobs::of(&s.compare.chosen(m)))));
    // The entered text makes a variant that replaces its family's in the list (when it is valid).
    let change = move |knob: Knob, ev: leptos::ev::Event| {
        if let Some(v) = knobs.get_untracked().variant(knob, &event_target_value(&ev)) {
            let base = model.get_untracked();
            state.update(|s| s.choose_variant(&base, v));
        }
    };
    view! {
        <form class="controls knobs" on:submit=|ev| ev.prevent_default()>
            <label>
                "GQA: KV heads"
                <select data-testid="gqa-groups" on:change=move |ev| change(Knob::GqaGroups, ev)>
                    {move || model.with(|m| gqa_choices(m.n_q_heads)).into_iter().map(|g| view! {
                        <option value=g selected=move || knobs.with(|k| k.gqa_groups == g)>{g}</option>
                    }).collect_view()}
                </select>
            </label>
            {Knob::NUMBER_FIELDS.into_iter().map(|(knob, label, testid, min)| view! {
                <label>
                    {label}
                    <input type="number" min=min data-testid=testid prop:value=move || knobs.with(|k| k.shown(knob).to_string())
                        on:change=move |ev| change(knob, ev)/>
                </label>
            }).collect_view()}
            <button type="button" class="chip" data-testid="variants-reset" on:click=move |_| { let _ = edit(state, &[("variants", None)]); }>
                "Standard set"
            </button>
        </form>
    }
}

/// The bars: whole cache at the context, exact bytes, ratio to MHA.
#[component]
fn Bars(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let bars = Memo::new(move |_| model.with(|m| state.with(|s| bars(m, &s.compare, &s.kv))));
    view! {
        <section class="panel">
            <h3>{move || state.with(|s| bars_heading(&s.kv))}</h3>
            {move || match bars.get() {
                Err(e) => view! { <p class="status error">{e}</p> }.into_any(),
                Ok(b) => view! {
                    <ul class="bars">{b.rows.into_iter().map(|row| view! { <BarRowView row=row/> }).collect_view()}</ul>
                    {b.skipped.map(|skipped| view! {
                        <p class="status" data-testid="variants-skipped">"Not shown: " {skipped}</p>
                    })}
                    {b.state_note.map(|note| view! { <p class="status" data-testid="variants-state-note">{note}</p> })}
                }.into_any(),
            }}
            <p class="explain">
                "Every variant starts from the same plain MHA form of the model (all layers global, one KV head per "
                "query head, its head dimension) and applies one technique, so each bar isolates one idea; "
                "\"As published\" is the real model with all of its techniques combined. Bars share one linear scale."
            </p>
        </section>
    }
}

#[component]
fn BarRowView(row: BarRow) -> impl IntoView {
    view! {
        <li class="bar-row" data-testid="variant-row" data-variant=row.variant_id
            data-bytes=row.kv_total_bytes.to_string() data-bytes-per-token=row.kv_bytes_per_token.to_string()
            data-ratio=row.ratio_to_mha.to_string() data-state-bytes=row.state_bytes.to_string()>
            <span class="bar-label">{row.label}</span>
            <BarTrack fraction=row.fraction class=row.class/>
            <span class="bar-value">
                {row.bytes_text}
                <small>{row.detail}</small>
            </span>
        </li>
    }
}

/// The same comparison at every dtype: exact bytes in each cell.
#[component]
fn DtypeMatrix(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let rows = Memo::new(move |_| model.with(|m| state.with(|s| dtype_matrix(m, &s.compare, &s.kv))));
    view! {
        <section class="panel">
            <h3>{move || state.with(|s| matrix_heading(&s.kv))}</h3>
            <div class="table-scroll">
                <table class="data matrix">
                    <thead><tr>
                        <th scope="col">"Variant"</th>
                        {dtype_headings().into_iter().map(|h| view! { <th scope="col">{h}</th> }).collect_view()}
                    </tr></thead>
                    <tbody>
                        {move || rows.get().into_iter().map(|row| view! { <DtypeRowView row=row/> }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
}

#[component]
fn DtypeRowView(row: DtypeRow) -> impl IntoView {
    let variant_id = row.variant_id;
    let cells = row
        .cells
        .into_iter()
        .map(|c| {
            view! {
                <td class="num" class:chosen=c.chosen data-testid="dtype-cell" data-variant=variant_id.clone() data-dtype=c.dtype.url_name()
                    data-value=c.value title=c.title>
                    {c.text}
                </td>
            }
        })
        .collect_view();
    view! { <tr><th scope="row">{row.label}</th>{cells}</tr> }
}

/// Attention weights of the whole model per variant, and the change against MHA.
#[component]
fn ParamDeltas(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let rows = Memo::new(move |_| model.with(|m| state.with(|s| param_rows(m, &s.compare, &s.kv))));
    view! {
        <section class="panel">
            <h3>"Attention parameters (whole model)"</h3>
            {move || rows.get().map(|rows| view! {
                <div class="table-scroll">
                    <table class="data">
                        <thead><tr><th scope="col">"Variant"</th><th scope="col">"Attention parameters"</th><th scope="col">"Change against MHA"</th></tr></thead>
                        <tbody>{rows.into_iter().map(|row| view! { <ParamRowView row=row/> }).collect_view()}</tbody>
                    </table>
                </div>
                <p class="explain">
                    "GQA and MQA shrink the K and V projections with the cache (Q and O stay); K = V drops the V "
                    "projection; MLA trades K/V projections for a down- and up-projection through the latent. Sliding "
                    "windows, hybrids and cross-layer sharing save memory without changing a single weight."
                </p>
            })}
        </section>
    }
}

#[component]
fn ParamRowView(row: ParamRow) -> impl IntoView {
    view! {
        <tr data-testid="params-row" data-variant=row.variant_id data-value=row.params_total.to_string() data-delta=row.delta_vs_mha.to_string()>
            <th scope="row">{row.label}</th>
            <td class="num">{row.total_text}</td>
            <td class="num">{row.delta_text}</td>
        </tr>
    }
}

/// Where a prefill's FLOPs go, per variant, and where attention starts to dominate.
#[component]
fn Flops(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let rows = Memo::new(move |_| model.with(|m| state.with(|s| flop_rows(m, &s.compare, s.kv.ctx_tokens))));
    let crossover = Memo::new(move |_| model.with(crossover_line));
    let mixers = Memo::new(move |_| model.with(has_mixers));
    view! {
        <section class="panel">
            <h3>{move || state.with(|s| flops_heading(s.kv.ctx_tokens))}</h3>
            <div class="table-scroll">
                <table class="data">
                    <thead><tr>
                        <th scope="col">"Variant"</th><th scope="col">"Q, K, V, O projections"</th>
                        <th scope="col">"Attention core (QKᵀ and PV)"</th>
                        {move || mixers.get().then(|| view! { <th scope="col">"Recurrent mixers"</th> })}
                        <th scope="col">"FFN (active)"</th><th scope="col">"Total"</th>
                    </tr></thead>
                    <tbody>{move || rows.get().into_iter().map(|row| view! { <FlopRowView row=row mixers=mixers.get()/> }).collect_view()}</tbody>
                </table>
            </div>
            <p class="explain" data-testid="crossover">{move || crossover.get()}</p>
            <p class="explain">
                "A multiply-add counts as 2 FLOPs. The core counts only the (query, key) pairs each layer's mask lets "
                "through, exactly: causal halves it, a window caps it. MLA is counted in its plain form (K and V rebuilt "
                "per head). Embeddings, the LM head, norms and softmax are left out. A recurrent mixer (state-space, "
                "linear attention, convolution) costs 2 FLOPs per weight per token and has no attention core; its "
                "state update, a few FLOPs per state element, is left out."
            </p>
        </section>
    }
}

#[component]
fn FlopRowView(row: FlopRow, mixers: bool) -> impl IntoView {
    let f = row.flops;
    view! {
        <tr data-testid="flops-row" data-variant=row.variant_id data-projections=f.projections.to_string()
            data-core=f.attention_core.to_string() data-mixer=f.mixer.to_string() data-ffn=f.ffn.to_string()>
            <th scope="row">{row.label}</th>
            <td class="num">{row.projections_text}</td>
            <td class="num">{row.core_text}</td>
            {mixers.then(|| view! { <td class="num">{row.mixer_text}</td> })}
            <td class="num">{row.ffn_text}</td>
            <td class="num">{row.total_text}<BarTrack fraction=row.fraction class="variant"/></td>
        </tr>
    }
}

/// One decoded token beside the prefill: its FLOPs, the bytes it reads, FLOPs per byte of both.
#[component]
fn Decode(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let rows = Memo::new(move |_| model.with(|m| state.with(|s| decode_rows(m, &s.compare, &s.kv))));
    let mixers = Memo::new(move |_| model.with(has_mixers));
    view! {
        <section class="panel" data-testid="decode-cost">
            <h3>{move || state.with(|s| decode_heading(&s.kv))}</h3>
            {move || rows.get().map(|rows| view! {
                <div class="table-scroll">
                    <table class="data">
                        <thead><tr>
                            <th scope="col">"Variant"</th><th scope="col">"Projections"</th>
                            <th scope="col">"Attention core"</th>
                            {mixers.get().then(|| view! { <th scope="col">"Recurrent mixers"</th> })}
                            <th scope="col">"FFN (active)"</th>
                            <th scope="col">"Weights read"</th><th scope="col">"KV cache read"</th>
                            {mixers.get().then(|| view! { <th scope="col">"State read and written back"</th> })}
                            <th scope="col">"FLOPs per byte, decode"</th><th scope="col">"FLOPs per byte, prefill"</th>
                        </tr></thead>
                        <tbody>{rows.into_iter().map(|row| view! { <DecodeRowView row=row mixers=mixers.get()/> }).collect_view()}</tbody>
                    </table>
                </div>
            })}
            <p class="explain">
                "A decoded token multiplies every weight it uses once (2 FLOPs per weight) and reads every cached "
                "key and value its query sees: all of them in a global layer, at most the window in a sliding one. "
                "A prefill of the same context reads the weights once for all its tokens and writes the cache once, "
                "so it does far more work per byte. MLA decodes in its absorbed form: each head reads the latent "
                "directly. A layer with a recurrent state reads it and writes it back once per token, the same at any "
                "context. Activations, embeddings and the LM head are left out."
            </p>
        </section>
    }
}

#[component]
fn DecodeRowView(row: DecodeRow, mixers: bool) -> impl IntoView {
    let d = row.decode;
    view! {
        <tr data-testid="decode-row" data-variant=row.variant_id data-projections=d.flops.projections.to_string()
            data-core=d.flops.attention_core.to_string() data-mixer=d.flops.mixer.to_string() data-ffn=d.flops.ffn.to_string()
            data-weight-bytes=d.weight_bytes.to_string() data-kv-bytes=d.kv_bytes.to_string()
            data-state-bytes=d.state_bytes.to_string()
            data-decode-intensity=d.intensity().to_string() data-prefill-intensity=row.prefill_intensity.to_string()>
            <th scope="row">{row.label}</th>
            <td class="num">{row.projections_text}</td>
            <td class="num">{row.core_text}</td>
            {mixers.then(|| view! { <td class="num">{row.mixer_text}</td> })}
            <td class="num">{row.ffn_text}</td>
            <td class="num">{row.weights_text}</td>
            <td class="num">{row.kv_text}</td>
            {mixers.then(|| view! { <td class="num">{row.state_text}</td> })}
            <td class="num">{row.decode_intensity_text}</td>
            <td class="num">{row.prefill_intensity_text}</td>
        </tr>
    }
}
