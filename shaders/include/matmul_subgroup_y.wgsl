// matmul_subgroup.wgsl's row stores, one f32 at a time: for Y rows that are not a whole number of
// vec4s (matmul_subgroup_y4.wgsl is the fast form; src/gpu/matmul_subgroup.rs picks).

// #include matmul_y.wgsl

// Y[r, col0 + j] = values[j] (+= with accumulate), the columns past the end left out.
fn store_cols(r: u32, col0: u32, values: array<f32, COLS>) {
    for (var j = 0u; j < COLS; j++) {
        if r < params.rows && col0 + j < params.outputs {
            put(r, col0 + j, values[j]);
        }
    }
}
