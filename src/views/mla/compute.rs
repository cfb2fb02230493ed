//! Both forms of the MLA layer on the engine: the up-projections and folds by the matmul kernel
//! ([`Engine::project`]), attention by the tiled forward kernel ([`Engine::attention`]) and the
//! probabilities by the row softmax ([`Engine::head_maps`]); or all of them by their CPU twins on
//! the CPU tier. RoPE turns rows on the host, in f64. The drawn head is checked against the f64
//! reference of both forms ([`super::reference`]).

use super::KeyRotation;
use super::inputs::{MlaInputs, rotate_f32};
use super::reference::{self, max_abs_diff};
use crate::attention::{AttentionProblem, AttentionShape};
use crate::engine::{Engine, MapOutput};
use crate::event_loop::breathe;
use crate::model::Mask;

/// One form's results for every computed head.
#[derive(Clone, Debug, PartialEq)]
pub struct FormOut {
    /// `[heads, n, n]`, 0 where the causal mask hides a key.
    pub probs: Vec<f32>,
    /// `[heads, n, value]`.
    pub out: Vec<f32>,
}

/// Both forms, how far apart they are, and how far the drawn head is from the f64 reference.
#[derive(Clone, Debug, PartialEq)]
pub struct MlaRun {
    pub n: usize,
    pub heads: usize,
    /// Whether the GPU's kernels computed (else their CPU twins).
    pub on_gpu: bool,
    pub rot: KeyRotation,
    pub expanded: FormOut,
    pub absorbed: FormOut,
    /// Largest |p_expanded − p_absorbed| over every head, query and key.
    pub max_prob_diff: f64,
    /// Largest |o_expanded − o_absorbed| over every head, query and value dimension.
    pub max_out_diff: f64,
    /// The drawn head.
    pub head: usize,
    /// Largest |engine − f64 reference| of the drawn head's probabilities, both forms.
    pub reference_prob_error: f64,
    /// The same of its outputs.
    pub reference_out_error: f64,
}

impl MlaRun {
    /// The probabilities of `head`, `[n, n]`, of one form.
    pub fn head_probs(&self, absorbed: bool, head: usize) -> &[f32] {
        let form = if absorbed { &self.absorbed } else { &self.expanded };
        let nn = self.n * self.n;
        form.probs.get(head * nn..(head + 1) * nn).unwrap_or(&[])
    }
}

/// Every row of `rows` (`width` wide), row `i` turned as position `i % n` when `turn`.
fn rotated(rows: &[f32], width: usize, n: usize, turn: bool, theta: f64) -> Vec<f32> {
    let mut out = rows.to_vec();
    if turn && width > 0 {
        for (i, row) in out.chunks_exact_mut(width).enumerate() {
            rotate_f32(row, i % n, theta);
        }
    }
    out
}

/// Rows made of the given parts side by side, zero-padded to `width`: `parts` are (values, part width).
fn side_by_side(rows: usize, width: usize, parts: &[(&[f32], usize)]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * width);
    for i in 0..rows {
        let start = out.len();
        for (values, w) in parts {
            out.extend_from_slice(&values[i * w..][..*w]);
        }
        out.resize(start + width, 0.0);
    }
    out
}

/// `[n, heads · w]` (every head's columns side by side, as one projection gives them) as `[heads, n, w]`.
fn heads_first(x: &[f32], n: usize, heads: usize, w: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for h in 0..heads {
        for i in 0..n {
            out.extend_from_slice(&x[(i * heads + h) * w..][..w]);
        }
    }
    out
}

/// The first `keep` values of each `width`-wide row.
fn first_columns(x: &[f32], width: usize, keep: usize) -> Vec<f32> {
    x.chunks_exact(width).flat_map(|row| &row[..keep]).copied().collect()
}

/// Attention of `heads` query heads over `kv_heads` key heads, all `width` wide, causal: the outputs'
/// first `keep` columns and the probabilities.
async fn attend(
    engine: &Engine,
    (q, k, v): (&[f32], &[f32], &[f32]),
    (heads, kv_heads, n, width): (usize, usize, usize, usize),
    scale: f64,
    keep: usize,
) -> Result<FormOut, String> {
    let as_u32 = |x: usize| u32::try_from(x).map_err(|_| format!("{x} is too large"));
    let shape = AttentionShape {
        h_q: as_u32(heads)?,
        h_kv: as_u32(kv_heads)?,
        n_q: as_u32(n)?,
        n_kv: as_u32(n)?,
        d: as_u32(width)?,
    };
    let problem = AttentionProblem::new(q, k, v, shape, Mask::Causal, scale as f32);
    let forward = engine.attention(&problem).await?;
    let probs = engine.head_maps(&problem, MapOutput::Exact).await?;
    Ok(FormOut { probs, out: first_columns(&forward.o, width, keep) })
}

