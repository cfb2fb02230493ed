//! Twin of `shaders/rms_norm.wgsl`: RMSNorm of rows, times a weight (plus Gemma's offset).

/// Twin of `rms_norm.wgsl`: rows of `x` (each `weight.len()` wide) scaled to unit root-mean-square,
/// times `offset + weight` (Gemma's offset is 1).
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, offset: f32) -> Vec<f32> {
    let d = weight.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let mean_square = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / d as f64;
        let inv = 1.0 / (mean_square + f64::from(eps)).sqrt();
        out.extend(row.iter().zip(weight).map(|(&v, &w)| (f64::from(v) * inv) as f32 * (offset + w)));
    }
    out
}
