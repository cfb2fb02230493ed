//! The decode animation: the decode kernel runs token by token against real, growing K/V buffers
//! (one per layer type and request), drawn as pages of 16 tokens; windowed layers recycle pages, and
//! a second request sharing the first one's prompt reuses its pages (prefix caching).
//!
//! The loop runs in `spawn_local` and awaits the GPU (or a timer) at every token, so the page stays
//! responsive; a generation counter stops it when the user presses Stop, changes model or leaves.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::browser;
use super::engine_signal::EngineSignal;
use super::model_picker::bytes_text;
use crate::attention::{AttentionShape, Mask as AttnMask};
use crate::engine::{DecodeCache, Engine, reference_decode};
use crate::gpu::launch::MAX_HEAD_DIM;
use crate::model::decode_demo::{
    Action, DemoLayer, PROMPT_TOKENS, Tensor, demo_layers, next_action, run_tokens, token_values, value_stream,
};
use crate::model::kv_cache::kv_bytes_per_token_per_layer;
use crate::model::paging::{PAGE_TOKENS, PagedCache};
use crate::model::units::format_thousands;
use crate::model::{DType, LayerKind, Model, encode_model, kv_total_bytes};
use crate::state::AppState;

/// The GPU answer is compared with the f64 CPU reference every this many tokens.
const CHECK_EVERY_TOKENS: u64 = 64;
/// Least time between two redraws of the pages while running fast.
const REDRAW_MS: f64 = 60.0;

/// How fast the animation goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pace {
    /// A pause after each token, to watch pages fill.
    Watch,
    /// As fast as the GPU answers.
    Fast,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunState {
    Idle,
    Running,
    Stopped,
    Done,
    Failed,
}

impl RunState {
    fn name(self) -> &'static str {
        match self {
            RunState::Idle => "idle",
            RunState::Running => "running",
            RunState::Stopped => "stopped",
            RunState::Done => "done",
            RunState::Failed => "failed",
        }
    }
}

/// The pages of one layer type as drawn: `(owners bitmask, tokens filled, times reused)`.
#[derive(Clone, Debug, PartialEq)]
struct PagesView {
    kind: LayerKind,
    storing_layers: u32,
    pages: Vec<(u32, u64, u32)>,
    live_pages: usize,
    shared_pages: usize,
    recycled_pages: u64,
    dedup_tokens: u64,
    narrowed: Option<(u32, u32)>,
}

/// What the panel shows after each step.
#[derive(Clone, Debug, PartialEq)]
struct Snapshot {
    state: RunState,
    a_tokens: u64,
    b_tokens: Option<u64>,
    shared_tokens: u64,
    run_tokens: u64,
    layers: Vec<PagesView>,
    /// Bytes of the real model's cache for request A (all layers, the chosen dtype).
    a_model_bytes: u128,
    b_model_bytes: u128,
    /// Bytes not stored twice thanks to the shared prompt pages (real model, all layers).
    saved_bytes: u128,
    /// Bytes of this demo's K/V buffers (f32, one layer per type, both requests).
    demo_buffer_bytes: u64,
    kernel_steps: u64,
    kernel_ms_total: f64,
    max_diff: Option<f32>,
    message: String,
}

impl Snapshot {
    fn idle(run: u64) -> Self {
        Snapshot {
            state: RunState::Idle,
            a_tokens: 0,
            b_tokens: None,
            shared_tokens: 0,
            run_tokens: run,
            layers: Vec::new(),
            a_model_bytes: 0,
            b_model_bytes: 0,
            saved_bytes: 0,
            demo_buffer_bytes: 0,
            kernel_steps: 0,
            kernel_ms_total: 0.0,
            max_diff: None,
            message: String::new(),
        }
    }
}

/// The decode panel for the chosen model; `marker` receives (tokens of A, model bytes) for the chart.
#[component]
pub fn DecodeDemo(
    state: RwSignal<AppState>,
    engine: EngineSignal,
    marker: RwSignal<Option<(u64, u128)>>,
) -> impl IntoView {
    // Restart from scratch only when the model or dtype changes (not on budget or axis changes).
    let key = Memo::new(move |_| state.with(|s| (encode_model(&s.resolved_model()), s.kv.dtype)));
    move || {
        key.track();
        view! { <DecodePanel state=state engine=engine marker=marker/> }
    }
}

