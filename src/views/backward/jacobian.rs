//! The softmax's Jacobian for one query row of a head: how each probability of the row moves when one
//! score moves. With p = softmax(s), ∂p_i/∂s_j = p_i (δ_ij − p_j), that is J = diag(p) − p pᵀ.
//!
//! Every row of J sums to zero (the probabilities always sum to one, so no change of a score can
//! change their total), J is symmetric, and it vanishes on a one-hot row: a head that has made up its
//! mind passes almost no gradient back to its scores. On a flat row over n keys it is
//! (1/n)(I − 11ᵀ/n), whose trace 1 − Σp² = 1 − 1/n is the largest any row of n keys has (the trace
//! and the entropy fall as a row sharpens; the Frobenius norm and the largest entry need not: a row
//! sharpening onto two keys has larger ones than the flat row). The score scale moves a row between
//! flat and one-hot, which is one reason attention multiplies `q·k` by 1/√d: unscaled scores of wide
//! heads make rows nearly one-hot.

use super::{BackwardParams, ScoreScale};
use crate::attention::layer_inputs::LayerLayout;
use crate::model::Model;
use crate::views::heatmaps::entropy::entropy_bits;
use crate::views::heatmaps::request::{Request, Screen, build_request, layout_line};
use crate::views::heatmaps::step_through::softmax;
use crate::views::registry::Settings;

/// Rows that see at most this many keys have their Jacobian drawn (64 × 64 cells).
pub const MAX_DRAWN_KEYS: usize = 64;

/// `diag(p) − p pᵀ`, row-major `[n, n]`: entry (i, j) is ∂p_i/∂s_j.
pub fn softmax_jacobian(p: &[f64]) -> Vec<f64> {
    let n = p.len();
    let mut out = vec![0.0; n * n];
    for (i, &pi) in p.iter().enumerate() {
        for (j, &pj) in p.iter().enumerate() {
            out[i * n + j] = if i == j { pi - pi * pj } else { -pi * pj };
        }
    }
    out
}

/// What a row's Jacobian amounts to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JacobianFacts {
    pub visible_keys: usize,
    /// The row's largest probability.
    pub top_prob: f64,
    pub entropy_bits: f64,
    /// Its trace, Σ p_i (1 − p_i) = 1 − Σ p_i²: 0 on a one-hot row, 1 − 1/n on a flat one.
    pub trace: f64,
    /// Its Frobenius norm, from Σ p² − 2 Σ p³ + (Σ p²)² (the sum of its squared entries).
    pub frobenius: f64,
    /// Its largest entry in absolute value.
    pub largest_entry: f64,
}

impl JacobianFacts {
    pub fn of(p: &[f64]) -> Self {
        let (s2, s3) = p.iter().fold((0.0, 0.0), |(s2, s3), &x| (s2 + x * x, s3 + x * x * x));
        // Diagonal p(1 − p) is at most 1/4; off-diagonal p_i p_j at most 1/4 too.
        let largest_diagonal = p.iter().map(|&x| x * (1.0 - x)).fold(0.0, f64::max);
        let (first, second) = top_two(p);
        Self {
            visible_keys: p.len(),
            top_prob: first,
            entropy_bits: entropy_bits(p),
            trace: 1.0 - s2,
            frobenius: (s2 - 2.0 * s3 + s2 * s2).max(0.0).sqrt(),
            largest_entry: largest_diagonal.max(first * second),
        }
    }
}

fn top_two(p: &[f64]) -> (f64, f64) {
    p.iter().fold((0.0, 0.0), |(a, b), &x| if x > a { (x, a) } else { (a, b.max(x)) })
}

/// The largest |row sum| of a Jacobian: zero but for rounding.
pub fn largest_row_sum(jacobian: &[f64], n: usize) -> f64 {
    jacobian.chunks(n.max(1)).map(|row| row.iter().sum::<f64>().abs()).fold(0.0, f64::max)
}

