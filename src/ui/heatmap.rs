//! One head's attention as a heatmap: a canvas (one pixel per cell, scaled up crisply), token labels on
//! both axes when they fit, a hover read-out with the exact probability (or the block's max / mean when
//! pooled), and a colour legend. Cells the mask hides get their own grey.

use std::sync::Arc;

use leptos::prelude::*;
use wasm_bindgen::Clamped;

use super::browser;
use crate::attention::Mask;
use crate::attention::explore::{PROBS_ATTR_MAX_CELLS, block_visible, pool_name};
use crate::attention::pooled::{Pool, block_range};
use crate::attention::teaching_heads::TeachingHead;
use crate::attention::tokens::display_token;
use crate::colormap::{self, ColorScale, LOG_DECADES, Painter};

/// The probabilities of one query head: every cell (`pooled == None`, `rows = n_q`, `cols = n_kv`) or
/// `rows x cols` blocks of the `n_q x n_kv` matrix pooled by max or mean.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadMap {
    pub head: u32,
    pub kv_head: u32,
    pub teaching: Option<TeachingHead>,
    pub rows: u32,
    pub cols: u32,
    pub values: Vec<f32>,
    pub pooled: Option<Pool>,
    pub n_q: u32,
    pub n_kv: u32,
    pub row_tokens: Arc<Vec<String>>,
    pub col_tokens: Arc<Vec<String>>,
    pub mask: Mask,
    /// Absolute position of query row 0 (queries are the last rows of the keys).
    pub q_offset: u32,
}

impl HeadMap {
    pub fn max(&self) -> f32 {
        self.values.iter().copied().fold(0.0, f32::max)
    }

    /// Query rows and key columns a cell covers.
    pub fn cell_ranges(&self, row: u32, col: u32) -> ((u32, u32), (u32, u32)) {
        (block_range(row, self.rows, self.n_q), block_range(col, self.cols, self.n_kv))
    }

    /// Whether the mask hides every pair of the cell.
    pub fn cell_masked(&self, row: u32, col: u32) -> bool {
        let (r, c) = self.cell_ranges(row, col);
        !block_visible(self.mask, self.q_offset, self.n_kv, r, c)
    }

    /// The label of the head: its index, KV head and designed role.
    pub fn caption(&self) -> String {
        match self.teaching {
            Some(t) => format!("Head {} · KV {} · {}", self.head, self.kv_head, t.id()),
            None => format!("Head {} · KV {}", self.head, self.kv_head),
        }
    }

    /// Tokens along one axis for the cells (the first token of each block when pooled).
    pub fn axis_tokens(&self, rows: bool) -> Vec<String> {
        let (cells, n, tokens) = if rows { (self.rows, self.n_q, &self.row_tokens) } else { (self.cols, self.n_kv, &self.col_tokens) };
        (0..cells).map(|c| tokens.get(block_range(c, cells, n).0 as usize).cloned().unwrap_or_default()).collect()
    }

    /// What the read-out says about a cell.
    pub fn describe_cell(&self, row: u32, col: u32) -> String {
        let v = self.values[(row * self.cols + col) as usize];
        let ((i_a, i_b), (j_a, j_b)) = self.cell_ranges(row, col);
        match self.pooled {
            None => {
                let shown = if self.mask.visible(self.q_offset + row, col) { format!("p = {v:.4}") } else { "masked".into() };
                format!(
                    "query “{}” ({row}) → key “{}” ({col}): {shown}",
                    display_token(&self.row_tokens[row as usize]),
                    display_token(&self.col_tokens[col as usize])
                )
            }
            Some(pool) => {
                let shown = if self.cell_masked(row, col) { "masked".into() } else { format!("{} p = {v:.4}", pool_name(pool)) };
                format!("queries {i_a}–{} → keys {j_a}–{}: {shown}", i_b - 1, j_b - 1)
            }
        }
    }
}

/// A map shared between the compute task and the views; equal only to itself (no deep comparison).
#[derive(Clone, Debug)]
pub struct Shared(pub Arc<HeadMap>);

