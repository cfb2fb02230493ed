//! Figures of the memory view's evicting caches, for the model it measures (the trained one) at the
//! link's K: what each policy keeps of K, the bytes one kept token costs, the bytes the attention
//! reads at a step once the cache is full, and the sliding layers' own window.

use super::written::{Figure, Unit, whole};
use crate::catalog::presets::{TRAINED_ID, preset};
use crate::model::kv_evict::{bytes_per_kept_token, observation, sinks};
use crate::views::memory::evict::sliding_window;
use crate::views::memory::rows::cache_geometry;
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings) -> Option<Figure> {
    let model = preset(TRAINED_ID)?;
    let (layers, h_kv, d) = cache_geometry(model);
    let keep = u128::from(state.memory.keep);
    let per_token = u128::from(layers) * u128::from(bytes_per_kept_token(h_kv, d));
    let (unit, value) = match name {
        "evict_keep" => (Unit::Tokens, keep),
        "evict_sinks" => (Unit::Tokens, sinks(keep as usize) as u128),
        "evict_sink_recent" => (Unit::Tokens, keep - sinks(keep as usize) as u128),
        "evict_heavy" => (Unit::Tokens, keep / 2),
        "evict_heavy_recent" => (Unit::Tokens, keep - keep / 2),
        "evict_observation" => (Unit::Tokens, observation(keep as usize) as u128),
        "evict_bytes_per_kept_token" => (Unit::Bytes, per_token),
        "evict_bytes_full_cache" => (Unit::Bytes, keep * per_token),
        "evict_sliding_window" => (Unit::Tokens, sliding_window(model)?.into()),
        _ => return None,
    };
    Some(whole(value, unit))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{at, exact};
    use super::*;

    #[test]
    fn the_trained_models_evicting_caches_by_hand() {
        // A kept token: K and V of 2 KV heads of width 32 in f32, in each of 4 layers:
        // 4 x 2 x 2 x 32 x 4 B = 2,048; a full cache of K = 8 reads 8 x 2,048 = 16,384 B a step.
        assert_eq!(exact("evict_bytes_per_kept_token", ""), "2048");
        assert_eq!(exact("evict_bytes_full_cache", "keep=8"), "16384");
        assert_eq!(exact("evict_keep", "keep=8"), "8");
        // Sinks: S = min(4, K/2): K = 8 keeps 4 sinks and 4 recent; K = 6, 3 and 3; K = 32, 4 and 28.
        assert_eq!((exact("evict_sinks", "keep=8"), exact("evict_sink_recent", "keep=8")), ("4".into(), "4".into()));
        assert_eq!((exact("evict_sinks", "keep=6"), exact("evict_sink_recent", "keep=6")), ("3".into(), "3".into()));
        assert_eq!(exact("evict_sink_recent", "keep=32"), "28");
        // H2O: K/2 heavy hitters beside the ceil(K/2) most recent: K = 15 keeps 7 and 8.
        assert_eq!((exact("evict_heavy", "keep=15"), exact("evict_heavy_recent", "keep=15")), ("7".into(), "8".into()));
        // SnapKV's observation window: min(8, ceil(K/2)): 4 at K = 8, 8 at K = 32.
        assert_eq!(
            (exact("evict_observation", "keep=8"), exact("evict_observation", "keep=32")),
            ("4".into(), "8".into())
        );
        // The trained model's sliding layers attend over 64 tokens.
        assert_eq!(exact("evict_sliding_window", ""), "64");
        assert_eq!(figure("quant_group", &at("").0), None);
    }
}
