//! What the heatmap explorer computes for a state: the layer, the tokens, the mask, the heads, and
//! the size of each pooled map on screen, as one [`Request`].

use std::sync::Arc;

use crate::attention::Mask;
use crate::attention::layer_inputs::LayerLayout;
use crate::attention::mask::MaskKind;
use crate::attention::pooled::Pool;
use crate::attention::tokens::{generated_tokens, tokenize};
use crate::model::Model;
use crate::state::AppState;
use crate::views::heatmaps::params::MAX_GENERATED;

/// Heads at most this long (queries and keys) are drawn cell by cell with exact probabilities;
/// longer ones are pooled on the GPU to the size they take on screen.
pub const EXACT_MAX_N: u32 = 256;
/// Heads with at most this many cells carry every probability in `data-probs` (for tests and tools).
pub const PROBS_ATTR_MAX_CELLS: usize = 64 * 64;

/// Cells of a pooled heatmap along one axis of `n` tokens drawn `css_px` wide at `device_pixel_ratio`:
/// one cell per device pixel, never more cells than tokens.
pub fn pooled_resolution(n: u32, css_px: f64, device_pixel_ratio: f64) -> u32 {
    let px = (css_px * device_pixel_ratio.clamp(1.0, 4.0)).round().max(1.0) as u32;
    px.min(n).max(1)
}

/// Everything a computation depends on (compared to decide whether to start a new one).
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub layout: LayerLayout,
    pub tokens: Arc<Vec<String>>,
    pub kv_tokens: Option<Arc<Vec<String>>>,
    pub seed: u64,
    pub teach: bool,
    pub mask: Mask,
    pub heads: Vec<u32>,
    pub pool: Pool,
    /// Pooled cells per side of a thumbnail, and of the enlarged head.
    pub thumb_cells: u32,
    pub large_cells: u32,
    pub focus: Option<u32>,
}

impl Request {
    pub fn n_q(&self) -> u32 {
        self.tokens.len() as u32
    }
    pub fn n_kv(&self) -> u32 {
        self.kv_tokens.as_ref().map_or(self.tokens.len(), |t| t.len()) as u32
    }
    /// Small enough to draw every cell.
    pub fn exact(&self) -> bool {
        self.n_q() <= EXACT_MAX_N && self.n_kv() <= EXACT_MAX_N
    }
}

/// The window as the pooled resolution sees it: its width (CSS pixels) and device pixel ratio.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Screen {
    pub width_css_px: f64,
    pub device_pixel_ratio: f64,
}

impl Screen {
    /// On-screen size of a thumbnail's plot, CSS pixels: two to a row on a phone.
    pub fn thumb_px(self) -> f64 {
        let w = self.width_css_px;
        if w < 560.0 { ((w - 56.0) / 2.0).clamp(100.0, 160.0) } else { 160.0 }
    }

    /// On-screen size of the enlarged head's plot, CSS pixels.
    pub fn large_px(self) -> f64 {
        (self.width_css_px - 120.0).clamp(220.0, 640.0)
    }
}

/// The mask the explorer applies: the chosen override, else the layer's own; cross-attention sees all.
pub fn effective_mask(s: &AppState, layout: &LayerLayout) -> Mask {
    if s.explorer.src.is_some() {
        Mask::Full
    } else if s.mask_given || s.mask != MaskKind::Causal {
        s.mask()
    } else {
        layout.mask()
    }
}

/// The request the state describes, or why there is nothing to compute.
pub fn build_request(s: &AppState, model: &Model, screen: Screen) -> Result<Request, String> {
    let layout = LayerLayout::of(model, s.layer);
    let tokens = match s.seq_tokens {
        Some(n) => generated_tokens(n.min(MAX_GENERATED) as usize, s.seed),
        None => tokenize(&s.text, s.explorer.tok),
    };
    let kv_tokens = s.explorer.src.as_deref().map(|t| tokenize(t, s.explorer.tok));
    if tokens.is_empty() || kv_tokens.as_ref().is_some_and(Vec::is_empty) {
        return Err("Type a sentence to see its attention.".into());
    }
    let n_max = tokens.len().max(kv_tokens.as_ref().map_or(0, Vec::len)) as u32;
    Ok(Request {
        mask: effective_mask(s, &layout),
        heads: s.explorer.heads.heads(layout.n_q_heads),
        pool: s.explorer.pool,
        thumb_cells: pooled_resolution(n_max, screen.thumb_px(), screen.device_pixel_ratio),
        large_cells: pooled_resolution(n_max, screen.large_px(), screen.device_pixel_ratio),
        focus: None,
        layout,
        tokens: Arc::new(tokens),
        kv_tokens: kv_tokens.map(Arc::new),
        seed: s.seed,
        teach: s.explorer.teach,
    })
}

pub fn layout_line(model: &Model, layout: &LayerLayout, mask: Mask) -> String {
    let g = layout.group_size();
    let sharing = if layout.mla {
        format!("{} heads (MLA, shown decompressed: one K/V per head)", layout.n_q_heads)
    } else if layout.n_kv_heads == 1 && layout.n_q_heads > 1 {
        format!("{} query heads share 1 KV head (MQA)", layout.n_q_heads)
    } else if g == 1 {
        format!("{} heads, each with its own K/V (MHA)", layout.n_q_heads)
    } else {
        format!("{} query heads share {} KV heads, {g} per group (GQA)", layout.n_q_heads, layout.n_kv_heads)
    };
    format!(
        "{} · layer {} of {} ({}) · {sharing} · head dim {} · {}{}{} · mask: {mask}",
        model.name,
        layout.layer,
        model.n_layers(),
        layout.kind,
        layout.head_dim,
        layout.positional_text(),
        if layout.k_eq_v { " · K = V (one tensor serves both)" } else { "" },
        if layout.stores_kv { "" } else { " · reads an earlier layer's KV cache" },
    )
}

/// The size line: tokens, or queries and keys for cross-attention.
pub fn format_n(r: &Request) -> String {
    if r.kv_tokens.is_some() {
        format!("{} queries × {} keys (cross-attention)", r.n_q(), r.n_kv())
    } else {
        format!("n = {} tokens", r.n_q())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_is_one_cell_per_device_pixel() {
        assert_eq!(pooled_resolution(8192, 160.0, 2.0), 320);
        assert_eq!(pooled_resolution(100, 160.0, 1.0), 100);
        assert_eq!(pooled_resolution(8192, 160.0, 0.5), 160);
    }
}
