// The row bookkeeping of row_softmax.wgsl and row_softmax_subgroup.wgsl (pasted in at their
// `// #include softmax_rows.wgsl` line by src/gpu/shader_text.rs), which differ only in how K reaches
// the lanes, and their output binding. Needs attention_io.wgsl, attention_masks.wgsl, blocks.wgsl and
// the constants R and OUTPUT.

// OUT_PROBS: [h_q, n_q, n_kv]. OUT_LSE: [h_q, n_q]. OUT_BLOCK_*: [h_q, n_q, key_blocks].
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const OUT_PROBS: u32 = 0u;
const OUT_LSE: u32 = 1u;
// Each row's probabilities pooled over params.key_blocks blocks of keys, [h_q, n_q, key_blocks]: the
// block's largest, or its sum (pool_rows.wgsl then combines rows). While walking, a row keeps its
// block's largest score (BLOCK_MAX) or nothing extra (BLOCK_SUM: at each block's end it stores the
// log of its running sum, the mass of every key so far; a block's mass is the difference of two of
// those once the row's lse is known, which costs no exp per key).
const OUT_BLOCK_MAX: u32 = 2u;
const OUT_BLOCK_SUM: u32 = 3u;
const BLOCKS: bool = OUTPUT == OUT_BLOCK_MAX || OUTPUT == OUT_BLOCK_SUM;

// One of an invocation's R rows: query i of a query head, its output row, its visible keys.
struct Row {
    // False for rows past the end (they repeat the last row; nothing is written for them).
    valid: bool,
    // Index of the row in [h_q, n_q].
    out_row: u32,
    lo: u32,
    hi: u32,
}

// Row j of the invocation `lid` of the workgroup whose rows start at row0 (of the KV head's
// n_q * G rows, query-major: row r is query r / G of head kv_head * G + r % G).
fn row_of(kv_head: u32, row0: u32, lid: u32, j: u32) -> Row {
    let g = params.group;
    let rows_total = params.n_q * g;
    let row = row0 + lid * R + j;
    let r = min(row, rows_total - 1u);
    let i = r / g;
    let pos = params.q_offset + i;
    return Row(row < rows_total, (kv_head * g + r % g) * params.n_q + i, key_lo(pos), key_hi(pos));
}

// Takes one key's scaled score for a row: stores it (OUT_PROBS; the last pass turns it into a
// probability), and returns the row's running max m and sum l of exp(s - m) with it folded in (l is
// rescaled when the max rises), and the score (NO_SCORE when masked). Masked keys add nothing and are
// never exponentiated.
fn add_score(row: Row, key: u32, score: f32, m: f32, l: f32) -> vec3<f32> {
    let visible = key >= row.lo && key < row.hi;
    let s = select(NO_SCORE, score, visible);
    if OUTPUT == OUT_PROBS {
        if row.valid && key < params.n_kv {
            out[row.out_row * params.n_kv + key] = s;
        }
    }
    let m_new = max(m, s);
    return vec3<f32>(m_new, l * exp(m - m_new) + select(0.0, exp(s - m_new), visible), s);
}

// A walk's key blocks: the current one and where it ends.
struct BlockWalk {
    block: u32,
    end: u32,
}

// The walk's start: the block holding its first key (OUT_BLOCK_* only; otherwise unused).
fn first_block(key: u32) -> BlockWalk {
    if !BLOCKS {
        return BlockWalk(0u, 0u);
    }
    let b = block_of(min(key, params.n_kv - 1u), params.key_blocks, params.n_kv);
    return BlockWalk(b, block_end(b, params.key_blocks, params.n_kv));
}

fn next_block(w: BlockWalk) -> BlockWalk {
    let b = w.block + 1u;
    return BlockWalk(b, block_end(b, params.key_blocks, params.n_kv));
}

// Stores what a row keeps of its finished block: its largest score (BLOCK_MAX, `best`), or the log of
// its running sum (BLOCK_SUM).
fn end_block(row: Row, block: u32, m: f32, l: f32, best: f32) {
    if row.valid {
        let log_sum = select(NO_SCORE, m + log(l), l > 0.0);
        out[row.out_row * params.key_blocks + block] = select(log_sum, best, OUTPUT == OUT_BLOCK_MAX);
    }
}

// OUT_BLOCK_*: closes the current block for every row (each stores what it keeps of it) and opens the
// next; the rows' `best` then restart from no_scores().
fn close_block(rows: array<Row, R>, m: array<f32, R>, l: array<f32, R>, best: array<f32, R>, walk: BlockWalk) -> BlockWalk {
    for (var j = 0u; j < R; j++) {
        end_block(rows[j], walk.block, m[j], l[j], best[j]);
    }
    return next_block(walk);
}

// Every row's largest score before it has seen a key.
fn no_scores() -> array<f32, R> {
    var best: array<f32, R>;
    for (var j = 0u; j < R; j++) {
        best[j] = NO_SCORE;
    }
    return best;
}

// The end of the walk: the last block walked closes (an empty walk stored none), then every row
// writes its result.
fn finish_rows(rows: array<Row, R>, m: array<f32, R>, l: array<f32, R>, best: array<f32, R>, walk: BlockWalk, first: u32, walked: bool) {
    let blocks_end = select(first, walk.block + 1u, walked);
    for (var j = 0u; j < R; j++) {
        if BLOCKS && walked {
            end_block(rows[j], walk.block, m[j], l[j], best[j]);
        }
        finish_row(rows[j], m[j], l[j], first, blocks_end);
    }
}

// Writes a row's result: its probabilities exp(s - lse) over the visible keys and 0 elsewhere
// (OUT_PROBS), its log-sum-exp, -inf when it sees no key (OUT_LSE), or its blocks' probabilities
// (OUT_BLOCK_*: the walk stored blocks [first, end), the others get 0).
fn finish_row(row: Row, m: f32, l: f32, first: u32, end: u32) {
    if !row.valid {
        return;
    }
    let lse = select(negative_infinity(), m + log(l), l > 0.0);
    if OUTPUT == OUT_LSE {
        out[row.out_row] = lse;
        return;
    }
    if BLOCKS {
        let base = row.out_row * params.key_blocks;
        // BLOCK_SUM: the mass of every key before the block.
        var before = 0.0;
        for (var b = 0u; b < params.key_blocks; b++) {
            var p = 0.0;
            if l > 0.0 && b >= first && b < end {
                // min: rounding can put a score a hair above the row's log-sum-exp.
                let e = min(exp(out[base + b] - lse), 1.0);
                if OUTPUT == OUT_BLOCK_MAX {
                    p = e;
                } else {
                    p = max(e - before, 0.0);
                    before = max(before, e);
                }
            }
            out[base + b] = p;
        }
        return;
    }
    let base = row.out_row * params.n_kv;
    for (var key = row.lo; key < row.hi; key++) {
        // min: rounding can put a score a hair above the row's log-sum-exp.
        out[base + key] = min(exp(out[base + key] - lse), 1.0);
    }
    for (var key = 0u; key < min(row.lo, row.hi); key++) {
        out[base + key] = 0.0;
    }
    for (var key = max(row.lo, row.hi); key < params.n_kv; key++) {
        out[base + key] = 0.0;
    }
}
