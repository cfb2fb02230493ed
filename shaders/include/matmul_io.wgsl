// The parameters, bindings and epilogue of both matmul kernels, matmul.wgsl and matmul_subgroup.wgsl
// (pasted in at their `// #include matmul_io.wgsl` line by src/gpu/shader_text.rs).

// Keep in sync with `MatmulParams` in src/gpu/matmul.rs.
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
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
// [outputs]; a 4-byte stand-in when has_bias is 0.
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// Y[r, c] = value (+ Y[r, c] with accumulate): the bias is already in `value`.
fn put(r: u32, c: u32, value: f32) {
    let at = r * params.outputs + c;
    if params.accumulate != 0u {
        y[at] += value;
    } else {
        y[at] = value;
    }
}

// Y[r, c] = sum + bias[c] (+ Y[r, c] with accumulate).
fn store(r: u32, c: u32, sum: f32) {
    var value = sum;
    if params.has_bias != 0u {
        value += bias[c];
    }
    put(r, c, value);
}

fn workgroup_index(wg_id: vec3<u32>, wg_count: vec3<u32>) -> u32 {
    // Large launches fold into a 2D grid (65535 workgroups per dimension).
    return wg_id.x + wg_id.y * wg_count.x;
}
