// Tiled attention forward with an online softmax (FlashAttention-style), f32 throughout.
//
// O = softmax(scale * Q Kᵀ + mask) V for every query head, plus each row's log-sum-exp (natural log of
// the sum of exp(scaled score) over visible keys), which attention_probs.wgsl uses to recompute exact
// probabilities later without storing the n x n matrix.
//
// Work split. One workgroup owns BR "rows" of one KV head. A row is one (query, query head) pair of the
// KV head's GQA group, ordered query-major: row r is query r / G of head kv_head * G + r % G (G = query
// heads per KV head; 1 for MHA). So the heads of a group share every K/V tile the workgroup loads, and a
// tile of rows covers a compact range of query positions, which keeps the mask bounds tight.
// One invocation owns one row: its query vector and its output accumulator live in registers, and
// every invocation reads the same K/V element at the same time (a broadcast on SIMD hardware).
//
// The loop. For each tile of BC keys: load K and V rows into workgroup memory together, compute the row's
// BC scores, raise the running max m to cover them, rescale the running sum l and accumulator by
// exp(m_old - m_new), then add exp(s - m_new) weighted V rows. At the end O = acc / l, lse = m + log(l).
//
// Masks come from positions: query row i sits at absolute position q_offset + i (queries are the last
// rows of the key sequence). Key tiles wholly outside every row's visible range are never visited (the
// loop runs from the first row's lowest visible key to the last row's highest); tiles wholly inside every
// row's range skip the per-element test; only boundary tiles test elements.
//
// A row that sees no key gets O = 0 and lse = -inf (the same as the CPU reference), never NaN: masked
// scores are not exponentiated, so exp only ever sees s - m <= 0.

// Keep in sync with `FlashParams` in src/gpu/flash_attention.rs.
struct Params {
    n_q: u32,
    n_kv: u32,
    h_kv: u32,
    // Query heads per KV head (G).
    group: u32,
    // Rows per KV head in the K/V buffers: >= n_kv (a decode cache has spare capacity).
    kv_stride: u32,
    // MASK_* below; mask_size is the window or the chunk.
    mask_kind: u32,
    mask_size: u32,
    scale: f32,
    tiles_per_kv_head: u32,
    q_offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, n_q, D] as vec4s.
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
// [h_kv, kv_stride, D] as vec4s.
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
// [h_q, n_q, D] as vec4s.
@group(0) @binding(4) var<storage, read_write> o: array<vec4<f32>>;
// [h_q, n_q].
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;

// Keep in sync with `Mask::to_gpu` in src/attention/mask.rs.
const MASK_FULL: u32 = 0u;
const MASK_CAUSAL: u32 = 1u;
const MASK_SLIDING: u32 = 2u;
const MASK_CHUNKED: u32 = 3u;

// Score given to masked keys: below any real scaled score, and never exponentiated.
const NO_SCORE: f32 = -3.0e38;
// Private arrays need sizes known before overrides: d <= 256 (64 vec4s), BC <= 32.
const D4_MAX: u32 = 64u;
const BC_MAX: u32 = 32u;

// Head dimension (a multiple of 4; Rust pads other widths with zeros).
override D: u32 = 64u;
// Rows per workgroup = invocations per workgroup.
override BR: u32 = 64u;
// Keys per K/V tile.
override BC: u32 = 16u;

// 1: stage K/V tiles in workgroup memory (GPUs: each element is fetched from global memory once per
// workgroup). 0: every invocation reads K/V straight from the storage buffer; all invocations read the
// same address together, which CPU adapters serve as one cached load broadcast to all SIMD lanes,
// without the barriers and the per-lane scatter of the tile copy.
override STAGE_KV: u32 = 1u;

override D4: u32 = D / 4u;
// Without staging the tiles shrink to one element (they must still be declared).
override TILE_VEC4S: u32 = BC * D / 4u * STAGE_KV + 1u - STAGE_KV;

var<workgroup> k_tile: array<vec4<f32>, TILE_VEC4S>;
var<workgroup> v_tile: array<vec4<f32>, TILE_VEC4S>;

// First visible key of the query at absolute position `pos` (keep in sync with `Mask::key_range`).
fn key_lo(pos: u32) -> u32 {
    switch params.mask_kind {
        case MASK_SLIDING: { return max(pos + 1u, params.mask_size) - params.mask_size; }
        case MASK_CHUNKED: { return pos - pos % params.mask_size; }
        default: { return 0u; }
    }
}

// One past the last visible key of the query at `pos`, clipped to n_kv.
fn key_hi(pos: u32) -> u32 {
    if params.mask_kind == MASK_FULL {
        return params.n_kv;
    }
    return min(pos + 1u, params.n_kv);
}

// Element `e` of the current K tile (vec4 index, key-major), from workgroup memory or straight from K.
// Past the last key it is 0 (its score is masked anyway).
fn key_vec(tile_base: u32, keys_here: u32, e: u32) -> vec4<f32> {
    if STAGE_KV == 1u {
        return k_tile[e];
    }
    return select(vec4<f32>(0.0), k[tile_base + e], e / D4 < keys_here);
}

fn value_vec(tile_base: u32, keys_here: u32, e: u32) -> vec4<f32> {
    if STAGE_KV == 1u {
        return v_tile[e];
    }
    return select(vec4<f32>(0.0), v[tile_base + e], e / D4 < keys_here);
}

