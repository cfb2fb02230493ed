// matmul_subgroup.wgsl's row stores, a vec4 at a time: Y rows are a whole number of vec4s, and a
// lane's COLS columns are QUADS vec4s. On CPU adapters every store to a buffer is a loop over the
// SIMD lanes, one scalar each, so a vec4 store costs about what one f32 store does: storing f32s
// took a third of the launch at the trained model's shapes on lavapipe.

@group(0) @binding(4) var<storage, read_write> y: array<vec4<f32>>;

// COLS / 4, rewritten by src/gpu/matmul_subgroup.rs.
const QUADS: u32 = 1u;

// Y[r, col0 + j] = values[j] (+= with accumulate), the vec4s past the end left out.
fn store_cols(r: u32, col0: u32, values: array<f32, COLS>) {
    let at4 = (r * params.outputs + col0) / 4u;
    for (var q = 0u; q < QUADS; q++) {
        if r < params.rows && col0 + 4u * q < params.outputs {
            var v = vec4<f32>(values[4u * q], values[4u * q + 1u], values[4u * q + 2u], values[4u * q + 3u]);
            if params.accumulate != 0u {
                v += y[at4 + q];
            }
            y[at4 + q] = v;
        }
    }
}
