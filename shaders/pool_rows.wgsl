// Pooled heatmap cells from row_softmax.wgsl's per-row key blocks (OUT_BLOCK_MAX or OUT_BLOCK_SUM,
// [h_q, n_q, cols]). Cell (r, c) of a head covers its query rows block(r, out_rows, n_q) and key
// block c: the largest of those rows' block maxima, or the sum of their block sums over the cells of
// the block (masked pairs count as 0 in the mean), as attention_probs.wgsl's `pooled` entry does
// from scratch. One invocation per output cell; rows past n_q repeat (upsampling). A launch may
// compute a slice of the map, output rows first..first + count, from the row blocks of the queries
// they cover (q0 onwards; the map's blocks stay those of all n_q queries and out_rows rows).

// Keep in sync with `PoolRowsParams` in src/gpu/pool_rows.rs.
struct Params {
    // The whole map: queries, keys, heads, rows and columns.
    n_q: u32,
    n_kv: u32,
    h_q: u32,
    out_rows: u32,
    cols: u32,
    // POOL_MAX or the mean.
    pool: u32,
    // This launch: output rows first..first + count, from row blocks of queries q0..q0 + slice_queries.
    first: u32,
    count: u32,
    q0: u32,
    slice_queries: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, slice_queries, cols].
@group(0) @binding(1) var<storage, read> row_blocks: array<f32>;
// [h_q, count, cols].
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

// #include blocks.wgsl

// Keep in sync with `Pool` in src/attention/pooled.rs.
const POOL_MAX: u32 = 0u;

// #include grid.wgsl

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let cell = invocation_index(at, lid);
    let per_head = params.count * params.cols;
    if cell >= params.h_q * per_head {
        return;
    }
    let h = cell / per_head;
    let r = params.first + (cell % per_head) / params.cols;
    let c = cell % params.cols;
    let i_a = block_start(r, params.out_rows, params.n_q);
    let i_b = block_end(r, params.out_rows, params.n_q);
    var best = 0.0;
    var sum = 0.0;
    for (var i = i_a; i < i_b; i++) {
        let v = row_blocks[(h * params.slice_queries + min(i, params.n_q - 1u) - params.q0) * params.cols + c];
        best = max(best, v);
        sum += v;
    }
    let keys = block_end(c, params.cols, params.n_kv) - block_start(c, params.cols, params.n_kv);
    out[cell] = select(sum / (f32(i_b - i_a) * f32(keys)), best, params.pool == POOL_MAX);
}
