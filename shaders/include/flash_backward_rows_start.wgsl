    // The start of `main`: the tile's rows, and each of this invocation's R rows' index, visible keys, Q
    // (pre-scaled), dO, dQ accumulator, lse and D (t, kv_head, g, rows_total, out_row, lo, hi, q_rows,
    // do_rows, acc, row_lse, row_delta).
    // Statements, pasted in at the `// #include flash_backward_rows_start.wgsl` line of flash_backward.wgsl
    // and flash_backward_subgroup.wgsl: not a function, so the arrays stay locals of the entry point
    // (see flash_rows_start.wgsl).

    let t = tile_of(at, BR * R);
    let kv_head = t.kv_head;
    if kv_head >= params.h_kv {
        return;
    }
    let g = params.group;
    let rows_total = params.n_q * g;

    // This invocation's rows (past the end: the last row again, not written). The query rows are
    // pre-scaled, so scores need no multiply.
    var out_row: array<u32, R>;
    var lo: array<u32, R>;
    var hi: array<u32, R>;
    // (ROW_REGS = 0: one element each, never used; the steps read Q and dO from their buffers.)
    var q_rows: array<array<vec4<f32>, ROW4>, R>;
    var do_rows: array<array<vec4<f32>, ROW4>, R>;
    var acc: array<array<vec4<f32>, D4>, R>;
    var row_lse: array<f32, R>;
    var row_delta: array<f32, R>;
    for (var j = 0u; j < R; j++) {
        let row = min(t.row0 + lid + j * BR, rows_total - 1u);
        let i = row / g;
        out_row[j] = (kv_head * g + row % g) * params.n_q + i;
        lo[j] = key_lo(params.q_offset + i);
        hi[j] = key_hi(params.q_offset + i);
        var dot4 = vec4<f32>(0.0);
        for (var e = 0u; e < D4; e++) {
            let dd = d_o[out_row[j] * D4 + e];
            if ROW_REGS == 1u {
                q_rows[j][e * ROW_REGS] = q[out_row[j] * D4 + e] * params.scale;
                do_rows[j][e * ROW_REGS] = dd;
            }
            acc[j][e] = vec4<f32>(0.0);
            dot4 = fma(dd, o[out_row[j] * D4 + e], dot4);
        }
        row_delta[j] = lanes_sum(dot4);
        row_lse[j] = lse[out_row[j]];
    }
