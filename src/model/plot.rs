//! Geometry of the app's small hand-drawn charts: linear or logarithmic scales, tick positions and
//! the context lengths at which a curve is sampled. Pure numbers; the SVG lives in `ui/chart.rs`.
//!
//! KV-cache curves are piecewise linear in the context length (each layer kind holds
//! `min(n, W)` tokens), so sampling at every window and chunk boundary, plus evenly spread points,
//! draws them exactly on a linear axis and smoothly on a log one.

use std::fmt;
use std::str::FromStr;

/// How an axis maps values to positions (URL `axis=linear|log`, applied to both axes of a chart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Axis {
    Linear,
    Log,
}

impl Axis {
    pub const ALL: [Axis; 2] = [Axis::Linear, Axis::Log];

    pub const fn name(self) -> &'static str {
        match self {
            Axis::Linear => "linear",
            Axis::Log => "log",
        }
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Axis {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "linear" => Ok(Axis::Linear),
            "log" => Ok(Axis::Log),
            _ => Err(format!("unknown axis \"{}\" (expected linear or log)", s.chars().take(32).collect::<String>())),
        }
    }
}

/// Maps `[min, max]` onto `[0, 1]`. A log scale needs `min > 0`; values at or below it clamp to 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub axis: Axis,
    pub min: f64,
    pub max: f64,
}

impl Scale {
    /// A scale over `[min, max]`, widened when the range is empty or (for log) not positive.
    pub fn new(axis: Axis, min: f64, max: f64) -> Scale {
        let min = if axis == Axis::Log { min.max(1e-9) } else { min };
        let max = if max.is_finite() && max > min { max } else { min.abs().max(1.0) * 2.0 };
        Scale { axis, min, max }
    }

    /// Position of `v` in `[0, 1]` (clamped, so a line never leaves its chart).
    pub fn fraction(&self, v: f64) -> f64 {
        let t = match self.axis {
            Axis::Linear => (v - self.min) / (self.max - self.min),
            Axis::Log if v <= 0.0 => 0.0,
            Axis::Log => (v.ln() - self.min.ln()) / (self.max.ln() - self.min.ln()),
        };
        if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 }
    }

    /// Tick values for a byte axis: steps of 1, 2 or 5 times a power of ten (linear), or powers of
    /// ten (log), about `approx` of them, all inside the range.
    pub fn decimal_ticks(&self, approx: usize) -> Vec<f64> {
        match self.axis {
            Axis::Linear => {
                linear_ticks(self.min, self.max, nice_decimal_step((self.max - self.min) / approx.max(1) as f64))
            }
            Axis::Log => thin(log_ticks(self.min, self.max, 10.0), approx),
        }
    }

    /// Tick values for a token axis: steps that are powers of two (linear: 0, 32K, 64K, ...), or
    /// powers of two thinned to about `approx` (log: 1K, 4K, 16K, ...).
    pub fn binary_ticks(&self, approx: usize) -> Vec<f64> {
        match self.axis {
            Axis::Linear => {
                let raw = (self.max - self.min) / approx.max(1) as f64;
                let step = if raw <= 1.0 { 1.0 } else { 2f64.powi(raw.log2().ceil() as i32) };
                linear_ticks(self.min, self.max, step)
            }
            Axis::Log => thin(log_ticks(self.min, self.max, 2.0), approx),
        }
    }
}

/// The smallest of 1, 2, 5 times a power of ten that is at least `raw`.
fn nice_decimal_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|&s| s >= raw * (1.0 - 1e-12)).unwrap_or(10.0 * power)
}

fn linear_ticks(min: f64, max: f64, step: f64) -> Vec<f64> {
    if step.is_nan() || step <= 0.0 {
        return vec![min, max];
    }
    let first = (min / step).ceil() as i64;
    let last = (max / step + 1e-9).floor() as i64;
    (first..=last).take(200).map(|i| i as f64 * step).collect()
}

fn log_ticks(min: f64, max: f64, base: f64) -> Vec<f64> {
    let first = (min.log(base) - 1e-9).ceil() as i32;
    let last = (max.log(base) + 1e-9).floor() as i32;
    (first..=last).take(400).map(|e| base.powi(e)).collect()
}

/// Keeps every k-th tick so that at most about `approx` remain (always from the first).
fn thin(ticks: Vec<f64>, approx: usize) -> Vec<f64> {
    let every = ticks.len().div_ceil(approx.max(1)).max(1);
    ticks.into_iter().step_by(every).collect()
}

/// Context lengths at which to sample a curve on `[min_tokens, max_tokens]`: `count` points spread
/// evenly (linear) or geometrically (log), plus every breakpoint inside the range, sorted, unique.
pub fn sample_tokens(axis: Axis, min_tokens: u64, max_tokens: u64, count: usize, breakpoints: &[u64]) -> Vec<u64> {
    let (lo, hi) = (min_tokens.max(if axis == Axis::Log { 1 } else { 0 }), max_tokens.max(1));
    let mut out: Vec<u64> = vec![lo, hi];
    let steps = count.max(2) - 1;
    for i in 1..steps {
        let t = i as f64 / steps as f64;
        let v = match axis {
            Axis::Linear => lo as f64 + t * (hi - lo) as f64,
            Axis::Log => ((lo as f64).ln() + t * ((hi as f64).ln() - (lo as f64).ln())).exp(),
        };
        out.push(v.round() as u64);
    }
    out.extend(breakpoints.iter().copied().filter(|&b| (lo..=hi).contains(&b)));
    out.sort_unstable();
    out.dedup();
    out.retain(|&v| (lo..=hi).contains(&v));
    out
}