/// The expanded form: decompress every head's K_nope and V with one projection each, append the
/// shared RoPE key, attend head by head.
async fn expanded(engine: &Engine, x: &MlaInputs, rot: KeyRotation) -> Result<FormOut, String> {
    let s = x.sizes;
    let (n, heads) = (x.n, x.heads);
    let (r, dr, dn, dv) = (s.latent as usize, s.rope as usize, s.nope as usize, s.value as usize);
    let k_nope = heads_first(&engine.project(&x.latent, &x.w_uk, r).await?, n, heads, dn);
    let v = heads_first(&engine.project(&x.latent, &x.w_uv, r).await?, n, heads, dv);
    let whole = rot == KeyRotation::Whole;
    let k_nope = rotated(&k_nope, dn, n, whole, s.theta);
    let q_nope = rotated(&x.q_nope, dn, n, whole, s.theta);
    let k_rope = rotated(&x.k_rope, dr, n, true, s.theta);
    let q_rope = rotated(&x.q_rope, dr, n, true, s.theta);
    let k_rope_every_head: Vec<f32> = k_rope.repeat(heads);
    // The kernel takes V as wide as Q and K: V's columns past dv are zeros, and the output's are dropped.
    let width = (dn + dr).max(dv);
    let rows = heads * n;
    let q = side_by_side(rows, width, &[(&q_nope, dn), (&q_rope, dr)]);
    let k = side_by_side(rows, width, &[(&k_nope, dn), (&k_rope_every_head, dr)]);
    let v = side_by_side(rows, width, &[(&v, dv)]);
    attend(engine, (&q, &k, &v), (heads, heads, n, width), s.scale(), dv).await
}

/// `W` stored `[rows, cols]` as `Wᵀ`, `[cols, rows]`.
fn transposed(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols).flat_map(|c| (0..rows).map(move |r| w[r * cols + c])).collect()
}

/// The absorbed form: each head's query folded into latent space (`q_nope W_UK`), one shared key head
/// `[c; k_rope]` read by every query head (MQA-like), the attention-weighted latent unfolded by `W_UV`.
async fn absorbed(engine: &Engine, x: &MlaInputs) -> Result<FormOut, String> {
    let s = x.sizes;
    let (n, heads) = (x.n, x.heads);
    let (r, dr, dn, dv) = (s.latent as usize, s.rope as usize, s.nope as usize, s.value as usize);
    let mut q_latent = Vec::with_capacity(heads * n * r);
    for h in 0..heads {
        // W_UK is stored [nope, latent]: the fold multiplies by it, so the projection takes W_UKᵀ.
        let w_uk_t = transposed(&x.w_uk[h * dn * r..][..dn * r], dn, r);
        q_latent.extend(engine.project(&x.q_nope[h * n * dn..][..n * dn], &w_uk_t, dn).await?);
        breathe().await;
    }
    let k_rope = rotated(&x.k_rope, dr, n, true, s.theta);
    let q_rope = rotated(&x.q_rope, dr, n, true, s.theta);
    let width = r + dr;
    let q = side_by_side(heads * n, width, &[(&q_latent, r), (&q_rope, dr)]);
    let k = side_by_side(n, width, &[(&x.latent, r), (&k_rope, dr)]);
    // The values are the latent itself; the kernel wants them as wide as the key, so the RoPE
    // columns are zeros (they would add the rope key into the output) and are dropped after.
    let v = side_by_side(n, width, &[(&x.latent, r)]);
    let in_latent = attend(engine, (&q, &k, &v), (heads, 1, n, width), s.scale(), r).await?;
    let mut out = Vec::with_capacity(heads * n * dv);
    for h in 0..heads {
        out.extend(engine.project(&in_latent.out[h * n * r..][..n * r], &x.w_uv[h * dv * r..][..dv * r], r).await?);
    }
    Ok(FormOut { probs: in_latent.probs, out })
}

