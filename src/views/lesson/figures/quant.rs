//! Figures of the memory view's quantised caches, for the model it measures (the trained one): the
//! chosen scheme's exact bytes per token (its scales and zero points counted), the full-precision
//! cost, what does not grow with the context, and the view's group size and recent window.

use super::written::{Figure, Unit, number, whole};
use crate::catalog::presets::{TRAINED_ID, preset};
use crate::model::kv_quant::KvScheme;
use crate::views::memory::rows::cache_geometry;
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings) -> Option<Figure> {
    let (layers, h_kv, d) = cache_geometry(preset(TRAINED_ID)?);
    let memory = &state.memory;
    let chosen = memory.chosen();
    let per_token = |s: KvScheme| u128::from(s.bytes_per_token(layers, h_kv, d));
    let (unit, value) = match name {
        "quant_bytes_per_token" => (Unit::Bytes, per_token(chosen)),
        "quant_full_bytes_per_token" => (Unit::Bytes, per_token(KvScheme::Fp32)),
        "quant_fixed_bytes" => (Unit::Bytes, u128::from(chosen.fixed_bytes(layers, h_kv, d))),
        "quant_vectors_per_token" => (Unit::Count, 2 * u128::from(layers) * u128::from(h_kv)),
        "quant_group" => (Unit::Count, memory.group.into()),
        "quant_recent" => (Unit::Tokens, memory.recent.into()),
        "quant_saving_factor" => {
            let full = per_token(KvScheme::Fp32) as f64;
            return Some(number(full / per_token(chosen).max(1) as f64, Unit::Times));
        }
        _ => return None,
    };
    Some(whole(value, unit))
}

#[cfg(test)]
mod tests {
    use super::super::tests::at;
    use super::*;

    fn exact(name: &str, query: &str) -> String {
        figure(name, &at(query).0).unwrap_or_else(|| panic!("{name} at {query}")).exact
    }

    #[test]
    fn the_trained_models_cache_under_each_scheme_by_hand() {
        // 4 layers x 2 KV heads x (K, V) = 16 vectors of 32 values a token.
        assert_eq!(exact("quant_vectors_per_token", ""), "16");
        // fp32: 16 x 32 x 4 B = 2,048.
        assert_eq!(exact("quant_full_bytes_per_token", ""), "2048");
        assert_eq!(exact("quant_bytes_per_token", "scheme=fp32"), "2048");
        // int4 at G = 32 (the default): 16 x (32 x 4 bits = 16 B + an f16 scale and min, 4 B) = 320.
        assert_eq!(exact("quant_bytes_per_token", "scheme=int4"), "320");
        assert_eq!(exact("quant_saving_factor", "scheme=int4"), "6.4");
        // At G = 8 four groups a vector: 16 x (16 + 16) = 512, as much as fp8.
        assert_eq!(exact("quant_bytes_per_token", "scheme=int4&group=8"), "512");
        assert_eq!(exact("quant_bytes_per_token", "scheme=fp8-e4m3"), "512");
        // fp8's f32 scale per layer for K and for V: 4 x 2 x 4 B = 32, whatever the context.
        assert_eq!(exact("quant_fixed_bytes", "scheme=fp8-e4m3"), "32");
        // int2 at G = 32: 16 x (8 + 4) = 192.
        assert_eq!(exact("quant_bytes_per_token", "scheme=int2"), "192");
        // KIVI's R = 16 recent tokens in f32: 4 layers x 2 heads x (K, V) x 16 x 32 x 4 B = 32,768.
        assert_eq!(exact("quant_fixed_bytes", "scheme=kivi-int2&recent=16"), "32768");
        assert_eq!(exact("quant_recent", "recent=16"), "16");
        assert_eq!(exact("quant_group", "group=64"), "64");
        assert_eq!(figure("kv_total_bytes", &at("").0), None);
    }
}
