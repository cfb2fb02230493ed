//! The one-line formulas shown beside each figure, with the actual numbers multiplied, so a reader
//! can redo the arithmetic by hand and see *why* (GQA's KV heads, K=V's single tensor, a window's
//! capped tokens, MLA's latent, shared layers that store nothing).
//!
//! Every function returns plain text (the UI inserts it as a text node).

use crate::model::config::Model;
use crate::model::dtype::{DType, bits_to_bytes_ceil};
use crate::model::kv_cache::{KvRow, kv_breakdown, kv_bytes_per_token, kv_bytes_per_token_per_layer, state_bytes};
use crate::model::params::AttnParams;
use crate::model::schedule::LayerKind;
use crate::model::units::format_thousands;

/// The per-element size: `2 B` for FP16, `4 bits ÷ 8` for INT4.
pub fn dtype_factor(dtype: DType) -> String {
    let bits = dtype.bits();
    if bits.is_multiple_of(8) { format!("{} B", bits / 8) } else { format!("{bits} bits ÷ 8") }
}

/// What one layer of `kind` caches per token, as factors: `8 KV heads × 128 dims × 2 (K and V)`,
/// `1 KV head × 512 dims × 1 (K = V)`, `(512 latent + 64 RoPE key)`, or with DeepSeek V3.2's
/// lightning indexer `(512 latent + 64 RoPE key + 128 indexer key)` (an indexer that runs in only
/// some layers is a term of its own, [`indexer_term`]).
pub fn elements_factors(model: &Model, kind: LayerKind) -> String {
    if let Some(m) = model.mla {
        let every_layer = m.index_head_dim.filter(|_| !m.indexer_in_some_layers());
        let indexer = every_layer.map(|i| format!(" + {i} indexer key")).unwrap_or_default();
        return format!("({} latent + {} RoPE key{indexer})", m.kv_lora_rank, m.qk_rope_head_dim);
    }
    let g = model.geometry(kind);
    let heads = if g.n_kv_heads == 1 { "KV head" } else { "KV heads" };
    let tensors = if g.k_eq_v { "1 (K = V)" } else { "2 (K and V)" };
    format!("{} {heads} × {} dims × {tensors}", g.n_kv_heads, g.head_dim)
}

/// "52 sliding layers", "1 global layer", "24 of 32 global layers" (when some layers reuse a cache).
fn layers_phrase(row: &KvRow) -> String {
    let noun = row.kind.noun();
    let plural = if row.storing_layers == 1 { "layer" } else { "layers" };
    if row.storing_layers == row.layers {
        format!("{} {noun} {plural}", row.storing_layers)
    } else {
        format!("{} of {} {noun} {plural}", row.storing_layers, row.layers)
    }
}

/// The `kv-bytes-per-token` formula: one term per layer kind, summed, e.g.
/// `32 global layers × 8 KV heads × 128 dims × 2 (K and V) × 2 B = 131,072 B per token`.
pub fn per_token_formula(model: &Model, dtype: DType) -> String {
    let Ok(b) = kv_breakdown(model, 1, dtype) else { return "too large to compute".into() };
    let terms: Vec<String> = b
        .rows
        .iter()
        .filter(|r| r.storing_layers > 0)
        .map(|r| {
            let term = format!("{} × {} × {}", layers_phrase(r), elements_factors(model, r.kind), dtype_factor(dtype));
            term + &indexer_term(r, dtype)
        })
        .collect();
    let total = kv_bytes_per_token(model, dtype).map(format_thousands).unwrap_or_else(|_| "?".into());
    if terms.is_empty() {
        return format!("no layer stores a cache = {total} B per token");
    }
    format!("{} = {total} B per token", terms.join(" + "))
}

/// The indexer keys of the layers that run the indexer when not every layer does (GLM-5.2):
/// ` + 21 of them × 128 indexer key × 2 B`; empty otherwise.
fn indexer_term(row: &KvRow, dtype: DType) -> String {
    if row.indexer_layers == 0 {
        return String::new();
    }
    let key = format_thousands(row.indexer_elements);
    format!(" + {} of them × {key} indexer key × {}", row.indexer_layers, dtype_factor(dtype))
}

/// One breakdown row's bytes: `52 layers × 4,096 B per token × 1,024 tokens = 218,103,808 B`, or
/// with an indexer in some layers `(78 × 1,152 B + 21 × 256 B) per token × 1 tokens = 95,232 B`.
pub fn row_formula(model: &Model, row: &KvRow, dtype: DType) -> String {
    format!(
        "{} per token × {} tokens = {} B",
        row_bytes_per_token(model, row, dtype),
        format_thousands(row.cached_tokens.into()),
        format_thousands(row.bytes)
    )
}

