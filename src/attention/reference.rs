//! The CPU twins of the GPU kernels, in one place: f64, slow, obvious, and the yardstick every kernel
//! is tested against. They also serve as the fallback when the browser has no WebGPU (small sizes only).
//!
//! Each twin is named after the kernel it mirrors; kernels that compute the same thing by another
//! route share it:
//!
//! | kernel (`shaders/*.wgsl`)                                          | CPU twin            |
//! |-------------------------------------------------------------------|---------------------|
//! | `flash_attention`, `flash_attention_subgroup`, `naive_attention`  | [`flash_attention`] |
//! | `row_softmax`, `row_softmax_subgroup`, `attention_probs` (region) | [`row_softmax`]     |
//! | `pool_rows`, `attention_probs` (pooled)                           | [`pool_rows`]       |
//! | `fma_peak` (a throughput probe: nothing to mirror)                | none                |
//!
//! The language model's other steps (`src/gpu/lm_forward.rs`) have their twins in its CPU forward
//! pass, `lm::forward`, which is composed of them:
//!
//! | kernel (`shaders/*.wgsl`)                                            | CPU twin (`crate::lm::forward::`) |
//! |----------------------------------------------------------------------|-----------------------------------|
//! | `embed_gather`                                                       | `embed_gather`                    |
//! | `rms_norm`                                                           | `rms_norm`                        |
//! | `qk_norm` (in place, each query and key head of the fused Q/K/V)     | `rms_norm` of each head           |
//! | `matmul` (`tiled`, `direct`), `matmul_subgroup` (`accumulate`: Y +=) | `matmul`                          |
//! | `rope` (`split_heads` rotates and moves heads, `merge_heads`)        | `rope` (the rotation)             |
//! | `swiglu`                                                             | `swiglu`                          |
//! | `widen` (f16 / bf16 weights to f32 while a checkpoint streams in)    | `lm::safetensors::to_f32`         |

use crate::attention::AttentionProblem;
use crate::attention::pooled::{Pool, block_range};

/// The result of a forward pass: `o` is `[h_q, n_q, d]`, `lse` is `[h_q, n_q]` (natural log-sum-exp of the
/// scaled, visible scores of each row).
///
/// A row that sees no key at all has `o = 0` and `lse = -inf`: there is nothing to average, and the
/// kernels report the same (documented in `shaders/flash_attention.wgsl`).
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    pub o: Vec<f32>,
    pub lse: Vec<f32>,
}

/// Scaled, masked scores of one query row against every key, as f64; masked keys are `None`.
fn row_scores(p: &AttentionProblem, h: u32, i: u32) -> Vec<Option<f64>> {
    let AttentionProblem { q, k, shape, mask, scale, .. } = *p;
    let d = shape.d as usize;
    let kv_h = shape.kv_head(h) as usize;
    let q_row = &q[((h * shape.n_q + i) as usize) * d..][..d];
    let q_pos = shape.q_offset() + i;
    (0..shape.n_kv)
        .map(|j| {
            mask.visible(q_pos, j).then(|| {
                let k_row = &k[(kv_h * shape.n_kv as usize + j as usize) * d..][..d];
                let dot: f64 = q_row.iter().zip(k_row).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
                dot * f64::from(scale)
            })
        })
        .collect()
}

/// Softmax of one row of optional scores (masked entries get probability 0) and its log-sum-exp.
fn softmax_row(scores: &[Option<f64>]) -> (Vec<f64>, f64) {
    let max = scores.iter().flatten().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return (vec![0.0; scores.len()], f64::NEG_INFINITY);
    }
    let exps: Vec<f64> = scores.iter().map(|s| s.map_or(0.0, |s| (s - max).exp())).collect();
    let sum: f64 = exps.iter().sum();
    (exps.iter().map(|e| e / sum).collect(), max + sum.ln())
}

/// Twin of `flash_attention.wgsl` (and of the kernels that compute the same output): the forward pass
/// `O = softmax(scale * Q Kᵀ + mask) V` per query head, with GQA head sharing, and each row's log-sum-exp.
pub fn flash_attention(p: &AttentionProblem) -> Forward {
    let mut out = Forward::zeroed(p);
    for h in 0..p.shape.h_q {
        for i in 0..p.shape.n_q {
            flash_attention_row(p, h, i, &mut out);
        }
    }
    out
}

impl Forward {
    /// An output of the right size for `p`, every row still zero (rows are filled one at a time).
    pub fn zeroed(p: &AttentionProblem) -> Forward {
        Forward { o: vec![0.0; p.shape.q_len()], lse: vec![0.0; (p.shape.h_q * p.shape.n_q) as usize] }
    }
}

/// Row `i` of head `h` of [`flash_attention`], written into `out` (so a caller can compute the rows
/// in slices and let the page breathe between them).
pub fn flash_attention_row(p: &AttentionProblem, h: u32, i: u32, out: &mut Forward) {
    let (shape, v) = (&p.shape, p.v);
    let d = shape.d as usize;
    let kv_h = shape.kv_head(h) as usize;
    let (probs, row_lse) = softmax_row(&row_scores(p, h, i));
    let row = (h * shape.n_q + i) as usize;
    out.lse[row] = row_lse as f32;
    // Masked keys have probability 0 and add nothing: skipped, so a narrow window over a long input
    // costs its window, not the input.
    let visible: Vec<(usize, f64)> = probs.iter().copied().enumerate().filter(|&(_, pj)| pj != 0.0).collect();
    for c in 0..d {
        let acc: f64 = visible.iter().map(|&(j, pj)| pj * f64::from(v[(kv_h * shape.n_kv as usize + j) * d + c])).sum();
        out.o[row * d + c] = acc as f32;
    }
}

