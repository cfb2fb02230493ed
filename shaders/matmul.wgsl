// Y = X Wᵀ + bias, the model's projections: X [rows, inputs], W [outputs, inputs] as PyTorch stores
// it (each output's weights contiguous), optional bias [outputs]; with `accumulate`, Y += X Wᵀ + bias
// (the residual add, fused into the epilogue). Two entry points, one per kind of adapter:
//
// - `tiled` (GPUs): a workgroup of 16 x 16 invocations owns a 64 x 64 tile of Y; each step stages 16
//   inputs of 64 X rows and of 64 W rows in workgroup memory, and each invocation accumulates a 4 x 4
//   block of Y from them (rows ty, ty + 16, ..., columns tx, tx + 16, ...).
// - `direct` (CPU adapters: lavapipe, SwiftShader): every load there is a scalar load per SIMD lane
//   and a barrier is costly, so there is no staging. A workgroup of WG lanes shares ROWS rows of X
//   (addresses the same in every lane: one load, broadcast) and each lane owns COLS columns of W; each
//   W vec4 a lane loads serves ROWS outputs. ROWS and COLS are compile-time constants, and
//   src/gpu/matmul.rs writes their loops out (src/gpu/shader_text.rs) so the blocks stay in registers.
//
// `inputs` is a multiple of 4 (rows are read as vec4s); rows and outputs may be anything. On CPU
// adapters with subgroups, matmul_subgroup.wgsl replaces `direct`.

// #include matmul_io.wgsl
// #include weights_f32.wgsl
// #include matmul_y.wgsl

// ---- tiled ----

// Rows and columns of Y per workgroup, invocations per side, Y rows (and columns) per invocation.
const TILE: u32 = 64u;
const SIDE: u32 = 16u;
const PER: u32 = 4u;
// vec4s of the inputs per step: 16 inputs.
const STEP4: u32 = 4u;

// [TILE, STEP4] each: 2 x 4 KiB.
var<workgroup> x_tile: array<vec4<f32>, 256>;
var<workgroup> w_tile: array<vec4<f32>, 256>;

@compute @workgroup_size(256)
fn tiled(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let wg = workgroup_index(at);
    let row0 = (wg / params.col_tiles) * TILE;
    let col0 = (wg % params.col_tiles) * TILE;
    if row0 >= params.rows {
        return; // a spare workgroup of a folded grid: the whole workgroup leaves
    }
    let tx = lid % SIDE;
    let ty = lid / SIDE;
    // Each invocation stages one vec4 of X and one of W per step: tile row lid / STEP4, vec4 lid % STEP4.
    let load_row = lid / STEP4;
    let load_e = lid % STEP4;
    var acc: array<array<f32, PER>, PER>;
    for (var k0 = 0u; k0 < params.inputs4; k0 += STEP4) {
        let e = k0 + load_e;
        var xv = vec4<f32>(0.0);
        if row0 + load_row < params.rows && e < params.inputs4 {
            xv = x[(params.x_row0 + row0 + load_row) * params.inputs4 + e];
        }
        var wv = vec4<f32>(0.0);
        if col0 + load_row < params.outputs && e < params.inputs4 {
            wv = w4((col0 + load_row) * params.inputs4 + e);
        }
        x_tile[lid] = xv;
        w_tile[lid] = wv;
        workgroupBarrier();
        for (var s = 0u; s < STEP4; s++) {
            var xs: array<vec4<f32>, PER>;
            for (var i = 0u; i < PER; i++) {
                xs[i] = x_tile[(ty + SIDE * i) * STEP4 + s];
            }
            for (var j = 0u; j < PER; j++) {
                let ws = w_tile[(tx + SIDE * j) * STEP4 + s];
                for (var i = 0u; i < PER; i++) {
                    acc[i][j] += dot(xs[i], ws);
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < PER; i++) {
        for (var j = 0u; j < PER; j++) {
            let r = row0 + ty + SIDE * i;
            let c = col0 + tx + SIDE * j;
            if r < params.rows && c < params.outputs {
                store(r, c, acc[i][j]);
            }
        }
    }
}

// ---- direct ----

// Compile-time constants, rewritten by src/gpu/matmul.rs (these defaults keep the file valid).
// Rows of Y per workgroup (shared by its lanes) and columns per lane.
const ROWS: u32 = 4u;
const COLS: u32 = 4u;

// Lanes per workgroup: WG (grid.wgsl), which src/gpu/matmul.rs always sets.
@compute @workgroup_size(WG)
fn direct(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let wg = workgroup_index(at);
    let row0 = (wg / params.col_tiles) * ROWS;
    if row0 >= params.rows {
        return;
    }
    let col0 = ((wg % params.col_tiles) * WG + lid) * COLS;
    // Rows and columns past the end read the last one (in bounds) and are not written.
    var x_at: array<u32, ROWS>;
    for (var i = 0u; i < ROWS; i++) {
        x_at[i] = (params.x_row0 + min(row0 + i, params.rows - 1u)) * params.inputs4;
    }
    var w_at: array<u32, COLS>;
    for (var j = 0u; j < COLS; j++) {
        w_at[j] = min(col0 + j, params.outputs - 1u) * params.inputs4;
    }
    var acc: array<array<f32, COLS>, ROWS>;
    for (var e = 0u; e < params.inputs4; e++) {
        var xs: array<vec4<f32>, ROWS>;
        for (var i = 0u; i < ROWS; i++) {
            xs[i] = x[x_at[i] + e];
        }
        for (var j = 0u; j < COLS; j++) {
            let ws = w4(w_at[j] + e);
            for (var i = 0u; i < ROWS; i++) {
                acc[i][j] += dot(xs[i], ws);
            }
        }
    }
    for (var i = 0u; i < ROWS; i++) {
        for (var j = 0u; j < COLS; j++) {
            if row0 + i < params.rows && col0 + j < params.outputs {
                store(row0 + i, col0 + j, acc[i][j]);
            }
        }
    }
}
