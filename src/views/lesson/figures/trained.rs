//! Figures of the model this project trained: what its training run measured (`quality.json`
//! beside its weights) and the scores a head needs for each label the page gives.

use super::written::{Figure, Unit, number, whole};
use crate::lm::head_scores::{INDUCTION_LABEL, LOCAL_KEYS, LOCAL_LABEL, PREVIOUS_LABEL, SINK_LABEL};

const QUALITY_JSON: &str = include_str!("../../../../www/models/attention-lab-tiny/quality.json");

pub(super) fn figure(name: &str) -> Option<Figure> {
    let value = match name {
        "trained_best_induction" => induction_scores()?.into_iter().reduce(f64::max)?,
        "trained_induction_heads" => {
            let earned = induction_scores()?.into_iter().filter(|&s| s >= INDUCTION_LABEL).count();
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

/// Every head's `induction` in `quality.json`'s `heads` (one list per layer), measured by training on
/// repeated random sequences.
fn induction_scores() -> Option<Vec<f64>> {
    let quality: serde_json::Value = serde_json::from_str(QUALITY_JSON).ok()?;
    let heads = quality["heads"].as_array()?.iter().filter_map(|layer| layer.as_array()).flatten();
    Some(heads.filter_map(|head| head["induction"].as_f64()).collect())
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
