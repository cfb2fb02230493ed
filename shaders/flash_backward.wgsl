// Attention's backward pass the FlashAttention-2 way, f32 throughout: given dO, the gradients dQ, dK
// and dV of O = softmax(scale * Q Kᵀ + mask) V for every head (GQA included), never an n x n matrix.
//
// Each probability is recomputed where it is needed from the forward pass's saved log-sum-exp:
// P_ij = exp(scale q_i·k_j - lse_i) (flash_attention.wgsl writes lse). With D_i = rowsum(dO_i ∘ O_i),
// dP_ij = dO_i·v_j and dS_ij = P_ij (dP_ij - D_i) (the softmax Jacobian diag(p) - p pᵀ applied to a row
// of dP):
//   dV_j = Σ_i P_ij dO_i,   dK_j = scale Σ_i dS_ij q_i,   dQ_i = scale Σ_j dS_ij k_j,
// where i runs over every (query, query head) row that sees key j: a shared K/V head's gradient is the
// sum over its query group.
//
// Two entry points, two launches, in this order:
// - `main`, one pass over key tiles per tile of query rows (rows as in flash_attention.wgsl: a KV
//   head's n_q * G (query, head) rows, query-major): D of its rows (written to `delta`), then dQ.
// - `key_grads`, one pass over query rows per tile of keys: dK and dV of its keys, reading `delta`.
// Each invocation owns R rows (R keys) whose vectors and accumulators live in registers; every
// invocation of a workgroup walks the same keys (rows), so those addresses are uniform, read straight
// from the buffers (R > 1 on CPU adapters, where each read costs a scalar load per lane: each serves
// R rows). src/gpu/flash_backward.rs chooses D, BC, R and BR.
//
// Masks come from positions, as in the forward (query row i sits at q_offset + i): a step whose
// pairs are all visible ("interior") skips the per-pair test, the others mask by select, and masked
// pairs weigh 0 without being exponentiated into the sums.

// #include attention_io.wgsl

// #include attention_masks.wgsl

// #include flash_backward_io.wgsl

// Compile-time constants, rewritten per pipeline by src/gpu/flash_backward.rs (as in
// flash_attention.wgsl: constants, so private arrays have exactly the size their loops run over).
// Head dimension (a multiple of 4).
const D: u32 = 64u;
// Keys (`main`) or query rows (`key_grads`) per step.
const BC: u32 = 8u;
// Rows (`main`) or keys (`key_grads`) each invocation owns.
const R: u32 = 1u;

// Invocations per workgroup.
override BR: u32 = 64u;

const D4: u32 = D / 4u;

// D and dQ of BR * R (query, head) rows of one KV head.
@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
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
    var q_rows: array<array<vec4<f32>, D4>, R>;
    var do_rows: array<array<vec4<f32>, D4>, R>;
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
            q_rows[j][e] = q[out_row[j] * D4 + e] * params.scale;
            do_rows[j][e] = d_o[out_row[j] * D4 + e];
            acc[j][e] = vec4<f32>(0.0);
            dot4 = fma(do_rows[j][e], o[out_row[j] * D4 + e], dot4);
        }
        row_delta[j] = lanes_sum(dot4);
        row_lse[j] = lse[out_row[j]];
    }

    let kv_base = kv_head * params.kv_stride;
    for (var key0 = t.key_lo; key0 < t.key_hi; key0 += BC) {
        let interior = key0 >= t.all_lo && key0 + BC <= t.all_hi;
        // Vec4 index of each key's row; keys past n_kv read the last key (finite data, masked).
        var key_base: array<u32, BC>;
        for (var c = 0u; c < BC; c++) {
            key_base[c] = (kv_base + min(key0 + c, params.n_kv - 1u)) * D4;
        }
        // dS of the step's R x BC pairs: each K and V element read serves R rows.
        var ds: array<array<f32, BC>, R>;
        for (var c = 0u; c < BC; c++) {
            var s4 = array<vec4<f32>, R>();
            var dp4 = array<vec4<f32>, R>();
            for (var e = 0u; e < D4; e++) {
                let kk = k[key_base[c] + e];
                let vv = v[key_base[c] + e];
                for (var j = 0u; j < R; j++) {
                    s4[j] = fma(q_rows[j][e], kk, s4[j]);
                    dp4[j] = fma(do_rows[j][e], vv, dp4[j]);
                }
            }
            let key = key0 + c;
            for (var j = 0u; j < R; j++) {
                let visible = interior || (key >= lo[j] && key < hi[j]);
                let p = select(0.0, exp(lanes_sum(s4[j]) - row_lse[j]), visible);
                ds[j][c] = p * (lanes_sum(dp4[j]) - row_delta[j]);
            }
        }
        // acc += dS K, head dimension outer: each accumulator is read and written once per step.
        for (var e = 0u; e < D4; e++) {
            var a: array<vec4<f32>, R>;
            for (var j = 0u; j < R; j++) {
                a[j] = acc[j][e];
            }
            for (var c = 0u; c < BC; c++) {
                let kk = k[key_base[c] + e];
                for (var j = 0u; j < R; j++) {
                    a[j] = fma(vec4<f32>(ds[j][c]), kk, a[j]);
                }
            }
            for (var j = 0u; j < R; j++) {
                acc[j][e] = a[j];
            }
        }
    }

    for (var j = 0u; j < R; j++) {
        if t.row0 + lid + j * BR < rows_total {
            delta[out_row[j]] = row_delta[j];
            for (var e = 0u; e < D4; e++) {
                grads[out_row[j] * D4 + e] = acc[j][e] * params.scale;
            }
        }
    }
}

