// A weight matrix held as bf16, as the checkpoint's file stores it (binding 2, named `w`): two
// values to a u32, little-endian (the first in the low half), so 4 values are a vec2<u32>. A bf16 is
// the high half of an f32, so widening is a shift, exact for every value. The twin of
// weights_f32.wgsl, with the same `w4`.

@group(0) @binding(2) var<storage, read> w: array<vec2<u32>>;

// Values 4i .. 4i + 3 of the matrix (row-major; rows are whole vec4s).
fn w4(i: u32) -> vec4<f32> {
    let p = w[i];
    return vec4<f32>(
        bitcast<f32>(p.x << 16u),
        bitcast<f32>(p.x & 0xffff0000u),
        bitcast<f32>(p.y << 16u),
        bitcast<f32>(p.y & 0xffff0000u),
    );
}
