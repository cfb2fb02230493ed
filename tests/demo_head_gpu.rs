//! The heatmap view's own head (the demonstration model's `DEMO_D_HEAD`) through the GPU path the app
//! uses (forward, then exact probabilities from the saved log-sum-exp), against the f64 reference.

use attention_lab::attention::inputs::single_head_inputs;
use attention_lab::attention::{AttentionProblem, AttentionShape};
use attention_lab::cpu::reference;
use attention_lab::gpu::{GpuContext, Kernels, ProbRegion};
use attention_lab::model::Mask;

#[test]
fn demo_head_probabilities_match_the_reference_for_every_mask() {
    let Some(ctx) = pollster::block_on(GpuContext::new()).ok() else {
        assert!(std::env::var("CI").is_err(), "CI must have a GPU adapter (lavapipe)");
        eprintln!("SKIP: no adapter");
        return;
    };
    let kernels = Kernels::new(&ctx);
    let inputs = single_head_inputs("Keys and queries meet, again and again. The cat sat on the mat.", 3);
    let n = inputs.tokens.len() as u32;
    let shape = AttentionShape::square(1, n, inputs.d_head as u32);
    let scale = 1.0 / (inputs.d_head as f32).sqrt();
    for mask in [Mask::Causal, Mask::Full, Mask::Sliding { window_tokens: 3 }, Mask::Chunked { chunk_tokens: 4 }] {
        let forward = pollster::block_on(
            kernels.forward(&ctx, &AttentionProblem::new(&inputs.q, &inputs.k, &inputs.v, shape, mask, scale)),
        )
        .expect("forward");
        let region = ProbRegion { row0: 0, rows: n, col0: 0, cols: n };
        let p = pollster::block_on(kernels.probabilities(
            &ctx,
            &AttentionProblem::scores(&inputs.q, &inputs.k, shape, mask, scale),
            &forward.lse,
            region,
        ))
        .expect("probabilities");
        let expected = reference::row_softmax(&AttentionProblem::scores(&inputs.q, &inputs.k, shape, mask, scale));
        let worst = p.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "{mask:?}: probabilities differ by {worst}");
    }
}
