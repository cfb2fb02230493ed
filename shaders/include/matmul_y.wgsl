// Y as f32s, and the stores of one Y element (matmul.wgsl; matmul_subgroup.wgsl when a Y row is not
// a whole number of vec4s).

@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// Y[r, c] = value (+ Y[r, c] with accumulate): the bias is already in `value`.
fn put(r: u32, c: u32, value: f32) {
    let at = r * params.outputs + c;
    if params.accumulate != 0u {
        y[at] += value;
    } else {
        y[at] = value;
    }
}

// Y[r, c] = sum + bias[c] (+ Y[r, c] with accumulate).
fn store(r: u32, c: u32, sum: f32) {
    var value = sum;
    if params.has_bias != 0u {
        value += bias[c];
    }
    put(r, c, value);
}
