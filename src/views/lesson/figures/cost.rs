//! Live figures of where FLOPs and bytes go: the attention weights of a layer, a prefill of the
//! chosen context against one token decoded at it, the bytes each moves and FLOPs per byte. Weights
//! and cache are both taken at the chosen dtype, as in the compare view.

use super::written::{Figure, Unit, number, whole};
use crate::model::intensity::{Traffic, decode_traffic, prefill_traffic};
use crate::model::kv_cache::weights_bytes;
use crate::model::{LayerKind, Mask, Model, attn_params, crossover_tokens};
use crate::views::registry::Settings;

/// The figure `name` if it is one of this topic's; `None` otherwise, or past what `u128` holds.
pub(super) fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let (ctx, dtype) = (state.kv.ctx_tokens, state.kv.dtype);
    let prefill = || prefill_traffic(model, ctx, dtype).ok();
    let decode = || decode_traffic(model, ctx, dtype).ok();
    let (unit, value): (Unit, u128) = match name {
        "attn_weights_per_layer" => {
            let kind = model.schedule.kind(state.model.layer as usize).unwrap_or(LayerKind::Global);
            (Unit::Count, attn_params(model, kind).weights())
        }
        "core_crossover_tokens" => (Unit::Tokens, crossover_tokens(model, LayerKind::Global, Mask::Causal)?.into()),
        "prefill_projection_flops" => (Unit::Flops, prefill()?.flops.projections),
        "prefill_core_flops" => (Unit::Flops, prefill()?.flops.attention_core),
        "prefill_bytes" => (Unit::Bytes, prefill()?.bytes()),
        "prefill_intensity" => return Some(intensity(prefill()?.intensity())),
        "decode_projection_flops" => (Unit::Flops, decode()?.flops.projections),
        "decode_core_flops" => (Unit::Flops, decode()?.flops.attention_core),
        "decode_flops_per_token" => (Unit::Flops, decode()?.flops.total()),
        "decode_weight_bytes" => (Unit::Bytes, decode()?.weight_bytes),
        "decode_kv_read_bytes" => (Unit::Bytes, decode()?.kv_bytes),
        "decode_bytes_per_token" => (Unit::Bytes, decode()?.bytes()),
        "decode_intensity" => return Some(intensity(decode()?.intensity())),
        "decode_core_intensity" => return Some(intensity(core_intensity(&decode()?)?)),
        "all_weight_bytes" => (Unit::Bytes, weights_bytes(model, dtype).ok()?),
        "outside_layers_weight_bytes" => {
            (Unit::Bytes, weights_bytes(model, dtype).ok()?.checked_sub(prefill()?.weight_bytes)?)
        }
        "output_layer_bytes" => {
            let elements = u128::from(model.vocab_size).checked_mul(model.d_model.into())?;
            (Unit::Bytes, elements.checked_mul(dtype.bits().into())?.div_ceil(8))
        }
        _ => return None,
    };
    Some(whole(value, unit))
}

/// FLOPs of the decode step's attention core per byte of cache it reads.
fn core_intensity(decode: &Traffic) -> Option<f64> {
    (decode.kv_bytes > 0).then(|| decode.flops.attention_core as f64 / decode.kv_bytes as f64)
}

fn intensity(flops_per_byte: f64) -> Figure {
    number(flops_per_byte, Unit::FlopsPerByte)
}

#[cfg(test)]
mod tests {
    use super::super::tests::exact;

    #[test]
    fn llama_3_8b_prefill_and_decode_at_128k_by_hand() {
        let q = "model=llama-3-8b&ctx=131072&dtype=fp16";
        let at = |name| exact(name, q);
        // Attention per layer: Q and O 4096 × 4096, K and V 4096 × 1024: 41,943,040 weights.
        assert_eq!(at("attn_weights_per_layer"), "41943040");
        // Crossover: ceil(2 × 41,943,040 / (32 heads × 256)) − 1 = 10,240 − 1.
        assert_eq!(at("core_crossover_tokens"), "10239");
        // Prefill: 2 × 131,072 × 41,943,040 × 32 layers; core 2 × 32 × 256 × (131,072 × 131,073 / 2) × 32.
        assert_eq!(at("prefill_projection_flops"), "351843720888320");
        assert_eq!(at("prefill_core_flops"), "4503633987108864");
        // One token: 2 × 41,943,040 × 32; core 2 × 32 × 256 × 131,072 keys × 32.
        assert_eq!(at("decode_projection_flops"), "2684354560");
        assert_eq!(at("decode_core_flops"), "68719476736");
        // Plus the FFN, 2 × 3 × 4096 × 14,336 × 32 = 11,274,289,152.
        assert_eq!(at("decode_flops_per_token"), "82678120448");
        // Weights (41,943,040 + 176,160,768) × 32 × 2 bytes; the cache 131,072 B per token × 131,072.
        assert_eq!(at("decode_weight_bytes"), "13958643712");
        assert_eq!(at("decode_kv_read_bytes"), "17179869184");
        assert_eq!(at("decode_bytes_per_token"), "31138512896");
        // The prefill moves the same bytes (weights once, the cache written once).
        assert_eq!(at("prefill_bytes"), "31138512896");
        // 82,678,120,448 / 31,138,512,896 = 2.65517; 6,333,221,335,728,128 / 31,138,512,896 = 203,388.69.
        assert_eq!(at("decode_intensity"), "2.6552");
        assert_eq!(at("prefill_intensity"), "203388.6897");
        // Each cached K or V element serves the 4 query heads of its group: 4 multiply-adds per 2 bytes.
        assert_eq!(at("decode_core_intensity"), "4");
        let (state, _) = crate::views::registry::Settings::from_query(q);
        let text = |name| super::figure(name, &state, &state.resolved_model()).map(|f| f.text);
        assert_eq!(text("decode_intensity").as_deref(), Some("2.66 FLOPs per byte"));
        // Every weight: 8,030,261,248 parameters x 2 bytes = 16,060,522,496 (lesson 13's total in bf16).
        assert_eq!(at("all_weight_bytes"), "16060522496");
        // The output layer: 128,256 x 4,096 x 2 bytes = 1,050,673,152.
        assert_eq!(at("output_layer_bytes"), "1050673152");
        // Outside the layers' matrices: the embedding table and the output layer (1,050,673,152 each) and
        // the norms, (2 x 32 + 1) x 4,096 x 2 bytes = 532,480: 2,101,878,784 = 16,060,522,496 - 13,958,643,712.
        assert_eq!(at("outside_layers_weight_bytes"), (2u64 * 1_050_673_152 + 532_480).to_string());
        assert_eq!(at("outside_layers_weight_bytes"), (16_060_522_496u64 - 13_958_643_712).to_string());
        assert_eq!(text("prefill_intensity").as_deref(), Some("203,389 FLOPs per byte"));
    }

    #[test]
    fn mla_core_reads_few_bytes_for_many_flops() {
        // DeepSeek-V3: per key and layer 2 × 128 heads × (512 + 64 + 512) = 278,528 FLOPs against
        // 576 × 2 bytes = 1,152: 241.78 FLOPs per byte.
        assert_eq!(exact("decode_core_intensity", "model=deepseek-v3&ctx=4096"), "241.7778");
    }
}
