    // The end of `main`: each real row writes its D and dQ.
    // Statements, pasted in at the `// #include flash_backward_rows_end.wgsl` line of flash_backward.wgsl
    // and flash_backward_subgroup.wgsl: not a function, so the arrays stay locals of the entry point
    // (see flash_rows_start.wgsl).

    for (var j = 0u; j < R; j++) {
        if t.row0 + lid + j * BR < rows_total {
            delta[out_row[j]] = row_delta[j];
            for (var e = 0u; e < D4; e++) {
                grads[out_row[j] * D4 + e] = acc[j][e] * params.scale;
            }
        }
    }
