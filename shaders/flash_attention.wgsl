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

// #include flash_constants.wgsl

// K/V rows of KV head `kv_head` start at `kv_head * kv_stride` (a decode cache has spare capacity).
fn kv_row(kv_head: u32, key: u32) -> u32 {
    return kv_head * params.kv_stride + key;
}

@compute @workgroup_size(BR)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    // This invocation's rows (t, kv_head, g, rows_total, row0, out_row, lo, hi, q_rows, acc, m, l).
    // #include flash_rows_start.wgsl

    // #include flash_keys.wgsl

    // O and lse of the real rows.
    // #include flash_rows_end.wgsl
}
