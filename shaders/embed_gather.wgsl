// The model's first step: the embedding row of every token, out[t, :] = embed[ids[t], :] * scale
// (Gemma scales by sqrt(d_model); others by 1).
//
// One invocation per vec4 of the output (Rust requires the width to be a multiple of 4, and checks
// every id against the vocabulary before launching).

// Keep in sync with `EmbedParams` in src/gpu/embed_gather.rs.
struct Params {
    tokens: u32,
    // The row width / 4.
    width4: u32,
    scale: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
// The table [vocab, width], as `w4` (f32, or bf16 where the owner pastes in weights_bf16.wgsl).
// #include weights_f32.wgsl
// [tokens, width] as vec4s.
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

// #include grid.wgsl

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    // Large launches fold into a 2D grid (65535 workgroups per dimension).
    let i = invocation_index(at, lid);
    if i >= params.tokens * params.width4 {
        return;
    }
    let token = i / params.width4;
    out[i] = w4(ids[token] * params.width4 + i % params.width4) * params.scale;
}
