//! The compare view's decode panel: one decoded token at the chosen context beside the prefill of
//! that context. Where the token's FLOPs go, the bytes it must read (weights and KV cache), and the
//! FLOPs per byte of both passes.

use super::CompareParams;
use super::flops::share_text;
use crate::model::intensity::{Traffic, decode_traffic, prefill_traffic};
use crate::model::units::{format_bytes, format_thousands};
use crate::model::{Model, Variant};
use crate::views::describe::variant_label;
use crate::views::kv::KvParams;

/// One variant's row. `variant_id`, the exact counts and both intensities go into data attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeRow {
    pub variant_id: String,
    pub label: String,
    pub decode: Traffic,
    pub prefill_intensity: f64,
    /// `2.684e9 (3%)`: each part and its share of the token's FLOPs.
    pub projections_text: String,
    pub core_text: String,
    pub ffn_text: String,
    pub mixer_text: String,
    pub weights_text: String,
    pub kv_text: String,
    /// The state read and written back (`—` for a transformer).
    pub state_text: String,
    pub decode_intensity_text: String,
    pub prefill_intensity_text: String,
}

/// `One decoded token at 131,072 tokens of context (weights and cache in FP16)`.
pub fn decode_heading(kv: &KvParams) -> String {
    format!(
        "One decoded token at {} tokens of context (weights and cache in {})",
        format_thousands(kv.ctx_tokens.into()),
        kv.dtype.label()
    )
}

/// The rows, or `None` when a size passes `u128` (the bars say why nothing is shown).
pub fn decode_rows(base: &Model, params: &CompareParams, kv: &KvParams) -> Option<Vec<DecodeRow>> {
    params.applied(base).iter().map(|(variant, model)| decode_row(base, *variant, model, kv)).collect()
}

fn decode_row(base: &Model, variant: Variant, model: &Model, kv: &KvParams) -> Option<DecodeRow> {
    let decode = decode_traffic(model, kv.ctx_tokens, kv.dtype).ok()?;
    let prefill_intensity = prefill_traffic(model, kv.ctx_tokens, kv.dtype).ok()?.intensity();
    let flops = decode.flops;
    Some(DecodeRow {
        variant_id: variant.to_string(),
        label: variant_label(variant, base),
        projections_text: share_text(flops.projections, flops.total()),
        core_text: share_text(flops.attention_core, flops.total()),
        ffn_text: share_text(flops.ffn, flops.total()),
        mixer_text: share_text(flops.mixer, flops.total()),
        weights_text: format_bytes(decode.weight_bytes),
        kv_text: format_bytes(decode.kv_bytes),
        state_text: if decode.state_bytes == 0 { "—".into() } else { format_bytes(decode.state_bytes) },
        decode_intensity_text: intensity_text(decode.intensity()),
        prefill_intensity_text: intensity_text(prefill_intensity),
        decode,
        prefill_intensity,
    })
}

/// `2.66` below 100 FLOPs per byte, `203,389` above (the exact value is in the data attribute).
pub fn intensity_text(flops_per_byte: f64) -> String {
    if flops_per_byte < 100.0 {
        format!("{flops_per_byte:.2}")
    } else {
        format_thousands(flops_per_byte.round() as u128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    #[test]
    fn llama_3_8b_decode_at_128k_by_hand() {
        let base = preset("llama-3-8b").unwrap();
        let params =
            CompareParams { variants: Some(vec![Variant::AsPublished, Variant::Sliding { window_tokens: 4096 }]) };
        let kv = KvParams { ctx_tokens: 131_072, ..Default::default() };
        let [published, sliding] = &decode_rows(base, &params, &kv).unwrap()[..] else { panic!() };
        // Per layer: attention 2 × 4096² + 2 × 4096 × 1024 = 41,943,040 weights, FFN 3 × 4096 × 14,336 =
        // 176,160,768; 32 layers. Projections 2 × 41,943,040 × 32 = 2,684,354,560 FLOPs (3% of the token).
        let f = published.decode.flops;
        assert_eq!(f.projections, 2_684_354_560);
        assert_eq!(published.projections_text, "2.684e9 (3%)");
        // Core: 2 × 32 heads × (128 + 128) × 131,072 keys × 32 layers = 68,719,476,736.
        assert_eq!(f.attention_core, 68_719_476_736);
        assert_eq!(f.ffn, 2 * 176_160_768 * 32);
        // Weights: 32 × 218,103,808 × 2 bytes = 13,958,643,712; cache: 131,072 B per token × 131,072.
        assert_eq!(published.decode.weight_bytes, 13_958_643_712);
        assert_eq!(published.decode.kv_bytes, 17_179_869_184);
        // 82,678,120,448 FLOPs / 31,138,512,896 bytes = 2.655.
        assert_eq!(published.decode_intensity_text, "2.66");
        // Prefill of 131,072 tokens: 6,333,221,335,728,128 FLOPs over the same 31,138,512,896 bytes
        // (the weights once, the cache written once) = 203,388.69.
        assert_eq!(published.prefill_intensity_text, "203,389");
        // The sliding MHA form reads 4,096 keys of 32 heads × 128 × 2 elements at each of 32 layers:
        // 2,147,483,648 bytes. Every weight and every cached element is used in one multiply-add
        // (2 FLOPs per 2 bytes): exactly 1 FLOP per byte.
        assert_eq!(sliding.decode.kv_bytes, 2_147_483_648);
        assert_eq!(sliding.decode.intensity(), 1.0);
        assert_eq!(decode_heading(&kv), "One decoded token at 131,072 tokens of context (weights and cache in FP16)");
    }

    #[test]
    fn intensities_in_words() {
        assert_eq!(intensity_text(0.999), "1.00");
        assert_eq!(intensity_text(99.994), "99.99");
        assert_eq!(intensity_text(203_388.69), "203,389");
    }

    #[test]
    fn a_hybrid_token_reads_and_writes_its_state_in_every_variant() {
        use crate::model::decode_model;
        // 8 layers: 3 Mamba, 1 attention, repeated; d = 1024, 8 heads of 128 (MHA), SwiGLU 4096. Mamba:
        // 6 layers × (1,000 × 2 B + 4,000 × 2 B) = 60,000 B of state, 1,000 mixer weights each.
        let base = decode_model("L8.d1024.h8.kv8.hd128.pat3s-1g.ssm1000-4000-2-2-1000.fs4096").unwrap();
        let params = CompareParams { variants: Some(vec![Variant::AsPublished, Variant::Mqa]) };
        let kv = KvParams { ctx_tokens: 100, ..Default::default() };
        let [published, mqa] = &decode_rows(&base, &params, &kv).unwrap()[..] else { panic!() };
        // Read once and written back: 2 × 60,000 B in both.
        assert_eq!((published.decode.state_bytes, mqa.decode.state_bytes), (120_000, 120_000));
        assert_eq!(published.state_text, "120.00 KB (117.19 KiB)");
        // Mixer: 6 layers × 2 × 1,000 = 12,000 FLOPs.
        assert_eq!(published.decode.flops.mixer, 12_000);
        // Cache read: 2 attention layers × 100 tokens × 8 × 128 × 2 × 2 B = 819,200 B; MQA an eighth.
        assert_eq!((published.decode.kv_bytes, mqa.decode.kv_bytes), (819_200, 102_400));
    }
}
