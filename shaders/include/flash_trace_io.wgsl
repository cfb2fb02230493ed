// The trace of a traced build of flash_attention.wgsl or flash_attention_subgroup.wgsl (pasted in at
// their `// #trace flash_trace_io.wgsl` line by shader_text::traced; the kernels as shipped leave that
// line a comment, so they have no such binding).
// Keep in sync with `FLASH_TRACE_BINDINGS` in src/gpu/flash_trace.rs.
//
// One record per (row, key step): row `out_row` (query head h, query i: h * n_q + i) and step
// `(key0 - t.key_lo) / BC` of its workgroup's loop, `1 + D4` vec4s: (key0, m, l, alpha), then the
// accumulator acc (O before the division by l). Records of steps the loop never reached keep the
// key0 = -1 the host wrote there.
@group(0) @binding(6) var<storage, read_write> flash_trace: array<vec4<f32>>;

// Key steps recorded per row: no workgroup walks more keys than n_kv.
fn trace_slots() -> u32 {
    return (params.n_kv + BC - 1u) / BC;
}
