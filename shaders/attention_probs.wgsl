// Attention probabilities for heatmaps, recomputed from Q, K and the forward pass's log-sum-exp.
//
// P[i, j] = exp(scale * q_i · k_j - lse_i) for visible keys, 0 for masked ones. Because lse_i already
// holds the row's normaliser, any single entry can be computed on its own: no n x n matrix, no second
// softmax pass. Two entry points:
//
// - `region`: the exact probabilities of a window (rows row0.., cols col0..) for every query head,
//   written as [h_q, rows, cols].
// - `pooled`: a whole head shrunk to out_rows x out_cols. Output cell (r, c) covers query rows
//   block(r, out_rows, n_q) and keys block(c, out_cols, n_kv), and holds the max or the mean of P over
//   that block (masked entries count as 0 in the mean). A 32k x 32k head becomes a few hundred pixels
//   without ever existing in memory.
//
// In both, one invocation owns one output row, so its query vector stays in registers, and all
// invocations of a workgroup walk the same keys together (the same K element is read by every lane at
// once). Keys outside every row's visible range are skipped; rows test the rest element by element.

// Keep in sync with `ProbsParams` in src/gpu/attention_probs.rs, whose first eight fields are
// `QueryHeadParams` in src/gpu/attention_io.rs.
struct Params {
    // #include query_head_params.wgsl
    // Region: the window's first row/col and its size. Pooled: row0 = col0 = 0, rows/cols = output size.
    row0: u32,
    rows: u32,
    col0: u32,
    cols: u32,
    // Workgroups per head along rows and along columns.
    row_tiles: u32,
    col_tiles: u32,
    // POOL_* below (pooled only).
    pool: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, n_q, D] and [h_kv, n_kv, D] as vec4s.
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
// [h_q, n_q], from flash_attention.wgsl.
@group(0) @binding(3) var<storage, read> lse: array<f32>;
// [h_q, rows, cols].
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

// #include attention_masks.wgsl

// Keep in sync with `Pool` in src/attention/pooled.rs.
const POOL_MAX: u32 = 0u;
// The widest head (model::limits::KERNEL_MAX_HEAD_DIM) / 4: 4 KiB of query row, half of what WGSL
// allows a function.
const D4_MAX: u32 = 256u;

// Head dimension (a multiple of 4).
override D: u32 = 64u;
// WG (grid.wgsl): output rows per workgroup, one per invocation.
// #include grid.wgsl
// Output columns per workgroup (`region` only).
override COLS: u32 = 64u;
override D4: u32 = D / 4u;

// #include blocks.wgsl

// Scaled score of a query (already scaled) against key row `key_row`.
fn score(q_row: ptr<function, array<vec4<f32>, D4_MAX>>, key_row: u32) -> f32 {
    var acc = vec4<f32>(0.0);
    for (var e = 0u; e < D4; e++) {
        acc = fma((*q_row)[e], k[key_row * D4 + e], acc);
    }
    return acc.x + acc.y + acc.z + acc.w;
}

fn load_query(q_row: ptr<function, array<vec4<f32>, D4_MAX>>, h: u32, i: u32) {
    let base = (h * params.n_q + i) * D4;
    for (var e = 0u; e < D4; e++) {
        (*q_row)[e] = q[base + e] * params.scale;
    }
}

// Workgroup coordinates (row tile, column tile, head) from the folded 2D grid.
fn tile_of(at: GridPlace) -> vec3<u32> {
    let linear = workgroup_index(at);
    let per_head = params.row_tiles * params.col_tiles;
    let rem = linear % per_head;
    return vec3<u32>(rem % params.row_tiles, rem / params.row_tiles, linear / per_head);
}

@compute @workgroup_size(WG)
fn region(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let t = tile_of(at);
    let h = t.z;
    if h >= params.h_q {
        return;
    }
    let r = t.x * WG + lid;
    if r >= params.rows {
        return;
    }
    let i = params.row0 + r;
    let kv_row0 = (h / params.group) * params.n_kv;
    var q_row: array<vec4<f32>, D4_MAX>;
    load_query(&q_row, h, i);
    let row_lse = lse[h * params.n_q + i];
    let pos = params.q_offset + i;
    let lo = key_lo(pos);
    let hi = key_hi(pos);
    let c_end = min(t.y * COLS + COLS, params.cols);
    let out_row = (h * params.rows + r) * params.cols;
    for (var c = t.y * COLS; c < c_end; c++) {
        let j = params.col0 + c;
        var p = 0.0;
        if j >= lo && j < hi {
            // min: rounding can put a score a hair above the row's log-sum-exp.
            p = min(exp(score(&q_row, kv_row0 + j) - row_lse), 1.0);
        }
        out[out_row + c] = p;
    }
}

@compute @workgroup_size(WG)
fn pooled(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let t = tile_of(at);
    let h = t.z;
    if h >= params.h_q {
        return;
    }
    let out_r = t.x * WG + lid;
    let in_range = out_r < params.rows;
    let c = t.y;
    let kv_row0 = (h / params.group) * params.n_kv;

    // This invocation's query rows, and the keys of column block c that any row of the workgroup sees.
    let r_clamped = min(out_r, params.rows - 1u);
    let i_a = block_start(r_clamped, params.rows, params.n_q);
    let i_b = block_end(r_clamped, params.rows, params.n_q);
    let first_row = block_start(t.x * WG, params.rows, params.n_q);
    let last_row = block_end(min(t.x * WG + WG, params.rows) - 1u, params.rows, params.n_q) - 1u;
    let j_a = block_start(c, params.cols, params.n_kv);
    let j_b = block_end(c, params.cols, params.n_kv);
    let j_lo = max(j_a, key_lo(params.q_offset + first_row));
    let j_hi = min(j_b, key_hi(params.q_offset + last_row));
    let rows_per_block = max((params.n_q + params.rows - 1u) / params.rows, 1u);

    var best = 0.0;
    var sum = 0.0;
    var q_row: array<vec4<f32>, D4_MAX>;
    for (var s = 0u; s < rows_per_block; s++) {
        let i = min(i_a + s, params.n_q - 1u);
        let row_valid = in_range && i_a + s < i_b;
        load_query(&q_row, h, i);
        let row_lse = lse[h * params.n_q + i];
        let pos = params.q_offset + i;
        let lo = key_lo(pos);
        let hi = key_hi(pos);
        for (var j = j_lo; j < j_hi; j++) {
            let p = min(exp(score(&q_row, kv_row0 + j) - row_lse), 1.0);
            let kept = select(0.0, p, row_valid && j >= lo && j < hi);
            best = max(best, kept);
            sum += kept;
        }
    }
    if in_range {
        let cells = f32(i_b - i_a) * f32(j_b - j_a);
        out[(h * params.rows + out_r) * params.cols + c] = select(sum / cells, best, params.pool == POOL_MAX);
    }
}
