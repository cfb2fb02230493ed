// Rotary positions and the head layouts around attention. Two entry points:
//
// - `split_heads`: from the fused Q/K/V projection, [tokens, (h_q + 2 h_kv) * d] (each token's query
//   heads, then its key heads, then its value heads), to the layouts the attention kernels take, Q
//   [h_q, tokens, d], K and V [h_kv, tokens, d], rotating Q and K on the way ("rotate half": pair j is
//   dimensions (j, j + offset), turned by the angle of pair j at the token's position).
// - `merge_heads`: attention's O [h_q, tokens, d] back to [tokens, h_q * d] for the output projection.
//
// One invocation per output element. The angles come from the CPU's own table (cos and sin of pair j
// at position t, [tokens, pairs]), so both sides rotate by the same f32 numbers.

// Keep in sync with `RopeParams` in src/gpu/rope.rs.
struct Params {
    tokens: u32,
    h_q: u32,
    h_kv: u32,
    // The head width (a multiple of 4).
    d: u32,
    // Rotating pairs (<= d / 2) and the distance between a pair's two dimensions.
    pairs: u32,
    offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Bindings 0-2 are both entry points' (merge_heads binds only those); 3-5 are split_heads' alone.
// split_heads: [tokens, (h_q + 2 h_kv) * d]. merge_heads: O, [h_q, tokens, d].
@group(0) @binding(1) var<storage, read> src: array<f32>;
// split_heads: Q, [h_q, tokens, d]. merge_heads: [tokens, h_q * d].
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
// (cos, sin) of pair j at position t, [tokens, pairs].
@group(0) @binding(3) var<storage, read> angles: array<vec2<f32>>;
// K and V, [h_kv, tokens, d].
@group(0) @binding(4) var<storage, read_write> k: array<f32>;
@group(0) @binding(5) var<storage, read_write> v: array<f32>;

override WG: u32 = 64u;

fn linear_id(wg_id: vec3<u32>, wg_count: vec3<u32>, lid: u32) -> u32 {
    // Large launches fold into a 2D grid (65535 workgroups per dimension).
    return (wg_id.x + wg_id.y * wg_count.x) * WG + lid;
}

// Element j of head `head` of token t after rotation (heads < h_q + h_kv rotate, V heads do not).
fn rotated(row: u32, head: u32, t: u32, j: u32) -> f32 {
    let x = src[row + head * params.d + j];
    if head >= params.h_q + params.h_kv {
        return x;
    }
    if j < params.pairs {
        let cs = angles[t * params.pairs + j];
        return x * cs.x - src[row + head * params.d + j + params.offset] * cs.y;
    }
    if j >= params.offset && j < params.offset + params.pairs {
        let cs = angles[t * params.pairs + j - params.offset];
        return x * cs.x + src[row + head * params.d + j - params.offset] * cs.y;
    }
    return x;
}

@compute @workgroup_size(WG)
fn split_heads(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(num_workgroups) wg_count: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = linear_id(wg_id, wg_count, lid);
    let heads = params.h_q + 2u * params.h_kv;
    if i >= params.tokens * heads * params.d {
        return;
    }
    let j = i % params.d;
    let head = (i / params.d) % heads;
    let t = i / (params.d * heads);
    let value = rotated(t * heads * params.d, head, t, j);
    if head < params.h_q {
        dst[(head * params.tokens + t) * params.d + j] = value;
    } else if head < params.h_q + params.h_kv {
        k[((head - params.h_q) * params.tokens + t) * params.d + j] = value;
    } else {
        v[((head - params.h_q - params.h_kv) * params.tokens + t) * params.d + j] = value;
    }
}

@compute @workgroup_size(WG)
fn merge_heads(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(num_workgroups) wg_count: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = linear_id(wg_id, wg_count, lid);
    if i >= params.tokens * params.h_q * params.d {
        return;
    }
    let j = i % params.d;
    let head = (i / params.d) % params.h_q;
    let t = i / (params.d * params.h_q);
    dst[i] = src[(head * params.tokens + t) * params.d + j];
}