/// Twin of `row_softmax.wgsl` (and of `attention_probs.wgsl` over a region): the attention probabilities
/// `P = softmax(scale * Q Kᵀ + mask)`, `[h_q, n_q, n_kv]`, masked entries 0.
pub fn row_softmax(p: &AttentionProblem) -> Vec<f32> {
    let shape = &p.shape;
    let mut out = Vec::with_capacity((shape.h_q * shape.n_q * shape.n_kv) as usize);
    for h in 0..shape.h_q {
        for i in 0..shape.n_q {
            row_softmax_row(p, h, i, &mut out);
        }
    }
    out
}

/// Row `i` of head `h` of [`row_softmax`], appended to `out`.
pub fn row_softmax_row(p: &AttentionProblem, h: u32, i: u32, out: &mut Vec<f32>) {
    let (probs, _) = softmax_row(&row_scores(p, h, i));
    out.extend(probs.iter().map(|&x| x as f32));
}

/// Twin of `pool_rows.wgsl` and the `pooled` entry of `attention_probs.wgsl`: probabilities `p`
/// (`[heads, n_q, n_kv]`) pooled to `[heads, out_rows, out_cols]`.
pub fn pool_rows(p: &[f32], heads: u32, n_q: u32, n_kv: u32, out_rows: u32, out_cols: u32, pool: Pool) -> Vec<f32> {
    let mut out = Vec::with_capacity((heads * out_rows * out_cols) as usize);
    for h in 0..heads {
        let head = &p[(h * n_q * n_kv) as usize..][..(n_q * n_kv) as usize];
        for r in 0..out_rows {
            let (i_a, i_b) = block_range(r, out_rows, n_q);
            for c in 0..out_cols {
                let (j_a, j_b) = block_range(c, out_cols, n_kv);
                let block = (i_a..i_b).flat_map(|i| (j_a..j_b).map(move |j| head[(i * n_kv + j) as usize]));
                out.push(match pool {
                    Pool::Max => block.fold(0.0f32, f32::max),
                    Pool::Mean => {
                        let sum: f64 = block.map(f64::from).sum();
                        (sum / (f64::from(i_b - i_a) * f64::from(j_b - j_a))) as f32
                    }
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::model::Mask;

    #[test]
    fn two_tokens_by_hand() {
        // One head, d = 1: q = [1, 2], k = [1, 3], v = [10, 20], scale 1, causal.
        // Row 0 sees key 0 only: p = [1, 0], o = 10, lse = 1*1 = 1.
        // Row 1 scores 2*1 = 2 and 2*3 = 6: p1 = e^6 / (e^2 + e^6), o = 10 p0 + 20 p1.
        let shape = AttentionShape::square(1, 2, 1);
        let f =
            flash_attention(&AttentionProblem::new(&[1.0, 2.0], &[1.0, 3.0], &[10.0, 20.0], shape, Mask::Causal, 1.0));
        let p1 = 6f64.exp() / (2f64.exp() + 6f64.exp());
        assert!((f.o[0] - 10.0).abs() < 1e-6);
        assert!((f64::from(f.o[1]) - (10.0 * (1.0 - p1) + 20.0 * p1)).abs() < 1e-4);
        assert!((f.lse[0] - 1.0).abs() < 1e-6);
        assert!((f64::from(f.lse[1]) - (2f64.exp() + 6f64.exp()).ln()).abs() < 1e-5);
        let p = row_softmax(&AttentionProblem::scores(&[1.0, 2.0], &[1.0, 3.0], shape, Mask::Causal, 1.0));
        assert_eq!(p[1], 0.0);
        assert!((f64::from(p[3]) - p1).abs() < 1e-6);
    }

    #[test]
    fn rows_sum_to_one_and_huge_logits_stay_finite() {
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 5, n_kv: 9, d: 3 };
        let q: Vec<f32> = (0..shape.q_len()).map(|x| ((x * 37 % 11) as f32 - 5.0) * 1e3).collect();
        let k: Vec<f32> = (0..shape.kv_len()).map(|x| ((x * 13 % 7) as f32 - 3.0) * 1e1).collect();
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 3 }, Mask::Chunked { chunk_tokens: 4 }] {
            let p = row_softmax(&AttentionProblem::scores(&q, &k, shape, mask, 1.0));
            for row in p.chunks(9) {
                assert!(row.iter().all(|x| x.is_finite()));
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{mask:?}");
            }
        }
    }

    #[test]
    fn a_row_with_no_visible_key_is_zero_with_minus_infinite_lse() {
        // Sliding window 1 over keys 0..2 for a query at position 5 can't happen in self-attention,
        // so build it directly from the softmax of an all-masked row.
        let (p, lse) = softmax_row(&[None, None]);
        assert_eq!(p, vec![0.0, 0.0]);
        assert_eq!(lse, f64::NEG_INFINITY);
    }

    #[test]
    fn pooling_by_hand() {
        // One 2x4 head pooled to 1x2: blocks are columns {0,1} and {2,3}.
        let p = [0.5, 0.5, 0.0, 0.0, 0.1, 0.2, 0.3, 0.4];
        assert_eq!(pool_rows(&p, 1, 2, 4, 1, 2, Pool::Max), vec![0.5, 0.4]);
        let mean = pool_rows(&p, 1, 2, 4, 1, 2, Pool::Mean);
        assert!((mean[0] - 1.3 / 4.0).abs() < 1e-6 && (mean[1] - 0.7 / 4.0).abs() < 1e-6);
    }

    #[test]
    fn every_kernel_is_in_the_twin_table() {
        let table = include_str!("reference.rs");
        let shaders = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders")).unwrap();
        for entry in shaders {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "wgsl") {
                let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
                assert!(table.contains(&format!("`{name}`")), "{name}.wgsl has no row in the CPU twin table");
            }
        }
    }
}
