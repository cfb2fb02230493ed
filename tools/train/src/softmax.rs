//! Attention's masked softmax as one candle op with its own backward pass.
//!
//! Written as separate candle ops (add the mask, subtract the row maximum, exp, sum, divide) it made
//! ten passes over the (batch, heads, tokens, tokens) scores forward and backward, each allocating a
//! tensor the size of the scores. Here the forward pass is one loop that reads the mask from the
//! coordinates, and the backward pass is the closed form `dx = p * (g - sum(g * p))` in four ops.

use candle_core::{CpuStorage, CustomOp1, D, Layout, Result, Shape, Tensor};

/// Softmax over the last dimension of scores (..., queries, keys) with queries = keys, where key k
/// is visible from query q when `k <= q` and, with a window W, `q - k < W`. Masked entries are 0.
pub struct MaskedSoftmax {
    pub window: Option<usize>,
}

impl CustomOp1 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "masked-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(all) = storage else { candle_core::bail!("masked-softmax: f32 only") };
        let (start, end) = layout
            .contiguous_offsets()
            .ok_or_else(|| candle_core::Error::Msg("masked-softmax: contiguous input only".into()))?;
        let dims = layout.dims();
        let (queries, keys) = (dims[dims.len() - 2], dims[dims.len() - 1]);
        if queries != keys {
            candle_core::bail!("masked-softmax: {queries} queries for {keys} keys");
        }
        let mut out = vec![0f32; end - start];
        for (row, (x, y)) in all[start..end].chunks(keys).zip(out.chunks_mut(keys)).enumerate() {
            let q = row % queries;
            let first = self.window.map_or(0, |w| (q + 1).saturating_sub(w));
            let visible = &x[first..=q];
            let max = visible.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let mut sum = 0.0;
            for (o, &v) in y[first..=q].iter_mut().zip(visible) {
                *o = (v - max).exp();
                sum += *o;
            }
            for o in &mut y[first..=q] {
                *o /= sum;
            }
        }
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }

    fn bwd(&self, _scores: &Tensor, probs: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let gp = (grad * probs)?;
        let row = gp.sum_keepdim(D::Minus1)?;
        Ok(Some((gp - probs.broadcast_mul(&row)?)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use candle_core::{Device, Var};

    /// The composite form it replaces: an additive -inf mask and a plain softmax.
    fn composite(x: &Tensor, window: Option<usize>) -> Tensor {
        let t = x.dim(D::Minus1).unwrap();
        let visible = |q: usize, k: usize| k <= q && window.is_none_or(|w| q - k < w);
        let mask: Vec<f32> =
            (0..t).flat_map(|q| (0..t).map(move |k| if visible(q, k) { 0.0 } else { f32::NEG_INFINITY })).collect();
        let mask = Tensor::from_vec(mask, (t, t), x.device()).unwrap();
        candle_nn::ops::softmax(&x.broadcast_add(&mask).unwrap(), D::Minus1).unwrap()
    }

    #[test]
    fn matches_the_composite_softmax_and_its_gradient() {
        let mut rng = Rng::new(5);
        let dev = Device::Cpu;
        let mut random = |n: usize| (0..n).map(|_| (rng.normal() * 3.0) as f32).collect::<Vec<_>>();
        let shape = (2, 3, 7, 7);
        let x = Var::from_tensor(&Tensor::from_vec(random(2 * 3 * 49), shape, &dev).unwrap()).unwrap();
        let w = Tensor::from_vec(random(2 * 3 * 49), shape, &dev).unwrap();
        for window in [None, Some(3), Some(1)] {
            let fused = x.apply_op1(MaskedSoftmax { window }).unwrap();
            let reference = composite(&x, window);
            let diff = (&fused - &reference).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(diff < 1e-6, "probabilities differ by {diff} (window {window:?})");
            let g_fused = (fused * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let g_ref = (reference * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let (a, b) = (g_fused.get(&x).unwrap(), g_ref.get(&x).unwrap());
            let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(diff < 1e-5, "gradients differ by {diff} (window {window:?})");
        }
    }
}
