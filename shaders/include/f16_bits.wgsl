// Values rounded to a float format, and f16 values to and from their bits by integer arithmetic,
// shared by the quantised KV cache's kernels (kv_quant.wgsl rounds in place, kv_pack.wgsl writes
// codes and scales, packed_attention.wgsl reads them; pasted in at their `// #include f16_bits.wgsl`
// line by src/gpu/shader_text.rs). Not pack2x16float / unpack2x16float, whose rounding and
// subnormals vary between implementations; the twins are `round_float` in src/cpu/kv_quant.rs and
// `f16_bits` and `f16_value` in src/cpu/kv_pack.rs.

// 2^e as f32 bits (e within the normal range): exact, unlike exp2.
fn pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127) << 23u);
}

// v rounded to the float format: to nearest, ties to even (WGSL's round), subnormals kept (below
// 2^min_exp the step stays 2^(min_exp - mantissa)), saturating at max_value.
fn round_float(v: f32, mantissa: u32, min_exp: i32, max_value: f32) -> f32 {
    if v == 0.0 {
        return v;
    }
    let a = abs(v);
    let e = max(i32((bitcast<u32>(a) >> 23u) & 0xffu) - 127, min_exp) - i32(mantissa);
    let r = min(round(a * pow2(-e)) * pow2(e), max_value);
    return select(r, -r, v < 0.0);
}

// v rounded to f16's values (kv_quant's fp16 scheme, kv_pack's codes and grouped scales).
fn round_f16(v: f32) -> f32 {
    return round_float(v, 10u, -14, 65504.0);
}

// The f16 bits of r, a value f16 holds exactly (finite, at most 65504 in magnitude).
fn f16_bits(r: f32) -> u32 {
    let a = abs(r);
    let sign = select(0u, 0x8000u, r < 0.0);
    if a < pow2(-14) {
        // A subnormal f16: a whole number of 2^-24.
        return sign | u32(a * pow2(24));
    }
    let b = bitcast<u32>(a);
    return sign | ((((b >> 23u) & 0xffu) - 112u) << 10u) | ((b >> 13u) & 0x3ffu);
}

// The value of f16 bits h (the low 16 bits; higher ones are ignored). Without a branch: the attention
// kernel decodes every value with it, and CPU adapters run both sides of a branch lanes disagree on.
fn f16_value(h: u32) -> f32 {
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    let a = select(f32(m) * pow2(-24), bitcast<f32>(((e + 112u) << 23u) | (m << 13u)), e != 0u);
    return select(a, -a, (h & 0x8000u) != 0u);
}
