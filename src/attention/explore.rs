//! The heatmap explorer's link parameters and its work plan, platform-free.
//!
//! Parameters (beside the shared `model`, `layer`, `text`, `mask`, `window`, `chunk`, `seed`, `scale`,
//! and `n`, which asks for a generated sequence of n tokens instead of the text): `tok` (`word` | `char`), `src` (a second
//! text: cross-attention, queries from `text`, keys and values from `src`), `heads` (`all` or a list such
//! as `0-3,8`), `pool` (`max` | `mean`), `focus` (the enlarged head), `teach` (`on` | `off`: designed
//! teaching heads), `tiles` (`on`: the kernel's tile grid), `steps` (`on`: the step-through).

use super::pooled::Pool;
use super::tokens::TokenMode;

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

/// Heads at most this long (queries and keys) are drawn cell by cell with exact probabilities;
/// longer ones are pooled on the GPU to the size they take on screen.
pub const EXACT_MAX_N: u32 = 256;
/// Heads with at most this many cells carry every probability in `data-probs` (for tests and tools).
pub const PROBS_ATTR_MAX_CELLS: usize = 64 * 64;

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
        let mut out = Vec::new();
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let bad = || format!("\"{part}\" is not a head number or range like 0-3");
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.parse::<u32>().map_err(|_| bad())?, b.parse::<u32>().map_err(|_| bad())?),
                None => {
                    let x = part.parse::<u32>().map_err(|_| bad())?;
                    (x, x)
                }
            };
            if a > b || b >= 1 << 14 {
                return Err(bad());
            }
            out.extend(a..=b);
        }
        if out.is_empty() {
            return Err("no heads listed".into());
        }
        out.sort_unstable();
        out.dedup();
        Ok(HeadSelection::List(out))
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

pub fn pool_name(pool: Pool) -> &'static str {
    match pool {
        Pool::Max => "max",
        Pool::Mean => "mean",
    }
}

pub fn parse_pool(s: &str) -> Result<Pool, String> {
    match s {
        "max" => Ok(Pool::Max),
        "mean" => Ok(Pool::Mean),
        _ => Err(format!("unknown pooling \"{s}\" (expected max or mean)")),
    }
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("\"{s}\" is not on or off")),
    }
}

fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.into()
}

/// The explorer's part of the app state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExplorerParams {
    pub tok: TokenMode,
    /// Cross-attention source text (URL `src`): keys and values come from it.
    pub src: Option<String>,
    pub heads: HeadSelection,
    pub pool: Pool,
    pub focus: Option<u32>,
    pub teach: bool,
    pub tiles: bool,
    pub steps: bool,
}

impl Default for ExplorerParams {
    fn default() -> Self {
        Self {
            tok: TokenMode::Word,
            src: None,
            heads: HeadSelection::All,
            pool: Pool::Max,
            focus: None,
            teach: true,
            tiles: false,
            steps: false,
        }
    }
}

impl ExplorerParams {
    /// The URL keys this struct reads.
    pub const KEYS: [&'static str; 8] = ["tok", "src", "heads", "pool", "focus", "teach", "tiles", "steps"];

    /// Sets one parameter from the URL; an error leaves the field unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "tok" => self.tok = value.parse()?,
            "src" => self.src = Some(value.chars().take(crate::state::MAX_TEXT_CHARS).collect()),
            "heads" => self.heads = HeadSelection::parse(value)?,
            "pool" => self.pool = parse_pool(value)?,
            "focus" => {
                self.focus = Some(value.parse::<u32>().map_err(|_| format!("\"{value}\" is not a head number"))?)
            }
            "teach" => self.teach = parse_on_off(value)?,
            "tiles" => self.tiles = parse_on_off(value)?,
            "steps" => self.steps = parse_on_off(value)?,
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(())
    }

