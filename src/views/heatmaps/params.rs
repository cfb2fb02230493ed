//! The heatmap explorer's own link parameters (beside the shared model choice and attention input:
//! `model`, `layer`, `text`, `mask`, `window`, `chunk`, `seed` and `n`, which asks for a generated
//! sequence of n tokens instead of the text): `scale` (`linear` | `log` colours), `tok` (`word` |
//! `char`), `src` (a second text: cross-attention, queries from `text`, keys and values from `src`),
//! `heads` (`all` or a list such as `0-3,8`), `pool` (`max` | `mean`), `focus` (the enlarged head),
//! `teach` (`on` | `off`: designed teaching heads), `tiles` (`on`: the kernel's tile grid), `steps`
//! (`on`: the step-through), `mix` (`last` or a query token from 0: the panel of what each head adds
//! to that token's output through W_O), `rope` (`on`: the layer's RoPE wavelengths,
//! [`super::rope`]), `trow` and `tstep` (the FlashAttention trace's played query row and key step,
//! both from 0, [`super::flash_trace`]).

use crate::attention::pooled::Pool;
use crate::attention::tokens::TokenMode;
use crate::colormap::ColorScale;
use crate::gpu::flash_trace::TRACE_MAX_TOKENS;
use crate::model::kv_quant::{Fp8, KvScheme, ScaleScope};
use crate::views::link::{Accepted, LinkParams, Notice, echo, on_off, parse_bounded, parse_on_off};

/// Longest text (in characters) the heatmap view accepts; longer text is cut with a notice.
pub const MAX_TEXT_CHARS: usize = 2000;

/// Longest generated sequence the explorer computes (longer `n` is cut, with a notice).
pub const MAX_GENERATED: u32 = 65_536;
/// The notice for an `n` above [`MAX_GENERATED`] (the link may ask for up to `state::MAX_SEQ_TOKENS`,
/// which other views accept): the explorer shows the first `MAX_GENERATED` tokens and says so.
pub fn generated_cap_notice(n: u32) -> Option<String> {
    (n > MAX_GENERATED).then(|| {
        format!(
            "n = {} is more than the explorer generates; it shows the first {} tokens.",
            thousands(n),
            thousands(MAX_GENERATED)
        )
    })
}

fn thousands(n: u32) -> String {
    crate::model::units::format_thousands(n.into())
}

/// Head numbers a list may name are below this (the model limit on query heads).
const MAX_HEADS: u32 = crate::model::config::bounds::MAX_HEADS;

/// Which query heads are shown.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum HeadSelection {
    #[default]
    All,
    /// Sorted, distinct query head indices.
    List(Vec<u32>),
}

impl HeadSelection {
    /// Parses `all` or `0-3,8,12-15`.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(HeadSelection::All);
        }
        let mut ranges = Vec::new();
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let bad = || format!("\"{part}\" is not a head number or range like 0-3");
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.parse::<u32>().map_err(|_| bad())?, b.parse::<u32>().map_err(|_| bad())?),
                None => {
                    let x = part.parse::<u32>().map_err(|_| bad())?;
                    (x, x)
                }
            };
            if a > b || b >= MAX_HEADS {
                return Err(bad());
            }
            ranges.push((a, b));
        }
        if ranges.is_empty() {
            return Err("no heads listed".into());
        }
        // Merged before they are expanded: a link repeating `0-16383` a thousand times lists each
        // head once, in one pass, instead of materialising every repeat first.
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match merged.last_mut() {
                Some((_, end)) if a <= end.saturating_add(1) => *end = (*end).max(b),
                _ => merged.push((a, b)),
            }
        }
        Ok(HeadSelection::List(merged.into_iter().flat_map(|(a, b)| a..=b).collect()))
    }

    /// `all`, or ranges joined by commas.
    pub fn to_param(&self) -> String {
        match self {
            HeadSelection::All => "all".into(),
            HeadSelection::List(list) => {
                let mut parts = Vec::new();
                let mut i = 0;
                while i < list.len() {
                    let mut j = i;
                    while j + 1 < list.len() && list[j + 1] == list[j] + 1 {
                        j += 1;
                    }
                    parts.push(if i == j { list[i].to_string() } else { format!("{}-{}", list[i], list[j]) });
                    i = j + 1;
                }
                parts.join(",")
            }
        }
    }

    /// The selected heads of a layer with `n_heads` query heads (out-of-range entries dropped).
    pub fn heads(&self, n_heads: u32) -> Vec<u32> {
        match self {
            HeadSelection::All => (0..n_heads).collect(),
            HeadSelection::List(list) => list.iter().copied().filter(|&h| h < n_heads).collect(),
        }
    }

    /// The largest head index listed, if any.
    pub fn max_head(&self) -> Option<u32> {
        match self {
            HeadSelection::All => None,
            HeadSelection::List(list) => list.last().copied(),
        }
    }
}

