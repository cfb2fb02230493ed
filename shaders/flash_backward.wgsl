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
// Two entry points, launched in this order:
// - `main`, one pass over key tiles per tile of query rows (rows as in flash_attention.wgsl: a KV
//   head's n_q * G (query, head) rows, query-major): D of its rows (written to `delta`), then dQ.
// - `key_grads`, one pass over query rows per tile of keys: dK and dV of its keys, reading `delta`;
//   for heads over 768 wide, twice (KEEP_DK, then KEEP_DV), so three launches in all.
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
// Rows each invocation of `main` owns.
const R: u32 = 1u;
// Keys each invocation of `key_grads` owns.
const RK: u32 = 1u;
// 1: `main` keeps its rows' Q and dO in registers. 0 (heads over 512 wide): it reads them from their
// buffers at every key, so its dQ accumulators alone take the function's variables (WGSL allows 8 KiB).
const ROW_REGS: u32 = 1u;
// 1: `key_grads` keeps its keys' K and V in registers. 0 (heads over 384 wide): it reads them at every row.
const KEY_REGS: u32 = 1u;
// Which gradients `key_grads` accumulates: dK (KEEP_DK = 1), dV (KEEP_DV = 1), both in one launch up
// to heads 768 wide; wider heads take one launch for each, so each holds one head-wide vector per key.
const KEEP_DK: u32 = 1u;
const KEEP_DV: u32 = 1u;

// Invocations per workgroup.
override BR: u32 = 64u;

const D4: u32 = D / 4u;

// D and dQ of BR * R (query, head) rows of one KV head.
@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    // #include flash_backward_rows_start.wgsl

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
                    if ROW_REGS == 1u {
                        s4[j] = fma(q_rows[j][e * ROW_REGS], kk, s4[j]);
                        dp4[j] = fma(do_rows[j][e * ROW_REGS], vv, dp4[j]);
                    } else {
                        s4[j] = fma(q[out_row[j] * D4 + e] * params.scale, kk, s4[j]);
                        dp4[j] = fma(d_o[out_row[j] * D4 + e], vv, dp4[j]);
                    }
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

    // #include flash_backward_rows_end.wgsl
}

// dK and dV of BR * RK keys of one KV head (tiles_per_kv_head: key tiles per KV head).
@compute @workgroup_size(BR)
fn key_grads(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    // #include flash_backward_keys_start.wgsl

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
        // P and dS of the step's BC x RK pairs: each Q and dO element read serves RK keys.
        var p: array<array<f32, BC>, RK>;
        var ds: array<array<f32, BC>, RK>;
        for (var c = 0u; c < BC; c++) {
            var s4 = array<vec4<f32>, RK>();
            var dp4 = array<vec4<f32>, RK>();
            for (var e = 0u; e < D4; e++) {
                let qq = q[row_base[c] + e];
                for (var j = 0u; j < RK; j++) {
                    if KEY_REGS == 1u {
                        s4[j] = fma(qq, k_rows[j][e * KEY_REGS], s4[j]);
                    } else {
                        s4[j] = fma(qq, k[(kv_base + key[j]) * D4 + e] * params.scale, s4[j]);
                    }
                }
                // dP only feeds dS, which only dK needs.
                if KEEP_DK == 1u {
                    let dd = d_o[row_base[c] + e];
                    for (var j = 0u; j < RK; j++) {
                        if KEY_REGS == 1u {
                            dp4[j] = fma(dd, v_rows[j][e * KEY_REGS], dp4[j]);
                        } else {
                            dp4[j] = fma(dd, v[(kv_base + key[j]) * D4 + e], dp4[j]);
                        }
                    }
                }
            }
            for (var j = 0u; j < RK; j++) {
                let visible = interior || (key[j] >= lo[c] && key[j] < hi[c]);
                p[j][c] = select(0.0, exp(lanes_sum(s4[j]) - row_lse[c]), visible);
                ds[j][c] = p[j][c] * (lanes_sum(dp4[j]) - row_delta[c]);
            }
        }
        // dV += P dO and dK += dS Q (those this launch keeps), head dimension outer.
        for (var e = 0u; e < D4; e++) {
            var a_v: array<vec4<f32>, RK>;
            var a_k: array<vec4<f32>, RK>;
            for (var j = 0u; j < RK; j++) {
                a_v[j] = dv[j][e * KEEP_DV];
                a_k[j] = dk[j][e * KEEP_DK];
            }
            for (var c = 0u; c < BC; c++) {
                if KEEP_DV == 1u {
                    let dd = d_o[row_base[c] + e];
                    for (var j = 0u; j < RK; j++) {
                        a_v[j] = fma(vec4<f32>(p[j][c]), dd, a_v[j]);
                    }
                }
                if KEEP_DK == 1u {
                    let qq = q[row_base[c] + e];
                    for (var j = 0u; j < RK; j++) {
                        a_k[j] = fma(vec4<f32>(ds[j][c]), qq, a_k[j]);
                    }
                }
            }
            for (var j = 0u; j < RK; j++) {
                dv[j][e * KEEP_DV] = a_v[j];
                dk[j][e * KEEP_DK] = a_k[j];
            }
        }
    }

    // #include flash_backward_keys_end.wgsl
}
