// Softmax of whole rows of scaled scores, for heatmaps. Three outputs (the constant OUTPUT):
//
// - OUT_PROBS: every probability of every row, [h_q, n_q, n_kv], from one pass over Q·Kᵀ. Scores go
//   to the output as they are computed, while each row keeps a running max and sum (online softmax);
//   then each invocation turns its own rows into exp(s - lse) in place. Masked keys get exactly 0.
//   For heads small enough to show whole (the n x n output must fit one buffer).
// - OUT_LSE: only each row's log-sum-exp, [h_q, n_q] (-inf for a row that sees no key), which
//   attention_probs.wgsl needs to pool large heads: the forward pass without its P·V half.
// - OUT_BLOCK_MAX / OUT_BLOCK_SUM: each row's probabilities pooled over blocks of keys (the largest,
//   or the sum), [h_q, n_q, key_blocks], in the same one pass; pool_rows.wgsl then pools rows, so a
//   long head becomes a heatmap without any n x n buffer and without a log-sum-exp pass first.
//
// Work split as in flash_attention.wgsl: a workgroup owns WG * R rows of one KV head, so the query
// heads of a GQA group share every K element read, and an invocation owns R consecutive rows (with
// R = G, one query of every head of the group: the same mask bounds). All invocations walk the same
// keys, from the workgroup's lowest visible key to its highest, one at a time; each K element read
// serves R rows. row_softmax_subgroup.wgsl is the same with K shared across a subgroup's lanes.
//
// D4 and R are compile-time constants: on CPU adapters (lavapipe, SwiftShader) the loops over them
// are written out by src/gpu/shader_text.rs, so the query rows and the key row stay out of memory.
// The key loop stays a loop, which keeps the code small and quick to compile.

// #include attention_io.wgsl

// #include attention_masks.wgsl
// #include blocks.wgsl

// Compile-time constants, rewritten by src/gpu/row_softmax.rs for each pipeline (these defaults keep
// the file valid as written).
// Head dimension / 4 (Rust pads heads to a multiple of 4 with zeros).
const D4: u32 = 16u;
// Rows each invocation owns.
const R: u32 = 1u;
// OUT_* of softmax_rows.wgsl.
const OUTPUT: u32 = 0u;
// 1 (heads up to 256): each key's row is read once into registers and serves the R rows. 0 (wider
// heads, one row per invocation): read straight from the buffer, as the copy would serve one row
// only and, beside the query row, pass WGSL's 8 KiB of function variables at d = 1,024.
const K_ROW: u32 = 1u - min(D4 / 65u, 1u);
// Vec4s of the key row copy (one, unused, without K_ROW).
const K4: u32 = D4 * K_ROW + 1u - K_ROW;

// #include softmax_rows.wgsl

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let tile = tile_of(at, WG * R);
    if tile.kv_head >= params.h_kv {
        return;
    }

    // This invocation's rows, before the walk: rows, q_rows, m, l, best, walk and first.
    // #include softmax_rows_start.wgsl

    let kv_base = tile.kv_head * params.kv_stride;
    for (var key = tile.key_lo; key < tile.key_hi; key++) {
        var k_row: array<vec4<f32>, K4>;
        if K_ROW == 1u {
            for (var e = 0u; e < D4; e++) {
                k_row[e * K_ROW] = k[(kv_base + key) * D4 + e];
            }
        }
        if BLOCKS && key >= walk.end {
            walk = close_block(rows, m, l, best, walk);
            best = no_scores();
        }
        for (var j = 0u; j < R; j++) {
            // The order row_softmax_subgroup.wgsl sums in too (the same bits from either form).
            var score = 0.0;
            for (var e = 0u; e < D4; e++) {
                if K_ROW == 1u {
                    score += dot(q_rows[j][e], k_row[e * K_ROW]);
                } else {
                    score += dot(q_rows[j][e], k[(kv_base + key) * D4 + e]);
                }
            }
            let mls = add_score(rows[j], key, score, m[j], l[j]);
            m[j] = mls.x;
            l[j] = mls.y;
            best[j] = max(best[j], mls.z);
        }
    }

    finish_rows(rows, m, l, best, walk, first, tile.key_lo < tile.key_hi);
}
