// row_softmax.wgsl for CPU-class adapters with subgroups (lavapipe, SwiftShader): same parameters,
// bindings, outputs and row bookkeeping, but K reaches the lanes by shuffling. Each lane of a
// subgroup reads one key's K row, and the subgroup passes the SG rows around with subgroupShuffle (a
// register move there), so a step of SG keys costs each lane one K row read instead of SG; on these
// adapters every buffer read is a loop of scalar loads, one per lane (see
// flash_attention_subgroup.wgsl). The loops over a step's keys, D4 and R are all written out (SG is
// a compile-time constant too): a shuffle from a constant lane is much cheaper on SwiftShader than
// one from a lane chosen at run time, and written out, src/gpu/row_softmax_subgroup.rs has each one
// made a broadcast from that lane (shader_text::constant_lanes: cheaper still there; WGSL takes a
// broadcast's lane only as a constant, so the text as written keeps the shuffle).
//
// Browsers need `enable subgroups;` first; src/gpu/row_softmax_subgroup.rs adds it on the web.

// #include attention_io.wgsl

// #include attention_masks.wgsl
// #include blocks.wgsl

// Compile-time constants, as in row_softmax.wgsl, and the adapter's subgroup size SG: keys per step,
// one per lane, and the workgroup size (one subgroup).
const D4: u32 = 16u;
const R: u32 = 1u;
const OUTPUT: u32 = 0u;
const SG: u32 = 8u;

// #include softmax_rows.wgsl

@compute @workgroup_size(SG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let tile = tile_of(at, SG * R);
    if tile.kv_head >= params.h_kv {
        return;
    }

    // This invocation's rows, before the walk: rows, q_rows, m, l, best, walk and first.
    // #include softmax_rows_start.wgsl

    // The key loop is the same for every lane (shuffles need the whole subgroup).
    let kv_base = tile.kv_head * params.kv_stride;
    for (var key0 = tile.key_lo; key0 < tile.key_hi; key0 += SG) {
        // The key this lane fetches (past n_kv: the last key; finite, and masked below).
        let my_key = (kv_base + min(key0 + lane, params.n_kv - 1u)) * D4;
        // Scores of the step's SG keys for the R rows, one K vec4 at a time: each lane holds one
        // vec4 of its key, and every row takes it from every lane. A score sums its dot products in
        // the order of row_softmax.wgsl, so both forms give the same bits and a shared link
        // reproduces the exact probabilities whichever form ran.
        var s = array<array<f32, SG>, R>();
        for (var e = 0u; e < D4; e++) {
            let mine = k[my_key + e];
            for (var c = 0u; c < SG; c++) {
                let kc = subgroupShuffle(mine, c);
                for (var j = 0u; j < R; j++) {
                    s[j][c] += dot(q_rows[j][e], kc);
                }
            }
        }
        for (var c = 0u; c < SG; c++) {
            // Keys past the walk (the last step's spare lanes) are masked for every row: no new block.
            if BLOCKS && key0 + c >= walk.end && key0 + c < tile.key_hi {
                walk = close_block(rows, m, l, best, walk);
                best = no_scores();
            }
            for (var j = 0u; j < R; j++) {
                let mls = add_score(rows[j], key0 + c, s[j][c], m[j], l[j]);
                m[j] = mls.x;
                l[j] = mls.y;
                best[j] = max(best[j], mls.z);
            }
        }
    }

    finish_rows(rows, m, l, best, walk, first, tile.key_lo < tile.key_hi);
}
