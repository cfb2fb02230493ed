//! A model's configuration as a short list of (name, value) lines, for the preset and import panels:
//! the values every figure rests on, named as a Hugging Face `config.json` names them.

use crate::attention::layer_inputs::LayerLayout;
use crate::model::config::{CrossLayerSharing, FfnKind, Model, Positional};
use crate::model::schedule::{LayerKind, StateMixer};
use crate::model::units::format_thousands;
use crate::model::variants::Variant;

/// `(config field, value)` lines, in the order a reader checks them.
pub fn model_facts(model: &Model) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = vec![
        ("num_hidden_layers", model.n_layers().to_string()),
        ("hidden_size", format_thousands(model.d_model.into())),
    ];
    if model.has_attention() {
        attention_facts(model, &mut out);
    } else {
        // A pure state-space model's attention geometry is a placeholder the arithmetic never uses.
        out.push(("attention", "none: no layer runs softmax attention".into()));
    }
    out.push(("layer schedule", model.schedule.summary()));
    for c in model.schedule.counts() {
        match c.kind {
            LayerKind::Global => {}
            LayerKind::Sliding { window_tokens } => {
                out.push(("sliding_window", format_thousands(window_tokens.into())))
            }
            LayerKind::Chunked { chunk_tokens } => {
                out.push(("attention_chunk_size", format_thousands(chunk_tokens.into())))
            }
            LayerKind::Stateful(_) | LayerKind::FeedForward => {}
        }
    }
    state_facts(model, &mut out);
    match model.cross_layer {
        CrossLayerSharing::None => {}
        CrossLayerSharing::ReuseLast { shared_layers } => out.push(("num_kv_shared_layers", shared_layers.to_string())),
        CrossLayerSharing::Groups { group_size } => out.push(("layers sharing one cache", group_size.to_string())),
    }
    let ffn = match model.ffn_kind {
        FfnKind::SwiGlu => "SwiGLU",
        FfnKind::GeGlu => "GeGLU",
        FfnKind::Mlp => "MLP",
    };
    out.push(("intermediate_size", format!("{} ({ffn})", format_thousands(model.ffn_size.into()))));
    if let Some(m) = model.moe {
        out.push((
            "experts",
            format!(
                "{} routed, {} active, {} shared, {} wide",
                m.n_routed_experts,
                m.n_active_experts,
                m.n_shared_experts,
                format_thousands(m.expert_ffn_size.into())
            ),
        ));
    }
    out.push(("vocab_size", format_thousands(model.vocab_size.into())));
    out.push(("tie_word_embeddings", model.tie_embeddings.to_string()));
    let pos = match model.global_positional {
        Some(g) if g != model.positional => {
            format!("{}; global layers: {}", positional_words(model.positional), positional_words(g))
        }
        _ => positional_words(model.positional),
    };
    out.push(("positions", pos));
    out.push(("max_position_embeddings", format_thousands(model.max_position_embeddings.into())));
    out
}

