//! The heatmap explorer (`view=heatmaps`): every query head of one layer of a real model layout,
//! grouped by the KV head it reads, with the layer strip, the controls, the status line and exports.
//! Computation lives in `explorer_compute`, the enlarged head in `focus_panel`.

use std::sync::Arc;
use std::time::Duration;

use leptos::prelude::*;

use crate::ui::params::set_param;
use leptos::task::spawn_local;

use crate::attention::layer_inputs::{LayerInputs, LayerLayout};
use crate::colormap::ColorScale;
use crate::live_attention::map_for_export;
use crate::live_attention::{JobClock, Progress};
use crate::lm::head_scores::score_legend;
use crate::model::Model;
use crate::state::AppState;
use crate::ui::browser;
use crate::ui::engine_signal::EngineSignal;
use crate::ui::explorer_compute::{self, HeadSlot, Sinks};
use crate::ui::explorer_controls::ExplorerControls;
use crate::ui::export;
use crate::ui::focus_panel::FocusPanel;
use crate::ui::head_mix::HeadMixPanel;
use crate::ui::heatmap::{HeadMap, Heatmap, Legend, Shared};
use crate::ui::layer_strip::LayerStrip;
use crate::ui::next_token_panel::{LmSignal, NextTokenPanel, PredictionSignal};
use crate::ui::rope_panel::RopePanel;
use crate::ui::trained_compute;
use crate::ui::user_checkpoint::{self, UserCheckpointPanel};
use crate::views::heatmaps::checkpoint_files::user_summary;
use crate::views::heatmaps::explorer_page::{
    TEACHING_HEADS_NOTE, export_title, group_by_kv_head, headline, heads_progressed, ignored_line, keeps_slots,
    page_status, progress_text, shown_progress,
};
use crate::views::heatmaps::params::generated_cap_notice;
use crate::views::heatmaps::request::{Request, Screen, build_request};
use crate::views::heatmaps::trained::{ignored_settings, model_input, trained_request};
use crate::views::heatmaps::trained_facts::trained_summary;
use crate::views::layer_kinds::{NoAttention, no_attention};

#[component]
pub fn HeatmapsView(state: RwSignal<AppState>, model: Memo<Model>, engine: EngineSignal) -> impl IntoView {
    let owner = Owner::current();
    let ex = Explorer::new(state, model, engine, watch_screen());
    load_real_weights(ex);
    compute_on_change(ex, owner);
    compute_focused_head(ex);
    mark_slow_jobs(ex);
    let exports = Exports::new(ex);
    let progress = ex.sinks.progress;
    view! {
        <section
            class="heatmaps explorer"
            class:computing=Signal::derive(move || !progress.with(|p| p.finished))
            data-testid="explorer"
            data-status=move || progress.with(|p| page_status(ex.attends.get(), p))
            data-job=move || progress.with(|p| p.job)
            data-heads-done=move || progress.with(|p| p.done)
            data-heads-total=move || progress.with(|p| p.total)
            data-ms-total=move || progress.with(|p| format!("{:.1}", p.total_ms))
            data-ms-kernel=move || progress.with(|p| format!("{:.1}", p.kernel_ms))
            data-ms-inputs=move || progress.with(|p| format!("{:.1}", p.inputs_ms))
            data-ms-draw=move || progress.with(|p| format!("{:.1}", p.draw_ms))
        >
            <ExplorerControls state=state model=model on_export_png=exports.png on_export_head=exports.head/>
            <LayerStrip state=state model=model/>
            <p class="layout-line" data-testid="layer-layout">
                {move || ex.request.with(|r| r.as_ref().map(|r| headline(&model.get(), r)).unwrap_or_default())}
            </p>
            {move || ex.missing.get().map(|why| view! { <NoAttentionPanel state=state why=why/> })}
            {move || state.with(|s| s.explorer.rope).then(|| view! { <RopePanel state=state model=model/> })}
            {move || state.with(|s| s.input.seq_tokens.and_then(generated_cap_notice)).map(|note| view! {
                <p class="status warning" data-testid="n-capped" role="status">{note}</p>
            })}
            <WeightsNotes ex=ex/>
            <UserCheckpointPanel state=state engine=engine/>
            <Show when=move || ex.attends.get()>
                <Results ex=ex exports=exports/>
            </Show>
        </section>
    }
}