@compute @workgroup_size(BR)
fn main(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(num_workgroups) wg_count: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // Large launches fold into a 2D grid (65535 workgroups per dimension); unfold the linear index.
    let wg_linear = wg_id.x + wg_id.y * wg_count.x;
    let kv_head = wg_linear / params.tiles_per_kv_head;
    if kv_head >= params.h_kv {
        return;
    }
    let tile = wg_linear % params.tiles_per_kv_head;
    let g = params.group;
    let rows_total = params.n_q * g;
    let row0 = tile * BR;
    let row_end = min(row0 + BR, rows_total);

    // This invocation's row: query i of head h.
    let row = row0 + lid;
    let in_range = row < rows_total;
    let i = min(row, rows_total - 1u) / g;
    let h = kv_head * g + row % g;
    let pos = params.q_offset + i;
    let row_lo = key_lo(pos);
    let row_hi = key_hi(pos);

    // Keys any row of this tile may see, and keys every row sees (interior tiles need no test).
    let first_pos = params.q_offset + row0 / g;
    let last_pos = params.q_offset + (row_end - 1u) / g;
    let tile_lo = key_lo(first_pos);
    let tile_hi = key_hi(last_pos);
    let all_lo = key_lo(last_pos);
    let all_hi = key_hi(first_pos);

    // The query row, pre-scaled so scores need no multiply.
    var q_row: array<vec4<f32>, D4_MAX>;
    let q_base = (h * params.n_q + i) * D4;
    for (var c = 0u; c < D4; c++) {
        q_row[c] = q[q_base + c] * params.scale;
    }
    var acc: array<vec4<f32>, D4_MAX>;
    var m = NO_SCORE;
    var l = 0.0;

    let kv_base = kv_head * params.kv_stride;
    for (var key0 = tile_lo; key0 < tile_hi; key0 += BC) {
        let tile_base = (kv_base + key0) * D4;
        let keys_here = min(BC, params.n_kv - key0);
        if STAGE_KV == 1u {
            // Cooperative, contiguous load of BC K rows and BC V rows (zeros past the last key).
            for (var e = lid; e < TILE_VEC4S; e += BR) {
                let inside = e / D4 < keys_here;
                let src = select(0u, tile_base + e, inside);
                k_tile[e] = select(vec4<f32>(0.0), k[src], inside);
                v_tile[e] = select(vec4<f32>(0.0), v[src], inside);
            }
            workgroupBarrier();
        }

        if in_range {
            let interior = key0 >= all_lo && key0 + BC <= all_hi;
            // Scores of this tile. The loop over the head dimension is innermost: its trip count is an
            // override, so compilers unroll it and q_row stays in registers (an array indexed by a
            // runtime loop counter would live in memory).
            var s: array<f32, BC_MAX>;
            for (var c = 0u; c < BC; c++) {
                var dot4 = vec4<f32>(0.0);
                for (var e = 0u; e < D4; e++) {
                    dot4 = fma(q_row[e], key_vec(tile_base, keys_here, c * D4 + e), dot4);
                }
                s[c] = (dot4.x + dot4.y) + (dot4.z + dot4.w);
            }
            var tile_max = NO_SCORE;
            for (var c = 0u; c < BC; c++) {
                let key = key0 + c;
                let visible = interior || (key >= row_lo && key < row_hi);
                s[c] = select(NO_SCORE, s[c], visible);
                tile_max = max(tile_max, s[c]);
            }
            if tile_max > NO_SCORE {
                let m_new = max(m, tile_max);
                // exp(NO_SCORE - m_new) underflows to 0 for the first visible tile.
                let alpha = exp(m - m_new);
                var p: array<f32, BC_MAX>;
                var p_sum = 0.0;
                for (var c = 0u; c < BC; c++) {
                    p[c] = select(0.0, exp(s[c] - m_new), s[c] > NO_SCORE);
                    p_sum += p[c];
                }
                l = l * alpha + p_sum;
                m = m_new;
                // Same order as the scores: keys outer, the unrolled head dimension inner.
                for (var e = 0u; e < D4; e++) {
                    acc[e] *= alpha;
                }
                for (var c = 0u; c < BC; c++) {
                    let pc = vec4<f32>(p[c]);
                    for (var e = 0u; e < D4; e++) {
                        acc[e] = fma(pc, value_vec(tile_base, keys_here, c * D4 + e), acc[e]);
                    }
                }
            }
        }
        if STAGE_KV == 1u {
            workgroupBarrier();
        }
    }

    if in_range {
        let out_row = h * params.n_q + i;
        let seen = l > 0.0;
        let inv_l = select(0.0, 1.0 / l, seen);
        for (var c = 0u; c < D4; c++) {
            o[out_row * D4 + c] = acc[c] * inv_l;
        }
        lse[out_row] = select(negative_infinity(), m + log(l), seen);
    }
}

// -inf for rows that see no key. WGSL has no infinity literal, and browsers (Tint) reject a constant
// expression that evaluates to one, so the bits come from a private variable read at run time.
var<private> NEG_INF_BITS: u32 = 0xff800000u;
fn negative_infinity() -> f32 {
    return bitcast<f32>(NEG_INF_BITS);
}
