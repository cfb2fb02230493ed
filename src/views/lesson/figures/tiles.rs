//! Figures of the tiled kernel's grid over the explorer's head: the tile a GPU uses and the tiles its
//! mask lets it skip, counted by the function the heatmap's tile overlay draws with.

use super::sources::explorer;
use super::written::{Figure, Unit, whole};
use crate::gpu::naive_attention::scores_bytes;
use crate::model::Model;
use crate::views::heatmaps::tile_grid::{TileGrid, tile_grid, web_gpu_tile_bytes};
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let grid = || -> Option<(TileGrid, u32, u32)> {
        let request = explorer(state, model)?;
        let (n_q, n_kv) = (request.n_q(), request.n_kv());
        Some((tile_grid(n_q, n_kv, &request.layout, request.mask, None), n_q, n_kv))
    };
    let (unit, value): (Unit, u64) = match name {
        "tile_rows" => (Unit::Count, grid()?.0.rows_per_tile.into()),
        "tile_keys" => (Unit::Count, grid()?.0.keys_per_tile.into()),
        "tile_kv_bytes" => (Unit::Bytes, web_gpu_tile_bytes(explorer(state, model)?.layout.head_dim).into()),
        "head_scores_bytes" => {
            let (_, n_q, n_kv) = grid()?;
            let shape = crate::attention::AttentionShape { h_q: 1, h_kv: 1, n_q, n_kv, d: 1 };
            (Unit::Bytes, scores_bytes(&shape))
        }
        "query_tiles" => (Unit::Count, grid()?.0.plan.tiles.len() as u64),
        "key_tile_columns" => {
            let (g, _, n_kv) = grid()?;
            (Unit::Count, n_kv.div_ceil(g.keys_per_tile.max(1)).into())
        }
        "tiles_in_grid" => (Unit::Count, grid()?.0.plan.dense_key_tiles),
        "tiles_visited" => (Unit::Count, grid()?.0.plan.visited_key_tiles),
        "tiles_skipped" => (Unit::Count, grid()?.0.skipped_key_tiles()),
        "tiles_interior" => (Unit::Count, grid()?.0.plan.interior_key_tiles),
        "tiles_edge" => (Unit::Count, grid()?.0.edge_key_tiles()),
        _ => return None,
    };
    Some(whole(value.into(), unit))
}

#[cfg(test)]
mod tests {
    use super::super::tests::exact;

    #[test]
    fn gpt2_tiles_by_hand() {
        // GPT-2 small: heads of 64, one per KV group. On a GPU: 64 rows x 32 keys per tile, K and V tiles
        // of 2 x 32 x 64 x 4 B = 16,384 B. 256 queries: 4 x 8 = 32 tiles; one head's f32 scores
        // 256 x 256 x 4 = 262,144 B.
        let q = "model=gpt2-small&n=256&mask=causal";
        for (name, value) in [
            ("tile_rows", "64"),
            ("tile_keys", "32"),
            ("tile_kv_bytes", "16384"),
            ("head_scores_bytes", "262144"),
            ("query_tiles", "4"),
            ("key_tile_columns", "8"),
            ("tiles_in_grid", "32"),
            // Causal: query tile i reads 2(i + 1) key tiles: 20 visited, 12 skipped; the two on each
            // diagonal are partly masked (8), the 0 + 2 + 4 + 6 = 12 left of them whole.
            ("tiles_visited", "20"),
            ("tiles_skipped", "12"),
            ("tiles_interior", "12"),
            ("tiles_edge", "8"),
        ] {
            assert_eq!(exact(name, q), value, "{name}");
        }
        // Window 64: 2 + 3 x 4 = 14 visited (see tile_grid's tests), 18 skipped, none whole.
        let q = "model=gpt2-small&n=256&mask=sliding&window=64";
        assert_eq!(
            (exact("tiles_visited", q), exact("tiles_skipped", q), exact("tiles_edge", q)),
            ("14".into(), "18".into(), "14".into())
        );
        // Chunks of 128: 2 + 4 + 2 + 4 = 12 visited, 4 whole, 20 skipped.
        let q = "model=gpt2-small&n=256&mask=chunked&chunk=128";
        assert_eq!(
            (exact("tiles_visited", q), exact("tiles_interior", q), exact("tiles_skipped", q)),
            ("12".into(), "4".into(), "20".into())
        );
        // Full attention skips nothing.
        assert_eq!(exact("tiles_skipped", "model=gpt2-small&n=256&mask=full"), "0");
    }
}
