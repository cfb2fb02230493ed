//! Twin of `shaders/pool_rows.wgsl` (and of `attention_probs`' `pooled` entry).

use crate::attention::pooled::{Pool, block_range};

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

    #[test]
    fn pooling_by_hand() {
        // One 2x4 head pooled to 1x2: blocks are columns {0,1} and {2,3}.
        let p = [0.5, 0.5, 0.0, 0.0, 0.1, 0.2, 0.3, 0.4];
        assert_eq!(pool_rows(&p, 1, 2, 4, 1, 2, Pool::Max), vec![0.5, 0.4]);
        let mean = pool_rows(&p, 1, 2, 4, 1, 2, Pool::Mean);
        assert!((mean[0] - 1.3 / 4.0).abs() < 1e-6 && (mean[1] - 0.7 / 4.0).abs() < 1e-6);
    }
}
