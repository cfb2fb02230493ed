//! The tile grid drawn over the enlarged head: which tiles the tiled forward kernel would visit for
//! this head under its mask, with the tile sizes of this page's adapter, or those every WebGPU GPU
//! picks when the page computes on the CPU. The lessons count tiles with the same function.

use crate::attention::layer_inputs::LayerLayout;
use crate::attention::tiles::{TilePlan, plan};
use crate::gpu::flash_tiles::FlashTiles;
use crate::gpu::launch::padded_dim;
use crate::model::Mask;

/// The kernel's plan for one head and the tile it was made with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileGrid {
    pub plan: TilePlan,
    /// (query, head) rows per tile: with a KV group of G heads, a tile holds rows / G queries.
    pub rows_per_tile: u32,
    pub keys_per_tile: u32,
    pub group: u32,
    /// Whether the sizes are this adapter's own (else: what a WebGPU GPU picks).
    pub adapter_tiles: bool,
}

impl TileGrid {
    /// Key tiles inside the loop that still test every element (partly masked, or cut by the end of
    /// the keys): visited minus interior.
    pub fn edge_key_tiles(&self) -> u64 {
        self.plan.visited_key_tiles - self.plan.interior_key_tiles
    }

    /// Key tiles skipped without being loaded: the grid minus those visited.
    pub fn skipped_key_tiles(&self) -> u64 {
        self.plan.dense_key_tiles - self.plan.visited_key_tiles
    }

    /// The line under the enlarged head.
    pub fn stats_text(&self) -> String {
        let p = &self.plan;
        format!(
            "Tiled kernel: {} (query, head) rows × {} keys per tile{}, {} head(s) per KV group. It visits {} of {} \
             key tiles ({} interior, no per-element mask test): the mask lets it skip {:.1}% of the work. Dim \
             areas are skipped; orange tiles test each element.{}",
            self.rows_per_tile,
            self.keys_per_tile,
            if self.adapter_tiles { "" } else { " (what a GPU picks: this page computes on the CPU)" },
            self.group,
            p.visited_key_tiles,
            p.dense_key_tiles,
            p.interior_key_tiles,
            p.skipped_fraction() * 100.0,
            if p.tiles.is_empty() && p.visited_key_tiles > 0 {
                " Too many tiles to draw at this length; the counts are exact."
            } else {
                ""
            }
        )
    }
}

/// The grid for `n_q` queries over `n_kv` keys of a head of `layout` under `mask`; `adapter` is the
/// engine's (rows, keys) when it has a GPU ([`crate::engine::Engine::flash_tiles`]).
pub fn tile_grid(n_q: u32, n_kv: u32, layout: &LayerLayout, mask: Mask, adapter: Option<(u32, u32)>) -> TileGrid {
    let group = layout.group_size();
    let (rows_per_tile, keys_per_tile) = adapter.unwrap_or_else(|| web_gpu_tile(layout.head_dim, n_q * group));
    TileGrid {
        plan: plan(n_q, n_kv, group, mask, rows_per_tile, keys_per_tile),
        rows_per_tile,
        keys_per_tile,
        group,
        adapter_tiles: adapter.is_some(),
    }
}

/// (rows, keys) of the tile every WebGPU GPU uses for `rows_total` rows of `head_dim`-wide heads.
pub fn web_gpu_tile(head_dim: u32, rows_total: u32) -> (u32, u32) {
    let d_pad = padded_dim(head_dim);
    let tiles = FlashTiles::web_gpu(d_pad).for_rows(d_pad, rows_total);
    (tiles.rows_per_tile(d_pad), tiles.keys_per_tile)
}

