//! The check of the kernel's answer: every [`CHECK_EVERY_TOKENS`] tokens, the f64 CPU reference of
//! the same step, its K/V rows recomputed from their seeds.

use super::lanes::{kv_rows, layer_mask};
use crate::attention::{AttentionProblem, AttentionShape};
use crate::engine::reference_decode;
use crate::model::decode_demo::DemoLayer;

/// The GPU answer is compared with the f64 CPU reference every this many tokens.
pub const CHECK_EVERY_TOKENS: u64 = 64;

/// Whether the step that appends the token at `position` is checked.
pub fn is_checked(position: u64) -> bool {
    (position + 1).is_multiple_of(CHECK_EVERY_TOKENS)
}

/// The largest |kernel − reference| of one decode step of `request` over its first `len_tokens`
/// tokens, in lane `slot`.
pub fn reference_diff(
    layer: &DemoLayer,
    slot: u32,
    request: u32,
    len_tokens: u64,
    q: &[f32],
    kernel_o: &[f32],
) -> Result<f32, String> {
    let (k, v) = cached_kv(layer, slot, request, len_tokens);
    let shape = AttentionShape { h_q: layer.h_q, h_kv: layer.h_kv, n_q: 1, n_kv: len_tokens as u32, d: layer.run_dim };
    let reference = reference_decode(&AttentionProblem::new(q, &k, &v, shape, layer_mask(layer)?, layer.scale()))?;
    Ok(reference.o.iter().zip(kernel_o).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max))
}

/// K and V of `request`'s first `len_tokens` tokens in lane `slot`, laid out `[h_kv, n, d]` as the
/// reference reads them (each token's rows come `[h_kv, d]`).
fn cached_kv(layer: &DemoLayer, slot: u32, request: u32, len_tokens: u64) -> (Vec<f32>, Vec<f32>) {
    let (h_kv, d, n) = (layer.h_kv as usize, layer.run_dim as usize, len_tokens as usize);
    let mut k = vec![0f32; h_kv * n * d];
    let mut v = vec![0f32; h_kv * n * d];
    for pos in 0..n {
        let (kr, vr) = kv_rows(layer, slot, request, pos as u64);
        for h in 0..h_kv {
            k[(h * n + pos) * d..][..d].copy_from_slice(&kr[h * d..][..d]);
            v[(h * n + pos) * d..][..d].copy_from_slice(&vr[h * d..][..d]);
        }
    }
    (k, v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LayerKind;
    use crate::model::Mask;
    use crate::views::decode::lanes::query;

    const LAYER: DemoLayer =
        DemoLayer { kind: LayerKind::Global, h_q: 4, h_kv: 2, model_dim: 8, run_dim: 8, k_eq_v: false };

    #[test]
    fn every_64th_token_is_checked() {
        let checked: Vec<u64> = (0..200).filter(|&p| is_checked(p)).collect();
        assert_eq!(checked, [63, 127, 191]);
    }

    #[test]
    fn the_reference_agrees_with_itself_and_sees_a_wrong_answer() {
        let q = query(&LAYER, 0, 0, 4);
        let right = reference_diff(&LAYER, 0, 0, 5, &q, &[0.0; 32]).unwrap();
        assert!(right > 0.0, "zeros are not the answer");
        // The answer to compare with: the reference's own output, from the same rows.
        let (k, v) = cached_kv(&LAYER, 0, 0, 5);
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 1, n_kv: 5, d: 8 };
        let o = reference_decode(&AttentionProblem::new(&q, &k, &v, shape, Mask::Causal, LAYER.scale())).unwrap().o;
        assert_eq!(reference_diff(&LAYER, 0, 0, 5, &q, &o), Ok(0.0));
    }
}
