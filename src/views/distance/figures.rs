//! What the view says of each head's masses by distance: the bars it draws, the figures its rows
//! carry (mean distance, the near share, the peak, what it gives keys ahead) and its sentence.

use super::compute::DistanceRun;
use crate::attention::teaching_heads::TeachingHead;

/// Distances drawn as bars of their own (0 to `BARS − 1` back); the rest is one "further" bar.
pub const BARS: usize = 16;

/// One head's masses summed up.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadDistance {
    pub head: u32,
    pub designed: Option<TeachingHead>,
    /// Mass 0, 1, … `BARS − 1` tokens back (as many as the text has), then everything further back.
    pub bars: Vec<f64>,
    pub further: f64,
    /// Mass on keys after the query (a full mask only).
    pub ahead: f64,
    /// Σ |δ| · mass: how many tokens apart a query and the key it reads are, on average.
    pub mean_distance: f64,
    /// Mass at most `near` tokens away, either side.
    pub near_share: f64,
    /// The distance with the most mass (on a tie the nearest, and of two as near the one behind),
    /// negative ahead.
    pub peak: i64,
    /// How many distances hold as much as the peak (within a thousandth of it): 1 for a clear peak,
    /// every distance the text has for a head that always reads token 0.
    pub level_with_peak: usize,
    /// All its mass: 1 when every query sees a key.
    pub total: f64,
}

/// Every head of `run`, near meaning at most `near` tokens away.
pub fn head_distances(run: &DistanceRun, near: u32) -> Vec<HeadDistance> {
    (0..run.heads.len()).map(|i| of_head(run, i, near)).collect()
}

fn of_head(run: &DistanceRun, i: usize, near: u32) -> HeadDistance {
    let n = run.n as i64;
    let masses: Vec<(i64, f64)> =
        run.head(i).iter().enumerate().map(|(slot, &m)| (slot as i64 - (n - 1), f64::from(m))).collect();
    let back = |delta: i64| masses.get((delta + n - 1) as usize).map_or(0.0, |&(_, m)| m);
    let bars: Vec<f64> = (0..(BARS as i64).min(n)).map(back).collect();
    let sum = |keep: &dyn Fn(i64) -> bool| masses.iter().filter(|(d, _)| keep(*d)).map(|(_, m)| m).sum::<f64>();
    let peak = masses.iter().fold((0i64, f64::NEG_INFINITY), |best, &(d, m)| {
        let nearer = d.abs() < best.0.abs() || (d.abs() == best.0.abs() && d > best.0);
        if m > best.1 || (m == best.1 && nearer) { (d, m) } else { best }
    });
    HeadDistance {
        head: run.heads[i],
        designed: run.designed.get(i).copied().flatten(),
        bars,
        further: sum(&|d| d >= BARS as i64),
        ahead: sum(&|d| d < 0),
        mean_distance: masses.iter().map(|&(d, m)| d.abs() as f64 * m).sum(),
        near_share: sum(&|d| d.abs() <= i64::from(near)),
        peak: peak.0,
        level_with_peak: masses.iter().filter(|&&(_, m)| m > 0.0 && m >= peak.1 * (1.0 - 1e-3)).count(),
        total: sum(&|_| true),
    }
}

/// `x` as a whole percentage ("93 %"), or "<1 %" for a small share that is not zero.
pub fn percent(x: f64) -> String {
    if x > 0.0 && x < 0.005 { "<1 %".into() } else { format!("{:.0} %", x * 100.0) }
}

fn tokens(x: i64) -> String {
    if x.abs() == 1 { "1 token".into() } else { format!("{} tokens", x.abs()) }
}

/// The head's sentence.
pub fn head_sentence(h: &HeadDistance, near: u32) -> String {
    let name = match h.designed {
        Some(t) => format!("Head {} (designed: {})", h.head, t.describe()),
        None => format!("Head {}", h.head),
    };
    let peak_mass = if h.peak >= 0 { h.bars.get(h.peak as usize).copied() } else { None };
    let peak = match (h.peak, peak_mass) {
        (_, Some(m)) if h.level_with_peak > 1 => {
            format!("{} at each of {} distances alike, its most", percent(m), h.level_with_peak)
        }
        (0, _) => format!("{} at the query itself, its most", percent(h.bars.first().copied().unwrap_or(0.0))),
        (d, Some(m)) if d > 0 => format!("{} {} back, its most", percent(m), tokens(d)),
        (d, _) if d > 0 => format!("most {} back", tokens(d)),
        (d, _) => format!("most {} ahead", tokens(d)),
    };
    let ahead = if h.ahead > 0.0 { format!("; {} on keys after the query", percent(h.ahead)) } else { String::new() };
    format!(
        "{name}: {peak}; {:.1} tokens apart on average; {} within {}{ahead}.",
        h.mean_distance,
        percent(h.near_share),
        tokens(i64::from(near)),
    )
}

/// One bar of a head's chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// What it covers, in words ("3 back", "further back", "after the query").
    pub label: String,
    /// Its CSS class: `back`, `further` or `ahead`.
    pub class: &'static str,
    pub mass: f64,
    /// Its label under the axis: every fifth distance, `+` for further, `→` for ahead, else empty.
    pub axis: String,
}

