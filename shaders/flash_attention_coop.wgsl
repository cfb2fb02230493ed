// Tiled attention forward on the GPU's matrix units (cooperative matrices: tensor cores on NVIDIA, through
// Vulkan's VK_KHR_cooperative_matrix): the same O and log-sum-exp as flash_attention.wgsl, with Q·Kᵀ and
// P·V as products of square f16 matrices accumulated in f32.
//
// Only a device that src/gpu/matrix_units.rs finds a usable configuration on ever compiles this file,
// and the forward's owner runs it only when asked for f16 inputs; everywhere else (lavapipe, SwiftShader,
// every browser) the forward is flash_attention.wgsl as before.
//
// Precision. Q (pre-scaled), K, V and each step's weights P are rounded to f16 as they are staged; every
// product and sum is f32 (an f16 x f16 product is exact in f32). src/cpu/flash_attention_coop.rs is the
// twin of this arithmetic, and its tests state the tolerance against the f64 reference.
//
// Work split. A workgroup is one subgroup of SG invocations (a cooperative matrix belongs to a subgroup)
// and owns BR rows of one KV head, ordered as in flash_attention.wgsl (row r: query r / G of head
// kv_head * G + r % G). Q's rows go to workgroup memory once, as f16. Then per step of BC keys:
//   1. the step's K and V rows go to workgroup memory as f16;
//   2. S (BR x BC) = Q Kᵀ: per T x T block, DT / T products (coopMultiplyAdd), stored to s_tile;
//   3. each invocation takes whole rows: masks the scores, raises the running max m, writes
//      p = exp(s - m) as f16 to p_tile and keeps l = l * alpha + sum(p), alpha = exp(m_old - m_new);
//   4. if a row that already has weight got alpha < 1, every O block is rescaled: WGSL gives no access to
//      a matrix's elements, so a block goes through workgroup memory (stored, scaled per row, loaded);
//   5. O += P V: per T x T block of O, BC / T products.
// At the end each O block goes through workgroup memory once more, divided by l, into o.
//
// Masks as in flash_attention.wgsl: a row that sees no key gets O = 0 and lse = -inf, and masked scores
// are never exponentiated. Cooperative loads, stores and products must be reached by the whole subgroup
// alike, as barriers are: the key loop and the block loops depend on the workgroup and the constants
// only; what each invocation does alone happens in loops over `lid` with no cooperative operation inside.
// Every matrix's first element and stride fall on whole rows of T elements (16 bytes at least), the
// alignment Vulkan asks of cooperative loads and stores.

enable f16;
enable wgpu_cooperative_matrix;

// #include attention_io.wgsl

// #include flash_io.wgsl

// #include attention_masks.wgsl

// Compile-time constants: src/gpu/flash_attention_coop.rs rewrites these lines for each pipeline (same
// names, values from matrix_units::CoopTiles); the values here keep this file valid as written.
// Head width as the buffers hold it (a multiple of 4).
const D: u32 = 64u;
// Side of the square matrices, 16 or 8 (the owner rewrites the `alias` lines below to match).
const T: u32 = 16u;
// D rounded up to a multiple of T: the tiles' columns (zeros past D).
const DT: u32 = 64u;
// Rows a workgroup owns and keys a step covers, multiples of T.
const BR: u32 = 32u;
const BC: u32 = 16u;
const D4: u32 = 16u;
const DT4: u32 = 16u;
const T4: u32 = 4u;
// Row blocks, key blocks of a step, column blocks of a row, and O's blocks (RB * DB).
const RB: u32 = 2u;
const KB: u32 = 1u;
const DB: u32 = 4u;
const RDB: u32 = 8u;

// Invocations per workgroup: one subgroup, the adapter's fixed size.
override SG: u32 = 32u;

alias CoopA = coop_mat16x16<f16, A>;
alias CoopB = coop_mat16x16<f16, B>;
alias CoopC = coop_mat16x16<f32, C>;

