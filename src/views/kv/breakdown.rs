//! The "why" table of the KV view: one row per layer type, with the columns a calculator needs to be
//! right about (layers that store a cache, KV heads, head dims, tokens cached, bytes and formula).
//! Layers without softmax attention (state-space, linear attention, convolution, feed-forward only)
//! get rows too: they cache nothing per token, and the state-keeping ones show their constant state
//! per sequence in a column of its own.

use super::KvParams;
use crate::model::config::Mla;
use crate::model::kv_cache::mla_decompressed_bytes_per_token;
use crate::model::units::{bytes_text, count_of, format_bytes, format_thousands};
use crate::model::{DType, KvRow, LayerKind, Model, kv_breakdown, kv_bytes_per_token};
use crate::views::formulas::{cached_tokens_reason, elements_factors, row_formula, state_row_formula};

/// One layer type's row. `kind_noun`, `bytes`, `cached_tokens`, `layer_count` and `state_bytes` go
/// into data attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakdownRow {
    pub kind_noun: &'static str,
    pub bytes: u128,
    pub cached_tokens: u64,
    /// Layers of this kind (storing a cache or not).
    pub layer_count: u32,
    /// Recurrent state of all layers of this kind, per sequence (0 for attention layers).
    pub state_bytes: u128,
    /// The state and its arithmetic, for the state column (`None`: attention layers, none kept).
    pub state_text: Option<(String, String)>,
    pub kind_name: String,
    pub layers: String,
    pub kv_heads: String,
    pub head_dims: String,
    pub elements_per_token: String,
    pub cached_tokens_text: String,
    pub cached_tokens_reason: String,
    pub bytes_text: String,
    pub formula: String,
}

/// The whole table: the headings that name the context and dtype, the rows, the total.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakdownTable {
    pub tokens_heading: String,
    pub bytes_heading: String,
    pub rows: Vec<BreakdownRow>,
    pub total_text: String,
    /// The state column's total, when the model has layers without attention (`None`: no column).
    pub state_total_text: Option<String>,
    /// What the layers without attention keep, in a sentence (`None` for a transformer).
    pub state_note: Option<String>,
    /// Which implementation an MLA model's figures follow, and what the other keeps (`None` without MLA).
    pub mla_note: Option<String>,
    /// Which kind of cache a sliding layer's count follows, and what the other allocates (`None`
    /// without sliding layers).
    pub sliding_note: Option<String>,
}

/// The table for `model` at the link's context and dtype; `None` when a size passes `u128`.
pub fn breakdown_table(model: &Model, kv: &KvParams) -> Option<BreakdownTable> {
    let b = kv_breakdown(model, kv.ctx_tokens, kv.dtype).ok()?;
    Some(BreakdownTable {
        tokens_heading: format!("Tokens cached at {}", format_thousands(kv.ctx_tokens.into())),
        bytes_heading: format!("Bytes ({})", kv.dtype.label()),
        rows: b.rows.iter().map(|r| breakdown_row(model, r, kv)).collect(),
        total_text: bytes_text(b.total_bytes),
        state_total_text: (b.state_bytes > 0 || b.rows.iter().any(|r| !r.kind.is_attention()))
            .then(|| bytes_text(b.state_bytes)),
        state_note: state_note(model, &b.rows, b.state_bytes),
        mla_note: mla_note(model, kv.dtype),
        sliding_note: sliding_note(model),
    })
}

/// Sliding caches come two ways: grown up to the window (the count here) or allocated whole at once.
fn sliding_note(model: &Model) -> Option<String> {
    let mut windows: Vec<u64> = model
        .schedule
        .layers()
        .iter()
        .filter_map(|k| match *k {
            LayerKind::Sliding { window_tokens } => Some(window_tokens),
            _ => None,
        })
        .collect();
    windows.sort_unstable();
    windows.dedup();
    let window = match windows.as_slice() {
        [] => return None,
        [w] => format!("W = {}", format_thousands((*w).into())),
        _ => "each layer's W".to_string(),
    };
    Some(format!(
        "A sliding layer is counted at min(n, W) tokens, the keys its newest query reads: what a cache that grows \
         up to its window holds while it attends (transformers' dynamic cache keeps the last W − 1 between steps \
         and appends the new token). A static cache (transformers' StaticCache, built for torch.compile) allocates \
         all {window} slots (fewer only when its maximum length is shorter) at the first token, so below W tokens \
         it reserves more than this table counts."
    ))
}

