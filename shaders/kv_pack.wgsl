// Tokens' K (or V) vectors quantised into a packed KV cache, as src/model/kv_packed.rs lays it out:
// each vector of d values is `words` u32 words, its codes first (bits per code: 16 fp16, 8 int8 and
// fp8, 4 or 2 grouped; lowest bits first, never straddling a word), then its scales (int8: one f32;
// grouped: one word per group of scale_group channels, the f16 scale low, the f16 min high). fp8's
// f32 scale covers every token, so it sits in the cache's tail (after every head's rows): one word,
// or one a head; `scales` sets it from the values of the pack that starts the cache, and later packs
// keep it. So the cache holds the scheme's own bytes, and packed_attention.wgsl dequantises them as
// it reads.
//
// KIVI's cache packs K in blocks of `block` tokens (KIND_CHANNEL_BLOCKS: each token's codes, then one
// scale word a channel over the block's tokens) and V per token (KIND_GROUPED); tokens from
// packed_tokens on wait as f32 rows in a ring after the packed ones (from word f32_at, token t in
// row t % ring). As tokens join a decode cache, one launch quantises those leaving the recent window
// (reading the older ones from the ring) and a second writes the new ones still waiting: a ring row
// is read before a newer token takes it.
//
// One invocation per vector: tokens first.. of each head, token t read from x[(h * x_tokens + t -
// x_start) * d ..] (older tokens, KIVI's, from the ring) and written to row t of the head's capacity
// rows. The values the codes decode to are kv_quant.wgsl's (the
// same f32 arithmetic). f16 bits are built with integer arithmetic from values f16 holds exactly, not
// with pack2x16float, whose rounding and subnormals vary. The CPU twin is src/cpu/kv_pack.rs.

// Keep in sync with `KvPackParams` in src/gpu/kv_pack.rs.
struct Params {
    heads: u32,
    // Tokens the launch covers, from `first` on.
    tokens: u32,
    d: u32,
    capacity: u32,
    first: u32,
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
    // fp8: fraction bits, smallest normal exponent and largest value of the format; where the tail
    // starts (in words) and how many scales it holds (1, or one a head).
    mantissa: u32,
    min_exp: i32,
    max_value: f32,
    tail: u32,
    tail_words: u32,
    // Tokens from packed_tokens on are f32 rows (KIVI's) from word f32_at, token t in row t % ring;
    // KIVI's key block.
    packed_tokens: u32,
    f32_at: u32,
    block: u32,
    // x holds tokens x_start.., x_tokens a head.
    x_start: u32,
    x_tokens: u32,
    ring: u32,
    pad: u32,
}

const KIND_F16: u32 = 0u;
const KIND_INT8: u32 = 1u;
const KIND_GROUPED: u32 = 2u;
const KIND_FP8: u32 = 3u;
const KIND_CHANNEL_BLOCKS: u32 = 4u;

@group(0) @binding(0) var<uniform> params: Params;
// [heads, x_tokens, d]: the pass's new K or V.
@group(0) @binding(1) var<storage, read> x: array<f32>;
// [heads, capacity, words]: the packed cache.
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;

// #include grid.wgsl

// #include f16_bits.wgsl

// Where token t's f32 row of head h starts in the ring.
fn ring_row(h: u32, t: u32) -> u32 {
    return params.f32_at + (h * params.ring + t % max(params.ring, 1u)) * params.d;
}

// Channel c of token t of head h: from x, or (a token older than x's, KIVI's) from its ring row.
fn value(h: u32, t: u32, c: u32) -> f32 {
    if t >= params.x_start {
        return x[(h * params.x_tokens + t - params.x_start) * params.d + c];
    }
    return bitcast<f32>(packed[ring_row(h, t) + c]);
}

// The scale word of channels c0..c1 of token t of head h.
fn scale_word(h: u32, t: u32, c0: u32, c1: u32) -> u32 {
    var lo = value(h, t, c0);
    var hi = lo;
    var amax = 0.0;
    for (var c = c0; c < c1; c++) {
        let v = value(h, t, c);
        lo = min(lo, v);
        hi = max(hi, v);
        amax = max(amax, abs(v));
    }
    if params.kind == KIND_INT8 {
        return bitcast<u32>(amax / f32(params.levels));
    }
    return f16_bits(round_f16((hi - lo) / f32(params.levels))) | (f16_bits(round_f16(lo)) << 16u);
}

// The fp8 bits of r, a value the format holds exactly; the sign is bit 7.
fn fp8_bits(r: f32) -> u32 {
    let a = abs(r);
    let sign = select(0u, 0x80u, r < 0.0);
    if a < pow2(params.min_exp) {
        // A subnormal: a whole number of 2^(min_exp - mantissa).
        return sign | u32(a * pow2(i32(params.mantissa) - params.min_exp));
    }
    let b = bitcast<u32>(a);
    let exponent = u32(i32((b >> 23u) & 0xffu) - 127 - params.min_exp + 1);
    return sign | (exponent << params.mantissa) | ((b & 0x7fffffu) >> (23u - params.mantissa));
}