/// The view's signals, shared by its effects, callbacks and parts.
#[derive(Clone, Copy)]
struct Explorer {
    state: RwSignal<AppState>,
    model: Memo<Model>,
    engine: EngineSignal,
    /// Real weights: the trained model, fetched the first time it is chosen, or a checkpoint the user
    /// dropped (already on the GPU). Their text is read by their own tokenizer, so the request waits.
    real: Memo<Option<RealWeights>>,
    trained: Memo<bool>,
    lm: LmSignal,
    prediction: PredictionSignal,
    /// Bumped by "Try again" after a failed download.
    load_attempt: RwSignal<u32>,
    request: Memo<Result<Request, String>>,
    /// A layer without softmax attention (or a model without any) shows why instead of heatmaps, and
    /// starts no job.
    missing: Memo<Option<NoAttention>>,
    attends: Memo<bool>,
    scale: Signal<ColorScale>,
    sinks: Sinks,
    shown_heads: RwSignal<Vec<u32>>,
    shown_layout: RwSignal<Option<LayerLayout>>,
    focus_jobs: StoredValue<JobClock>,
    /// Old heads dim, and the status shows progress, only once a computation has run for a while: a
    /// quick one changes nothing on screen until its pixels arrive, so the page does no restyling or
    /// layout while the GPU (in a software GPU: the same CPU cores) works.
    slow: RwSignal<bool>,
    /// The thumbnails' size, read once as the view opens.
    thumb_px: f64,
}

impl Explorer {
    fn new(state: RwSignal<AppState>, model: Memo<Model>, engine: EngineSignal, screen: RwSignal<Screen>) -> Self {
        let real = Memo::new(move |_| {
            state.with(|s| match s.model.is_trained() {
                true => Some(RealWeights::Trained),
                false => user_checkpoint::shown(&s.model).map(|d| RealWeights::Dropped(d.serial)),
            })
        });
        let trained = Memo::new(move |_| real.get().is_some());
        let lm: LmSignal = RwSignal::new_local(None);
        let request = Memo::new(move |_| {
            state.with(|s| {
                let layout = model.with(|m| LayerLayout::of(m, s.model.layer));
                if !trained.get() {
                    return build_request(&s.input, &s.explorer, layout, screen.get());
                }
                lm.with(|lm| match lm {
                    Some(Ok(lm)) => model_input(&lm.tokenizer, &s.input, lm.reads())
                        .and_then(|(ids, pieces)| trained_request(&s.explorer, layout, ids, pieces)),
                    Some(Err(why)) => Err(why.clone()),
                    None => Err(LOADING.into()),
                })
            })
        });
        let missing = Memo::new(move |_| {
            let layer = state.with(|s| s.model.layer);
            model.with(|m| no_attention(m, layer))
        });
        Self {
            state,
            model,
            engine,
            real,
            trained,
            lm,
            prediction: RwSignal::new_local(None),
            load_attempt: RwSignal::new(0u32),
            request,
            missing,
            attends: Memo::new(move |_| missing.with(Option::is_none)),
            // A memo, not a derived signal: every state change would otherwise repaint every head.
            scale: Signal::from(Memo::new(move |_| state.with(|s| s.explorer.scale))),
            sinks: Sinks {
                slots: RwSignal::new(Vec::new()),
                focused: RwSignal::new(None),
                progress: RwSignal::new(Progress::default()),
                inputs: RwSignal::new(None::<Arc<LayerInputs>>),
                jobs: StoredValue::new(JobClock::default()),
            },
            shown_heads: RwSignal::new(Vec::<u32>::new()),
            shown_layout: RwSignal::new(None::<LayerLayout>),
            focus_jobs: StoredValue::new(JobClock::default()),
            slow: RwSignal::new(false),
            thumb_px: browser::screen().thumb_px(),
        }
    }

    /// The focused head's map: from its grid slot when exact, else from the focus computation.
    fn focused_map(self) -> Option<Arc<HeadMap>> {
        let f = self.state.with(|s| s.explorer.focus)?;
        if let Some(Shared(m)) = self.sinks.focused.get() {
            return (m.head == f).then_some(m);
        }
        let i = self.shown_heads.with(|h| h.iter().position(|&x| x == f))?;
        let slot = self.sinks.slots.with(|s| s.get(i).copied())?;
        slot.get().map(|Shared(m)| m).filter(|m| m.pooled.is_none())
    }

