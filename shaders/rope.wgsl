// Rotary positions and the head layouts around attention. Two entry points:
//
// - `split_heads`: from the fused Q/K/V projection, [tokens, (h_q + 2 h_kv) * d] (each token's query
//   heads, then its key heads, then its value heads), to the layouts the attention kernels take, Q
//   [h_q, tokens, d], K and V [h_kv, tokens, d], rotating Q and K on the way ("rotate half": pair j is
//   dimensions (j, j + offset), turned by the angle of pair j at the token's position).
// - `merge_heads`: attention's O [h_q, tokens, d] back to [tokens, h_q * d] for the output projection.
//
// One invocation per vec4 of the output (head widths, rotating pairs and the pair offset are multiples
// of 4, checked in Rust, so a vec4 never straddles the rotating and the passing dimensions). The
// angles come from the CPU's own table (cos and sin of pair j at position t, [tokens, pairs]), so both
// sides rotate by the same f32 numbers.

// Keep in sync with `RopeParams` in src/gpu/rope.rs.
struct Params {
    tokens: u32,
    h_q: u32,
    h_kv: u32,
    // The head width / 4.
    d4: u32,
    // Rotating pairs (<= d / 2) and the distance between a pair's two dimensions.
    pairs: u32,
    offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Bindings 0-2 are both entry points' (merge_heads binds only those); 3-5 are split_heads' alone.
// split_heads: [tokens, (h_q + 2 h_kv) * d]. merge_heads: O, [h_q, tokens, d]. All as vec4s.
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
// split_heads: Q, [h_q, tokens, d]. merge_heads: [tokens, h_q * d].
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;
// (cos, sin) of pair j at position t, [tokens, pairs], two pairs per vec4.
@group(0) @binding(3) var<storage, read> angles: array<vec4<f32>>;
// K and V, [h_kv, tokens, d].
@group(0) @binding(4) var<storage, read_write> k: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> v: array<vec4<f32>>;

// #include grid.wgsl

// Pairs m..m+4 at position t: their cos and sin (m a multiple of 4).
fn turn(t: u32, m: u32) -> array<vec4<f32>, 2> {
    let at = (t * params.pairs + m) / 2u;
    let a = angles[at];
    let b = angles[at + 1u];
    return array<vec4<f32>, 2>(vec4<f32>(a.x, a.z, b.x, b.z), vec4<f32>(a.y, a.w, b.y, b.w));
}

// Dimensions 4 e..4 e + 4 of head `head` of the token whose row starts at vec4 `row`, rotated as
// position t (heads < h_q + h_kv rotate, V heads do not).
fn rotated(row: u32, head: u32, t: u32, e: u32) -> vec4<f32> {
    let base = row + head * params.d4;
    let x = src[base + e];
    let j = 4u * e;
    if head >= params.h_q + params.h_kv {
        return x;
    }
    if j < params.pairs {
        let cs = turn(t, j);
        return x * cs[0] - src[base + (j + params.offset) / 4u] * cs[1];
    }
    if j >= params.offset && j < params.offset + params.pairs {
        let cs = turn(t, j - params.offset);
        return x * cs[0] + src[base + (j - params.offset) / 4u] * cs[1];
    }
    return x;
}

@compute @workgroup_size(WG)
fn split_heads(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let i = invocation_index(at, lid);
    let heads = params.h_q + 2u * params.h_kv;
    if i >= params.tokens * heads * params.d4 {
        return;
    }
    let e = i % params.d4;
    let head = (i / params.d4) % heads;
    let t = i / (params.d4 * heads);
    let value = rotated(t * heads * params.d4, head, t, e);
    if head < params.h_q {
        dst[(head * params.tokens + t) * params.d4 + e] = value;
    } else if head < params.h_q + params.h_kv {
        k[((head - params.h_q) * params.tokens + t) * params.d4 + e] = value;
    } else {
        v[((head - params.h_q - params.h_kv) * params.tokens + t) * params.d4 + e] = value;
    }
}

@compute @workgroup_size(WG)
fn merge_heads(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let i = invocation_index(at, lid);
    if i >= params.tokens * params.h_q * params.d4 {
        return;
    }
    let e = i % params.d4;
    let head = (i / params.d4) % params.h_q;
    let t = i / (params.d4 * params.h_q);
    dst[i] = src[(head * params.tokens + t) * params.d4 + e];
}
