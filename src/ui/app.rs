//! The page: header with the view switcher, URL notices, the active view, and the adapter line.

use std::rc::Rc;
use std::time::Duration;

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::browser;
use super::engine_signal::EngineSignal;
use super::gpu_watch;
use super::lesson_view::LessonView;
use super::live_views::live_view;
use super::view_lessons::ViewLessons;
use crate::engine::Engine;
use crate::state::{AppState, Notice, View};
use crate::views::model_choice::ModelChoice;
use crate::views::url_writes::{UrlWrite, UrlWrites};

/// The engine, started before the page is built (`super::start`): the GPU's first round trip is out
/// while the page builds. The page takes the engine when it is ready.
pub struct EarlyEngine(futures_channel::oneshot::Receiver<Rc<Engine>>);

impl EarlyEngine {
    pub fn start(backend: crate::engine::BackendChoice) -> Self {
        let (tx, rx) = futures_channel::oneshot::channel();
        // Not Leptos's spawn_local: its executor starts with the page, after this.
        wasm_bindgen_futures::spawn_local(async move {
            let _ = tx.send(Rc::new(Engine::start(backend).await));
        });
        EarlyEngine(rx)
    }
}

#[component]
pub fn App(starting: EarlyEngine) -> impl IntoView {
    let (initial, notices) = AppState::from_query(&browser::location_search());
    if browser::test_switch("panic") {
        // Proves the error panel works (the browser tests set the switch before the page loads).
        panic!("deliberate panic requested by a test switch");
    }
    let (backend, test_hooks) = (initial.backend(), browser::test_switch("hooks"));
    let state = RwSignal::new(initial);
    let notices = RwSignal::new(notices);
    sync_url(state, notices);

    // The view is rebuilt only when the view itself changes, not on every state change (which would
    // throw away each view's local state: an import report, a running decode animation, focus).
    let active_view = Memo::new(move |_| state.with(AppState::view));
    // The model is resolved once per change of `model` or `cfg` (not of `layer`), and every view
    // reads this one.
    let choice = Memo::new(move |_| state.with(|s| ModelChoice { layer: 0, ..s.model.clone() }));
    let model = Memo::new(move |_| choice.with(ModelChoice::resolve));

    let engine: EngineSignal = RwSignal::new_local(None);
    spawn_local(async move {
        if let Ok(started) = starting.0.await {
            engine.set(Some(started));
        }
    });
    gpu_watch::watch_for_lost_gpu(engine, notices, backend);
    if test_hooks {
        gpu_watch::install_test_hooks(engine);
    }

    view! {
        <header class="top">
            <div class="brand">
                <span class="logo" aria-hidden="true">"◧"</span>
                <h1>"Attention Lab"</h1>
                <span class="tagline">"attention, computed on your own GPU"</span>
            </div>
            <ViewTabs state=state/>
        </header>
        <Notices notices=notices/>
        <CpuBanner engine=engine/>
        <main>
            {move || {
                let view = active_view.get();
                (view != View::Lesson).then(|| view! { <ViewLessons state=state view=view/> })
            }}
            {move || {
                let view = active_view.get();
                live_view(view, state, model, engine)
                    .unwrap_or_else(|| view! { <LessonView state=state model=model engine=engine/> }.into_any())
            }}
        </main>
        <footer class="foot">
            <span data-testid="adapter-info">
                {move || engine.with(|e| e.as_ref().map_or_else(|| "Starting the GPU…".to_string(), |e| e.describe()))}
            </span>
            <span class="offline">"Runs entirely in your browser; nothing is sent anywhere."</span>
        </footer>
    }
}

/// State -> URL. A change of lesson step is a new history entry (back returns to the step before);
/// anything else replaces the entry, so typing never floods history. Back and forward read the entry's
/// link again; the step they land on is then the one written, so nothing is pushed. Replacements are
/// throttled (typing changes the state on every key; see `UrlWrites`).
fn sync_url(state: RwSignal<AppState>, notices: RwSignal<Vec<Notice>>) {
    let shown_step = StoredValue::new(state.with_untracked(lesson_place));
    let writes = StoredValue::new(UrlWrites::default());
    let latest_query = StoredValue::new(String::new());
    Effect::new(move |_| {
        let (query, place) = state.with(|s| (s.to_query(), lesson_place(s)));
        let push = shown_step.get_value() != place;
        shown_step.set_value(place);
        latest_query.set_value(query.clone());
        match writes.try_update_value(|w| w.on_change(browser::now_ms(), push)) {
            Some(UrlWrite::Now) => browser::write_query(&query, push),
            Some(UrlWrite::Later { after_ms, scheduled: false }) => set_timeout(
                move || {
                    if writes.try_update_value(|w| w.on_timer(browser::now_ms())) == Some(true) {
                        latest_query.with_value(|q| browser::write_query(q, false));
                    }
                },
                Duration::from_millis(after_ms.ceil() as u64),
            ),
            _ => {}
        }
    });
    let popstate = window_event_listener(leptos::ev::popstate, move |_| {
        let (entry, entry_notices) = AppState::from_query(&browser::location_search());
        shown_step.set_value(lesson_place(&entry));
        notices.set(entry_notices);
        state.set(entry);
    });
    on_cleanup(move || popstate.remove());
}

/// One tab per view, the shown one marked.
#[component]
fn ViewTabs(state: RwSignal<AppState>) -> impl IntoView {
    view! {
        <nav class="tabs" aria-label="Views">
            {View::ALL
                .iter()
                .map(|&v| {
                    view! {
                        <button
                            class="tab"
                            class:active=move || state.with(|s| s.view() == v)
                            aria-current=move || state.with(|s| s.view() == v).then_some("page")
                            data-testid="view-tab"
                            data-view=v.id()
                            on:click=move |_| state.update(|s| s.show_view(v))
                        >
                            {v.title()}
                        </button>
                    }
                })
                .collect_view()}
        </nav>
    }
}

/// The lesson step a state shows, if it is in the lessons view: a change of it is a history entry.
fn lesson_place(state: &AppState) -> Option<(Option<String>, Option<u32>)> {
    (state.view() == View::Lesson).then(|| (state.lesson.lesson.clone(), state.lesson.step))
}

/// Messages about parameters in the link that were ignored or corrected.
#[component]
fn Notices(notices: RwSignal<Vec<Notice>>) -> impl IntoView {
    view! {
        <Show when=move || notices.with(|n| !n.is_empty())>
            <div class="notices" role="status" data-testid="url-notices">
                <ul>{move || notices.get().into_iter().map(|n| view! { <li>{n.0}</li> }).collect_view()}</ul>
                <button class="dismiss" on:click=move |_| notices.set(Vec::new())>"Dismiss"</button>
            </div>
        </Show>
    }
}

/// The plain statement that WebGPU is missing and the CPU computes instead.
#[component]
fn CpuBanner(engine: EngineSignal) -> impl IntoView {
    let reason = move || {
        engine.with(|e| match e.as_deref() {
            Some(Engine::Cpu { reason }) => Some(reason.clone()),
            _ => None,
        })
    };
    view! {
        {move || reason().map(|reason| view! {
            <div class="banner" role="alert" data-testid="cpu-fallback-banner">
                <strong>"No WebGPU here: computing on the CPU instead. "</strong>
                {reason} ". Results are identical but slower, and large sizes are disabled. "
                "Chrome, Edge and recent Safari or Firefox offer WebGPU."
            </div>
        })}
    }
}
