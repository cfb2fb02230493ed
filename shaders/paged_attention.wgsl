// Attention over a paged K/V cache (the vLLM idea): flash_attention.wgsl's tiled online softmax,
// with every key's K and V row found through a page table instead of at `kv_head * kv_stride + key`.
//
// The pool. K and V each hold `pages` physical pages laid out `[page, h_kv, PAGE_TOKENS, D]`: a
// page carries PAGE_TOKENS tokens of every KV head, so one table serves all heads. A request's table
// maps its logical page `key / PAGE_TOKENS` to a physical page; two requests that share a prompt
// hold the same page indices, and nothing is copied for them (src/model/paging.rs keeps the books:
// allocation, sharing, copy-on-write, freeing).
//
// Everything else (rows, masks, the online softmax, O and lse, a row that sees no key) is
// flash_attention.wgsl's, pasted in from the same includes; only `kv_row` differs. Keys outside every
// row's visible range are never read, so table entries of pages a window dropped may point anywhere.

// #include attention_io.wgsl

// #include flash_io.wgsl

// #include attention_masks.wgsl

// #include flash_constants.wgsl

// #include paged_rows.wgsl

@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    // This invocation's rows (t, kv_head, g, rows_total, row0, out_row, lo, hi, q_rows, acc, m, l).
    // #include flash_rows_start.wgsl

    // #include flash_keys.wgsl

    // O and lse of the real rows.
    // #include flash_rows_end.wgsl
}
