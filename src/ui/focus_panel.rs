//! The explorer's enlarged head: the heatmap at full size, navigation and export, the tiled kernel's
//! tile grid over it (with the work its mask skips) and the step-through. What it draws is read
//! through memos, so a change of the state that leaves them alone (the trace player's row and step,
//! which live in the link) rebuilds nothing here.

use std::sync::Arc;

use leptos::prelude::*;

use super::params::{edit, set_param};

use super::browser;
use super::engine_signal::EngineSignal;
use super::flash_trace_view::FlashTracePanel;
use super::heatmap::{HeadMap, Heatmap, Shared};
use super::step_through::StepThrough;
use crate::attention::layer_inputs::{LayerInputs, LayerLayout};
use crate::colormap::ColorScale;
use crate::state::{AppState, View};
use crate::views::heatmaps::request::Request;
use crate::views::heatmaps::tile_grid::{self, TileGrid};

/// One head, large: labels when they fit, the tile grid, the step-through, export and navigation.
#[component]
pub fn FocusPanel(
    state: RwSignal<AppState>,
    head: u32,
    map: Signal<Option<Arc<HeadMap>>>,
    inputs: RwSignal<Option<Arc<LayerInputs>>>,
    engine: EngineSignal,
    request: Memo<Result<Request, String>>,
    scale: Signal<ColorScale>,
    on_export: Callback<()>,
) -> impl IntoView {
    let close_ref = NodeRef::<leptos::html::Button>::new();
    Effect::new(move |_| {
        if let Some(Some(b)) = close_ref.try_get() {
            // A lesson step opens the panel with the step, below its text: taking the focus must not
            // scroll the text away. Opened from the grid, the page scrolls to the panel as before.
            let options = web_sys::FocusOptions::new();
            options.set_prevent_scroll(state.with_untracked(|s| s.view() == View::Lesson));
            b.focus_with_options(&options).ok();
        }
    });
    let heads = move || {
        request.with(|r| match r {
            Ok(r) => r.heads.clone(),
            Err(_) => Vec::new(),
        })
    };
    let step = move |delta: i32| {
        let list = heads();
        if let Some(i) = list.iter().position(|&h| h == head) {
            let j = (i as i32 + delta).rem_euclid(list.len() as i32) as usize;
            let _ = set_param(state, "focus", &list[j].to_string());
        }
    };
    let close = move || {
        let _ = edit(state, &[("focus", None)]);
    };
    let size = browser::screen().large_px();
    let layout = Memo::new(move |_| request.with(|r| r.as_ref().ok().map(|r| r.layout.clone())));
    let tiles_on = Memo::new(move |_| state.with(|s| s.explorer.tiles));
    let steps_on = Memo::new(move |_| state.with(|s| s.explorer.steps));
    // The same map (the same allocation) is the same picture: compared by address, not by value.
    let map = Memo::new(move |_| map.get().map(Shared));
    view! {
        <div class="panel focus-panel" data-testid="focus-panel" data-head=head role="dialog" aria-label=format!("Query head {head}, enlarged")
            on:keydown=move |ev: web_sys::KeyboardEvent| match ev.key().as_str() {
                "Escape" => close(),
                "ArrowLeft" => step(-1),
                "ArrowRight" => step(1),
                _ => {}
            }>
            <div class="focus-bar">
                <button type="button" class="secondary" data-testid="focus-prev" on:click=move |_| step(-1) aria-label="Previous head">"←"</button>
                <button type="button" class="secondary" data-testid="focus-next" on:click=move |_| step(1) aria-label="Next head">"→"</button>
                <button type="button" class="secondary" data-testid="focus-export" on:click=move |_| on_export.run(())>"Export .npz"</button>
                <button type="button" class="secondary" node_ref=close_ref data-testid="focus-close" on:click=move |_| close()>"Close (Esc)"</button>
            </div>
            {move || match map.get().zip(layout.get()) {
                None => view! { <p class="status">{format!("Computing head {head} at full size…")}</p> }.into_any(),
                Some((Shared(m), layout)) => {
                    let overlay = tiles_on.get().then(|| view! { <TileOverlay map=m.clone() engine=engine size=size layout=layout.clone()/> }.into_any());
                    view! {
                        <Heatmap map=Signal::stored(Some(Shared(m.clone()))) scale=scale size_px=size large=true overlay=overlay.unwrap_or_else(|| ().into_any())/>
                        {tiles_on.get().then(|| view! { <TileStats map=m.clone() engine=engine layout=layout.clone()/> })}
                        {move || steps_on.get().then(|| inputs.get().map(|inp| {
                            let mask = m.mask;
                            view! {
                                <StepThrough inputs=inp.clone() head=head mask=mask gpu=Some(m.clone())/>
                                <FlashTracePanel state inputs=inp head=head mask=mask engine=engine/>
                            }
                        })).flatten()}
                    }.into_any()
                }
            }}
        </div>
    }
}

