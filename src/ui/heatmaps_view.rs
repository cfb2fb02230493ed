//! The heatmap view: type a sentence, pick a mask, and see one head's attention computed on the GPU.

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::app::EngineSignal;
use super::browser;
use super::heatmap::{Heatmap, HeadMap};
use crate::attention::inputs::single_head_inputs;
use crate::attention::mask::MaskKind;
use crate::attention::AttentionShape;
use crate::colormap::ColorScale;
use crate::state::AppState;

/// Most tokens this small demonstration shows (the explorer for long sequences pools on the GPU).
const MAX_TOKENS: usize = 256;

/// A finished computation, ready to draw.
#[derive(Clone, Debug, PartialEq)]
struct Computed {
    map: HeadMap,
    millis: f64,
    on_gpu: bool,
}

#[component]
pub fn HeatmapsView(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let result = RwSignal::new(None::<Result<Computed, String>>);
    // Each request gets a number; a slow answer to an older request never overwrites a newer one.
    let latest_request = StoredValue::new(0u64);

    Effect::new(move |_| {
        let (text, seed, mask) = state.with(|s| (s.text.clone(), s.seed, s.mask()));
        let Some(engine) = engine.get() else { return };
        let request = latest_request.get_value() + 1;
        latest_request.set_value(request);
        spawn_local(async move {
            let inputs = single_head_inputs(&text, seed);
            let n = inputs.tokens.len();
            let outcome = if n == 0 {
                Err("Type a sentence to see its attention.".to_string())
            } else if n > MAX_TOKENS {
                Err(format!("{n} tokens is more than this view shows ({MAX_TOKENS}); shorten the text."))
            } else {
                let shape = AttentionShape::square(1, n as u32, inputs.d_head as u32);
                let scale = 1.0 / (inputs.d_head as f32).sqrt();
                let started_ms = browser::now_ms();
                engine.probabilities(&inputs.q, &inputs.k, &inputs.v, shape, mask, scale).await.map(|probs| Computed {
                    map: HeadMap {
                        head: 0,
                        kv_head: 0,
                        row_tokens: inputs.tokens.clone(),
                        col_tokens: inputs.tokens,
                        probs,
                        mask,
                        q_offset: shape.q_offset(),
                    },
                    millis: browser::now_ms() - started_ms,
                    on_gpu: engine.is_gpu(),
                })
            };
            // The view may have been left while the GPU worked: then there is nobody to tell.
            if latest_request.try_get_value() == Some(request) {
                result.try_set(Some(outcome));
            }
        });
    });

    view! {
        <section class="heatmaps">
            <Controls state=state/>
            <div class="result" aria-live="polite">
                {move || match result.get() {
                    None => view! { <p class="status" data-testid="heatmap-status">"Computing…"</p> }.into_any(),
                    Some(Err(why)) => view! { <p class="status error" data-testid="heatmap-error">{why}</p> }.into_any(),
                    Some(Ok(done)) => {
                        let where_ = if done.on_gpu { "on the GPU" } else { "on the CPU" };
                        let summary = format!(
                            "{} tokens · {} mask · computed {where_} in {:.1} ms",
                            done.map.row_tokens.len(), done.map.mask, done.millis
                        );
                        view! {
                            <p class="status" data-testid="heatmap-status">{summary}</p>
                            <Heatmap map=done.map scale=state.with_untracked(|s| s.scale)/>
                        }
                        .into_any()
                    }
                }}
            </div>
            <p class="explain">
                "Each row is a query token, each column a key token; a row shows how one token spreads its attention "
                "over the tokens it may see, and sums to 1. The embeddings and the projection weights are synthetic "
                "(seeded random numbers, not a trained model), so the patterns come from the mask, the positions "
                "and repeated words, not from meaning."
            </p>
        </section>
    }
}

/// Text, mask, sizes, seed, colour scale and the copy-link button.
#[component]
fn Controls(state: RwSignal<AppState>) -> impl IntoView {
    let copied = RwSignal::new(None::<bool>);
    let mask_is = move |kind: MaskKind| state.with(|s| s.mask == kind);
    let number_input = move |ev: &leptos::ev::Event| event_target_value(ev).trim().parse::<u32>().ok().filter(|&x| x >= 1);

    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default()>
            <label class="wide">
                "Text"
                <input
                    type="text"
                    data-testid="text-input"
                    maxlength=crate::state::MAX_TEXT_CHARS
                    prop:value=move || state.with(|s| s.text.clone())
                    on:input=move |ev| state.update(|s| s.text = event_target_value(&ev))
                />
            </label>
            <label>
                "Mask"
                <select
                    data-testid="mask-select"
                    on:change=move |ev| {
                        if let Ok(kind) = event_target_value(&ev).parse::<MaskKind>() {
                            state.update(|s| s.mask = kind);
                        }
                    }
                >
                    {MaskKind::ALL
                        .into_iter()
                        .map(|kind| view! { <option value=kind.name() selected=move || mask_is(kind)>{kind.name()}</option> })
                        .collect_view()}
                </select>
            </label>
            <Show when=move || mask_is(MaskKind::Sliding)>
                <label>
                    "Window"
                    <input type="number" min="1" data-testid="window-input"
                        prop:value=move || state.with(|s| s.window)
                        on:input=move |ev| { if let Some(w) = number_input(&ev) { state.update(|s| s.window = w) } }/>
                </label>
            </Show>
            <Show when=move || mask_is(MaskKind::Chunked)>
                <label>
                    "Chunk"
                    <input type="number" min="1" data-testid="chunk-input"
                        prop:value=move || state.with(|s| s.chunk)
                        on:input=move |ev| { if let Some(c) = number_input(&ev) { state.update(|s| s.chunk = c) } }/>
                </label>
            </Show>
            <label>
                "Seed"
                <input type="number" min="0" data-testid="seed-input"
                    prop:value=move || state.with(|s| s.seed.to_string())
                    on:input=move |ev| { if let Ok(seed) = event_target_value(&ev).trim().parse::<u64>() { state.update(|s| s.seed = seed) } }/>
            </label>
            <label>
                "Colour"
                <select data-testid="scale-select" on:change=move |ev| {
                    if let Ok(scale) = event_target_value(&ev).parse::<ColorScale>() { state.update(|s| s.scale = scale) }
                }>
                    {[ColorScale::Linear, ColorScale::Log]
                        .into_iter()
                        .map(|c| view! { <option value=c.name() selected=move || state.with(|s| s.scale == c)>{c.name()}</option> })
                        .collect_view()}
                </select>
            </label>
            <button type="button" class="copy" data-testid="copy-link" on:click=move |_| {
                spawn_local(async move { copied.set(Some(browser::copy_to_clipboard(&browser::current_href()).await)) });
            }>
                {move || match copied.get() {
                    Some(true) => "Link copied",
                    Some(false) => "Copy failed: use the address bar",
                    None => "Copy link",
                }}
            </button>
        </form>
    }
}
