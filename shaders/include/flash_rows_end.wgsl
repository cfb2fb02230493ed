    // The end of `main` in flash_attention.wgsl and flash_attention_subgroup.wgsl (pasted in at its
    // `// #include flash_rows_end.wgsl` line, for the reason in flash_rows_start.wgsl): each real row
    // writes O = acc / l and lse = m + log(l), or O = 0 and lse = -inf when it saw no key.
    for (var j = 0u; j < R; j++) {
        if row0 + lid + j * BR < rows_total {
            let seen = l[j] > 0.0;
            let inv_l = select(0.0, 1.0 / l[j], seen);
            for (var e = 0u; e < D4; e++) {
                o[out_row[j] * D4 + e] = acc[j][e] * inv_l;
            }
            lse[out_row[j]] = select(negative_infinity(), m[j] + log(l[j]), seen);
        }
    }
