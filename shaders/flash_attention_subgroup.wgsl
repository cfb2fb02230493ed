// Tiled attention forward for CPU-class adapters (lavapipe, SwiftShader), with the results and the
// contract of flash_attention.wgsl (same parameters, bindings, masks, O and log-sum-exp).
//
// Why a second kernel. A CPU adapter runs invocations as the lanes of SIMD registers. Arithmetic on
// registers runs at full speed, but every read from a storage buffer (or workgroup memory) is a loop
// of scalar loads, one per lane and component, however uniform the address: a vec4 read costs about as
// much as dozens of FMAs. flash_attention.wgsl has every invocation read every K/V element of a tile.
// Here each lane of a subgroup reads one key's K and V rows, and the subgroup passes them around with
// subgroupShuffle (a register move on these adapters), so a step of SG keys costs each lane one K row
// and one V row instead of SG of each. Each invocation also owns R query rows, so every K/V value it
// holds serves R rows.
//
// Browsers need `enable subgroups;` first; Naga rejects that line but accepts the builtins without
// it, so src/gpu/flash_attention_subgroup.rs adds it on the web.
//
// Rows, masks, the online softmax and the fully-masked-row result are as in flash_attention.wgsl.

// #include attention_io.wgsl

// #include flash_io.wgsl

// #include attention_masks.wgsl

// Compile-time constants, rewritten by src/gpu/flash_attention_subgroup.rs for each pipeline (the
// values here keep the file valid as written). Constants, not overrides, so that private arrays have
// exactly the size their loops run over and the compiler keeps them in registers.
// Head dimension (a multiple of 4).
const D: u32 = 64u;
// Query rows each invocation owns.
const R: u32 = 8u;
// The adapter's subgroup size: keys per step, one per lane.
const SG: u32 = 8u;

// Invocations per workgroup: a multiple of SG, so every subgroup is full.
override BR: u32 = 8u;

const D4: u32 = D / 4u;

@compute @workgroup_size(BR)
fn main(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(num_workgroups) wg_count: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    // The workgroup's rows and keys (attention_io.wgsl). Every lane walks the same keys, so shuffles
    // always find their whole subgroup.
    let t = tile_of(wg_id, wg_count, BR * R);
    let kv_head = t.kv_head;
    if kv_head >= params.h_kv {
        return;
    }
    let g = params.group;
    let rows_total = params.n_q * g;
    let row0 = t.row0;

    // This invocation's rows row0 + lid + j * BR. Rows past the end repeat the last row (their results
    // are not written), so every lane stays active.
    var out_row: array<u32, R>;
    var lo: array<u32, R>;
    var hi: array<u32, R>;
    // Query rows pre-scaled so scores need no multiply; output accumulators; running max and sum.
    var q_rows: array<array<vec4<f32>, D4>, R>;
    var acc = array<array<vec4<f32>, D4>, R>();
    var m: array<f32, R>;
    var l = array<f32, R>();
    for (var j = 0u; j < R; j++) {
        let row = min(row0 + lid + j * BR, rows_total - 1u);
        let i = row / g;
        out_row[j] = (kv_head * g + row % g) * params.n_q + i;
        lo[j] = key_lo(params.q_offset + i);
        hi[j] = key_hi(params.q_offset + i);
        for (var e = 0u; e < D4; e++) {
            q_rows[j][e] = q[out_row[j] * D4 + e] * params.scale;
        }
        m[j] = NO_SCORE;
    }

    let kv_base = kv_head * params.kv_stride;
    for (var key0 = t.key_lo; key0 < t.key_hi; key0 += SG) {
        let interior = key0 >= t.all_lo && key0 + SG <= t.all_hi;
        // The key this lane fetches for the subgroup (past n_kv: the last key, finite and masked).
        let my_key = (kv_base + min(key0 + lane, params.n_kv - 1u)) * D4;

        // Scores of the step's SG keys for the R rows.
        var s = array<array<f32, SG>, R>();
        for (var e = 0u; e < D4; e++) {
            let mine = k[my_key + e];
            for (var c = 0u; c < SG; c++) {
                let kc = subgroupShuffle(mine, c);
                for (var j = 0u; j < R; j++) {
                    s[j][c] += dot(q_rows[j][e], kc);
                }
            }
        }

        // Online softmax once per step and row (see flash_attention.wgsl).
        var p: array<array<f32, SG>, R>;
        var alpha: array<f32, R>;
        for (var j = 0u; j < R; j++) {
            var m_new = m[j];
            for (var c = 0u; c < SG; c++) {
                let key = key0 + c;
                let visible = interior || (key >= lo[j] && key < hi[j]);
                s[j][c] = select(NO_SCORE, s[j][c], visible);
                m_new = max(m_new, s[j][c]);
            }
            alpha[j] = exp(m[j] - m_new);
            var p_sum = 0.0;
            for (var c = 0u; c < SG; c++) {
                p[j][c] = select(0.0, exp(s[j][c] - m_new), s[j][c] > NO_SCORE);
                p_sum += p[j][c];
            }
            l[j] = l[j] * alpha[j] + p_sum;
            m[j] = m_new;
        }

        // acc = acc * alpha + P V, each lane fetching its key's V row for the subgroup.
        for (var e = 0u; e < D4; e++) {
            let mine = v[my_key + e];
            var a: array<vec4<f32>, R>;
            for (var j = 0u; j < R; j++) {
                a[j] = acc[j][e] * alpha[j];
            }
            for (var c = 0u; c < SG; c++) {
                let vc = subgroupShuffle(mine, c);
                for (var j = 0u; j < R; j++) {
                    a[j] = fma(vec4<f32>(p[j][c]), vc, a[j]);
                }
            }
            for (var j = 0u; j < R; j++) {
                acc[j][e] = a[j];
            }
        }
    }

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
}
