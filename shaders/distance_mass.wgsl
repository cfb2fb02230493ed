// Each head's attention mass by distance: for every distance δ = (query position) − (key position),
// the mean over the queries of the probability each gives the key δ tokens before it (after it when
// δ < 0, under a full mask). No n × n matrix is kept: a probability is exp(scale · q·k − lse) from
// the forward pass's log-sum-exp of its row, worked out where it is summed, so the multiply-adds are
// the forward's and the memory one value per (head, distance). A head's masses sum to 1 when each
// query sees a key.
//
// One invocation per (query head, distance): it walks the queries whose key at that distance exists,
// and takes the dot product of those the mask lets see it (so besides the forward's multiply-adds,
// a head's invocations together test each of its n_q x n_kv pairs once). f32 throughout; the CPU twin
// (src/cpu/distance_mass.rs) sums in f64.

// Keep in sync with `DistanceMassParams` in src/gpu/distance_mass.rs.
struct Params {
    h_q: u32,
    // Query heads per KV head.
    group: u32,
    n_q: u32,
    n_kv: u32,
    d: u32,
    mask_kind: u32,
    mask_size: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, n_q, d]: query i sits at position i + n_kv − n_q.
@group(0) @binding(1) var<storage, read> q: array<f32>;
// [h_q / group, n_kv, d]
@group(0) @binding(2) var<storage, read> k: array<f32>;
// [h_q, n_q]: each row's natural log-sum-exp of its scaled scores.
@group(0) @binding(3) var<storage, read> lse: array<f32>;
// [h_q, 2 n_kv − 1]: slot δ + n_kv − 1.
@group(0) @binding(4) var<storage, read_write> mass: array<f32>;

// #include attention_masks.wgsl
// #include grid.wgsl

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let i = invocation_index(at, lid);
    let slots = 2u * params.n_kv - 1u;
    if i >= params.h_q * slots {
        return;
    }
    let h = i / slots;
    let slot = i % slots;
    let kv_base = (h / params.group) * params.n_kv * params.d;
    let offset = params.n_kv - params.n_q;
    var sum = 0.0;
    // The queries at positions first..end have a key at this distance: pos − (n_kv − 1 − slot).
    let first = max(max(slot, params.n_kv - 1u) - (params.n_kv - 1u), offset);
    let end = min(slot, params.n_kv - 1u) + 1u;
    for (var pos = first; pos < end; pos++) {
        let key = pos + params.n_kv - 1u - slot;
        if key < key_lo(pos) || key >= key_hi(pos) {
            continue;
        }
        let row = pos - offset;
        let q_base = (h * params.n_q + row) * params.d;
        let k_base = kv_base + key * params.d;
        var dot = 0.0;
        for (var c = 0u; c < params.d; c++) {
            dot += q[q_base + c] * k[k_base + c];
        }
        sum += exp(params.scale * dot - lse[h * params.n_q + row]);
    }
    mass[i] = sum / f32(params.n_q);
}
