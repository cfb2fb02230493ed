//! The compare view: its link parameter (`variants`, which variants of the base model it lists), the
//! list logic behind the variant [`knobs`], and what it shows: the cache [`bars`], the
//! [`dtype_matrix`], the attention [`param_deltas`], the prefill [`flops`] and, beside it, one
//! [`decode`] step.

pub mod bars;
pub mod decode;
pub mod dtype_matrix;
pub mod flops;
pub mod knobs;
pub mod param_deltas;
pub mod trained_variants;

use super::link::{Accepted, LinkParams};
use crate::model::{Model, Variant, apply_variant, standard_variants};

/// Most variants a link may list.
pub const MAX_VARIANTS: usize = 24;

/// The compare view in the view registry.
pub struct Compare;

impl crate::views::view_class::ViewClass for Compare {
    const ID: &'static str = "compare";
    const TITLE: &'static str = "Compare variants";
    type Params = CompareParams;

    /// Layouts' arithmetic, but for the trained variants' table (runs of the training crate).
    fn numbers_source(step: &crate::views::view_class::StepShows) -> crate::views::view_class::NumbersSource {
        use crate::views::view_class::NumbersSource;
        if step.highlights("trained-variants") { NumbersSource::Trained } else { NumbersSource::Arithmetic }
    }
}

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

impl CompareParams {
    /// The variants shown: the link's list, or the standard set for the model.
    pub fn chosen(&self, base: &Model) -> Vec<Variant> {
        self.variants.clone().unwrap_or_else(|| standard_variants(base))
    }

    /// The chosen variants `base` can take, each applied (the others are listed as skipped).
    pub fn applied(&self, base: &Model) -> Vec<(Variant, Model)> {
        self.chosen(base).into_iter().filter_map(|v| apply_variant(base, v).ok().map(|m| (v, m))).collect()
    }

    /// Puts `variant` in the list in place of the one of its family (GQA, sliding, ...), or appends it.
    pub fn set_variant(&mut self, base: &Model, variant: Variant) {
        let mut list = self.chosen(base);
        let same_family = |a: &Variant| std::mem::discriminant(a) == std::mem::discriminant(&variant);
        match list.iter_mut().find(|x| same_family(x)) {
            Some(slot) => *slot = variant,
            None => list.push(variant),
        }
        self.variants = Some(list);
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
    use crate::catalog::presets::preset;
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
    fn a_new_setting_replaces_its_family_in_the_list() {
        // Llama 3 8B, 32 query heads: the standard set has GQA 8 third, after As published and MHA.
        let base = preset("llama-3-8b").unwrap();
        let mut params = CompareParams::default();
        assert_eq!(params.chosen(base), standard_variants(base));
        params.set_variant(base, Variant::Gqa { groups: 4 });
        let list = params.chosen(base);
        assert_eq!((list.len(), list[2]), (9, Variant::Gqa { groups: 4 }));
        // A family not in the list is appended.
        params.variants = Some(vec![Variant::Mha]);
        params.set_variant(base, Variant::Sliding { window_tokens: 1024 });
        assert_eq!(params.variants, Some(vec![Variant::Mha, Variant::Sliding { window_tokens: 1024 }]));
    }

    #[test]
    fn variants_the_model_cannot_take_are_not_applied() {
        // 32 heads cannot form 5 equal groups.
        let base = preset("llama-3-8b").unwrap();
        let params = CompareParams { variants: Some(vec![Variant::Mha, Variant::Gqa { groups: 5 }, Variant::Mqa]) };
        let applied: Vec<Variant> = params.applied(base).into_iter().map(|(v, _)| v).collect();
        assert_eq!(applied, [Variant::Mha, Variant::Mqa]);
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
