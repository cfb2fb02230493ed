//! A step of gradient descent on one layer's W_Q, W_K and W_V, and what the step did: the probability
//! of each token the loss counts and the loss, read from any forward pass's logits (the CPU pass's or
//! the GPU's), before and after.

use super::LmError;
use super::backward::{LayerGradients, LinearGrads};
use super::checkpoint::{Checkpoint, Linear};

/// The largest step the page takes: larger ones send the shipped model's loss off past any reading
/// (and a link may say anything).
pub const MAX_ETA: f64 = 100.0;

/// `ck` with the gradients' layer's W_Q, W_K, W_V and their biases moved to `W - eta dW` (stored as
/// f32, as every weight is). `eta` is finite, in 0 to [`MAX_ETA`].
pub fn stepped(ck: &Checkpoint, g: &LayerGradients, eta: f64) -> Result<Checkpoint, LmError> {
    if !(0.0..=MAX_ETA).contains(&eta) {
        return Err(LmError(format!("the step size must be between 0 and {MAX_ETA}, not {eta}")));
    }
    let layer = ck.layers.get(g.layer).ok_or_else(|| LmError(format!("no layer {}", g.layer)))?;
    let fits = |lin: &Linear, grads: &LinearGrads| {
        lin.weight.len() == grads.weight.len() && lin.bias.as_ref().map(Vec::len) == grads.bias.as_ref().map(Vec::len)
    };
    if !(fits(&layer.q, &g.w_q) && fits(&layer.k, &g.w_k) && fits(&layer.v, &g.w_v)) {
        return Err(LmError("these gradients are of another model's layer".into()));
    }
    let mut out = ck.clone();
    let layer = &mut out.layers[g.layer];
    for (lin, grads) in [(&mut layer.q, &g.w_q), (&mut layer.k, &g.w_k), (&mut layer.v, &g.w_v)] {
        descend(&mut lin.weight, &grads.weight, eta);
        if let (Some(bias), Some(grad)) = (lin.bias.as_mut(), grads.bias.as_ref()) {
            descend(bias, grad, eta);
        }
    }
    Ok(out)
}

fn descend(w: &mut [f32], grad: &[f64], eta: f64) {
    w.iter_mut().zip(grad).for_each(|(w, g)| *w = (f64::from(*w) - eta * g) as f32);
}

/// The probability of each counted token and the loss (their mean negative log), read from `logits`
/// (`[rows, vocab]`, the rows of the last `rows` positions of `tokens`).
#[derive(Clone, Debug, PartialEq)]
pub struct TargetReading {
    pub probs: Vec<f64>,
    pub loss: f64,
}