/// Implementations cache MLA two ways; the table follows DeepSeek's own code and names the other.
/// A lightning indexer's key (V3.2) sits beside either form, so the forms are compared on the latent
/// and RoPE key alone, and the indexer's key is said apart.
/// transformers pads V to the key's width for flash-attention 2 only after `past_key_values.update`,
/// so its cache holds `v_head_dim` values under every attention implementation.
fn mla_note(model: &Model, dtype: DType) -> Option<String> {
    let mla = model.mla?;
    let decompressed = mla_decompressed_bytes_per_token(model, dtype).ok()??;
    let without_indexer = Model { mla: Some(Mla { index_head_dim: None, ..mla }), ..model.clone() };
    let latent = kv_bytes_per_token(&without_indexer, dtype).ok().filter(|&b| b > 0)?;
    let indexer = kv_bytes_per_token(model, dtype).ok()?.saturating_sub(latent);
    let indexer_note = match mla.index_head_dim {
        Some(width) if indexer > 0 => format!(
            " The lightning indexer's {}-value key ({} B per token at {}) is cached beside either form: the table \
             counts it, this comparison leaves it out.",
            format_thousands(width.into()),
            format_thousands(indexer),
            dtype.label()
        ),
        _ => String::new(),
    };
    Some(format!(
        "MLA's cache is counted as DeepSeek's own inference code keeps it: per token and layer one {}-value latent \
         and one {}-value RoPE key, shared by all {} query heads. transformers (4.57, modeling_deepseek_v3.py) \
         decompresses the latent before caching: each head's key ({} + {} values) and value ({}), {} B per token \
         at {} for K and V alone, {:.1} times the latent and RoPE key's {} B per token.{indexer_note}",
        format_thousands(mla.kv_lora_rank.into()),
        format_thousands(mla.qk_rope_head_dim.into()),
        format_thousands(model.n_q_heads.into()),
        format_thousands(mla.qk_nope_head_dim.into()),
        format_thousands(mla.qk_rope_head_dim.into()),
        format_thousands(mla.v_head_dim.into()),
        format_thousands(decompressed),
        dtype.label(),
        decompressed as f64 / latent as f64,
        format_thousands(latent)
    ))
}

/// A pure state-space model has no cache at all; a hybrid caches in its attention layers only.
fn state_note(model: &Model, rows: &[KvRow], state_bytes: u128) -> Option<String> {
    let others: u32 = rows.iter().filter(|r| !r.kind.is_attention()).map(|r| r.layers).sum();
    let layers = model.n_layers();
    let state = format_bytes(state_bytes);
    if others == 0 {
        // Falcon-H1's shape: a recurrent mixer runs beside attention in every attention layer.
        let mixer = model.states.beside_attention.filter(|_| state_bytes > 0)?;
        return Some(format!(
            "Every one of the {} layers runs a {} beside its attention: it keeps its KV cache and also a \
             recurrent state, {state} per sequence in all, the same at any context.",
            format_thousands(layers.into()),
            mixer.description()
        ));
    }
    Some(if !model.has_attention() {
        format!(
            "No KV cache: none of the {} layers runs softmax attention, so no layer keeps keys and values \
             to attend over later. Each sequence keeps only a constant recurrent state of {state}, the same at \
             one token of context as at a million: the layers fold every token into it as it passes.",
            format_thousands(layers.into())
        )
    } else {
        format!(
            "Only the {} of {} keep a KV cache. The other {} keep no keys or values: their recurrent state, \
             {state} per sequence in all, has a fixed size whatever the context (feed-forward-only layers keep \
             nothing).",
            count_of(model.attention_layers().into(), "attention layer"),
            format_thousands(layers.into()),
            format_thousands(others.into())
        )
    })
}

