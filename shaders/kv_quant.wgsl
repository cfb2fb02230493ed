// A cached K or V rounded in place to the values a quantised KV cache stores: each group of values
// that shares a scale is quantised and dequantised in one go, so attention afterwards reads exactly
// what a kernel dequantising on read would see. The bytes such a cache takes are computed
// (src/model/kv_quant.rs); this buffer stays f32.
//
// The tokens 0..tokens of every head are cut into boxes of box_h heads x box_t tokens x box_c
// channels (clipped at the edges); value (h, t, c) is at h * head_stride + t * token_stride + c.
// One invocation per box: it reads its values once for their range, then rounds each. The CPU twin
// is src/cpu/kv_quant.rs; the arithmetic is f32 in both.

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

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let g = invocation_index(at, lid);
    if g >= params.groups {
        return;
    }
    let h0 = g / (params.n_t * params.n_c) * params.box_h;
    let t0 = g / params.n_c % params.n_t * params.box_t;
    let c0 = g % params.n_c * params.box_c;
    let h1 = min(h0 + params.box_h, params.heads);
    let t1 = min(t0 + params.box_t, params.tokens);
    let c1 = min(c0 + params.box_c, params.d);
    let first = x[h0 * params.head_stride + t0 * params.token_stride + c0];
    var lo = first;
    var hi = first;
    var amax = 0.0;
    for (var h = h0; h < h1; h++) {
        for (var t = t0; t < t1; t++) {
            let row = h * params.head_stride + t * params.token_stride;
            for (var c = c0; c < c1; c++) {
                let v = x[row + c];
                lo = min(lo, v);
                hi = max(hi, v);
                amax = max(amax, abs(v));
            }
        }
    }
    var scale = 1.0;
    var zero = 0.0;
    if params.kind == 0u {
        if params.scaled != 0u && amax > 0.0 {
            scale = amax / params.max_value;
        }
    } else if params.kind == 1u {
        scale = amax / f32(params.levels);
    } else {
        scale = round_f16((hi - lo) / f32(params.levels));
        zero = round_f16(lo);
    }
    for (var h = h0; h < h1; h++) {
        for (var t = t0; t < t1; t++) {
            let row = h * params.head_stride + t * params.token_stride;
            for (var c = c0; c < c1; c++) {
                x[row + c] = stored(x[row + c], scale, zero);
            }
        }
    }
}
