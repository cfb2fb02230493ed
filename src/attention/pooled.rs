//! Pooled heatmaps: a whole head's probabilities shrunk to `rows x cols` blocks, each holding the max or
//! the mean of P over the block (the `pooled` entry point of `shaders/attention_probs.wgsl` and
//! `shaders/pool_rows.wgsl`; their CPU twin is [`crate::cpu::pool_rows`]).

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
}
