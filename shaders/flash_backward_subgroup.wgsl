// Attention's backward pass for CPU-class adapters (lavapipe, SwiftShader), with the results, passes
// and bindings of flash_backward.wgsl (`main`: D and dQ; `key_grads`: dK and dV, after it).
//
// Why a second kernel: as in flash_attention_subgroup.wgsl, a CPU adapter runs invocations as SIMD
// lanes, and every buffer read is a loop of scalar loads, one per lane, however uniform the address.
// Here each lane of a subgroup reads one key's K and V rows (`main`) or one row's Q and dO (`key_grads`)
// and the subgroup passes them around with subgroupShuffle (a register move on these adapters), so a
// step of BC (the subgroup size) keys or rows costs each lane one of each instead of BC. Each invocation
// owns R rows (keys), so every value it holds serves R of them. One subgroup per workgroup.
//
// Browsers need `enable subgroups;` first; src/gpu/flash_backward_subgroup.rs adds it on the web.

// #include attention_io.wgsl

// #include attention_masks.wgsl

// #include flash_backward_io.wgsl

// Compile-time constants, rewritten by src/gpu/flash_backward_subgroup.rs for each pipeline.
// Head dimension (a multiple of 4).
const D: u32 = 64u;
// Rows each invocation of `main` owns.
const R: u32 = 4u;
// Keys each invocation of `key_grads` owns (it keeps four head-wide vectors per key, `main` three per row).
const RK: u32 = 4u;
// Keys (`main`) or rows (`key_grads`) per step, one per lane: the adapter's subgroup size.
const BC: u32 = 8u;
// This form keeps every row's and key's vectors in registers and both key gradients: it takes heads
// up to 256 wide, and flash_backward.wgsl wider ones (see its constants of the same names).
const ROW_REGS: u32 = 1u;
const KEY_REGS: u32 = 1u;
const KEEP_DK: u32 = 1u;
const KEEP_DV: u32 = 1u;

// Invocations per workgroup: the subgroup size.
override BR: u32 = 8u;

const D4: u32 = D / 4u;

