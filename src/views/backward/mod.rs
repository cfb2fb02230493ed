//! The backward view (`view=backward`): how a gradient gets through attention. It starts where every
//! gradient of attention starts, at the softmax: for one query row of a head, the [`jacobian`]
//! ∂p/∂s = diag(p) − p pᵀ of its probabilities with respect to its scores, and how the score scale
//! moves a row between sharp (a vanishing Jacobian) and flat.
//!
//! Link keys: `row` (the query token, from 0; the last by default) and `jscale` (what the scores
//! `q·k` are multiplied by: `inv-sqrt-d`, as attention does, `one` or `inv-d`); for real weights,
//! [`model_grad`]'s `target` (`text`, or a token position whose next token's loss is taken) and `eta`
//! (the step size on the layer's W_Q, W_K, W_V). Everything else is the explorer's: model, layer, text
//! (or `n`), tokens, mask, seed, designed heads, shown heads and the enlarged one (`focus`), the head
//! this view works out.

pub mod grad_check;
pub mod jacobian;
pub mod model_grad;
pub mod panel;

use crate::views::link::{Accepted, LinkParams, parse_bounded};
use model_grad::{StepSize, TargetChoice};
use crate::views::view_class::ViewClass;

/// The backward view in the view registry.
pub struct Backward;

impl ViewClass for Backward {
    const ID: &'static str = "backward";
    const TITLE: &'static str = "Backward";
    type Params = BackwardParams;
}

/// Largest query row a link may name (the explorer's longest exact input is shorter).
pub const MAX_ROW: u32 = 65_535;

/// What the scores `q·k` are multiplied by before the softmax.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScoreScale {
    /// `1/√d`: what attention does, so a row's spread does not grow with the head width.
    #[default]
    InvSqrtD,
    /// No scale: raw scores, sharper rows as heads get wider.
    One,
    /// `1/d`: flatter than attention's rows.
    InvD,
}

impl ScoreScale {
    pub const ALL: [ScoreScale; 3] = [ScoreScale::InvD, ScoreScale::InvSqrtD, ScoreScale::One];

    pub fn id(self) -> &'static str {
        match self {
            ScoreScale::InvSqrtD => "inv-sqrt-d",
            ScoreScale::One => "one",
            ScoreScale::InvD => "inv-d",
        }
    }

    /// As the page writes it.
    pub fn label(self) -> &'static str {
        match self {
            ScoreScale::InvSqrtD => "1/√d (attention's)",
            ScoreScale::One => "1 (unscaled)",
            ScoreScale::InvD => "1/d",
        }
    }

    /// The factor for heads of width `d`.
    pub fn factor(self, d: u32) -> f64 {
        let d = f64::from(d.max(1));
        match self {
            ScoreScale::InvSqrtD => 1.0 / d.sqrt(),
            ScoreScale::One => 1.0,
            ScoreScale::InvD => 1.0 / d,
        }
    }
}

impl std::str::FromStr for ScoreScale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ScoreScale::ALL
            .into_iter()
            .find(|k| k.id() == s)
            .ok_or_else(|| format!("\"{s}\" is not a score scale (inv-sqrt-d, one or inv-d)"))
    }
}

/// The backward view's link parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackwardParams {
    /// The query row (URL `row`, from 0); `None`: the last token.
    pub row: Option<u32>,
    /// URL `jscale`.
    pub jscale: ScoreScale,
    /// URL `target`: whose loss the model's gradients are of.
    pub target: TargetChoice,
    /// URL `eta`: the step size on the layer's W_Q, W_K, W_V.
    pub eta: StepSize,
}

impl LinkParams for BackwardParams {
    const KEYS: &'static [&'static str] = &["row", "jscale", "target", "eta"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "row" => self.row = Some(parse_bounded(value, 0, MAX_ROW)?),
            "jscale" => self.jscale = value.parse()?,
            "target" => self.target = value.parse()?,
            "eta" => self.eta = value.parse()?,
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(row) = self.row {
            out.push(("row", row.to_string()));
        }
        if self.jscale != ScoreScale::default() {
            out.push(("jscale", self.jscale.id().into()));
        }
        if self.target != TargetChoice::default() {
            out.push(("target", self.target.to_string()));
        }
        if self.eta != StepSize::default() {
            out.push(("eta", self.eta.to_string()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::round_trip;

    #[test]
    fn every_parameter_round_trips_and_bad_values_are_refused() {
        let params = BackwardParams {
            row: Some(7),
            jscale: ScoreScale::InvD,
            target: TargetChoice::After(3),
            eta: "0.05".parse().unwrap(),
        };
        assert_eq!(round_trip(&params), params);
        assert_eq!(params.pairs()[2..], [("target", "3".to_string()), ("eta", "0.05".to_string())]);
        assert!(BackwardParams::default().pairs().is_empty());
        let mut p = BackwardParams::default();
        let bad_values = [("row", "-1"), ("row", "65536"), ("row", "x"), ("jscale", "sqrt")];
        for (key, bad) in bad_values.into_iter().chain([("target", "last"), ("eta", "-1"), ("eta", "1e9")]) {
            assert!(p.set(key, bad).is_err(), "{key}={bad}");
        }
        assert_eq!(p, BackwardParams::default());
    }

    #[test]
    fn the_scales_by_hand() {
        // d = 64: 1/√64 = 0.125, 1/64 = 0.015625.
        assert_eq!(ScoreScale::InvSqrtD.factor(64), 0.125);
        assert_eq!(ScoreScale::InvD.factor(64), 0.015_625);
        assert_eq!(ScoreScale::One.factor(64), 1.0);
        for scale in ScoreScale::ALL {
            assert_eq!(scale.id().parse::<ScoreScale>(), Ok(scale));
        }
    }
}
