//! Figures of the variants trained here (`views::compare::trained_variants`): each one's held-out
//! loss over its seeds, its difference from MHA, what its cache takes, and the recipe they share.

use super::written::{Figure, Unit, number, whole};
use crate::views::compare::trained_variants::{TrainedVariant, trained_variants};

/// The variants the figures name, as the training crate writes them.
const ATTNS: [&str; 4] = ["mha", "gqa", "mqa", "mla"];

pub(super) fn figure(name: &str) -> Option<Figure> {
    let table = trained_variants().ok()?;
    let row = |attn: &str| -> Option<&TrainedVariant> {
        ATTNS.contains(&attn).then(|| table.rows.iter().find(|r| r.attn == attn)).flatten()
    };
    if let Some(attn) = name.strip_prefix("variant_loss_") {
        return Some(number(row(attn)?.mean(), Unit::Number));
    }
    if let Some(attn) = name.strip_prefix("variant_spread_") {
        return Some(number(row(attn)?.spread(), Unit::Number));
    }
    if let Some(attn) = name.strip_prefix("variant_delta_") {
        return Some(number(row(attn)?.mean() - row("mha")?.mean(), Unit::Number));
    }
    if let Some(attn) = name.strip_prefix("variant_kv_bytes_") {
        return Some(whole(row(attn)?.kv_bytes_per_token, Unit::Bytes));
    }
    match name {
        "variant_seeds" => Some(whole(table.rows.iter().map(|r| r.seeds.len()).min()? as u128, Unit::Count)),
        "variant_steps" => Some(whole(table.steps.into(), Unit::Count)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(name: &str) -> String {
        figure(name).unwrap_or_else(|| panic!("{name}")).exact
    }

    #[test]
    fn the_shipped_tables_figures_by_hand() {
        // variants.json: MHA's held-out losses 4.628194... and 4.395516... (seeds 1 and 2): mean
        // 4.511855, spread 0.232678.
        assert_eq!(exact("variant_loss_mha"), "4.5119");
        assert_eq!(exact("variant_spread_mha"), "0.2327");
        assert_eq!(exact("variant_kv_bytes_mha"), "4096");
        assert_eq!(exact("variant_kv_bytes_mqa"), "512");
        assert_eq!(exact("variant_seeds"), "2");
        assert_eq!(exact("variant_steps"), "600");
        assert_eq!(figure("variant_delta_mha").map(|f| f.exact), Some("0".into()));
        for bad in ["variant_loss_", "variant_loss_xl", "variant_kv_bytes_", "variant_other"] {
            assert_eq!(figure(bad), None, "{bad}");
        }
    }
}
