//! Beside the trained model's heads: the five likeliest next tokens after the text, each a button
//! that appends it, and Generate, which appends a few tokens one at a time (greedy, or sampled at a
//! temperature), each written into the text and so into the link, the heads redrawn as it grows.

use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::browser;
use super::engine_signal::EngineSignal;
use super::trained_compute::{LoadedLm, Prediction};
use crate::attention::tokens::display_token;
use crate::engine::Engine;
use crate::event_loop::yield_now;
use crate::state::AppState;
use crate::views::heatmaps::trained::{choose_next, model_input, with_token};

/// What the panel reads: the model once loaded, and the prediction for the text on display.
pub type LmSignal = RwSignal<Option<Result<Rc<LoadedLm>, String>>, LocalStorage>;
pub type PredictionSignal = RwSignal<Option<Result<Prediction, String>>, LocalStorage>;

/// Tokens one click of Generate may ask for.
const TOKEN_COUNTS: [u32; 4] = [1, 4, 8, 16];
/// How long Generate waits for one token's forward pass before giving up.
const TOKEN_TIMEOUT_MS: f64 = 60_000.0;

#[component]
pub fn NextTokenPanel(
    state: RwSignal<AppState>,
    lm: LmSignal,
    prediction: PredictionSignal,
    engine: EngineSignal,
) -> impl IntoView {
    let temperature = RwSignal::new(0.0f64);
    let count = RwSignal::new(8u32);
    let generating = RwSignal::new(false);
    let note = RwSignal::new(None::<String>);
    let append = move |id: u32| {
        if let Some(Ok(lm)) = lm.get_untracked() {
            state.update(|s| {
                s.input.text = with_token(&lm.tokenizer, &s.input, id);
                s.input.seq_tokens = None;
            });
        }
    };
    let generate = move |_| {
        let Some(Ok(model)) = lm.get_untracked() else { return };
        generating.set(true);
        note.set(None);
        let (tokens, temp) = (count.get_untracked(), temperature.get_untracked());
        spawn_local(async move {
            let settings = Generation { count: tokens, temperature: temp };
            let stopped = match engine.get_untracked() {
                Some(engine) if engine.is_gpu() => generate_on_gpu(state, &model, engine, settings).await,
                _ => generate_from_passes(state, &model, prediction, settings).await,
            };
            generating.try_set(false);
            note.try_set(stopped);
        });
    };

    view! {
        <section class="panel next-token-panel" data-testid="next-token-panel" aria-live="polite">
            <h3>"Next token"</h3>
            {move || match prediction.get() {
                None => view! { <p class="hint">"Computing the prediction…"</p> }.into_any(),
                Some(Err(why)) => view! { <p class="status error" data-testid="next-token-error">{why}</p> }.into_any(),
                Some(Ok(p)) => view! {
                    <p class="hint">{format!("After the text's {} tokens the model predicts (click one to append it):", p.ids.len())}</p>
                    <ol class="candidates">
                        {p.candidates.into_iter().map(|c| {
                            let percent = c.prob * 100.0;
                            view! {
                                <li data-testid="next-token" data-token=c.text.clone() data-prob=c.prob.to_string() data-id=c.id>
                                    <button type="button" class="candidate" disabled=move || generating.get() on:click=move |_| append(c.id)>
                                        <code class="piece">{display_token(&c.text)}</code>
                                        <span class="prob-bar" style=format!("width: {:.1}%", percent.clamp(0.0, 100.0))></span>
                                        <span class="prob">{format!("{percent:.1} %")}</span>
                                    </button>
                                </li>
                            }
                        }).collect_view()}
                    </ol>
                }.into_any(),
            }}
            <div class="generate-controls">
                <label>
                    "Tokens"
                    <select data-testid="generate-count" on:change=move |ev| {
                        if let Ok(n) = event_target_value(&ev).parse() { count.set(n) }
                    }>
                        {TOKEN_COUNTS.into_iter().map(|n| view! { <option value=n selected=move || count.get() == n>{n}</option> }).collect_view()}
                    </select>
                </label>
                <label title="0 always takes the likeliest token; higher values sample more freely (seeded by the link's seed)">
                    "Temperature"
                    <input type="number" min="0" max="2" step="0.1" data-testid="temperature"
                        prop:value=move || temperature.get().to_string()
                        on:change=move |ev| {
                            let t = event_target_value(&ev).parse::<f64>().unwrap_or(0.0);
                            temperature.set(if t.is_finite() { t.clamp(0.0, 2.0) } else { 0.0 });
                        }/>
                </label>
                <button type="button" data-testid="generate" disabled=move || generating.get() || !matches!(prediction.get(), Some(Ok(_))) on:click=generate>
                    {move || if generating.get() { "Generating…" } else { "Generate" }}
                </button>
            </div>
            {move || note.get().map(|n| view! { <p class="status" role="status" data-testid="generate-note">{n}</p> })}
        </section>
    }
}

/// How many tokens to append, and how freely to choose them.
#[derive(Clone, Copy)]
struct Generation {
    count: u32,
    temperature: f64,
}

