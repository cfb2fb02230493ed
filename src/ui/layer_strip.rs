//! Every layer of the model as a strip of cells coloured by its attention type (global, sliding
//! window, chunked), with the repeating pattern in words ("5 sliding : 1 global") and how far back
//! information reaches through the layers up to the chosen one. Click a layer to show its heads.

use leptos::prelude::*;

use crate::model::{LayerKind, Model};
use crate::state::AppState;
use crate::views::heatmaps::reach::reach_line;

fn kind_text(kind: LayerKind) -> String {
    match kind {
        LayerKind::Global => "global (causal over all tokens)".into(),
        LayerKind::Sliding { window_tokens } => format!("sliding window of {window_tokens} tokens"),
        LayerKind::Chunked { chunk_tokens } => format!("chunked, {chunk_tokens}-token chunks"),
        LayerKind::Stateful(mixer) => format!("{} (no attention: a constant state)", mixer.description()),
        LayerKind::FeedForward => "feed-forward only (no token mixer)".into(),
    }
}

#[component]
pub fn LayerStrip(state: RwSignal<AppState>, #[prop(into)] model: Signal<Model>) -> impl IntoView {
    let summary = move || {
        model.with(|m| {
            let counts = m
                .schedule
                .counts()
                .iter()
                .map(|c| format!("{} × {}", c.layers, kind_text(c.kind)))
                .collect::<Vec<_>>()
                .join(", ");
            format!("{} layers: {} ({counts})", m.n_layers(), m.schedule.summary())
        })
    };
    let reach = Memo::new(move |_| {
        let layer = state.with(|s| s.model.layer);
        model.with(|m| reach_line(m, layer))
    });
    view! {
        <div class="layer-strip" data-testid="layer-strip">
            <p class="hint" data-testid="layer-summary">{summary}</p>
            <div class="layer-cells" role="group" aria-label="Layers">
                {move || model.with(|m| {
                    m.schedule.layers().iter().enumerate().map(|(i, &kind)| {
                        let layer = i as u32;
                        let shares = !m.stores_kv(i);
                        let title = format!("Layer {layer}: {}{}", kind_text(kind), if shares { "; reads an earlier layer's KV cache" } else { "" });
                        view! {
                            <button
                                type="button"
                                class=format!("layer-cell {}", kind.noun())
                                class:shared=shares
                                class:active=move || state.with(|s| s.model.layer == layer)
                                aria-pressed=move || state.with(|s| s.model.layer == layer).to_string()
                                data-testid="layer-cell"
                                data-layer=layer
                                data-kind=kind.noun()
                                title=title.clone()
                                aria-label=title
                                on:click=move |_| { state.try_update(|s| s.model.layer = layer); }
                            ></button>
                        }
                    }).collect_view()
                })}
            </div>
            <p class="reach-line" data-testid="stacked-reach" data-value=move || reach.with(|r| r.value())>
                {move || reach.with(|r| r.text.clone())}
            </p>
            <div class="layer-legend" aria-hidden="true">
                <span><i class="layer-cell global"></i>"global"</span>
                <span><i class="layer-cell sliding"></i>"sliding window"</span>
                <span><i class="layer-cell chunked"></i>"chunked"</span>
                <span><i class="layer-cell shared"></i>"reuses another layer's cache"</span>
            </div>
        </div>
    }
}
