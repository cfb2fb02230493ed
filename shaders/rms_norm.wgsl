// RMSNorm of rows: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * (offset + weight), the norm
// before each attention and MLP block and after the last layer (offset 1 for Gemma, which stores
// weights as w - 1), or, accumulating, out[r, :] += that (Gemma 3's norms on each block's output,
// added to the residual stream).
//
// One invocation per row: rows are a few hundred floats wide, so the whole norm costs less than a
// read of the matmul's weights, and a row per invocation needs no barrier (barriers are slow on CPU
// adapters, where invocations are SIMD lanes).

// Keep in sync with `NormParams` in src/gpu/rms_norm.rs.
struct Params {
    rows: u32,
    // The row width / 4.
    width4: u32,
    eps: f32,
    offset: f32,
    // 1: add to out; 0: write out.
    accumulate: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [rows, width] as vec4s.
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
// [width] as vec4s.
@group(0) @binding(2) var<storage, read> weight: array<vec4<f32>>;
// [rows, width] as vec4s.
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

// #include grid.wgsl

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let row = invocation_index(at, lid);
    if row >= params.rows {
        return;
    }
    let base = row * params.width4;
    var sum_squares = 0.0;
    for (var e = 0u; e < params.width4; e++) {
        let v = x[base + e];
        sum_squares += dot(v, v);
    }
    let inv_rms = inverseSqrt(sum_squares / f32(params.width4 * 4u) + params.eps);
    for (var e = 0u; e < params.width4; e++) {
        let normed = x[base + e] * inv_rms * (params.offset + weight[e]);
        // A branch, not a product with 0: out may hold anything (even NaN) when written afresh.
        if params.accumulate != 0u {
            out[base + e] += normed;
        } else {
            out[base + e] = normed;
        }
    }
}
