// Tiled attention forward for CPU-class adapters (lavapipe, SwiftShader), with the results and the
// contract of flash_attention.wgsl (same parameters, bindings, masks, O and log-sum-exp).
//
// Why a second kernel. A CPU adapter runs invocations as the lanes of SIMD registers. Arithmetic on
// registers runs at full speed, but every read from a storage buffer (or workgroup memory) is a loop
// of scalar loads, one per lane and component, however uniform the address: a vec4 read costs about as
// much as dozens of FMAs. flash_attention.wgsl has every invocation read every K/V element of a tile.
// Here each lane of a subgroup reads one key's K and V rows, and the subgroup passes them around with
// subgroupShuffle (a register move on these adapters), so a step of BC keys (the subgroup size) costs
// each lane one K row and one V row instead of BC of each. Each invocation also owns R query rows, so
// every K/V value it holds serves R rows.
//
// Browsers need `enable subgroups;` first; Naga rejects that line but accepts the builtins without
// it, so src/gpu/flash_attention_subgroup.rs adds it on the web.
//
// Rows, masks, the online softmax and the fully-masked-row result are as in flash_attention.wgsl.

// #include attention_io.wgsl

// #include flash_io.wgsl

// The trace's binding, in traced builds only (src/gpu/flash_trace.rs).
// #trace flash_trace_io.wgsl

// #include attention_masks.wgsl

// Compile-time constants, rewritten by src/gpu/flash_attention_subgroup.rs for each pipeline (the
// values here keep the file valid as written). Constants, not overrides, so that private arrays have
// exactly the size their loops run over and the compiler keeps them in registers.
// Head dimension (a multiple of 4).
const D: u32 = 64u;
// Query rows each invocation owns.
const R: u32 = 8u;
// 1: query rows kept in registers; 0: read at every step (heads over 768 wide; see flash_attention.wgsl).
const Q_REGS: u32 = 1u;
// Keys per step, one per lane: the adapter's subgroup size (named as the key step of
// flash_attention.wgsl, which the shared step code loops over).
const BC: u32 = 8u;

// Invocations per workgroup: a multiple of BC, so every subgroup is full.
override BR: u32 = 8u;

const D4: u32 = D / 4u;
const Q4: u32 = D4 * Q_REGS + 1u - Q_REGS;

@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    // This invocation's rows (t, kv_head, g, rows_total, row0, out_row, lo, hi, q_rows, acc, m, l).
    // #include flash_rows_start.wgsl

    // Every lane walks the same keys, so shuffles always find their whole subgroup.
    let kv_base = kv_head * params.kv_stride;
    // The P V step's accumulators, declared once (as in flash_attention.wgsl: declarations inside the
    // written-out loops would be copied with each pass, and count against WGSL's 8 KiB per function).
    var a: array<vec4<f32>, R>;
    for (var key0 = t.key_lo; key0 < t.key_hi; key0 += BC) {
        let interior = key0 >= t.all_lo && key0 + BC <= t.all_hi;
        // The key this lane fetches for the subgroup (past n_kv: the last key, finite and masked).
        let my_key = (kv_base + min(key0 + lane, params.n_kv - 1u)) * D4;

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
        // #trace flash_trace_step.wgsl
    }

    // O and lse of the real rows.
    // #include flash_rows_end.wgsl
}
