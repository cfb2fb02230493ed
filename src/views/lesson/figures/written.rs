//! How a figure is written: its exact value (for `data-value` and the checks) and its text.

use crate::model::units::{bytes_text, format_thousands};
use crate::views::compare::decode::intensity_text;

/// A computed figure: the exact value (for `data-value` and the checks) and how the text shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// The exact value: an integer, or a number with at most four decimals.
    pub exact: String,
    pub value: f64,
    pub text: String,
}

/// What a figure counts, which decides how it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unit {
    Count,
    Bytes,
    Tokens,
    Flops,
    /// A ratio, written with two decimals and "×".
    Times,
    /// A plain number, written with four decimals.
    Number,
    /// A percentage (the value is in percent), written with one decimal and "%".
    Percent,
    /// Arithmetic intensity, written as the compare view writes it.
    FlopsPerByte,
}

pub(super) fn whole(value: u128, unit: Unit) -> Figure {
    let text = match unit {
        Unit::Bytes => bytes_text(value),
        Unit::Tokens => format!("{} tokens", format_thousands(value)),
        Unit::Flops => format!("{} FLOPs ({:.3e})", format_thousands(value), value as f64),
        _ => format_thousands(value),
    };
    Figure { exact: value.to_string(), value: value as f64, text }
}

pub(super) fn number(value: f64, unit: Unit) -> Figure {
    let exact = format!("{value:.4}").trim_end_matches('0').trim_end_matches('.').to_string();
    let text = match unit {
        Unit::Times => format!("{value:.2}×"),
        Unit::Percent => format!("{value:.1}%"),
        Unit::FlopsPerByte => format!("{} FLOPs per byte", intensity_text(value)),
        _ => exact.clone(),
    };
    Figure { exact, value, text }
}