/// The query token the head-mixing panel reads (URL `mix`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixRow {
    /// The last token of the text, whatever its length.
    Last,
    /// Token `n`, from 0 (the last one when the text is shorter).
    Token(u32),
}

impl MixRow {
    /// The token asked for; `None` is the last.
    pub fn token(self) -> Option<u32> {
        match self {
            MixRow::Last => None,
            MixRow::Token(t) => Some(t),
        }
    }

    pub fn to_param(self) -> String {
        self.token().map_or_else(|| "last".into(), |t| t.to_string())
    }
}

impl std::str::FromStr for MixRow {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "last" => Ok(MixRow::Last),
            _ => s.parse().map(MixRow::Token).map_err(|_| format!("\"{s}\" is not a token number or last")),
        }
    }
}

/// The heatmap explorer in the view registry: the keys it owns are [`ExplorerParams`]'s.
pub struct Heatmaps;

impl crate::views::view_class::ViewClass for Heatmaps {
    const ID: &'static str = "heatmaps";
    const TITLE: &'static str = "Heatmaps";
    type Params = ExplorerParams;

    /// The trained model's heads, or seeded weights over a layout.
    fn numbers_source(step: &crate::views::view_class::StepShows) -> crate::views::view_class::NumbersSource {
        crate::views::view_class::NumbersSource::trained_or_seeded(step)
    }
}

/// The explorer's part of the app state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExplorerParams {
    /// Heatmap colour scale (URL `scale=linear|log`).
    pub scale: ColorScale,
    pub tok: TokenMode,
    /// Cross-attention source text (URL `src`): keys and values come from it.
    pub src: Option<String>,
    pub heads: HeadSelection,
    pub pool: Pool,
    pub focus: Option<u32>,
    pub teach: bool,
    pub tiles: bool,
    pub steps: bool,
    /// The query token whose output the head-mixing panel breaks down (shown when set).
    pub mix: Option<MixRow>,
    /// The RoPE panel (URL `rope=on`).
    pub rope: bool,
    /// URL `gencache`: an index into [`GENERATE_SCHEMES`], how Generate's KV cache stores each token.
    pub gencache: usize,
    /// URL `trow`: the query row the FlashAttention trace plays, from 0 (`None`: its last row).
    pub trace_row: Option<u32>,
    /// URL `tstep`: how many of that row's key steps after the first are played (0: the first only).
    pub trace_step: u32,
}

/// The largest `trow` and `tstep` a link may name: a trace covers at most [`TRACE_MAX_TOKENS`] query
/// rows, and a row has at most one key step per key (the player cuts both to the trace it has).
pub const MAX_TRACE_INDEX: u32 = TRACE_MAX_TOKENS - 1;

/// The caches Generate may decode with: the schemes that round each token alone (once, as it joins
/// the cache), int4 and int2 in llama.cpp's groups of 32, fp8 with one scale per tensor (E4M3 and
/// E5M2), set from the prompt's K and V as the cache is prefilled, as a runtime calibrates it (later
/// values past it saturate), and KIVI at 4 and 2 bits (G = 32, R = 16: each token quantised once, as
/// it leaves the recent window). The link names a scheme (`gencache=fp8-e4m3`), not its place.
pub const GENERATE_SCHEMES: [KvScheme; 9] = [
    KvScheme::Fp32,
    KvScheme::Fp16,
    KvScheme::Int8,
    KvScheme::IntGroup { bits: 4, group: 32 },
    KvScheme::IntGroup { bits: 2, group: 32 },
    KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor },
    KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Tensor },
    KvScheme::Kivi { bits: 4, group: 32, recent: 16 },
    KvScheme::Kivi { bits: 2, group: 32, recent: 16 },
];

impl ExplorerParams {
    /// The scheme Generate's cache stores.
    pub fn generate_scheme(&self) -> KvScheme {
        GENERATE_SCHEMES[self.gencache.min(GENERATE_SCHEMES.len() - 1)]
    }
}

impl Default for ExplorerParams {
    fn default() -> Self {
        Self {
            scale: ColorScale::Linear,
            tok: TokenMode::Word,
            src: None,
            heads: HeadSelection::All,
            pool: Pool::Max,
            focus: None,
            teach: true,
            tiles: false,
            steps: false,
            mix: None,
            rope: false,
            gencache: 0,
            trace_row: None,
            trace_step: 0,
        }
    }
}

