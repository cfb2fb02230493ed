// Naive attention in three passes: the baseline the tiled kernel is measured against, and the lesson of
// why FlashAttention exists. Each pass writes its whole result to global memory and the next reads it:
//
// 1. `scores`:  S[h, i, j] = scale * q_i · k_j, or NO_SCORE where the mask hides key j.
//               One invocation per entry: h_q * n_q * n_kv of them, and S needs as many floats.
// 2. `softmax`: one invocation per row turns S into probabilities in place (max, sum of exps, divide) and
//               writes the row's log-sum-exp.
// 3. `pv`:      O[h, i, :] = sum_j P[h, i, j] v_j, one invocation per 4 output columns, reading every key,
//               masked or not.
// S is n x n per head: at n = 16384 and 8 heads that is 8.6 GB, past what any GPU binds at once. The
// tiled kernel never stores it.

// Keep in sync with `NaiveParams` in src/gpu/naive_attention.rs, whose first eight fields are
// `QueryHeadParams` in src/gpu/attention_io.rs.
struct Params {
    // #include query_head_params.wgsl
    // Invocations this pass needs (the grid is rounded up).
    invocations: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
// [h_q, n_q, n_kv]: scores, then probabilities.
@group(0) @binding(4) var<storage, read_write> s: array<f32>;
@group(0) @binding(5) var<storage, read_write> o: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

// #include attention_masks.wgsl

override D: u32 = 64u;
// #include grid.wgsl
override D4: u32 = D / 4u;

fn visible(pos: u32, key: u32) -> bool {
    return key >= key_lo(pos) && key < key_hi(pos);
}

@compute @workgroup_size(WG)
fn scores(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let t = invocation_index(at, lid);
    if t >= params.invocations {
        return;
    }
    let j = t % params.n_kv;
    let row = t / params.n_kv;
    let h = row / params.n_q;
    let i = row % params.n_q;
    var score = NO_SCORE;
    if visible(params.q_offset + i, j) {
        let kv_row = (h / params.group) * params.n_kv + j;
        var acc = vec4<f32>(0.0);
        for (var e = 0u; e < D4; e++) {
            acc = fma(q[row * D4 + e], k[kv_row * D4 + e], acc);
        }
        score = (acc.x + acc.y + acc.z + acc.w) * params.scale;
    }
    s[t] = score;
}

@compute @workgroup_size(WG)
fn softmax(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let row = invocation_index(at, lid);
    if row >= params.invocations {
        return;
    }
    let base = row * params.n_kv;
    var m = NO_SCORE;
    for (var j = 0u; j < params.n_kv; j++) {
        m = max(m, s[base + j]);
    }
    var sum = 0.0;
    for (var j = 0u; j < params.n_kv; j++) {
        let x = s[base + j];
        sum += select(0.0, exp(x - m), x > NO_SCORE);
    }
    let inv = select(0.0, 1.0 / sum, sum > 0.0);
    for (var j = 0u; j < params.n_kv; j++) {
        let x = s[base + j];
        s[base + j] = select(0.0, exp(x - m) * inv, x > NO_SCORE);
    }
    // -inf (its bit pattern; WGSL has no literal) for a row that sees no key.
    lse[row] = select(negative_infinity(), m + log(sum), sum > 0.0);
}

@compute @workgroup_size(WG)
fn pv(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let t = invocation_index(at, lid);
    if t >= params.invocations {
        return;
    }
    let e = t % D4;
    let row = t / D4;
    let h = row / params.n_q;
    let kv_row0 = (h / params.group) * params.n_kv;
    var acc = vec4<f32>(0.0);
    for (var j = 0u; j < params.n_kv; j++) {
        acc = fma(vec4<f32>(s[row * params.n_kv + j]), v[(kv_row0 + j) * D4 + e], acc);
    }
    o[row * D4 + e] = acc;
}
