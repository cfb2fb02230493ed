//! The MLA view (`view=mla`): one DeepSeek-style multi-head latent attention layer computed two ways
//! on the engine, from the same cached latent, and checked against each other and against an f64
//! reference of both.
//!
//! - expanded: every head's key and value decompressed from the latent (`K_nope = c W_UKᵀ`,
//!   `V = c W_UVᵀ`), the shared RoPE key appended, ordinary attention per head;
//! - absorbed: `W_UK` folded into the query (`q_nope W_UK`, a query in latent space), one shared key
//!   head `[c; k_rope]` (MQA-like: 576 wide for DeepSeek V3), `W_UV` folded into the output.
//!
//! With the decoupled RoPE key both give the same attention up to rounding; with the whole key rotated
//! (`rot=whole`) the fold is no longer exact and the page shows by how much they differ.
//!
//! Link keys: `tokens` (the sequence, 1..=[`MAX_TOKENS`]), `qheads` (query heads computed,
//! 1..=[`MAX_QHEADS`]), `mhead` (the head drawn) and `rot` (`decoupled` or `whole`). The sizes of
//! the latent, the RoPE key and the heads come from the chosen model when it has MLA ([`setup`]);
//! `seed` is the explorer's.

pub mod compute;
pub mod cost;
pub mod inputs;
pub mod maps;
pub mod panel;
pub mod reference;
pub mod setup;

use crate::views::link::{Accepted, LinkParams, Notice, parse_bounded};
use crate::views::view_class::ViewClass;

/// The MLA view in the view registry.
pub struct MlaView;

impl ViewClass for MlaView {
    const ID: &'static str = "mla";
    const TITLE: &'static str = "MLA both ways";
    type Params = MlaParams;

    /// A seeded MLA layer (no trained MLA weights ship).
    fn numbers_source(_: &crate::views::view_class::StepShows) -> crate::views::view_class::NumbersSource {
        crate::views::view_class::NumbersSource::Seeded
    }
}

/// Longest sequence the view computes: n² pairs of 576-wide heads stay small on any tier.
pub const MAX_TOKENS: u32 = 256;
/// Most query heads the view computes (the cost table counts the model's own).
pub const MAX_QHEADS: u32 = 8;
/// Numbers a link may write for `tokens` and `qheads` before they are refused rather than cut.
const MAX_WRITTEN: u32 = 1_000_000;

/// Which part of the key RoPE turns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyRotation {
    /// DeepSeek's: only the shared RoPE key (and the query's RoPE part) turn; the latent's keys do not.
    #[default]
    Decoupled,
    /// The whole key and query turn, the decompressed part too: the fold into the query breaks.
    Whole,
}

impl KeyRotation {
    pub const ALL: [KeyRotation; 2] = [KeyRotation::Decoupled, KeyRotation::Whole];

    pub fn id(self) -> &'static str {
        match self {
            KeyRotation::Decoupled => "decoupled",
            KeyRotation::Whole => "whole",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            KeyRotation::Decoupled => "decoupled RoPE key (DeepSeek's)",
            KeyRotation::Whole => "whole key rotated (breaks the fold)",
        }
    }
}

impl std::str::FromStr for KeyRotation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        KeyRotation::ALL
            .into_iter()
            .find(|r| r.id() == s)
            .ok_or_else(|| format!("\"{s}\" is not a rotation (decoupled or whole)"))
    }
}

/// The MLA view's link parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MlaParams {
    /// URL `tokens`.
    pub tokens: u32,
    /// URL `qheads`.
    pub qheads: u32,
    /// URL `mhead`: the head whose two heatmaps are drawn.
    pub mhead: u32,
    /// URL `rot`.
    pub rot: KeyRotation,
}

impl Default for MlaParams {
    fn default() -> Self {
        Self { tokens: 32, qheads: 4, mhead: 0, rot: KeyRotation::Decoupled }
    }
}

/// `value` as a count in `1..=max`; a larger (but sane) number is cut to `max`, with a notice.
fn count_up_to(key: &str, value: &str, max: u32) -> Result<(u32, Accepted), String> {
    let x = parse_bounded(value, 1, MAX_WRITTEN)?;
    if x <= max {
        return Ok((x, Accepted::Yes));
    }
    Ok((max, Accepted::Adjusted(Notice(format!("{key}={x} is more than the MLA view computes: cut to {max}")))))
}

impl LinkParams for MlaParams {
    const KEYS: &'static [&'static str] = &["tokens", "qheads", "mhead", "rot"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        let accepted = match key {
            "tokens" => {
                let (n, accepted) = count_up_to(key, value, MAX_TOKENS)?;
                self.tokens = n;
                accepted
            }
            "qheads" => {
                let (h, accepted) = count_up_to(key, value, MAX_QHEADS)?;
                self.qheads = h;
                accepted
            }
            "mhead" => {
                self.mhead = parse_bounded(value, 0, MAX_QHEADS - 1)?;
                Accepted::Yes
            }
            "rot" => {
                self.rot = value.parse()?;
                Accepted::Yes
            }
            _ => return Err(format!("unknown parameter {key}")),
        };
        Ok(accepted)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let default = Self::default();
        let mut out = Vec::new();
        if self.tokens != default.tokens {
            out.push(("tokens", self.tokens.to_string()));
        }
        if self.qheads != default.qheads {
            out.push(("qheads", self.qheads.to_string()));
        }
        if self.mhead != default.mhead {
            out.push(("mhead", self.mhead.to_string()));
        }
        if self.rot != default.rot {
            out.push(("rot", self.rot.id().into()));
        }
        out
    }
}

impl MlaParams {
    /// The head drawn: `mhead`, or the last computed one when it names a head past `qheads`.
    pub fn shown_head(&self) -> u32 {
        self.mhead.min(self.qheads.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::round_trip;

    #[test]
    fn every_parameter_round_trips_and_bad_values_are_refused() {
        let params = MlaParams { tokens: 200, qheads: 2, mhead: 1, rot: KeyRotation::Whole };
        assert_eq!(round_trip(&params), params);
        assert!(MlaParams::default().pairs().is_empty());
        let mut p = MlaParams::default();
        for (key, bad) in [
            ("tokens", "0"),
            ("tokens", "-3"),
            ("tokens", "1e9"),
            ("tokens", "99999999999"),
            ("qheads", "0"),
            ("mhead", "8"),
            ("mhead", "x"),
            ("rot", "full"),
            ("rot", "<b>"),
        ] {
            assert!(p.set(key, bad).is_err(), "{key}={bad}");
        }
        assert_eq!(p, MlaParams::default());
    }

    #[test]
    fn too_many_tokens_or_heads_are_cut_with_a_notice() {
        let mut p = MlaParams::default();
        assert!(matches!(p.set("tokens", "5000"), Ok(Accepted::Adjusted(_))));
        assert_eq!(p.tokens, MAX_TOKENS);
        assert!(matches!(p.set("qheads", "128"), Ok(Accepted::Adjusted(_))));
        assert_eq!(p.qheads, MAX_QHEADS);
        assert!(matches!(p.set("tokens", "256"), Ok(Accepted::Yes)));
        // A head past the computed ones draws the last computed one.
        let p = MlaParams { qheads: 2, mhead: 5, ..MlaParams::default() };
        assert_eq!(p.shown_head(), 1);
    }
}
