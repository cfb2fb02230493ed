    // The key loop of `main` in flash_attention_subgroup.wgsl and paged_attention_subgroup.wgsl
    // (statements pasted in at its `// #include flash_subgroup_keys.wgsl` line, for the reason in
    // flash_rows_start.wgsl). Each shader defines `kv_row(kv_head, key)`, the row of a key in its K/V
    // buffers; each lane fetches one key's rows and the subgroup shuffles them around.

    // Every lane walks the same keys, so shuffles always find their whole subgroup.
    // The P V step's accumulators, declared once (as in flash_attention.wgsl: declarations inside the
    // written-out loops would be copied with each pass, and count against WGSL's 8 KiB per function).
    var a: array<vec4<f32>, R>;
    for (var key0 = t.key_lo; key0 < t.key_hi; key0 += BC) {
        let interior = key0 >= t.all_lo && key0 + BC <= t.all_hi;
        // The key this lane fetches for the subgroup (past n_kv: the last key, finite and masked).
        let my_key = kv_row(kv_head, min(key0 + lane, params.n_kv - 1u)) * D4;

        // Scores of the step's BC keys for the R rows.
        var s = array<array<f32, BC>, R>();
        for (var e = 0u; e < D4; e++) {
            let mine = k[my_key + e];
            for (var c = 0u; c < BC; c++) {
                let kc = subgroupShuffle(mine, c);
                for (var j = 0u; j < R; j++) {
                    if Q_REGS == 1u {
                        s[j][c] += dot(q_rows[j][e * Q_REGS], kc);
                    } else {
                        s[j][c] += dot(query(out_row[j], e), kc);
                    }
                }
            }
        }

        // Masked keys score NO_SCORE.
        for (var j = 0u; j < R; j++) {
            for (var c = 0u; c < BC; c++) {
                let key = key0 + c;
                let visible = interior || (key >= lo[j] && key < hi[j]);
                s[j][c] = select(NO_SCORE, s[j][c], visible);
            }
        }

        // The step's key weights p and rescale alpha; m and l move on.
        // #include flash_softmax_step.wgsl

        // acc = acc * alpha + P V, each lane fetching its key's V row for the subgroup.
        for (var e = 0u; e < D4; e++) {
            let mine = v[my_key + e];
            for (var j = 0u; j < R; j++) {
                a[j] = acc[j][e] * alpha[j];
            }
            for (var c = 0u; c < BC; c++) {
                let vc = subgroupShuffle(mine, c);
                for (var j = 0u; j < R; j++) {
                    a[j] = fma(vec4<f32>(p[j][c]), vc, a[j]);
                }
            }
            for (var j = 0u; j < R; j++) {
                acc[j][e] = a[j];
            }
        }
        // The traced build writes each row's m, l, rescale and accumulator here (the subgroup forward
        // only: shader_text::traced turns this line into an include; paged_attention_subgroup keeps it a
        // comment).
        // #trace flash_trace_step.wgsl
    }
