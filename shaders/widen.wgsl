// f16 or bf16 weights to f32: a chunk of a checkpoint's tensor, uploaded as the file stores it
// (two 16-bit values per u32, little-endian: the first value in the low half), written as f32 at
// an offset into the tensor's GPU buffer. f16 is rebuilt bit by bit (shader-f16 is optional on
// the web, and unpack2x16float needs a capability some adapters lack and may flush subnormals);
// bf16 is the high half of an f32, so a shift is exact. Both are exact for every value.
//
// One invocation per u32 (two values); an odd count leaves the last high half unwritten.

// Keep in sync with `WidenParams` in src/gpu/widen.rs.
struct Params {
    // Values in this chunk.
    count: u32,
    // Where the first goes in `dst` (in floats).
    dst_offset: u32,
    // 1: bf16, 0: f16.
    bf16: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

// #include grid.wgsl

// The f32 of the f16 whose bits are the low 16 of `h`.
fn f16_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let exponent = (h >> 10u) & 0x1fu;
    let mantissa = h & 0x3ffu;
    if exponent == 0u {
        // Zero or subnormal: mantissa * 2^-24, exact in f32.
        let magnitude = f32(mantissa) * 5.9604644775390625e-8;
        return select(magnitude, -magnitude, sign != 0u);
    }
    if exponent == 0x1fu {
        return bitcast<f32>(sign | 0x7f800000u | (mantissa << 13u)); // infinity or NaN
    }
    return bitcast<f32>(sign | ((exponent + 112u) << 23u) | (mantissa << 13u)); // rebias 15 -> 127
}

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let pair = invocation_index(at, lid);
    let first = 2u * pair;
    if first >= params.count {
        return;
    }
    let word = src[pair];
    var values: vec2<f32>;
    if params.bf16 != 0u {
        values = vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
    } else {
        values = vec2<f32>(f16_to_f32(word & 0xffffu), f16_to_f32(word >> 16u));
    }
    dst[params.dst_offset + first] = values.x;
    if first + 1u < params.count {
        dst[params.dst_offset + first + 1u] = values.y;
    }
}
