//! The MLA view's layer on the GPU kernels (lavapipe natively): both forms at DeepSeek V3's widths
//! (the absorbed form's one shared key head is 576 wide) against the f64 reference of each form,
//! against each other, and the projection job against its twin.

use attention_lab::engine::Engine;
use attention_lab::gpu::{GpuContext, Kernels};
use attention_lab::model::Mla;
use attention_lab::views::mla::KeyRotation;
use attention_lab::views::mla::compute::run;
use attention_lab::views::mla::inputs::MlaInputs;
use attention_lab::views::mla::reference::{self, max_abs_diff};
use attention_lab::views::mla::setup::MlaSizes;

fn gpu_engine() -> Option<Engine> {
    let Some(ctx) = pollster::block_on(GpuContext::new()).ok() else {
        assert!(std::env::var("CI").is_err(), "CI must have a GPU adapter (lavapipe)");
        eprintln!("SKIP: no adapter");
        return None;
    };
    let kernels = Kernels::new(&ctx);
    Some(Engine::WebGpu { ctx, kernels })
}

#[test]
fn both_forms_on_the_gpu_match_the_f64_reference_and_each_other() {
    let Some(engine) = gpu_engine() else { return };
    let x = MlaInputs::seeded(MlaSizes::of(128, Mla::DEEPSEEK, 10_000.0), 40, 3, 11);
    let decoupled = pollster::block_on(run(&engine, &x, KeyRotation::Decoupled, 1)).expect("decoupled");
    assert!(decoupled.on_gpu);
    let n = x.n;
    for h in 0..x.heads {
        let (e, a) = (reference::expanded(&x, h, KeyRotation::Decoupled), reference::absorbed(&x, h));
        let probs = |p: &[f32]| max_abs_diff(&p[h * n * n..][..n * n], &e.probs);
        assert!(probs(&decoupled.expanded.probs) < 1e-5, "head {h} expanded");
        assert!(max_abs_diff(&decoupled.absorbed.probs[h * n * n..][..n * n], &a.probs) < 1e-5, "head {h} absorbed");
        let outs = |o: &[f32], r: &[f64]| max_abs_diff(&o[h * n * 128..][..n * 128], r);
        assert!(outs(&decoupled.expanded.out, &e.out) < 1e-4, "head {h} expanded out");
        assert!(outs(&decoupled.absorbed.out, &a.out) < 1e-4, "head {h} absorbed out");
    }
    assert!(decoupled.max_prob_diff < 1e-5, "{}", decoupled.max_prob_diff);
    let whole = pollster::block_on(run(&engine, &x, KeyRotation::Whole, 1)).expect("whole");
    assert!(whole.max_prob_diff > 0.01 && whole.reference_prob_error < 1e-5, "{whole:?}");
    eprintln!(
        "{}: decoupled max |dp| = {:.3e}, max |do| = {:.3e}, vs f64 {:.3e}; whole-key max |dp| = {:.4}",
        engine.describe(),
        decoupled.max_prob_diff,
        decoupled.max_out_diff,
        decoupled.reference_prob_error,
        whole.max_prob_diff
    );
}

#[test]
fn the_projection_job_on_the_gpu_is_its_twins_answer() {
    let Some(engine) = gpu_engine() else { return };
    let cpu = Engine::Cpu { reason: "the yardstick".into() };
    // 7 inputs: padded to 8 on the GPU, whose zeros add nothing.
    let x: Vec<f32> = (0..5 * 7).map(|i| ((i * 37 % 11) as f32 - 5.0) / 4.0).collect();
    let w: Vec<f32> = (0..9 * 7).map(|i| ((i * 13 % 7) as f32 - 3.0) / 2.0).collect();
    let (g, c) = (pollster::block_on(engine.project(&x, &w, 7)), pollster::block_on(cpu.project(&x, &w, 7)));
    let (g, c) = (g.expect("gpu"), c.expect("cpu"));
    assert_eq!(g.len(), 45);
    // Quarters and halves times small integers: every product and sum is exact in f32.
    assert_eq!(g, c);
}
