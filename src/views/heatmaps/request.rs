//! What the heatmap explorer computes for a state: the layer, the tokens, the mask, the heads, and
//! the size of each pooled map on screen, as one [`Request`].

use std::sync::Arc;

use crate::attention::layer_inputs::LayerLayout;
use crate::attention::tokens::{generated_tokens, tokenize};
pub use crate::live_attention::request::{EXACT_MAX_N, Request};
use crate::model::Mask;
use crate::model::Model;
use crate::model::limits::{self, CPU_MAX_MULTIPLY_ADDS, JOB_MAX_BYTES, KERNEL_MAX_HEAD_DIM, product};
use crate::model::units::format_thousands;
use crate::views::attention_input::AttentionInput;
use crate::views::heatmaps::params::{ExplorerParams, MAX_GENERATED};

/// Cross-attention runs queries in chunks of at most the keys' length (the kernels place queries as
/// the last rows of the keys), one engine call each: at most this many chunks.
pub const MAX_QUERIES_PER_KEY: u64 = 64;

/// Heads with at most this many cells carry every probability in `data-probs` (for tests and tools).
pub const PROBS_ATTR_MAX_CELLS: usize = 64 * 64;

/// Cells of a pooled heatmap along one axis of `n` tokens drawn `css_px` wide at `device_pixel_ratio`:
/// one cell per device pixel, never more cells than tokens.
pub fn pooled_resolution(n: u32, css_px: f64, device_pixel_ratio: f64) -> u32 {
    let px = (css_px * device_pixel_ratio.clamp(1.0, 4.0)).round().max(1.0) as u32;
    px.min(n).max(1)
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

/// The mask the explorer applies: the link's when it names one, else the layer's own; cross-attention
/// sees every key. `None` for a layer without attention, whatever the link names.
pub fn effective_mask(input: &AttentionInput, explorer: &ExplorerParams, layout: &LayerLayout) -> Option<Mask> {
    let own = Mask::of_layer(layout.kind)?;
    Some(if explorer.src.is_some() { Mask::Full } else { input.chosen_mask().unwrap_or(own) })
}

/// What to compute for one layer of the model, or why there is nothing to compute.
pub fn build_request(
    input: &AttentionInput,
    explorer: &ExplorerParams,
    layout: LayerLayout,
    screen: Screen,
) -> Result<Request, String> {
    let tokens = match input.seq_tokens {
        Some(n) => generated_tokens(n.min(MAX_GENERATED) as usize, input.seed),
        None => tokenize(&input.text, explorer.tok),
    };
    let kv_tokens = explorer.src.as_deref().map(|t| tokenize(t, explorer.tok));
    if tokens.is_empty() || kv_tokens.as_ref().is_some_and(Vec::is_empty) {
        return Err("Type a sentence to see its attention.".into());
    }
    let n_max = tokens.len().max(kv_tokens.as_ref().map_or(0, Vec::len)) as u32;
    let mask = effective_mask(input, explorer, &layout)
        .ok_or_else(|| format!("Layer {} has no attention to show.", layout.layer))?;
    let n_kv = kv_tokens.as_ref().map_or(tokens.len(), Vec::len) as u64;
    check_job_size(tokens.len() as u64, n_kv, &layout)?;
    if tokens.len() as u64 > MAX_QUERIES_PER_KEY * n_kv {
        return Err(format!(
            "Cross-attention computes queries in chunks no longer than the key text, and {} queries over {} key{} \
             would take more than {MAX_QUERIES_PER_KEY} of them: shorten the text or lengthen the key text.",
            format_thousands(tokens.len() as u128),
            format_thousands(n_kv.into()),
            if n_kv == 1 { "" } else { "s" }
        ));
    }
    Ok(Request {
        mask,
        heads: explorer.heads.heads(layout.n_q_heads),
        pool: explorer.pool,
        map_cells: pooled_resolution(n_max, screen.thumb_px(), screen.device_pixel_ratio),
        focus_cells: pooled_resolution(n_max, screen.large_px(), screen.device_pixel_ratio),
        focus: None,
        layout,
        tokens: Arc::new(tokens),
        kv_tokens: kv_tokens.map(Arc::new),
        seed: input.seed,
        teach: explorer.teach,
        ids: None,
    })
}

/// Host bytes the explorer holds for one layer of `n_q` queries over `n_kv` keys, an upper bound:
/// each side's RoPE angles and designed rows (two `[n, d]` tables), one batch of a KV group (its query
/// heads, K and V, `[n, d]` each), and the token embeddings (at most 256 bytes a token).
pub fn host_bytes(n_q: u64, n_kv: u64, layout: &LayerLayout) -> u64 {
    let d = u64::from(layout.head_dim);
    let group = u64::from(layout.group_size().max(1));
    let tables = product(&[2, n_q.saturating_add(n_kv), d, 4]);
    let batch = product(&[group.saturating_mul(n_q).saturating_add(2 * n_kv), d, 4]);
    tables.saturating_add(batch).saturating_add(product(&[n_q.saturating_add(n_kv), 256]))
}

/// Refuses a layer whose inputs would not fit the job limit, or whose heads (wider than the GPU
/// kernels, so computed by the CPU reference) would take more work than the CPU fallback allows,
/// saying how many tokens would fit.
fn check_job_size(n_q: u64, n_kv: u64, layout: &LayerLayout) -> Result<(), String> {
    let d = u64::from(layout.head_dim);
    let on_cpu = !limits::kernels_take_head_dim(layout.head_dim);
    let memory_fit = JOB_MAX_BYTES / host_bytes(1, 1, layout).max(1);
    let cpu_fit = if on_cpu { (CPU_MAX_MULTIPLY_ADDS / d.max(1)).isqrt() } else { u64::MAX };
    let fit = format!("Up to about {} tokens fit at this width.", format_thousands(memory_fit.min(cpu_fit).into()));
    let what = format!("{} tokens through heads {} wide", format_thousands(n_q.max(n_kv).into()), layout.head_dim);
    if let Err(over) = limits::check_job_bytes(host_bytes(n_q, n_kv, layout), JOB_MAX_BYTES) {
        return Err(format!("{what} {over}. {fit}"));
    }
    if on_cpu && product(&[n_q, n_kv, d]) > CPU_MAX_MULTIPLY_ADDS {
        return Err(format!(
            "{what}: wider than the GPU kernels' {KERNEL_MAX_HEAD_DIM}, so the CPU reference computes them, at most {} \
             multiply-adds a head. {fit}",
            format_thousands(CPU_MAX_MULTIPLY_ADDS.into())
        ));
    }
    Ok(())
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
        crate::views::describe::layer_positions_text(layout),
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
    use crate::views::heatmaps::params::HeadSelection;
    use crate::views::link::LinkParams;

    #[test]
    fn resolution_is_one_cell_per_device_pixel() {
        assert_eq!(pooled_resolution(8192, 160.0, 2.0), 320);
        assert_eq!(pooled_resolution(100, 160.0, 1.0), 100);
        assert_eq!(pooled_resolution(8192, 160.0, 0.5), 160);
    }

    fn layer(preset_id: &str, layer: u32) -> LayerLayout {
        LayerLayout::of(crate::catalog::presets::preset(preset_id).unwrap(), layer)
    }

    const WIDE: Screen = Screen { width_css_px: 1280.0, device_pixel_ratio: 2.0 };

    #[test]
    fn thumbnails_and_the_enlarged_head_fit_the_window() {
        assert_eq!((WIDE.thumb_px(), WIDE.large_px()), (160.0, 640.0));
        // A 380 px phone: two thumbnails to a row, (380 - 56) / 2 = 162 -> at most 160.
        let phone = |w| Screen { width_css_px: w, device_pixel_ratio: 3.0 };
        assert_eq!((phone(380.0).thumb_px(), phone(380.0).large_px()), (160.0, 260.0));
        assert_eq!((phone(300.0).thumb_px(), phone(300.0).large_px()), (122.0, 220.0));
    }

    #[test]
    fn the_default_link_asks_for_every_head_of_llama_3_8b_layer_0() {
        let req = build_request(&AttentionInput::default(), &ExplorerParams::default(), layer("llama-3-8b", 0), WIDE)
            .unwrap();
        // "The cat sat on the mat because the cat was tired." in word tokens: 11 words and the full stop.
        assert_eq!((req.n_q(), req.n_kv(), req.exact()), (12, 12, true));
        assert_eq!(req.heads, (0..32).collect::<Vec<_>>());
        assert_eq!((req.layout.n_kv_heads, req.mask), (8, Mask::Causal));
        assert_eq!((req.map_cells, req.focus_cells), (12, 12));
    }

    #[test]
    fn the_mask_is_the_links_or_the_layers_and_cross_attention_sees_all() {
        let (input, explorer) = (AttentionInput::default(), ExplorerParams::default());
        // Gemma 3 27B: layer 0 is a local layer with a 1024-token window, layer 5 a global one.
        assert_eq!(
            effective_mask(&input, &explorer, &layer("gemma-3-27b", 0)),
            Some(Mask::Sliding { window_tokens: 1024 })
        );
        assert_eq!(effective_mask(&input, &explorer, &layer("gemma-3-27b", 5)), Some(Mask::Causal));
        let mut named = AttentionInput::default();
        named.set("mask", "causal").unwrap();
        assert_eq!(effective_mask(&named, &explorer, &layer("gemma-3-27b", 0)), Some(Mask::Causal));
        named.set("mask", "chunked").unwrap();
        assert_eq!(
            effective_mask(&named, &explorer, &layer("gemma-3-27b", 0)),
            Some(Mask::Chunked { chunk_tokens: 4 })
        );
        let cross = ExplorerParams { src: Some("le chat".into()), ..Default::default() };
        assert_eq!(effective_mask(&named, &cross, &layer("gemma-3-27b", 0)), Some(Mask::Full));
    }

    #[test]
    fn inputs_past_the_job_limit_are_refused_before_anything_is_built() {
        // Llama 3 8B at 65,536 tokens (d 128, groups of 4): RoPE and designed tables 2 x 131,072 x 128 x 4
        // = 134,217,728; a batch (4 x 65,536 + 2 x 65,536) x 128 x 4 = 201,326,592; embeddings
        // 131,072 x 256 = 33,554,432; in all 369,098,752 bytes, within 1 GiB.
        let llama = layer("llama-3-8b", 0);
        assert_eq!(host_bytes(65_536, 65_536, &llama), 369_098_752);
        let mut input = AttentionInput::default();
        input.set("n", "65536").unwrap();
        assert!(build_request(&input, &ExplorerParams::default(), llama.clone(), WIDE).is_ok());
        // One head 16,384 wide: per query and key 2 x 2 x 16,384 x 4 + 3 x 16,384 x 4 + 2 x 256 = 459,264
        // bytes, so 2^30 / 459,264 = 2,337 tokens fit in memory; 65,536 would need 30 GB. The CPU
        // reference computes such heads, at most 1,024,000,000 multiply-adds a head: 250 tokens
        // (250^2 x 16,384 = 1,024,000,000).
        let wide = LayerLayout { head_dim: 16_384, n_q_heads: 1, n_kv_heads: 1, ..llama };
        let why = build_request(&input, &ExplorerParams::default(), wide.clone(), WIDE).unwrap_err();
        assert!(why.starts_with("65,536 tokens through heads 16384 wide would need 30.10 GB"), "{why}");
        assert!(why.ends_with("Up to about 250 tokens fit at this width."), "{why}");
        input.set("n", "251").unwrap();
        let why = build_request(&input, &ExplorerParams::default(), wide.clone(), WIDE).unwrap_err();
        assert!(why.starts_with("251 tokens through heads 16384 wide: wider than the GPU kernels' 1024"), "{why}");
        input.set("n", "250").unwrap();
        assert!(build_request(&input, &ExplorerParams::default(), wide, WIDE).is_ok());
    }

    #[test]
    fn cross_attention_with_far_more_queries_than_keys_is_refused() {
        // 65,536 generated queries over one key would be 65,536 engine calls; 64 x 1 is the most.
        let mut input = AttentionInput::default();
        input.set("n", "64").unwrap();
        let cross = ExplorerParams { src: Some("x".into()), ..Default::default() };
        assert!(build_request(&input, &cross, layer("llama-3-8b", 0), WIDE).is_ok());
        input.set("n", "65").unwrap();
        let why = build_request(&input, &cross, layer("llama-3-8b", 0), WIDE).unwrap_err();
        assert!(why.contains("65 queries over 1 key would take more than 64"), "{why}");
    }

    #[test]
    fn long_inputs_are_pooled_to_device_pixels_and_empty_ones_explained() {
        let mut input = AttentionInput::default();
        input.set("n", "100000").unwrap();
        let req = build_request(&input, &ExplorerParams::default(), layer("llama-3-8b", 0), WIDE).unwrap();
        // Cut to the 65,536 tokens the explorer generates; 160 px x 2 = 320 cells, 640 px x 2 = 1280.
        assert_eq!((req.n_q(), req.exact(), req.map_cells, req.focus_cells), (65_536, false, 320, 1280));
        let empty = AttentionInput { text: "  ".into(), ..Default::default() };
        let why = build_request(&empty, &ExplorerParams::default(), layer("llama-3-8b", 0), WIDE).unwrap_err();
        assert_eq!(why, "Type a sentence to see its attention.");
        let cross = ExplorerParams {
            src: Some("le chat noir".into()),
            heads: HeadSelection::List(vec![3, 40]),
            ..Default::default()
        };
        let req = build_request(&AttentionInput::default(), &cross, layer("llama-3-8b", 0), WIDE).unwrap();
        assert_eq!((req.n_q(), req.n_kv(), req.heads.clone()), (12, 3, vec![3]));
        assert_eq!(format_n(&req), "12 queries × 3 keys (cross-attention)");
    }
}