impl PartialEq for Shared {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Colour of cells the mask hides (distinct from a probability of zero).
pub const MASKED_RGB: [u8; 3] = [226, 228, 233];
/// Labels are drawn only when a cell is at least this tall on screen.
const MIN_LABEL_CELL_PX: f64 = 10.0;

/// RGBA pixels of a map.
pub fn pixels(map: &HeadMap, scale: ColorScale) -> Vec<u8> {
    let painter = Painter::new(scale, map.max());
    let masked_rgba = [MASKED_RGB[0], MASKED_RGB[1], MASKED_RGB[2], 255];
    let cols = map.cols.max(1) as usize;
    let mut rgba = vec![0u8; map.values.len() * 4];
    for (row, (values, out)) in map.values.chunks_exact(cols).zip(rgba.chunks_exact_mut(cols * 4)).enumerate() {
        let row = row as u32;
        // Visible keys of an exact row are one range: no per-cell mask test.
        let (lo, hi) = map.mask.key_range(map.q_offset + row, map.n_kv);
        for (col, (&v, px)) in values.iter().zip(out.chunks_exact_mut(4)).enumerate() {
            let col = col as u32;
            let masked = match map.pooled {
                None => col < lo || col >= hi,
                Some(_) => v == 0.0 && map.cell_masked(row, col),
            };
            px.copy_from_slice(if masked { &masked_rgba } else { painter.rgba(v) });
        }
    }
    rgba
}

fn draw(canvas: &web_sys::HtmlCanvasElement, map: &HeadMap, scale: ColorScale) {
    let Some(ctx) = browser::context_2d(canvas) else { return };
    let rgba = pixels(map, scale);
    match web_sys::ImageData::new_with_u8_clamped_array_and_sh(Clamped(&rgba), map.cols, map.rows) {
        Ok(image) => {
            ctx.put_image_data(&image, 0.0, 0.0).ok();
        }
        Err(e) => web_sys::console::error_1(&e),
    }
}

/// One head: the figure with caption, labelled canvas, read-out and legend. `size_px` is the plot's
/// longer side on screen; `on_open` (thumbnails) enlarges the head on click or Enter.
#[component]
pub fn Heatmap(
    map: Arc<HeadMap>,
    #[prop(into)] scale: Signal<ColorScale>,
    size_px: f64,
    #[prop(optional)] large: bool,
    #[prop(optional)] stale: Option<Signal<bool>>,
    #[prop(optional, into)] on_open: Option<Callback<u32>>,
    #[prop(optional)] overlay: Option<AnyView>,
) -> impl IntoView {
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let hovered = RwSignal::new(None::<(u32, u32)>);
    let (rows, cols) = (map.rows, map.cols);
    let longest = rows.max(cols).max(1) as f64;
    let (css_w, css_h) = (size_px * cols as f64 / longest, size_px * rows as f64 / longest);
    let cell = size_px / longest;
    let stored = StoredValue::new(map.clone());

    // `try_` access: a newer result can dispose this heatmap between scheduling and running its effect.
    Effect::new(move |_| {
        let Some(scale) = scale.try_get() else { return };
        if let Some(Some(canvas)) = canvas_ref.try_get() {
            stored.try_with_value(|m| draw(&canvas, m, scale));
        }
    });

    let on_move = move |ev: web_sys::MouseEvent| {
        let row = (f64::from(ev.offset_y().max(0)) / css_h * rows as f64) as u32;
        let col = (f64::from(ev.offset_x().max(0)) / css_w * cols as f64) as u32;
        hovered.try_set((row < rows && col < cols).then_some((row, col)));
    };
    let readout = move || {
        hovered.try_get().flatten().and_then(|(row, col)| stored.try_with_value(|m| (row, col, m.describe_cell(row, col))))
    };
    let labels = cell >= MIN_LABEL_CELL_PX;
    let font_px = (cell * 0.7).clamp(9.0, 13.0);
    let probs_attr = (map.pooled.is_none() && map.values.len() <= PROBS_ATTR_MAX_CELLS)
        .then(|| map.values.iter().map(f32::to_string).collect::<Vec<_>>().join(","));
    let pooled_attr = (map.pooled.is_some() && map.values.len() <= PROBS_ATTR_MAX_CELLS)
        .then(|| map.values.iter().map(f32::to_string).collect::<Vec<_>>().join(","));
    let head = map.head;
    let open = move || {
        if let Some(cb) = on_open {
            cb.run(head);
        }
    };
    let max = map.max();
    let axis_labels = move |rows_axis: bool| {
        labels.then(|| stored.with_value(|m| m.axis_tokens(rows_axis).into_iter().map(|t| view! { <div class="hm-label">{display_token(&t)}</div> }).collect_view()))
    };
    let what = match map.pooled {
        Some(p) => format!("{} pooled {rows} x {cols} from {} x {}", pool_name(p), map.n_q, map.n_kv),
        None => format!("{rows} queries by {cols} keys"),
    };

    view! {
        <figure
            class="heatmap"
            class:large=large
            class:stale=move || stale.is_some_and(|s| s.try_get().unwrap_or(false))
            data-testid=if large { "focused-heatmap" } else { "head-heatmap" }
            data-head=map.head
            data-kv-head=map.kv_head
            data-teaching=map.teaching.map(TeachingHead::id)
            data-rows=rows
            data-cols=cols
            data-n-q=map.n_q
            data-n-kv=map.n_kv
            data-probs=probs_attr
            data-pool=map.pooled.map(pool_name)
            data-pooled=pooled_attr
            tabindex=if on_open.is_some() { Some("0") } else { None }
            aria-label=format!("{}: {what}{}", map.caption(), if on_open.is_some() { ". Press Enter to enlarge." } else { "" })
            on:click=move |_| open()
            on:keydown=move |ev: web_sys::KeyboardEvent| {
                if on_open.is_some() && (ev.key() == "Enter" || ev.key() == " ") {
                    ev.prevent_default();
                    open();
                }
            }
        >
            <figcaption title=map.teaching.map(TeachingHead::describe)>{map.caption()}</figcaption>
            <div class="hm-body" style=format!("--cell: {cell}px; --label-font: {font_px}px")>
                <div class="hm-ylabels" aria-hidden="true">{axis_labels(true)}</div>
                <div class="hm-plot">
                    <canvas
                        class="hm-canvas"
                        node_ref=canvas_ref
                        width=cols
                        height=rows
                        style=format!("width: {css_w}px; height: {css_h}px")
                        role="img"
                        aria-label=format!("Attention probabilities of query head {head}: {what}")
                        on:mousemove=on_move
                        on:mouseleave=move |_| { hovered.try_set(None); }
                    ></canvas>
                    {overlay}
                    {move || readout().map(|(row, col, text)| view! {
                        <div class="hm-tooltip" data-testid="heatmap-tooltip"
                            style=format!("left: {}px; top: {}px", ((col + 1) as f64 * css_w / cols as f64 + 6.0).min(css_w), row as f64 * css_h / rows as f64)>
                            {text}
                        </div>
                    })}
                    <div class="hm-xlabels" aria-hidden="true">{axis_labels(false)}</div>
                </div>
            </div>
            {large.then(|| view! { <Legend scale=scale max=max pooled=map.pooled/> })}
        </figure>
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
        Some(p) => format!("{} probability of each block", pool_name(p)),
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