/// The head's bars: one per distance back, one for everything further, one for keys after the
/// query when it gives them anything.
pub fn bars(h: &HeadDistance) -> Vec<Bar> {
    let mut out: Vec<Bar> = h
        .bars
        .iter()
        .enumerate()
        .map(|(d, &mass)| Bar {
            label: format!("{d} back"),
            class: "back",
            mass,
            axis: if d % 5 == 0 { d.to_string() } else { String::new() },
        })
        .collect();
    out.push(Bar { label: "further back".into(), class: "further", mass: h.further, axis: "+".into() });
    if h.ahead > 0.0 {
        out.push(Bar { label: "after the query".into(), class: "ahead", mass: h.ahead, axis: "→".into() });
    }
    out
}

/// The line under the heads: what was computed, where, and what the masses are.
pub fn tier_line(run: &DistanceRun, adapter: &str) -> String {
    let place = if run.on_gpu {
        format!("the distance_mass kernel on {adapter}")
    } else {
        "its CPU twin (no WebGPU here, backend=cpu, or heads wider than the kernels take)".to_string()
    };
    format!(
        "{} heads over {} tokens, by {place}: each probability worked out from Q, K and its row's log-sum-exp \
         where it is summed, so no {} × {} matrix was made. A bar is the mean over the queries of the \
         probability given the key that many tokens back.",
        run.heads.len(),
        run.n,
        run.n,
        run.n
    )
}

/// Says the weights are the explorer's seeded ones.
pub const SYNTHETIC_NOTE: &str = "Synthetic weights: the explorer's seeded layer (its designed heads with teach on), \
     not a trained model's.";

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: u32, heads: Vec<Vec<f32>>) -> DistanceRun {
        DistanceRun {
            heads: (0..heads.len() as u32).collect(),
            designed: vec![Some(TeachingHead::PreviousToken), None],
            n,
            mass: heads.concat(),
            on_gpu: false,
        }
    }

    #[test]
    fn figures_by_hand() {
        // Three tokens, slots δ = −2..2. Head 0: 0.5 at δ 1, 0.3 at δ 0, 0.2 at δ 2. Head 1: a full
        // mask, 0.25 at δ −1, 0.75 at δ 0.
        let r = run(3, vec![vec![0.0, 0.0, 0.3, 0.5, 0.2], vec![0.0, 0.25, 0.75, 0.0, 0.0]]);
        let [a, b] = head_distances(&r, 1).try_into().unwrap();
        assert_eq!(a.bars, [0.3f32, 0.5, 0.2].map(f64::from));
        assert_eq!((a.peak, a.further, a.ahead, a.level_with_peak), (1, 0.0, 0.0, 1));
        assert!((a.mean_distance - (0.5 + 0.4)).abs() < 1e-7 && (a.near_share - 0.8).abs() < 1e-7);
        assert!((a.total - 1.0).abs() < 1e-7);
        assert_eq!(
            head_sentence(&a, 1),
            "Head 0 (designed: previous token: each query looks one step back): 50 % 1 token back, its most; \
             0.9 tokens apart on average; 80 % within 1 token."
        );
        assert_eq!((b.peak, b.ahead), (0, 0.25));
        let drawn = bars(&b);
        let axis: Vec<&str> = drawn.iter().map(|bar| bar.axis.as_str()).collect();
        assert_eq!(axis, ["0", "", "", "+", "→"]);
        assert_eq!((drawn[4].class, drawn[4].mass, drawn[3].label.as_str()), ("ahead", 0.25, "further back"));
        assert_eq!(bars(&a).len(), 4, "no ahead bar for a causal head");
        assert!((b.near_share - 1.0).abs() < 1e-7);
        assert_eq!(
            head_sentence(&b, 1),
            "Head 1: 75 % at the query itself, its most; 0.2 tokens apart on average; 100 % within 1 token; 25 % on keys after the query."
        );
    }

    #[test]
    fn distances_past_the_bars_are_one_further_bar_and_ties_go_to_the_nearest() {
        // 20 tokens, all mass 0.05 at each of δ 0..19 (a flat causal head).
        let mut head = vec![0.0f32; 39];
        head[19..].iter_mut().for_each(|m| *m = 0.05);
        let r = run(20, vec![head]);
        let h = &head_distances(&r, 4)[0];
        assert_eq!(h.bars.len(), BARS);
        assert!((h.further - 0.2).abs() < 1e-6 && (h.near_share - 0.25).abs() < 1e-6);
        assert_eq!(h.peak, 0);
        assert!((h.mean_distance - 9.5).abs() < 1e-5);
        // Each of the 20 distances holds 5 %: said as level, not as a peak at 0.
        assert_eq!(h.level_with_peak, 20);
        assert!(head_sentence(h, 4).starts_with("Head 0 (designed: previous token: each query looks one step back): 5 % at each of 20 distances alike, its most;"), "{}", head_sentence(h, 4));
        // A tie between 2 ahead and 2 behind goes to the key behind.
        let mut even = vec![0.0f32; 39];
        (even[17], even[21]) = (0.5, 0.5);
        assert_eq!(head_distances(&run(20, vec![even]), 4)[0].peak, 2);
        assert_eq!((percent(0.004), percent(0.0), percent(0.996)), ("<1 %".into(), "0 %".into(), "100 %".into()));
    }
}