    /// Clears the grid: no heads, no slots.
    fn clear_grid(self) {
        self.shown_heads.set(Vec::new());
        self.sinks.slots.set(Vec::new());
    }
}

/// Pooled heads follow the on-screen size: the window is re-read 250 ms after a resize stops, and the
/// request (a memo) changes only if the resolution does.
fn watch_screen() -> RwSignal<Screen> {
    let screen = RwSignal::new(browser::screen());
    let pending_resize = StoredValue::new(None::<TimeoutHandle>);
    let resize = window_event_listener(leptos::ev::resize, move |_| {
        if let Some(handle) = pending_resize.try_get_value().flatten() {
            handle.clear();
        }
        let handle =
            set_timeout_with_handle(move || _ = screen.try_set(browser::screen()), Duration::from_millis(250)).ok();
        pending_resize.try_set_value(handle);
    });
    on_cleanup(move || resize.remove());
    screen
}

/// Real weights are loaded (or taken from the dropped checkpoint) when they are chosen, and let go of
/// when synthetic weights are shown again.
fn load_real_weights(ex: Explorer) {
    let Explorer { state, real, lm, prediction, load_attempt, .. } = ex;
    Effect::new(move |_| {
        load_attempt.track();
        let shown = real.get();
        prediction.set(None);
        match shown {
            Some(RealWeights::Trained) => {
                lm.set(None);
                spawn_local(async move {
                    let loaded = trained_compute::load().await;
                    // Unless the view moved on (to a dropped checkpoint, say) while the files came.
                    if real.try_get_untracked() == Some(shown) {
                        lm.try_set(Some(loaded));
                    }
                });
            }
            Some(RealWeights::Dropped(_)) => {
                let dropped = state.with_untracked(|s| user_checkpoint::shown(&s.model));
                lm.set(dropped.map(|d| Ok(d.lm.clone())));
            }
            // Synthetic weights: let go of real ones (a dropped checkpoint's GPU buffers).
            None => lm.set(None),
        }
    });
}

/// State -> computation. Slots are kept while the heads on display stay the same, so old pixels stay
/// up (dimmed) until new ones replace them; they belong to the view, not to this effect.
fn compute_on_change(ex: Explorer, owner: Option<Owner>) {
    let Explorer { engine, request, trained, lm, attends, prediction, sinks, shown_heads, shown_layout, .. } = ex;
    Effect::new(move |_| {
        let Some(engine) = engine.get() else { return };
        let req = request.get();
        let job = sinks.jobs.try_update_value(JobClock::start).unwrap_or_default();
        let trained_lm = match (trained.get(), lm.get()) {
            (false, _) => None,
            (true, Some(Ok(lm))) => Some(lm),
            (true, None) => {
                sinks.progress.set(Progress { job, note: Some(LOADING.into()), ..Default::default() });
                return;
            }
            (true, Some(Err(_))) => None,
        };
        if !attends.get() {
            sinks.progress.set(Progress { job, finished: true, ..Default::default() });
            ex.clear_grid();
            return;
        }
        let req = match req {
            Ok(r) => r,
            Err(why) => {
                if trained.get_untracked() {
                    prediction.set(Some(Err(why.clone())));
                }
                sinks.progress.set(Progress { job, finished: true, error: Some(why), ..Default::default() });
                ex.clear_grid();
                return;
            }
        };
        let started = browser::now_ms();
        let same = shown_heads.with_untracked(|h| shown_layout.with_untracked(|l| keeps_slots(h, l.as_ref(), &req)));
        if !same {
            let slots = req
                .heads
                .iter()
                .map(|_| owner.as_ref().map_or_else(|| RwSignal::new(None), |o| o.with(|| RwSignal::new(None))))
                .collect();
            sinks.slots.set(slots);
            shown_heads.set(req.heads.clone());
        }
        shown_layout.set(Some(req.layout.clone()));
        let loaded = trained_lm.map(|lm| (lm, prediction));
        spawn_local(explorer_compute::run(engine, req, job, started, sinks, loaded));
    });
}