    /// The non-default parameters, in a fixed order.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let d = Self::default();
        let mut out = Vec::new();
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
            out.push(("pool", pool_name(self.pool).into()));
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
        out
    }
}

/// Splits query heads into GPU batches: heads of one KV group go together (they share its K/V), and a
/// batch stays under `max_work` (multiply-adds of `Q·Kᵀ`, about what the GPU does per batch) and
/// `max_q_floats` (the Q buffer), so long sequences show progress head by head.
pub fn batches(
    heads: &[u32],
    group: u32,
    per_head_work: u64,
    per_head_q_floats: u64,
    max_work: u64,
    max_q_floats: u64,
) -> Vec<Vec<u32>> {
    let g = group.max(1);
    let mut out: Vec<Vec<u32>> = Vec::new();
    for &h in heads {
        let fits = out.last().is_some_and(|b: &Vec<u32>| {
            let next = b.len() as u64 + 1;
            b[0] / g == h / g
                && next * per_head_work <= max_work.max(per_head_work)
                && next * per_head_q_floats <= max_q_floats.max(per_head_q_floats)
        });
        match out.last_mut() {
            Some(b) if fits => b.push(h),
            _ => out.push(vec![h]),
        }
    }
    out
}

/// Query rows in chunks of at most `n_kv`: the kernels take queries as the last rows of the keys, so
/// cross-attention with more queries than keys (full mask: rows are independent) runs in pieces.
pub fn query_chunks(n_q: u32, n_kv: u32) -> Vec<(u32, u32)> {
    let step = n_kv.max(1);
    (0..n_q.div_ceil(step)).map(|c| (c * step, (n_q - c * step).min(step))).collect()
}

/// Cells of a pooled heatmap along one axis of `n` tokens drawn `css_px` wide at `device_pixel_ratio`:
/// one cell per device pixel, never more cells than tokens.
pub fn pooled_resolution(n: u32, css_px: f64, device_pixel_ratio: f64) -> u32 {
    let px = (css_px * device_pixel_ratio.clamp(1.0, 4.0)).round().max(1.0) as u32;
    px.min(n).max(1)
}

/// Largest head an export writes with every probability (64 MiB of f32).
pub const EXACT_EXPORT_MAX_CELLS: u64 = 1 << 24;