#[component]
fn DecodePanel(
    state: RwSignal<AppState>,
    engine: EngineSignal,
    marker: RwSignal<Option<(u64, u128)>>,
) -> impl IntoView {
    let (model, dtype) = state.with_untracked(|s| (s.resolved_model(), s.kv.dtype));
    let run = run_tokens(&model);
    let snapshot = RwSignal::new(Snapshot::idle(run));
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
            snapshot.update(|s| {
                if s.state == RunState::Running {
                    s.state = RunState::Stopped;
                }
            });
        }
    };
    let running = move || snapshot.with(|s| s.state == RunState::Running);
    let layers_note = demo_layers(&model, MAX_HEAD_DIM);
    let windows_note = layers_note
        .iter()
        .filter_map(|l| match l.kind {
            LayerKind::Sliding { window_tokens: w } | LayerKind::Chunked { chunk_tokens: w } if w + 96 > run => {
                Some(format!(
                    "its {} window of {} tokens is longer than this run, so no page is recycled here",
                    l.kind.noun(),
                    format_thousands(w.into())
                ))
            }
            _ => None,
        })
        .collect::<Vec<_>>();
    view! {
        <section class="panel decode" data-testid="decode-panel">
            <h3>"Decode, token by token, on your GPU"</h3>
            <p class="explain">
                {format!(
                    "Request A reads a {PROMPT_TOKENS}-token prompt and generates up to {run} tokens. When it has 88, request B arrives \
                     with the same prompt: it reuses A's full prompt pages instead of computing them again, recomputes the \
                     prompt's last partial page, then both generate in turns. Every token appends its K and V rows to a \
                     buffer kept on the GPU and runs the decode kernel over it, one layer of each type with the model's \
                     KV heads, head size and mask. The values are seeded noise (no trained weights are loaded); the shapes are real."
                )}
                {(!windows_note.is_empty()).then(|| format!(" Note: {}.", windows_note.join("; ")))}
            </p>
            <div class="controls inline">
                <button type="button" class="copy" data-testid="decode-start" disabled=move || running() || engine.with(Option::is_none) on:click=start>
                    {move || if snapshot.with(|s| s.state == RunState::Idle) { "Start decoding" } else { "Restart" }}
                </button>
                <button type="button" class="chip" data-testid="decode-stop" disabled=move || !running() on:click=stop>"Stop"</button>
                <label>
                    "Pace "
                    <select data-testid="decode-pace" on:change=move |ev| {
                        pace.set(if event_target_value(&ev) == "fast" { Pace::Fast } else { Pace::Watch });
                    }>
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
            {move || snapshot.with(|s| s.layers.iter().cloned().map(|l| view! { <PageGrid layer=l dtype=dtype/> }).collect_view())}
        </section>
    }
}

#[component]
fn Counters(snap: Snapshot, dtype: DType) -> impl IntoView {
    let avg_ms = if snap.kernel_steps > 0 { snap.kernel_ms_total / snap.kernel_steps as f64 } else { 0.0 };
    let b_line = match snap.b_tokens {
        Some(b) => format!("Request B: {b} tokens ({} shared with A, not recomputed)", snap.shared_tokens),
        None => "Request B: not arrived yet".to_string(),
    };
    view! {
        <div class="decode-counters" aria-live="polite">
            <p data-testid="decode-status" data-state=snap.state.name() data-a-tokens=snap.a_tokens.to_string()
                data-b-tokens=snap.b_tokens.map_or_else(|| "0".into(), |b| b.to_string())
                data-shared-tokens=snap.shared_tokens.to_string()>
                {format!("{} · request A: {} of {} tokens · {b_line}", snap.state.name(), snap.a_tokens, snap.run_tokens)}
            </p>
            <p>"Model's KV cache for A ("{dtype.label()}", all layers): "
                <strong data-testid="decode-bytes" data-value=snap.a_model_bytes.to_string()>{bytes_text(snap.a_model_bytes)}</strong></p>
            <p>"Stored once instead of twice thanks to the shared prompt: "
                <strong data-testid="decode-saved-bytes" data-value=snap.saved_bytes.to_string()>{bytes_text(snap.saved_bytes)}</strong></p>
            <p class="hint">
                {format!(
                    "This demo's GPU buffers hold {} (f32, one layer per type, both requests). {} kernel launches, {:.2} ms each on average.",
                    bytes_text(snap.demo_buffer_bytes.into()), snap.kernel_steps, avg_ms
                )}
            </p>
            <p class="hint" data-testid="decode-check" data-max-diff=snap.max_diff.map_or_else(|| "none".into(), |d| format!("{d:e}"))>
                {match snap.max_diff {
                    Some(d) => format!("Checked against the f64 CPU reference every {CHECK_EVERY_TOKENS} tokens: largest difference {d:.2e}."),
                    None => format!("The kernel's output is checked against the f64 CPU reference every {CHECK_EVERY_TOKENS} tokens."),
                }}
            </p>
            {(!snap.message.is_empty()).then(|| view! { <p class="status error" data-testid="decode-error">{snap.message.clone()}</p> })}
        </div>
    }
}

