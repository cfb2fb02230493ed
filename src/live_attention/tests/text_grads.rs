//! Gradients on the trained model through the service on the CPU tier, against `lm::backward` and
//! `lm::grad_step` called directly, and the job's refusals.

use super::{cpu, trained_model};
use crate::live_attention::text_gradients::{GradAsk, query_row, text_gradients, weight_grad_norm};
use crate::lm::backward::{LossTarget, counted, layer_gradients, loss};
use crate::lm::forward::forward;
use crate::lm::grad_step::{read_targets, stepped};

fn ask(layer: usize, head: usize, target: LossTarget, eta: f64) -> GradAsk {
    GradAsk { layer, head, target, eta }
}

#[test]
fn the_cpu_tier_s_figures_are_the_backward_s_and_the_stepped_pass_s() {
    let (lm, ck) = trained_model();
    let ids = lm.tokenizer.encode("The compiler checks the borrow, and the borrow checker");
    let t = ids.len();
    for (target, eta) in [(LossTarget::Text, 0.1), (LossTarget::Token { position: 5, token: ids[6] }, 0.02)] {
        let g = pollster::block_on(text_gradients(&cpu(), &lm, &ids, ask(1, 3, target, eta), &|| true)).unwrap();
        assert!(!g.on_gpu);
        assert_eq!(g.tokens, t);
        // The same backward, run whole: the same key norms and weight gradients, bit for bit.
        let want = layer_gradients(&ck, &ids, target, 1).unwrap();
        assert_eq!(g.key_norms, want.key_norms);
        assert_eq!(g.key_norms.len(), 8);
        assert!(g.key_norms.iter().all(|head| head.len() == t));
        assert_eq!((g.backward_loss, g.grad_norm), (want.loss, weight_grad_norm(&want)));
        // The f32 pass's loss is the f64 loss to f32's rounding.
        let f64_loss = loss(&ck, &ids, target).unwrap();
        assert!((g.before.loss - f64_loss).abs() < 1e-5, "{} vs {f64_loss}", g.before.loss);
        // After the step: the CPU pass with the stepped weights, exactly; downhill.
        let pairs = counted(&ids, target);
        let new = stepped(&ck, &want, eta).unwrap();
        let pass = forward(&new, &ids).unwrap();
        let after = read_targets(&pass.logits, ck.vocab(), t, &pairs).unwrap();
        assert_eq!(g.after.as_ref(), Some(&after));
        assert!(after.loss < g.before.loss, "{target:?}: {} -> {}", g.before.loss, after.loss);
        // Head 3's row at the query the panel shows, over the keys the layer's mask lets it see.
        let row = query_row(target, t);
        assert_eq!(g.row, row);
        let (lo, hi) = ck.layers[1].mask.key_range(row as u32, t as u32);
        let at = (3 * t + row) * t;
        assert_eq!(g.first_key, lo as usize);
        assert_eq!(g.row_after.as_deref(), Some(&pass.probs[1][at + lo as usize..at + hi as usize]));
        let before = forward(&ck, &ids).unwrap();
        assert_eq!(g.row_before, before.probs[1][at + lo as usize..at + hi as usize]);
        let sum: f32 = g.row_before.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "the row is a softmax: {sum}");
    }
}

#[test]
fn no_step_reads_the_loss_only_and_layer_0_starts_from_the_embeddings() {
    let (lm, ck) = trained_model();
    let ids = [3, 1, 4, 1, 5, 9, 2, 6];
    let g = pollster::block_on(text_gradients(&cpu(), &lm, &ids, ask(0, 0, LossTarget::Text, 0.0), &|| true)).unwrap();
    assert_eq!((g.after, g.row_after), (None, None));
    assert_eq!(g.key_norms, layer_gradients(&ck, &ids, LossTarget::Text, 0).unwrap().key_norms);
    // The text's loss counts positions 0 to 6: the row shown is the last counted, 6.
    assert_eq!((g.row, query_row(LossTarget::Token { position: 2, token: 1 }, 8)), (6, 2));
}

#[test]
fn bad_requests_are_refused_before_any_pass_and_a_newer_one_stops_the_job() {
    let (lm, _) = trained_model();
    let ids = [3, 1, 4, 1, 5, 9, 2, 6];
    let run = |a: GradAsk, keep: &dyn Fn() -> bool| pollster::block_on(text_gradients(&cpu(), &lm, &ids, a, keep));
    let refused = [
        (ask(4, 0, LossTarget::Text, 0.1), "layer 4 is past the model's 4 layers"),
        (ask(1, 8, LossTarget::Text, 0.1), "head 8 is past the layer's 8 query heads"),
        (ask(1, 0, LossTarget::Text, 101.0), "the step size must be between 0 and 100"),
        (ask(1, 0, LossTarget::Text, f64::NAN), "the step size must be between 0 and 100"),
        (ask(1, 0, LossTarget::Token { position: 8, token: 1 }, 0.1), "position 8 is past the text's 8 tokens"),
    ];
    for (a, why) in refused {
        let err = run(a, &|| true).unwrap_err();
        assert!(err.starts_with(why), "{a:?}: {err}");
    }
    let long: Vec<u32> = (0..129).collect();
    let err = pollster::block_on(text_gradients(&cpu(), &lm, &long, ask(1, 0, LossTarget::Text, 0.1), &|| true));
    assert_eq!(err.unwrap_err(), "The text is 129 tokens; this model reads at most 128.");
    assert!(run(ask(1, 0, LossTarget::Text, 0.1), &|| false).unwrap_err().contains("newer request"));
}
