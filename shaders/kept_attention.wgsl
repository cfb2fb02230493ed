// Attention over an evicting KV cache: each query reads only the keys and values its cache kept,
// listed by position, so the bytes it reads are the kept entries' (the memory view's eviction rows).
// The list is one array: kept[0..=n_q] are offsets (query i's positions are
// kept[n_q + 1 + kept[i] .. n_q + 1 + kept[i + 1]], ascending, each below n_kv), the positions follow.
// One list per layer serves every head (a layer's cache is shared by its heads).
//
// One workgroup per (query head, query): its invocations score the kept keys in turn (the scores go
// straight into the probability row), take the max and the sum over the workgroup, turn their own
// scores into probabilities, then each owns some channels of the output. Positions not kept get
// exactly 0. f32 throughout; the CPU twin (src/cpu/kept_attention.rs) sums in f64.

// Keep in sync with `KeptAttentionParams` in src/gpu/kept_attention.rs.
struct Params {
    n_q: u32,
    // Keys a probability row has (positions 0..n_kv).
    n_kv: u32,
    h_q: u32,
    // Query heads per KV head (G).
    group: u32,
    // Rows per KV head in the K/V buffers (>= n_kv).
    kv_stride: u32,
    d: u32,
    scale: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, n_q, d]
@group(0) @binding(1) var<storage, read> q: array<f32>;
// [h_kv, kv_stride, d]
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
// n_q + 1 offsets, then the kept positions.
@group(0) @binding(4) var<storage, read> kept: array<u32>;
// [h_q, n_q, d]
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
// [h_q, n_q, n_kv]
@group(0) @binding(6) var<storage, read_write> probs: array<f32>;

// #include grid.wgsl

// One slot per invocation: WG is 64 (src/gpu/kept_attention.rs), written out because a browser's
// compiler may not take an override as an array size.
var<workgroup> reduced: array<f32, 64>;

// The workgroup's max (op 0) or sum (op 1) of x: every invocation calls it alike.
fn reduce(x: f32, op: u32, lid: u32) -> f32 {
    reduced[lid] = x;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if lid < s {
            let other = reduced[lid + s];
            reduced[lid] = select(max(reduced[lid], other), reduced[lid] + other, op == 1u);
        }
        workgroupBarrier();
    }
    let out = reduced[0];
    workgroupBarrier();
    return out;
}

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let row = workgroup_index(at);
    if row >= params.h_q * params.n_q {
        return;
    }
    let i = row % params.n_q;
    let kv_base = (row / params.n_q / params.group) * params.kv_stride * params.d;
    let q_base = row * params.d;
    let p_base = row * params.n_kv;
    let first = params.n_q + 1u + kept[i];
    let end = params.n_q + 1u + kept[i + 1u];

    for (var j = lid; j < params.n_kv; j += WG) {
        probs[p_base + j] = 0.0;
    }
    storageBarrier();

    // Below any score (the largest f32 itself is not a literal every compiler takes).
    var m = -3.0e38;
    for (var e = first + lid; e < end; e += WG) {
        let key = kv_base + kept[e] * params.d;
        var s = 0.0;
        for (var c = 0u; c < params.d; c++) {
            s += q[q_base + c] * k[key + c];
        }
        s *= params.scale;
        probs[p_base + kept[e]] = s;
        m = max(m, s);
    }
    let row_max = reduce(m, 0u, lid);

    var l = 0.0;
    for (var e = first + lid; e < end; e += WG) {
        let at_p = p_base + kept[e];
        let w = exp(probs[at_p] - row_max);
        probs[at_p] = w;
        l += w;
    }
    let sum = reduce(l, 1u, lid);
    for (var e = first + lid; e < end; e += WG) {
        probs[p_base + kept[e]] /= sum;
    }
    storageBarrier();

    for (var c = lid; c < params.d; c += WG) {
        var acc = 0.0;
        for (var e = first; e < end; e++) {
            acc += probs[p_base + kept[e]] * v[kv_base + kept[e] * params.d + c];
        }
        o[q_base + c] = acc;
    }
}