/// The enlarged head: exact maps come from the grid; pooled ones are pooled again at its size.
fn compute_focused_head(ex: Explorer) {
    let Explorer { state, engine, request, sinks, focus_jobs, .. } = ex;
    // A memo: another change of the state neither clears nor recomputes the enlarged head.
    let focus = Memo::new(move |_| state.with(|s| s.explorer.focus));
    Effect::new(move |_| {
        let focus = focus.get();
        let Some(engine) = engine.get() else { return };
        let Ok(mut req) = request.get() else { return };
        let id = focus_jobs.try_update_value(JobClock::start).unwrap_or_default();
        sinks.focused.set(None);
        let Some(f) = focus.filter(|&f| f < req.layout.n_q_heads) else { return };
        if req.exact() {
            return;
        }
        req.heads = vec![f];
        req.map_cells = req.focus_cells;
        let focus_sinks = Sinks {
            slots: RwSignal::new(Vec::new()),
            focused: sinks.focused,
            progress: RwSignal::new(Progress::default()),
            inputs: RwSignal::new(None),
            jobs: focus_jobs,
        };
        spawn_local(async move {
            let single = RwSignal::new(None::<Shared>);
            focus_sinks.slots.set(vec![single]);
            explorer_compute::run(engine, req, id, browser::now_ms(), focus_sinks, None).await;
            if focus_jobs.try_with_value(|c| c.is_current(id)) == Some(true)
                && let Some(map) = single.try_get_untracked().flatten()
            {
                sinks.focused.try_set(Some(map));
            }
        });
    });
}

/// A job is marked slow (`Explorer::slow`) once it has run for `SLOW_AFTER` without finishing.
fn mark_slow_jobs(ex: Explorer) {
    let Explorer { sinks, slow, .. } = ex;
    let job_state = Memo::new(move |_| sinks.progress.with(|p| (p.job, p.finished)));
    Effect::new(move |_| {
        let (job, finished) = job_state.get();
        if finished {
            slow.set(false);
            return;
        }
        set_timeout(
            move || {
                if job_state.try_get_untracked() == Some((job, false)) {
                    slow.try_set(true);
                }
            },
            SLOW_AFTER,
        );
    });
}

/// The PNG of the page and the `.npz` of one head, with what they say while they work or fail.
#[derive(Clone, Copy)]
struct Exports {
    png: Callback<()>,
    head: Callback<()>,
    error: RwSignal<Option<String>>,
    note: RwSignal<Option<String>>,
}

impl Exports {
    fn new(ex: Explorer) -> Self {
        let Explorer { state, model, engine, request, sinks, .. } = ex;
        let export_base = move || {
            state.with_untracked(|s| export::slug(&format!("attention-{}-layer{}", s.model.preset, s.model.layer)))
        };
        let error = RwSignal::new(None::<String>);
        let png = Callback::new(move |()| {
            let title = request.with_untracked(|r| export_title(&model.get_untracked(), r));
            error.set(export::export_png(&title, &format!("{}.png", export_base())).err());
        });
        let note = RwSignal::new(None::<String>);
        let head = Callback::new(move |()| {
            let map = ex.focused_map().or_else(|| {
                sinks.slots.with_untracked(|s| s.first().and_then(|slot| slot.get_untracked().map(|Shared(m)| m)))
            });
            error.set(None);
            let (Some(map), Some(engine), Some(inputs)) = (map, engine.get_untracked(), sinks.inputs.get_untracked())
            else {
                error.set(Some("No head to export yet.".into()));
                return;
            };
            if map.pooled.is_some() {
                note.set(Some(format!("Computing every probability of head {} for the export…", map.head)));
            }
            spawn_local(async move {
                let result = map_for_export(&engine, &inputs, map, &browser::now_ms).await;
                note.try_set(None);
                let outcome = result.and_then(|(map, notice)| {
                    export::export_head(&map, &export_base())?;
                    Ok(notice)
                });
                match outcome {
                    Ok(notice) => note.try_set(notice),
                    Err(e) => error.try_set(Some(e)),
                };
            });
        });
        Self { png, head, error, note }
    }
}

