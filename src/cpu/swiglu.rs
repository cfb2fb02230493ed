//! Twin of `shaders/swiglu.wgsl`: the MLP's gate.

use crate::lm::model_config::Gate;

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
