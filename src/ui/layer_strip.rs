//! Every layer of the model as a strip of cells coloured by its type (global, sliding window,
//! chunked; and in hybrids the layers without attention: state-space, linear attention, convolution,
//! feed-forward only), with the repeating pattern in words ("5 sliding : 1 global") and how far back
//! information reaches through the layers up to the chosen one. Click a layer to show its heads (or
//! why it has none). The words are [`crate::views::layer_kinds`]'.

use leptos::prelude::*;

use super::params::set_param;

use crate::model::Model;
use crate::state::AppState;
use crate::views::heatmaps::reach::reach_line;
use crate::views::layer_kinds::{StripCell, beside_class, legend, strip_cells, strip_summary};

#[component]
pub fn LayerStrip(state: RwSignal<AppState>, #[prop(into)] model: Signal<Model>) -> impl IntoView {
    let summary = move || model.with(strip_summary);
    let reach = Memo::new(move |_| {
        let layer = state.with(|s| s.model.layer);
        model.with(|m| reach_line(m, layer))
    });
    view! {
        <div class="layer-strip" data-testid="layer-strip">
            <p class="hint" data-testid="layer-summary">{summary}</p>
            <div class="layer-cells" role="group" aria-label="Layers">
                {move || model.with(|m| {
                    strip_cells(m).into_iter().enumerate().map(|(i, cell)| {
                        let layer = i as u32;
                        let StripCell { kind, title, shared: shares, beside } = cell;
                        let class = match beside {
                            Some(mixer) => format!("layer-cell {} {}", kind.noun(), beside_class(mixer)),
                            None => format!("layer-cell {}", kind.noun()),
                        };
                        view! {
                            <button
                                type="button"
                                class=class
                                class:shared=shares
                                class:active=move || state.with(|s| s.model.layer == layer)
                                aria-pressed=move || state.with(|s| s.model.layer == layer).to_string()
                                data-testid="layer-cell"
                                data-layer=layer
                                data-kind=kind.noun()
                                data-beside=beside.map(|m| m.noun())
                                title=title.clone()
                                aria-label=title
                                on:click=move |_| { let _ = set_param(state, "layer", &layer.to_string()); }
                            ></button>
                        }
                    }).collect_view()
                })}
            </div>
            <p class="reach-line" data-testid="stacked-reach" data-value=move || reach.with(|r| r.value())>
                {move || reach.with(|r| r.text.clone())}
            </p>
            <div class="layer-legend" aria-hidden="true" data-testid="layer-legend">
                {move || model.with(legend).into_iter().map(|e| view! {
                    <span data-legend=e.class><i class=format!("layer-cell {}", e.class)></i>{e.label}</span>
                }).collect_view()}
            </div>
        </div>
    }
}
