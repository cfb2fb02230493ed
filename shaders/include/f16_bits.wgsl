// f16 values to and from their bits by integer arithmetic, shared by the packed KV cache's kernels
// (kv_pack.wgsl writes them, packed_attention.wgsl reads them; pasted in at their
// `// #include f16_bits.wgsl` line by src/gpu/shader_text.rs). Not pack2x16float / unpack2x16float,
// whose rounding and subnormals vary between implementations; the twins are `f16_bits` and
// `f16_value` in src/cpu/kv_pack.rs.

// 2^e as f32 bits (e within the normal range): exact, unlike exp2.
fn pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127) << 23u);
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