// v's code against its group's scale word (fp8: the tail's), in the code's own bits.
fn code(v: f32, scale: u32) -> u32 {
    let l = f32(params.levels);
    if params.kind == KIND_F16 {
        return f16_bits(round_f16(v));
    }
    if params.kind == KIND_FP8 {
        return fp8_bits(round_float(v / bitcast<f32>(scale), params.mantissa, params.min_exp, params.max_value));
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

// Channel c's scale word over head h's block of tokens from `first` (KIVI's keys).
fn channel_scale_word(h: u32, first: u32, c: u32) -> u32 {
    var lo = value(h, first, c);
    var hi = lo;
    for (var t = 0u; t < params.block; t++) {
        let v = value(h, first + t, c);
        lo = min(lo, v);
        hi = max(hi, v);
    }
    return f16_bits(round_f16((hi - lo) / f32(params.levels))) | (f16_bits(round_f16(lo)) << 16u);
}

// The scale word channel c of head h's token is coded against: its KIVI key block's (over the
// block's tokens, from `first`), its group's as stored after the codes at packed[dst..], or the
// tail's (`tail_scale`).
fn scale_for(h: u32, c: u32, dst: u32, first: u32, tail_scale: u32) -> u32 {
    if params.kind == KIND_CHANNEL_BLOCKS {
        return channel_scale_word(h, first, c);
    }
    if params.scale_words > 0u {
        return packed[dst + params.code_words + c / params.scale_group];
    }
    return tail_scale;
}

// The code words of token t of head h, written from packed[codes..] (scale_for's other arguments
// follow).
fn write_codes(h: u32, t: u32, codes: u32, dst: u32, first: u32, tail_scale: u32) {
    let per_word = 32u / params.bits;
    for (var w = 0u; w < params.code_words; w++) {
        var word = 0u;
        for (var j = 0u; j < per_word; j++) {
            let c = w * per_word + j;
            if c < params.d {
                word |= code(value(h, t, c), scale_for(h, c, dst, first, tail_scale)) << (j * params.bits);
            }
        }
        packed[codes + w] = word;
    }
}

// Token t of head h into its KIVI key block (a head has room for capacity / block): its codes
// against each channel's scale word over the block; the block's first token writes those words too.
fn pack_into_block(h: u32, t: u32) {
    let j = t % params.block;
    let base = (h * (params.capacity / params.block) + t / params.block) * (params.block * params.code_words + params.d);
    let first = t - j;
    write_codes(h, t, base + j * params.code_words, 0u, first, 0u);
    if j == 0u {
        let scales = base + params.block * params.code_words;
        for (var c = 0u; c < params.d; c++) {
            packed[scales + c] = channel_scale_word(h, first, c);
        }
    }
}

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let i = invocation_index(at, lid);
    if i >= params.heads * params.tokens {
        return;
    }
    let h = i / params.tokens;
    let t = params.first + i % params.tokens;
    if t >= params.packed_tokens {
        // KIVI's tokens not yet quantised: an f32 row.
        let dst = ring_row(h, t);
        for (var c = 0u; c < params.d; c++) {
            packed[dst + c] = bitcast<u32>(value(h, t, c));
        }
        return;
    }
    if params.kind == KIND_CHANNEL_BLOCKS {
        pack_into_block(h, t);
        return;
    }
    let dst = (h * params.capacity + t) * params.words;
    // Scales first: each code is taken against its group's scale as stored.
    for (var g = 0u; g < params.scale_words; g++) {
        let c0 = g * params.scale_group;
        packed[dst + params.code_words + g] = scale_word(h, t, c0, min(c0 + params.scale_group, params.d));
    }
    var shared_scale = 0u;
    if params.tail_words > 0u {
        shared_scale = packed[params.tail + select(0u, h, params.tail_words > 1u)];
    }
    write_codes(h, t, dst, dst, 0u, shared_scale);
}

// The largest magnitude of each workgroup's share of x, for the reduction below.
var<workgroup> amax_of: array<f32, 64>;

// fp8's tail: one workgroup per scale word (workgroup s: the whole launch's values, or head s's when
// there is one a head), its largest magnitude / the format's largest value (1 when all are zero), as
// the CPU twin (src/cpu/kv_pack.rs) and kv_quant compute it. Run only by the pack that starts a cache.
@compute @workgroup_size(WG)
fn scales(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let s = workgroup_index(at);
    let per_head = params.x_tokens * params.d;
    var first = 0u;
    var count = params.heads * per_head;
    if params.tail_words > 1u {
        first = s * per_head;
        count = per_head;
    }
    var m = 0.0;
    for (var i = lid; i < count; i += WG) {
        m = max(m, abs(x[first + i]));
    }
    amax_of[lid] = m;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if lid < half {
            amax_of[lid] = max(amax_of[lid], amax_of[lid + half]);
        }
        workgroupBarrier();
    }
    if lid == 0u && s < params.tail_words {
        let amax = amax_of[0];
        packed[params.tail + s] = bitcast<u32>(select(1.0, amax / params.max_value, amax > 0.0));
    }
}
