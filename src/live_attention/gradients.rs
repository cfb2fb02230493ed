//! Attention's gradients for one KV group of a layer — the chosen head and every query head sharing
//! its K and V — checked: dQ, dK and dV from the engine (the FlashAttention-2 backward on the GPU, or
//! its twin on the CPU tier) against the f64 CPU twin, for an upstream gradient dO of seeded numbers.
//! The shared K/V head's gradient is the sum of what each query head of the group sends it; the
//! check says how closely the group's dK and dV equal those per-head sums.

use crate::attention::inputs::SplitMix64;
use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::flash_attention::flash_attention;
use crate::cpu::flash_backward::{BackwardInputs, Gradients, flash_backward};
use crate::engine::Engine;
use crate::event_loop::breathe;
use crate::gpu::flash_backward_io::backward_takes_head_dim;

use super::Request;

/// One tensor's check.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorCheck {
    /// `dq`, `dk` or `dv`.
    pub tensor: &'static str,
    /// ‖engine − twin‖ / ‖twin‖ over the whole tensor (0 when the twin's is 0 too).
    pub rel_error: f64,
    pub largest: f64,
}

/// The check of one KV group.
#[derive(Clone, Debug, PartialEq)]
pub struct GradCheck {
    pub kv_head: u32,
    /// The query heads of the group, in order.
    pub heads: Vec<u32>,
    pub tensors: Vec<TensorCheck>,
    /// The largest relative difference between the engine's dK (and dV) of the group (the kernel's
    /// on the GPU, which adds the query heads' shares inside it) and the sum over its query heads of
    /// each head's own, computed alone by the twin.
    pub group_sum_error: f64,
    /// The tokens checked: the first ones of the text (queries, keys), within [`CHECK_MAX_MULTIPLY_ADDS`].
    pub tokens: (u32, u32),
    /// Whether the engine's gradients came from the GPU's kernels (not the twin).
    pub on_gpu: bool,
}

/// The check's work on the CPU, all its twin runs together: it runs on the page's thread, so it stays
/// a few tenths of a second at most (the twin costs 7 multiply-adds per pair and unit of width, and
/// runs three times: the engine's on the CPU tier, the yardstick, and head by head).
pub const CHECK_MAX_MULTIPLY_ADDS: u64 = 48_000_000;

/// The most tokens (queries, keys) of a text the check takes for `heads` query heads of width `d`:
/// every one while they fit [`CHECK_MAX_MULTIPLY_ADDS`], else the longest prefix that does (cross-
/// attention keeps all its keys; at least one query).
pub fn checked_tokens(n_q: u32, n_kv: u32, d: u32, heads: u32, cross: bool) -> (u32, u32) {
    let per_pair = 3 * 7 * u64::from(d.max(1)) * u64::from(heads.max(1));
    let fits = |q: u64, k: u64| q * k * per_pair <= CHECK_MAX_MULTIPLY_ADDS;
    let mut m = n_q;
    while m > 1 && !fits(u64::from(m), u64::from(if cross { n_kv } else { m.min(n_kv) })) {
        m -= 1;
    }
    (m, if cross { n_kv } else { m.min(n_kv) })
}

/// ‖a − b‖₂ / ‖b‖₂ (0 when both are 0).
pub fn relative_error(a: &[f32], b: &[f32]) -> f64 {
    let (diff, norm) = a.iter().zip(b).fold((0.0, 0.0), |(d, n), (&x, &y)| {
        let (x, y) = (f64::from(x), f64::from(y));
        (d + (x - y) * (x - y), n + y * y)
    });
    if norm == 0.0 { diff.sqrt() } else { (diff / norm).sqrt() }
}

/// The group of `head` in `req`'s layer, on `engine`, against the twin.
pub async fn gradient_check(engine: &Engine, req: &Request, head: u32) -> Result<GradCheck, String> {
    let layout = &req.layout;
    let kv_head = layout.kv_head(head);
    let heads: Vec<u32> = (0..layout.n_q_heads).filter(|&h| layout.kv_head(h) == kv_head).collect();
    let inputs = req.inputs();
    let d = layout.head_dim;
    let (n_q, n_kv) = checked_tokens(req.n_q(), req.n_kv(), d, heads.len() as u32, inputs.is_cross());
    let (rows, keys) = ((n_q * d) as usize, (n_kv * d) as usize);
    let q: Vec<f32> = heads.iter().flat_map(|&h| inputs.q_head(h)[..rows].to_vec()).collect();
    let (k, v) = inputs.kv_head(kv_head);
    let (k, v) = (&k[..keys], &v[..keys]);
    let shape = AttentionShape { h_q: heads.len() as u32, h_kv: 1, n_q, n_kv, d };
    let problem = AttentionProblem::new(&q, k, v, shape, req.mask, 1.0 / (d as f32).sqrt());
    let d_o = seeded_d_o(req.seed, shape.q_len());
    let got = engine.attention_gradients(&problem, &d_o).await?;
    breathe().await;
    let twin = twin_gradients(&problem, &d_o);
    let tensors = [("dq", &got.grads.dq, &twin.dq), ("dk", &got.grads.dk, &twin.dk), ("dv", &got.grads.dv, &twin.dv)]
        .map(|(tensor, g, t)| TensorCheck {
            tensor,
            rel_error: relative_error(g, t),
            largest: t.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs())),
        })
        .to_vec();
    breathe().await;
    // The engine's group gradient (the kernel's, summed inside it) against the heads' own, added up.
    let group_sum_error = group_sum_error(&problem, &d_o, &got.grads);
    let on_gpu = engine.is_gpu() && backward_takes_head_dim(d);
    Ok(GradCheck { kv_head, heads, tensors, group_sum_error, tokens: (n_q, n_kv), on_gpu })
}

/// dO: seeded numbers in [-1, 1), the gradient a loss would send back.
fn seeded_d_o(seed: u64, len: usize) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed ^ 0xD0D0);
    (0..len).map(|_| rng.next_signed_unit()).collect()
}

fn twin_gradients(p: &AttentionProblem, d_o: &[f32]) -> Gradients {
    let forward = flash_attention(p);
    flash_backward(p, &BackwardInputs { o: &forward.o, lse: &forward.lse, d_o })
}

/// How far the group's dK and dV are from the sums of each query head's own, computed alone.
fn group_sum_error(p: &AttentionProblem, d_o: &[f32], group: &Gradients) -> f64 {
    let s = p.shape;
    let (rows, kv) = ((s.n_q * s.d) as usize, (s.n_kv * s.d) as usize);
    let (mut dk, mut dv) = (vec![0.0f32; kv], vec![0.0f32; kv]);
    for h in 0..s.h_q as usize {
        let one = AttentionShape { h_q: 1, ..s };
        let q = &p.q[h * rows..][..rows];
        let alone = AttentionProblem::new(q, p.k, p.v, one, p.mask, p.scale);
        let g = twin_gradients(&alone, &d_o[h * rows..][..rows]);
        dk.iter_mut().zip(&g.dk).for_each(|(a, b)| *a += b);
        dv.iter_mut().zip(&g.dv).for_each(|(a, b)| *a += b);
    }
    relative_error(&group.dk, &dk).max(relative_error(&group.dv, &dv))
}
