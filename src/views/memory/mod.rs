//! The memory view (`view=memory&tech=quant`): what saving KV memory costs, measured on the trained
//! model's own pass over the user's text. Each [`KvScheme`] of `model::kv_quant` is a row: its exact
//! bytes per token (scales and zero points counted) beside the KL divergence of the next-token
//! distributions from the full-precision pass, top-1 agreement and the loss on the text
//! (`lm::kv_quality`), and a chart of quality against bytes; the chosen scheme's heads in a table.
//!
//! With `tech=evict` (`evict`), the rows are eviction policies of `model::kv_evict` instead, run
//! during teacher-forced decoding of the text at K kept tokens per layer.
//!
//! Link keys: `tech` (`quant` or `evict`), `group` (G, the values or tokens that share a scale: 8,
//! 16, 32, 64 or 128), `recent` (KIVI's R full-precision tokens, 0-128), `scheme` (the scheme whose
//! heads the table shows), `keep` (K, the tokens each layer's evicting cache keeps, 1-128) and
//! `policy` (the policy whose kept keys the grid shows). The text is the explorer's.

pub mod evict;
pub mod rows;

use crate::model::kv_evict::{EvictPolicy, POLICIES};
use crate::model::kv_quant::{GROUPS, KvScheme};
use crate::views::link::{Accepted, LinkParams, echo, parse_bounded};
use crate::views::view_class::ViewClass;

/// The memory view in the view registry.
pub struct Memory;

impl ViewClass for Memory {
    const ID: &'static str = "memory";
    const TITLE: &'static str = "Memory";
    type Params = MemoryParams;

    /// The memory view always runs the trained model over the text.
    fn numbers_source(_: &crate::views::view_class::StepShows) -> crate::views::view_class::NumbersSource {
        crate::views::view_class::NumbersSource::Trained
    }
}

/// Most recent tokens KIVI may keep in full precision (the trained model reads 128).
pub const MAX_RECENT: u32 = 128;

/// Most tokens an evicting cache may keep (the trained model reads 128).
pub const MAX_KEEP: u32 = 128;

/// The memory technique the view measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tech {
    /// Quantised caches (the default).
    #[default]
    Quant,
    /// Evicting caches.
    Evict,
}

/// The schemes' kinds, as `scheme=` names them (the group size is `group`'s).
pub const SCHEME_KINDS: [&str; 9] =
    ["fp32", "fp16", "fp8-e4m3", "fp8-e5m2", "int8", "int4", "int2", "kivi-int4", "kivi-int2"];

/// The memory view's link parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryParams {
    /// URL `tech`, where the link names it (the page measures `Quant` where it does not).
    pub tech: Option<Tech>,
    /// URL `group`: G.
    pub group: u32,
    /// URL `recent`: KIVI's R.
    pub recent: u32,
    /// URL `scheme`: an index into [`SCHEME_KINDS`], the scheme the head table shows.
    pub scheme: usize,
    /// URL `keep`: K, the tokens each layer's evicting cache keeps.
    pub keep: u32,
    /// URL `policy`: an index into [`POLICIES`], the policy whose kept keys the grid shows.
    pub policy: usize,
}

impl Default for MemoryParams {
    fn default() -> Self {
        Self { tech: None, group: 32, recent: 16, scheme: 5, keep: 8, policy: 2 }
    }
}

impl MemoryParams {
    /// The compared schemes at this group size and recent window, in [`SCHEME_KINDS`]' order.
    pub fn schemes(&self) -> [KvScheme; 9] {
        KvScheme::compared(self.group, self.recent)
    }

    /// The technique the page measures.
    pub fn tech(&self) -> Tech {
        self.tech.unwrap_or_default()
    }

    /// The policy the kept-keys grid shows.
    pub fn chosen_policy(&self) -> EvictPolicy {
        POLICIES[self.policy.min(POLICIES.len() - 1)]
    }

    /// The scheme the head table shows.
    pub fn chosen(&self) -> KvScheme {
        self.schemes()[self.scheme.min(SCHEME_KINDS.len() - 1)]
    }
}

