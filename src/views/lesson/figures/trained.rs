//! Figures of the model this project trained: what its training run measured (`quality.json`
//! beside its weights) and the scores a head needs for each label the page gives.

use super::written::{Figure, Unit, number};
use crate::lm::head_scores::{INDUCTION_LABEL, LOCAL_LABEL, PREVIOUS_LABEL};

const QUALITY_JSON: &str = include_str!("../../../../www/models/attention-lab-tiny/quality.json");

pub(super) fn figure(name: &str) -> Option<Figure> {
    let value = match name {
        "trained_best_induction" => best_induction()?,
        "previous_label_threshold" => PREVIOUS_LABEL,
        "induction_label_threshold" => INDUCTION_LABEL,
        "local_label_threshold" => LOCAL_LABEL,
        _ => return None,
    };
    Some(number(value, Unit::Number))
}

/// The largest `induction` over every head of `quality.json`'s `heads` (one list per layer).
fn best_induction() -> Option<f64> {
    let quality: serde_json::Value = serde_json::from_str(QUALITY_JSON).ok()?;
    let heads = quality["heads"].as_array()?.iter().filter_map(|layer| layer.as_array()).flatten();
    heads.filter_map(|head| head["induction"].as_f64()).reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trained_models_records_and_the_label_thresholds() {
        // quality.json: layer 3's head 1 has the largest induction score, 0.041214642186006276.
        assert_eq!(figure("trained_best_induction").unwrap().exact, "0.0412");
        assert_eq!(figure("previous_label_threshold").unwrap().exact, "0.5");
        assert_eq!(figure("induction_label_threshold").unwrap().exact, "0.4");
        assert_eq!(figure("local_label_threshold").unwrap().exact, "0.9");
        assert_eq!(figure("kv_total_bytes"), None);
    }
}
