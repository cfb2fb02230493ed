// The outputs of the tiled forward and its V input, shared by flash_attention.wgsl and
// flash_attention_subgroup.wgsl after attention_io.wgsl (bindings 0-2). Keep in sync with
// `FLASH_BINDINGS` and `FlashBuffers` in src/gpu/flash_io.rs.

// [h_kv, kv_stride, D] as vec4s.
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
// [h_q, n_q, D] as vec4s.
@group(0) @binding(4) var<storage, read_write> o: array<vec4<f32>>;
// [h_q, n_q].
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