/// The kernel's tile grid for this map, with this adapter's tiles (a GPU's on the CPU tier).
fn grid_for(map: &HeadMap, engine: &EngineSignal, layout: &LayerLayout) -> TileGrid {
    let group = layout.group_size();
    let adapter = engine.with_untracked(|e| e.as_ref().and_then(|e| e.flash_tiles(layout.head_dim, map.n_q * group)));
    tile_grid::tile_grid(map.n_q, map.n_kv, layout, map.mask, adapter)
}

#[component]
fn TileStats(map: Arc<HeadMap>, engine: EngineSignal, layout: LayerLayout) -> impl IntoView {
    let grid = grid_for(&map, &engine, &layout);
    let plan = &grid.plan;
    view! {
        <p class="hint tile-stats" data-testid="tile-stats" data-skipped=format!("{:.6}", plan.skipped_fraction())
            data-visited=plan.visited_key_tiles data-dense=plan.dense_key_tiles
            data-rows=grid.rows_per_tile data-keys=grid.keys_per_tile>
            {grid.stats_text()}
        </p>
    }
}

#[component]
fn TileOverlay(map: Arc<HeadMap>, engine: EngineSignal, size: f64, layout: LayerLayout) -> impl IntoView {
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let longest = map.rows.max(map.cols).max(1) as f64;
    let (w, h) = (size * map.cols as f64 / longest, size * map.rows as f64 / longest);
    let dpr = browser::screen().device_pixel_ratio;
    let plan = grid_for(&map, &engine, &layout).plan;
    let (n_q, n_kv) = (map.n_q as f64, map.n_kv as f64);
    Effect::new(move |_| {
        let Some(Some(canvas)) = canvas_ref.try_get() else { return };
        let Some(ctx) = browser::context_2d(&canvas) else { return };
        let (cw, ch) = (w * dpr, h * dpr);
        let (sx, sy) = (cw / n_kv, ch / n_q);
        ctx.clear_rect(0.0, 0.0, cw, ch);
        for t in &plan.tiles {
            let (y0, y1) = (f64::from(t.q_lo) * sy, f64::from(t.q_hi) * sy);
            ctx.set_fill_style_str("rgba(20, 22, 30, 0.55)");
            ctx.fill_rect(0.0, y0, cw, y1 - y0);
            for &(a, b, _) in &t.key_tiles {
                ctx.clear_rect(f64::from(a) * sx, y0, f64::from(b - a) * sx, y1 - y0);
            }
            if (y1 - y0) >= 3.0 {
                for &(a, b, interior) in &t.key_tiles {
                    if f64::from(b - a) * sx < 3.0 {
                        continue;
                    }
                    ctx.set_stroke_style_str(if interior {
                        "rgba(255, 255, 255, 0.7)"
                    } else {
                        "rgba(255, 140, 0, 0.95)"
                    });
                    ctx.stroke_rect(f64::from(a) * sx + 0.5, y0 + 0.5, f64::from(b - a) * sx - 1.0, y1 - y0 - 1.0);
                }
            }
        }
    });
    view! {
        <canvas class="tile-overlay" data-testid="tile-overlay" node_ref=canvas_ref width=(w * dpr) as u32 height=(h * dpr) as u32
            style=format!("width: {w}px; height: {h}px") aria-hidden="true"></canvas>
    }
}
