//! The compare view's attention parameters: each variant's attention weights over the whole model,
//! and the change against MHA.

use super::CompareParams;
use super::bars::variant_figures;
use crate::model::units::{format_params, format_thousands};
use crate::model::variants::mha_baseline;
use crate::model::{Model, VariantFigures, attn_params_total};
use crate::views::describe::variant_label;
use crate::views::kv::KvParams;

/// One variant's row. `variant_id`, `params_total` and `delta_vs_mha` go into data attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamRow {
    pub variant_id: String,
    pub params_total: u128,
    pub delta_vs_mha: i128,
    pub label: String,
    /// `1,342,177,280 (1.3 B)`.
    pub total_text: String,
    /// `−201,326,592 (−15.0%)`.
    pub delta_text: String,
}

/// The rows, or `None` when the comparison cannot be computed (the bars say why).
pub fn param_rows(base: &Model, params: &CompareParams, kv: &KvParams) -> Option<Vec<ParamRow>> {
    let figures = variant_figures(base, params, kv).ok()?;
    let mha_params = attn_params_total(&mha_baseline(base));
    Some(figures.iter().map(|r| param_row(base, r, mha_params)).collect())
}

fn param_row(base: &Model, r: &VariantFigures, mha_params: u128) -> ParamRow {
    let delta = r.attn_params_delta_vs_mha;
    let sign = match delta.signum() {
        -1 => "−",
        1 => "+",
        _ => "±",
    };
    let percent = if mha_params > 0 { delta as f64 / mha_params as f64 * 100.0 } else { 0.0 };
    ParamRow {
        variant_id: r.variant.to_string(),
        params_total: r.attn_params_total,
        delta_vs_mha: delta,
        label: variant_label(r.variant, base),
        total_text: format!("{} ({})", format_thousands(r.attn_params_total), format_params(r.attn_params_total)),
        delta_text: format!("{sign}{} ({percent:+.1}%)", format_thousands(delta.unsigned_abs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::model::Variant;

    fn rows(id: &str) -> Vec<ParamRow> {
        let params =
            CompareParams { variants: Some(vec![Variant::Mha, Variant::Gqa { groups: 8 }, Variant::AsPublished]) };
        param_rows(preset(id).unwrap(), &params, &KvParams::default()).unwrap()
    }

    #[test]
    fn llama_3_8b_gqa_saves_k_and_v() {
        let [mha, gqa8, _] = &rows("llama-3-8b")[..] else { panic!() };
        // MHA: 32 layers × 4 × 4096² = 2,147,483,648; no change.
        assert_eq!((mha.params_total, mha.delta_vs_mha), (2_147_483_648, 0));
        assert_eq!(mha.total_text, "2,147,483,648 (2.1 B)");
        assert_eq!(mha.delta_text, "±0 (+0.0%)");
        // GQA 8: K and V shrink from 4096 × 4096 to 4096 × 1024 in 32 layers: −32 × 2 × 4096 × 3072
        // = −805,306,368, −37.5% of MHA.
        assert_eq!(gqa8.delta_vs_mha, -805_306_368);
        assert_eq!(gqa8.delta_text, "−805,306,368 (-37.5%)");
    }

    #[test]
    fn maverick_as_published() {
        // 48 layers, d 5120, 40 query and 8 KV heads of 128: per layer 2 × 5120² + 2 × 5120 × 1024
        // = 62,914,560 against MHA's 4 × 5120² = 104,857,600; × 48 = −2,013,265,920.
        let published = &rows("llama-4-maverick")[2];
        assert_eq!((published.variant_id.as_str(), published.params_total), ("published", 48 * 62_914_560));
        assert!(published.delta_text.starts_with("−2,013,265,920 ("), "{}", published.delta_text);
    }
}
