// How paged_attention.wgsl and paged_attention_subgroup.wgsl find a key's row: through the
// request's page table into the pool `[page, h_kv, PAGE_TOKENS, D]` (pasted in at their
// `// #include paged_rows.wgsl` line; binding 6 follows flash_io.wgsl's).

// Tokens per page. Keep in sync with `PAGE_TOKENS` in src/model/paging.rs.
const PAGE_TOKENS: u32 = 16u;

// The request's page table: logical page -> physical page of the pool.
@group(0) @binding(6) var<storage, read> page_table: array<u32>;

// The pool row of `key` of KV head `kv_head`: its page from the table, then the head's block in it.
fn kv_row(kv_head: u32, key: u32) -> u32 {
    let page = page_table[key / PAGE_TOKENS];
    return (page * params.h_kv + kv_head) * PAGE_TOKENS + key % PAGE_TOKENS;
}
