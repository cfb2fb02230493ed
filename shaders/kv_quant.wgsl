// A cached K or V rounded in place to the values a quantised KV cache stores: each group of values
// that shares a scale is quantised and dequantised in one go, so attention afterwards reads exactly
// what a kernel dequantising on read would see. The bytes such a cache takes are computed
// (src/model/kv_quant.rs); this buffer stays f32.
//
// The tokens 0..tokens of every head are cut into boxes of box_h heads x box_t tokens x box_c
// channels (clipped at the edges); value (h, t, c) is at h * head_stride + t * token_stride + c.
// One workgroup per box: its invocations share the box's values, reduce their range in workgroup
// memory, then each rounds its share. (One invocation per box left values unrounded on lavapipe once
// a box held tens of thousands: fp8's one scale per tensor over a long text.) The CPU twin is
// src/cpu/kv_quant.rs; the arithmetic is f32 in both.

// Keep in sync with `KvQuantParams` in src/gpu/kv_quant.rs.
struct Params {
    heads: u32,
    tokens: u32,
    d: u32,
    head_stride: u32,
    token_stride: u32,
    box_h: u32,
    box_t: u32,
    box_c: u32,
    // Boxes along the tokens and the channels, and in all.
    n_t: u32,
    n_c: u32,
    groups: u32,
    // 0: a float format; 1: symmetric integers; 2: asymmetric integers with an f16 scale and min.
    kind: u32,
    // The float format: fraction bits, smallest normal exponent, largest finite value.
    mantissa: u32,
    min_exp: i32,
    max_value: f32,
    // Floats: 1 where the group is divided by a scale (largest magnitude / max_value) first.
    scaled: u32,
    // Integers: the largest level (127 for int8, 15 for int4, 3 for int2).
    levels: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// The cached tensor, rounded in place.
@group(0) @binding(1) var<storage, read_write> x: array<f32>;

// #include grid.wgsl

// #include f16_bits.wgsl

// One value as the group's scale (and min) store it.
fn stored(v: f32, scale: f32, lo: f32) -> f32 {
    if params.kind == 0u {
        return round_float(v / scale, params.mantissa, params.min_exp, params.max_value) * scale;
    }
    let l = f32(params.levels);
    if scale == 0.0 {
        return lo;
    }
    if params.kind == 1u {
        return clamp(round(v / scale), -l, l) * scale;
    }
    return clamp(round((v - lo) / scale), 0.0, l) * scale + lo;
}

// Each invocation's share of the box's range, for the reductions below (WG is 64).
var<workgroup> lo_of: array<f32, 64>;
var<workgroup> hi_of: array<f32, 64>;
var<workgroup> amax_of: array<f32, 64>;

// Where the box's value i is, counting heads, then tokens, then channels; `size` is the box's
// (heads, tokens, channels) and `origin` its first.
fn box_value(origin: vec3<u32>, size: vec3<u32>, i: u32) -> u32 {
    let h = origin.x + i / (size.y * size.z);
    let t = origin.y + i / size.z % size.y;
    let c = origin.z + i % size.z;
    return h * params.head_stride + t * params.token_stride + c;
}

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let g = workgroup_index(at);
    if g >= params.groups {
        return;
    }
    let h0 = g / (params.n_t * params.n_c) * params.box_h;
    let t0 = g / params.n_c % params.n_t * params.box_t;
    let c0 = g % params.n_c * params.box_c;
    let origin = vec3<u32>(h0, t0, c0);
    let size = vec3<u32>(
        min(h0 + params.box_h, params.heads) - h0,
        min(t0 + params.box_t, params.tokens) - t0,
        min(c0 + params.box_c, params.d) - c0,
    );
    let count = size.x * size.y * size.z;
    var lo = 3.4e38;
    var hi = -3.4e38;
    var amax = 0.0;
    for (var i = lid; i < count; i += WG) {
        let v = x[box_value(origin, size, i)];
        lo = min(lo, v);
        hi = max(hi, v);
        amax = max(amax, abs(v));
    }
    lo_of[lid] = lo;
    hi_of[lid] = hi;
    amax_of[lid] = amax;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if lid < half {
            lo_of[lid] = min(lo_of[lid], lo_of[lid + half]);
            hi_of[lid] = max(hi_of[lid], hi_of[lid + half]);
            amax_of[lid] = max(amax_of[lid], amax_of[lid + half]);
        }
        workgroupBarrier();
    }
    var scale = 1.0;
    var zero = 0.0;
    if params.kind == 0u {
        if params.scaled != 0u && amax_of[0] > 0.0 {
            scale = amax_of[0] / params.max_value;
        }
    } else if params.kind == 1u {
        scale = amax_of[0] / f32(params.levels);
    } else {
        scale = round_f16((hi_of[0] - lo_of[0]) / f32(params.levels));
        zero = round_f16(lo_of[0]);
    }
    for (var i = lid; i < count; i += WG) {
        let at_i = box_value(origin, size, i);
        x[at_i] = stored(x[at_i], scale, zero);
    }
}
