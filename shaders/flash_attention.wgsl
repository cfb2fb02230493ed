// Tiled attention forward with an online softmax (FlashAttention-style), f32 throughout.
//
// O = softmax(scale * Q Kᵀ + mask) V for every query head, plus each row's log-sum-exp (natural log of
// the sum of exp(scaled score) over visible keys), which attention_probs.wgsl uses to recompute exact
// probabilities later without storing the n x n matrix.
//
// Work split. One workgroup owns BR * R "rows" of one KV head. A row is one (query, query head) pair of
// the KV head's GQA group, ordered query-major: row r is query r / G of head kv_head * G + r % G (G =
// query heads per KV head; 1 for MHA). So the heads of a group share every K/V element the workgroup
// reads, and a tile of rows covers a compact range of query positions, which keeps the mask bounds tight.
// Each invocation owns R rows (row0 + lid + j * BR): their query vectors and output accumulators live
// in registers, and every K/V element it reads serves all R of them. R is 1 on GPUs; CPU adapters
// (lavapipe) run invocations as SIMD lanes where each read costs a scalar load per lane, so there R is
// 2..8 (src/gpu/flash_attention.rs chooses; D, BC, R and STAGE_KV are compile-time constants, below).
//
// The loop. Every invocation walks the same keys, BC per step, so K/V addresses are uniform (GPUs:
// K and V rows staged in workgroup memory; CPU adapters: read straight from the buffers, no barriers).
// A step computes the R x BC scores, raises each row's running max m once over the step, rescales the
// running sum l and the accumulator by exp(m_old - m_new), then adds exp(s - m_new)-weighted V rows.
// At the end O = acc / l, lse = m + log(l).
//
// Masks come from positions: query row i sits at absolute position q_offset + i (queries are the last
// rows of the key sequence). Keys outside every row's visible range are never visited (the loop runs
// from the first row's lowest visible key to the last row's highest); steps inside every row's range
// skip the per-element test ("interior"); the others mask scores by select, never by branching.
//
// A row that sees no key gets O = 0 and lse = -inf (the same as the CPU reference), never NaN: masked
// scores are not exponentiated, so exp only ever sees s - m <= 0.

// #include attention_io.wgsl

// #include flash_io.wgsl

// The trace's binding, in traced builds only (src/gpu/flash_trace.rs).
// #trace flash_trace_io.wgsl

// #include attention_masks.wgsl

// Compile-time constants. src/gpu/flash_attention.rs rewrites these four lines (same names, new
// values) for each pipeline it builds; the values here are the defaults that keep this file valid
// as written. They are constants, not overrides, so every private array below has exactly the size
// its loops run over: drivers unroll those loops fully and keep the arrays in registers (CPU
// adapters such as lavapipe otherwise keep them in memory, where every read is a per-lane load).
// Head dimension (a multiple of 4; Rust pads other widths with zeros).
const D: u32 = 64u;
// Keys per step (and per K/V tile).
const BC: u32 = 16u;
// Query rows each invocation owns: every K/V element it reads serves R rows.
const R: u32 = 1u;
// 1: stage K/V tiles in workgroup memory (GPUs: each element is fetched from global memory once per
// workgroup). 0: every invocation reads K/V straight from the storage buffer, all at the same address
// (CPU adapters: no tile copy, no barriers).
const STAGE_KV: u32 = 1u;
// 1: each invocation keeps its query rows in registers (every head up to 768 wide). 0: it reads them
// from the buffer at every step, so its output rows alone fill WGSL's 8 KiB of function variables.
const Q_REGS: u32 = 1u;

// Invocations per workgroup; they own BR * R rows.
override BR: u32 = 64u;

const D4: u32 = D / 4u;
// Vec4s of each query row kept in registers (one, unused, without Q_REGS).
const Q4: u32 = D4 * Q_REGS + 1u - Q_REGS;
// Without staging the tiles shrink to one element (they must still be declared); their indices are
// then multiplied by STAGE_KV = 0, because unrolled code (CPU adapters) indexes them with constants,
// which must be in range even in branches that never run.
const TILE_VEC4S: u32 = BC * D4 * STAGE_KV + 1u - STAGE_KV;

var<workgroup> k_tile: array<vec4<f32>, TILE_VEC4S>;
var<workgroup> v_tile: array<vec4<f32>, TILE_VEC4S>;

@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    // This invocation's rows (t, kv_head, g, rows_total, row0, out_row, lo, hi, q_rows, acc, m, l).
    // #include flash_rows_start.wgsl

    let kv_base = kv_head * params.kv_stride;
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
            key_base[c] = (kv_base + min(key0 + c, params.n_kv - 1u)) * D4;
        }
        if STAGE_KV == 1u {
            // Cooperative, contiguous load of BC K rows and BC V rows.
            for (var e = lid; e < BC * D4; e += BR) {
                let src = (kv_base + min(key0 + e / D4, params.n_kv - 1u)) * D4 + e % D4;
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
        // #trace flash_trace_step.wgsl
        if STAGE_KV == 1u {
            workgroupBarrier();
        }
    }

    // O and lse of the real rows.
    // #include flash_rows_end.wgsl
}
