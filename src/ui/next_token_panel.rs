//! Beside the trained model's heads: the five likeliest next tokens after the text, each a button
//! that appends it, and Generate, which appends a few tokens one at a time (greedy, or sampled at a
//! temperature), each written into the text and so into the link, the heads redrawn as it grows.

use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::browser;
use super::engine_signal::EngineSignal;
use super::params::{edit, set_param};
use super::trained_compute::{LoadedLm, Prediction};
use super::user_checkpoint;
use crate::attention::tokens::display_token;
use crate::engine::Engine;
use crate::live_attention::generate::Generator;
use crate::state::{AppState, View};
use crate::views::heatmaps::params::GENERATE_SCHEMES;
use crate::views::heatmaps::trained::{
    GenerationRun, candidate_percent, candidates_hint, choose_next, generated_text, generation_summary, model_input,
    model_text, temperature_of, text_limit_reached, with_token,
};

/// What the panel reads: the model once loaded, and the prediction for the text on display.
pub type LmSignal = RwSignal<Option<Result<Rc<LoadedLm>, String>>, LocalStorage>;
pub type PredictionSignal = RwSignal<Option<Result<Prediction, String>>, LocalStorage>;

/// How the panel's note starts when a clicked token was refused.
const NOT_APPENDED: &str = "Not appended: ";

/// Tokens one click of Generate may ask for.
const TOKEN_COUNTS: [u32; 4] = [1, 4, 8, 16];

