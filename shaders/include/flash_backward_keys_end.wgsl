    // The end of `key_grads`: each real key writes its dK and dV.
    // Statements, pasted in at the `// #include flash_backward_keys_end.wgsl` line of flash_backward.wgsl
    // and flash_backward_subgroup.wgsl: not a function, so the arrays stay locals of the entry point
    // (see flash_rows_start.wgsl).

    for (var j = 0u; j < RK; j++) {
        if key_first + lid + j * BR < params.n_kv {
            let dst = (kv_head * params.n_kv + key[j]) * D4;
            for (var e = 0u; e < D4; e++) {
                if KEEP_DK == 1u {
                    grads[dk_base() + dst + e] = dk[j][e * KEEP_DK] * params.scale;
                }
                if KEEP_DV == 1u {
                    grads[dv_base() + dst + e] = dv[j][e * KEEP_DV];
                }
            }
        }
    }