#[component]
fn PageGrid(layer: PagesView, dtype: DType) -> impl IntoView {
    let title = match layer.kind {
        LayerKind::Global => "global layers".to_string(),
        LayerKind::Sliding { window_tokens } => {
            format!("sliding layers (window {})", format_thousands(window_tokens.into()))
        }
        LayerKind::Chunked { chunk_tokens } => {
            format!("chunked layers (chunk {})", format_thousands(chunk_tokens.into()))
        }
    };
    let narrowed = layer.narrowed.map(|(model_dim, run_dim)| {
        format!(" The kernel runs {run_dim} of the model's {model_dim} dims per head (its maximum).")
    });
    let _ = dtype;
    view! {
        <div class="page-grid" data-testid="page-grid" data-kind=layer.kind.noun() data-live-pages=layer.live_pages.to_string()
            data-shared-pages=layer.shared_pages.to_string() data-recycled=layer.recycled_pages.to_string()>
            <h4>{format!(
                "{} × {title}: {} pages live, {} shared, {} recycled",
                layer.storing_layers, layer.live_pages, layer.shared_pages, layer.recycled_pages
            )}</h4>
            <div class="pages" role="img" aria-label=format!("{} pages of {PAGE_TOKENS} tokens", layer.pages.len())>
                {layer.pages.iter().map(|&(owners, filled, reuses)| {
                    let owner = match owners {
                        0 => "free",
                        1 => "own-a",
                        2 => "own-b",
                        _ => "shared",
                    };
                    let class = format!("page {owner}{}", if reuses > 0 { " reused" } else { "" });
                    let fill = format!("--fill: {}%", filled * 100 / PAGE_TOKENS);
                    view! { <i class=class style=fill title=format!("{filled}/{PAGE_TOKENS} tokens, reused {reuses}×")></i> }
                }).collect_view()}
            </div>
            {narrowed.map(|n| view! { <p class="hint">{n}</p> })}
        </div>
    }
}

/// The mask the kernel applies for a layer kind (every demo layer stores a cache, so has attention).
fn attn_mask(kind: LayerKind) -> Result<AttnMask, String> {
    AttnMask::of_layer(kind).ok_or_else(|| format!("a {} layer has no attention to decode", kind.noun()))
}

/// Per layer type: its demo shape, the paged accounting, and one decode cache per request.
struct Lane {
    layer: DemoLayer,
    storing_layers: u32,
    paged: PagedCache,
    caches: [Option<DecodeCache>; 2],
}

fn kv_rows(layer: &DemoLayer, slot: u32, request: u32, position: u64) -> (Vec<f32>, Vec<f32>) {
    let n = (layer.h_kv * layer.run_dim) as usize;
    let stream = value_stream(request, position);
    let k = token_values(stream, slot, position, Tensor::K, n);
    let v = if layer.k_eq_v { k.clone() } else { token_values(stream, slot, position, Tensor::V, n) };
    (k, v)
}

