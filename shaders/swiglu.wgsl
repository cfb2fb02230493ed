// The MLP's gate: out[t, j] = act(gate[t, j]) * up[t, j], act silu(g) = g / (1 + exp(-g)) (SwiGLU) or,
// for Gemma, GELU's tanh form g / 2 (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))) (GeGLU).
//
// gate and up come from one matmul over the two weights stacked, so each row of `gate_up` holds the
// row's `ffn` gate values and then its `ffn` up values. One invocation per vec4 of the output.

// Keep in sync with `SwigluParams` in src/gpu/swiglu.rs.
struct Params {
    rows: u32,
    // The MLP width / 4.
    ffn4: u32,
    // 1: GELU's tanh form; 0: silu.
    gelu: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [rows, 2 * ffn] as vec4s: gate, then up.
@group(0) @binding(1) var<storage, read> gate_up: array<vec4<f32>>;
// [rows, ffn] as vec4s.
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;

// #include grid.wgsl

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let i = invocation_index(at, lid);
    if i >= params.rows * params.ffn4 {
        return;
    }
    let row = i / params.ffn4;
    let col = i % params.ffn4;
    let gate = gate_up[row * 2u * params.ffn4 + col];
    let up = gate_up[(row * 2u + 1u) * params.ffn4 + col];
    if params.gelu != 0u {
        // (1 + tanh(z)) / 2 = 1 / (1 + exp(-2z)): no cancellation in GELU's negative tail (where
        // 1 + tanh(z) loses every digit), and the same limits as silu's form when exp overflows.
        let z = 0.7978845608028654 * (gate + 0.044715 * gate * gate * gate);
        out[i] = gate / (1.0 + exp(-2.0 * z)) * up;
    } else {
        // exp(-g) overflows to +inf for g below about -88: g / inf = -0, silu's limit.
        out[i] = gate / (1.0 + exp(-gate)) * up;
    }
}
