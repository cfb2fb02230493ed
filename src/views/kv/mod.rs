//! The KV-cache view: its link parameters (`ctx`, `dtype`, `axis`, `budget`, `weights`; the compare
//! view reads the same context length and element type), and what it shows for them: the
//! per-layer-type [`breakdown`], the memory [`budget`] and the memory-against-context [`chart`].

pub mod breakdown;
pub mod budget;
pub mod chart;
pub mod context;

use super::link::{Accepted, LinkParams};
use crate::model::DType;
use crate::model::budget::{DEFAULT_BUDGET_BYTES, format_gb, parse_gb};
use crate::model::plot::Axis;

pub const DEFAULT_CTX_TOKENS: u64 = 8192;
/// Longest context a link may ask for (100 M tokens: beyond any model, still exact arithmetic).
pub const MAX_CTX_TOKENS: u64 = 100_000_000;

/// The KV-cache view in the view registry.
pub struct Kv;

impl crate::views::view_class::ViewClass for Kv {
    const ID: &'static str = "kv";
    const TITLE: &'static str = "KV cache";
    type Params = KvParams;

    /// Bytes of layouts: no weights.
    fn numbers_source(_: &crate::views::view_class::StepShows) -> crate::views::view_class::NumbersSource {
        crate::views::view_class::NumbersSource::Arithmetic
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvParams {
    /// Context length in tokens (URL `ctx=`).
    pub ctx_tokens: u64,
    /// Element type of the KV cache (URL `dtype=`).
    pub dtype: DType,
    /// Axes of the KV chart (URL `axis=linear|log`).
    pub axis: Axis,
    /// GPU memory budget in bytes (URL `budget=`, written in decimal GB: `budget=80` is 80 × 10^9 bytes).
    pub budget_bytes: u64,
    /// Element type of the weights when the budget counts them (URL `weights=off|fp16|...`); `None`: cache only.
    pub weights: Option<DType>,
}

impl Default for KvParams {
    fn default() -> Self {
        Self {
            ctx_tokens: DEFAULT_CTX_TOKENS,
            dtype: DType::Fp16,
            axis: Axis::Linear,
            budget_bytes: DEFAULT_BUDGET_BYTES,
            weights: None,
        }
    }
}

impl LinkParams for KvParams {
    const KEYS: &'static [&'static str] = &["ctx", "dtype", "axis", "budget", "weights"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "ctx" => match value.parse::<u64>() {
                Ok(n) if (1..=MAX_CTX_TOKENS).contains(&n) => self.ctx_tokens = n,
                _ => return Err(format!("\"{value}\" is not a context length between 1 and {MAX_CTX_TOKENS} tokens")),
            },
            "dtype" => self.dtype = value.parse::<DType>().map_err(|e| e.to_string())?,
            "axis" => self.axis = value.parse()?,
            "budget" => self.budget_bytes = parse_gb(value)?,
            "weights" if value == "off" => self.weights = None,
            "weights" => self.weights = Some(value.parse::<DType>().map_err(|e| format!("{e}, or off"))?),
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let default = Self::default();
        let mut out = Vec::new();
        if self.ctx_tokens != default.ctx_tokens {
            out.push(("ctx", self.ctx_tokens.to_string()));
        }
        if self.dtype != default.dtype {
            out.push(("dtype", self.dtype.to_string()));
        }
        if self.axis != default.axis {
            out.push(("axis", self.axis.name().into()));
        }
        if self.budget_bytes != default.budget_bytes {
            out.push(("budget", format_gb(self.budget_bytes)));
        }
        if let Some(d) = self.weights {
            out.push(("weights", d.to_string()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::round_trip;

    #[test]
    fn every_parameter_round_trips() {
        let kv = KvParams {
            ctx_tokens: 131_072,
            dtype: DType::Int4,
            axis: Axis::Log,
            budget_bytes: 24_500_000_000,
            weights: Some(DType::Bf16),
        };
        assert_eq!(round_trip(&kv), kv);
        assert!(KvParams::default().pairs().is_empty());
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mut kv = KvParams::default();
        for (key, bad) in [("ctx", "0"), ("ctx", "100000001"), ("dtype", "fp3"), ("axis", "cubic"), ("budget", "-80")] {
            assert!(kv.set(key, bad).is_err(), "{key}={bad}");
        }
        assert!(kv.set("weights", "fp64").is_err_and(|e| e.ends_with(", or off")));
        kv.set("weights", "fp8").unwrap();
        kv.set("weights", "off").unwrap();
        assert_eq!(kv, KvParams::default());
    }
}