fn query(layer: &DemoLayer, slot: u32, request: u32, position: u64) -> Vec<f32> {
    token_values(100 + u64::from(request), slot, position, Tensor::Q, (layer.h_q * layer.run_dim) as usize)
}

/// The largest |GPU − reference| of one decode step, recomputing the request's K/V rows.
fn reference_diff(
    layer: &DemoLayer,
    slot: u32,
    request: u32,
    len: u64,
    q: &[f32],
    gpu_o: &[f32],
) -> Result<f32, String> {
    let (h_kv, d) = (layer.h_kv as usize, layer.run_dim as usize);
    let n = len as usize;
    let mut k = vec![0f32; h_kv * n * d];
    let mut v = vec![0f32; h_kv * n * d];
    for pos in 0..n {
        let (kr, vr) = kv_rows(layer, slot, request, pos as u64);
        for h in 0..h_kv {
            k[(h * n + pos) * d..][..d].copy_from_slice(&kr[h * d..][..d]);
            v[(h * n + pos) * d..][..d].copy_from_slice(&vr[h * d..][..d]);
        }
    }
    let shape = AttentionShape { h_q: layer.h_q, h_kv: layer.h_kv, n_q: 1, n_kv: len as u32, d: layer.run_dim };
    let scale = 1.0 / (layer.run_dim as f32).sqrt();
    let reference = reference_decode(q, &k, &v, shape, attn_mask(layer.kind)?, scale)?;
    Ok(reference.o.iter().zip(gpu_o).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max))
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

/// Appends one token of `request` to every lane and runs the decode kernel on each.
async fn step(
    engine: &Engine,
    lanes: &mut [Lane],
    request: u32,
    position: u64,
    snap: &mut Snapshot,
) -> Result<(), String> {
    for (slot, lane) in lanes.iter_mut().enumerate() {
        let slot = slot as u32;
        let (k, v) = kv_rows(&lane.layer, slot, request, position);
        let cache = lane.caches[request as usize].as_mut().ok_or("decode cache missing")?;
        engine.append_kv(cache, &k, &v)?;
        lane.paged.append(request as usize);
        let q = query(&lane.layer, slot, request, position);
        let scale = 1.0 / (lane.layer.run_dim as f32).sqrt();
        let started = browser::now_ms();
        let out = engine.decode(cache, &q, lane.layer.h_q, attn_mask(lane.layer.kind)?, scale).await?;
        snap.kernel_ms_total += browser::now_ms() - started;
        snap.kernel_steps += 1;
        if (position + 1).is_multiple_of(CHECK_EVERY_TOKENS) {
            let diff = reference_diff(&lane.layer, slot, request, position + 1, &q, &out.o)?;
            snap.max_diff = Some(snap.max_diff.map_or(diff, |d| d.max(diff)));
        }
    }
    Ok(())
}

/// Fills the snapshot's derived figures from the lanes.
fn refresh(snap: &mut Snapshot, lanes: &[Lane], model: &Model, dtype: DType) {
    snap.a_model_bytes = kv_total_bytes(model, snap.a_tokens, dtype).unwrap_or(0);
    snap.b_model_bytes = snap.b_tokens.map_or(0, |b| kv_total_bytes(model, b, dtype).unwrap_or(0));
    snap.saved_bytes = lanes
        .iter()
        .map(|l| {
            u128::from(l.paged.deduplicated_tokens())
                * kv_bytes_per_token_per_layer(model, l.layer.kind, dtype)
                * u128::from(l.storing_layers)
        })
        .sum();
    snap.demo_buffer_bytes = lanes.iter().flat_map(|l| l.caches.iter().flatten()).map(DecodeCache::used_bytes).sum();
    snap.layers = lanes
        .iter()
        .map(|l| PagesView {
            kind: l.layer.kind,
            storing_layers: l.storing_layers,
            pages: l.paged.pages.iter().map(|p| (p.owners, p.filled_tokens, p.reuses)).collect(),
            live_pages: l.paged.live_pages(),
            shared_pages: l.paged.shared_pages(),
            recycled_pages: l.paged.recycled_pages,
            dedup_tokens: l.paged.deduplicated_tokens(),
            narrowed: l.layer.is_narrowed().then_some((l.layer.model_dim, l.layer.run_dim)),
        })
        .collect();
}

