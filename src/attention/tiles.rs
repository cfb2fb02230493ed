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
    /// Every query tile with its key tiles, when they are few enough to list ([`MAX_LISTED_TILES`]);
    /// else empty (the counts below are exact either way).
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

/// Key tiles a plan lists one by one (for drawing); past this it only counts them, so a long head
/// costs neither memory nor a canvas of millions of rectangles.
pub const MAX_LISTED_TILES: u64 = 16_384;

/// The plan for `n_q` queries (the last rows of `n_kv` keys) in groups of `group` query heads per KV
/// head, with `rows_per_tile` rows per workgroup and `keys_per_tile` keys per K/V tile.
pub fn plan(n_q: u32, n_kv: u32, group: u32, mask: Mask, rows_per_tile: u32, keys_per_tile: u32) -> TilePlan {
    plan_listing(n_q, n_kv, group, mask, (rows_per_tile, keys_per_tile), MAX_LISTED_TILES)
}

/// [`plan`], listing the tiles only while they number at most `max_listed` (`tiles` is empty past it).
fn plan_listing(n_q: u32, n_kv: u32, group: u32, mask: Mask, (br, bc): (u32, u32), max_listed: u64) -> TilePlan {
    let (g, br, bc) = (u64::from(group.max(1)), u64::from(br.max(1)), u64::from(bc.max(1)));
    let q_offset = u64::from(n_kv.saturating_sub(n_q));
    let rows_total = u64::from(n_q) * g;
    let mut tiles = Vec::new();
    let (mut visited, mut interior_count, mut query_tiles) = (0u64, 0u64, 0u64);
    let mut row0 = 0;
    while row0 < rows_total {
        let row_end = (row0 + br).min(rows_total);
        let (q_lo, q_last) = (row0 / g, (row_end - 1) / g);
        let (first_pos, last_pos) = ((q_offset + q_lo) as u32, (q_offset + q_last) as u32);
        // Visible ranges only move right with the position: the tile's union spans the first row's
        // low end to the last row's high end, and the keys every row sees the reverse.
        let ((tile_lo, all_hi), (all_lo, tile_hi)) = (mask.key_range(first_pos, n_kv), mask.key_range(last_pos, n_kv));
        let (tile_lo, tile_hi, all_lo, all_hi) =
            (u64::from(tile_lo), u64::from(tile_hi), u64::from(all_lo), u64::from(all_hi));
        let count = tile_hi.saturating_sub(tile_lo).div_ceil(bc);
        // Key tile k starts at tile_lo + k·bc; it is interior when it lies within all_lo..all_hi.
        let first_inside = all_lo.saturating_sub(tile_lo).div_ceil(bc);
        let past_inside = if all_hi >= tile_lo + bc { (all_hi - tile_lo - bc) / bc + 1 } else { 0 };
        interior_count += past_inside.min(count).saturating_sub(first_inside);
        visited += count;
        query_tiles += 1;
        if visited <= max_listed {
            let key_tiles = (0..count)
                .map(|k| tile_lo + k * bc)
                .map(|key0| {
                    (key0 as u32, (key0 + bc).min(u64::from(n_kv)) as u32, key0 >= all_lo && key0 + bc <= all_hi)
                })
                .collect();
            // When BR is not a multiple of G, neighbouring tiles share a query; each keeps its own range.
            tiles.push(QueryTile { q_lo: q_lo as u32, q_hi: q_last as u32 + 1, key_tiles });
        }
        row0 = row_end;
    }
    if visited > max_listed {
        tiles.clear();
    }
    let dense = query_tiles * u64::from(n_kv).div_ceil(bc);
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
    fn counting_without_listing_gives_the_same_counts() {
        let counts = |p: &TilePlan| (p.dense_key_tiles, p.visited_key_tiles, p.interior_key_tiles);
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 5 }, Mask::Chunked { chunk_tokens: 7 }] {
            for (n_q, n_kv, g, br, bc) in
                [(30, 30, 1, 16, 8), (30, 30, 4, 16, 8), (13, 40, 2, 8, 4), (100, 100, 3, 64, 32)]
            {
                let listed = plan_listing(n_q, n_kv, g, mask, (br, bc), u64::MAX);
                let counted = plan_listing(n_q, n_kv, g, mask, (br, bc), 0);
                assert_eq!(counts(&listed), counts(&counted), "{mask:?} {n_q}x{n_kv} g{g}");
                assert!(counted.tiles.is_empty());
                let tiles_listed: u64 = listed.tiles.iter().map(|t| t.key_tiles.len() as u64).sum();
                let interior_listed = listed.tiles.iter().flat_map(|t| &t.key_tiles).filter(|k| k.2).count() as u64;
                assert_eq!((tiles_listed, interior_listed), (listed.visited_key_tiles, listed.interior_key_tiles));
            }
        }
    }

    #[test]
    fn a_long_head_is_counted_not_listed() {
        // 65,536 causal queries in 8-row, 8-key tiles: 8,192 query tiles, 8,192 x 8,193 / 2 visited.
        let p = plan(65_536, 65_536, 1, Mask::Causal, 8, 8);
        assert!(p.tiles.is_empty());
        assert_eq!(p.visited_key_tiles, 8_192 * 8_193 / 2);
        assert_eq!(p.dense_key_tiles, 8_192 * 8_192);
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
