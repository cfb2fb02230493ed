    // The key loop of `main` in flash_attention.wgsl and paged_attention.wgsl (statements pasted in at
    // its `// #include flash_keys.wgsl` line, for the reason in flash_rows_start.wgsl). Each shader
    // defines `kv_row(kv_head, key)`, the row of a key in its K/V buffers: contiguous per KV head, or
    // through a page table. Every invocation asks for the same keys, so the addresses stay uniform.

    // The step's temporaries, declared once: the loops below are written out in full for CPU
    // adapters, and declarations inside them would be copied with each pass, while WGSL allows
    // 8 KiB of variables per function, copies included (browsers check).
    var kv: vec4<f32>;
    var vv: vec4<f32>;
    var a: array<vec4<f32>, R>;
    for (var key0 = t.key_lo; key0 < t.key_hi; key0 += BC) {
        let interior = key0 >= t.all_lo && key0 + BC <= t.all_hi;
        // Vec4 index of each key's row; keys past n_kv read the last key (finite data, masked score).
        var key_base: array<u32, BC>;
        for (var c = 0u; c < BC; c++) {
            key_base[c] = kv_row(kv_head, min(key0 + c, params.n_kv - 1u)) * D4;
        }
        if STAGE_KV == 1u {
            // Cooperative, contiguous load of BC K rows and BC V rows.
            for (var e = lid; e < BC * D4; e += BR) {
                let src = kv_row(kv_head, min(key0 + e / D4, params.n_kv - 1u)) * D4 + e % D4;
                k_tile[e] = k[src];
                v_tile[e] = v[src];
            }
            workgroupBarrier();
        }

        // Scores of the step's BC keys for the R rows: each K element read serves R rows.
        var s: array<array<f32, BC>, R>;
        for (var c = 0u; c < BC; c++) {
            var dot4 = array<vec4<f32>, R>();
            for (var e = 0u; e < D4; e++) {
                if STAGE_KV == 1u {
                    kv = k_tile[(c * D4 + e) * STAGE_KV];
                } else {
                    kv = k[key_base[c] + e];
                }
                for (var j = 0u; j < R; j++) {
                    if Q_REGS == 1u {
                        dot4[j] = fma(q_rows[j][e * Q_REGS], kv, dot4[j]);
                    } else {
                        dot4[j] = fma(query(out_row[j], e), kv, dot4[j]);
                    }
                }
            }
            let key = key0 + c;
            for (var j = 0u; j < R; j++) {
                let visible = interior || (key >= lo[j] && key < hi[j]);
                s[j][c] = select(NO_SCORE, (dot4[j].x + dot4[j].y) + (dot4[j].z + dot4[j].w), visible);
            }
        }

        // The step's key weights p and rescale alpha; m and l move on.
        // #include flash_softmax_step.wgsl

        // acc = acc * alpha + P V: head dimension outer, so each accumulator is read and written once
        // per step, and each V element read serves R rows.
        for (var e = 0u; e < D4; e++) {
            for (var j = 0u; j < R; j++) {
                a[j] = acc[j][e] * alpha[j];
            }
            for (var c = 0u; c < BC; c++) {
                if STAGE_KV == 1u {
                    vv = v_tile[(c * D4 + e) * STAGE_KV];
                } else {
                    vv = v[key_base[c] + e];
                }
                for (var j = 0u; j < R; j++) {
                    a[j] = fma(vec4<f32>(p[j][c]), vv, a[j]);
                }
            }
            for (var j = 0u; j < R; j++) {
                acc[j][e] = a[j];
            }
        }
        // The traced build writes each row's m, l, rescale and accumulator here (flash_attention only:
        // shader_text::traced turns this line into an include; paged_attention keeps it a comment).
        // #trace flash_trace_step.wgsl
        if STAGE_KV == 1u {
            workgroupBarrier();
        }
    }
