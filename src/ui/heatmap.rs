//! One head's attention probabilities as a heatmap: a canvas (one pixel per cell, scaled up crisply),
//! token labels on both axes when they fit, a hover read-out and a colour legend.

use leptos::prelude::*;
use wasm_bindgen::Clamped;

use super::browser;
use crate::attention::Mask;
use crate::colormap::{self, ColorScale, LOG_DECADES};

/// The probabilities of one query head, row-major `[rows, cols]`, and what the axes mean.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadMap {
    pub head: u32,
    pub kv_head: u32,
    pub row_tokens: Vec<String>,
    pub col_tokens: Vec<String>,
    pub probs: Vec<f32>,
    pub mask: Mask,
    /// Absolute position of row 0 (queries are the last rows of the keys).
    pub q_offset: u32,
}

impl HeadMap {
    fn rows(&self) -> usize {
        self.row_tokens.len()
    }
    fn cols(&self) -> usize {
        self.col_tokens.len()
    }
    fn max(&self) -> f32 {
        self.probs.iter().copied().fold(0.0, f32::max)
    }
}

/// Cells shrink as the head grows so the map stays about this wide on screen.
const TARGET_MAP_PX: usize = 440;
/// Labels are drawn only when a cell is at least this tall.
const MIN_LABEL_CELL_PX: usize = 10;
/// Colour of cells the mask hides (distinct from a probability of zero).
const MASKED_RGB: [u8; 3] = [226, 228, 233];

fn cell_px(map: &HeadMap) -> usize {
    (TARGET_MAP_PX / map.rows().max(map.cols()).max(1)).clamp(2, 36)
}

#[component]
pub fn Heatmap(map: HeadMap, scale: ColorScale) -> impl IntoView {
    let cell = cell_px(&map);
    let (rows, cols) = (map.rows(), map.cols());
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let hovered = RwSignal::new(None::<(usize, usize)>);
    let map = StoredValue::new(map);

    // `try_` access: a newer result can dispose this heatmap between scheduling and running its effect.
    Effect::new(move |_| {
        if let Some(Some(canvas)) = canvas_ref.try_get() {
            map.try_with_value(|m| draw(&canvas, m, scale));
        }
    });

    let on_move = move |ev: web_sys::MouseEvent| {
        let (row, col) = (ev.offset_y().max(0) as usize / cell, ev.offset_x().max(0) as usize / cell);
        hovered.try_set((row < rows && col < cols).then_some((row, col)));
    };
    let readout = move || {
        hovered.try_get().flatten().and_then(|(row, col)| {
            map.try_with_value(|m| {
                let p = m.probs[row * cols + col];
                let shown = if m.mask.visible(m.q_offset + row as u32, col as u32) { format!("p = {p:.4}") } else { "masked".into() };
                (row, col, format!("query “{}” ({row}) → key “{}” ({col}): {shown}", m.row_tokens[row], m.col_tokens[col]))
            })
        })
    };
    let labels = cell >= MIN_LABEL_CELL_PX;
    let font_px = (cell as f32 * 0.7).clamp(9.0, 13.0);
    let (head, kv_head) = map.with_value(|m| (m.head, m.kv_head));
    let probs_attr = map.with_value(|m| m.probs.iter().map(f32::to_string).collect::<Vec<_>>().join(","));
    let max = map.with_value(HeadMap::max);

    view! {
        <figure
            class="heatmap"
            data-testid="head-heatmap"
            data-head=head
            data-kv-head=kv_head
            data-rows=rows
            data-cols=cols
            data-probs=probs_attr
        >
            <figcaption>{format!("Query head {head} · reads KV head {kv_head}")}</figcaption>
            <div class="hm-body" style=format!("--cell: {cell}px; --label-font: {font_px}px")>
                <div class="hm-ylabels" aria-hidden="true">
                    {labels.then(|| map.with_value(|m| m.row_tokens.iter().map(|t| view! { <div class="hm-label">{t.clone()}</div> }).collect_view()))}
                </div>
                <div class="hm-plot">
                    <canvas
                        node_ref=canvas_ref
                        width=cols
                        height=rows
                        style=format!("width: {}px; height: {}px", cols * cell, rows * cell)
                        role="img"
                        aria-label=format!("Attention probabilities of query head {head}: {rows} queries by {cols} keys")
                        on:mousemove=on_move
                        on:mouseleave=move |_| { hovered.try_set(None); }
                    ></canvas>
                    {move || readout().map(|(row, col, text)| view! {
                        <div class="hm-tooltip" data-testid="heatmap-tooltip"
                            style=format!("left: {}px; top: {}px", (col + 1) * cell + 6, row * cell)>
                            {text}
                        </div>
                    })}
                    <div class="hm-xlabels" aria-hidden="true">
                        {labels.then(|| map.with_value(|m| m.col_tokens.iter().map(|t| view! { <div class="hm-label">{t.clone()}</div> }).collect_view()))}
                    </div>
                </div>
            </div>
            <Legend scale=scale max=max/>
        </figure>
    }
}

/// The colour bar with its scale's end values.
#[component]
fn Legend(scale: ColorScale, max: f32) -> impl IntoView {
    let stops = (0..=8).map(|i| colormap::css(colormap::viridis(i as f32 / 8.0))).collect::<Vec<_>>().join(", ");
    let low = match scale {
        ColorScale::Linear => "0".to_string(),
        ColorScale::Log => format!("{:.1e}", max * 10f32.powf(-LOG_DECADES)),
    };
    let scale_name = match scale {
        ColorScale::Linear => "linear",
        ColorScale::Log => "log",
    };
    view! {
        <div class="legend" data-testid="heatmap-legend">
            <span>{low}</span>
            <span class="legend-bar" style=format!("background: linear-gradient(to right, {stops})")></span>
            <span>{format!("{max:.3}")}</span>
            <span class="legend-note">{format!("probability, {scale_name} scale · ")}<span class="masked-swatch"></span>" masked"</span>
        </div>
    }
}

fn draw(canvas: &web_sys::HtmlCanvasElement, map: &HeadMap, scale: ColorScale) {
    let Some(ctx) = browser::context_2d(canvas) else { return };
    let (rows, cols, max) = (map.rows(), map.cols(), map.max());
    let mut rgba = Vec::with_capacity(rows * cols * 4);
    for row in 0..rows {
        for col in 0..cols {
            let rgb = if map.mask.visible(map.q_offset + row as u32, col as u32) {
                colormap::viridis(scale.position(map.probs[row * cols + col], max))
            } else {
                MASKED_RGB
            };
            rgba.extend_from_slice(&[rgb[0], rgb[1], rgb[2], 255]);
        }
    }
    match web_sys::ImageData::new_with_u8_clamped_array_and_sh(Clamped(&rgba), cols as u32, rows as u32) {
        Ok(image) => {
            ctx.put_image_data(&image, 0.0, 0.0).ok();
        }
        Err(e) => web_sys::console::error_1(&e),
    }
}
