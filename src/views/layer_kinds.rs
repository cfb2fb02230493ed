//! What the explorer says about each kind of layer: the layer strip's words, titles and legend, and,
//! for a layer without softmax attention (a state-space, linear-attention, convolution or
//! feed-forward-only layer), the message shown instead of heatmaps, with the nearest attention layer
//! to jump to.

use crate::model::kv_cache::state_bytes_per_layer;
use crate::model::units::{bytes_text, format_thousands};
use crate::model::{LayerKind, Model, StateMixer};

/// A layer kind in words, for the strip's summary and titles.
pub fn kind_text(kind: LayerKind) -> String {
    match kind {
        LayerKind::Global => "global (causal over all tokens)".into(),
        LayerKind::Sliding { window_tokens } => format!("sliding window of {window_tokens} tokens"),
        LayerKind::Chunked { chunk_tokens } => format!("chunked, {chunk_tokens}-token chunks"),
        LayerKind::Stateful(mixer) => mixer.description().into(),
        LayerKind::FeedForward => FEED_FORWARD.into(),
    }
}

const FEED_FORWARD: &str = "feed-forward-only layer";

/// The line above the strip: "62 layers: 5 sliding : 1 global (52 × sliding window of 1024 tokens,
/// 10 × global (causal over all tokens))", and the mixer beside attention where there is one.
pub fn strip_summary(model: &Model) -> String {
    let counts: Vec<String> =
        model.schedule.counts().iter().map(|c| format!("{} × {}", c.layers, kind_text(c.kind))).collect();
    let line = format!("{} layers: {} ({})", model.n_layers(), model.schedule.summary(), counts.join(", "));
    match model.states.beside_attention.filter(|_| model.has_attention()) {
        Some(mixer) => format!("{line}; each attention layer also runs a {} beside it", mixer.description()),
        None => line,
    }
}

/// The title (tooltip) of layer `layer`'s cell in the strip.
pub fn cell_title(model: &Model, layer: usize) -> String {
    cell_title_of(model, layer, model.stores_kv(layer))
}

fn cell_title_of(model: &Model, layer: usize, stores_kv: bool) -> String {
    let Some(kind) = model.schedule.kind(layer) else { return format!("Layer {layer}") };
    let tail = if !kind.is_attention() {
        match state_bytes_per_layer(model, kind) {
            0 => "; no attention, keeps nothing per sequence".to_string(),
            b => format!("; no attention, keeps a state of {} per sequence", bytes_text(b)),
        }
    } else if stores_kv {
        String::new()
    } else {
        "; reads an earlier layer's KV cache".to_string()
    };
    let beside = match beside_mixer(model, layer) {
        Some(mixer) => format!(
            "; also runs a {} beside its attention, keeping a state of {} per sequence",
            mixer.description(),
            bytes_text(state_bytes_per_layer(model, kind))
        ),
        None => String::new(),
    };
    format!("Layer {layer}: {}{tail}{beside}", kind_text(kind))
}

/// The recurrent mixer layer `layer` runs beside its attention (Falcon-H1's Mamba-2 in every layer,
/// Zamba's hybrid layers), marked on its strip cell.
pub fn beside_mixer(model: &Model, layer: usize) -> Option<StateMixer> {
    model.schedule.kind(layer).filter(|k| k.is_attention()).and(model.states.beside_attention)
}

/// The strip cell's class for a mixer beside attention: `beside-ssm`, `beside-linear`, `beside-conv`.
pub fn beside_class(mixer: StateMixer) -> &'static str {
    match mixer {
        StateMixer::Ssm => "beside-ssm",
        StateMixer::Linear => "beside-linear",
        StateMixer::Conv => "beside-conv",
    }
}

/// Whether the strip marks layer `layer` as reading another layer's cache (an attention layer that
/// stores none of its own; a layer without attention has no cache to share).
pub fn reads_shared_cache(model: &Model, layer: usize) -> bool {
    model.schedule.kind(layer).is_some_and(LayerKind::is_attention) && !model.stores_kv(layer)
}

/// One cell of the layer strip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripCell {
    pub kind: LayerKind,
    pub title: String,
    /// Reads another layer's cache ([`reads_shared_cache`]).
    pub shared: bool,
    pub beside: Option<StateMixer>,
}

