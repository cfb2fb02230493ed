//! One head's attention as a heatmap: a canvas (one pixel per cell, scaled up crisply), token labels on
//! both axes when they fit, a hover read-out with the exact probability (or the block's max / mean when
//! pooled), and a colour legend. Cells the mask hides get their own grey.

use std::sync::Arc;

use leptos::prelude::*;
use wasm_bindgen::Clamped;

use super::browser;
use crate::attention::pooled::Pool;
use crate::attention::teaching_heads::TeachingHead;
use crate::attention::tokens::display_token;
use crate::colormap::{self, ColorScale, LOG_DECADES};
use crate::views::heatmaps::head_frame::{Frame, shape_text, values_attr};
pub use crate::views::heatmaps::head_map::HeadMap;

/// A map shared between the compute task and the views; equal only to itself (no deep comparison).
#[derive(Clone, Debug)]
pub struct Shared(pub Arc<HeadMap>);

impl PartialEq for Shared {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

fn draw(canvas: &web_sys::HtmlCanvasElement, map: &HeadMap, scale: ColorScale) {
    // A canvas keeps its element across results: size it to this map (resizing clears it).
    if canvas.width() != map.cols || canvas.height() != map.rows {
        canvas.set_width(map.cols);
        canvas.set_height(map.rows);
    }
    let Some(ctx) = browser::context_2d(canvas) else { return };
    let words = map.pixels(scale);
    match web_sys::ImageData::new_with_u8_clamped_array_and_sh(
        Clamped(bytemuck::cast_slice(&words)),
        map.cols,
        map.rows,
    ) {
        Ok(image) => {
            ctx.put_image_data(&image, 0.0, 0.0).ok();
        }
        Err(e) => web_sys::console::error_1(&e),
    }
}

/// `f` of the map on display, if there is one (tracked).
fn with_map<T>(map: Signal<Option<Shared>>, f: impl FnOnce(&HeadMap) -> T) -> Option<T> {
    map.try_with(|m| m.as_ref().map(|Shared(m)| f(m))).flatten()
}

/// One head: the figure with caption, labelled canvas, read-out and legend. `size_px` is the plot's
/// longer side on screen; `on_open` (thumbnails) enlarges the head on click or Enter. The figure stays
/// mounted while `map` changes: a new result repaints its canvas and updates its attributes, with no
/// new elements to lay out.
#[component]
pub fn Heatmap(
    #[prop(into)] map: Signal<Option<Shared>>,
    #[prop(into)] scale: Signal<ColorScale>,
    size_px: f64,
    #[prop(optional)] large: bool,
    #[prop(optional)] stale: Option<Signal<bool>>,
    #[prop(optional, into)] on_open: Option<Callback<u32>>,
    #[prop(optional)] overlay: Option<AnyView>,
) -> impl IntoView {
    let frame =
        Memo::new(move |_| with_map(map, |m| Frame::of(m.rows, m.cols, size_px)).unwrap_or(Frame::of(1, 1, size_px)));
    let open = move || {
        if let (Some(cb), Some(head)) = (on_open, with_map(map, |m| m.head)) {
            cb.run(head);
        }
    };
    let what = move || with_map(map, shape_text).unwrap_or_default();
    let small = move |pooled: bool| with_map(map, |m| values_attr(m, pooled)).flatten();

    view! {
        <figure
            class="heatmap"
            class:large=large
            class:trained=move || with_map(map, |m| m.scores.is_some()).unwrap_or(false)
            class:stale=move || stale.is_some_and(|s| s.try_get().unwrap_or(false))
            data-testid=if large { "focused-heatmap" } else { "head-heatmap" }
            data-head=move || with_map(map, |m| m.head)
            data-kv-head=move || with_map(map, |m| m.kv_head)
            data-teaching=move || with_map(map, |m| m.teaching.map(TeachingHead::id)).flatten()
            data-scores=move || with_map(map, |m| m.scores.map(|s| s.to_json())).flatten()
            data-labels=move || with_map(map, |m| m.scores.map(|s| s.labels().join(" "))).flatten()
            data-rows=move || frame.try_get().map(|f| f.rows)
            data-cols=move || frame.try_get().map(|f| f.cols)
            data-n-q=move || with_map(map, |m| m.n_q)
            data-n-kv=move || with_map(map, |m| m.n_kv)
            data-probs=move || small(false)
            data-pool=move || with_map(map, |m| m.pooled.map(Pool::name)).flatten()
            data-pooled=move || small(true)
            tabindex=if on_open.is_some() { Some("0") } else { None }
            aria-label=move || format!("{}: {}{}", with_map(map, HeadMap::caption).unwrap_or_default(), what(), if on_open.is_some() { ". Press Enter to enlarge." } else { "" })
            on:click=move |_| open()
            on:keydown=move |ev: web_sys::KeyboardEvent| {
                if on_open.is_some() && (ev.key() == "Enter" || ev.key() == " ") {
                    ev.prevent_default();
                    open();
                }
            }
        >
            <figcaption title=move || with_map(map, |m| m.teaching.map(TeachingHead::describe)).flatten()>
                {move || with_map(map, HeadMap::caption)}
            </figcaption>
            <HeatmapPlot map=map scale=scale frame=frame overlay=overlay/>
            {move || with_map(map, |m| m.scores.map(|s| s.summary())).flatten().map(|line| view! {
                <p class="hm-scores" data-testid="head-scores">{line}</p>
            })}
            {large.then_some(move || with_map(map, |m| (m.max(), m.pooled)).map(|(max, pooled)| view! { <Legend scale=scale max=max pooled=pooled/> }))}
        </figure>
    }
}

/// The labelled canvas with the hover read-out: repainted when the map or the scale changes.
#[component]
fn HeatmapPlot(
    map: Signal<Option<Shared>>,
    scale: Signal<ColorScale>,
    frame: Memo<Frame>,
    overlay: Option<AnyView>,
) -> impl IntoView {
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let hovered = RwSignal::new(None::<(u32, u32)>);
    // A new map of another size puts other cells under the pointer: the read-out waits for it to move.
    Effect::new(move |previous: Option<Frame>| {
        let f = frame.get();
        if previous.is_some_and(|p| p != f) {
            hovered.try_set(None);
        }
        f
    });

    // `try_` access: a newer view can dispose this heatmap between scheduling and running its effect.
    Effect::new(move |_| {
        let Some(scale) = scale.try_get() else { return };
        if let Some(Some(canvas)) = canvas_ref.try_get() {
            with_map(map, |m| draw(&canvas, m, scale));
        }
    });

    let on_move = move |ev: web_sys::MouseEvent| {
        let Some(f) = frame.try_get_untracked() else { return };
        hovered.try_set(f.cell_at(ev.offset_x(), ev.offset_y()));
    };
    let readout = move || {
        let (row, col) = hovered.try_get().flatten()?;
        with_map(map, |m| (row < m.rows && col < m.cols).then(|| (row, col, m.describe_cell(row, col)))).flatten()
    };
    let axis_labels = move |rows_axis: bool| {
        move || {
            let f = frame.try_get()?;
            f.shows_labels().then(|| {
                let tokens = with_map(map, |m| m.axis_tokens(rows_axis)).unwrap_or_default();
                tokens.into_iter().map(|t| view! { <div class="hm-label">{display_token(&t)}</div> }).collect_view()
            })
        }
    };
    let what = move || with_map(map, shape_text).unwrap_or_default();
    view! {
        <div class="hm-body" style=move || frame.try_get().map(|f| f.body_style())>
            <div class="hm-ylabels" aria-hidden="true">{axis_labels(true)}</div>
            <div class="hm-plot">
                <canvas
                    class="hm-canvas"
                    node_ref=canvas_ref
                    style=move || frame.try_get().map(|f| f.canvas_style())
                    role="img"
                    aria-label=move || format!("Attention probabilities of query head {}: {}", with_map(map, |m| m.head).unwrap_or_default(), what())
                    on:mousemove=on_move
                    on:mouseleave=move |_| { hovered.try_set(None); }
                ></canvas>
                {overlay}
                {move || readout().zip(frame.try_get()).map(|((row, col, text), f)| view! {
                    <div class="hm-tooltip" data-testid="heatmap-tooltip" style=f.tooltip_style(row, col)>
                        {text}
                    </div>
                })}
                <div class="hm-xlabels" aria-hidden="true">{axis_labels(false)}</div>
            </div>
        </div>
    }
}

/// The colour bar with its scale's end values.
#[component]
pub fn Legend(#[prop(into)] scale: Signal<ColorScale>, max: f32, pooled: Option<Pool>) -> impl IntoView {
    let stops = (0..=8).map(|i| colormap::css(colormap::viridis(i as f32 / 8.0))).collect::<Vec<_>>().join(", ");
    let low = move || match scale.try_get().unwrap_or(ColorScale::Linear) {
        ColorScale::Linear => "0".to_string(),
        ColorScale::Log => format!("{:.1e}", max * 10f32.powf(-LOG_DECADES)),
    };
    let what = match pooled {
        Some(p) => format!("{} probability of each block", p.name()),
        None => "probability".into(),
    };
    view! {
        <div class="legend" data-testid="heatmap-legend">
            <span>{low}</span>
            <span class="legend-bar" style=format!("background: linear-gradient(to right, {stops})")></span>
            <span>{format!("{max:.3}")}</span>
            <span class="legend-note">
                {move || format!("{what}, {} scale · ", scale.try_get().unwrap_or(ColorScale::Linear).name())}
                <span class="masked-swatch"></span>" masked"
            </span>
        </div>
    }
}