/// Why the export of a pooled head (`n` = (n_q, n_kv), shown as `cells` = (rows, cols)) holds its
/// pooled blocks instead of every probability; `None` when every probability can be recomputed for
/// it (it fits [`EXACT_EXPORT_MAX_CELLS`] and the GPU takes its head width).
pub fn pooled_export_notice(head: u32, n: (u32, u32), cells: (u32, u32), gpu: bool) -> Option<String> {
    let all = u64::from(n.0) * u64::from(n.1);
    let reason = if all > EXACT_EXPORT_MAX_CELLS {
        format!("its {} x {} = {all} probabilities are more than an export holds ({EXACT_EXPORT_MAX_CELLS})", n.0, n.1)
    } else if !gpu {
        "without the GPU only the pooled blocks are computed".to_owned()
    } else {
        return None;
    };
    Some(format!("Head {head}: {reason}, so the file holds its {} x {} pooled blocks.", cells.0, cells.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_exports_hold_every_probability_up_to_64_mib() {
        // 4096 x 4096 = 2^24 cells: exactly at the limit.
        assert_eq!(pooled_export_notice(3, (4096, 4096), (160, 160), true), None);
        assert_eq!(
            pooled_export_notice(3, (4097, 4096), (160, 160), true).as_deref(),
            Some(
                "Head 3: its 4097 x 4096 = 16781312 probabilities are more than an export holds (16777216), so the file holds its 160 x 160 pooled blocks."
            )
        );
        assert!(pooled_export_notice(0, (512, 512), (160, 160), false).is_some_and(|n| n.contains("without the GPU")));
    }

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
    fn params_round_trip() {
        let p = ExplorerParams {
            tok: TokenMode::Char,
            src: Some("le chat".into()),
            heads: HeadSelection::List(vec![1, 2, 5]),
            pool: Pool::Mean,
            focus: Some(5),
            teach: false,
            tiles: true,
            steps: true,
        };
        let mut q = ExplorerParams::default();
        for (k, v) in p.pairs() {
            q.set(k, &v).unwrap();
        }
        assert_eq!(q, p);
        assert!(ExplorerParams::default().pairs().is_empty());
        let mut d = ExplorerParams::default();
        assert!(d.set("focus", "x").is_err() && d.set("tiles", "maybe").is_err() && d.set("pool", "sum").is_err());
        assert_eq!(d, ExplorerParams::default());
    }

    #[test]
    fn batches_follow_groups_and_budgets() {
        let heads: Vec<u32> = (0..8).collect();
        // Group of 4, room for everything: one batch per KV group.
        assert_eq!(batches(&heads, 4, 10, 10, 1000, 1000), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        // Work for two heads per batch.
        assert_eq!(batches(&heads, 4, 10, 10, 20, 1000), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        // A head bigger than the budget still runs, alone.
        assert_eq!(batches(&[0, 1], 2, 50, 10, 20, 1000), vec![vec![0], vec![1]]);
        // Non-contiguous selections across groups.
        assert_eq!(batches(&[1, 3, 6], 4, 1, 1, 100, 100), vec![vec![1, 3], vec![6]]);
    }

    #[test]
    fn chunks_and_resolution() {
        assert_eq!(query_chunks(5, 2), vec![(0, 2), (2, 2), (4, 1)]);
        assert_eq!(query_chunks(3, 7), vec![(0, 3)]);
        assert_eq!(pooled_resolution(8192, 160.0, 2.0), 320);
        assert_eq!(pooled_resolution(100, 160.0, 1.0), 100);
        assert_eq!(pooled_resolution(8192, 160.0, 0.5), 160);
    }
}

/// Whether the block of query rows `i_a..i_b` and keys `j_a..j_b` holds any pair the mask lets through
/// (queries sit at `q_offset + i`). Every mask's visible range `[lo, hi)` grows with the position, so
/// the first row whose range reaches past `j_a` has the lowest `lo` of the rows that do.
pub fn block_visible(
    mask: super::mask::Mask,
    q_offset: u32,
    n_kv: u32,
    (i_a, i_b): (u32, u32),
    (j_a, j_b): (u32, u32),
) -> bool {
    if i_a >= i_b || j_a >= j_b {
        return false;
    }
    let hi = |i: u32| mask.key_range(q_offset + i, n_kv).1;
    // Smallest i in [i_a, i_b) with hi(i) > j_a (binary search on a non-decreasing function).
    let (mut a, mut b) = (i_a, i_b);
    while a < b {
        let mid = a + (b - a) / 2;
        if hi(mid) > j_a { b = mid } else { a = mid + 1 }
    }
    a < i_b && mask.key_range(q_offset + a, n_kv).0 < j_b
}

#[cfg(test)]
mod block_tests {
    use super::*;
    use crate::attention::mask::Mask;

    #[test]
    fn block_visibility_matches_brute_force() {
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window: 3 }, Mask::Chunked { chunk: 4 }] {
            for (n_q, n_kv) in [(12u32, 12u32), (5, 12)] {
                let off = n_kv - n_q;
                for i_a in 0..n_q {
                    for i_b in i_a + 1..=n_q {
                        for j_a in 0..n_kv {
                            for j_b in j_a + 1..=n_kv {
                                let brute = (i_a..i_b).any(|i| (j_a..j_b).any(|j| mask.visible(off + i, j)));
                                assert_eq!(
                                    block_visible(mask, off, n_kv, (i_a, i_b), (j_a, j_b)),
                                    brute,
                                    "{mask:?} {i_a}..{i_b} x {j_a}..{j_b}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
