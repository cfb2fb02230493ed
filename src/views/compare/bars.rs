//! The compare view's bars: each variant's whole cache at the chosen context and dtype, exact bytes
//! and the ratio to MHA, on one linear scale; and the listed variants the model cannot take, with why.

use super::CompareParams;
use crate::model::describe::variant_label;
use crate::model::units::bytes_text;
use crate::model::units::format_thousands;
use crate::model::{Model, Variant, VariantFigures, apply_variant, compare_variants};
use crate::views::kv::KvParams;

/// One variant's bar. `variant_id`, `kv_total_bytes`, `kv_bytes_per_token` and `ratio_to_mha` go
/// into data attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct BarRow {
    pub variant_id: String,
    pub kv_total_bytes: u128,
    pub kv_bytes_per_token: u128,
    pub ratio_to_mha: f64,
    pub label: String,
    /// Of the longest bar.
    pub fraction: f64,
    /// The real model's bar stands out.
    pub class: &'static str,
    pub bytes_text: String,
    /// ` · 0.2500 × MHA · 131,072 B per token`.
    pub detail: String,
}

/// The bars, and the variants not shown (`None`: all shown).
#[derive(Clone, Debug, PartialEq)]
pub struct Bars {
    pub rows: Vec<BarRow>,
    pub skipped: Option<String>,
}

/// `KV cache at 131,072 tokens, FP16`.
pub fn bars_heading(kv: &KvParams) -> String {
    format!("KV cache at {} tokens, {}", format_thousands(kv.ctx_tokens.into()), kv.dtype.label())
}

/// Each chosen variant's figures at the link's context and dtype, or why there are none.
pub fn variant_figures(base: &Model, params: &CompareParams, kv: &KvParams) -> Result<Vec<VariantFigures>, String> {
    compare_variants(base, &params.chosen(base), kv.ctx_tokens, kv.dtype).map_err(|e| e.to_string())
}

pub fn bars(base: &Model, params: &CompareParams, kv: &KvParams) -> Result<Bars, String> {
    let figures = variant_figures(base, params, kv)?;
    let longest_bytes = figures.iter().map(|r| r.kv_total_bytes).max().unwrap_or(1).max(1);
    let skipped = skipped(base, params);
    Ok(Bars {
        rows: figures.iter().map(|r| bar_row(base, r, longest_bytes)).collect(),
        skipped: (!skipped.is_empty()).then(|| skipped.join("; ")),
    })
}

fn bar_row(base: &Model, r: &VariantFigures, longest_bytes: u128) -> BarRow {
    let ratio =
        if r.variant == Variant::Mha { "the baseline".to_string() } else { format!("{:.4} × MHA", r.ratio_to_mha) };
    BarRow {
        variant_id: r.variant.to_string(),
        kv_total_bytes: r.kv_total_bytes,
        kv_bytes_per_token: r.kv_bytes_per_token,
        ratio_to_mha: r.ratio_to_mha,
        label: variant_label(r.variant, base),
        fraction: r.kv_total_bytes as f64 / longest_bytes as f64,
        class: if r.variant == Variant::AsPublished { "published" } else { "variant" },
        bytes_text: bytes_text(r.kv_total_bytes),
        detail: format!(" · {ratio} · {} B per token", format_thousands(r.kv_bytes_per_token)),
    }
}

/// Variants listed but impossible for this model (e.g. 5 groups of 32 heads), with why.
fn skipped(base: &Model, params: &CompareParams) -> Vec<String> {
    params
        .chosen(base)
        .into_iter()
        .filter_map(|v| apply_variant(base, v).err().map(|e| format!("{}: {e}", variant_label(v, base))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::presets::preset;

    fn llama_bars(variants: Option<Vec<Variant>>) -> Bars {
        let kv = KvParams { ctx_tokens: 131_072, ..Default::default() };
        bars(preset("llama-3-8b").unwrap(), &CompareParams { variants }, &kv).unwrap()
    }

    #[test]
    fn llama_3_8b_at_128k_fp16() {
        let kv = KvParams { ctx_tokens: 131_072, ..Default::default() };
        assert_eq!(bars_heading(&kv), "KV cache at 131,072 tokens, FP16");
        let b = llama_bars(None);
        assert_eq!(b.skipped, None);
        let ids: Vec<&str> = b.rows.iter().map(|r| r.variant_id.as_str()).collect();
        assert_eq!(ids, ["published", "mha", "gqa8", "mqa", "mla512r64", "sw4096", "hybrid5w1024", "kveqv", "xl2"]);
        // MHA: 32 layers × 32 KV heads × 128 × 2 × 2 B = 524,288 B per token; × 131,072 = 68,719,476,736 B.
        let mha = &b.rows[1];
        assert_eq!((mha.kv_total_bytes, mha.kv_bytes_per_token, mha.fraction), (68_719_476_736, 524_288, 1.0));
        assert_eq!(mha.detail, " · the baseline · 524,288 B per token");
        assert_eq!(mha.label, "MHA (32 KV heads, one per query head)");
        // As published = GQA 8: a quarter, 17,179,869,184 B, drawn in its own colour.
        let published = &b.rows[0];
        assert_eq!(
            (published.kv_total_bytes, published.fraction, published.class),
            (17_179_869_184, 0.25, "published")
        );
        assert_eq!(published.detail, " · 0.2500 × MHA · 131,072 B per token");
        assert_eq!(b.rows[2].class, "variant");
    }

    #[test]
    fn impossible_variants_are_named_with_why() {
        // 32 heads cannot form 5 equal groups: two bars, one explanation.
        let b = llama_bars(Some(vec![Variant::Mha, Variant::Gqa { groups: 5 }, Variant::Mqa]));
        assert_eq!(b.rows.len(), 2);
        let skipped = b.skipped.unwrap();
        assert!(skipped.starts_with("GQA, 5 KV heads"), "{skipped}");
        assert!(skipped.contains("cannot form 5 equal groups"), "{skipped}");
    }
}
