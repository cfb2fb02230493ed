//! The distance view: how far back each head of the explorer's layer looks, one bar chart a head.
//! What it computes and says is worked out in [`crate::views::distance`]; this file runs the job on
//! the engine and lays the results out.

use leptos::prelude::*;

use crate::model::Model;
use crate::state::AppState;
use crate::ui::engine_signal::{EngineSignal, newest_job};
use crate::ui::explorer_controls::MaskControls;
use crate::ui::model_picker::ModelSelect;
use crate::ui::params::write_typed;
use crate::ui::text_field::TextField;
use crate::views::distance::compute::{DistanceRun, plan, run};
use crate::views::distance::figures::{
    HeadDistance, SYNTHETIC_NOTE, bars, head_distances, head_sentence, percent, tier_line,
};

#[component]
pub fn DistanceView(state: RwSignal<AppState>, model: Memo<Model>, engine: EngineSignal) -> impl IntoView {
    // The job reruns only when what it computes changes (not for `near`, nor another view's keys).
    let planned = Memo::new(move |_| model.with(|m| state.with(|s| plan(s, m))));
    let result = newest_job(
        engine,
        move || planned.get(),
        |engine, planned, wanted| async move { run(&engine, &planned?, &move || wanted.get()).await },
    );
    let near = Memo::new(move |_| state.with(|s| s.distance.near));
    let adapter = move || engine.with(|e| e.as_ref().map(|e| e.describe()).unwrap_or_default());
    view! {
        <section class="distance-view" data-testid="distance-view">
            <DistanceControls state/>
            <p class="hint" data-testid="synthetic-note">{SYNTHETIC_NOTE}</p>
            {move || match result.get() {
                None => view! { <p class="status">"Computing each head's attention by distance…"</p> }.into_any(),
                Some(Err(why)) => view! { <p class="status error" data-testid="distance-error">{why}</p> }.into_any(),
                Some(Ok(r)) => view! { <DistanceHeads r adapter=adapter() near=near.get()/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn DistanceHeads(r: DistanceRun, adapter: String, near: u32) -> impl IntoView {
    view! {
        <p class="hint" data-testid="distance-tier" data-on-gpu=r.on_gpu.to_string() data-n=r.n>{tier_line(&r, &adapter)}</p>
        <div class="distance-heads">
            {head_distances(&r, near).into_iter().map(|h| view! { <HeadBars h near/> }).collect_view()}
        </div>
    }
}

/// One head: its bars (0, 1, 2… tokens back, then further, then ahead) and its sentence.
#[component]
fn HeadBars(h: HeadDistance, near: u32) -> impl IntoView {
    let bars = bars(&h);
    let tallest = bars.iter().map(|b| b.mass).fold(0.0, f64::max).max(1e-12);
    let width = bars.len() * 10;
    let joined = |xs: &[f64]| xs.iter().map(|x| format!("{x:.6}")).collect::<Vec<_>>().join(",");
    view! {
        <figure class="distance-head" data-testid="distance-head" data-head=h.head
            data-designed=h.designed.map(|t| t.id()).unwrap_or("") data-mean=format!("{:.6}", h.mean_distance)
            data-near=format!("{:.6}", h.near_share) data-peak=h.peak data-ahead=format!("{:.6}", h.ahead)
            data-further=format!("{:.6}", h.further) data-total=format!("{:.6}", h.total) data-bars=joined(&h.bars)>
            <svg viewBox=format!("0 0 {width} 68") role="img" aria-label=format!("head {} by distance", h.head)>
                {bars.into_iter().enumerate().map(|(i, bar)| {
                    let height = 56.0 * bar.mass / tallest;
                    let x = i * 10;
                    view! {
                        <rect class=bar.class x=x + 1 y=58.0 - height width="8" height=height>
                            <title>{format!("{}: {}", bar.label, percent(bar.mass))}</title></rect>
                        <text x=x + 5 y="66">{bar.axis}</text>
                    }
                }).collect_view()}
            </svg>
            <figcaption>{head_sentence(&h, near)}</figcaption>
        </figure>
    }
}

/// The model, text, mask, designed heads and `near`, each written through the link's parser.
#[component]
fn DistanceControls(state: RwSignal<AppState>) -> impl IntoView {
    let refused = RwSignal::new(None::<String>);
    let write =
        move |key: &'static str, ev: leptos::ev::Event| write_typed(state, refused, key, &event_target_value(&ev));
    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default() data-testid="distance-controls">
            <label>"Model" <ModelSelect state/></label>
            <label>"Layer" <input type="number" min="0" data-testid="distance-layer"
                prop:value=move || state.with(|s| s.model.layer) on:change=move |ev| write("layer", ev)/></label>
            <TextField state refused/>
            <MaskControls state/>
            <label class="check"><input type="checkbox" data-testid="distance-teach" prop:checked=move || state.with(|s| s.explorer.teach)
                on:change=move |ev| write_typed(state, refused, "teach", if event_target_checked(&ev) { "on" } else { "off" })/>
                "designed heads"</label>
            <label>"Near means at most" <input type="number" min="0" data-testid="distance-near"
                prop:value=move || state.with(|s| s.distance.near) on:change=move |ev| write("near", ev)/>" tokens away"</label>
            {move || refused.get().map(|why| view! { <small class="field-error" role="alert" data-testid="distance-refused">{why}</small> })}
        </form>
    }
}