/// What the weights are: synthetic (a note), or real (what they are, a retry after a failed download,
/// and the next-token panel).
#[component]
fn WeightsNotes(ex: Explorer) -> impl IntoView {
    let Explorer { state, model, engine, trained, lm, prediction, load_attempt, request, .. } = ex;
    view! {
        <Show when=move || trained.get() fallback=move || view! {
            <p class="synthetic-note" data-testid="synthetic-note">
                "The weights are synthetic: seeded random embeddings and projections, not a trained model. The layout "
                "(heads, KV groups, head width), the masks, the window and the positional scheme are the model's. "
                {move || state.with(|s| s.explorer.teach).then_some(TEACHING_HEADS_NOTE)}
            </p>
        }>
            <TrainedNote state=state model=model/>
            {move || lm.with(|l| matches!(l, Some(Err(_)))).then(|| view! {
                <button type="button" class="secondary" data-testid="trained-retry" on:click=move |_| {
                    lm.set(None);
                    load_attempt.update(|n| *n += 1);
                }>"Try loading the model again"</button>
            })}
            <NextTokenPanel state=state lm=lm prediction=prediction engine=engine ids=Signal::derive(move || request.with(|r| r.as_ref().ok().and_then(|r| r.ids.clone())))/>
        </Show>
    }
}

/// Everything shown once the layer has attention: the status, export notes, the enlarged head, head
/// mixing, the legend and the grid.
#[component]
fn Results(ex: Explorer, exports: Exports) -> impl IntoView {
    let Explorer { state, engine, request, scale, sinks, slow, .. } = ex;
    // Memos: a change of the state that leaves the focus and the mixing row alone rebuilds neither panel.
    let focus = Memo::new(move |_| state.with(|s| s.explorer.focus));
    let mixing = Memo::new(move |_| state.with(|s| s.explorer.mix.is_some()));
    view! {
        <Status progress=sinks.progress slow=slow/>
        {move || exports.error.get().map(|e| view! { <p class="status error" role="alert">{e}</p> })}
        {move || exports.note.get().map(|n| view! { <p class="status" role="status" data-testid="export-note">{n}</p> })}
        {move || focus.get().map(|f| view! {
            <FocusPanel state=state head=f map=Signal::derive(move || ex.focused_map()) inputs=sinks.inputs engine=engine request=request scale=scale on_export=exports.head/>
        })}
        {move || mixing.get().then(|| view! {
            <HeadMixPanel state=state inputs=sinks.inputs request=request/>
        })}
        <div class="grid-legend"><Legend scale=scale max=1.0 pooled=None/><span class="hint">" each head is coloured from 0 to its own largest value"</span></div>
        <KvGroups ex=ex/>
    }
}

/// The heads, grouped by the KV head they read.
#[component]
fn KvGroups(ex: Explorer) -> impl IntoView {
    let Explorer { state, sinks, shown_heads, shown_layout, .. } = ex;
    let open_head = Callback::new(move |h: u32| {
        let _ = set_param(state, "focus", &h.to_string());
    });
    let groups = move || {
        let heads = shown_heads.get();
        let slots = sinks.slots.get();
        let Some(layout) = shown_layout.get_untracked() else { return Vec::new() };
        group_by_kv_head(&heads, &slots, &layout)
    };
    view! {
        <div class="kv-groups">
            {move || groups().into_iter().map(|(g, heads)| view! {
                <div class="kv-group" data-testid="kv-group" data-kv-head=g>
                    <h3 class="kv-title">{format!("KV head {g}")}</h3>
                    <div class="group-heads">
                        {heads.into_iter().map(|(h, slot)| view! { <HeadThumb ex=ex g=g h=h map=slot open_head=open_head/> }).collect_view()}
                    </div>
                </div>
            }).collect_view()}
        </div>
    }
}

/// One head of the grid: a placeholder until its first result, then its heatmap.
#[component]
fn HeadThumb(ex: Explorer, g: u32, h: u32, map: HeadSlot, open_head: Callback<u32>) -> impl IntoView {
    let Explorer { scale, slow, thumb_px: thumb, .. } = ex;
    // The figure is mounted once a result arrives and then only repainted; the heads' first results
    // come together, so their mounts are spread over frames, a few heads a frame.
    let ready = Memo::new(move |_| map.try_with(Option::is_some).unwrap_or(false));
    let mounted = RwSignal::new(false);
    Effect::new(move |_| {
        if ready.get() && !mounted.get_untracked() {
            after_frames(h / MOUNTS_PER_FRAME, move || _ = mounted.try_set(true));
        }
    });
    view! { {move || if ready.get() && mounted.get() {
        view! {
            <Heatmap map=map scale=scale size_px=thumb stale=Signal::from(slow) on_open=open_head/>
        }.into_any()
    } else {
        view! {
            <figure class="heatmap placeholder" data-testid="head-placeholder" data-head=h>
                <figcaption>{format!("Head {h} · KV {g}")}</figcaption>
                <div class="placeholder-box" style=format!("width: {thumb}px; height: {thumb}px")>"computing…"</div>
            </figure>
        }.into_any()
    }} }
}

