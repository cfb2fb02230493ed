// QK-norm (Qwen3, OLMo-style per-head norms): RMSNorm of each query and each key head on its own,
// times (offset + a weight) shared by all query heads (and one shared by all key heads; the offset is
// 1 for Gemma 3, which stores weights as w - 1, else 0), applied in place to the
// fused Q/K/V projection [tokens, (h_q + 2 h_kv) * d] before rotary positions. Value heads pass.
//
// One invocation per (token, head) of the h_q + h_kv query and key heads: a head is at most 1,024
// floats, so a loop per invocation needs no barrier (as rms_norm.wgsl).

// Keep in sync with `QkNormParams` in src/gpu/qk_norm.rs.
struct Params {
    tokens: u32,
    h_q: u32,
    h_kv: u32,
    // The head width / 4.
    d4: u32,
    eps: f32,
    offset: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [2, d] as vec4s: the query heads' weight, then the key heads'.
@group(0) @binding(1) var<storage, read> weight: array<vec4<f32>>;
// [tokens, (h_q + 2 h_kv) * d] as vec4s, normalised in place.
@group(0) @binding(2) var<storage, read_write> qkv: array<vec4<f32>>;

// #include grid.wgsl

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let normed = params.h_q + params.h_kv;
    let id = invocation_index(at, lid);
    if id >= params.tokens * normed {
        return;
    }
    let token = id / normed;
    let head = id % normed;
    let base = (token * (normed + params.h_kv) + head) * params.d4;
    let w0 = select(0u, params.d4, head >= params.h_q);
    var sum_squares = 0.0;
    for (var e = 0u; e < params.d4; e++) {
        let v = qkv[base + e];
        sum_squares += dot(v, v);
    }
    let inv_rms = inverseSqrt(sum_squares / f32(params.d4 * 4u) + params.eps);
    for (var e = 0u; e < params.d4; e++) {
        qkv[base + e] = qkv[base + e] * inv_rms * (params.offset + weight[w0 + e]);
    }
}
