//! Which tiles the tiled forward kernel (`shaders/flash_attention.wgsl`) visits, and how much work its
//! mask lets it skip: the same arithmetic as the shader, for the heatmap's tile-grid overlay.
//!
//! A workgroup owns `rows_per_tile` rows of one KV head, a row being one (query, query head of the
//! group) pair ordered query-major, so it covers queries `row0 / G ..= (row_end - 1) / G`. It loops over
//! keys from the first query's lowest visible key to the last query's highest, `keys_per_tile` at a
//! time; a key tile inside every row's range needs no per-element test ("interior"), the others test
//! elements ("boundary"). Every key tile outside that loop is skipped without being loaded.

use crate::model::Mask;

/// One query tile and the key tiles the kernel visits for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryTile {
    /// Query rows `q_lo..q_hi` (row indices, 0-based, of the `n_q` queries).
    pub q_lo: u32,
    pub q_hi: u32,
    /// Visited key tiles: `(key0, key_end, interior)`.
    pub key_tiles: Vec<(u32, u32, bool)>,
}

/// The kernel's plan for one head under a mask, and what it skips.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TilePlan {
    pub tiles: Vec<QueryTile>,
    /// Key tiles a mask-blind kernel would visit: `ceil(n_kv / keys_per_tile)` per query tile.
    pub dense_key_tiles: u64,
    pub visited_key_tiles: u64,
    pub interior_key_tiles: u64,
}

impl TilePlan {
    /// Fraction of key-tile visits the mask saves against a mask-blind kernel, in `[0, 1]`.
    pub fn skipped_fraction(&self) -> f64 {
        if self.dense_key_tiles == 0 {
            return 0.0;
        }
        1.0 - self.visited_key_tiles as f64 / self.dense_key_tiles as f64
    }
}

/// The plan for `n_q` queries (the last rows of `n_kv` keys) in groups of `group` query heads per KV
/// head, with `rows_per_tile` rows per workgroup and `keys_per_tile` keys per K/V tile.
pub fn plan(n_q: u32, n_kv: u32, group: u32, mask: Mask, rows_per_tile: u32, keys_per_tile: u32) -> TilePlan {
    let g = group.max(1);
    let br = rows_per_tile.max(1);
    let bc = keys_per_tile.max(1);
    let q_offset = n_kv.saturating_sub(n_q);
    let rows_total = n_q * g;
    let mut tiles = Vec::new();
    let (mut visited, mut interior_count) = (0u64, 0u64);
    let mut row0 = 0;
    while row0 < rows_total {
        let row_end = (row0 + br).min(rows_total);
        let (q_lo, q_last) = (row0 / g, (row_end - 1) / g);
        let (first_pos, last_pos) = (q_offset + q_lo, q_offset + q_last);
        // Visible ranges only move right with the position: the tile's union spans the first row's
        // low end to the last row's high end, and the keys every row sees the reverse.
        let ((tile_lo, all_hi), (all_lo, tile_hi)) = (mask.key_range(first_pos, n_kv), mask.key_range(last_pos, n_kv));
        let mut key_tiles = Vec::new();
        let mut key0 = tile_lo;
        while key0 < tile_hi {
            let interior = key0 >= all_lo && key0 + bc <= all_hi;
            key_tiles.push((key0, (key0 + bc).min(n_kv), interior));
            visited += 1;
            interior_count += u64::from(interior);
            key0 += bc;
        }
        // When BR is not a multiple of G, neighbouring tiles share a query; each keeps its own range.
        tiles.push(QueryTile { q_lo, q_hi: q_last + 1, key_tiles });
        row0 = row_end;
    }
    let dense = tiles.len() as u64 * u64::from(n_kv.div_ceil(bc));
    TilePlan { tiles, dense_key_tiles: dense, visited_key_tiles: visited, interior_key_tiles: interior_count }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_by_hand() {
        // 8 queries, 1 head, 4 rows and 4 keys per tile: tile 0 (queries 0-3) visits keys 0-3 (boundary);
        // tile 1 (queries 4-7) visits keys 0-3 (interior: all see 0..5) and 4-7 (boundary).
        let p = plan(8, 8, 1, Mask::Causal, 4, 4);
        assert_eq!(p.tiles.len(), 2);
        assert_eq!(p.tiles[0].key_tiles, vec![(0, 4, false)]);
        assert_eq!(p.tiles[1].key_tiles, vec![(0, 4, true), (4, 8, false)]);
        assert_eq!((p.dense_key_tiles, p.visited_key_tiles, p.interior_key_tiles), (4, 3, 1));
        assert!((p.skipped_fraction() - 0.25).abs() < 1e-12);
        // Full attention skips nothing.
        assert_eq!(plan(8, 8, 1, Mask::Full, 4, 4).skipped_fraction(), 0.0);
    }

    #[test]
    fn sliding_window_skips_most_of_a_long_sequence() {
        // n = 1024, window 64, 64-row and 32-key tiles: each query tile visits keys from
        // (q_lo - 63) to q_hi: 127 keys, starting unaligned, so 4 key tiles of the 32 a dense kernel visits.
        let p = plan(1024, 1024, 1, Mask::Sliding { window_tokens: 64 }, 64, 32);
        assert_eq!(p.tiles[5].key_tiles.len(), 4);
        assert_eq!(p.tiles[5].key_tiles[0].0, 5 * 64 - 63);
        assert!(p.skipped_fraction() > 0.85);
    }

    #[test]
    fn every_visible_pair_lies_in_a_visited_tile() {
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 5 }, Mask::Chunked { chunk_tokens: 7 }] {
            for (n_q, n_kv, g) in [(30, 30, 1), (30, 30, 4), (13, 40, 2), (1, 17, 3)] {
                let p = plan(n_q, n_kv, g, mask, 16, 8);
                let q_offset = n_kv - n_q;
                for i in 0..n_q {
                    for j in 0..n_kv {
                        if !mask.visible(q_offset + i, j) {
                            continue;
                        }
                        let covered = p.tiles.iter().any(|t| {
                            (t.q_lo..t.q_hi).contains(&i) && t.key_tiles.iter().any(|&(a, b, _)| (a..b).contains(&j))
                        });
                        assert!(covered, "{mask:?} {n_q}x{n_kv} g{g}: ({i}, {j}) not visited");
                    }
                }
                // Interior tiles really need no test: every row of the query tile sees every key of it.
                // The others, unless cut short by the end of the keys, are partly masked: some pair of
                // the tile is visible, some is not (a visited tile is never wholly masked).
                for t in &p.tiles {
                    for &(a, b, interior) in &t.key_tiles {
                        let pairs = (t.q_lo..t.q_hi).flat_map(|i| (a..b).map(move |j| (i, j)));
                        let seen = pairs.filter(|&(i, j)| mask.visible(q_offset + i, j)).count() as u32;
                        let area = (t.q_hi - t.q_lo) * (b - a);
                        assert!(seen > 0, "{mask:?}: a visited tile is wholly masked");
                        if interior {
                            assert_eq!(seen, area);
                        } else if b - a == 8 {
                            assert!(seen < area, "{mask:?}: tile ({a}, {b}) tests elements it need not");
                        }
                    }
                }
            }
        }
    }
}