// dK and dV of BR * R keys of one KV head (tiles_per_kv_head: key tiles per KV head).
@compute @workgroup_size(BR)
fn key_grads(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let wg = workgroup_index(at);
    let kv_head = wg / params.tiles_per_kv_head;
    if kv_head >= params.h_kv {
        return;
    }
    let g = params.group;
    let key_first = (wg % params.tiles_per_kv_head) * BR * R;
    let key_last = min(key_first + BR * R, params.n_kv) - 1u;

    // The rows that see any of the tile's keys, and the positions every row must see for a step to
    // skip the per-pair test.
    let pos_end = params.q_offset + params.n_q;
    let pos_lo = clamp(query_lo(key_first), params.q_offset, pos_end);
    let pos_hi = clamp(query_hi(key_last), pos_lo, pos_end);
    let row_lo = (pos_lo - params.q_offset) * g;
    let row_hi = (pos_hi - params.q_offset) * g;

    // This invocation's keys (past n_kv: the last key again, not written); K pre-scaled.
    var key: array<u32, R>;
    var k_rows: array<array<vec4<f32>, D4>, R>;
    var v_rows: array<array<vec4<f32>, D4>, R>;
    var dk: array<array<vec4<f32>, D4>, R>;
    var dv: array<array<vec4<f32>, D4>, R>;
    let kv_base = kv_head * params.kv_stride;
    for (var j = 0u; j < R; j++) {
        key[j] = min(key_first + lid + j * BR, params.n_kv - 1u);
        for (var e = 0u; e < D4; e++) {
            k_rows[j][e] = k[(kv_base + key[j]) * D4 + e] * params.scale;
            v_rows[j][e] = v[(kv_base + key[j]) * D4 + e];
            dk[j][e] = vec4<f32>(0.0);
            dv[j][e] = vec4<f32>(0.0);
        }
    }

    for (var r0 = row_lo; r0 < row_hi; r0 += BC) {
        // The step's rows: query index, and the keys each sees ([0, 0) past the last row).
        var row_base: array<u32, BC>;
        var row_lse: array<f32, BC>;
        var row_delta: array<f32, BC>;
        var lo: array<u32, BC>;
        var hi: array<u32, BC>;
        for (var c = 0u; c < BC; c++) {
            let row = min(r0 + c, row_hi - 1u);
            let i = row / g;
            let q_index = (kv_head * g + row % g) * params.n_q + i;
            row_base[c] = q_index * D4;
            row_lse[c] = lse[q_index];
            row_delta[c] = delta[q_index];
            let pos = params.q_offset + i;
            lo[c] = key_lo(pos);
            hi[c] = select(0u, key_hi(pos), r0 + c < row_hi);
        }
        let interior = r0 + BC <= row_hi && lo[BC - 1u] <= key_first && hi[0] > key_last;
        // P and dS of the step's BC x R pairs: each Q and dO element read serves R keys.
        var p: array<array<f32, BC>, R>;
        var ds: array<array<f32, BC>, R>;
        for (var c = 0u; c < BC; c++) {
            var s4 = array<vec4<f32>, R>();
            var dp4 = array<vec4<f32>, R>();
            for (var e = 0u; e < D4; e++) {
                let qq = q[row_base[c] + e];
                let dd = d_o[row_base[c] + e];
                for (var j = 0u; j < R; j++) {
                    s4[j] = fma(qq, k_rows[j][e], s4[j]);
                    dp4[j] = fma(dd, v_rows[j][e], dp4[j]);
                }
            }
            for (var j = 0u; j < R; j++) {
                let visible = interior || (key[j] >= lo[c] && key[j] < hi[c]);
                p[j][c] = select(0.0, exp(lanes_sum(s4[j]) - row_lse[c]), visible);
                ds[j][c] = p[j][c] * (lanes_sum(dp4[j]) - row_delta[c]);
            }
        }
        // dV += P dO and dK += dS Q, head dimension outer.
        for (var e = 0u; e < D4; e++) {
            var a_v: array<vec4<f32>, R>;
            var a_k: array<vec4<f32>, R>;
            for (var j = 0u; j < R; j++) {
                a_v[j] = dv[j][e];
                a_k[j] = dk[j][e];
            }
            for (var c = 0u; c < BC; c++) {
                let qq = q[row_base[c] + e];
                let dd = d_o[row_base[c] + e];
                for (var j = 0u; j < R; j++) {
                    a_v[j] = fma(vec4<f32>(p[j][c]), dd, a_v[j]);
                    a_k[j] = fma(vec4<f32>(ds[j][c]), qq, a_k[j]);
                }
            }
            for (var j = 0u; j < R; j++) {
                dv[j][e] = a_v[j];
                dk[j][e] = a_k[j];
            }
        }
    }

    for (var j = 0u; j < R; j++) {
        if key_first + lid + j * BR < params.n_kv {
            let dst = (kv_head * params.n_kv + key[j]) * D4;
            for (var e = 0u; e < D4; e++) {
                grads[dk_base() + dst + e] = dk[j][e] * params.scale;
                grads[dv_base() + dst + e] = dv[j][e];
            }
        }
    }
}