impl ExplorerParams {
    /// Heads and focus past the model's query heads fall back to all heads and no focus, with notices.
    pub fn check_heads(&mut self, n_q_heads: u32) -> Vec<Notice> {
        let last = n_q_heads.saturating_sub(1);
        let mut notices = Vec::new();
        if self.heads.max_head().is_some_and(|h| h >= n_q_heads) {
            notices.push(Notice(format!("Ignored heads: the model has query heads 0 to {last}; showing all.")));
            self.heads = HeadSelection::All;
        }
        if self.focus.is_some_and(|h| h >= n_q_heads) {
            notices.push(Notice(format!("Ignored focus: the model has query heads 0 to {last}.")));
            self.focus = None;
        }
        notices
    }
}

impl LinkParams for ExplorerParams {
    const KEYS: &'static [&'static str] = &[
        "scale", "tok", "src", "heads", "pool", "focus", "teach", "tiles", "steps", "mix", "rope", "gencache", "trow",
        "tstep",
    ];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "scale" => self.scale = value.parse()?,
            "tok" => self.tok = value.parse()?,
            "src" => {
                self.src = Some(value.chars().take(MAX_TEXT_CHARS).collect());
                let chars = value.chars().count();
                if chars > MAX_TEXT_CHARS {
                    return Ok(Accepted::Adjusted(Notice(format!(
                        "The source text had {chars} characters; only the first {MAX_TEXT_CHARS} are used."
                    ))));
                }
            }
            "heads" => self.heads = HeadSelection::parse(value)?,
            "pool" => self.pool = value.parse()?,
            "focus" => {
                self.focus = Some(value.parse::<u32>().map_err(|_| format!("\"{value}\" is not a head number"))?)
            }
            "teach" => self.teach = parse_on_off(value)?,
            "tiles" => self.tiles = parse_on_off(value)?,
            "steps" => self.steps = parse_on_off(value)?,
            "mix" => self.mix = Some(value.parse()?),
            "rope" => self.rope = parse_on_off(value)?,
            "gencache" => {
                let names: Vec<String> = GENERATE_SCHEMES.iter().map(|s| s.name()).collect();
                self.gencache = names.iter().position(|n| n == value).ok_or_else(|| {
                    format!("\"{}\" is not a cache Generate decodes with ({})", echo(value), names.join(", "))
                })?;
            }
            "trow" => self.trace_row = Some(parse_bounded(value, 0, MAX_TRACE_INDEX)?),
            "tstep" => self.trace_step = parse_bounded(value, 0, MAX_TRACE_INDEX)?,
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let d = Self::default();
        let mut out = Vec::new();
        if self.scale != d.scale {
            out.push(("scale", self.scale.name().into()));
        }
        if self.tok != d.tok {
            out.push(("tok", self.tok.name().into()));
        }
        if let Some(src) = &self.src {
            out.push(("src", src.clone()));
        }
        if self.heads != d.heads {
            out.push(("heads", self.heads.to_param()));
        }
        if self.pool != d.pool {
            out.push(("pool", self.pool.name().into()));
        }
        if let Some(f) = self.focus {
            out.push(("focus", f.to_string()));
        }
        if self.teach != d.teach {
            out.push(("teach", on_off(self.teach)));
        }
        if self.tiles != d.tiles {
            out.push(("tiles", on_off(self.tiles)));
        }
        if self.steps != d.steps {
            out.push(("steps", on_off(self.steps)));
        }
        if let Some(row) = self.mix {
            out.push(("mix", row.to_param()));
        }
        if self.rope != d.rope {
            out.push(("rope", on_off(self.rope)));
        }
        if self.gencache != d.gencache {
            out.push(("gencache", self.generate_scheme().name()));
        }
        if let Some(row) = self.trace_row {
            out.push(("trow", row.to_string()));
        }
        if self.trace_step != d.trace_step {
            out.push(("tstep", self.trace_step.to_string()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_longer_than_the_explorer_generates_get_a_notice() {
        assert_eq!(generated_cap_notice(65_536), None);
        assert_eq!(
            generated_cap_notice(100_000).as_deref(),
            Some("n = 100,000 is more than the explorer generates; it shows the first 65,536 tokens.")
        );
    }

    #[test]
    fn head_selection_round_trips() {
        let s = HeadSelection::parse("8,0-3,2,12-13").unwrap();
        assert_eq!(s, HeadSelection::List(vec![0, 1, 2, 3, 8, 12, 13]));
        assert_eq!(s.to_param(), "0-3,8,12-13");
        assert_eq!(HeadSelection::parse(&s.to_param()).unwrap(), s);
        assert_eq!(s.heads(10), vec![0, 1, 2, 3, 8]);
        assert_eq!(HeadSelection::All.heads(3), vec![0, 1, 2]);
        for bad in ["", "x", "3-1", "1-", "99999"] {
            assert!(HeadSelection::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn repeated_and_overlapping_ranges_are_merged_before_expansion() {
        // 5,000 copies of the widest range: one list of 16,384 heads, not 82 million entries.
        let text = vec!["0-16383"; 5000].join(",");
        assert_eq!(HeadSelection::parse(&text).unwrap().heads(u32::MAX).len(), 1 << 14);
        let s = HeadSelection::parse("7,2-4,3-5,6,9-9,0").unwrap();
        assert_eq!(s, HeadSelection::List(vec![0, 2, 3, 4, 5, 6, 7, 9]));
        assert_eq!(s.to_param(), "0,2-7,9");
        assert!(HeadSelection::parse("0-16384").is_err() && HeadSelection::parse("0-4294967295").is_err());
    }

    #[test]
    fn params_round_trip() {
        let p = ExplorerParams {
            scale: ColorScale::Log,
            tok: TokenMode::Char,
            src: Some("le chat".into()),
            heads: HeadSelection::List(vec![1, 2, 5]),
            pool: Pool::Mean,
            focus: Some(5),
            teach: false,
            tiles: true,
            steps: true,
            mix: Some(MixRow::Token(3)),
            rope: true,
            gencache: 3,
            trace_row: Some(9),
            trace_step: 2,
        };
        assert_eq!(crate::views::link::round_trip(&p), p);
        assert!(p.pairs().contains(&("gencache", "int4-g32".to_string())));
        assert_eq!(p.generate_scheme(), KvScheme::IntGroup { bits: 4, group: 32 });
        // The link names each scheme Generate offers, in this order (new ones at the end); a hostile
        // value is refused, bounded.
        let names: Vec<String> = GENERATE_SCHEMES.iter().map(|s| s.name()).collect();
        let want = ["fp32", "fp16", "int8", "int4-g32", "int2-g32", "fp8-e4m3", "fp8-e5m2", "kivi-int4", "kivi-int2"];
        assert_eq!(names, want);
        let mut fp8 = ExplorerParams::default();
        fp8.set("gencache", "fp8-e4m3").unwrap();
        assert_eq!(fp8.generate_scheme(), KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor });
        assert!(fp8.pairs().contains(&("gencache", "fp8-e4m3".to_string())));
        let mut g = ExplorerParams::default();
        assert!(
            g.set("gencache", "fp8-e4m3-head").is_err()
                && g.set("gencache", &"x".repeat(100_000)).err().is_some_and(|e| e.len() < 200)
        );
        g.set("gencache", "kivi-int2").unwrap();
        assert_eq!(g.generate_scheme(), KvScheme::Kivi { bits: 2, group: 32, recent: 16 });
        assert!(g.set("gencache", "fp16").is_ok() && g.generate_scheme() == KvScheme::Fp16);
        assert!(p.pairs().contains(&("rope", "on".to_string())));
        assert!(ExplorerParams::default().pairs().is_empty());
        let mut d = ExplorerParams::default();
        assert!(
            d.set("focus", "x").is_err()
                && d.set("tiles", "maybe").is_err()
                && d.set("pool", "sum").is_err()
                && d.set("mix", "-1").is_err()
                && d.set("mix", "first").is_err()
        );
        assert!(d.set("rope", "yes").is_err());
        assert_eq!(d, ExplorerParams::default());
    }

    #[test]
    fn the_trace_row_and_step_are_bounded_by_the_trace() {
        let mut p = ExplorerParams::default();
        assert!(p.set("trow", "63").is_ok() && p.set("tstep", "63").is_ok());
        assert_eq!((p.trace_row, p.trace_step), (Some(63), 63));
        assert_eq!(p.pairs(), [("trow", "63".to_string()), ("tstep", "63".to_string())]);
        let mut d = ExplorerParams::default();
        for key in ["trow", "tstep"] {
            for bad in ["64", "-1", "x", "", "99999999999999999999999"] {
                assert!(d.set(key, bad).is_err(), "{key}={bad}");
            }
            let why = d.set(key, &"9".repeat(100_000)).err().unwrap_or_default();
            assert!(why.starts_with("\"99999") && why.len() < 100, "{why}");
        }
        assert_eq!(d, ExplorerParams::default());
        // Step 0 is the default: a link that names it writes nothing.
        assert!(d.set("tstep", "0").is_ok() && d.pairs().is_empty());
    }

    #[test]
    fn heads_past_the_model_fall_back_with_notices() {
        let mut p = ExplorerParams { heads: HeadSelection::List(vec![0, 9]), focus: Some(8), ..Default::default() };
        let notices = p.check_heads(8);
        assert_eq!(
            notices,
            vec![
                Notice("Ignored heads: the model has query heads 0 to 7; showing all.".into()),
                Notice("Ignored focus: the model has query heads 0 to 7.".into())
            ]
        );
        assert_eq!(p, ExplorerParams::default());
        let mut fine = ExplorerParams { heads: HeadSelection::List(vec![1, 2]), focus: Some(7), ..Default::default() };
        assert!(fine.check_heads(8).is_empty());
    }
}
