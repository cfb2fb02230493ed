//! Twin of `shaders/swiglu.wgsl`: the MLP's gate.

/// The MLP's gate activation, applied to the gate projection before it multiplies the up one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// SwiGLU: `silu(g) = g / (1 + e^-g)` (Llama, Mistral, Qwen, SmolLM).
    Silu,
    /// GeGLU with GELU's tanh approximation (Gemma's `gelu_pytorch_tanh`):
    /// `g / 2 (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3)))`.
    GeluTanh,
}

/// Twin of `swiglu.wgsl`: `act(gate) * up` elementwise, `silu(g) = g / (1 + e^-g)` or GELU's tanh
/// form (see [`Gate`]).
pub fn swiglu(gate: &[f32], up: &[f32], act: Gate) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| {
            let g = f64::from(g);
            let a = match act {
                Gate::Silu => g / (1.0 + (-g).exp()),
                Gate::GeluTanh => {
                    0.5 * g * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g)).tanh())
                }
            };
            (a * f64::from(u)) as f32
        })
        .collect()
}
