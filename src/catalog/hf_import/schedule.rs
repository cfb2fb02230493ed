//! The layer schedule: which layers are global, sliding or chunked (`layer_types`, Llama 4's
//! `no_rope_layers`, Gemma's patterns, Qwen's `use_sliding_window`), and which layers reuse another
//! layer's cache (Gemma 4's `num_kv_shared_layers`).

use serde_json::Value;

use super::family::Family;
use super::reader::{Reader, positive, positive_u32, show, to_u32};
use super::report::{ImportError, invalid};
use crate::model::config::{CrossLayerSharing, bounds};
use crate::model::schedule::{LayerKind, Schedule};

pub(super) struct Layout {
    pub schedule: Schedule,
    /// Llama 4: the global layers of its chunked pattern use no positions (NoPE).
    pub global_nope: bool,
    pub cross_layer: CrossLayerSharing,
}

/// The layer count and the window sizes the layer kinds need.
struct Windows {
    layers: u32,
    sliding: Option<u64>,
    chunk: Option<u64>,
}

impl Windows {
    fn sliding(&self, field: &str) -> Result<LayerKind, ImportError> {
        self.sliding
            .map(|w| LayerKind::Sliding { window_tokens: w })
            .ok_or_else(|| invalid(field, "sliding layers need sliding_window"))
    }
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family, layers: u32) -> Result<Layout, ImportError> {
    let sliding = r.count(&["sliding_window"])?;
    let sliding = sliding.map(|w| positive("sliding_window", w, bounds::MAX_WINDOW_TOKENS)).transpose()?;
    let chunk = r.count(&["attention_chunk_size"])?;
    let chunk = chunk.map(|c| positive("attention_chunk_size", c, bounds::MAX_WINDOW_TOKENS)).transpose()?;
    let w = Windows { layers, sliding, chunk };
    let (schedule, global_nope) = if let Some((path, v)) = r.find(&["layer_types"]) {
        (from_layer_types(r, &w, &path, v)?, family.is_llama4())
    } else if family.is_llama4()
        && let Some(chunk) = chunk
    {
        (llama4_pattern(r, &w, LayerKind::Chunked { chunk_tokens: chunk })?, true)
    } else {
        (from_window_fields(r, family, &w)?, false)
    };
    let cross_layer = read_cross_layer(r, layers)?;
    Ok(Layout { schedule, global_nope, cross_layer })
}

/// `kinds` repeated or truncated to `layers` entries.
fn cycled(kinds: &[LayerKind], layers: u32) -> Schedule {
    Schedule::from_layers((0..layers as usize).map(|i| kinds[i % kinds.len()]).collect())
}

/// An explicit list, one type per layer (repeated or truncated to the layer count).
fn from_layer_types(r: &mut Reader<'_>, w: &Windows, path: &str, v: &Value) -> Result<Schedule, ImportError> {
    let list = v.as_array().ok_or_else(|| invalid(path, "must be a list of strings"))?;
    if list.is_empty() {
        return Err(invalid(path, "is empty"));
    }
    let mut kinds = Vec::with_capacity(list.len());
    for item in list {
        let kind = match item.as_str() {
            Some("full_attention" | "global" | "attention") => LayerKind::Global,
            Some("sliding_attention" | "local" | "sliding") => w.sliding(path)?,
            Some("chunked_attention") => LayerKind::Chunked {
                chunk_tokens: w.chunk.ok_or_else(|| invalid(path, "chunked layers need attention_chunk_size"))?,
            },
            _ => return Err(invalid(path, format!("unknown layer type {}", show(item)))),
        };
        kinds.push(kind);
    }
    r.note_used(path, v);
    if kinds.len() != w.layers as usize {
        r.warn(format!(
            "{path} has {} entries for {} layers; the list is repeated/truncated to fit",
            kinds.len(),
            w.layers
        ));
    }
    Ok(cycled(&kinds, w.layers))
}

