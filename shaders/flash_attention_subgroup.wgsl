// Tiled attention forward for CPU-class adapters (lavapipe, SwiftShader), with the results and the
// contract of flash_attention.wgsl (same parameters, bindings, masks, O and log-sum-exp).
//
// Why a second kernel. A CPU adapter runs invocations as the lanes of SIMD registers. Arithmetic on
// registers runs at full speed, but every read from a storage buffer (or workgroup memory) is a loop
// of scalar loads, one per lane and component, however uniform the address: a vec4 read costs about as
// much as dozens of FMAs. flash_attention.wgsl has every invocation read every K/V element of a tile.
// Here each lane of a subgroup reads one key's K and V rows, and the subgroup passes them around with
// subgroupShuffle (a register move on these adapters), so a step of BC keys (the subgroup size) costs
// each lane one K row and one V row instead of BC of each. Each invocation also owns R query rows, so
// every K/V value it holds serves R rows.
//
// Browsers need `enable subgroups;` first; Naga rejects that line but accepts the builtins without
// it, so src/gpu/flash_attention_subgroup.rs adds it on the web.
//
// Rows, masks, the online softmax and the fully-masked-row result are as in flash_attention.wgsl.

// #include attention_io.wgsl

// #include flash_io.wgsl

// The trace's binding, in traced builds only (src/gpu/flash_trace.rs).
// #trace flash_trace_io.wgsl

// #include attention_masks.wgsl

// #include flash_subgroup_constants.wgsl

// K/V rows of KV head `kv_head` start at `kv_head * kv_stride` (a decode cache has spare capacity).
fn kv_row(kv_head: u32, key: u32) -> u32 {
    return kv_head * params.kv_stride + key;
}

@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    // This invocation's rows (t, kv_head, g, rows_total, row0, out_row, lo, hi, q_rows, acc, m, l).
    // #include flash_rows_start.wgsl

    // #include flash_subgroup_keys.wgsl

    // O and lse of the real rows.
    // #include flash_rows_end.wgsl
}