fn breakdown_row(model: &Model, row: &KvRow, kv: &KvParams) -> BreakdownRow {
    if !row.kind.is_attention() {
        return stateful_row(model, row, kv);
    }
    // An attention layer with a recurrent mixer beside it keeps a state too.
    let state_text = (row.state_bytes > 0).then(|| (bytes_text(row.state_bytes), state_row_formula(model, row)));
    // MLA caches one latent (plus a shared RoPE key) per token, whatever the head count.
    let (kv_heads, head_dims) = match model.mla {
        Some(x) => ("1 latent".to_string(), format!("{} + {}", x.kv_lora_rank, x.qk_rope_head_dim)),
        None => {
            let g = model.geometry(row.kind);
            (g.n_kv_heads.to_string(), format!("{}{}", g.head_dim, if g.k_eq_v { " (K = V)" } else { "" }))
        }
    };
    let layers = if row.storing_layers == row.layers {
        row.layers.to_string()
    } else {
        format!("{} ({} reuse another layer's cache)", row.storing_layers, row.layers - row.storing_layers)
    };
    BreakdownRow {
        kind_noun: row.kind.noun(),
        bytes: row.bytes,
        cached_tokens: row.cached_tokens,
        layer_count: row.layers,
        state_bytes: row.state_bytes,
        state_text,
        kind_name: kind_name(row.kind),
        layers,
        kv_heads,
        head_dims,
        elements_per_token: elements_factors(model, row.kind),
        cached_tokens_text: format_thousands(row.cached_tokens.into()),
        cached_tokens_reason: cached_tokens_reason(row.kind, kv.ctx_tokens),
        bytes_text: bytes_text(row.bytes),
        formula: row_formula(model, row, kv.dtype),
    }
}

/// A row of layers without attention: no cache per token, the state per sequence instead.
fn stateful_row(model: &Model, row: &KvRow, kv: &KvParams) -> BreakdownRow {
    let none = || "—".to_string();
    BreakdownRow {
        kind_noun: row.kind.noun(),
        bytes: 0,
        cached_tokens: 0,
        layer_count: row.layers,
        state_bytes: row.state_bytes,
        state_text: Some((bytes_text(row.state_bytes), state_row_formula(model, row))),
        kind_name: kind_name(row.kind),
        layers: format!("0 of {} (no attention)", row.layers),
        kv_heads: none(),
        head_dims: none(),
        elements_per_token: "0: nothing cached per token".into(),
        cached_tokens_text: "0".into(),
        cached_tokens_reason: cached_tokens_reason(row.kind, kv.ctx_tokens),
        bytes_text: bytes_text(0),
        formula: "no KV cache".into(),
    }
}

