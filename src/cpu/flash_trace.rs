//! Twin of the traced build of the tiled forward (`shaders/flash_attention.wgsl` and its subgroup form
//! with `shaders/include/flash_trace_step.wgsl` pasted in, `src/gpu/flash_trace.rs`): the online
//! softmax of every (query, head) row, one key step at a time, over the same tile plan
//! ([`crate::attention::tiles`]), recording after each step what the kernel records: the running max
//! m, the running sum l, the rescale exp(m_old − m_new) and the accumulator (O before ÷ l). f64.

use crate::attention::tiles::plan;
use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::scores::row_scores;

/// One key step of one row, as it stands after the step.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStep {
    /// The step's first key; it covers keys `key0..key0 + keys_per_step` (those past `n_kv` masked).
    pub key0: u32,
    /// The running max of the row's visible scores so far; −∞ while the row has seen none.
    pub m: f64,
    /// The running sum of exp(s − m).
    pub l: f64,
    /// exp(m_old − m_new), by which l and the accumulator were scaled first: 0 on the first step with
    /// a visible key, 1 when the max did not move.
    pub alpha: f64,
    /// Σ exp(s − m) · v over the keys seen so far: O before the division by l (`d` values).
    pub acc: Vec<f64>,
}

impl TraceStep {
    /// The output if the row stopped here: acc / l (zero while no key was visible).
    pub fn partial_output(&self) -> Vec<f64> {
        let inv_l = if self.l > 0.0 { 1.0 / self.l } else { 0.0 };
        self.acc.iter().map(|a| a * inv_l).collect()
    }
}

/// Every row's steps: the trace of one launch.
#[derive(Clone, Debug, PartialEq)]
pub struct FlashTrace {
    pub shape: AttentionShape,
    /// The tile the launch worked in: (query, head) rows per workgroup, keys per step.
    pub rows_per_tile: u32,
    pub keys_per_step: u32,
    /// Row `h * n_q + i` (query `i` of head `h`): the steps its workgroup walked, in order.
    pub rows: Vec<Vec<TraceStep>>,
}

impl FlashTrace {
    /// The steps of query `i` of head `h` (empty past the problem).
    pub fn row(&self, h: u32, i: u32) -> &[TraceStep] {
        let index = (h as usize) * (self.shape.n_q as usize) + i as usize;
        self.rows.get(index).map_or(&[], Vec::as_slice)
    }

    /// The largest difference between two traces of one problem relative to the values' size (each
    /// compared as |a − b| / max(1, |b|); −∞ equals −∞), or `None` when they walked different steps.
    pub fn max_difference(&self, other: &FlashTrace) -> Option<f64> {
        let same_steps = |a: &[TraceStep], b: &[TraceStep]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.key0 == y.key0 && x.acc.len() == y.acc.len())
        };
        if self.rows.len() != other.rows.len() || !self.rows.iter().zip(&other.rows).all(|(a, b)| same_steps(a, b)) {
            return None;
        }
        let diff = |a: f64, b: f64| if a == b { 0.0 } else { (a - b).abs() / b.abs().max(1.0) };
        let steps = self.rows.iter().flatten().zip(other.rows.iter().flatten());
        let worst = steps.flat_map(|(a, b)| {
            [diff(a.m, b.m), diff(a.l, b.l), diff(a.alpha, b.alpha)]
                .into_iter()
                .chain(a.acc.iter().zip(&b.acc).map(|(&x, &y)| diff(x, y)))
        });
        Some(worst.fold(0.0, f64::max))
    }
}

/// The trace the kernel writes for `p` when it works in tiles of `rows_per_tile` (query, head) rows
/// and steps of `keys_per_step` keys.
pub fn flash_trace(p: &AttentionProblem, rows_per_tile: u32, keys_per_step: u32) -> FlashTrace {
    let shape = p.shape;
    let g = shape.group_size();
    let tiles = plan(shape.n_q, shape.n_kv, g, p.mask, rows_per_tile, keys_per_step).tiles;
    let mut rows = vec![Vec::new(); (shape.h_q * shape.n_q) as usize];
    for kv_head in 0..shape.h_kv {
        for r in 0..shape.n_q * g {
            let (h, i) = (kv_head * g + r % g, r / g);
            let Some(tile) = tiles.get((r / rows_per_tile.max(1)) as usize) else { continue };
            let key_steps = tile.key_tiles.iter().map(|&(key0, end, _)| (key0, end));
            rows[(h * shape.n_q + i) as usize] = online_row(p, h, i, key_steps);
        }
    }
    FlashTrace { shape, rows_per_tile, keys_per_step, rows }
}

