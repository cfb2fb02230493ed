//! Twin of `shaders/matmul.wgsl` (every form, and `matmul_subgroup.wgsl`): `Y = X Wᵀ + bias`.

/// Twin of `matmul.wgsl`: rows of `x` (each `inputs` wide) times `weight^T` (`weight` stored
/// (outputs, inputs)), plus `bias`.
pub fn matmul(x: &[f32], weight: &[f32], bias: Option<&[f32]>, inputs: usize) -> Vec<f32> {
    let outputs = weight.len() / inputs;
    let mut out = Vec::with_capacity(x.len() / inputs * outputs);
    for row in x.chunks_exact(inputs) {
        for (o, w) in weight.chunks_exact(inputs).enumerate() {
            let b = bias.map_or(0.0, |b| f64::from(b[o]));
            out.push((dot(row, w) + b) as f32);
        }
    }
    out
}

/// `a · b`, summed in f64.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum()
}