async fn run_demo(
    engine: &Engine,
    model: &Model,
    dtype: DType,
    snapshot: RwSignal<Snapshot>,
    marker: RwSignal<Option<(u64, u128)>>,
    pace: RwSignal<Pace>,
    keep_going: impl Fn() -> bool,
) {
    let run = run_tokens(model);
    let mut snap = Snapshot::idle(run);
    snap.state = RunState::Running;
    let capacity = u32::try_from(run).unwrap_or(u32::MAX);
    let mut lanes: Vec<Lane> = Vec::new();
    for layer in demo_layers(model, MAX_HEAD_DIM) {
        let storing_layers = (0..model.schedule.len())
            .filter(|&l| model.schedule.kind(l) == Some(layer.kind) && model.stores_kv(l))
            .count() as u32;
        match engine.decode_cache(layer.h_kv, layer.run_dim, capacity) {
            Ok(cache) => lanes.push(Lane {
                layer,
                storing_layers,
                paged: PagedCache::new(layer.kind),
                caches: [Some(cache), None],
            }),
            Err(e) => {
                snap.state = RunState::Failed;
                snap.message = format!("Could not allocate the K/V buffer: {e}");
                snapshot.try_set(snap);
                return;
            }
        }
    }
    for lane in &mut lanes {
        lane.paged.add_sequence();
    }
    snapshot.try_set(snap.clone());
    let mut last_draw = browser::now_ms();
    loop {
        if !keep_going() {
            return;
        }
        let action = next_action(snap.a_tokens, snap.b_tokens, run);
        let outcome = match action {
            Action::AppendA => {
                let r = step(engine, &mut lanes, 0, snap.a_tokens, &mut snap).await;
                snap.a_tokens += 1;
                r
            }
            Action::ForkB => fork_b(engine, &mut lanes, &mut snap, capacity),
            Action::AppendB => {
                let b = snap.b_tokens.unwrap_or(0);
                let r = step(engine, &mut lanes, 1, b, &mut snap).await;
                snap.b_tokens = Some(b + 1);
                r
            }
            Action::Done => {
                snap.state = RunState::Done;
                Ok(())
            }
        };
        if let Err(e) = outcome {
            snap.state = RunState::Failed;
            snap.message = format!("The decode step failed: {e}");
        }
        if !keep_going() {
            return;
        }
        let finished = snap.state != RunState::Running;
        let watch = pace.get_untracked() == Pace::Watch;
        if finished || watch || browser::now_ms() - last_draw >= REDRAW_MS {
            refresh(&mut snap, &lanes, model, dtype);
            snapshot.try_set(snap.clone());
            marker.try_set(Some((snap.a_tokens, snap.a_model_bytes)));
            last_draw = browser::now_ms();
        }
        if finished {
            return;
        }
        // Let the page breathe: a visible pause when watching, a zero-length timer otherwise (the CPU
        // tier never awaits anything else).
        sleep_ms(if watch { 40 } else { 0 }).await;
    }
}

/// Request B arrives: it takes A's full prompt pages and copies their K/V rows into its own buffer
/// (a reuse, not a recomputation: no kernel runs for them).
fn fork_b(engine: &Engine, lanes: &mut [Lane], snap: &mut Snapshot, capacity: u32) -> Result<(), String> {
    // Every layer type shares the same prefix: the shortest any of them still holds whole.
    let shareable = lanes.iter().map(|l| l.paged.shareable_tokens(0, PROMPT_TOKENS)).min().unwrap_or(0);
    for (slot, lane) in lanes.iter_mut().enumerate() {
        let (_, shared) = lane.paged.fork_prefix(0, shareable);
        let mut cache = engine.decode_cache(lane.layer.h_kv, lane.layer.run_dim, capacity)?;
        for pos in 0..shared {
            let (k, v) = kv_rows(&lane.layer, slot as u32, 1, pos);
            engine.append_kv(&mut cache, &k, &v)?;
        }
        lane.caches[1] = Some(cache);
    }
    snap.shared_tokens = shareable;
    snap.b_tokens = Some(shareable);
    Ok(())
}
