// Paged attention for CPU-class adapters with subgroups: flash_attention_subgroup.wgsl's loop (each
// lane fetches one key's K and V rows, the subgroup shuffles them around) with every key's row found
// through the request's page table, as in paged_attention.wgsl (the pool's layout, the table and
// `kv_row` are that shader's; see its header). src/gpu/paged_attention.rs chooses this form where
// the forward kernel's owner would choose flash_attention_subgroup.wgsl.
//
// Browsers need `enable subgroups;` first; src/gpu/paged_attention_subgroup.rs adds it on the web.

// #include attention_io.wgsl

// #include flash_io.wgsl

// #include attention_masks.wgsl

// #include flash_subgroup_constants.wgsl

// #include paged_rows.wgsl

@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    // This invocation's rows (t, kv_head, g, rows_total, row0, out_row, lo, hi, q_rows, acc, m, l).
    // #include flash_rows_start.wgsl

    // #include flash_subgroup_keys.wgsl

    // O and lse of the real rows.
    // #include flash_rows_end.wgsl
}
