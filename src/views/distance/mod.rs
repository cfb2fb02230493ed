//! The distance view (`view=distance`): how far back each head of the explorer's layer looks. For
//! every distance δ between a query and a key, the share of the head's attention that goes δ tokens
//! back, averaged over the queries: a previous-token head peaks at 1, a local head stays near 0, a
//! sink spreads over every distance, and a sliding window cuts the curve at its width.
//!
//! The masses come from the `distance_mass` kernel (or its CPU twin), which works each probability
//! out of Q, K and the forward pass's log-sum-exp where it sums it, so no n × n matrix is made and
//! the view reaches texts the heatmaps can only pool ([`compute`]). What the page says of them is
//! worked out in [`figures`].
//!
//! The layer, heads, text (or `n`), mask, seed and designed heads are the explorer's; the view's own
//! key is `near`: the distance within which a key counts as near (the "near" share of each head).

pub mod compute;
pub mod figures;

use crate::views::link::{Accepted, LinkParams, parse_bounded};
use crate::views::view_class::{NumbersSource, StepShows, ViewClass};

/// The distance view in the view registry.
pub struct DistanceView;

impl ViewClass for DistanceView {
    const ID: &'static str = "distance";
    const TITLE: &'static str = "Attention by distance";
    type Params = DistanceParams;

    /// The explorer's seeded layer (the trained model's heads are the heatmaps view's).
    fn numbers_source(_: &StepShows) -> NumbersSource {
        NumbersSource::Seeded
    }
}

/// Largest `near` a link may write: the longest text the view computes.
pub const MAX_NEAR: u32 = compute::MAX_TOKENS;

/// The distance view's link parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistanceParams {
    /// URL `near`: keys at most this many tokens from the query (itself at 0) count as near.
    pub near: u32,
}

impl Default for DistanceParams {
    fn default() -> Self {
        Self { near: 4 }
    }
}

impl LinkParams for DistanceParams {
    const KEYS: &'static [&'static str] = &["near"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "near" => self.near = parse_bounded(value, 0, MAX_NEAR)?,
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        if self.near == Self::default().near { Vec::new() } else { vec![("near", self.near.to_string())] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::round_trip;

    #[test]
    fn near_round_trips_and_bad_values_are_refused() {
        let params = DistanceParams { near: 0 };
        assert_eq!(round_trip(&params), params);
        assert!(DistanceParams::default().pairs().is_empty());
        let mut p = DistanceParams::default();
        for bad in ["-1", "x", "4.5", "<b>", "2049", "99999999999"] {
            assert!(p.set("near", bad).is_err(), "near={bad}");
        }
        assert!(p.set("width", "3").is_err());
        assert_eq!(p, DistanceParams::default());
        assert!(matches!(p.set("near", "2048"), Ok(Accepted::Yes)));
        assert_eq!(p.near, 2048);
    }
}
