// The row bookkeeping of row_softmax.wgsl and row_softmax_subgroup.wgsl (pasted in at their
// `// #include softmax_rows.wgsl` line by src/gpu/shader_text.rs), which differ only in how K reaches
// the lanes. Needs attention_io.wgsl, attention_masks.wgsl, the `out` binding and the constants R
// and OUTPUT.

const OUT_PROBS: u32 = 0u;
const OUT_LSE: u32 = 1u;

// One of an invocation's R rows: query i of a query head, its output row, its visible keys.
struct Row {
    // False for rows past the end (they repeat the last row; nothing is written for them).
    valid: bool,
    // Index of the row in [h_q, n_q].
    out_row: u32,
    lo: u32,
    hi: u32,
}

// Row j of the invocation `lid` of the workgroup whose rows start at row0 (of the KV head's
// n_q * G rows, query-major: row r is query r / G of head kv_head * G + r % G).
fn row_of(kv_head: u32, row0: u32, lid: u32, j: u32) -> Row {
    let g = params.group;
    let rows_total = params.n_q * g;
    let row = row0 + lid * R + j;
    let r = min(row, rows_total - 1u);
    let i = r / g;
    let pos = params.q_offset + i;
    return Row(row < rows_total, (kv_head * g + r % g) * params.n_q + i, key_lo(pos), key_hi(pos));
}

// Takes one key's scaled score for a row: stores it (OUT_PROBS; the last pass turns it into a
// probability), and returns the row's running max m and sum l of exp(s - m) with it folded in (l is
// rescaled when the max rises). Masked keys add nothing and are never exponentiated.
fn add_score(row: Row, key: u32, dot4: vec4<f32>, m: f32, l: f32) -> vec2<f32> {
    let visible = key >= row.lo && key < row.hi;
    let s = select(NO_SCORE, (dot4.x + dot4.y) + (dot4.z + dot4.w), visible);
    if OUTPUT == OUT_PROBS {
        if row.valid && key < params.n_kv {
            out[row.out_row * params.n_kv + key] = s;
        }
    }
    let m_new = max(m, s);
    return vec2<f32>(m_new, l * exp(m - m_new) + select(0.0, exp(s - m_new), visible));
}

// Writes a row's result: its probabilities exp(s - lse) over the visible keys and 0 elsewhere
// (OUT_PROBS), or its log-sum-exp, -inf when it sees no key (OUT_LSE).
fn finish_row(row: Row, m: f32, l: f32) {
    if !row.valid {
        return;
    }
    let lse = select(negative_infinity(), m + log(l), l > 0.0);
    if OUTPUT == OUT_LSE {
        out[row.out_row] = lse;
        return;
    }
    let base = row.out_row * params.n_kv;
    for (var key = row.lo; key < row.hi; key++) {
        // min: rounding can put a score a hair above the row's log-sum-exp.
        out[base + key] = min(exp(out[base + key] - lse), 1.0);
    }
    for (var key = 0u; key < min(row.lo, row.hi); key++) {
        out[base + key] = 0.0;
    }
    for (var key = max(row.lo, row.hi); key < params.n_kv; key++) {
        out[base + key] = 0.0;
    }
}