/// Every cell of the strip in one pass (cache sharing is worked out once for all layers, so a
/// 4,096-layer model does not cost 4,096 passes).
pub fn strip_cells(model: &Model) -> Vec<StripCell> {
    let stores = model.kv_storing_layers();
    model
        .schedule
        .layers()
        .iter()
        .zip(stores)
        .enumerate()
        .map(|(layer, (&kind, stores_kv))| StripCell {
            kind,
            title: cell_title_of(model, layer, stores_kv),
            shared: kind.is_attention() && !stores_kv,
            beside: beside_mixer(model, layer),
        })
        .collect()
}

/// One entry of the strip's legend: the cell's class and what it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegendEntry {
    pub class: &'static str,
    pub label: &'static str,
}

/// The legend: the attention kinds and cache sharing always, then each kind without attention that
/// the model has (a transformer's legend is unchanged).
pub fn legend(model: &Model) -> Vec<LegendEntry> {
    let mut out = vec![
        LegendEntry { class: "global", label: "global" },
        LegendEntry { class: "sliding", label: "sliding window" },
        LegendEntry { class: "chunked", label: "chunked" },
        LegendEntry { class: "shared", label: "reuses another layer's cache" },
    ];
    let mut seen: Vec<LayerKind> = Vec::new();
    for &kind in model.schedule.layers().iter().filter(|k| !k.is_attention()) {
        if !seen.contains(&kind) {
            seen.push(kind);
        }
    }
    seen.sort_by_key(|k| (k.state_mixer().is_none(), k.noun()));
    out.extend(seen.into_iter().map(|kind| LegendEntry {
        class: kind.noun(),
        label: match kind {
            LayerKind::Stateful(mixer) => match mixer.description().strip_suffix(" layer") {
                Some(short) => short,
                None => mixer.description(),
            },
            _ => "feed-forward only",
        },
    }));
    if let Some(mixer) = model.states.beside_attention {
        let label = match mixer {
            StateMixer::Ssm => "attention with a state-space mixer beside it",
            StateMixer::Linear => "attention with a linear-attention mixer beside it",
            StateMixer::Conv => "attention with a short convolution beside it",
        };
        out.push(LegendEntry { class: beside_class(mixer), label });
    }
    out
}

/// The attention layer closest to `layer` (the earlier one on a tie); `None` when the model has none.
pub fn nearest_attention_layer(model: &Model, layer: u32) -> Option<u32> {
    let layers = model.schedule.layers();
    (0..layers.len() as u32).filter(|&l| layers[l as usize].is_attention()).min_by_key(|&l| (l.abs_diff(layer), l))
}

/// What the explorer shows instead of heatmaps when there is no attention map to draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoAttention {
    /// The layer's noun (`ssm`, `linear`, `conv`, `ffn`), or the first layer's for a whole model.
    pub kind: &'static str,
    /// True when the whole model has no attention layer (the message is about the model).
    pub whole_model: bool,
    pub text: String,
    /// The attention layer to offer instead.
    pub nearest: Option<u32>,
}

/// Why layer `layer` of `model` has no heatmaps, or `None` when it runs softmax attention.
pub fn no_attention(model: &Model, layer: u32) -> Option<NoAttention> {
    if !model.has_attention() {
        return Some(whole_model(model));
    }
    let kind = model.schedule.kind(layer as usize).filter(|k| !k.is_attention())?;
    let nearest = nearest_attention_layer(model, layer);
    let keeps = match state_bytes_per_layer(model, kind) {
        0 => "it keeps nothing per sequence".to_string(),
        b => format!("it carries a state of {} per sequence instead, whatever the context length", bytes_text(b)),
    };
    let text = match kind {
        LayerKind::FeedForward => format!(
            "Layer {layer} is a {FEED_FORWARD}: it mixes no tokens at all, so there is no attention map; {keeps}."
        ),
        _ => format!(
            "Layer {layer} is a {}: it has no softmax attention, so there is no attention map; {keeps}.",
            kind_text(kind)
        ),
    };
    Some(NoAttention { kind: kind.noun(), whole_model: false, text, nearest })
}

/// A model's layers without softmax attention, counted by kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recurrent {
    pub layers: u32,
    /// "28 state-space layers and 4 feed-forward-only layers".
    pub words: String,
    /// The state they keep per sequence, in bytes, at any context length.
    pub state_bytes: u128,
}

