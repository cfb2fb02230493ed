        // The online softmax of one step in flash_attention.wgsl and flash_attention_subgroup.wgsl,
        // pasted into the key loop at its `// #include flash_softmax_step.wgsl` line (statements, for
        // the reason in flash_rows_start.wgsl). Takes the step's scores s[j][c] (NO_SCORE where masked)
        // of its BC keys; updates m and l; declares p (each key's weight) and alpha (the rescale).
        //
        // Once per step and row: raise the running max over the step's scores, rescale by
        // alpha = exp(m_old - m_new) (0 for the first visible step: exp(NO_SCORE - m) underflows), and
        // weight each key by exp(s - m_new); masked keys weigh 0, never exp.
        var p: array<array<f32, BC>, R>;
        var alpha: array<f32, R>;
        for (var j = 0u; j < R; j++) {
            var m_new = m[j];
            for (var c = 0u; c < BC; c++) {
                m_new = max(m_new, s[j][c]);
            }
            alpha[j] = exp(m[j] - m_new);
            var p_sum = 0.0;
            for (var c = 0u; c < BC; c++) {
                p[j][c] = select(0.0, exp(s[j][c] - m_new), s[j][c] > NO_SCORE);
                p_sum += p[j][c];
            }
            l[j] = l[j] * alpha[j] + p_sum;
            m[j] = m_new;
        }
