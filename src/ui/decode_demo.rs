//! The decode animation's panel: it drives a [`DecodeRun`] token by token and binds its snapshot to the
//! page. What runs, what is checked and every text shown come from [`crate::views::decode`].
//!
//! The loop runs in `spawn_local` and awaits the GPU (or a timer) at every token, so the page stays
//! responsive; a generation counter stops it when the user presses Stop, changes model or leaves.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::browser;
use super::engine_signal::EngineSignal;
use crate::engine::Engine;
use crate::model::decode_demo::run_tokens;
use crate::model::units::bytes_text;
use crate::model::{DType, Model, encode_model};
use crate::state::AppState;
use crate::views::decode::pace::Pace;
use crate::views::decode::run::DecodeRun;
use crate::views::decode::snapshot::{PagesView, PoolView, RunState, Snapshot};
use crate::views::decode::text::{self, PageCell};

/// The decode panel for the app's resolved `model`; `marker` receives (tokens of A, model bytes) for the chart.
#[component]
pub fn DecodeDemo(
    state: RwSignal<AppState>,
    model: Memo<Model>,
    engine: EngineSignal,
    marker: RwSignal<Option<(u64, u128)>>,
) -> impl IntoView {
    // Restart from scratch only when the model or dtype changes (not on budget or axis changes).
    let key = Memo::new(move |_| (model.with(encode_model), state.with(|s| s.kv.dtype)));
    move || {
        key.track();
        view! { <DecodePanel state=state model=model engine=engine marker=marker/> }
    }
}

#[component]
fn DecodePanel(
    state: RwSignal<AppState>,
    model: Memo<Model>,
    engine: EngineSignal,
    marker: RwSignal<Option<(u64, u128)>>,
) -> impl IntoView {
    let (model, dtype) = (model.get_untracked(), state.with_untracked(|s| s.kv.dtype));
    let snapshot = RwSignal::new(Snapshot::idle(run_tokens(&model)));
    let pace = RwSignal::new(Pace::Watch);
    // Bumped to stop a running loop (Stop, Restart, or this panel going away).
    let generation = Arc::new(AtomicU64::new(0));
    marker.set(None);
    {
        let generation = Arc::clone(&generation);
        on_cleanup(move || {
            generation.fetch_add(1, Ordering::Relaxed);
        });
    }
    let start = {
        let generation = Arc::clone(&generation);
        let model = model.clone();
        move |_| {
            let Some(engine) = engine.get_untracked() else { return };
            let my_generation = generation.fetch_add(1, Ordering::Relaxed) + 1;
            let generation = Arc::clone(&generation);
            let model = model.clone();
            spawn_local(async move {
                let keep_going = move || generation.load(Ordering::Relaxed) == my_generation;
                run_demo(&engine, &model, dtype, snapshot, marker, pace, keep_going).await;
            });
        }
    };
    let stop = {
        let generation = Arc::clone(&generation);
        move |_| {
            generation.fetch_add(1, Ordering::Relaxed);
            snapshot.update(Snapshot::stop);
        }
    };
    let running = move || snapshot.with(|s| s.state == RunState::Running);
    let runnable = text::can_run(&model);
    view! {
        <section class="panel decode" data-testid="decode-panel">
            <h3>"Decode, token by token, on your GPU"</h3>
            {runnable.then(|| view! { <p class="explain">{text::intro_text(&model)}</p> })}
            {text::recurrent_note(&model).map(|note| view! {
                <p class="hint" data-testid="decode-recurrent" data-attention-layers=model.attention_layers() data-runs=runnable.to_string()>{note}</p>
            })}
            <div class="controls inline">
                <button type="button" class="copy" data-testid="decode-start" disabled=move || !runnable || running() || engine.with(Option::is_none) on:click=start>
                    {move || snapshot.with(|s| text::start_label(s.state))}
                </button>
                <button type="button" class="chip" data-testid="decode-stop" disabled=move || !running() on:click=stop>"Stop"</button>
                <label>
                    "Pace "
                    <select data-testid="decode-pace" on:change=move |ev| pace.set(Pace::from_choice(&event_target_value(&ev)))>
                        <option value="watch" selected=true>"watch (a pause per token)"</option>
                        <option value="fast">"fast (as quick as the GPU answers)"</option>
                    </select>
                </label>
            </div>
            {move || snapshot.with(|s| view! { <Counters snap=s.clone() dtype=dtype/> })}
            <div class="page-legend" aria-hidden="true">
                <span><i class="page own-a"></i>"request A"</span>
                <span><i class="page own-b"></i>"request B"</span>
                <span><i class="page shared"></i>"shared by both (prefix cache)"</span>
                <span><i class="page free"></i>"free, waiting to be recycled"</span>
            </div>
            {move || snapshot.with(|s| s.layers.iter().cloned().map(|l| view! { <PageGrid layer=l/> }).collect_view())}
        </section>
    }
}