/// The layers of `model` without softmax attention, and the mixers beside its attention layers;
/// `None` for a transformer.
pub fn recurrent_layers(model: &Model) -> Option<Recurrent> {
    let counts: Vec<_> = model.schedule.counts().into_iter().filter(|c| !c.kind.is_attention()).collect();
    let beside = model.states.beside_attention.filter(|_| model.has_attention());
    if counts.is_empty() && beside.is_none() {
        return None;
    }
    let plural = |n: u32| if n == 1 { "" } else { "s" };
    let mut parts: Vec<String> = counts
        .iter()
        .map(|c| {
            let words = kind_text(c.kind);
            let words = words.strip_suffix(" layer").unwrap_or(&words);
            format!("{} {words} layer{}", format_thousands(c.layers.into()), plural(c.layers))
        })
        .collect();
    if let Some(mixer) = beside {
        let n = model.attention_layers();
        let words = mixer.description().strip_suffix(" layer").unwrap_or(mixer.description());
        parts.push(format!("{words} mixer{} beside its {n} attention layer{}", plural(n), plural(n)));
    }
    Some(Recurrent {
        layers: counts.iter().map(|c| c.layers).sum(),
        words: parts.join(" and "),
        state_bytes: crate::model::kv_cache::state_bytes(model).unwrap_or(0),
    })
}

/// What the state of `r` is, for a sentence: "keep a constant state of 9 bytes per sequence".
pub fn keeps_text(r: &Recurrent) -> String {
    match r.state_bytes {
        0 => "keep nothing per sequence".into(),
        b => format!("keep a constant state of {} per sequence", bytes_text(b)),
    }
}