/// Each recurrent mixer's state per layer: "4,096 conv × 2 B + 131,072 state × 4 B per layer".
fn state_facts(model: &Model, out: &mut Vec<(&'static str, String)>) {
    for mixer in StateMixer::ALL {
        let Some(g) = model.states.of(mixer) else { continue };
        let name = match mixer {
            StateMixer::Ssm => "state-space layers: state",
            StateMixer::Linear => "linear-attention layers: state",
            StateMixer::Conv => "convolution layers: state",
        };
        out.push((
            name,
            format!(
                "{} conv elements × {} B + {} state elements × {} B per layer per sequence",
                format_thousands(g.conv_elements.into()),
                g.conv_bytes,
                format_thousands(g.state_elements.into()),
                g.state_bytes
            ),
        ));
    }
    if let Some(mixer) = model.states.beside_attention {
        out.push(("beside attention", format!("every attention layer also runs a {}", mixer.description())));
    }
}

/// Heads and K/V geometry of the attention layers.
fn attention_facts(model: &Model, out: &mut Vec<(&'static str, String)>) {
    out.push(("num_attention_heads", model.n_q_heads.to_string()));
    if let Some(m) = model.mla {
        out.push(("kv_lora_rank", m.kv_lora_rank.to_string()));
        out.push(("qk_rope_head_dim", m.qk_rope_head_dim.to_string()));
        out.push(("qk_nope_head_dim", m.qk_nope_head_dim.to_string()));
        out.push(("v_head_dim", m.v_head_dim.to_string()));
        out.push(("q_lora_rank", m.q_lora_rank.map_or_else(|| "none".into(), |r| r.to_string())));
        if let Some(i) = m.index_head_dim {
            out.push(("index_head_dim", i.to_string()));
        }
        if m.indexer_in_some_layers() {
            let keeping = (0..model.n_layers()).filter(|&l| m.keeps_indexer_key(l)).count();
            out.push(("indexer layers (keep its key)", format!("{keeping} of {}", model.n_layers())));
        }
    } else {
        out.push(("num_key_value_heads", model.attn.n_kv_heads.to_string()));
        out.push(("head_dim", model.attn.head_dim.to_string()));
        if let Some(g) = model.global_attn {
            out.push(("global layers: KV heads", g.n_kv_heads.to_string()));
            out.push(("global_head_dim", g.head_dim.to_string()));
        }
        if model.attn.k_eq_v || model.global_attn.is_some_and(|g| g.k_eq_v) {
            let which = if model.attn.k_eq_v { "all layers" } else { "global layers" };
            out.push(("attention_k_eq_v", format!("true ({which})")));
        }
    }
}

/// A layer's positional scheme in words, saying where the heatmaps differ from the model.
pub fn layer_positions_text(layout: &LayerLayout) -> String {
    match layout.positional {
        Positional::Sinusoidal => "sinusoidal positions added to the embeddings".into(),
        Positional::Learned { .. } => "learned positions (a sinusoidal table stands in for the trained one)".into(),
        p @ Positional::Rope { .. } => positional_words(p),
        Positional::NoPe => "no positional encoding (NoPE)".into(),
        Positional::Alibi => ALIBI_TEXT.into(),
    }
}

/// An ALiBi layer in words. The kernels take no bias input, so its heads are drawn like NoPE heads:
/// the text says so, lest a reader take the heatmaps for ALiBi's distance-decayed patterns.
const ALIBI_TEXT: &str = "ALiBi in the model (a bias on the scores that grows linearly with the query-key distance, \
                          nothing added to Q or K); the heatmaps here are computed without that bias \
                          (synthetic seeded weights, no bias term)";

/// A positional scheme in words: `RoPE θ = 1000000 on 25% of each head (proportional)`.
pub fn positional_words(p: Positional) -> String {
    match p {
        Positional::Sinusoidal => "sinusoidal".to_string(),
        Positional::Learned { max_positions } => format!("learned ({max_positions})"),
        Positional::Rope { theta, partial_rotary_factor, proportional, linear_factor } => {
            let mut s = format!("RoPE θ = {theta}");
            if partial_rotary_factor < 1.0 {
                let percent = format!("{:.1}", partial_rotary_factor * 100.0);
                s.push_str(&format!(" on {}% of each head", percent.trim_end_matches('0').trim_end_matches('.')));
            }
            if proportional {
                s.push_str(" (proportional)");
            }
            if linear_factor != 1.0 {
                s.push_str(&format!(", positions ÷ {linear_factor}"));
            }
            s
        }
        Positional::NoPe => "none".to_string(),
        Positional::Alibi => "ALiBi (linear biases on the scores by distance; no position added to Q or K)".to_string(),
    }
}

/// A variant in words, for a row of the comparison.
pub fn variant_label(variant: Variant, base: &Model) -> String {
    let t = |n: u64| format_thousands(n.into());
    match variant {
        Variant::AsPublished => format!("As published ({})", base.name),
        Variant::Mha => format!("MHA ({} KV heads, one per query head)", base.n_q_heads),
        Variant::Gqa { groups } => {
            format!("GQA, {groups} KV heads ({} query heads each)", base.n_q_heads / groups.max(1))
        }
        Variant::Mqa => "MQA (1 KV head)".into(),
        Variant::Mla { kv_lora_rank, rope_dim } => format!("MLA ({kv_lora_rank} latent + {rope_dim} RoPE key)"),
        Variant::Sliding { window_tokens } => format!("Sliding window {} on every layer", t(window_tokens)),
        Variant::Hybrid { local_per_global, window_tokens } => {
            format!("Hybrid {local_per_global} sliding ({}) : 1 global", t(window_tokens))
        }
        Variant::KEqV => "K = V (one tensor serves as both)".into(),
        Variant::CrossLayer { group_size } => format!("Cross-layer: {group_size} layers share one cache"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    #[test]
    fn an_alibi_layer_says_its_heatmaps_leave_the_bias_out() {
        let mut model = preset("llama-3-8b").unwrap().clone();
        model.positional = Positional::Alibi;
        let text = layer_positions_text(&LayerLayout::of(&model, 1));
        assert!(text.starts_with("ALiBi") && text.contains("computed without that bias"), "{text}");
    }

    #[test]
    fn a_model_without_attention_shows_no_head_counts_and_names_its_state() {
        use crate::model::encoding::decode_model;
        let rwkv =
            decode_model("L24.d2048.h1.kv1.hd64.pat1l.lin4096-131072-2-4-18905088.fm8192.v65536.nope.ln.ctx2048")
                .unwrap();
        let facts = model_facts(&rwkv);
        let get = |k: &str| facts.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get("num_attention_heads"), None);
        assert_eq!(get("num_key_value_heads"), None);
        assert_eq!(get("attention").as_deref(), Some("none: no layer runs softmax attention"));
        assert_eq!(
            get("linear-attention layers: state").as_deref(),
            Some("4,096 conv elements × 2 B + 131,072 state elements × 4 B per layer per sequence")
        );
        let falcon = decode_model("L4.d4096.h32.kv8.hd128.bas.ssm32768-262144-2-2-100000000.ctx4096").unwrap();
        let facts = model_facts(&falcon);
        let get = |k: &str| facts.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get("num_key_value_heads").as_deref(), Some("8"));
        assert_eq!(get("beside attention").as_deref(), Some("every attention layer also runs a state-space layer"));
    }

    #[test]
    fn facts_name_the_fields() {
        let m = preset("gemma-3-27b").cloned().unwrap_or_else(|| Model::simple(1, 64, 4));
        let facts = model_facts(&m);
        let get = |k: &str| facts.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get("num_key_value_heads").as_deref(), Some("16"));
        assert_eq!(get("sliding_window").as_deref(), Some("1,024"));
        assert_eq!(get("layer schedule").as_deref(), Some("5 sliding : 1 global"));
        let d = preset("deepseek-v3").cloned().unwrap_or_else(|| Model::simple(1, 64, 4));
        assert!(model_facts(&d).iter().any(|(n, v)| *n == "kv_lora_rank" && v == "512"));
        let mut alibi = Model::simple(2, 64, 4);
        alibi.positional = Positional::Alibi;
        let get_alibi = model_facts(&alibi).into_iter().find(|(n, _)| *n == "positions").map(|(_, v)| v);
        assert_eq!(
            get_alibi.as_deref(),
            Some("ALiBi (linear biases on the scores by distance; no position added to Q or K)")
        );
        assert_eq!(variant_label(Variant::Gqa { groups: 8 }, &m), "GQA, 8 KV heads (4 query heads each)");
        assert_eq!(
            variant_label(Variant::Hybrid { local_per_global: 5, window_tokens: 1024 }, &m),
            "Hybrid 5 sliding (1,024) : 1 global"
        );
    }

    /// What the import panel relies on: an imported config, written into the link with
    /// `encode_model` and read back, gives the same figures.
    #[test]
    fn imported_configs_survive_the_link() {
        use crate::catalog::import_hf_config;
        use crate::model::{DType, decode_model, encode_model, kv_total_bytes, model_params};
        let dir = format!("{}/tests/data/configs", env!("CARGO_MANIFEST_DIR"));
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
        let mut checked = 0;
        for entry in entries.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let Ok(imported) = import_hf_config(&text) else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            let code = encode_model(&imported.model);
            let back = decode_model(&code).unwrap_or_else(|e| panic!("{name}: {e} in {code}"));
            for n in [1u64, 5000, 131_072] {
                assert_eq!(
                    kv_total_bytes(&back, n, DType::Bf16),
                    kv_total_bytes(&imported.model, n, DType::Bf16),
                    "{name}"
                );
            }
            assert_eq!(model_params(&back), model_params(&imported.model), "{name}");
            checked += 1;
        }
        assert!(checked >= 10);
    }
}