#[component]
fn Counters(snap: Snapshot, dtype: DType) -> impl IntoView {
    view! {
        <div class="decode-counters" aria-live="polite">
            <p data-testid="decode-status" data-state=snap.state.name() data-a-tokens=snap.a_tokens.to_string()
                data-b-tokens=text::b_tokens_value(&snap) data-shared-tokens=snap.shared_tokens.to_string()>
                {text::status_text(&snap)}
            </p>
            <p>"Model's KV cache for A ("{dtype.label()}", all layers): "
                <strong data-testid="decode-bytes" data-value=snap.a_model_bytes.to_string()>{bytes_text(snap.a_model_bytes)}</strong></p>
            <p>"Stored once instead of twice thanks to the shared prompt: "
                <strong data-testid="decode-saved-bytes" data-value=snap.saved_bytes.to_string()>{bytes_text(snap.saved_bytes)}</strong></p>
            <p class="hint">{text::buffers_text(&snap)}</p>
            <PoolLine pool=snap.pool/>
            <p class="hint" data-testid="decode-check" data-max-diff=text::max_diff_value(snap.max_diff)>
                {text::check_text(snap.max_diff)}
            </p>
            {(!snap.message.is_empty()).then(|| view! { <p class="status error" data-testid="decode-error">{snap.message.clone()}</p> })}
        </div>
    }
}

/// The pool's real use (`page-pool`): the pages the books placed tokens in, at the pool's page size.
#[component]
fn PoolLine(pool: PoolView) -> impl IntoView {
    view! {
        <p class="hint" data-testid="page-pool" data-used-bytes=pool.used_bytes.to_string() data-pages=pool.live_pages.to_string()
            data-shared-pages=pool.shared_pages.to_string() data-capacity-pages=pool.capacity_pages.to_string()
            data-empty-slots=pool.empty_slots.to_string() data-copied-pages=pool.copied_pages.to_string()>
            {text::pool_text(&pool)}
        </p>
    }
}

#[component]
fn PageGrid(layer: PagesView) -> impl IntoView {
    view! {
        <div class="page-grid" data-testid="page-grid" data-kind=layer.kind.noun() data-live-pages=layer.live_pages.to_string()
            data-shared-pages=layer.shared_pages.to_string() data-recycled=layer.recycled_pages.to_string()>
            <h4>{text::grid_heading(&layer)}</h4>
            <div class="pages" role="img" aria-label=text::grid_label(&layer)>
                {layer.pages.iter().copied().map(PageCell::of).map(|cell| {
                    view! { <i class=cell.class style=cell.style title=cell.title></i> }
                }).collect_view()}
            </div>
            {text::narrowed_text(&layer).map(|n| view! { <p class="hint">{n}</p> })}
        </div>
    }
}

/// Waits `ms` milliseconds on a browser timer (never blocks the page).
async fn sleep_ms(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let scheduled = web_sys::window()
            .is_some_and(|w| w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms).is_ok());
        if !scheduled {
            resolve.call0(&wasm_bindgen::JsValue::NULL).ok();
        }
    });
    wasm_bindgen_futures::JsFuture::from(promise).await.ok();
}

/// Advances the run until it finishes or `keep_going` says stop, redrawing at the chosen pace.
async fn run_demo(
    engine: &Engine,
    model: &Model,
    dtype: DType,
    snapshot: RwSignal<Snapshot>,
    marker: RwSignal<Option<(u64, u128)>>,
    pace: RwSignal<Pace>,
    keep_going: impl Fn() -> bool,
) {
    let mut run = DecodeRun::start(engine, model, dtype);
    snapshot.try_set(run.snapshot().clone());
    let mut last_draw_ms = browser::now_ms();
    while !run.is_finished() {
        if !keep_going() {
            return;
        }
        run.advance(engine, browser::now_ms).await;
        if !keep_going() {
            return;
        }
        let pace = pace.get_untracked();
        if pace.redraws(run.is_finished(), browser::now_ms() - last_draw_ms) {
            let snap = run.refreshed();
            snapshot.try_set(snap.clone());
            marker.try_set(Some(snap.chart_marker()));
            last_draw_ms = browser::now_ms();
        }
        if !run.is_finished() {
            sleep_ms(pace.pause_ms()).await;
        }
    }
}
