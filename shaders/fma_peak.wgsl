// FMA throughput microkernel: how many fused multiply-adds per second this adapter's WGSL reaches.
//
// Every invocation runs ITERS rounds over CHAINS independent vec4 accumulators (independent so the
// hardware can overlap their latencies), each round one fma per chain: ITERS * CHAINS * 4 fmas, 2 flops
// each. The values stay bounded (a * 0.999 + 1e-3 converges to 1) and the sum is written out so no
// compiler can drop the loop. The benchmark divides attention's flops/s by this to give "% of peak".

@group(0) @binding(0) var<storage, read_write> out: array<f32>;

// Keep in sync with `CHAINS` in src/gpu/fma_peak.rs.
const CHAINS: u32 = 8u;

// #include grid.wgsl
override ITERS: u32 = 2048u;

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let index = invocation_index(at, lid);
    let seed = f32(index % 1024u) * 1e-4;
    let m = vec4<f32>(0.999);
    let c = vec4<f32>(1e-3);
    var a0 = vec4<f32>(seed);
    var a1 = a0 + 0.1;
    var a2 = a0 + 0.2;
    var a3 = a0 + 0.3;
    var a4 = a0 + 0.4;
    var a5 = a0 + 0.5;
    var a6 = a0 + 0.6;
    var a7 = a0 + 0.7;
    for (var i = 0u; i < ITERS; i++) {
        a0 = fma(a0, m, c);
        a1 = fma(a1, m, c);
        a2 = fma(a2, m, c);
        a3 = fma(a3, m, c);
        a4 = fma(a4, m, c);
        a5 = fma(a5, m, c);
        a6 = fma(a6, m, c);
        a7 = fma(a7, m, c);
    }
    let total = (a0 + a1) + (a2 + a3) + (a4 + a5) + (a6 + a7);
    out[index] = total.x + total.y + total.z + total.w;
}
