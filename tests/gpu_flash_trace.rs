//! The traced build of the tiled forward (`src/gpu/flash_trace.rs`) on a real wgpu device (lavapipe in
//! CI): in the form this adapter runs (the subgroup form on lavapipe) and in the plain kernel's loop
//! and unrolled forms, its trace equals the CPU twin's (`cpu::flash_trace`: the same steps, and m, l,
//! alpha and the accumulator within 1e-4 relative), its last step's acc / l equals the one-pass
//! softmax's output, and its O equals the shipped kernel's bit for bit. Under `CI=true` a missing
//! adapter fails.

use attention_lab::attention::inputs::SplitMix64;
use attention_lab::attention::{AttentionProblem, AttentionShape};
use attention_lab::cpu::flash_trace::flash_trace;
use attention_lab::cpu::reference;
use attention_lab::engine::Engine;
use attention_lab::gpu::Kernels;
use attention_lab::gpu::flash_attention::FlashForm;
use attention_lab::gpu::flash_tiles::FlashTiles;
use attention_lab::model::Mask;

mod common;
use common::gpu::{close, device, random};

/// Every mask, MHA and GQA, fewer queries than keys; heads 8 wide (6 padded to 8), so each form
/// compiles one pipeline (unrolled compiles are slow on lavapipe).
fn cases() -> Vec<(AttentionShape, Mask)> {
    let shape = |h_q, h_kv, n_q, n_kv, d| AttentionShape { h_q, h_kv, n_q, n_kv, d };
    vec![
        (shape(1, 1, 64, 64, 8), Mask::Causal),
        (shape(2, 2, 45, 45, 8), Mask::Full),
        (shape(4, 2, 37, 37, 8), Mask::Sliding { window_tokens: 9 }),
        (shape(2, 1, 50, 50, 6), Mask::Chunked { chunk_tokens: 16 }),
        (shape(1, 1, 5, 40, 8), Mask::Causal),
    ]
}

#[test]
fn the_trace_is_the_twins_and_ends_on_the_one_pass_softmax_in_every_form() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    // What the adapter runs (unrolled; the subgroup form where it has subgroups), then the plain
    // kernel in a CPU adapter's tiles as loop and unrolled, then a GPU's tiles (64 rows, 16 keys, staged).
    let gpu_tiles = FlashTiles { rows_per_workgroup: 64, keys_per_tile: 16, stage_kv: true };
    let settings = [(true, None), (false, Some(FlashTiles::choose(&ctx.limits, true, 8))), (true, Some(gpu_tiles))];
    for (unrolled, forced) in settings {
        kernels.flash.set_unrolled(unrolled);
        kernels.flash.force_tiles(forced);
        for (n, (shape, mask)) in cases().into_iter().enumerate() {
            let mut rng = SplitMix64::new(40 + n as u64);
            let q = random(shape.q_len(), 1.5, &mut rng);
            let k = random(shape.kv_len(), 1.5, &mut rng);
            let v = random(shape.kv_len(), 1.0, &mut rng);
            let p = AttentionProblem::new(&q, &k, &v, shape, mask, 1.0 / (shape.d as f32).sqrt());
            let what = format!("{shape:?} {mask:?} unrolled {unrolled} tiles {forced:?}");
            let (forward, trace, form) = pollster::block_on(kernels.forward_traced(&ctx, &p)).expect(&what);
            let twin = flash_trace(&p, trace.rows_per_tile, trace.keys_per_step);
            let diff = trace.max_difference(&twin).unwrap_or_else(|| panic!("{what} ({form:?}): other steps"));
            assert!(diff <= 1e-4, "{what} ({form:?}): trace differs from the twin by {diff:e}");
            let shipped = pollster::block_on(kernels.forward(&ctx, &p)).expect(&what);
            assert_eq!(forward, shipped, "{what}: the traced build computes what the shipped kernel does");
            let one_pass = reference::flash_attention(&p);
            for (row, steps) in trace.rows.iter().enumerate() {
                let out = steps.last().expect("a walked step").partial_output();
                for (c, o) in out.iter().enumerate() {
                    let want = f64::from(one_pass.o[row * shape.d as usize + c]);
                    assert!((o - want).abs() <= 1e-4 + 1e-4 * want.abs(), "{what} row {row}: {o} vs {want}");
                }
            }
            if forced.is_none() && unrolled && ctx.adapter.is_cpu && ctx.subgroup_size.is_some() {
                assert_eq!(form, FlashForm::Subgroup, "{what}");
            } else if forced.is_some() {
                assert_eq!(form, if unrolled { FlashForm::Unrolled } else { FlashForm::Loop }, "{what}");
            }
        }
    }
    kernels.flash.force_tiles(None);
    close(ctx);
}

#[test]
fn the_engine_traces_on_the_gpu_and_the_cpu_and_refuses_long_problems() {
    let Some(ctx) = device() else { return };
    let gpu = Engine::WebGpu { kernels: Kernels::new(&ctx), ctx };
    let cpu = Engine::Cpu { reason: "a test".into() };
    let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 20, n_kv: 20, d: 8 };
    let mut rng = SplitMix64::new(3);
    let (q, k, v) = (random(160, 1.0, &mut rng), random(160, 1.0, &mut rng), random(160, 1.0, &mut rng));
    let p = AttentionProblem::new(&q, &k, &v, shape, Mask::Causal, 0.5);
    let on_gpu = pollster::block_on(gpu.flash_trace(&p)).expect("gpu");
    let on_cpu = pollster::block_on(cpu.flash_trace(&p)).expect("cpu");
    assert!(on_gpu.form.is_some() && on_cpu.form.is_none());
    // The CPU tier traces in a WebGPU GPU's tiles: for 20 rows 8 wide, 32 rows and 32 keys, so each
    // row takes one step; the GPU's trace ends on the same output.
    assert_eq!((on_cpu.trace.rows_per_tile, on_cpu.trace.keys_per_step), (32, 32));
    assert_eq!(on_cpu.trace.row(0, 19).len(), 1);
    let last = |t: &attention_lab::engine::TracedForward| t.trace.row(0, 19).last().unwrap().partial_output();
    assert!(last(&on_gpu).iter().zip(last(&on_cpu)).all(|(g, c)| (g - c).abs() < 1e-5));
    let long = AttentionShape { n_q: 65, n_kv: 65, ..shape };
    let (q, k) = (vec![0.0; 65 * 8], vec![0.0; 65 * 8]);
    let p = AttentionProblem::new(&q, &k, &k, long, Mask::Causal, 0.5);
    for engine in [&gpu, &cpu] {
        assert_eq!(pollster::block_on(engine.flash_trace(&p)).unwrap_err(), "a trace covers at most 64 tokens");
    }
    if let Engine::WebGpu { ctx, .. } = gpu {
        close(ctx);
    }
}