/// Workgroup memory of one K and one V tile of `head_dim`-wide heads on a WebGPU GPU: what the kernel
/// holds instead of a row of scores.
pub fn web_gpu_tile_bytes(head_dim: u32) -> u32 {
    let d_pad = padded_dim(head_dim);
    FlashTiles::web_gpu(d_pad).workgroup_bytes(d_pad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn layout(id: &str) -> LayerLayout {
        LayerLayout::of(preset(id).unwrap(), 0)
    }

    #[test]
    fn gpt2_causal_by_hand() {
        // GPT-2: 12 heads of 64, one per KV group. A GPU: 64 rows x 32 keys (2 x 32 x 64 x 4 B = 16 KiB).
        // 256 queries: 4 query tiles x 8 key tiles = 32. Causal: query tile i (queries 64i..64i+63)
        // reads keys 0..64i+64, 2(i+1) key tiles: 2 + 4 + 6 + 8 = 20 visited, 12 skipped. The 2i tiles
        // left of its diagonal are seen whole by every row (0 + 2 + 4 + 6 = 12 interior); the 2 on
        // the diagonal are partly masked (8 edge tiles).
        let g = tile_grid(256, 256, &layout("gpt2-small"), Mask::Causal, None);
        assert_eq!((g.rows_per_tile, g.keys_per_tile, g.group, g.adapter_tiles), (64, 32, 1, false));
        assert_eq!((g.plan.tiles.len(), g.plan.dense_key_tiles, g.plan.visited_key_tiles), (4, 32, 20));
        assert_eq!((g.plan.interior_key_tiles, g.edge_key_tiles(), g.skipped_key_tiles()), (12, 8, 12));
        assert_eq!(web_gpu_tile_bytes(64), 16384);
        assert_eq!(
            g.stats_text(),
            "Tiled kernel: 64 (query, head) rows × 32 keys per tile (what a GPU picks: this page computes on the \
             CPU), 1 head(s) per KV group. It visits 20 of 32 key tiles (12 interior, no per-element mask test): \
             the mask lets it skip 37.5% of the work. Dim areas are skipped; orange tiles test each element."
        );
    }

    #[test]
    fn sliding_and_chunked_by_hand() {
        let gpt2 = layout("gpt2-small");
        // Window 64: query tile i >= 1 reads keys 64i-63 ..= 64i+63, 127 keys from an unaligned start:
        // 4 key tiles; tile 0 reads 0..64, 2 tiles. 2 + 3 x 4 = 14 of 32, none seen whole by all 64 rows.
        let g = tile_grid(256, 256, &gpt2, Mask::Sliding { window_tokens: 64 }, None);
        assert_eq!((g.plan.visited_key_tiles, g.plan.interior_key_tiles, g.skipped_key_tiles()), (14, 0, 18));
        // Chunks of 128: tiles 0 and 2 start a chunk (keys of their chunk up to their last query, 2 tiles);
        // tiles 1 and 3 read their chunk's 128 keys, 4 tiles, the 2 before their first query whole.
        let g = tile_grid(256, 256, &gpt2, Mask::Chunked { chunk_tokens: 128 }, None);
        assert_eq!((g.plan.visited_key_tiles, g.plan.interior_key_tiles, g.skipped_key_tiles()), (12, 4, 20));
    }

    #[test]
    fn groups_share_a_tile_and_the_adapter_decides_when_it_can() {
        // Llama 3 8B: 4 query heads per KV head of 128 dims: 16 keys per tile, and a 64-row tile holds
        // 16 queries. 256 queries x 4 = 1024 rows: 16 query tiles x 16 key tiles = 256.
        let g = tile_grid(256, 256, &layout("llama-3-8b"), Mask::Full, None);
        assert_eq!((g.rows_per_tile, g.keys_per_tile, g.group), (64, 16, 4));
        assert_eq!((g.plan.tiles.len(), g.plan.dense_key_tiles, g.plan.tiles[1].q_lo), (16, 256, 16));
        assert_eq!(g.skipped_key_tiles(), 0);
        // Six words, one head per group: 6 rows need 8 invocations.
        assert_eq!(web_gpu_tile(64, 6), (8, 32));
        let own = tile_grid(256, 256, &layout("gpt2-small"), Mask::Causal, Some((64, 8)));
        assert!(
            own.adapter_tiles
                && own.stats_text().starts_with("Tiled kernel: 64 (query, head) rows × 8 keys per tile, 1")
        );
        assert_eq!(own.plan.dense_key_tiles, 4 * 32);
    }
}
