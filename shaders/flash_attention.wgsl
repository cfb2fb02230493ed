// Tiled attention forward with an online softmax (FlashAttention-style), f32 throughout.
//
// O = softmax(scale * Q Kᵀ + mask) V for every query head, plus each row's log-sum-exp (natural log of
// the sum of exp(scaled score) over visible keys), which attention_probs.wgsl uses to recompute exact
// probabilities later without storing the n x n matrix.
//
// Work split. One workgroup owns 2 * BR "rows" of one KV head. A row is one (query, query head) pair
// of the KV head's GQA group, ordered query-major: row r is query r / G of head kv_head * G + r % G
// (G = query heads per KV head; 1 for MHA). So the heads of a group share every K/V tile the workgroup
// loads, and a tile of rows covers a compact range of query positions, which keeps the mask bounds tight.
// Each invocation owns two rows (a: row0 + lid, b: row0 + BR + lid): their query vectors and output
// accumulators stay private, and every invocation reads the same K/V element at the same time.
//
// Register blocking. Memory reads cost far more than arithmetic, so the inner loops reuse each value
// they read: scores are computed for 2 rows x 8 keys at once (one K vec4 feeds both rows, one query vec4
// feeds 8 keys), and P·V adds 8 keys into both rows' accumulators per accumulator read. The blocks
// live in named vec4 variables (registers), not arrays.
//
// The loop. For each tile of BC keys: (optionally) load K and V rows into workgroup memory together,
// compute the rows' BC scores, raise the running max m to cover them, rescale the running sum l and the
// accumulator by exp(m_old - m_new), then add exp(s - m_new)-weighted V rows. At the end O = acc / l and
// lse = m + log(l).
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
const MASK_SLIDING: u32 = 2u;
const MASK_CHUNKED: u32 = 3u;

// Score given to masked keys: below any real scaled score, and never exponentiated.
const NO_SCORE: f32 = -3.0e38;
// Private arrays need sizes known before overrides: d <= 256 (64 vec4s), BC <= 32.
const D4_MAX: u32 = 64u;
const BC_MAX: u32 = 32u;
// Keys per register block; BC is a multiple of it. Keep in sync with `KEY_BLOCK` in flash_attention.rs.
const KEY_BLOCK: u32 = 8u;

// Head dimension (a multiple of 4; Rust pads other widths with zeros).
override D: u32 = 64u;
// Invocations per workgroup; each owns 2 rows (keep in sync with `ROWS_PER_INVOCATION`).
override BR: u32 = 64u;
// Keys per K/V tile: a multiple of KEY_BLOCK, at most BC_MAX.
override BC: u32 = 16u;
// 1: stage K/V tiles in workgroup memory (GPUs: each element is fetched from global memory once per
// workgroup). 0: every invocation reads K/V straight from the storage buffer; all invocations read the
// same address together, which CPU adapters serve from cache, without the barriers and the per-lane
// copy of staging.
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

// Dot products of one query vec4 with 4 key vec4s, as a vec4 (one lane per key).
fn dot4(x: vec4<f32>, k0: vec4<f32>, k1: vec4<f32>, k2: vec4<f32>, k3: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(x, k0), dot(x, k1), dot(x, k2), dot(x, k3));
}

// The state of one row across key tiles (its query and accumulator arrays are separate variables).
struct RowState {
    m: f32,
    l: f32,
    // Scale applied to the accumulator by the current tile.
    alpha: f32,
}

