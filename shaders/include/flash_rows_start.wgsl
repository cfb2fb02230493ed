    // The start of `main` in flash_attention.wgsl and flash_attention_subgroup.wgsl: statements pasted
    // into the function at its `// #include flash_rows_start.wgsl` line, not a function, so these
    // arrays stay locals of `main` (CPU adapters keep them in registers only while every index is a
    // constant; passed around they could land in memory). Needs `at`, the entry's GridPlace, and `lid`.

    // The workgroup's rows and keys (attention_io.wgsl): every invocation walks t.key_lo..t.key_hi.
    let t = tile_of(at, BR * R);
    let kv_head = t.kv_head;
    if kv_head >= params.h_kv {
        return;
    }
    let g = params.group;
    let rows_total = params.n_q * g;
    let row0 = t.row0;

    // This invocation's rows row0 + lid + j * BR: query i of head h. Rows past the end repeat the last
    // row (their results are not written), so no branch depends on the row and every lane stays active.
    var out_row: array<u32, R>;
    var lo: array<u32, R>;
    var hi: array<u32, R>;
    // The query rows, pre-scaled so scores need no multiply (Q_REGS = 0: one element, never used; the
    // step reads each query vec4 from its buffer), the output accumulators, and each row's running
    // max m and sum l.
    var q_rows: array<array<vec4<f32>, Q4>, R>;
    var acc: array<array<vec4<f32>, D4>, R>;
    var m: array<f32, R>;
    var l: array<f32, R>;
    for (var j = 0u; j < R; j++) {
        let row = min(row0 + lid + j * BR, rows_total - 1u);
        let i = row / g;
        let h = kv_head * g + row % g;
        out_row[j] = h * params.n_q + i;
        lo[j] = key_lo(params.q_offset + i);
        hi[j] = key_hi(params.q_offset + i);
        for (var e = 0u; e < D4; e++) {
            if Q_REGS == 1u {
                q_rows[j][e * Q_REGS] = query(out_row[j], e);
            }
            acc[j][e] = vec4<f32>(0.0);
        }
        m[j] = NO_SCORE;
        l[j] = 0.0;
    }
