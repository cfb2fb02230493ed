    // The first eight fields of `naive_attention` and `attention_probs`, pasted inside their `Params`
    // (WGSL has no struct inheritance). Keep in sync with `QueryHeadParams` in src/gpu/attention_io.rs.
    n_q: u32,
    n_kv: u32,
    h_q: u32,
    group: u32,
    mask_kind: u32,
    mask_size: u32,
    scale: f32,
    q_offset: u32,