/// [`TargetReading`] of `logits` for the pairs of `backward::counted`; an error where a pair's row is not among
/// the logits or its token outside the vocabulary.
pub fn read_targets(
    logits: &[f32],
    vocab: usize,
    tokens: usize,
    pairs: &[(usize, u32)],
) -> Result<TargetReading, LmError> {
    let rows = logits.len() / vocab.max(1);
    let first = tokens.checked_sub(rows).ok_or_else(|| LmError("more logit rows than tokens".into()))?;
    let mut probs = Vec::with_capacity(pairs.len());
    for &(i, next) in pairs {
        let row = i.checked_sub(first).filter(|&r| r < rows && (next as usize) < vocab);
        let row = row.ok_or_else(|| LmError(format!("no logit of token {next} after position {i}")))?;
        let logits = &logits[row * vocab..][..vocab];
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
        probs.push(f64::from(logits[next as usize] - max).exp() / sum);
    }
    if probs.is_empty() {
        return Err(LmError("the loss counts no token".into()));
    }
    let loss = -probs.iter().map(|p| p.ln()).sum::<f64>() / probs.len() as f64;
    Ok(TargetReading { probs, loss })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::backward::{LossTarget, counted, layer_gradients, loss};
    use crate::lm::forward::forward;

    #[test]
    fn probabilities_and_loss_by_hand() {
        // Three positions over a vocabulary of 2: logits [0, ln 3] give p(1) = 3/4; [0, 0] give p(0) =
        // 1/2; the last position's next token is not in the text.
        let logits = [0.0, 3f32.ln(), 0.0, 0.0, 9.0, 9.0];
        let r = read_targets(&logits, 2, 3, &counted(&[5, 1, 0], LossTarget::Text)).unwrap();
        assert!((r.probs[0] - 0.75).abs() < 1e-7 && (r.probs[1] - 0.5).abs() < 1e-12, "{r:?}");
        assert!((r.loss - (-(0.75f64.ln() + 0.5f64.ln()) / 2.0)).abs() < 1e-7);
        // Only the last row kept: position 0 has no logits.
        assert!(read_targets(&logits[4..], 2, 3, &[(0, 1)]).unwrap_err().0.contains("after position 0"));
        assert_eq!(read_targets(&logits[4..], 2, 3, &[(2, 0)]).unwrap().probs, [0.5]);
        assert!(read_targets(&logits, 2, 3, &[(1, 2)]).unwrap_err().0.contains("token 2"));
    }

    #[test]
    fn a_small_step_lowers_the_f32_pass_s_loss_by_eta_times_the_gradient_s_square() {
        // First order: L(W - eta g) = L(W) - eta |g|² + O(eta²). The f32 CPU pass on the shipped model,
        // 40 tokens, layer 1: the slope measured by a step of 1e-3 either way agrees with |g|² (from the
        // f64 backward) within 1e-3 (measured 2.1e-5 with the first shipped model), and the downhill step lowers the loss.
        let ck = crate::lm::shipped_model::shipped();
        let ids: Vec<u32> = (0..40).map(|i| (i * 211 + 7) % 4096).collect();
        for target in [LossTarget::Text, LossTarget::Token { position: 30, token: 17 }] {
            let g = layer_gradients(&ck, &ids, target, 1).unwrap();
            let square: f64 = [&g.w_q, &g.w_k, &g.w_v]
                .iter()
                .map(|l| l.weight.iter().chain(l.bias.iter().flatten()).map(|v| v * v).sum::<f64>())
                .sum();
            let eta = 1e-3 / square.sqrt();
            let pass_loss = |ck: &Checkpoint| {
                let pass = forward(ck, &ids).unwrap();
                read_targets(&pass.logits, ck.vocab(), ids.len(), &counted(&ids, target)).unwrap().loss
            };
            let (before, after) = (pass_loss(&ck), pass_loss(&stepped(&ck, &g, eta).unwrap()));
            // An uphill step of the same size (the descent with -eta, built by hand).
            let mut up = ck.clone();
            let layer = &mut up.layers[1];
            for (lin, grads) in [(&mut layer.q, &g.w_q), (&mut layer.k, &g.w_k), (&mut layer.v, &g.w_v)] {
                descend(&mut lin.weight, &grads.weight, -eta);
                descend(lin.bias.as_mut().unwrap(), grads.bias.as_ref().unwrap(), -eta);
            }
            let slope = (pass_loss(&up) - after) / (2.0 * eta);
            let rel = (slope - square).abs() / square;
            println!(
                "{target:?}: |g|² {square:e}, f32 pass's slope {slope:e}, relative {rel:e}; loss {before} -> {after}"
            );
            assert!(rel < 1e-3, "{target:?}: slope {slope} vs |g|² {square}");
            assert!(after < before, "{target:?}: {before} -> {after}");
            assert!((before - loss(&ck, &ids, target).unwrap()).abs() < 1e-5);
        }
    }

    #[test]
    fn bad_steps_and_foreign_gradients_are_refused() {
        let ck = crate::lm::shipped_model::shipped();
        let g = layer_gradients(&ck, &[1, 2, 3], LossTarget::Text, 0).unwrap();
        for eta in [-1e-3, f64::NAN, f64::INFINITY, MAX_ETA * 2.0] {
            assert!(stepped(&ck, &g, eta).is_err(), "{eta}");
        }
        let unchanged = stepped(&ck, &g, 0.0).unwrap();
        assert!(unchanged.layers[0].q.weight == ck.layers[0].q.weight);
        let mut other = g.clone();
        other.w_k.weight.pop();
        assert!(stepped(&ck, &other, 0.1).err().unwrap().0.contains("another model"));
        other.layer = 9;
        assert!(stepped(&ck, &other, 0.1).err().unwrap().0.contains("no layer 9"));
    }
}
