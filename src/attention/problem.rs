//! One attention computation as the GPU kernels, the engine and the CPU reference all take it.

use super::AttentionShape;
use crate::model::Mask;

/// Q `[h_q, n_q, d]`, K and V `[h_kv, n_kv, d]` (row-major f32), their shape, the mask and the score
/// scale. `v` is empty where only the scores' softmax is asked for (probabilities, log-sum-exp).
#[derive(Clone, Copy, Debug)]
pub struct AttentionProblem<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub shape: AttentionShape,
    pub mask: Mask,
    pub scale: f32,
}

impl<'a> AttentionProblem<'a> {
    /// The whole forward pass: `softmax(scale · Q Kᵀ + mask) V`.
    pub fn new(q: &'a [f32], k: &'a [f32], v: &'a [f32], shape: AttentionShape, mask: Mask, scale: f32) -> Self {
        Self { q, k, v, shape, mask, scale }
    }

    /// Only `softmax(scale · Q Kᵀ + mask)`: no V.
    pub fn scores(q: &'a [f32], k: &'a [f32], shape: AttentionShape, mask: Mask, scale: f32) -> Self {
        Self { q, k, v: &[], shape, mask, scale }
    }

    /// Why the shape or the inputs' lengths cannot run, if they cannot (`with_v`: V is needed).
    pub fn validate(&self, with_v: bool) -> Result<(), String> {
        self.shape.validate()?;
        let s = &self.shape;
        let v_ok = !with_v || self.v.len() == s.kv_len();
        if self.q.len() != s.q_len() || self.k.len() != s.kv_len() || !v_ok {
            return Err(format!(
                "Q has {} values (expected {}), K has {} and V has {} (expected {})",
                self.q.len(),
                s.q_len(),
                self.k.len(),
                self.v.len(),
                s.kv_len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_checked_against_the_shape() {
        let shape = AttentionShape { h_q: 2, h_kv: 1, n_q: 3, n_kv: 4, d: 2 };
        let (q, kv) = (vec![0.0; 12], vec![0.0; 8]);
        assert!(AttentionProblem::new(&q, &kv, &kv, shape, Mask::Causal, 1.0).validate(true).is_ok());
        assert!(AttentionProblem::scores(&q, &kv, shape, Mask::Causal, 1.0).validate(false).is_ok());
        let missing_v = AttentionProblem::scores(&q, &kv, shape, Mask::Causal, 1.0).validate(true);
        assert_eq!(missing_v.unwrap_err(), "Q has 12 values (expected 12), K has 8 and V has 0 (expected 8)");
        assert!(AttentionProblem::scores(&q[..11], &kv, shape, Mask::Causal, 1.0).validate(false).is_err());
    }
}
