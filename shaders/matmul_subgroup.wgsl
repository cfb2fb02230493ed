// Y = X Wᵀ + bias (or Y +=) as matmul.wgsl computes it, for CPU adapters with subgroups (lavapipe,
// SwiftShader), where every buffer load is a scalar load per SIMD lane and a subgroup shuffle is a
// register move.
//
// A workgroup is one subgroup of LANES lanes and owns LANES * RB rows of Y; each lane owns COLS
// columns. At every step (one vec4 of the inputs) a lane loads its COLS W vec4s and RB X vec4s (rows
// lane, lane + LANES, ...), and the subgroup passes the X vec4s around with subgroupShuffle, so each
// lane's COLS + RB loads feed LANES * RB * COLS dot products (matmul.wgsl's `direct` needs a load per
// row as well as per column). LANES, RB and COLS are compile-time constants, and
// src/gpu/matmul_subgroup.rs writes their loops out so the blocks stay in registers.
//
// Y's binding and row stores come from matmul_subgroup_y4.wgsl (vec4s), or matmul_subgroup_y.wgsl
// (f32s) where the owner swaps it in.
//
// Browsers need `enable subgroups;` first; Naga rejects that line but accepts the builtins without
// it, so the owner adds it on the web.

// #include matmul_io.wgsl
// #include weights_f32.wgsl
// #include matmul_subgroup_y4.wgsl

// Compile-time constants, rewritten by src/gpu/matmul_subgroup.rs (these defaults keep the file valid).
// The subgroup size; X rows each lane loads per step; Y columns each lane owns.
const LANES: u32 = 8u;
const RB: u32 = 1u;
const COLS: u32 = 4u;

@compute @workgroup_size(LANES)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let wg = workgroup_index(at);
    let row0 = (wg / params.col_tiles) * (LANES * RB);
    if row0 >= params.rows {
        return; // a spare workgroup of a folded grid: the whole subgroup leaves
    }
    let col0 = ((wg % params.col_tiles) * LANES + lane) * COLS;
    // Rows and columns past the end read the last one (in bounds) and are not written.
    var x_at: array<u32, RB>;
    for (var i = 0u; i < RB; i++) {
        x_at[i] = (params.x_row0 + min(row0 + lane + LANES * i, params.rows - 1u)) * params.inputs4;
    }
    var w_at: array<u32, COLS>;
    for (var j = 0u; j < COLS; j++) {
        w_at[j] = min(col0 + j, params.outputs - 1u) * params.inputs4;
    }
    // acc[i][s][j]: row row0 + s + LANES * i, column col0 + j.
    var acc: array<array<array<f32, COLS>, LANES>, RB>;
    for (var e = 0u; e < params.inputs4; e++) {
        var ws: array<vec4<f32>, COLS>;
        for (var j = 0u; j < COLS; j++) {
            ws[j] = w4(w_at[j] + e);
        }
        for (var i = 0u; i < RB; i++) {
            let mine = x[x_at[i] + e];
            for (var s = 0u; s < LANES; s++) {
                let xs = subgroupShuffle(mine, s);
                for (var j = 0u; j < COLS; j++) {
                    acc[i][s][j] += dot(xs, ws[j]);
                }
            }
        }
    }
    // The bias of this lane's columns, read once for all its rows.
    var col_bias: array<f32, COLS>;
    if params.has_bias != 0u {
        for (var j = 0u; j < COLS; j++) {
            col_bias[j] = bias[min(col0 + j, params.outputs - 1u)];
        }
    }
    for (var i = 0u; i < RB; i++) {
        for (var s = 0u; s < LANES; s++) {
            var values: array<f32, COLS>;
            for (var j = 0u; j < COLS; j++) {
                values[j] = acc[i][s][j] + col_bias[j];
            }
            store_cols(row0 + s + LANES * i, col0, values);
        }
    }
}