/// `global`, `sliding, window 1,024`, `chunked, chunk 8,192`.
pub fn kind_name(kind: LayerKind) -> String {
    match kind {
        LayerKind::Global => "global".into(),
        LayerKind::Sliding { window_tokens } => format!("sliding, window {}", format_thousands(window_tokens.into())),
        LayerKind::Chunked { chunk_tokens } => format!("chunked, chunk {}", format_thousands(chunk_tokens.into())),
        LayerKind::Stateful(mixer) => mixer.description().into(),
        LayerKind::FeedForward => "feed-forward only".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn table(id: &str, ctx_tokens: u64, dtype: DType) -> BreakdownTable {
        let kv = KvParams { ctx_tokens, dtype, ..Default::default() };
        breakdown_table(preset(id).unwrap(), &kv).unwrap()
    }

    #[test]
    fn kinds_in_words() {
        assert_eq!(kind_name(LayerKind::Global), "global");
        assert_eq!(kind_name(LayerKind::Sliding { window_tokens: 1024 }), "sliding, window 1,024");
        assert_eq!(kind_name(LayerKind::Chunked { chunk_tokens: 8192 }), "chunked, chunk 8,192");
    }

    #[test]
    fn gemma_3_27b_plateaus_in_its_sliding_layers() {
        // 62 layers, 5 sliding (window 1,024) : 1 global -> 52 sliding + 10 global, 16 KV heads of 128.
        // Per layer per token 16 × 128 × 2 × 2 B = 8,192 B.
        let t = table("gemma-3-27b", 131_072, DType::Bf16);
        assert_eq!((t.tokens_heading.as_str(), t.bytes_heading.as_str()), ("Tokens cached at 131,072", "Bytes (BF16)"));
        let [sliding, global] = &t.rows[..] else { panic!("{:?}", t.rows) };
        // Sliding: 52 × 8,192 B × 1,024 tokens = 436,207,616 B.
        assert_eq!((sliding.kind_noun, sliding.bytes, sliding.cached_tokens), ("sliding", 436_207_616, 1024));
        assert_eq!(sliding.kind_name, "sliding, window 1,024");
        assert_eq!(
            (sliding.layers.as_str(), sliding.kv_heads.as_str(), sliding.head_dims.as_str()),
            ("52", "16", "128")
        );
        assert_eq!(sliding.cached_tokens_text, "1,024");
        assert!(
            sliding.cached_tokens_reason.contains("min(131,072, window 1,024)"),
            "{}",
            sliding.cached_tokens_reason
        );
        assert_eq!(sliding.bytes_text, "436,207,616 bytes = 436.21 MB (416.00 MiB)");
        // Global: 10 × 8,192 B × 131,072 tokens = 10,737,418,240 B.
        assert_eq!((global.kind_noun, global.bytes, global.cached_tokens), ("global", 10_737_418_240, 131_072));
        // Total 436,207,616 + 10,737,418,240 = 11,173,625,856 B.
        assert!(t.total_text.starts_with("11,173,625,856 bytes = "), "{}", t.total_text);
        let note = t.sliding_note.unwrap_or_default();
        assert!(note.contains("counted at min(n, W) tokens") && note.contains("all W = 1,024 slots"), "{note}");
        // No sliding layer, no note.
        assert_eq!(table("llama-3-8b", 8192, DType::Bf16).sliding_note, None);
    }

    #[test]
    fn latents_and_shared_caches_are_named() {
        // DeepSeek-V3: one latent of rank 512 plus a 64-dim RoPE key per token and layer.
        let t = table("deepseek-v3", 8192, DType::Fp16);
        assert_eq!((t.rows[0].kv_heads.as_str(), t.rows[0].head_dims.as_str()), ("1 latent", "512 + 64"));
        // 61 layers × 128 heads × (128 + 64 + 128) × 2 B = 4,997,120 B, 71.1 times 61 × 576 × 2 = 70,272.
        let note = t.mla_note.unwrap();
        assert!(
            note.contains("one 512-value latent and one 64-value RoPE key, shared by all 128 query heads"),
            "{note}"
        );
        assert!(note.contains("key (128 + 64 values) and value (128), 4,997,120 B per token at FP16"), "{note}");
        assert!(note.contains("71.1 times the latent and RoPE key's 70,272 B per token."), "{note}");
        assert!(!note.contains("indexer"), "{note}");
        // DeepSeek V3.2: the same latent, and a 128-value indexer key in each of its 61 layers, 61 × 128
        // × 2 B = 15,616 B per token in the table and left out of the comparison.
        let v32 =
            crate::catalog::import_hf_config(include_str!("../../../tests/data/configs/deepseek-v3.2.json")).unwrap();
        let note = mla_note(&v32.model, DType::Fp16).unwrap();
        assert!(note.contains("71.1 times the latent and RoPE key's 70,272 B per token."), "{note}");
        assert!(
            note.contains("The lightning indexer's 128-value key (15,616 B per token at FP16) is cached"),
            "{note}"
        );
        assert_eq!(table("gemma-3-27b", 8192, DType::Bf16).mla_note, None);
        // Gemma 4 E4B: its last 18 layers reuse an earlier layer's cache.
        let t = table("gemma-4-e4b", 8192, DType::Fp16);
        assert!(t.rows.iter().any(|r| r.layers.ends_with("reuse another layer's cache)")), "{:?}", t.rows);
    }

    #[test]
    fn a_hybrid_has_rows_for_its_state_keeping_and_feed_forward_layers() {
        use crate::model::decode_model;
        // Nemotron-H's shape on 8 layers: Mamba, FFN-only, Mamba, attention, repeated. Attention: 2
        // layers × 8 KV heads × 128 × 2 × 2 B = 8,192 B per token; Mamba: 4 layers × (1,000 × 2 B +
        // 4,000 × 4 B) = 4 × 18,000 = 72,000 B per sequence; FFN-only: nothing.
        let m = decode_model("L8.d1024.h8.kv8.hd128.pat1s-1f-1s-1g.ssm1000-4000-2-4-0.fs4096").unwrap();
        let t = breakdown_table(&m, &KvParams { ctx_tokens: 100, ..Default::default() }).unwrap();
        let nouns: Vec<&str> = t.rows.iter().map(|r| r.kind_noun).collect();
        assert_eq!(nouns, ["ssm", "ffn", "global"]);
        let [ssm, ffn, global] = &t.rows[..] else { panic!() };
        assert_eq!((ssm.layer_count, ssm.bytes, ssm.state_bytes), (4, 0, 72_000));
        let (text, formula) = ssm.state_text.clone().unwrap();
        assert_eq!(text, "72,000 bytes = 72.00 KB (70.31 KiB)");
        assert_eq!(
            formula,
            "4 layers × (1,000 conv elements × 2 B + 4,000 state elements × 4 B) = 72,000 B per sequence"
        );
        assert_eq!(ssm.layers, "0 of 4 (no attention)");
        assert_eq!((ffn.layer_count, ffn.state_bytes), (2, 0));
        assert_eq!(ffn.state_text.as_ref().map(|t| t.1.as_str()), Some("2 layers × no token mixer = 0 B"));
        // 100 tokens × 8,192 B = 819,200 B.
        assert_eq!((global.bytes, global.state_bytes, global.state_text.clone()), (819_200, 0, None));
        assert_eq!(t.state_total_text.as_deref(), Some("72,000 bytes = 72.00 KB (70.31 KiB)"));
        let note = t.state_note.unwrap();
        assert!(note.starts_with("Only the 2 attention layers of 8 keep a KV cache. The other 6 "), "{note}");
        assert!(note.contains("72.00 KB (70.31 KiB) per sequence"), "{note}");
        // A transformer has no state column and no note.
        let llama = table("llama-3-8b", 8192, DType::Fp16);
        assert_eq!((llama.state_total_text, llama.state_note), (None, None));
    }

    #[test]
    fn a_pure_state_space_model_says_it_has_no_cache() {
        // A Mamba of 64 layers, each (20,480 × 2 B + 81,920 × 2 B) = 204,800 B: 13,107,200 B.
        let code = "L64.d2560.h1.kv1.hd1.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048";
        let m = crate::model::decode_model(code).unwrap();
        let t = breakdown_table(&m, &KvParams::default()).unwrap();
        assert_eq!(t.rows.len(), 1);
        assert_eq!((t.rows[0].kind_noun, t.rows[0].state_bytes), ("ssm", 13_107_200));
        let note = t.state_note.unwrap();
        assert!(note.starts_with("No KV cache: none of the 64 layers runs softmax attention"), "{note}");
        assert!(note.contains("13.11 MB (12.50 MiB)"), "{note}");
    }

    #[test]
    fn a_mixer_beside_attention_keeps_a_state_in_the_attention_rows() {
        // Falcon-H1's shape on 4 layers: each runs attention (2 KV heads of 64) and Mamba side by side;
        // Mamba keeps (100 + 200) elements × 2 B = 600 B per layer, 2,400 B in all.
        let m = crate::model::decode_model("L4.d512.h8.kv2.hd64.bas.ssm100-200-2-2-1000.fs1024").unwrap();
        let t = breakdown_table(&m, &KvParams { ctx_tokens: 10, ..Default::default() }).unwrap();
        let [global] = &t.rows[..] else { panic!("{:?}", t.rows) };
        // Cache: 4 layers × 2 KV heads × 64 × 2 (K, V) × 2 B × 10 tokens = 20,480 B; state 2,400 B.
        assert_eq!((global.kind_noun, global.bytes, global.state_bytes), ("global", 20_480, 2_400));
        assert_eq!(
            global.state_text.as_ref().map(|t| t.1.as_str()),
            Some("4 layers × (100 conv elements × 2 B + 200 state elements × 2 B) = 2,400 B per sequence")
        );
        assert_eq!(t.state_total_text.as_deref(), Some("2,400 bytes = 2.40 KB (2.34 KiB)"));
        let note = t.state_note.unwrap();
        assert!(note.starts_with("Every one of the 4 layers runs a state-space layer beside its attention"), "{note}");
    }
}