impl LinkParams for MemoryParams {
    const KEYS: &'static [&'static str] = &["tech", "group", "recent", "scheme", "keep", "policy"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "tech" if value == "quant" => self.tech = Some(Tech::Quant),
            "tech" if value == "evict" => self.tech = Some(Tech::Evict),
            "tech" => {
                return Err(format!("\"{}\" is not a memory technique this page measures (quant, evict)", echo(value)));
            }
            "group" => {
                let g = parse_bounded(value, GROUPS[0], GROUPS[GROUPS.len() - 1])?;
                if !GROUPS.contains(&g) {
                    return Err(format!("group {g} is not one of 8, 16, 32, 64, 128"));
                }
                self.group = g;
            }
            "recent" => self.recent = parse_bounded(value, 0, MAX_RECENT)?,
            "scheme" => {
                self.scheme = SCHEME_KINDS
                    .iter()
                    .position(|k| *k == value)
                    .ok_or_else(|| format!("\"{}\" is not a scheme ({})", echo(value), SCHEME_KINDS.join(", ")))?;
            }
            "keep" => {
                if value.len() > 32 {
                    return Err(format!(
                        "kept tokens: a whole number of 1 to {MAX_KEEP}, not a {}-byte value",
                        value.len()
                    ));
                }
                self.keep = parse_bounded(value, 1, MAX_KEEP).map_err(|e| format!("kept tokens: {e}"))?;
            }
            "policy" => {
                let names: Vec<&str> = POLICIES.iter().map(|p| p.name()).collect();
                self.policy = POLICIES
                    .iter()
                    .position(|p| p.name() == value)
                    .ok_or_else(|| format!("\"{}\" is not an eviction policy ({})", echo(value), names.join(", ")))?;
            }
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let d = Self::default();
        let mut out = Vec::new();
        match self.tech {
            Some(Tech::Quant) => out.push(("tech", "quant".into())),
            Some(Tech::Evict) => out.push(("tech", "evict".into())),
            None => {}
        }
        if self.group != d.group {
            out.push(("group", self.group.to_string()));
        }
        if self.recent != d.recent {
            out.push(("recent", self.recent.to_string()));
        }
        if self.scheme != d.scheme {
            out.push(("scheme", SCHEME_KINDS[self.scheme].into()));
        }
        if self.keep != d.keep {
            out.push(("keep", self.keep.to_string()));
        }
        if self.policy != d.policy {
            out.push(("policy", self.chosen_policy().name().into()));
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
        let params = MemoryParams { tech: Some(Tech::Quant), group: 64, recent: 0, scheme: 8, keep: 8, policy: 2 };
        assert_eq!(round_trip(&params), params);
        let params = MemoryParams { tech: Some(Tech::Evict), keep: 1, policy: 4, ..Default::default() };
        assert_eq!(round_trip(&params), params);
        assert_eq!(params.chosen_policy(), EvictPolicy::SnapKv);
        assert!(MemoryParams::default().pairs().is_empty());
        let mut p = MemoryParams::default();
        for (key, bad) in [
            ("tech", "paged"),
            ("tech", "<b>x</b>"),
            ("keep", "0"),
            ("keep", "129"),
            ("keep", "99999999999999999999999"),
            ("keep", "eight"),
            ("keep", "-3"),
            ("policy", "lru"),
            ("policy", "<script>"),
            ("group", "12"),
            ("group", "256"),
            ("group", "0"),
            ("recent", "129"),
            ("recent", "-1"),
            ("scheme", "int3"),
            ("scheme", "int4-g32"),
        ] {
            assert!(p.set(key, bad).is_err(), "{key}={bad}");
        }
        assert_eq!(p, MemoryParams::default());
        assert!(matches!(p.set("tech", "quant"), Ok(Accepted::Yes)) && p.tech() == Tech::Quant);
        assert!(p.set("tech", "evict").is_ok() && p.tech() == Tech::Evict);
        assert_eq!(MemoryParams::default().tech(), Tech::Quant);
        // A long refused value is cut in the notice.
        let Err(why) = p.set("keep", &"9".repeat(500)) else { panic!("a 500-digit K was taken") };
        assert!(why.len() < 80, "{why}");
    }

    #[test]
    fn the_chosen_scheme_follows_group_and_recent() {
        let p = MemoryParams { group: 16, recent: 4, scheme: 8, ..Default::default() };
        assert_eq!(p.chosen(), KvScheme::Kivi { bits: 2, group: 16, recent: 4 });
        assert_eq!(MemoryParams::default().chosen().name(), "int4-g32");
        let names: Vec<String> = p.schemes().iter().map(|s| s.name()).collect();
        assert_eq!(names[5], "int4-g16");
    }
}