/// Heads whose figures mount in one frame: the 32 of a layer mounted at once made one long task.
const MOUNTS_PER_FRAME: u32 = 8;

/// Runs `then` after `frames` animation frames (at once for 0).
fn after_frames(frames: u32, then: impl FnOnce() + 'static) {
    if frames == 0 {
        return then();
    }
    request_animation_frame(move || after_frames(frames - 1, then));
}

/// Said while the trained model's files are fetched and read.
const LOADING: &str = "Loading the model's weights and tokenizer…";

/// Which real weights the view shows: the trained model's, or the dropped checkpoint of this load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RealWeights {
    Trained,
    Dropped(u64),
}

/// What the model with real weights is, what its scores mean, and which of the link's settings it
/// leaves to the synthetic layouts.
#[component]
fn TrainedNote(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let ignored = move || state.with(|s| ignored_settings(&s.input, &s.explorer));
    let dropped = move || state.with(|s| user_checkpoint::shown(&s.model));
    view! {
        <div class="trained-note" data-testid="trained-note">
            {move || match dropped() {
                Some(d) => view! {
                    <p data-testid="dropped-note">
                        <strong>"Real weights from your files. "</strong>
                        {user_summary(&d.lm.model, d.lm.max_tokens, d.file_bytes)}
                    </p>
                }.into_any(),
                None => view! {
                    <p>
                        <strong>"Real weights: a small model trained here. "</strong>
                        {model.with_untracked(trained_summary)}
                        " The other models in the list are real layouts with synthetic weights."
                    </p>
                }.into_any(),
            }}
            <p class="hint">{score_legend()}</p>
            {move || ignored_line(&ignored()).map(|line| view! {
                <p class="status" role="status" data-testid="trained-ignored">{line}</p>
            })}
        </div>
    }
}

/// Why there are no heatmaps here, and a way to the nearest layer that has some.
#[component]
fn NoAttentionPanel(state: RwSignal<AppState>, why: NoAttention) -> impl IntoView {
    let scope = if why.whole_model { "model" } else { "layer" };
    view! {
        <section class="panel no-attention" data-testid="no-attention" data-kind=why.kind data-scope=scope role="status">
            <p>{why.text}</p>
            {why.nearest.map(|layer| view! {
                <button type="button" class="secondary" data-testid="jump-to-attention" data-layer=layer
                    on:click=move |_| { let _ = set_param(state, "layer", &layer.to_string()); }>
                    {format!("Show layer {layer}, the nearest attention layer")}
                </button>
            })}
        </section>
    }
}

/// How long a computation runs before the page shows it as one.
const SLOW_AFTER: Duration = Duration::from_millis(200);

#[component]
fn Status(progress: RwSignal<Progress>, slow: RwSignal<bool>) -> impl IntoView {
    // The last finished computation's line stays up while a new one is quick.
    let shown = Memo::new(move |previous: Option<&Progress>| shown_progress(previous, progress.get(), || slow.get()));
    view! {
        <div class="status-line" data-testid="explorer-status" aria-live="polite">
            {move || shown.with(|p| {
                if let (false, 0, Some(note)) = (p.finished, p.total, &p.note) {
                    return view! { <p class="status" data-testid="heatmap-status">{note.clone()}</p> }.into_any();
                }
                if let Some(e) = &p.error {
                    return view! { <p class="status error" data-testid="heatmap-error">{e.clone()}</p> }.into_any();
                }
                let progressed = heads_progressed(p);
                view! {
                    <p class="status" data-testid="heatmap-status">
                        {(!p.finished).then(|| view! { <progress max=p.total.max(1) value=progressed></progress>" " })}
                        {progress_text(p)}
                        {p.note.clone().map(|n| view! { <br/><small>{n}</small> })}
                    </p>
                }.into_any()
            })}
        </div>
    }
}
