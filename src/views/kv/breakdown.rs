//! The "why" table of the KV view: one row per layer type, with the columns a calculator needs to be
//! right about (layers that store a cache, KV heads, head dims, tokens cached, bytes and formula).

use super::KvParams;
use crate::model::formulas::{cached_tokens_reason, elements_factors, row_formula};
use crate::model::units::bytes_text;
use crate::model::units::format_thousands;
use crate::model::{KvRow, LayerKind, Model, kv_breakdown};

/// One layer type's row. `kind_noun`, `bytes` and `cached_tokens` go into data attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakdownRow {
    pub kind_noun: &'static str,
    pub bytes: u128,
    pub cached_tokens: u64,
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
}

/// The table for `model` at the link's context and dtype; `None` when a size passes `u128`.
pub fn breakdown_table(model: &Model, kv: &KvParams) -> Option<BreakdownTable> {
    let b = kv_breakdown(model, kv.ctx_tokens, kv.dtype).ok()?;
    Some(BreakdownTable {
        tokens_heading: format!("Tokens cached at {}", format_thousands(kv.ctx_tokens.into())),
        bytes_heading: format!("Bytes ({})", kv.dtype.label()),
        rows: b.rows.iter().map(|r| breakdown_row(model, r, kv)).collect(),
        total_text: bytes_text(b.total_bytes),
    })
}

fn breakdown_row(model: &Model, row: &KvRow, kv: &KvParams) -> BreakdownRow {
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
    use crate::model::DType;
    use crate::model::presets::preset;

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
    }

    #[test]
    fn latents_and_shared_caches_are_named() {
        // DeepSeek-V3: one latent of rank 512 plus a 64-dim RoPE key per token and layer.
        let t = table("deepseek-v3", 8192, DType::Fp16);
        assert_eq!((t.rows[0].kv_heads.as_str(), t.rows[0].head_dims.as_str()), ("1 latent", "512 + 64"));
        // Gemma 4 E4B: its last 18 layers reuse an earlier layer's cache.
        let t = table("gemma-4-e4b", 8192, DType::Fp16);
        assert!(t.rows.iter().any(|r| r.layers.ends_with("reuse another layer's cache)")), "{:?}", t.rows);
    }
}
