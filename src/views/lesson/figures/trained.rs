//! Figures of the model this project trained: what its training run measured (`quality.json`
//! beside its weights) and the scores a head needs for each label the page gives.

use super::written::{Figure, Unit, number, whole};
use crate::lm::head_scores::{INDUCTION_LABEL, LOCAL_KEYS, LOCAL_LABEL, PREVIOUS_LABEL, SINK_LABEL};
use crate::views::heatmaps::trained_facts::shipped_heads;

pub(super) fn figure(name: &str) -> Option<Figure> {
    let value = match name {
        "trained_best_induction" => shipped_heads().iter().map(|h| h.induction).reduce(f64::max)?,
        "trained_induction_heads" => {
            let earned = shipped_heads().iter().filter(|h| h.induction >= INDUCTION_LABEL).count();
            return Some(whole(earned as u128, Unit::Count));
        }
        "local_keys" => return Some(whole(LOCAL_KEYS as u128, Unit::Count)),
        "previous_label_threshold" => PREVIOUS_LABEL,
        "induction_label_threshold" => INDUCTION_LABEL,
        "local_label_threshold" => LOCAL_LABEL,
        "sink_label_threshold" => SINK_LABEL,
        _ => return None,
    };
    Some(number(value, Unit::Number))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trained_models_records_and_the_label_thresholds() {
        // quality.json: layer 2's head 6 has the largest induction score, 0.9600642893848745; five heads
        // reach 0.4: layer 2's heads 4-7 (0.957, 0.940, 0.960, 0.918) and layer 3's head 1 (0.483).
        assert_eq!(figure("trained_best_induction").unwrap().exact, "0.9601");
        assert_eq!(figure("trained_induction_heads").unwrap().exact, "5");
        assert_eq!(figure("local_keys").unwrap().exact, "8");
        assert_eq!(figure("sink_label_threshold").unwrap().exact, "0.5");
        assert_eq!(figure("previous_label_threshold").unwrap().exact, "0.5");
        assert_eq!(figure("induction_label_threshold").unwrap().exact, "0.4");
        assert_eq!(figure("local_label_threshold").unwrap().exact, "0.9");
        assert_eq!(figure("kv_total_bytes"), None);
    }
}