/// A short decimal byte label for an axis tick: `0`, `500 MB`, `1.5 GB`, `20 GB`, `1 TB`.
pub fn short_bytes_label(bytes: f64) -> String {
    const UNITS: [(f64, &str); 5] = [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")];
    if bytes <= 0.0 {
        return "0".into();
    }
    for (scale, unit) in UNITS {
        if bytes >= scale * 0.999_999 {
            return format!("{} {unit}", trim_number(bytes / scale));
        }
    }
    format!("{} B", trim_number(bytes))
}

/// A short token label for an axis tick: `0`, `512`, `32K` (= 32 × 1,024), `1M` (= 2^20), `610k`
/// (= 610,000) when the value is not a multiple of 1,024.
pub fn short_tokens_label(tokens: f64) -> String {
    let n = tokens.round().max(0.0) as u64;
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{}K", n >> 10)
    } else if n >= 1_000_000 {
        format!("{}m", trim_number(n as f64 / 1e6))
    } else if n >= 10_000 {
        format!("{}k", trim_number(n as f64 / 1e3))
    } else {
        n.to_string()
    }
}

/// At most 3 significant decimals, trailing zeros dropped: 1.5, 20, 0.125, 141.
fn trim_number(v: f64) -> String {
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(short_bytes_label(0.0), "0");
        assert_eq!(short_bytes_label(20e9), "20 GB");
        assert_eq!(short_bytes_label(1.5e9), "1.5 GB");
        assert_eq!(short_bytes_label(500e6), "500 MB");
        assert_eq!(short_bytes_label(1e12), "1 TB");
        assert_eq!(short_bytes_label(512.0), "512 B");
        assert_eq!(short_tokens_label(0.0), "0");
        assert_eq!(short_tokens_label(32768.0), "32K");
        assert_eq!(short_tokens_label(1_048_576.0), "1M");
        assert_eq!(short_tokens_label(610_000.0), "610k");
        assert_eq!(short_tokens_label(512.0), "512");
        assert_eq!(short_tokens_label(3_000_000.0), "3m");
    }

    #[test]
    fn axis_names_round_trip() {
        for a in Axis::ALL {
            assert_eq!(a.name().parse::<Axis>(), Ok(a));
        }
        assert!("LOG".parse::<Axis>().is_err());
    }

    #[test]
    fn fractions() {
        let s = Scale::new(Axis::Linear, 0.0, 200.0);
        assert_eq!(s.fraction(50.0), 0.25);
        assert_eq!(s.fraction(-5.0), 0.0);
        assert_eq!(s.fraction(500.0), 1.0);
        let l = Scale::new(Axis::Log, 10.0, 1000.0);
        assert!((l.fraction(100.0) - 0.5).abs() < 1e-12);
        assert_eq!(l.fraction(0.0), 0.0);
        // Degenerate ranges are widened, never NaN.
        let d = Scale::new(Axis::Linear, 0.0, 0.0);
        assert!(d.fraction(0.0).is_finite());
    }

    #[test]
    fn ticks_are_nice() {
        let s = Scale::new(Axis::Linear, 0.0, 17e9);
        assert_eq!(s.decimal_ticks(5), vec![0.0, 5e9, 10e9, 15e9]);
        let t = Scale::new(Axis::Linear, 0.0, 131_072.0);
        // 131072 / 4 = 32768 = 2^15
        assert_eq!(t.binary_ticks(4), vec![0.0, 32768.0, 65536.0, 98304.0, 131072.0]);
        let l = Scale::new(Axis::Log, 1.0, 1e12);
        let ticks = l.decimal_ticks(6);
        assert!(ticks.len() <= 7 && ticks[0] == 1.0, "{ticks:?}");
        let lb = Scale::new(Axis::Log, 1.0, 1_048_576.0);
        let ticks = lb.binary_ticks(6);
        assert!(ticks.iter().all(|t| t.log2().fract() == 0.0) && ticks.len() <= 7, "{ticks:?}");
    }

    #[test]
    fn samples_include_breakpoints() {
        let s = sample_tokens(Axis::Linear, 0, 100_000, 5, &[1024, 4096, 999_999]);
        assert_eq!(s, vec![0, 1024, 4096, 25_000, 50_000, 75_000, 100_000]);
        let l = sample_tokens(Axis::Log, 0, 1_000_000, 7, &[1024]);
        assert_eq!(l.first(), Some(&1));
        assert_eq!(l.last(), Some(&1_000_000));
        assert!(l.contains(&1024) && l.contains(&100) && l.contains(&10_000), "{l:?}");
        assert!(l.windows(2).all(|w| w[0] < w[1]));
    }
}