// Q's rows (pre-scaled) and the step's K and V rows, row-major, DT columns each.
var<workgroup> q_tile: array<f16, BR * DT>;
var<workgroup> k_tile: array<f16, BC * DT>;
var<workgroup> v_tile: array<f16, BC * DT>;
// The step's scores; afterwards the scratch an O block passes through (T x T <= BR x BC).
var<workgroup> s_tile: array<f32, BR * BC>;
// The step's weights.
var<workgroup> p_tile: array<f16, BR * BC>;
// Each row's running max and sum, and the step's rescale (1 for a row with no weight yet).
var<workgroup> row_m: array<f32, BR>;
var<workgroup> row_l: array<f32, BR>;
var<workgroup> row_alpha: array<f32, BR>;
// Whether this step rescales O (written by one invocation, read by all through workgroupUniformLoad).
var<workgroup> rescale_flag: u32;

// K/V rows of KV head `kv_head` start at `kv_head * kv_stride` (a decode cache has spare capacity).
fn kv_row(kv_head: u32, key: u32) -> u32 {
    return kv_head * params.kv_stride + key;
}

// Row `r` of the workgroup's tile among the KV head's rows; rows past the end repeat the last one
// (staged and computed like the others, never written).
fn head_row(row0: u32, r: u32) -> u32 {
    return min(row0 + r, params.n_q * params.group - 1u);
}

// The row of Q, O and lse that tile row `r` is: query i of head h.
fn out_row_of(row0: u32, r: u32, kv_head: u32) -> u32 {
    let row = head_row(row0, r);
    return (kv_head * params.group + row % params.group) * params.n_q + row / params.group;
}

