//! Lesson 11's online softmax played back from the kernel's own trace (`Engine::flash_trace`): the
//! focused head's first tokens through the traced build of the tiled forward, one query row's key
//! steps in the order the kernel walked them, where the tile cursor stands on Q, Kᵀ and O at each
//! step, and the check that the last step's acc / l is the one-pass softmax's output.

use crate::attention::layer_inputs::LayerInputs;
use crate::cpu::flash_trace::FlashTrace;
use crate::cpu::reference::Forward;
use crate::gpu::flash_trace::TRACE_MAX_TOKENS;
use crate::model::Mask;
use crate::views::heatmaps::step_through::Example;

/// The traced example: query head `head`'s first [`TRACE_MAX_TOKENS`] queries and keys.
pub fn trace_example(inputs: &LayerInputs, head: u32, mask: Mask) -> Example {
    Example::first(inputs, head, mask, TRACE_MAX_TOKENS as usize)
}

/// One key step of the played row, as the trace recorded it after the step.
#[derive(Clone, Debug, PartialEq)]
pub struct PlayStep {
    /// The step's keys `key0..key_end` (`key_end` cut at the last key).
    pub key0: u32,
    pub key_end: u32,
    /// Keys of the step the row sees (the others are masked for it).
    pub visible_keys: u32,
    pub m: f64,
    pub l: f64,
    pub alpha: f64,
    /// The first column of acc / l: the output so far.
    pub o0: f64,
}

/// The steps of query `row` (of the trace's one head), in order.
pub fn playback(trace: &FlashTrace, mask: Mask, row: u32) -> Vec<PlayStep> {
    let n_kv = trace.shape.n_kv;
    let q_pos = trace.shape.q_offset() + row;
    trace
        .row(0, row)
        .iter()
        .map(|s| {
            let key_end = (s.key0 + trace.keys_per_step).min(n_kv);
            let visible_keys = (s.key0..key_end).filter(|&j| mask.visible(q_pos, j)).count() as u32;
            let o0 = s.partial_output().first().copied().unwrap_or(0.0);
            PlayStep { key0: s.key0, key_end, visible_keys, m: s.m, l: s.l, alpha: s.alpha, o0 }
        })
        .collect()
}

/// The query row played for a link's `trow` (`None`: the last) in a trace of `n_q` rows: a row past the
/// trace (a link made on a longer text) plays its last.
pub fn played_row(asked: Option<u32>, n_q: u32) -> u32 {
    let last = n_q.saturating_sub(1);
    asked.map_or(last, |r| r.min(last))
}

/// The step shown for a link's `tstep` when the row has `steps` key steps: past the last, the last.
pub fn played_step(asked: u32, steps: usize) -> usize {
    (asked as usize).min(steps.saturating_sub(1))
}

/// Where the tile cursor stands at step `step` of query `row`: one CSS class list per query row of
/// Q (and of O, which is written only after the last step) and per key of Kᵀ.
#[derive(Clone, Debug, PartialEq)]
pub struct Cursor {
    pub q: Vec<&'static str>,
    pub k: Vec<&'static str>,
    pub o: Vec<&'static str>,
}

pub fn cursor(trace: &FlashTrace, mask: Mask, row: u32, step: usize) -> Cursor {
    let (n_q, n_kv) = (trace.shape.n_q, trace.shape.n_kv);
    let steps = playback(trace, mask, row);
    let tile = row / trace.rows_per_tile.max(1);
    let q: Vec<&'static str> = (0..n_q)
        .map(|i| match (i == row, i / trace.rows_per_tile.max(1) == tile) {
            (true, _) => "cell current",
            (false, true) => "cell tile",
            _ => "cell",
        })
        .collect();
    let last = step + 1 >= steps.len();
    let o = q.iter().map(|&c| if c == "cell current" && last { "cell current written" } else { c }).collect();
    let q_pos = trace.shape.q_offset() + row;
    let k = (0..n_kv)
        .map(|j| {
            let walked = steps.iter().position(|s| (s.key0..s.key_end).contains(&j));
            let masked = !mask.visible(q_pos, j);
            match (walked, masked) {
                (None, _) => "cell skipped",
                (Some(s), false) if s == step => "cell current",
                (Some(s), true) if s == step => "cell current masked",
                (Some(s), false) if s < step => "cell done",
                (Some(s), true) if s < step => "cell done masked",
                (Some(_), false) => "cell ahead",
                (Some(_), true) => "cell ahead masked",
            }
        })
        .collect();
    Cursor { q, k, o }
}

/// The largest difference between the last step's acc / l of query `row` and the one-pass
/// softmax's output row (`one_pass`, `[n_q, d]` of the one head), over every column.
pub fn one_pass_difference(trace: &FlashTrace, one_pass: &Forward, row: u32) -> Option<f64> {
    let d = trace.shape.d as usize;
    let out = trace.row(0, row).last()?.partial_output();
    let want = one_pass.o.get(row as usize * d..)?.get(..d)?;
    Some(out.iter().zip(want).map(|(a, &b)| (a - f64::from(b)).abs()).fold(0.0, f64::max))
}

