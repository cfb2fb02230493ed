//! The compare view's link parameter: which variants of the base model it lists (`variants`).

use super::link::{Accepted, LinkParams};
use crate::model::Variant;

/// Most variants a link may list.
pub const MAX_VARIANTS: usize = 24;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompareParams {
    /// Variants the compare view shows (URL `variants=mha,gqa8,...`); `None`: the standard set for the model.
    pub variants: Option<Vec<Variant>>,
}

impl LinkParams for CompareParams {
    const KEYS: &'static [&'static str] = &["variants"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "variants" => self.variants = Some(parse_variants(value)?),
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let list = self.variants.iter().map(|list| list.iter().map(ToString::to_string).collect::<Vec<_>>().join(","));
        list.map(|l| ("variants", l)).collect()
    }
}

/// Reads `mha,gqa8,sw4096` (names as [`Variant`] writes them); any bad name rejects the list.
fn parse_variants(value: &str) -> Result<Vec<Variant>, String> {
    let list: Vec<Variant> = value
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<Variant>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    if list.is_empty() || list.len() > MAX_VARIANTS {
        return Err(format!("a list of 1 to {MAX_VARIANTS} variants is expected"));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::round_trip;

    #[test]
    fn every_parameter_round_trips() {
        let params = CompareParams {
            variants: Some(vec![
                Variant::Mha,
                Variant::Gqa { groups: 4 },
                Variant::Hybrid { local_per_global: 5, window_tokens: 1024 },
            ]),
        };
        assert_eq!(round_trip(&params), params);
        assert_eq!(params.pairs(), vec![("variants", "mha,gqa4,hybrid5w1024".into())]);
        assert!(CompareParams::default().pairs().is_empty());
    }

    #[test]
    fn one_bad_name_or_too_many_reject_the_list() {
        let mut params = CompareParams::default();
        assert!(params.set("variants", "mha,gqa-2").is_err());
        assert!(params.set("variants", "").is_err());
        assert!(params.set("variants", &vec!["mha"; MAX_VARIANTS + 1].join(",")).is_err());
        assert_eq!(params, CompareParams::default());
    }
}
