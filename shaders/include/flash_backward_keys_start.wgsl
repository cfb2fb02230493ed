    // The start of `key_grads`: the tile's keys and the rows that see any of them, and each of this
    // invocation's RK keys with its K (pre-scaled), V and dK, dV accumulators (kv_head, g, key_first,
    // key_last, row_lo, row_hi, key, k_rows, v_rows, dk, dv, kv_base).
    // Statements, pasted in at the `// #include flash_backward_keys_start.wgsl` line of flash_backward.wgsl
    // and flash_backward_subgroup.wgsl: not a function, so the arrays stay locals of the entry point
    // (see flash_rows_start.wgsl).

    let wg = workgroup_index(at);
    let kv_head = wg / params.tiles_per_kv_head;
    if kv_head >= params.h_kv {
        return;
    }
    let g = params.group;
    let key_first = (wg % params.tiles_per_kv_head) * BR * RK;
    let key_last = min(key_first + BR * RK, params.n_kv) - 1u;

    // The rows that see any of the tile's keys.
    let pos_end = params.q_offset + params.n_q;
    let pos_lo = clamp(query_lo(key_first), params.q_offset, pos_end);
    let pos_hi = clamp(query_hi(key_last), pos_lo, pos_end);
    let row_lo = (pos_lo - params.q_offset) * g;
    let row_hi = (pos_hi - params.q_offset) * g;

    // This invocation's keys (past n_kv: the last key again, not written); K pre-scaled.
    var key: array<u32, RK>;
    // (An array this launch does not keep has one element, never used: KEY_REGS, KEEP_DK, KEEP_DV.)
    var k_rows: array<array<vec4<f32>, KEY4>, RK>;
    var v_rows: array<array<vec4<f32>, KEY4>, RK>;
    var dk: array<array<vec4<f32>, DK4>, RK>;
    var dv: array<array<vec4<f32>, DV4>, RK>;
    let kv_base = kv_head * params.kv_stride;
    for (var j = 0u; j < RK; j++) {
        key[j] = min(key_first + lid + j * BR, params.n_kv - 1u);
        for (var e = 0u; e < D4; e++) {
            if KEY_REGS == 1u {
                k_rows[j][e * KEY_REGS] = k[(kv_base + key[j]) * D4 + e] * params.scale;
                v_rows[j][e * KEY_REGS] = v[(kv_base + key[j]) * D4 + e];
            }
            dk[j][e * KEEP_DK] = vec4<f32>(0.0);
            dv[j][e * KEEP_DV] = vec4<f32>(0.0);
        }
    }