/// The model's token ids of the text as it is now, or why generation cannot go on.
fn text_ids(state: RwSignal<AppState>, lm: &LoadedLm) -> Result<(AppState, Vec<u32>), String> {
    let now = state.try_get_untracked().ok_or("Stopped: the view was closed.")?;
    let (ids, _) = model_input(&lm.tokenizer, &now.input, lm.max_tokens)?;
    Ok((now, ids))
}

/// Appends token `next` to the text (and so to the link), unless the reader changed the text since
/// `before`; false if they did.
fn append_token(state: RwSignal<AppState>, lm: &LoadedLm, before: &AppState, next: u32) -> bool {
    let text = with_token(&lm.tokenizer, &before.input, next);
    let unchanged = state.try_with_untracked(|s| s.input == before.input).unwrap_or(false);
    if unchanged {
        state.try_update(|s| {
            s.input.text = text;
            s.input.seq_tokens = None;
        });
    }
    unchanged
}

fn at_length_limit(lm: &LoadedLm) -> String {
    format!("Stopped at {} tokens, the most the model reads.", lm.max_tokens)
}

/// Appends up to `count` tokens decoded on the GPU against a KV cache: the text's tokens prefilled
/// once, then one token a pass. The heads redraw as the text grows (the explorer's own pass).
/// Returns what it did, or why it stopped early.
async fn generate_on_gpu(
    state: RwSignal<AppState>,
    lm: &LoadedLm,
    engine: Rc<Engine>,
    settings: Generation,
) -> Option<String> {
    let (mut before, mut ids) = match text_ids(state, lm) {
        Ok(now) => now,
        Err(why) => return Some(why),
    };
    let started = browser::now_ms();
    let (mut decoder, mut logits) = match lm.gpu_decoder(engine, &ids).await? {
        Ok(start) => start,
        Err(why) => return Some(format!("Generation on the GPU failed: {why}")),
    };
    let prefill_ms = browser::now_ms() - started;
    let (prompt, decode_started) = (ids.len(), browser::now_ms());
    for i in 0..settings.count {
        if ids.len() >= lm.max_tokens {
            return Some(at_length_limit(lm));
        }
        let next = choose_next(&logits, settings.temperature, before.input.seed, ids.len());
        if !append_token(state, lm, &before, next) {
            return Some("Stopped: the text was changed while generating.".into());
        }
        ids.push(next);
        before = state.try_get_untracked()?;
        if i + 1 < settings.count {
            logits = match decoder.next(next).await {
                Ok(logits) => logits,
                Err(why) => return Some(format!("Generation on the GPU failed: {why}")),
            };
        }
    }
    let steps = settings.count.saturating_sub(1).max(1);
    Some(format!(
        "Generated {} token{} with the KV cache on the GPU: the {prompt}-token prompt prefilled in {prefill_ms:.0} ms, \
         then {:.1} ms a token.",
        settings.count,
        if settings.count == 1 { "" } else { "s" },
        (browser::now_ms() - decode_started) / f64::from(steps)
    ))
}

/// Without WebGPU: appends up to `count` tokens, each chosen from the explorer's CPU pass over the
/// text as it now is (which also redraws the heads); returns what it did, or why it stopped early.
async fn generate_from_passes(
    state: RwSignal<AppState>,
    lm: &LoadedLm,
    prediction: PredictionSignal,
    settings: Generation,
) -> Option<String> {
    for _ in 0..settings.count {
        let (before, ids) = match text_ids(state, lm) {
            Ok(now) => now,
            Err(why) => return Some(why),
        };
        if ids.len() >= lm.max_tokens {
            return Some(at_length_limit(lm));
        }
        let logits = match logits_for(prediction, &ids).await {
            Ok(logits) => logits,
            Err(why) => return Some(why),
        };
        let next = choose_next(&logits, settings.temperature, before.input.seed, ids.len());
        if !append_token(state, lm, &before, next) {
            return Some("Stopped: the text was changed while generating.".into());
        }
    }
    Some(format!(
        "Generated {} token{} on the CPU (no WebGPU here): a whole forward pass for each, no KV cache.",
        settings.count,
        if settings.count == 1 { "" } else { "s" }
    ))
}

/// The logits after `ids`, once the explorer's pass over them has run.
async fn logits_for(prediction: PredictionSignal, ids: &[u32]) -> Result<Rc<Vec<f32>>, String> {
    let started = browser::now_ms();
    while browser::now_ms() - started < TOKEN_TIMEOUT_MS {
        let ready = prediction.try_with_untracked(|p| match p {
            Some(Ok(p)) if p.ids == ids => Some(Ok(p.last_logits.clone())),
            Some(Err(why)) => Some(Err(why.clone())),
            _ => None,
        });
        match ready {
            None => return Err("Stopped: the view was closed.".into()),
            Some(Some(result)) => return result,
            Some(None) => yield_now().await,
        }
    }
    Err("Stopped: the forward pass took more than a minute.".into())
}
