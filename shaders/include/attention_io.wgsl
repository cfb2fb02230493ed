// The parameters, queries and keys of every kernel that walks a KV head's rows, and the rows and keys
// of one workgroup: both forward kernels and both row_softmax kernels (pasted in at their
// `// #include attention_io.wgsl` line by src/gpu/shader_text.rs: WGSL has no includes).

// Keep in sync with `AttentionParams` in src/gpu/attention_io.rs.
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
    // Row softmax, OUT_BLOCK_*: key blocks per row (<= n_kv). Unused elsewhere.
    key_blocks: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, n_q, D] as vec4s.
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
// [h_kv, kv_stride, D] as vec4s.
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;

// The rows and keys of one workgroup: `rows_per_workgroup` of a KV head's n_q * G rows (query-major:
// row r is query r / G of query head kv_head * G + r % G), the keys any of them sees (every
// invocation walks these alike, so K/V addresses are uniform) and the keys all of them see (steps
// there need no per-key mask test). Uses key_lo/key_hi of attention_masks.wgsl.
struct Tile {
    // >= h_kv for the spare workgroups of a folded grid (they return at once).
    kv_head: u32,
    row0: u32,
    key_lo: u32,
    key_hi: u32,
    all_lo: u32,
    all_hi: u32,
}

// #include grid.wgsl

fn tile_of(at: GridPlace, rows_per_workgroup: u32) -> Tile {
    let wg_linear = workgroup_index(at);
    let g = params.group;
    let row0 = (wg_linear % params.tiles_per_kv_head) * rows_per_workgroup;
    let row_end = min(row0 + rows_per_workgroup, params.n_q * g);
    let first_pos = params.q_offset + row0 / g;
    let last_pos = params.q_offset + (row_end - 1u) / g;
    return Tile(wg_linear / params.tiles_per_kv_head, row0, key_lo(first_pos), key_hi(last_pos), key_lo(last_pos), key_hi(first_pos));
}