/// The online softmax of query `i` of head `h` over the key steps `(key0, key_end)`.
fn online_row(p: &AttentionProblem, h: u32, i: u32, key_steps: impl Iterator<Item = (u32, u32)>) -> Vec<TraceStep> {
    let d = p.shape.d as usize;
    let kv_h = p.shape.kv_head(h) as usize;
    let scores = row_scores(p, h, i);
    let (mut m, mut l, mut acc) = (f64::NEG_INFINITY, 0.0, vec![0.0; d]);
    key_steps
        .map(|(key0, key_end)| {
            let visible: Vec<(usize, f64)> =
                (key0 as usize..key_end as usize).filter_map(|j| scores[j].map(|s| (j, s))).collect();
            let m_new = visible.iter().map(|&(_, s)| s).fold(m, f64::max);
            // The kernel computes exp(NO_SCORE − NO_SCORE) = 1 while nothing is visible.
            let alpha = if m_new == f64::NEG_INFINITY { 1.0 } else { (m - m_new).exp() };
            l *= alpha;
            acc.iter_mut().for_each(|a| *a *= alpha);
            for &(j, s) in &visible {
                let w = (s - m_new).exp();
                l += w;
                let v_row = &p.v[(kv_h * p.shape.n_kv as usize + j) * d..][..d];
                acc.iter_mut().zip(v_row).for_each(|(a, &v)| *a += w * f64::from(v));
            }
            m = m_new;
            TraceStep { key0, m, l, alpha, acc: acc.clone() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::flash_attention::flash_attention;
    use crate::model::Mask;

    #[test]
    fn three_keys_by_hand() {
        // One head, d = 1, scale 1: q = [0, 0, 1], k = [1, 3, 2], v = [10, 20, 30]; 3 rows per tile and
        // 2 keys per step, causal. Row 2 scores 1, 3, 2: step 0 (keys 0-1) m = 3, l = e^-2 + 1,
        // acc = 10 e^-2 + 20; step 1 (key 2) m stays 3 (alpha 1), l += e^-1, acc += 30 e^-1.
        let shape = AttentionShape::square(1, 3, 1);
        let p =
            AttentionProblem::new(&[0.0, 0.0, 1.0], &[1.0, 3.0, 2.0], &[10.0, 20.0, 30.0], shape, Mask::Causal, 1.0);
        let trace = flash_trace(&p, 3, 2);
        let row = trace.row(0, 2);
        assert_eq!(row.iter().map(|s| s.key0).collect::<Vec<_>>(), vec![0, 2]);
        let e = std::f64::consts::E;
        assert_eq!((row[0].m, row[0].alpha), (3.0, 0.0));
        assert!((row[0].l - (e.powi(-2) + 1.0)).abs() < 1e-12);
        assert!((row[0].acc[0] - (10.0 * e.powi(-2) + 20.0)).abs() < 1e-12);
        assert_eq!((row[1].m, row[1].alpha), (3.0, 1.0));
        assert!((row[1].l - (e.powi(-2) + 1.0 + e.powi(-1))).abs() < 1e-12);
        // Row 0 sees key 0 only (score 0): its workgroup still walks keys 2.. where it sees nothing.
        let row0 = trace.row(0, 0);
        assert_eq!((row0[0].m, row0[0].l, row0[0].acc[0]), (0.0, 1.0, 10.0));
        assert_eq!((row0[1].m, row0[1].alpha, row0[1].l), (0.0, 1.0, 1.0));
    }

    #[test]
    fn every_row_ends_on_the_one_pass_softmax() {
        let (n, d) = (23u32, 5u32);
        let data =
            |seed: u32, len: u32| (0..len).map(|x| ((x * 37 + seed * 11) % 17) as f32 / 8.0 - 1.0).collect::<Vec<_>>();
        let (q, k, v) = (data(1, 4 * n * d), data(2, 2 * n * d), data(3, 2 * n * d));
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: n, n_kv: n, d };
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 4 }, Mask::Chunked { chunk_tokens: 6 }] {
            let p = AttentionProblem::new(&q, &k, &v, shape, mask, 0.7);
            let whole = flash_attention(&p);
            for (rows, keys) in [(8, 4), (64, 16), (3, 5)] {
                let trace = flash_trace(&p, rows, keys);
                for (row, steps) in trace.rows.iter().enumerate() {
                    let out = steps.last().expect("every row's tile walks a step").partial_output();
                    for (c, o) in out.iter().enumerate() {
                        let want = f64::from(whole.o[row * d as usize + c]);
                        assert!((o - want).abs() < 1e-5, "{mask:?} {rows}x{keys} row {row}: {o} vs {want}");
                    }
                    // The max only rises, and alpha is exp of its fall.
                    for w in steps.windows(2) {
                        assert!(w[1].m >= w[0].m);
                        if w[1].m > f64::NEG_INFINITY {
                            assert!((w[1].alpha - (w[0].m - w[1].m).exp()).abs() < 1e-12);
                        }
                    }
                }
                assert_eq!(trace.max_difference(&trace), Some(0.0));
            }
        }
    }
}