// Masks a tile's scores (in place), and updates the running max and sum; the scores become weights
// exp(s - m_new), 0 where masked. `visible_lo`/`visible_hi` bound the row's keys; `interior` skips tests.
fn softmax_tile(s: ptr<function, array<f32, BC_MAX>>, state: ptr<function, RowState>, key0: u32, lo: u32, hi: u32, interior: bool) {
    var tile_max = NO_SCORE;
    for (var c = 0u; c < BC; c++) {
        let key = key0 + c;
        let visible = interior || (key >= lo && key < hi);
        (*s)[c] = select(NO_SCORE, (*s)[c], visible);
        tile_max = max(tile_max, (*s)[c]);
    }
    let m_new = max((*state).m, tile_max);
    var p_sum = 0.0;
    for (var c = 0u; c < BC; c++) {
        let x = (*s)[c];
        let p = select(0.0, exp(x - m_new), x > NO_SCORE);
        (*s)[c] = p;
        p_sum += p;
    }
    // exp(NO_SCORE - m_new) underflows to 0 for the first visible tile; 1 while nothing is visible.
    let alpha = exp((*state).m - m_new);
    (*state).alpha = alpha;
    (*state).l = (*state).l * alpha + p_sum;
    (*state).m = m_new;
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
    let row0 = tile * 2u * BR;
    let row_end = min(row0 + 2u * BR, rows_total);

    // This invocation's rows a and b: query i_x of head h_x. Rows past the end compute a clamped
    // duplicate and skip the write.
    let row_a = row0 + lid;
    let row_b = row0 + BR + lid;
    let i_a = min(row_a, rows_total - 1u) / g;
    let i_b = min(row_b, rows_total - 1u) / g;
    let h_a = kv_head * g + min(row_a, rows_total - 1u) % g;
    let h_b = kv_head * g + min(row_b, rows_total - 1u) % g;
    let lo_a = key_lo(params.q_offset + i_a);
    let hi_a = key_hi(params.q_offset + i_a);
    let lo_b = key_lo(params.q_offset + i_b);
    let hi_b = key_hi(params.q_offset + i_b);

    // Keys any row of this tile may see, and keys every row sees (interior tiles need no test).
    let first_pos = params.q_offset + row0 / g;
    let last_pos = params.q_offset + (row_end - 1u) / g;
    let tile_lo = key_lo(first_pos);
    let tile_hi = key_hi(last_pos);
    let all_lo = key_lo(last_pos);
    let all_hi = key_hi(first_pos);

    // The query rows, pre-scaled so scores need no multiply.
    var q_a: array<vec4<f32>, D4_MAX>;
    var q_b: array<vec4<f32>, D4_MAX>;
    let q_base_a = (h_a * params.n_q + i_a) * D4;
    let q_base_b = (h_b * params.n_q + i_b) * D4;
    for (var e = 0u; e < D4; e++) {
        q_a[e] = q[q_base_a + e] * params.scale;
        q_b[e] = q[q_base_b + e] * params.scale;
    }
    var acc_a: array<vec4<f32>, D4_MAX>;
    var acc_b: array<vec4<f32>, D4_MAX>;
    var state_a = RowState(NO_SCORE, 0.0, 1.0);
    var state_b = RowState(NO_SCORE, 0.0, 1.0);
    var s_a: array<f32, BC_MAX>;
    var s_b: array<f32, BC_MAX>;

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

        // Scores, 2 rows x 8 keys per block: each K vec4 read serves both rows.
        for (var c = 0u; c < BC; c += KEY_BLOCK) {
            var a_lo = vec4<f32>(0.0);
            var a_hi = vec4<f32>(0.0);
            var b_lo = vec4<f32>(0.0);
            var b_hi = vec4<f32>(0.0);
            for (var e = 0u; e < D4; e++) {
                let qa = q_a[e];
                let qb = q_b[e];
                let k0 = key_vec(tile_base, keys_here, c * D4 + e);
                let k1 = key_vec(tile_base, keys_here, (c + 1u) * D4 + e);
                let k2 = key_vec(tile_base, keys_here, (c + 2u) * D4 + e);
                let k3 = key_vec(tile_base, keys_here, (c + 3u) * D4 + e);
                a_lo += dot4(qa, k0, k1, k2, k3);
                b_lo += dot4(qb, k0, k1, k2, k3);
                let k4 = key_vec(tile_base, keys_here, (c + 4u) * D4 + e);
                let k5 = key_vec(tile_base, keys_here, (c + 5u) * D4 + e);
                let k6 = key_vec(tile_base, keys_here, (c + 6u) * D4 + e);
                let k7 = key_vec(tile_base, keys_here, (c + 7u) * D4 + e);
                a_hi += dot4(qa, k4, k5, k6, k7);
                b_hi += dot4(qb, k4, k5, k6, k7);
            }
            s_a[c] = a_lo.x;
            s_a[c + 1u] = a_lo.y;
            s_a[c + 2u] = a_lo.z;
            s_a[c + 3u] = a_lo.w;
            s_a[c + 4u] = a_hi.x;
            s_a[c + 5u] = a_hi.y;
            s_a[c + 6u] = a_hi.z;
            s_a[c + 7u] = a_hi.w;
            s_b[c] = b_lo.x;
            s_b[c + 1u] = b_lo.y;
            s_b[c + 2u] = b_lo.z;
            s_b[c + 3u] = b_lo.w;
            s_b[c + 4u] = b_hi.x;
            s_b[c + 5u] = b_hi.y;
            s_b[c + 6u] = b_hi.z;
            s_b[c + 7u] = b_hi.w;
        }

        let interior = key0 >= all_lo && key0 + BC <= all_hi;
        softmax_tile(&s_a, &state_a, key0, lo_a, hi_a, interior);
        softmax_tile(&s_b, &state_b, key0, lo_b, hi_b, interior);

        // P·V, 2 rows x 8 keys per block: each accumulator read takes 8 keys, each V read both rows.
        for (var e = 0u; e < D4; e++) {
            acc_a[e] *= state_a.alpha;
            acc_b[e] *= state_b.alpha;
        }
        for (var c = 0u; c < BC; c += KEY_BLOCK) {
            let pa_lo = vec4<f32>(s_a[c], s_a[c + 1u], s_a[c + 2u], s_a[c + 3u]);
            let pa_hi = vec4<f32>(s_a[c + 4u], s_a[c + 5u], s_a[c + 6u], s_a[c + 7u]);
            let pb_lo = vec4<f32>(s_b[c], s_b[c + 1u], s_b[c + 2u], s_b[c + 3u]);
            let pb_hi = vec4<f32>(s_b[c + 4u], s_b[c + 5u], s_b[c + 6u], s_b[c + 7u]);
            for (var e = 0u; e < D4; e++) {
                var xa = acc_a[e];
                var xb = acc_b[e];
                let v0 = value_vec(tile_base, keys_here, c * D4 + e);
                let v1 = value_vec(tile_base, keys_here, (c + 1u) * D4 + e);
                let v2 = value_vec(tile_base, keys_here, (c + 2u) * D4 + e);
                let v3 = value_vec(tile_base, keys_here, (c + 3u) * D4 + e);
                xa = fma(vec4<f32>(pa_lo.x), v0, xa);
                xb = fma(vec4<f32>(pb_lo.x), v0, xb);
                xa = fma(vec4<f32>(pa_lo.y), v1, xa);
                xb = fma(vec4<f32>(pb_lo.y), v1, xb);
                xa = fma(vec4<f32>(pa_lo.z), v2, xa);
                xb = fma(vec4<f32>(pb_lo.z), v2, xb);
                xa = fma(vec4<f32>(pa_lo.w), v3, xa);
                xb = fma(vec4<f32>(pb_lo.w), v3, xb);
                let v4 = value_vec(tile_base, keys_here, (c + 4u) * D4 + e);
                let v5 = value_vec(tile_base, keys_here, (c + 5u) * D4 + e);
                let v6 = value_vec(tile_base, keys_here, (c + 6u) * D4 + e);
                let v7 = value_vec(tile_base, keys_here, (c + 7u) * D4 + e);
                xa = fma(vec4<f32>(pa_hi.x), v4, xa);
                xb = fma(vec4<f32>(pb_hi.x), v4, xb);
                xa = fma(vec4<f32>(pa_hi.y), v5, xa);
                xb = fma(vec4<f32>(pb_hi.y), v5, xb);
                xa = fma(vec4<f32>(pa_hi.z), v6, xa);
                xb = fma(vec4<f32>(pb_hi.z), v6, xb);
                xa = fma(vec4<f32>(pa_hi.w), v7, xa);
                xb = fma(vec4<f32>(pb_hi.w), v7, xb);
                acc_a[e] = xa;
                acc_b[e] = xb;
            }
        }
        if STAGE_KV == 1u {
            workgroupBarrier();
        }
    }

    write_row(row_a < rows_total, h_a * params.n_q + i_a, &acc_a, state_a);
    write_row(row_b < rows_total, h_b * params.n_q + i_b, &acc_b, state_b);
}

// O = acc / l and lse = m + log(l); a row that saw no key writes 0 and -inf.
fn write_row(in_range: bool, out_row: u32, acc: ptr<function, array<vec4<f32>, D4_MAX>>, state: RowState) {
    if !in_range {
        return;
    }
    let seen = state.l > 0.0;
    let inv_l = select(0.0, 1.0 / state.l, seen);
    for (var e = 0u; e < D4; e++) {
        o[out_row * D4 + e] = (*acc)[e] * inv_l;
    }
    lse[out_row] = select(negative_infinity(), state.m + log(state.l), seen);
}

// -inf for rows that see no key. WGSL has no infinity literal, and browsers (Tint) reject a constant
// expression that evaluates to one, so the bits come from a private variable read at run time.
var<private> NEG_INF_BITS: u32 = 0xff800000u;
fn negative_infinity() -> f32 {
    return bitcast<f32>(NEG_INF_BITS);
}
