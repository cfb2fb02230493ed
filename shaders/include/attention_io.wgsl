// The parameters, queries and keys of every kernel that walks a KV head's rows: both forward kernels
// and row_softmax.wgsl (pasted in at their `// #include attention_io.wgsl` line by
// src/gpu/shader_text.rs: WGSL has no includes).

// Keep in sync with `FlashParams` in src/gpu/flash_attention.rs.
struct Params {
    n_q: u32,
    n_kv: u32,
    h_kv: u32,
    // Query heads per KV head (G).
    group: u32,
    // Rows per KV head in the K/V buffers: >= n_kv (a decode cache has spare capacity).
    kv_stride: u32,
    // MASK_* of attention_masks.wgsl; mask_size is the window or the chunk.
    mask_kind: u32,
    mask_size: u32,
    scale: f32,
    tiles_per_kv_head: u32,
    q_offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, n_q, D] as vec4s.
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
// [h_kv, kv_stride, D] as vec4s.
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
