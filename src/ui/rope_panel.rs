//! The explorer's RoPE panel (`rope=on`): the chosen layer's rotating pairs and their wavelengths,
//! drawn by the line chart from [`crate::views::heatmaps::rope`].

use leptos::prelude::*;

use super::chart::LineChart;
use crate::model::Model;
use crate::state::AppState;
use crate::views::heatmaps::rope::{RopeFigures, rope_panel};

#[component]
pub fn RopePanel(state: RwSignal<AppState>, #[prop(into)] model: Signal<Model>) -> impl IntoView {
    let panel = Memo::new(move |_| {
        let layer = state.with(|s| s.model.layer);
        model.with(|m| rope_panel(m, layer))
    });
    let figure =
        move |f: fn(&RopeFigures) -> String| move || panel.with(|p| p.figures.as_ref().map(f).unwrap_or_default());
    view! {
        <section class="panel rope-panel" data-testid="rope-panel"
            data-theta=figure(|f| f.theta.to_string())
            data-rotary-dims=figure(|f| f.rotary.rotary_dims().to_string())
            data-head-dim=figure(|f| f.rotary.head_dim.to_string())
            data-shortest=figure(|f| format!("{:.4}", f.shortest_wavelength()))
            data-longest=figure(|f| format!("{:.4}", f.longest_wavelength()))>
            <h3>{move || panel.with(|p| p.heading.clone())}</h3>
            <p class="hint" data-testid="rope-summary">{move || panel.with(|p| p.summary.clone())}</p>
            {move || panel.with(|p| p.chart.clone()).map(|data| view! {
                <LineChart data=data marker=Signal::derive(|| None) testid="rope-chart"/>
            })}
            <p class="formula" data-testid="rope-formula">{figure(|f| f.formula())}</p>
            <p class="explain">
                "Pair j of a query and of a key both turn by θj radians per position, so their dot product depends "
                "only on how far apart the two tokens are. Fast pairs (left) tell neighbours apart; slow pairs "
                "(right) change little across the whole context."
            </p>
            <p class="hint">
                "Drawn from the config's θ, rotary fraction and linear or proportional scaling. Other RoPE scalings "
                "(llama3, YaRN) are drawn unscaled here; the model's notes in the KV view say where they apply. (A "
                "dropped Llama 3.1 checkpoint's own forward pass does apply its llama3 scaling.)"
            </p>
        </section>
    }
}
