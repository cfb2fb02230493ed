//! The compare view's prefill FLOPs: where each variant's go (projections, attention core, FFN), and
//! from what length the attention core costs as much as the projections.

use super::CompareParams;
use crate::model::units::format_thousands;
use crate::model::{LayerFlops, LayerKind, Mask, Model, Variant, crossover_tokens, model_prefill_flops};
use crate::views::describe::variant_label;

/// One variant's row. `variant_id` and the three exact counts go into data attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct FlopRow {
    pub variant_id: String,
    pub flops: LayerFlops,
    pub label: String,
    /// `1.689e15 (61%)`: each part and its share of the total.
    pub projections_text: String,
    pub core_text: String,
    pub ffn_text: String,
    /// Recurrent mixers' share (state-space, linear attention, convolution).
    pub mixer_text: String,
    pub total_text: String,
    /// Of the largest total.
    pub fraction: f64,
}

/// `Prefill FLOPs for 131,072 tokens`.
pub fn flops_heading(ctx_tokens: u64) -> String {
    format!("Prefill FLOPs for {} tokens", format_thousands(ctx_tokens.into()))
}

pub fn flop_rows(base: &Model, params: &CompareParams, ctx_tokens: u64) -> Vec<FlopRow> {
    let figures: Vec<(Variant, LayerFlops)> =
        params.applied(base).iter().map(|(v, m)| (*v, model_prefill_flops(m, ctx_tokens))).collect();
    let largest = figures.iter().map(|(_, f)| f.total()).max().unwrap_or(1).max(1) as f64;
    let row = |(variant, flops): (Variant, LayerFlops)| {
        let total = flops.total();
        FlopRow {
            variant_id: variant.to_string(),
            label: variant_label(variant, base),
            projections_text: share_text(flops.projections, total),
            core_text: share_text(flops.attention_core, total),
            ffn_text: share_text(flops.ffn, total),
            mixer_text: share_text(flops.mixer, total),
            total_text: sci(total),
            fraction: total as f64 / largest,
            flops,
        }
    };
    figures.into_iter().map(row).collect()
}

/// `1.689e15 (61%)`: a part of `total` and its share.
pub fn share_text(part: u128, total: u128) -> String {
    let share = if total == 0 { 0.0 } else { part as f64 / total as f64 * 100.0 };
    format!("{} ({share:.0}%)", sci(part))
}

/// `1.234e15` style above a million, exact with separators below; the exact integer goes into the
/// row's data attributes.
pub fn sci(flops: u128) -> String {
    if flops < 1_000_000 { format_thousands(flops) } else { format!("{:.3e}", flops as f64) }
}

/// Whether the FLOP tables need a column for recurrent mixers (the model has such layers, or runs
/// one beside attention).
pub fn has_mixers(base: &Model) -> bool {
    base.schedule.layers().iter().any(|&k| base.state_geometry(k).is_some())
}

/// From what length a global causal layer's attention core costs as much as its projections.
pub fn crossover_line(base: &Model) -> String {
    if !base.has_attention() {
        return "This model has no attention layer: there is no attention core to weigh against the projections; \
                its mixers cost the same per token at any context."
            .into();
    }
    match crossover_tokens(base, LayerKind::Global, Mask::Causal) {
        Some(n) => format!(
            "In a global layer of this model the attention core costs as much as the projections from {} tokens on \
             (causal); below that, the projections dominate and attention's memory, not its arithmetic, is the cost.",
            format_thousands(n.into())
        ),
        None => "In this model the attention core never catches up with the projections.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    #[test]
    fn numbers_in_scientific_form_above_a_million() {
        assert_eq!(sci(999_999), "999,999");
        assert_eq!(sci(1_234_567), "1.235e6");
    }

    #[test]
    fn llama_3_8b_mha_prefill_of_128k() {
        let base = preset("llama-3-8b").unwrap();
        let params = CompareParams { variants: Some(vec![Variant::Mha, Variant::Sliding { window_tokens: 4096 }]) };
        let n: u128 = 131_072;
        let [mha, sliding] = &flop_rows(base, &params, 131_072)[..] else { panic!() };
        // Projections 2 × n × 4 × 4096² per layer, 32 layers: 2 × 2^17 × 2^2 × 2^24 × 2^5 = 2^49
        // = 562,949,953,421,312 ≈ 5.629e14.
        assert_eq!(mha.flops.projections, 2 * n * 4 * 4096 * 4096 * 32);
        assert!(mha.projections_text.starts_with("5.629e14 ("), "{}", mha.projections_text);
        // Causal core: 2 × 32 heads × (128 + 128) × n(n + 1)/2 per layer, 32 layers.
        assert_eq!(mha.flops.attention_core, 2 * 32 * 256 * (n * (n + 1) / 2) * 32);
        // MHA has the larger total (its core is not capped by a window).
        assert_eq!((mha.fraction, mha.variant_id.as_str()), (1.0, "mha"));
        assert!(sliding.fraction < 1.0);
        assert_eq!(mha.total_text, sci(mha.flops.total()));
        assert_eq!(flops_heading(131_072), "Prefill FLOPs for 131,072 tokens");
    }

    #[test]
    fn the_crossover_is_stated() {
        let line = crossover_line(preset("llama-3-8b").unwrap());
        assert!(
            line.starts_with(
                "In a global layer of this model the attention core costs as much as the projections from "
            )
        );
        assert!(line.contains(" tokens on (causal)"), "{line}");
    }

    #[test]
    fn mixers_have_their_own_part_and_no_crossover_without_attention() {
        use crate::model::decode_model;
        // 4 Mamba layers of 1,000 mixer weights, no FFN: 2 × 10 tokens × 1,000 × 4 = 80,000 FLOPs.
        let base = decode_model("L4.d64.h1.kv1.hd1.pat1s.ssm10-20-2-4-1000.fs0").unwrap();
        let [row] = &flop_rows(&base, &CompareParams::default(), 10)[..] else { panic!() };
        assert_eq!((row.flops.mixer, row.flops.total()), (80_000, 80_000));
        assert_eq!(row.mixer_text, "80,000 (100%)");
        assert!(has_mixers(&base) && !has_mixers(preset("llama-3-8b").unwrap()));
        assert!(crossover_line(&base).starts_with("This model has no attention layer"));
    }
}
