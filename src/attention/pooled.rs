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
    pub const ALL: [Pool; 2] = [Pool::Max, Pool::Mean];

    /// The URL / UI name (`pool=max|mean`).
    pub fn name(self) -> &'static str {
        match self {
            Pool::Max => "max",
            Pool::Mean => "mean",
        }
    }

    pub fn to_gpu(self) -> u32 {
        match self {
            Pool::Max => 0,
            Pool::Mean => 1,
        }
    }
}

impl std::str::FromStr for Pool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pool::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown pooling \"{s}\" (expected max or mean)"))
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
pub fn pool_probabilities(
    p: &[f32],
    heads: u32,
    n_q: u32,
    n_kv: u32,
    out_rows: u32,
    out_cols: u32,
    pool: Pool,
) -> Vec<f32> {
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

/// A pooled heatmap of a head with `n_q` queries, `rows x cols` cells, of which the output rows
/// `first..first + count` are wanted: a long head is pooled in slices, one GPU submission each, so no
/// single submission holds the GPU for long and a newer request can take over between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PooledMap {
    pub n_q: u32,
    pub rows: u32,
    pub cols: u32,
    pub pool: Pool,
    pub first: u32,
    pub count: u32,
}

impl PooledMap {
    /// Every row of the map.
    pub fn whole(n_q: u32, rows: u32, cols: u32, pool: Pool) -> Self {
        Self { n_q, rows, cols, pool, first: 0, count: rows }
    }

    /// The queries the wanted rows cover, `(start, end)`.
    pub fn queries(&self) -> (u32, u32) {
        (
            block_range(self.first, self.rows, self.n_q).0,
            block_range(self.first + self.count.max(1) - 1, self.rows, self.n_q).1,
        )
    }

    /// The map in `parts` slices of near-equal row counts (fewer when it has fewer rows), in order.
    pub fn slices(&self, parts: u32) -> Vec<PooledMap> {
        let parts = parts.clamp(1, self.count.max(1));
        (0..parts)
            .map(|p| {
                let (a, b) = block_range(p, parts, self.count);
                PooledMap { first: self.first + a, count: b - a, ..*self }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_rows_once_and_name_their_queries() {
        // 10 output rows over 100 queries in 3 slices: rows 0..3, 3..6, 6..10, queries 0..30, 30..60, 60..100.
        let map = PooledMap::whole(100, 10, 7, Pool::Mean);
        let slices = map.slices(3);
        let rows: Vec<_> = slices.iter().map(|s| (s.first, s.count)).collect();
        assert_eq!(rows, vec![(0, 3), (3, 3), (6, 4)]);
        let queries: Vec<_> = slices.iter().map(PooledMap::queries).collect();
        assert_eq!(queries, vec![(0, 30), (30, 60), (60, 100)]);
        assert_eq!(map.queries(), (0, 100));
        // More parts than rows: one row each. Upsampled rows (5 queries, 8 rows) repeat queries.
        assert_eq!(PooledMap::whole(100, 2, 7, Pool::Max).slices(5).len(), 2);
        let up = PooledMap::whole(5, 8, 3, Pool::Max).slices(2);
        assert_eq!(up.iter().map(PooledMap::queries).collect::<Vec<_>>(), vec![(0, 2), (2, 5)]);
    }

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