/// Llama 4: chunked RoPE layers with a global NoPE layer at every `no_rope_layers` 0 (or every
/// `no_rope_layer_interval`-th layer).
fn llama4_pattern(r: &mut Reader<'_>, w: &Windows, chunked: LayerKind) -> Result<Schedule, ImportError> {
    // An empty list means "use the default interval", as in transformers.
    let listed = r.find(&["no_rope_layers"]).filter(|(_, v)| v.as_array().is_none_or(|l| !l.is_empty()));
    if let Some((path, v)) = listed {
        let list = v.as_array().ok_or_else(|| invalid(&path, "must be a list of 0/1"))?;
        let mut kinds = Vec::with_capacity(list.len());
        for item in list {
            // 1: the layer uses RoPE and chunked attention; 0: a global NoPE layer.
            kinds.push(match item.as_u64() {
                Some(1) => chunked,
                Some(0) => LayerKind::Global,
                _ => {
                    return Err(invalid(&path, format!("entry {} is not 0 or 1", show(item))));
                }
            });
        }
        r.note_used(&path, v);
        if kinds.len() != w.layers as usize {
            r.warn(format!("{path} has {} entries for {} layers", kinds.len(), w.layers));
        }
        if r.find(&["no_rope_layer_interval"]).is_some() {
            r.read_as("no_rope_layer_interval not used: no_rope_layers lists every layer");
        }
        return Ok(cycled(&kinds, w.layers));
    }
    let interval = match r.count(&["no_rope_layer_interval"])? {
        Some(i) => positive_u32("no_rope_layer_interval", i, bounds::MAX_LAYERS)?,
        None => {
            r.assume("no_rope_layers: absent, so every 4th layer is a global NoPE layer");
            4
        }
    };
    Ok(Schedule::periodic(w.layers, &[(interval - 1, chunked), (1, LayerKind::Global)]))
}

/// Without a list: a sliding/global pattern, Gemma 2's alternation, Qwen's switch, or every layer
/// sliding when a window is given.
fn from_window_fields(r: &mut Reader<'_>, family: &Family, w: &Windows) -> Result<Schedule, ImportError> {
    let layers = w.layers;
    if let Some(p) = r.count(&["sliding_window_pattern"])? {
        let p = positive_u32("sliding_window_pattern", p, bounds::MAX_LAYERS)?;
        let sw = w.sliding("sliding_window_pattern")?;
        return Ok(Schedule::periodic(layers, &[(p - 1, sw), (1, LayerKind::Global)]));
    }
    if family.is_gemma2()
        && let Some(window_tokens) = w.sliding
    {
        r.assume("layer pattern: Gemma 2 alternates sliding and global layers");
        return Ok(Schedule::periodic(layers, &[(1, LayerKind::Sliding { window_tokens }), (1, LayerKind::Global)]));
    }
    // Qwen's switch, and any file that carries it (MiMo and other Qwen2 derivatives).
    if family.is_qwen() || r.value_at("use_sliding_window").is_some() {
        return qwen_layers(r, w);
    }
    Ok(match w.sliding {
        Some(window_tokens) => Schedule::uniform(layers, LayerKind::Sliding { window_tokens }),
        None => Schedule::uniform(layers, LayerKind::Global),
    })
}

/// Qwen: the window applies only with `use_sliding_window`, and only from `max_window_layers` on.
fn qwen_layers(r: &mut Reader<'_>, w: &Windows) -> Result<Schedule, ImportError> {
    if r.boolean("use_sliding_window") != Some(true) {
        if w.sliding.is_some() {
            r.warn("sliding_window ignored: use_sliding_window is not true");
        }
        return Ok(Schedule::uniform(w.layers, LayerKind::Global));
    }
    let sw = w.sliding("use_sliding_window")?;
    let from = r.count(&["max_window_layers"])?.unwrap_or(0);
    Ok(Schedule::from_layers(
        (0..w.layers as usize).map(|i| if (i as u64) >= from { sw } else { LayerKind::Global }).collect(),
    ))
}

/// Gemma 4 E2B/E4B: the last layers reuse the cache of an earlier layer of their kind.
fn read_cross_layer(r: &mut Reader<'_>, layers: u32) -> Result<CrossLayerSharing, ImportError> {
    Ok(match r.count(&["num_kv_shared_layers"])? {
        None | Some(0) => CrossLayerSharing::None,
        Some(n) if n >= u64::from(layers) => {
            return Err(invalid(
                "num_kv_shared_layers",
                format!("{n} shared layers leave none of the {layers} to compute a cache"),
            ));
        }
        Some(n) => CrossLayerSharing::ReuseLast { shared_layers: to_u32("num_kv_shared_layers", n)? },
    })
}
