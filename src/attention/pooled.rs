//! CPU twin of the `pooled` entry point of `shaders/attention_probs.wgsl`: a whole head's probabilities
//! shrunk to `out_rows x out_cols` blocks, each holding the max or the mean of P over the block.

/// How a block of probabilities becomes one heatmap cell.
/// Keep in sync with `POOL_*` in `shaders/attention_probs.wgsl` and `shaders/pool_rows.wgsl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// The strongest link in the block: thin attention lines stay visible when shrunk.
    Max,
    /// The average (masked entries count as 0): the block's share of attention mass.
    Mean,
}

impl Pool {
    pub fn to_gpu(self) -> u32 {
        match self {
            Pool::Max => 0,
            Pool::Mean => 1,
        }
    }
}

/// The half-open item range of block `b` when `n` items split into `count` near-equal blocks
/// (`floor(b n / count)` onwards). Every block holds at least one item, so with more blocks than items
/// items repeat (nearest-neighbour upsampling). Same arithmetic as `block_start`/`block_end` in the shader.
pub fn block_range(b: u32, count: u32, n: u32) -> (u32, u32) {
    let start = |b: u32| (u64::from(b) * u64::from(n) / u64::from(count.max(1))) as u32;
    (start(b), start(b + 1).max(start(b) + 1))
}

/// Pools probabilities `p` (`[heads, n_q, n_kv]`) to `[heads, out_rows, out_cols]`.
pub fn pool_probabilities(p: &[f32], heads: u32, n_q: u32, n_kv: u32, out_rows: u32, out_cols: u32, pool: Pool) -> Vec<f32> {
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
    fn blocks_cover_everything_once_or_repeat_when_upsampling() {
        // 10 items in 4 blocks: 0..2, 2..5, 5..7, 7..10.
        let blocks: Vec<_> = (0..4).map(|b| block_range(b, 4, 10)).collect();
        assert_eq!(blocks, vec![(0, 2), (2, 5), (5, 7), (7, 10)]);
        // 3 items in 6 blocks: each item twice.
        let up: Vec<_> = (0..6).map(|b| block_range(b, 6, 3).0).collect();
        assert_eq!(up, vec![0, 0, 1, 1, 2, 2]);
        assert!((0..6).all(|b| block_range(b, 6, 3).1 == block_range(b, 6, 3).0 + 1));
    }

    #[test]
    fn pooling_by_hand() {
        // One 2x4 head pooled to 1x2: blocks are columns {0,1} and {2,3}.
        let p = [0.5, 0.5, 0.0, 0.0, 0.1, 0.2, 0.3, 0.4];
        assert_eq!(pool_probabilities(&p, 1, 2, 4, 1, 2, Pool::Max), vec![0.5, 0.4]);
        let mean = pool_probabilities(&p, 1, 2, 4, 1, 2, Pool::Mean);
        assert!((mean[0] - 1.3 / 4.0).abs() < 1e-6 && (mean[1] - 0.7 / 4.0).abs() < 1e-6);
    }
}
