// The outputs of the tiled forward and its V input, shared by flash_attention.wgsl and
// flash_attention_subgroup.wgsl after attention_io.wgsl (bindings 0-2). Keep in sync with
// `FLASH_BINDINGS` and `FlashBuffers` in src/gpu/flash_io.rs. Also how both read a query.

// Vec4 `e` of query row `out_row`, pre-scaled: read once into q_rows, or at every step where the
// rows do not fit in registers (Q_REGS = 0, heads over 768 wide).
fn query(out_row: u32, e: u32) -> vec4<f32> {
    return q[out_row * D4 + e] * params.scale;
}

// [h_kv, kv_stride, D] as vec4s.
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
// [h_q, n_q, D] as vec4s.
@group(0) @binding(4) var<storage, read_write> o: array<vec4<f32>>;
// [h_q, n_q].
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
