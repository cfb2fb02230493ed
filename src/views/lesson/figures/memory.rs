//! Figures of where the cache's memory goes for the KV view's model: the weights against the budget,
//! and MLA's latent cache.

use super::written::{Figure, Unit, number, whole};
use crate::model::budget::budget_fit;
use crate::model::kv_cache::{ContextFit, weights_bytes};
use crate::model::{Model, kv_total_bytes, max_context_tokens};
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let kv = &state.kv;
    let weights = || match kv.weights {
        Some(dtype) => weights_bytes(model, dtype).ok(),
        None => Some(0),
    };
    let (unit, value): (Unit, u128) = match name {
        "weights_bytes" => (Unit::Bytes, kv.weights.and_then(|d| weights_bytes(model, d).ok())?),
        "cache_room_bytes" => (Unit::Bytes, u128::from(kv.budget_bytes).checked_sub(weights()?)?),
        "model_bytes_at_ctx" => {
            (Unit::Bytes, weights()?.checked_add(kv_total_bytes(model, kv.ctx_tokens, kv.dtype).ok()?)?)
        }
        "context_fits_times" => {
            let own = model.max_position_embeddings;
            return match max_context_tokens(model, kv.dtype, kv.budget_bytes.into(), kv.weights) {
                ContextFit::Tokens(n) if own > 0 => Some(number(n as f64 / own as f64, Unit::Times)),
                _ => None,
            };
        }
        "sequences_at_ctx" => {
            let fit = budget_fit(model, kv.dtype, kv.ctx_tokens, kv.budget_bytes, kv.weights).ok()?;
            (Unit::Count, fit.sequences_at_ctx()?)
        }
        "mla_latent_dims" => (Unit::Count, model.mla?.kv_lora_rank.into()),
        "mla_rope_dims" => (Unit::Count, model.mla?.qk_rope_head_dim.into()),
        "mla_cached_dims" => (Unit::Count, (model.mla?.kv_lora_rank + model.mla?.qk_rope_head_dim).into()),
        "mha_cached_dims" => (Unit::Count, (2 * u128::from(model.n_q_heads) * u128::from(model.attn.head_dim))),
        _ => return None,
    };
    Some(whole(value, unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(name: &str, query: &str) -> String {
        let (state, notices) = Settings::from_query(query);
        assert!(notices.is_empty(), "{notices:?}");
        figure(name, &state, &state.resolved_model()).unwrap_or_else(|| panic!("{name} at {query}")).exact
    }

    #[test]
    fn weights_and_the_room_they_leave_by_hand() {
        // Llama 3 8B has 8,030,261,248 parameters: 16,060,522,496 bytes in bf16. A 24 GB budget leaves
        // 24e9 - 16,060,522,496 = 7,939,477,504 bytes for the cache: floor(/ 131,072) = 60,573 tokens.
        let q = "model=llama-3-8b&budget=24&weights=bf16";
        assert_eq!(exact("weights_bytes", q), "16060522496");
        assert_eq!(exact("cache_room_bytes", q), "7939477504");
        assert_eq!(
            super::super::figure(
                "max_context_tokens",
                &Settings::from_query(q).0,
                &Settings::from_query(q).0.resolved_model()
            )
            .unwrap()
            .exact,
            "60573"
        );
        // At 8,192 tokens: the weights plus 8,192 x 131,072 bytes of cache.
        assert_eq!(
            exact("model_bytes_at_ctx", "model=llama-3-8b&weights=bf16&ctx=8192"),
            (16_060_522_496u64 + 8192 * 131_072).to_string()
        );
        let (state, _) = Settings::from_query("model=llama-3-8b");
        assert_eq!(figure("weights_bytes", &state, &state.resolved_model()), None, "no weights in the budget");
    }

    #[test]
    fn the_longest_context_against_the_models_own_by_hand() {
        // Llama 3 70B: 80 layers of (Q, O 8192 x 8192; K, V 8192 x 1024; FFN 3 x 8192 x 28,672; two norms
        // of 8,192) = 855,654,400, plus two 128,256 x 8,192 tables and a final norm: 70,553,706,496
        // parameters, as many bytes in FP8. An 80 GB budget leaves 9,446,293,504 bytes; one token caches
        // 2 x 80 x 8 x 128 x 2 = 327,680 bytes: 28,827 tokens, 28,827 / 8,192 = 3.51892 times its context.
        let q = "model=llama-3-70b&budget=80&weights=fp8&ctx=8192";
        assert_eq!(exact("weights_bytes", q), "70553706496");
        assert_eq!(exact("cache_room_bytes", q), "9446293504");
        assert_eq!(exact("context_fits_times", q), "3.5189");
        let (state, _) = Settings::from_query(q);
        assert_eq!(figure("context_fits_times", &state, &state.resolved_model()).unwrap().text, "3.52×");
        // Three whole sequences of its full context fit: 9,446,293,504 / (8,192 x 327,680) = 3.52 -> 3.
        assert_eq!(exact("sequences_at_ctx", q), "3");
    }

    #[test]
    fn sequences_that_fit_side_by_side_by_hand() {
        // A sequence of 8,192 tokens caches 8,192 x 131,072 = 2^30 bytes in FP16, half that in FP8.
        // 7,939,477,504 / 2^30 = 7.39 -> 7; in FP8, / 2^29 = 14.79 -> 14.
        assert_eq!(exact("sequences_at_ctx", "model=llama-3-8b&budget=24&weights=bf16&ctx=8192"), "7");
        assert_eq!(exact("sequences_at_ctx", "model=llama-3-8b&budget=24&weights=bf16&ctx=8192&dtype=fp8"), "14");
        // Without the weights the whole budget is room: 24 x 10^9 / 2^30 = 22.35 -> 22.
        assert_eq!(exact("sequences_at_ctx", "model=llama-3-8b&budget=24&ctx=8192"), "22");
    }

    #[test]
    fn mla_caches_a_latent_and_one_rope_key_by_hand() {
        // DeepSeek-V3: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 numbers per token per layer, where
        // MHA over its 128 heads of 128 would cache 2 x 128 x 128 = 32,768.
        let q = "model=deepseek-v3";
        assert_eq!(exact("mla_latent_dims", q), "512");
        assert_eq!(exact("mla_rope_dims", q), "64");
        assert_eq!(exact("mla_cached_dims", q), "576");
        assert_eq!(exact("mha_cached_dims", q), "32768");
        let (state, _) = Settings::from_query("model=llama-3-8b");
        assert_eq!(figure("mla_latent_dims", &state, &state.resolved_model()), None);
    }
}