/// One query row of one head, its probabilities at the chosen scale and its Jacobian.
#[derive(Clone, Debug, PartialEq)]
pub struct RowJacobian {
    /// The model, layer, heads, positions and mask, as the explorer states them.
    pub layout_line: String,
    pub head: u32,
    /// The designed teaching head's pattern, when the head is one (`teach=on`).
    pub designed: Option<&'static str>,
    /// Said when the link's head (`focus`) is not in the layer (the first head shown is used).
    pub head_note: Option<String>,
    pub row: u32,
    /// Said when the link's row is past the text's last token (the last is shown).
    pub row_note: Option<String>,
    pub row_token: String,
    /// The keys the row sees, by position, with their tokens and raw scores `q·k`.
    pub keys: Vec<u32>,
    pub key_tokens: Vec<String>,
    pub scores: Vec<f64>,
    pub head_dim: u32,
    pub scale: ScoreScale,
    pub probs: Vec<f64>,
    /// `[keys, keys]`, when the row sees at most [`MAX_DRAWN_KEYS`] keys.
    pub jacobian: Option<Vec<f64>>,
    /// The drawn Jacobian's largest |row sum| (zero but for rounding).
    pub largest_row_sum: Option<f64>,
    pub facts: JacobianFacts,
    /// The same row at every scale, smallest factor first.
    pub by_scale: Vec<(ScoreScale, JacobianFacts)>,
    /// A flat row over the same keys: the largest trace (1 − 1/n) and entropy a row of them has.
    pub flat: JacobianFacts,
}

impl RowJacobian {
    /// The row's probabilities at `scale`.
    pub fn probs_at(&self, scale: ScoreScale) -> Vec<f64> {
        let factor = scale.factor(self.head_dim);
        softmax(&self.scores.iter().map(|s| s * factor).collect::<Vec<_>>())
    }
}

/// The chosen row of the explorer's head (the enlarged one, else the first shown) for these
/// settings, or why there is none (no attention in the layer, an input too long to draw exactly).
pub fn row_jacobian(settings: &Settings, model: &Model) -> Result<RowJacobian, String> {
    let layout = LayerLayout::of(model, settings.model.layer);
    let screen = Screen { width_css_px: 1024.0, device_pixel_ratio: 1.0 };
    let request = build_request(&settings.input, &settings.explorer, layout, screen)?;
    if !request.exact() {
        return Err(format!(
            "The Jacobian is worked out for inputs of at most {} tokens, the explorer's exact maps: shorten the text.",
            crate::views::heatmaps::request::EXACT_MAX_N
        ));
    }
    let head = request.shown_head(settings.explorer.focus).ok_or("No head is shown.")?;
    let mut out = of_request(&request, head, model, &settings.backward);
    out.head_note = settings.explorer.focus.filter(|&f| f != head).map(|f| {
        format!("Head {f} is not in this layer's {} query heads; showing head {head}.", request.layout.n_q_heads)
    });
    Ok(out)
}

