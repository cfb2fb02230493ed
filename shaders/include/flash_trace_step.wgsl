        // Traced builds only (pasted in at the key loop's `// #trace flash_trace_step.wgsl` line by
        // shader_text::traced): each real row records this step's key0, m, l, alpha and acc after the
        // step, in the record flash_trace_io.wgsl describes.
        for (var j = 0u; j < R; j++) {
            if row0 + lid + j * BR < rows_total {
                let rec = (out_row[j] * trace_slots() + (key0 - t.key_lo) / BC) * (1u + D4);
                flash_trace[rec] = vec4<f32>(f32(key0), m[j], l[j], alpha[j]);
                for (var e = 0u; e < D4; e++) {
                    flash_trace[rec + 1u + e] = acc[j][e];
                }
            }
        }