fn whole_model(model: &Model) -> NoAttention {
    let kind = model.schedule.layers().first().map_or("ffn", |k| k.noun());
    let text = match recurrent_layers(model) {
        Some(r) => format!(
            "{} has no softmax attention layer: its layers are {}, so there is no attention map to show; they {}, \
             whatever the context length.",
            model.name,
            r.words,
            keeps_text(&r)
        ),
        None => format!("{} has no softmax attention layer, so there is no attention map to show.", model.name),
    };
    NoAttention { kind, whole_model: true, text, nearest: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::model::encoding::decode_model;
    use crate::model::schedule::{Schedule, StateMixer};

    const SSM: LayerKind = LayerKind::Stateful(StateMixer::Ssm);

    /// 8 layers, attention at 4 only, Mamba elsewhere: 7 x (32,768 + 131,072) elements x 2 B.
    fn hybrid() -> Model {
        let mut m = decode_model("L8.d4096.h32.pat4s-1g-3s.ssm32768-131072-2-2-1000").unwrap();
        m.name = "Hybrid".into();
        m
    }

    #[test]
    fn a_mamba_layer_says_what_it_keeps_and_offers_the_nearest_attention_layer() {
        let m = hybrid();
        // One Mamba layer: (32,768 + 131,072) x 2 B = 327,680 B.
        let n = no_attention(&m, 2).unwrap();
        assert_eq!(
            n,
            NoAttention {
                kind: "ssm",
                whole_model: false,
                text: "Layer 2 is a state-space layer: it has no softmax attention, so there is no attention \
                       map; it carries a state of 327,680 bytes = 327.68 KB (320.00 KiB) per sequence instead, whatever \
                       the context length."
                    .into(),
                nearest: Some(4),
            }
        );
        assert_eq!(no_attention(&m, 4), None);
        assert_eq!(no_attention(&m, 7).unwrap().nearest, Some(4));
        assert_eq!(
            cell_title(&m, 0),
            "Layer 0: state-space layer; no attention, keeps a state of 327,680 bytes = 327.68 KB (320.00 KiB) per sequence"
        );
        assert_eq!(cell_title(&m, 4), "Layer 4: global (causal over all tokens)");
        assert!(!reads_shared_cache(&m, 0));
    }

    #[test]
    fn feed_forward_layers_mix_nothing() {
        let mut m = Model::simple(4, 512, 8);
        m.schedule = Schedule::periodic(4, &[(1, LayerKind::Global), (1, LayerKind::FeedForward)]);
        let n = no_attention(&m, 3).unwrap();
        assert_eq!(n.kind, "ffn");
        assert_eq!(
            n.text,
            "Layer 3 is a feed-forward-only layer: it mixes no tokens at all, so there is no attention map; it keeps \
             nothing per sequence."
        );
        // Layers 2 and 4 would tie; 2 is the only one before 3.
        assert_eq!(n.nearest, Some(2));
        assert_eq!(nearest_attention_layer(&m, 1), Some(0));
        assert_eq!(cell_title(&m, 1), "Layer 1: feed-forward-only layer; no attention, keeps nothing per sequence");
    }

    #[test]
    fn a_model_without_attention_says_so_for_the_whole_view() {
        let mut m = hybrid();
        m.name = "Mamba".into();
        m.schedule = Schedule::uniform(8, SSM);
        let n = no_attention(&m, 3).unwrap();
        assert!(n.whole_model);
        assert_eq!((n.kind, n.nearest), ("ssm", None));
        // 8 x 327,680 = 2,621,440 B.
        assert_eq!(
            n.text,
            "Mamba has no softmax attention layer: its layers are 8 state-space layers, so there is no \
             attention map to show; they keep a constant state of 2,621,440 bytes = 2.62 MB (2.50 MiB) per \
             sequence, whatever the context length."
        );
        assert_eq!(nearest_attention_layer(&m, 3), None);
    }

    #[test]
    fn recurrent_layers_are_counted_by_kind() {
        assert_eq!(recurrent_layers(preset("llama-3-8b").unwrap()), None);
        let mut m = hybrid();
        m.schedule = Schedule::periodic(8, &[(1, LayerKind::FeedForward), (2, SSM), (1, LayerKind::Global), (4, SSM)]);
        // 6 Mamba layers x 327,680 B = 1,966,080 B; the feed-forward layer keeps nothing.
        let r = recurrent_layers(&m).unwrap();
        assert_eq!(
            r,
            Recurrent {
                layers: 7,
                words: "1 feed-forward-only layer and 6 state-space layers".into(),
                state_bytes: 1_966_080
            }
        );
        assert_eq!(keeps_text(&r), "keep a constant state of 1,966,080 bytes = 1.97 MB (1.88 MiB) per sequence");
    }

    #[test]
    fn mixers_beside_attention_are_named_in_titles_legend_and_counts() {
        // Falcon-H1's shape: every layer runs attention and a Mamba-2 mixer side by side; Zamba's: Mamba
        // layers, some also calling attention. Each mixer keeps (32,768 + 131,072) x 2 B = 327,680 B.
        let mut falcon = hybrid();
        falcon.schedule = Schedule::uniform(4, LayerKind::Global);
        falcon.states.beside_attention = Some(StateMixer::Ssm);
        assert_eq!(beside_mixer(&falcon, 1), Some(StateMixer::Ssm));
        assert_eq!(
            cell_title(&falcon, 1),
            "Layer 1: global (causal over all tokens); also runs a state-space layer beside its attention, \
             keeping a state of 327,680 bytes = 327.68 KB (320.00 KiB) per sequence"
        );
        assert_eq!(legend(&falcon).last().map(|e| e.class), Some("beside-ssm"));
        assert_eq!(
            strip_summary(&falcon),
            "4 layers: all global (4 × global (causal over all tokens)); each attention layer also runs a \
             state-space layer beside it"
        );
        assert_eq!(
            strip_summary(preset("gemma-3-27b").unwrap()),
            "62 layers: 5 sliding : 1 global (52 × sliding window of 1024 tokens, 10 × global (causal over all tokens))"
        );
        let r = recurrent_layers(&falcon).unwrap();
        // 4 x 327,680 = 1,310,720 B.
        assert_eq!(r.words, "state-space mixers beside its 4 attention layers");
        assert_eq!(r.state_bytes, 1_310_720);
        let mut zamba = hybrid();
        zamba.states.beside_attention = Some(StateMixer::Ssm);
        // 7 Mamba layers and the mixer beside the attention layer: 8 x 327,680 = 2,621,440 B.
        let r = recurrent_layers(&zamba).unwrap();
        assert_eq!(r.words, "7 state-space layers and state-space mixer beside its 1 attention layer");
        assert_eq!(r.state_bytes, 2_621_440);
        assert_eq!(beside_mixer(&zamba, 0), None);
    }

    #[test]
    fn the_legend_adds_only_the_kinds_a_model_has() {
        let classes = |m: &Model| legend(m).iter().map(|e| e.class).collect::<Vec<_>>();
        assert_eq!(classes(preset("gemma-3-27b").unwrap()), ["global", "sliding", "chunked", "shared"]);
        let mut m = hybrid();
        m.schedule = Schedule::periodic(8, &[(1, LayerKind::FeedForward), (2, SSM), (1, LayerKind::Global), (4, SSM)]);
        let entries = legend(&m);
        assert_eq!(classes(&m), ["global", "sliding", "chunked", "shared", "ssm", "ffn"]);
        assert_eq!((entries[4].label, entries[5].label), ("state-space", "feed-forward only"));
    }

    #[test]
    fn transformers_have_attention_everywhere() {
        let llama = preset("llama-3-8b").unwrap();
        assert!((0..32).all(|l| no_attention(llama, l).is_none()));
        assert_eq!(cell_title(llama, 0), "Layer 0: global (causal over all tokens)");
        assert_eq!(nearest_attention_layer(llama, 7), Some(7));
    }
}