/// A row's bytes per token as factors: `52 × 8,192 B`, or `(78 × 1,152 B + 21 × 256 B)` with the
/// indexer keys of the layers that run an indexer only some layers have.
fn row_bytes_per_token(model: &Model, row: &KvRow, dtype: DType) -> String {
    let per_layer = format_thousands(kv_bytes_per_token_per_layer(model, row.kind, dtype));
    if row.indexer_layers == 0 {
        return format!("{} × {per_layer} B", row.storing_layers);
    }
    let key = bits_to_bytes_ceil(row.indexer_elements.saturating_mul(dtype.bits().into()));
    format!("({} × {per_layer} B + {} × {} B)", row.storing_layers, row.indexer_layers, format_thousands(key))
}

/// What one layer of `kind` keeps per sequence, as factors: `(32,768 conv elements × 2 B + 262,144
/// state elements × 2 B)`; `None` for a layer that keeps no state (attention, feed-forward only).
pub fn state_factors(model: &Model, kind: LayerKind) -> Option<String> {
    let g = model.state_geometry(kind)?;
    Some(format!(
        "({} conv elements × {} B + {} state elements × {} B)",
        format_thousands(g.conv_elements.into()),
        g.conv_bytes,
        format_thousands(g.state_elements.into()),
        g.state_bytes
    ))
}

/// A breakdown row's state: `28 layers × (32,768 conv elements × 2 B + 262,144 state elements × 2 B)
/// = 16,515,072 B per sequence`; a feed-forward-only row keeps nothing.
pub fn state_row_formula(model: &Model, row: &KvRow) -> String {
    match state_factors(model, row.kind) {
        Some(factors) => {
            format!("{} layers × {factors} = {} B per sequence", row.layers, format_thousands(row.state_bytes))
        }
        None => format!("{} layers × no token mixer = 0 B", row.layers),
    }
}

/// The `state-bytes` formula: one term per recurrent mixer, summed, e.g. `28 ssm layers × (32,768
/// conv elements × 2 B + 262,144 state elements × 2 B) = 16,515,072 B per sequence`.
pub fn state_formula(model: &Model) -> String {
    let terms: Vec<String> = model
        .schedule
        .counts()
        .iter()
        .filter_map(|c| {
            let factors = state_factors(model, c.kind)?;
            let plural = if c.layers == 1 { "layer" } else { "layers" };
            // An attention layer keeps a state when a mixer runs beside it (Falcon-H1).
            let beside = match model.state_mixer(c.kind) {
                Some(m) if c.kind.is_attention() => format!(" ({} beside attention)", m.noun()),
                _ => String::new(),
            };
            Some(format!("{} {} {plural}{beside} × {factors}", c.layers, c.kind.noun()))
        })
        .collect();
    let total = state_bytes(model).map(format_thousands).unwrap_or_else(|_| "?".into());
    if terms.is_empty() {
        return "no layer keeps a recurrent state = 0 B".into();
    }
    format!("{} = {total} B per sequence", terms.join(" + "))
}

/// Why a row holds the tokens it holds at a context of `n_tokens`.
pub fn cached_tokens_reason(kind: LayerKind, n_tokens: u64) -> String {
    let n = format_thousands(n_tokens.into());
    match kind {
        LayerKind::Global => format!("all {n}"),
        LayerKind::Sliding { window_tokens: w } => format!("min({n}, window {})", format_thousands(w.into())),
        LayerKind::Chunked { chunk_tokens: c } => format!("min({n}, chunk {})", format_thousands(c.into())),
        LayerKind::Stateful(_) | LayerKind::FeedForward => "none: no attention".into(),
    }
}

/// The `kv-total-bytes` formula: the rows' byte counts summed.
pub fn total_formula(model: &Model, n_tokens: u64, dtype: DType) -> String {
    let Ok(b) = kv_breakdown(model, n_tokens, dtype) else { return "too large to compute".into() };
    let terms: Vec<String> = b
        .rows
        .iter()
        .filter(|r| r.storing_layers > 0)
        .map(|r| {
            format!("{} × {} tokens", row_bytes_per_token(model, r, dtype), format_thousands(r.cached_tokens.into()))
        })
        .collect();
    format!("{} = {} B", if terms.is_empty() { "0".into() } else { terms.join(" + ") }, format_thousands(b.total_bytes))
}

