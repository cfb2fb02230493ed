// A weight matrix held as f32 (binding 2, named `w`), read a vec4 of one row at a time: matmul's W
// and embed_gather's table. weights_bf16.wgsl is its twin for bf16 checkpoints; the kernels' owners
// paste in one or the other.

@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;

// Values 4i .. 4i + 3 of the matrix (row-major; rows are whole vec4s).
fn w4(i: u32) -> vec4<f32> {
    return w[i];
}