/// What wrote the trace: the kernel's traced build in `form` on `adapter`, or the CPU twin.
pub fn source_label(form: Option<&str>, adapter: &str) -> String {
    match form {
        Some(form) => format!("Recorded by the tiled kernel itself (its {form} form, traced) on {adapter}."),
        None => format!(
            "No WebGPU kernel ran ({adapter}): this is the CPU twin's trace, the kernel's recurrence replayed in \
             f64 with the tiles a WebGPU GPU uses, not a recording from a GPU."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{AttentionProblem, AttentionShape};
    use crate::cpu::flash_trace::flash_trace;
    use crate::cpu::reference;

    /// 5 causal tokens, d = 1, scale 1: q = 1 everywhere, k = [0, 1, 2, 0, 1], v = [1, 2, 3, 4, 5]; tiles
    /// of 4 rows and 2 keys.
    fn example() -> (FlashTrace, Forward) {
        let q = [1.0; 5];
        let (k, v) = ([0.0, 1.0, 2.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0, 5.0]);
        let p = AttentionProblem::new(&q, &k, &v, AttentionShape::square(1, 5, 1), Mask::Causal, 1.0);
        (flash_trace(&p, 4, 2), reference::flash_attention(&p))
    }

    #[test]
    fn row_three_by_hand() {
        // Row 3 (tile 0, keys 0..4) sees keys 0-3, scores 0, 1, 2, 0.
        // Step 0 (keys 0-1): m = 1, l = e^-1 + 1, o0 = (e^-1 + 2) / l.
        // Step 1 (keys 2-3): m = 2, alpha = e^-1, l = (e^-1 + 1) e^-1 + 1 + e^-2.
        let (trace, one_pass) = example();
        let steps = playback(&trace, Mask::Causal, 3);
        let e = std::f64::consts::E;
        assert_eq!(
            steps.iter().map(|s| (s.key0, s.key_end, s.visible_keys)).collect::<Vec<_>>(),
            [(0, 2, 2), (2, 4, 2)]
        );
        assert_eq!((steps[0].m, steps[0].alpha), (1.0, 0.0));
        assert!((steps[0].o0 - (1.0 / e + 2.0) / (1.0 / e + 1.0)).abs() < 1e-12);
        assert!((steps[1].alpha - 1.0 / e).abs() < 1e-12);
        let l = (1.0 / e + 1.0) / e + 1.0 + e.powi(-2);
        assert!((steps[1].l - l).abs() < 1e-12);
        let o = (e.powi(-2) + 2.0 / e + 3.0 + 4.0 * e.powi(-2)) / l;
        assert!((steps[1].o0 - o).abs() < 1e-12);
        assert!(one_pass_difference(&trace, &one_pass, 3).unwrap() < 1e-6);
    }

    #[test]
    fn the_cursor_marks_the_row_its_tile_the_step_and_what_the_kernel_skipped() {
        let (trace, _) = example();
        // Row 1 in tile 0 (rows 0-3): the tile walks keys 0-3; row 1 sees keys 0-1.
        let c = cursor(&trace, Mask::Causal, 1, 1);
        assert_eq!(c.q, ["cell tile", "cell current", "cell tile", "cell tile", "cell"]);
        assert_eq!(c.k, ["cell done", "cell done", "cell current masked", "cell current masked", "cell skipped"]);
        assert_eq!(c.o[1], "cell current written");
        assert_eq!(cursor(&trace, Mask::Causal, 1, 0).o[1], "cell current");
        // Row 4 (tile 1, keys 0-4 in steps 0-1, 2-3, 4).
        let c = cursor(&trace, Mask::Causal, 4, 0);
        assert_eq!(c.k, ["cell current", "cell current", "cell ahead", "cell ahead", "cell ahead"]);
    }

    #[test]
    fn a_links_row_and_step_are_cut_to_the_trace() {
        // 5 rows: no row named plays the last (4); a row past the trace plays the last too.
        assert_eq!((played_row(None, 5), played_row(Some(2), 5), played_row(Some(63), 5)), (4, 2, 4));
        assert_eq!(played_row(None, 0), 0);
        // Row 4 of the example walks 3 key steps (0-1, 2-3, 4): steps 0 to 2.
        let (trace, _) = example();
        let steps = playback(&trace, Mask::Causal, 4).len();
        assert_eq!(steps, 3);
        assert_eq!((played_step(0, steps), played_step(2, steps), played_step(9, steps)), (0, 2, 2));
        assert_eq!(played_step(5, 0), 0);
    }

    #[test]
    fn the_label_says_kernel_or_twin() {
        assert!(source_label(Some("loop"), "SwiftShader").contains("its loop form, traced) on SwiftShader"));
        assert!(source_label(None, "no WebGPU").contains("CPU twin's trace"));
    }
}
