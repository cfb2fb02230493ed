// The parameters and X and bias bindings of both matmul kernels, matmul.wgsl and matmul_subgroup.wgsl
// (pasted in at their `// #include matmul_io.wgsl` line by src/gpu/shader_text.rs). W's binding is
// in weights_f32.wgsl or weights_bf16.wgsl; Y's binding and stores are in matmul_y.wgsl (one f32 at
// a time) or matmul_subgroup_y4.wgsl (a vec4 at a time).

// Keep in sync with `MatmulParams` in src/gpu/matmul_io.rs.
struct Params {
    // Rows of Y; Y row r reads X row x_row0 + r (the logits of the last rows only).
    rows: u32,
    inputs4: u32,
    outputs: u32,
    x_row0: u32,
    has_bias: u32,
    accumulate: u32,
    // Workgroups across the outputs (the grid is row tiles x col_tiles, folded).
    col_tiles: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
// [outputs]; a 4-byte stand-in when has_bias is 0.
@group(0) @binding(3) var<storage, read> bias: array<f32>;

// #include grid.wgsl