/// The `attn-params-per-layer` formula, part by part:
/// `Q 4,096×4,096 + K 4,096×1,024 + V 4,096×1,024 + O 4,096×4,096 = 41,943,040`.
pub fn attn_params_formula(model: &Model, kind: LayerKind, p: &AttnParams) -> String {
    if !kind.is_attention() {
        return format!("no softmax attention in this {} layer = 0", kind.noun());
    }
    let d = format_thousands(model.d_model.into());
    let mut terms: Vec<String> = Vec::new();
    if let Some(m) = model.mla {
        let h = model.n_q_heads;
        let qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
        terms.push(match m.q_lora_rank {
            Some(r) => format!("Q {d}×{r} + {r}×{h}×{qk}"),
            None => format!("Q {d}×{h}×{qk}"),
        });
        terms.push(format!("KV down {d}×({} + {})", m.kv_lora_rank, m.qk_rope_head_dim));
        terms.push(format!("KV up {}×{h}×({} + {})", m.kv_lora_rank, m.qk_nope_head_dim, m.v_head_dim));
        terms.push(format!("O {h}×{}×{d}", m.v_head_dim));
    } else {
        let g = model.geometry(kind);
        let q_width = format_thousands(u128::from(model.n_q_heads) * u128::from(g.head_dim));
        let kv_width = format_thousands(u128::from(g.n_kv_heads) * u128::from(g.head_dim));
        terms.push(format!("Q {d}×{q_width}"));
        terms.push(format!("K {d}×{kv_width}"));
        if !g.k_eq_v {
            terms.push(format!("V {d}×{kv_width}"));
        }
        terms.push(format!("O {q_width}×{d}"));
    }
    if p.biases > 0 {
        terms.push(format!("biases {}", format_thousands(p.biases)));
    }
    if p.norms > 0 {
        terms.push(format!("norms {}", format_thousands(p.norms)));
    }
    if p.sinks > 0 {
        terms.push(format!("sinks {}", format_thousands(p.sinks)));
    }
    format!("{} = {}", terms.join(" + "), format_thousands(p.total()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::model::params::attn_params;

    #[test]
    fn gpt_oss_attention_formula_names_its_biases_and_sinks() {
        // GPT-OSS 20B: q and o 2 * 2880 * 4096 = 23,592,960; k and v 2 * 2880 * 512 = 2,949,120;
        // biases q 4096 + k, v 1,024 + o 2,880 = 8,000; sinks 64: 26,550,144 per layer.
        let json = include_str!("../../tests/data/configs/gpt-oss-20b.json");
        let m = crate::catalog::hf_import::import_hf_config(json).unwrap().model;
        let layer = attn_params(&m, LayerKind::Global);
        let formula = attn_params_formula(&m, LayerKind::Global, &layer);
        assert!(formula.ends_with("biases 8,000 + sinks 64 = 26,550,144"), "{formula}");
    }

    fn model(id: &str) -> Model {
        preset(id).cloned().unwrap_or_else(|| panic!("{id}"))
    }

    #[test]
    fn llama3_formulas_by_hand() {
        let m = model("llama-3-8b");
        assert_eq!(
            per_token_formula(&m, DType::Fp16),
            "32 global layers × 8 KV heads × 128 dims × 2 (K and V) × 2 B = 131,072 B per token"
        );
        assert_eq!(total_formula(&m, 8192, DType::Fp16), "32 × 4,096 B × 8,192 tokens = 1,073,741,824 B");
        assert!(per_token_formula(&m, DType::Int4).contains("× 4 bits ÷ 8 = 32,768 B per token"));
        let p = attn_params(&m, LayerKind::Global);
        assert_eq!(
            attn_params_formula(&m, LayerKind::Global, &p),
            "Q 4,096×4,096 + K 4,096×1,024 + V 4,096×1,024 + O 4,096×4,096 = 41,943,040"
        );
    }

    #[test]
    fn hybrid_mla_keqv_and_sharing_explain_themselves() {
        let g = model("gemma-3-27b");
        let f = per_token_formula(&g, DType::Bf16);
        assert!(
            f.starts_with("52 sliding layers × 16 KV heads × 128 dims × 2 (K and V) × 2 B + 10 global layers"),
            "{f}"
        );
        let b = kv_breakdown(&g, 131_072, DType::Bf16).unwrap_or_else(|e| panic!("{e}"));
        // 52 * 8,192 B * 1,024 = 436,207,616
        assert_eq!(row_formula(&g, &b.rows[0], DType::Bf16), "52 × 8,192 B per token × 1,024 tokens = 436,207,616 B");
        assert_eq!(cached_tokens_reason(b.rows[0].kind, 131_072), "min(131,072, window 1,024)");
        let d = model("deepseek-v3");
        assert_eq!(
            per_token_formula(&d, DType::Fp16),
            "61 global layers × (512 latent + 64 RoPE key) × 2 B = 70,272 B per token"
        );
        // DeepSeek V3.2: 61 × (512 + 64 + 128) × 2 B = 61 × 1,408 = 85,888 B.
        let mut v32 = d.clone();
        v32.mla = v32.mla.map(|m| crate::model::config::Mla { index_head_dim: Some(128), ..m });
        assert_eq!(
            per_token_formula(&v32, DType::Bf16),
            "61 global layers × (512 latent + 64 RoPE key + 128 indexer key) × 2 B = 85,888 B per token"
        );
        let g4 = model("gemma-4-12b");
        assert!(per_token_formula(&g4, DType::Fp16).contains("1 KV head × 512 dims × 1 (K = V)"));
        let e4b = model("gemma-4-e4b");
        assert!(per_token_formula(&e4b, DType::Fp16).contains(" of "), "{}", per_token_formula(&e4b, DType::Fp16));
        let p = attn_params(&d, LayerKind::Global);
        assert!(attn_params_formula(&d, LayerKind::Global, &p).ends_with(&format_thousands(p.total())));
    }

    #[test]
    fn an_indexer_in_some_layers_is_a_term_of_its_own() {
        // GLM-5.2's shape: 78 layers of (512 + 64) × 2 B = 89,856 B, and 21 indexer keys of 128 × 2 B
        // = 5,376 B (layers 0, 1, 2, then every 4th from 6): 95,232 B per token.
        let m = crate::model::decode_model("L78.d6144.h64.kv64.hd256.mla512-64-2048-192-256.idx128-4-3.fs12288")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            per_token_formula(&m, DType::Bf16),
            "78 global layers × (512 latent + 64 RoPE key) × 2 B + 21 of them × 128 indexer key × 2 B = 95,232 B per token"
        );
        let b = kv_breakdown(&m, 1000, DType::Bf16).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((b.rows[0].indexer_layers, b.rows[0].indexer_elements), (21, 128));
        // 1,000 tokens: 95,232,000 B.
        assert_eq!(
            row_formula(&m, &b.rows[0], DType::Bf16),
            "(78 × 1,152 B + 21 × 256 B) per token × 1,000 tokens = 95,232,000 B"
        );
        assert_eq!(total_formula(&m, 1000, DType::Bf16), "(78 × 1,152 B + 21 × 256 B) × 1,000 tokens = 95,232,000 B");
    }

    #[test]
    fn state_formulas_by_hand() {
        // 8 layers: 3 Mamba, 1 global, repeated: 6 Mamba layers of 1,000 conv and 4,000 state
        // elements at 2 B: 6 × (2,000 + 8,000) = 60,000 B.
        let m = crate::model::decode_model("L8.d1024.h8.kv8.hd128.pat3s-1g.ssm1000-4000-2-2-0.fs4096").unwrap();
        assert_eq!(
            state_formula(&m),
            "6 ssm layers × (1,000 conv elements × 2 B + 4,000 state elements × 2 B) = 60,000 B per sequence"
        );
        let b = kv_breakdown(&m, 10, DType::Fp16).unwrap();
        let ssm = b.rows.iter().find(|r| !r.kind.is_attention()).unwrap();
        assert_eq!(
            state_row_formula(&m, ssm),
            "6 layers × (1,000 conv elements × 2 B + 4,000 state elements × 2 B) = 60,000 B per sequence"
        );
        assert_eq!(state_formula(&model("llama-3-8b")), "no layer keeps a recurrent state = 0 B");
        // Falcon-H1's shape: 4 attention layers with Mamba beside, (100 + 200) × 2 B each.
        let falcon = crate::model::decode_model("L4.d512.h8.kv2.hd64.bas.ssm100-200-2-2-1000.fs1024").unwrap();
        assert_eq!(
            state_formula(&falcon),
            "4 global layers (ssm beside attention) × (100 conv elements × 2 B + 200 state elements × 2 B) = 2,400 B per sequence"
        );
        let ssm_kind = LayerKind::Stateful(crate::model::StateMixer::Ssm);
        assert_eq!(
            attn_params_formula(&m, ssm_kind, &attn_params(&m, ssm_kind)),
            "no softmax attention in this ssm layer = 0"
        );
    }
}