@compute @workgroup_size(SG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    // The spare workgroups of a folded grid (kv_head >= h_kv) walk no key and write nothing, without
    // returning early: naga cannot tell the workgroup's place is uniform, and would count every
    // cooperative operation after such a return as outside uniform control flow.
    let t = tile_of(at, BR);
    let spare = t.kv_head >= params.h_kv;
    let kv_head = min(t.kv_head, params.h_kv - 1u);
    let key_end = select(t.key_hi, t.key_lo, spare);
    let rows_total = params.n_q * params.group;
    let row0 = t.row0;

    // Q's rows once, pre-scaled and rounded to f16; every row starts with no weight.
    for (var e = lid; e < BR * DT4; e += SG) {
        let r = e / DT4;
        let c4 = e % DT4;
        var x = vec4<f32>(0.0);
        if c4 < D4 {
            x = query(out_row_of(row0, r, kv_head), c4);
        }
        let h = vec4<f16>(x);
        for (var j = 0u; j < 4u; j++) {
            q_tile[r * DT + c4 * 4u + j] = h[j];
        }
    }
    for (var r = lid; r < BR; r += SG) {
        row_m[r] = NO_SCORE;
        row_l[r] = 0.0;
    }
    // O's blocks (zero: WGSL zero-initialises variables).
    var o_acc: array<CoopC, RDB>;
    workgroupBarrier();

    for (var key0 = t.key_lo; key0 < key_end; key0 += BC) {
        // 1. The step's K and V rows as f16; keys past n_kv repeat the last one (masked below).
        for (var e = lid; e < BC * DT4; e += SG) {
            let c = e / DT4;
            let c4 = e % DT4;
            let src = kv_row(kv_head, min(key0 + c, params.n_kv - 1u)) * D4 + c4;
            var kx = vec4<f32>(0.0);
            var vx = vec4<f32>(0.0);
            if c4 < D4 {
                kx = k[src];
                vx = v[src];
            }
            let kh = vec4<f16>(kx);
            let vh = vec4<f16>(vx);
            for (var j = 0u; j < 4u; j++) {
                k_tile[c * DT + c4 * 4u + j] = kh[j];
                v_tile[c * DT + c4 * 4u + j] = vh[j];
            }
        }
        workgroupBarrier();

        // 2. S = Q Kᵀ block by block: A is Q's rows (row-major), B is Kᵀ, K's rows read column-major.
        for (var rb = 0u; rb < RB; rb++) {
            for (var kb = 0u; kb < KB; kb++) {
                var s_block = CoopC();
                for (var db = 0u; db < DB; db++) {
                    let a = coopLoadT<CoopA>(&q_tile[rb * T * DT + db * T], DT);
                    let b = coopLoad<CoopB>(&k_tile[kb * T * DT + db * T], DT);
                    s_block = coopMultiplyAdd(a, b, s_block);
                }
                coopStoreT(s_block, &s_tile[rb * T * BC + kb * T], BC);
            }
        }
        workgroupBarrier();

        // 3. The online softmax, one row an invocation at a time.
        for (var r = lid; r < BR; r += SG) {
            let pos = params.q_offset + head_row(row0, r) / params.group;
            let lo = key_lo(pos);
            let hi = key_hi(pos);
            let m_old = row_m[r];
            var m_new = m_old;
            for (var c = 0u; c < BC; c++) {
                let key = key0 + c;
                let s = select(NO_SCORE, s_tile[r * BC + c], key >= lo && key < hi);
                m_new = max(m_new, s);
            }
            var p_sum = 0.0;
            for (var c = 0u; c < BC; c++) {
                let key = key0 + c;
                let visible = key >= lo && key < hi;
                let s = select(NO_SCORE, s_tile[r * BC + c], visible);
                let p = select(0.0h, f16(exp(s - m_new)), visible);
                p_tile[r * BC + c] = p;
                p_sum += f32(p);
            }
            let alpha = exp(m_old - m_new);
            row_alpha[r] = select(1.0, alpha, row_l[r] > 0.0);
            row_l[r] = row_l[r] * alpha + p_sum;
            row_m[r] = m_new;
        }
        workgroupBarrier();

        // 4. Rescale O where a row's max rose (after the first steps, rarely).
        if lid == 0u {
            var rises = 0u;
            for (var r = 0u; r < BR; r++) {
                rises = select(rises, 1u, row_alpha[r] < 1.0);
            }
            rescale_flag = rises;
        }
        if workgroupUniformLoad(&rescale_flag) == 1u {
            for (var j = 0u; j < RDB; j++) {
                coopStoreT(o_acc[j], &s_tile[0], T);
                workgroupBarrier();
                for (var e = lid; e < T * T; e += SG) {
                    s_tile[e] *= row_alpha[(j / DB) * T + e / T];
                }
                workgroupBarrier();
                o_acc[j] = coopLoadT<CoopC>(&s_tile[0], T);
                workgroupBarrier();
            }
        }

        // 5. O += P V: A is the weights (row-major), B is V's rows (row-major).
        for (var rb = 0u; rb < RB; rb++) {
            for (var db = 0u; db < DB; db++) {
                var acc = o_acc[rb * DB + db];
                for (var kb = 0u; kb < KB; kb++) {
                    let a = coopLoadT<CoopA>(&p_tile[rb * T * BC + kb * T], BC);
                    let b = coopLoadT<CoopB>(&v_tile[kb * T * DT + db * T], DT);
                    acc = coopMultiplyAdd(a, b, acc);
                }
                o_acc[rb * DB + db] = acc;
            }
        }
        workgroupBarrier();
    }

    // O = acc / l of the real rows, block by block through workgroup memory; lse = m + log(l).
    for (var rb = 0u; rb < RB; rb++) {
        for (var db = 0u; db < DB; db++) {
            coopStoreT(o_acc[rb * DB + db], &s_tile[0], T);
            workgroupBarrier();
            for (var e = lid; e < T * T4; e += SG) {
                let r = rb * T + e / T4;
                let c4 = db * T4 + e % T4;
                if !spare && row0 + r < rows_total && c4 < D4 {
                    let l = row_l[r];
                    let inv_l = select(0.0, 1.0 / l, l > 0.0);
                    let idx = (e / T4) * T + (e % T4) * 4u;
                    let x = vec4<f32>(s_tile[idx], s_tile[idx + 1u], s_tile[idx + 2u], s_tile[idx + 3u]);
                    o[out_row_of(row0, r, kv_head) * D4 + c4] = x * inv_l;
                }
            }
            workgroupBarrier();
        }
    }
    for (var r = lid; r < BR; r += SG) {
        if !spare && row0 + r < rows_total {
            let l = row_l[r];
            lse[out_row_of(row0, r, kv_head)] = select(negative_infinity(), row_m[r] + log(l), l > 0.0);
        }
    }
}
