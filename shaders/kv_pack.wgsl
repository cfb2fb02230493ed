// Tokens' K (or V) vectors quantised into a packed KV cache, as src/model/kv_packed.rs lays it out:
// each vector of d values is `words` u32 words, its codes first (bits per code: 16 fp16, 8 int8,
// 4 or 2 grouped; lowest bits first, never straddling a word), then its scales (int8: one f32;
// grouped: one word per group of scale_group channels, the f16 scale low, the f16 min high). So the
// cache holds the scheme's own bytes, and packed_attention.wgsl dequantises them as it reads.
//
// One invocation per vector: token t of head h comes from x[(h * tokens + t) * d ..] and goes to
// row start + t of the head's capacity rows. The values the codes decode to are kv_quant.wgsl's (the
// same f32 arithmetic). f16 bits are built with integer arithmetic from values f16 holds exactly, not
// with pack2x16float, whose rounding and subnormals vary. The CPU twin is src/cpu/kv_pack.rs.

// Keep in sync with `KvPackParams` in src/gpu/kv_pack.rs.
struct Params {
    heads: u32,
    tokens: u32,
    d: u32,
    capacity: u32,
    start: u32,
    // KIND_* below.
    kind: u32,
    bits: u32,
    // Channels per scale word (d for int8).
    scale_group: u32,
    // The largest code: 127 for int8, 2^bits - 1 grouped.
    levels: u32,
    code_words: u32,
    scale_words: u32,
    words: u32,
}

const KIND_F16: u32 = 0u;
const KIND_INT8: u32 = 1u;
const KIND_GROUPED: u32 = 2u;

@group(0) @binding(0) var<uniform> params: Params;
// [heads, tokens, d]: the pass's new K or V.
@group(0) @binding(1) var<storage, read> x: array<f32>;
// [heads, capacity, words]: the packed cache.
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;

// #include grid.wgsl

// #include f16_bits.wgsl

// The scale word of channels c0..c1 of the vector at x[src..].
fn scale_word(src: u32, c0: u32, c1: u32) -> u32 {
    var lo = x[src + c0];
    var hi = lo;
    var amax = 0.0;
    for (var c = c0; c < c1; c++) {
        let v = x[src + c];
        lo = min(lo, v);
        hi = max(hi, v);
        amax = max(amax, abs(v));
    }
    if params.kind == KIND_INT8 {
        return bitcast<u32>(amax / f32(params.levels));
    }
    return f16_bits(round_f16((hi - lo) / f32(params.levels))) | (f16_bits(round_f16(lo)) << 16u);
}

// v's code against its group's scale word, in the code's own bits.
fn code(v: f32, scale: u32) -> u32 {
    let l = f32(params.levels);
    if params.kind == KIND_F16 {
        return f16_bits(round_f16(v));
    }
    if params.kind == KIND_INT8 {
        let s = bitcast<f32>(scale);
        var q = 0.0;
        if s > 0.0 {
            q = clamp(round(v / s), -l, l);
        }
        return bitcast<u32>(i32(q)) & 0xffu;
    }
    let s = f16_value(scale & 0xffffu);
    let lo = f16_value(scale >> 16u);
    if s > 0.0 {
        return u32(clamp(round((v - lo) / s), 0.0, l));
    }
    return 0u;
}

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let i = invocation_index(at, lid);
    if i >= params.heads * params.tokens {
        return;
    }
    let h = i / params.tokens;
    let t = i % params.tokens;
    let src = i * params.d;
    let dst = (h * params.capacity + params.start + t) * params.words;
    // Scales first: each code is taken against its group's scale as stored.
    for (var g = 0u; g < params.scale_words; g++) {
        let c0 = g * params.scale_group;
        packed[dst + params.code_words + g] = scale_word(src, c0, min(c0 + params.scale_group, params.d));
    }
    let per_word = 32u / params.bits;
    for (var w = 0u; w < params.code_words; w++) {
        var word = 0u;
        for (var j = 0u; j < per_word; j++) {
            let c = w * per_word + j;
            if c < params.d {
                var scale = 0u;
                if params.kind != KIND_F16 {
                    scale = packed[dst + params.code_words + c / params.scale_group];
                }
                word |= code(x[src + c], scale) << (j * params.bits);
            }
        }
        packed[dst + w] = word;
    }
}
