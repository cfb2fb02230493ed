//! Figures of what the hybrid schedules and the sharing of keys and values save: the cache with every
//! layer global, with K and V kept apart, and with every layer storing its own cache, beside the model's.

use super::written::{Figure, Unit, number, whole};
use crate::model::kv_cache::kv_unwindowed_bytes;
use crate::model::{CrossLayerSharing, Model, kv_bytes_per_token, kv_total_bytes};
use crate::views::registry::Settings;

/// `model` with K and V separate in every layer.
fn separate_kv(model: &Model) -> Model {
    let mut m = model.clone();
    m.attn.k_eq_v = false;
    if let Some(g) = m.global_attn.as_mut() {
        g.k_eq_v = false;
    }
    m
}

/// `model` with every layer storing its own cache.
fn unshared(model: &Model) -> Model {
    Model { cross_layer: CrossLayerSharing::None, ..model.clone() }
}

fn ratio(a: u128, b: u128) -> Option<Figure> {
    (b > 0).then(|| number(a as f64 / b as f64, Unit::Times))
}

pub(super) fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let (ctx, dtype) = (state.kv.ctx_tokens, state.kv.dtype);
    let own_total = || kv_total_bytes(model, ctx, dtype).ok();
    let layers = model.schedule.layers();
    let count = |keep: &dyn Fn(usize) -> bool| (0..layers.len()).filter(|&l| keep(l)).count() as u128;
    Some(match name {
        "all_global_kv_total_bytes" => whole(kv_unwindowed_bytes(model, ctx, dtype).ok()?, Unit::Bytes),
        "window_saving_factor" => ratio(kv_unwindowed_bytes(model, ctx, dtype).ok()?, own_total()?)?,
        "k_eq_v_layers" => {
            let keqv = |l: usize| model.mla.is_none() && layers[l].is_attention() && model.geometry(layers[l]).k_eq_v;
            whole(count(&keqv), Unit::Count)
        }
        "separate_kv_bytes_per_token" => whole(kv_bytes_per_token(&separate_kv(model), dtype).ok()?, Unit::Bytes),
        "separate_kv_total_bytes" => whole(kv_total_bytes(&separate_kv(model), ctx, dtype).ok()?, Unit::Bytes),
        "keqv_saved_bytes" => {
            whole(kv_total_bytes(&separate_kv(model), ctx, dtype).ok()?.checked_sub(own_total()?)?, Unit::Bytes)
        }
        "kv_sharing_layers" => {
            let stores = model.kv_storing_layers();
            whole(count(&|l| layers[l].is_attention() && !stores[l]), Unit::Count)
        }
        "kv_storing_layers" => {
            let stores = model.kv_storing_layers();
            whole(count(&|l| stores[l]), Unit::Count)
        }
        "unshared_kv_bytes_per_token" => whole(kv_bytes_per_token(&unshared(model), dtype).ok()?, Unit::Bytes),
        "unshared_kv_total_bytes" => whole(kv_total_bytes(&unshared(model), ctx, dtype).ok()?, Unit::Bytes),
        "sharing_saving_factor" => ratio(kv_total_bytes(&unshared(model), ctx, dtype).ok()?, own_total()?)?,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{exact, text};

    #[test]
    fn gemma_3_hybrid_against_all_global_by_hand() {
        // Gemma 3 27B at 131,072 tokens, FP16: every layer caches 16 KV heads × 128 × 2 (K, V) × 2 B
        // = 8,192 B per token. All 62 global: 62 × 8,192 × 131,072 = 66,571,993,088 B. As published
        // (breakdown test): 52 × 8,192 × 1,024 + 10 × 8,192 × 131,072 = 11,173,625,856 B; ratio 5.958.
        let q = "model=gemma-3-27b&ctx=131072&dtype=fp16";
        assert_eq!(exact("all_global_kv_total_bytes", q), "66571993088");
        assert_eq!(exact("window_saving_factor", q), "5.958");
        assert_eq!(text("window_saving_factor", q), "5.96×");
    }

    #[test]
    fn gemma_4_12b_k_eq_v_on_its_global_layers_by_hand() {
        // 48 layers: 40 sliding (8 KV heads × 256, K and V: 4,096 elements) and 8 global (1 KV head × 512,
        // K = V: 512 elements). FP16 per token: 40 × 8,192 + 8 × 1,024 = 335,872 B; with K and V
        // separate the global layers take 2,048 B each: 40 × 8,192 + 8 × 2,048 = 344,064 B.
        let q = "model=gemma-4-12b&ctx=131072&dtype=fp16";
        assert_eq!(exact("k_eq_v_layers", q), "8");
        assert_eq!(exact("kv_bytes_per_token", q), "335872");
        assert_eq!(exact("separate_kv_bytes_per_token", q), "344064");
        // At 131,072 tokens: sliding 40 × 8,192 × 1,024 = 335,544,320 B; global 8 × 1,024 × 131,072
        // = 1,073,741,824 B (K = V) or 2,147,483,648 B (separate). Saved: 1,073,741,824 B.
        assert_eq!(exact("kv_total_bytes", q), "1409286144");
        assert_eq!(exact("separate_kv_total_bytes", q), "2483027968");
        assert_eq!(exact("keqv_saved_bytes", q), "1073741824");
        // Nothing is shared across layers in the 12B.
        assert_eq!((exact("kv_sharing_layers", q), exact("kv_storing_layers", q)), ("0".into(), "48".into()));
    }

    #[test]
    fn gemma_4_e4b_cross_layer_sharing_by_hand() {
        // 42 layers, 5 sliding (window 512) : 1 global, the last global: globals 5, 11, ..., 41 (7),
        // sliding 35. The last 18 layers (24-41) reuse a cache: 24 store (20 sliding, 4 global).
        // Per token FP16: sliding 2 KV heads × 256 × 2 × 2 B = 2,048 B, global 2 × 512 × 2 × 2 B = 4,096 B.
        let q = "model=gemma-4-e4b&ctx=131072&dtype=fp16";
        assert_eq!((exact("kv_sharing_layers", q), exact("kv_storing_layers", q)), ("18".into(), "24".into()));
        // Stored: 20 × 2,048 + 4 × 4,096 = 57,344 B; unshared: 35 × 2,048 + 7 × 4,096 = 100,352 B.
        assert_eq!(exact("kv_bytes_per_token", q), "57344");
        assert_eq!(exact("unshared_kv_bytes_per_token", q), "100352");
        // At 131,072: stored 20 × 2,048 × 512 + 4 × 4,096 × 131,072 = 20,971,520 + 2,147,483,648
        // = 2,168,455,168 B; unshared 35 × 2,048 × 512 + 7 × 4,096 × 131,072 = 36,700,160 + 3,758,096,384
        // = 3,794,796,544 B; ratio 1.75.
        assert_eq!(exact("kv_total_bytes", q), "2168455168");
        assert_eq!(exact("unshared_kv_total_bytes", q), "3794796544");
        assert_eq!(exact("sharing_saving_factor", q), "1.75");
        // E4B keeps K and V apart.
        assert_eq!((exact("k_eq_v_layers", q), exact("keqv_saved_bytes", q)), ("0".into(), "0".into()));
    }
}