/// Both forms on `engine`, compared with each other and, for `head`, with the f64 reference.
pub async fn run(engine: &Engine, x: &MlaInputs, rot: KeyRotation, head: usize) -> Result<MlaRun, String> {
    let head = head.min(x.heads.saturating_sub(1));
    let e = expanded(engine, x, rot).await?;
    breathe().await;
    let a = absorbed(engine, x).await?;
    breathe().await;
    let (n, dv) = (x.n, x.sizes.value as usize);
    let (ref_e, ref_a) = (reference::expanded(x, head, rot), reference::absorbed(x, head));
    let probs_of = |f: &FormOut| f.probs[head * n * n..][..n * n].to_vec();
    let out_of = |f: &FormOut| f.out[head * n * dv..][..n * dv].to_vec();
    let reference_prob_error = max_abs_diff(&probs_of(&e), &ref_e.probs).max(max_abs_diff(&probs_of(&a), &ref_a.probs));
    let reference_out_error = max_abs_diff(&out_of(&e), &ref_e.out).max(max_abs_diff(&out_of(&a), &ref_a.out));
    Ok(MlaRun {
        n,
        heads: x.heads,
        on_gpu: engine.is_gpu(),
        rot,
        max_prob_diff: max_abs_diff(&e.probs, &a.probs),
        max_out_diff: max_abs_diff(&e.out, &a.out),
        expanded: e,
        absorbed: a,
        head,
        reference_prob_error,
        reference_out_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Mla;
    use crate::views::mla::setup::MlaSizes;

    fn small(heads: usize) -> MlaInputs {
        let mla = Mla { kv_lora_rank: 16, qk_rope_head_dim: 4, qk_nope_head_dim: 6, v_head_dim: 5, ..Mla::DEEPSEEK };
        MlaInputs::seeded(MlaSizes::of(heads as u32, mla, 10_000.0), 7, heads, 3)
    }

    #[test]
    fn the_cpu_tier_computes_both_forms_alike_and_matches_the_reference() {
        let engine = Engine::Cpu { reason: "a test".into() };
        let x = small(3);
        let run = pollster::block_on(run(&engine, &x, KeyRotation::Decoupled, 2)).unwrap();
        assert!(!run.on_gpu);
        assert_eq!((run.expanded.probs.len(), run.absorbed.out.len()), (3 * 49, 3 * 7 * 5));
        assert!(run.max_prob_diff < 1e-5 && run.max_out_diff < 1e-5, "{run:?}");
        assert!(run.reference_prob_error < 1e-5 && run.reference_out_error < 1e-5, "{run:?}");
        // Every head's rows sum to one, in both forms.
        for row in run.absorbed.probs.chunks_exact(7) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
        // Each head's expanded result is the reference's, head by head (not only the drawn one).
        for h in 0..3 {
            let r = reference::expanded(&x, h, KeyRotation::Decoupled);
            assert!(max_abs_diff(&run.expanded.probs[h * 49..][..49], &r.probs) < 1e-5, "head {h}");
        }
    }

    #[test]
    fn rotating_the_whole_key_separates_the_forms_on_the_engine_too() {
        let engine = Engine::Cpu { reason: "a test".into() };
        let run = pollster::block_on(run(&engine, &small(2), KeyRotation::Whole, 9)).unwrap();
        assert_eq!(run.head, 1);
        assert!(run.max_prob_diff > 0.01, "{}", run.max_prob_diff);
        // The engine still follows the reference of each form: the forms differ, not the arithmetic.
        assert!(run.reference_prob_error < 1e-5, "{}", run.reference_prob_error);
    }

    #[test]
    fn layout_helpers_by_hand() {
        // Rows [1, 2] and [3] side by side, padded to 4: [1, 2, 3, 0].
        assert_eq!(side_by_side(1, 4, &[(&[1.0, 2.0], 2), (&[3.0], 1)]), [1.0, 2.0, 3.0, 0.0]);
        // [n = 2, heads = 2 · w = 1]: token-major [a0, b0, a1, b1] becomes [a0, a1, b0, b1].
        assert_eq!(heads_first(&[1.0, 2.0, 3.0, 4.0], 2, 2, 1), [1.0, 3.0, 2.0, 4.0]);
        assert_eq!(transposed(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        assert_eq!(first_columns(&[1.0, 2.0, 3.0, 4.0], 2, 1), [1.0, 3.0]);
    }
}
