//! The backward view (`view=backward`): how a gradient gets through attention. It starts where every
//! gradient of attention starts, at the softmax: for one query row of a head, the [`jacobian`]
//! ∂p/∂s = diag(p) − p pᵀ of its probabilities with respect to its scores, and how the score scale
//! moves a row between sharp (a vanishing Jacobian) and flat.
//!
//! Link keys: `row` (the query token, from 0; the last by default) and `jscale` (what the scores
//! `q·k` are multiplied by: `inv-sqrt-d`, as attention does, `one` or `inv-d`); for real weights,
//! `target` (`text`, or a token position whose next token's loss is taken) and `eta`
//! (the step size on the layer's W_Q, W_K, W_V). Everything else is the explorer's: model, layer, text
//! (or `n`), tokens, mask, seed, designed heads, shown heads and the enlarged one (`focus`), the head
//! this view works out.

pub mod grad_check;
pub mod host_copy;
pub mod jacobian;
pub mod model_grad;
pub mod panel;

use std::fmt;
use std::str::FromStr;

use crate::lm::grad_step::MAX_ETA;
use crate::views::link::{Accepted, LinkParams, echo, parse_bounded};
use crate::views::view_class::ViewClass;

/// The backward view in the view registry.
pub struct BackwardView;

impl ViewClass for BackwardView {
    const ID: &'static str = "backward";
    const TITLE: &'static str = "Backward";
    type Params = BackwardParams;

    /// The trained model's gradients, or seeded weights over a layout.
    fn numbers_source(step: &crate::views::view_class::StepShows) -> crate::views::view_class::NumbersSource {
        crate::views::view_class::NumbersSource::trained_or_seeded(step)
    }
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

impl FromStr for ScoreScale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ScoreScale::ALL
            .into_iter()
            .find(|k| k.id() == s)
            .ok_or_else(|| format!("\"{}\" is not a score scale (inv-sqrt-d, one or inv-d)", echo(s)))
    }
}

/// What the loss is of (URL `target`): the whole text's, or the next token after a position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TargetChoice {
    /// `text`: the mean cross-entropy of every next token of the text.
    #[default]
    Text,
    /// A position, from 0: the loss of the text's own next token after it.
    After(u32),
}

impl fmt::Display for TargetChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetChoice::Text => f.write_str("text"),
            TargetChoice::After(p) => write!(f, "{p}"),
        }
    }
}

impl FromStr for TargetChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(TargetChoice::Text),
            _ => parse_bounded(s, 0, MAX_ROW)
                .map(TargetChoice::After)
                .map_err(|why| format!("{why} (a target is text or a token position)")),
        }
    }
}

/// The step size a link starts with: on the trained model over the default text (15 tokens) it lowers
/// the text's loss in every layer (measured 6.729 to 5.530, 6.405, 6.570 and 6.441 nats for layers 0
/// to 3) and a single token's too, by enough to see.
pub const DEFAULT_ETA: f64 = 0.1;

/// The step size (URL `eta`): a finite number in 0 to [`MAX_ETA`]; 0 takes no step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepSize(f64);

// The parser lets no NaN in, so equality is total.
impl Eq for StepSize {}

impl Default for StepSize {
    fn default() -> Self {
        StepSize(DEFAULT_ETA)
    }
}

impl StepSize {
    pub fn value(self) -> f64 {
        self.0
    }
}

impl fmt::Display for StepSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for StepSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.parse::<f64>() {
            Ok(eta) if (0.0..=MAX_ETA).contains(&eta) => Ok(StepSize(eta)),
            // A long value may still be a number ("0.000…1e9"): the notice repeats only its start.
            Ok(_) => Err(format!("{} is outside 0..={MAX_ETA}", echo(s))),
            Err(_) => Err(format!("\"{}\" is not a number", echo(s))),
        }
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
    fn targets_and_step_sizes_parse_with_bounds() {
        assert_eq!("text".parse::<TargetChoice>(), Ok(TargetChoice::Text));
        assert_eq!("7".parse::<TargetChoice>(), Ok(TargetChoice::After(7)));
        for bad in ["-1", "65536", "word", ""] {
            assert!(bad.parse::<TargetChoice>().is_err(), "{bad}");
        }
        assert_eq!(TargetChoice::After(7).to_string(), "7");
        assert_eq!("0.5".parse::<StepSize>().map(StepSize::value), Ok(0.5));
        assert_eq!("0".parse::<StepSize>().map(StepSize::value), Ok(0.0));
        assert_eq!("100".parse::<StepSize>().map(StepSize::value), Ok(100.0));
        for bad in ["-0.1", "100.5", "NaN", "inf", "fast"] {
            assert!(bad.parse::<StepSize>().is_err(), "{bad}");
        }
        assert_eq!(StepSize::default().to_string(), "0.1");
        assert_eq!("0.25".parse::<StepSize>().unwrap().to_string(), "0.25");
    }

    #[test]
    fn a_refused_value_is_repeated_cut_to_32_characters_whatever_the_key() {
        // A link can carry a value of any length; the notice repeats its first 32 characters.
        let tail = "TAIL".repeat(10_000);
        let long_number = format!("1{}e9{tail}", "0".repeat(40));
        let huge = format!("1{}", "0".repeat(40));
        let cut = |v: &str| v.chars().take(32).collect::<String>();
        let mut p = BackwardParams::default();
        for (key, value) in [
            ("eta", format!("x{tail}")),
            ("eta", huge.clone()),
            ("eta", long_number.clone()),
            ("jscale", format!("x{tail}")),
            ("target", format!("x{tail}")),
            ("target", huge.clone()),
            ("row", format!("x{tail}")),
        ] {
            let why = p.set(key, &value).err().unwrap_or_default();
            assert!(why.contains(&cut(&value)) && !why.contains(&value[..33]), "{key}: {why}");
            assert!(why.len() < 120, "{key}: {} bytes", why.len());
        }
        assert_eq!("1e9".parse::<StepSize>(), Err("1e9 is outside 0..=100".to_string()));
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