/// `ids`: the tokens of the text on display (`None` while they are not known), so candidates
/// predicted for an earlier text are not offered for this one.
#[component]
pub fn NextTokenPanel(
    state: RwSignal<AppState>,
    lm: LmSignal,
    prediction: PredictionSignal,
    engine: EngineSignal,
    #[prop(into)] ids: Signal<Option<Arc<Vec<u32>>>>,
) -> impl IntoView {
    let temperature = RwSignal::new(0.0f64);
    let count = RwSignal::new(8u32);
    let generating = RwSignal::new(false);
    let note = RwSignal::new(None::<String>);
    let current = move |p: &Prediction| ids.with(|ids| ids.as_deref() == Some(&p.ids));
    let append = Callback::new(move |id: u32| {
        if let (Some(Ok(lm)), Some(input)) = (lm.get_untracked(), state.try_with_untracked(|s| s.input.clone())) {
            match replace_text(state, &with_token(&lm.tokenizer, &input, id)) {
                Err(why) => note.set(Some(format!("{NOT_APPENDED}{why}."))),
                // A refusal said before no longer holds; what Generate said stays.
                Ok(()) if note.with_untracked(|n| n.as_deref().is_some_and(|n| n.starts_with(NOT_APPENDED))) => {
                    note.set(None)
                }
                Ok(()) => {}
            }
        }
    });
    let generate = move |_| {
        let (Some(Ok(model)), Some(engine)) = (lm.get_untracked(), engine.get_untracked()) else { return };
        generating.set(true);
        note.set(None);
        let settings = Generation { count: count.get_untracked(), temperature: temperature.get_untracked() };
        spawn_local(async move {
            let said = generate_tokens(state, &model, engine, settings).await;
            generating.try_set(false);
            note.try_set(Some(said));
        });
    };

    view! {
        <section class="panel next-token-panel" data-testid="next-token-panel" aria-live="polite">
            <h3>"Next token"</h3>
            {move || match prediction.get() {
                None => view! { <p class="hint">"Computing the prediction…"</p> }.into_any(),
                Some(Err(why)) => view! { <p class="status error" data-testid="next-token-error">{why}</p> }.into_any(),
                Some(Ok(p)) => {
                    let fresh = current(&p);
                    view! { <Candidates prediction=p fresh=fresh generating=generating append=append/> }.into_any()
                }
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
                        on:change=move |ev| temperature.set(temperature_of(&event_target_value(&ev)))/>
                </label>
                <CacheChoice state/>
                <button type="button" data-testid="generate" disabled=move || generating.get() || !matches!(prediction.get(), Some(Ok(p)) if current(&p)) on:click=generate>
                    {move || if generating.get() { "Generating…" } else { "Generate" }}
                </button>
            </div>
            {move || note.get().map(|n| view! { <p class="status" role="status" data-testid="generate-note">{n}</p> })}
        </section>
    }
}

/// How Generate's KV cache stores each token (URL `gencache`), through the link's parser.
#[component]
fn CacheChoice(state: RwSignal<AppState>) -> impl IntoView {
    let chosen = move || state.with(|s| s.explorer.gencache);
    view! {
        <label title="How the KV cache Generate decodes with stores each token: rounded once, as it joins, to the scheme's values (the memory view measures what each costs)">
            "KV cache"
            <select data-testid="generate-cache" on:change=move |ev| { let _ = set_param(state, "gencache", &event_target_value(&ev)); }>
                {GENERATE_SCHEMES.iter().enumerate().map(|(i, s)| view! { <option value=s.name() selected=move || chosen() == i>{s.name()}</option> }).collect_view()}
            </select>
        </label>
    }
}

/// The likeliest next tokens, each a button that appends it while the prediction is for this text.
#[component]
fn Candidates(prediction: Prediction, fresh: bool, generating: RwSignal<bool>, append: Callback<u32>) -> impl IntoView {
    view! {
        <p class="hint">{candidates_hint(fresh, prediction.ids.len())}</p>
        <ol class="candidates" class:stale=!fresh data-stale=(!fresh).then_some("true")>
            {prediction.candidates.into_iter().map(|c| {
                let (percent, bar) = candidate_percent(c.prob);
                view! {
                    <li data-testid="next-token" data-token=c.text.clone() data-prob=c.prob.to_string() data-id=c.id>
                        <button type="button" class="candidate" disabled=move || !fresh || generating.get() on:click=move |_| append.run(c.id)>
                            <code class="piece">{display_token(&c.text)}</code>
                            <span class="prob-bar" style=bar></span>
                            <span class="prob">{percent}</span>
                        </button>
                    </li>
                }
            }).collect_view()}
        </ol>
    }
}

/// How many tokens to append, and how freely to choose them.
#[derive(Clone, Copy)]
struct Generation {
    count: u32,
    temperature: f64,
}

/// Appends up to `count` tokens to the text, each chosen from the logits after the model's own
/// sequence so far (the text's tokens, then the generated ones): on the GPU one token a pass against
/// a KV cache prefilled with the text, without WebGPU a whole CPU pass a token. The text (and the
/// link) gets the generated tokens' text as they come; the heads redraw on their own. Returns what
/// it did, or why it stopped.
async fn generate_tokens(state: RwSignal<AppState>, lm: &LoadedLm, engine: Rc<Engine>, settings: Generation) -> String {
    let Some(mut expected) = state.try_get_untracked() else { return "Stopped: the view was closed.".into() };
    let prompt = model_text(&expected.input);
    let mut seq = match model_input(&lm.tokenizer, &expected.input, lm.reads()) {
        Ok((ids, _)) => ids,
        Err(why) => return why,
    };
    let prompt_len = seq.len();
    let started = browser::now_ms();
    let scheme = expected.explorer.generate_scheme();
    let (mut generator, mut logits) = match Generator::start(lm, engine, &seq, scheme).await {
        Ok(started) => started,
        Err(why) => return format!("Generation failed: {why}"),
    };
    let first_ms = browser::now_ms() - started;
    let mut generated = Vec::new();
    let decode_started = browser::now_ms();
    for i in 0..settings.count {
        if seq.len() >= lm.max_tokens {
            return format!("Stopped at {} tokens, the most the model reads.", lm.max_tokens);
        }
        let next = choose_next(&logits, settings.temperature, expected.input.seed, seq.len());
        seq.push(next);
        generated.push(next);
        let text = generated_text(&lm.tokenizer, &prompt, &generated);
        expected = match write_text(state, &expected, text) {
            Ok(written) => written,
            Err(said) => return said,
        };
        if i + 1 < settings.count {
            logits = match generator.next(lm, &seq, scheme).await {
                Ok(logits) => logits,
                Err(why) => return format!("Generation failed: {why}"),
            };
        }
    }
    let each_ms = (settings.count > 1).then(|| (browser::now_ms() - decode_started) / f64::from(settings.count - 1));
    let run = GenerationRun {
        count: settings.count,
        on_gpu: generator.on_gpu(),
        scheme,
        packed_bytes_per_token: generator.packed_bytes_per_token(),
        pool: generator.pool_use(),
        prompt_len,
        first_ms,
        each_ms,
    };
    generation_summary(&run)
}

/// Writes `text` as the text (and so into the link) if the page is as generation left it (the same
/// input, still the same real weights in the heatmaps view); the state written, or why generation stops.
fn write_text(state: RwSignal<AppState>, expected: &AppState, text: String) -> Result<AppState, String> {
    let unchanged = state.try_with_untracked(|s| {
        s.input == expected.input
            && s.model == expected.model
            && user_checkpoint::shows_real_weights(&s.model)
            && s.view() == View::Heatmaps
    });
    if unchanged != Some(true) {
        return Err("Stopped: the text, the model or the view changed while generating.".into());
    }
    replace_text(state, &text).map_err(|why| format!("Stopped: {why}"))?;
    state.try_get_untracked().ok_or_else(|| "Stopped: the view closed.".into())
}

/// The text replaced by `text` (a token appended to it), through the link's parser: a text past the
/// explorer's limit is refused, not cut, and the generated sequence (`n`) gives way to the text.
fn replace_text(state: RwSignal<AppState>, text: &str) -> Result<(), String> {
    match text_limit_reached(text) {
        Some(why) => Err(why),
        None => edit(state, &[("text", Some(text)), ("n", None)]),
    }
}