// D and dQ of BR * R (query, head) rows of one KV head.
@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    // #include flash_backward_rows_start.wgsl

    let kv_base = kv_head * params.kv_stride;
    for (var key0 = t.key_lo; key0 < t.key_hi; key0 += BC) {
        let interior = key0 >= t.all_lo && key0 + BC <= t.all_hi;
        // The key this lane fetches for the subgroup (past n_kv: the last key, finite and masked).
        let my_key = (kv_base + min(key0 + lane, params.n_kv - 1u)) * D4;
        // Scores and dP of the step's BC keys for the R rows.
        var s = array<array<f32, BC>, R>();
        var dp = array<array<f32, BC>, R>();
        var mine_k: array<vec4<f32>, D4>;
        for (var e = 0u; e < D4; e++) {
            mine_k[e] = k[my_key + e];
            let mine_v = v[my_key + e];
            for (var c = 0u; c < BC; c++) {
                let kc = subgroupShuffle(mine_k[e], c);
                let vc = subgroupShuffle(mine_v, c);
                for (var j = 0u; j < R; j++) {
                    s[j][c] += dot(q_rows[j][e], kc);
                    dp[j][c] += dot(do_rows[j][e], vc);
                }
            }
        }
        var ds: array<array<f32, BC>, R>;
        for (var j = 0u; j < R; j++) {
            for (var c = 0u; c < BC; c++) {
                let key = key0 + c;
                let visible = interior || (key >= lo[j] && key < hi[j]);
                let p = select(0.0, exp(s[j][c] - row_lse[j]), visible);
                ds[j][c] = p * (dp[j][c] - row_delta[j]);
            }
        }
        // acc += dS K, each lane sharing its key's K row again.
        for (var e = 0u; e < D4; e++) {
            var a: array<vec4<f32>, R>;
            for (var j = 0u; j < R; j++) {
                a[j] = acc[j][e];
            }
            for (var c = 0u; c < BC; c++) {
                let kc = subgroupShuffle(mine_k[e], c);
                for (var j = 0u; j < R; j++) {
                    a[j] = fma(vec4<f32>(ds[j][c]), kc, a[j]);
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
fn key_grads(at: GridPlace, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    // #include flash_backward_keys_start.wgsl

    for (var r0 = row_lo; r0 < row_hi; r0 += BC) {
        // The row this lane fetches for the subgroup, and the keys it sees ([0, 0) past the last row).
        let my_index = min(r0 + lane, row_hi - 1u);
        let my_i = my_index / g;
        let my_q = (kv_head * g + my_index % g) * params.n_q + my_i;
        let my_row = my_q * D4;
        let my_lse = lse[my_q];
        let my_delta = delta[my_q];
        let my_lo = key_lo(params.q_offset + my_i);
        let my_hi = select(0u, key_hi(params.q_offset + my_i), r0 + lane < row_hi);
        // Shuffled first, outside `&&`: a shuffle behind a short-circuit is not in uniform control
        // flow, which browsers' compilers refuse (naga accepts it).
        let last_row_lo = subgroupShuffle(my_lo, BC - 1u);
        let first_row_hi = subgroupShuffle(my_hi, 0u);
        let interior = r0 + BC <= row_hi && last_row_lo <= key_first && first_row_hi > key_last;
        // Scores and dP of the step's BC rows for the RK keys.
        var s = array<array<f32, BC>, RK>();
        var dp = array<array<f32, BC>, RK>();
        var mine_q: array<vec4<f32>, D4>;
        var mine_do: array<vec4<f32>, D4>;
        for (var e = 0u; e < D4; e++) {
            mine_q[e] = q[my_row + e];
            mine_do[e] = d_o[my_row + e];
            for (var c = 0u; c < BC; c++) {
                let qc = subgroupShuffle(mine_q[e], c);
                let dc = subgroupShuffle(mine_do[e], c);
                for (var j = 0u; j < RK; j++) {
                    s[j][c] += dot(qc, k_rows[j][e]);
                    dp[j][c] += dot(dc, v_rows[j][e]);
                }
            }
        }
        var p: array<array<f32, BC>, RK>;
        var ds: array<array<f32, BC>, RK>;
        for (var c = 0u; c < BC; c++) {
            let lse_c = subgroupShuffle(my_lse, c);
            let delta_c = subgroupShuffle(my_delta, c);
            let lo_c = subgroupShuffle(my_lo, c);
            let hi_c = subgroupShuffle(my_hi, c);
            for (var j = 0u; j < RK; j++) {
                let visible = interior || (key[j] >= lo_c && key[j] < hi_c);
                p[j][c] = select(0.0, exp(s[j][c] - lse_c), visible);
                ds[j][c] = p[j][c] * (dp[j][c] - delta_c);
            }
        }
        // dV += P dO and dK += dS Q, each lane sharing its row's Q and dO again.
        for (var e = 0u; e < D4; e++) {
            var a_v: array<vec4<f32>, RK>;
            var a_k: array<vec4<f32>, RK>;
            for (var j = 0u; j < RK; j++) {
                a_v[j] = dv[j][e];
                a_k[j] = dk[j][e];
            }
            for (var c = 0u; c < BC; c++) {
                let qc = subgroupShuffle(mine_q[e], c);
                let dc = subgroupShuffle(mine_do[e], c);
                for (var j = 0u; j < RK; j++) {
                    a_v[j] = fma(vec4<f32>(p[j][c]), dc, a_v[j]);
                    a_k[j] = fma(vec4<f32>(ds[j][c]), qc, a_k[j]);
                }
            }
            for (var j = 0u; j < RK; j++) {
                dv[j][e] = a_v[j];
                dk[j][e] = a_k[j];
            }
        }
    }

    // #include flash_backward_keys_end.wgsl
}