fn of_request(request: &Request, head: u32, model: &Model, params: &BackwardParams) -> RowJacobian {
    let last = request.n_q() - 1;
    let row = params.row.unwrap_or(last).min(last);
    let row_note = params
        .row
        .filter(|&r| r > last)
        .map(|r| format!("Row {r} is past the text's last token ({last}); showing row {last}."));
    let inputs = request.inputs();
    let d = request.layout.head_dim as usize;
    let q = inputs.q_head(head);
    let k = inputs.k_head(request.layout.kv_head(head));
    let q_row = &q[row as usize * d..][..d];
    let keys: Vec<u32> = (0..request.n_kv()).filter(|&j| inputs.is_cross() || request.mask.visible(row, j)).collect();
    let scores: Vec<f64> = keys
        .iter()
        .map(|&j| {
            let k_row = &k[j as usize * d..][..d];
            q_row.iter().zip(k_row).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum()
        })
        .collect();
    let mut out = RowJacobian {
        layout_line: layout_line(model, &request.layout, request.mask),
        head,
        designed: inputs.teaching_head(head).map(|t| t.describe()),
        head_note: None,
        row,
        row_note,
        row_token: inputs.q_tokens()[row as usize].clone(),
        key_tokens: keys.iter().map(|&j| inputs.kv_tokens()[j as usize].clone()).collect(),
        keys,
        scores,
        head_dim: request.layout.head_dim,
        scale: params.jscale,
        probs: vec![],
        jacobian: None,
        largest_row_sum: None,
        facts: JacobianFacts::of(&[]),
        by_scale: vec![],
        flat: JacobianFacts::of(&[]),
    };
    out.probs = out.probs_at(params.jscale);
    out.facts = JacobianFacts::of(&out.probs);
    out.jacobian = (out.probs.len() <= MAX_DRAWN_KEYS).then(|| softmax_jacobian(&out.probs));
    out.largest_row_sum = out.jacobian.as_ref().map(|j| largest_row_sum(j, out.probs.len()));
    out.by_scale = ScoreScale::ALL.iter().map(|&s| (s, JacobianFacts::of(&out.probs_at(s)))).collect();
    let n = out.keys.len();
    out.flat = JacobianFacts::of(&vec![1.0 / n as f64; n]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{AttentionProblem, AttentionShape};
    use crate::cpu::reference;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn two_even_keys_by_hand() {
        // p = (1/2, 1/2): diagonal 1/2 − 1/4 = 1/4, off-diagonal −1/4.
        assert_eq!(softmax_jacobian(&[0.5, 0.5]), [0.25, -0.25, -0.25, 0.25]);
        let f = JacobianFacts::of(&[0.5, 0.5]);
        // Trace 1 − (1/4 + 1/4) = 1/2; Frobenius √(4 · 1/16) = 1/2; largest entry 1/4; 1 bit.
        assert!(close(f.trace, 0.5) && close(f.frobenius, 0.5) && close(f.largest_entry, 0.25), "{f:?}");
        assert!(close(f.entropy_bits, 1.0) && close(f.top_prob, 0.5));
    }

    #[test]
    fn a_one_hot_row_passes_nothing_back() {
        assert!(softmax_jacobian(&[0.0, 1.0, 0.0]).iter().all(|&x| x == 0.0));
        let f = JacobianFacts::of(&[0.0, 1.0, 0.0]);
        assert_eq!((f.trace, f.frobenius, f.largest_entry, f.entropy_bits), (0.0, 0.0, 0.0, 0.0));
    }

    #[test]
    fn a_flat_row_by_hand() {
        // n = 4: diagonal 1/4 − 1/16 = 3/16, off-diagonal −1/16; trace 3/4;
        // squared entries 4 · 9/256 + 12 · 1/256 = 48/256 = 0.1875.
        let j = softmax_jacobian(&[0.25; 4]);
        assert!(close(j[0], 3.0 / 16.0) && close(j[1], -1.0 / 16.0));
        let f = JacobianFacts::of(&[0.25; 4]);
        assert!(close(f.trace, 0.75) && close(f.frobenius, 0.1875f64.sqrt()) && close(f.largest_entry, 3.0 / 16.0));
        // The O(n) Frobenius formula equals the sum of the squared entries of any row.
        let p = [0.1, 0.2, 0.3, 0.4];
        let direct: f64 = softmax_jacobian(&p).iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!(close(JacobianFacts::of(&p).frobenius, direct));
        assert!(largest_row_sum(&softmax_jacobian(&p), 4) < 1e-15);
    }

    #[test]
    fn the_default_row_is_the_explorers_head_and_its_rows_sum_to_zero() {
        let settings = Settings::default();
        let model = settings.resolved_model();
        let r = row_jacobian(&settings, &model).unwrap();
        let screen = Screen { width_css_px: 1024.0, device_pixel_ratio: 1.0 };
        let request = build_request(&settings.input, &settings.explorer, LayerLayout::of(&model, 0), screen).unwrap();
        let n = request.n_q();
        // The default text's last token under the causal mask sees every token.
        assert_eq!((r.head, r.row, r.keys.len()), (0, n - 1, n as usize));
        assert_eq!(r.row_token, ".");
        let j = r.jacobian.as_ref().unwrap();
        assert!(largest_row_sum(j, r.keys.len()) < 1e-15);
        // The probabilities at 1/√d are attention's: their log-sum-exp is the reference kernel's.
        let inputs = request.inputs();
        let (q, (k, v)) = (inputs.q_head(0), inputs.kv_head(0));
        let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: n, n_kv: n, d: request.layout.head_dim };
        let scale = 1.0 / (request.layout.head_dim as f32).sqrt();
        let lse = reference::flash_attention(&AttentionProblem::new(&q, &k, &v, shape, request.mask, scale)).lse;
        let factor = ScoreScale::InvSqrtD.factor(request.layout.head_dim);
        let ours = r.scores.iter().map(|s| (s * factor).exp()).sum::<f64>().ln();
        assert!((ours - f64::from(lse[r.row as usize])).abs() < 1e-4, "{ours} vs {}", lse[r.row as usize]);
    }

    #[test]
    fn a_row_sharpening_onto_two_keys_outgrows_the_flat_row_in_frobenius_norm_not_in_trace() {
        // Scores (1, 1, 0, 0): flat (β = 0) has Frobenius √0.1875 = 0.4330 and largest entry 3/16;
        // at β → ∞, p = (1/2, 1/2, 0, 0): Frobenius 1/2 and largest entry 1/4, larger; the trace
        // falls from 3/4 to 1/2.
        let at = |beta: f64| JacobianFacts::of(&softmax(&[beta, beta, 0.0, 0.0]));
        let (flat, sharp) = (at(0.0), at(60.0));
        assert!(close(flat.frobenius, 0.1875f64.sqrt()) && (sharp.frobenius - 0.5).abs() < 1e-9);
        assert!(sharp.frobenius > flat.frobenius && sharp.largest_entry > flat.largest_entry);
        assert!(sharp.trace < flat.trace && (at(2.0).frobenius - 0.4566).abs() < 1e-4);
    }

    #[test]
    fn a_larger_factor_lowers_the_entropy_and_the_trace_never_past_the_flat_row() {
        let (settings, _) = Settings::from_query("model=llama-3-8b&teach=off&row=6");
        let r = row_jacobian(&settings, &settings.resolved_model()).unwrap();
        assert_eq!((r.row, r.keys.len()), (6, 7));
        // 1/d, 1/√d, 1: growing factors, so falling entropy (softmax(βs) sharpens as β grows).
        let bits: Vec<f64> = r.by_scale.iter().map(|(_, f)| f.entropy_bits).collect();
        assert!(bits[0] >= bits[1] && bits[1] >= bits[2], "{bits:?}");
        for (_, f) in &r.by_scale {
            assert!(f.trace <= r.flat.trace + 1e-12 && f.entropy_bits <= r.flat.entropy_bits + 1e-12);
        }
    }

    #[test]
    fn a_row_past_the_text_shows_the_last_and_says_so() {
        let (settings, _) = Settings::from_query("row=500&mask=sliding&window=3");
        let r = row_jacobian(&settings, &settings.resolved_model()).unwrap();
        assert_eq!(r.keys, [r.row - 2, r.row - 1, r.row], "a window of 3 keys");
        assert!(r.row_note.as_deref().is_some_and(|n| n.starts_with("Row 500 is past")), "{:?}", r.row_note);
        let (long, _) = Settings::from_query("n=4096");
        assert!(row_jacobian(&long, &long.resolved_model()).unwrap_err().contains("at most 256 tokens"));
        // A focus past the layer's heads (a link settles it; a stale one may still reach the view).
        let (mut wide, _) = Settings::from_query("heads=4-7");
        wide.explorer.focus = Some(40);
        let r = row_jacobian(&wide, &wide.resolved_model()).unwrap();
        assert_eq!(r.head, 4);
        assert_eq!(r.head_note.as_deref(), Some("Head 40 is not in this layer's 32 query heads; showing head 4."));
    }
}
