//! The steps of the model's forward pass in f64 and their gradients (vector-Jacobian products), for
//! [`super::backward`]: a linear layer, RMSNorm (with Gemma's `1 + w`), the MLP's gate (SiLU or GELU's
//! tanh form), rotary positions. Each forward is the f64 form of its `crate::cpu` twin; each backward
//! is checked against central differences of its forward in `backward_tests.rs`.

use super::checkpoint::Linear;
use super::model_config::Gate;
use crate::attention::rope::RopeTable;

/// `x Wᵀ + b` of rows of `x` (each `lin.inputs` wide), in f64.
pub fn linear(x: &[f64], lin: &Linear) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len() / lin.inputs.max(1) * lin.outputs);
    for row in x.chunks_exact(lin.inputs) {
        for (o, w) in lin.weight.chunks_exact(lin.inputs).enumerate() {
            let b = lin.bias.as_ref().map_or(0.0, |b| f64::from(b[o]));
            out.push(row.iter().zip(w).map(|(&a, &w)| a * f64::from(w)).sum::<f64>() + b);
        }
    }
    out
}

/// The gradient of [`linear`]'s input: `dy W`, rows of `dy` each `lin.outputs` wide.
pub fn linear_input_grad(dy: &[f64], lin: &Linear) -> Vec<f64> {
    let mut dx = vec![0.0; dy.len() / lin.outputs.max(1) * lin.inputs];
    for (row, out) in dy.chunks_exact(lin.outputs).zip(dx.chunks_exact_mut(lin.inputs)) {
        for (&g, w) in row.iter().zip(lin.weight.chunks_exact(lin.inputs)) {
            if g != 0.0 {
                out.iter_mut().zip(w).for_each(|(o, &w)| *o += g * f64::from(w));
            }
        }
    }
    dx
}

/// The gradients of a linear layer's weight and bias: `dW = dyᵀ x` (`[outputs, inputs]`, as PyTorch
/// stores W) and `db = Σ_rows dy`.
pub fn weight_grads(x: &[f64], dy: &[f64], inputs: usize, outputs: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut dw, mut db) = (vec![0.0; outputs * inputs], vec![0.0; outputs]);
    for (xr, gr) in x.chunks_exact(inputs).zip(dy.chunks_exact(outputs)) {
        for ((&g, w), b) in gr.iter().zip(dw.chunks_exact_mut(inputs)).zip(&mut db) {
            *b += g;
            w.iter_mut().zip(xr).for_each(|(w, &x)| *w += g * x);
        }
    }
    (dw, db)
}

/// RMSNorm of rows of `x` (each `weight.len()` wide) times `offset + weight`, in f64.
pub fn rms_norm(x: &[f64], weight: &[f32], eps: f32, offset: f32) -> Vec<f64> {
    let d = weight.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let inv = inverse_rms(row, eps);
        out.extend(row.iter().zip(weight).map(|(&v, &w)| v * inv * f64::from(offset + w)));
    }
    out
}

fn inverse_rms(row: &[f64], eps: f32) -> f64 {
    let mean_square = row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64;
    1.0 / (mean_square + f64::from(eps)).sqrt()
}

/// The gradient of [`rms_norm`]'s input: with `r = 1 / rms(x)` and `g = dy ∘ (offset + w)`,
/// `dx = r g - x r³ (g · x) / d`.
pub fn rms_norm_grad(x: &[f64], weight: &[f32], eps: f32, offset: f32, dy: &[f64]) -> Vec<f64> {
    let d = weight.len();
    let mut dx = Vec::with_capacity(x.len());
    for (row, dyr) in x.chunks_exact(d).zip(dy.chunks_exact(d)) {
        let r = inverse_rms(row, eps);
        let g: Vec<f64> = dyr.iter().zip(weight).map(|(&dy, &w)| dy * f64::from(offset + w)).collect();
        let gx: f64 = g.iter().zip(row).map(|(g, x)| g * x).sum();
        let k = r * r * r * gx / d as f64;
        dx.extend(g.iter().zip(row).map(|(g, x)| r * g - x * k));
    }
    dx
}

/// The gate's activation and its derivative at `g`.
pub fn activation(g: f64, gate: Gate) -> (f64, f64) {
    match gate {
        Gate::Silu => {
            let s = 1.0 / (1.0 + (-g).exp());
            (g * s, s * (1.0 + g * (1.0 - s)))
        }
        Gate::GeluTanh => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            let t = (c * (g + 0.044715 * g * g * g)).tanh();
            let value = 0.5 * g * (1.0 + t);
            (value, 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * g * g))
        }
    }
}

/// Rotary positions of one layer, in f64, from the f32 table the forward passes turn by.
pub struct Rotation {
    /// `[positions, pairs]` cosines and sines.
    cos_sin: Vec<[f64; 2]>,
    pairs: usize,
    offset: usize,
}

impl Rotation {
    pub fn of(table: &RopeTable) -> Self {
        let cos_sin = table.cos_sin().map(|[c, s]| [f64::from(c), f64::from(s)]).collect();
        Self { cos_sin, pairs: table.rotary_dims / 2, offset: table.offset() }
    }

    /// Every head (`head_dim` wide) of every row of `x` (`[tokens, width]`) turned as its token's
    /// position (`sign` 1), or turned back (`sign` -1: the rotation's transpose, which carries a
    /// gradient from the rotated head to the unrotated one).
    pub fn turn(&self, x: &mut [f64], width: usize, head_dim: usize, sign: f64) {
        if self.pairs == 0 {
            return;
        }
        for (pos, token) in x.chunks_exact_mut(width).enumerate() {
            let angles = &self.cos_sin[pos * self.pairs..][..self.pairs];
            for head in token.chunks_exact_mut(head_dim) {
                for (j, &[c, s]) in angles.iter().enumerate() {
                    let (a, b, s) = (head[j], head[j + self.offset], sign * s);
                    head[j] = a * c - b * s;
                    head[j + self.offset] = b * c + a * s;
                }
            }
        }
    }
}
