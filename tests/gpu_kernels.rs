//! The WGSL kernels on a real wgpu device (lavapipe in CI) against the f64 CPU reference.
//!
//! Tolerances (DESIGN.md, quality bar): probabilities within 1e-4 absolute; outputs and log-sum-exps
//! within 1e-3 relative (plus 1e-4 absolute, for values near zero); NaN and infinity in the same places.
//! Each test opens one device and runs many cases on it: device creation is slow on software GPUs.
//! Under `CI=true` a missing adapter fails; otherwise the tests print `SKIP: no adapter` and pass.

use attention_lab::attention::AttentionProblem;
use attention_lab::attention::AttentionShape;
use attention_lab::attention::inputs::SplitMix64;
use attention_lab::attention::pooled::{Pool, PooledMap};
use attention_lab::cpu::reference;
use attention_lab::gpu::bench::{BenchCase, BenchKernel, Repetitions, run_case};
use attention_lab::gpu::flash_io::{FlashBuffers, FlashLaunch};
use attention_lab::gpu::flash_tiles::FlashTiles;
use attention_lab::gpu::launch::Dispatch;
use attention_lab::gpu::row_softmax::RowForm;
use attention_lab::gpu::{GpuContext, GpuError, Kernels, ProbRegion};
use attention_lab::model::Mask;

mod common;
use common::gpu::{close, device, random};

struct Case {
    shape: AttentionShape,
    mask: Mask,
    /// Multiplies Q and K: large values give logits up to about `amp^2 * d / sqrt(d)`.
    amp: f32,
}

fn case(h_q: u32, h_kv: u32, n_q: u32, n_kv: u32, d: u32, mask: Mask) -> Case {
    Case { shape: AttentionShape { h_q, h_kv, n_q, n_kv, d }, mask, amp: 1.0 }
}

/// `got` within `abs + rel * |want|` of `want`, with NaN and infinities in the same places.
fn assert_close(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (idx, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.is_nan(), w.is_nan(), "{what}[{idx}]: NaN parity, got {g}, want {w}");
        if w.is_infinite() || g.is_infinite() {
            assert_eq!(g, w, "{what}[{idx}]: infinity parity");
            continue;
        }
        assert!((g - w).abs() <= abs + rel * w.abs(), "{what}[{idx}]: got {g}, want {w}");
    }
}

fn inputs(shape: &AttentionShape, amp: f32, seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = SplitMix64::new(seed);
    (random(shape.q_len(), amp, &mut rng), random(shape.kv_len(), amp, &mut rng), random(shape.kv_len(), 1.0, &mut rng))
}

fn forward_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // Every mask, n = 37 (not a multiple of any tile), window and chunk 1, small, and >= n.
    for mask in [
        Mask::Full,
        Mask::Causal,
        Mask::Sliding { window_tokens: 1 },
        Mask::Sliding { window_tokens: 5 },
        Mask::Sliding { window_tokens: 37 },
        Mask::Sliding { window_tokens: 100 },
        Mask::Chunked { chunk_tokens: 1 },
        Mask::Chunked { chunk_tokens: 7 },
        Mask::Chunked { chunk_tokens: 100 },
    ] {
        cases.push(case(2, 2, 37, 37, 32, mask));
    }
    // Queries as the last rows of a longer sequence, incl. one decode query.
    for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 9 }, Mask::Chunked { chunk_tokens: 16 }] {
        cases.push(case(2, 1, 20, 75, 64, mask));
        cases.push(case(4, 2, 1, 130, 64, mask));
    }
    // GQA group sizes 1, 2, 4, 8 (the last is MQA: one KV head).
    for h_kv in [8, 4, 2, 1] {
        cases.push(case(8, h_kv, 50, 50, 64, Mask::Causal));
        cases.push(case(8, h_kv, 29, 61, 32, Mask::Sliding { window_tokens: 12 }));
    }
    // Wider heads, a long-ish sequence spanning several row tiles, and widths the kernels pad.
    cases.push(case(2, 1, 70, 70, 128, Mask::Causal));
    cases.push(case(2, 2, 33, 33, 256, Mask::Chunked { chunk_tokens: 10 }));
    cases.push(case(1, 1, 300, 300, 64, Mask::Sliding { window_tokens: 40 }));
    cases.push(case(1, 1, 300, 300, 32, Mask::Causal));
    cases.push(case(2, 2, 19, 19, 16, Mask::Causal));
    cases.push(case(1, 1, 11, 13, 6, Mask::Full));
    // Logits up to about 1e4 (|q|, |k| up to 30, d = 32 -> |q.k| up to 28800, scaled by 1/sqrt(32)).
    for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 3 }] {
        cases.push(Case { amp: 30.0, ..case(2, 1, 40, 40, 32, mask) });
    }
    cases
}

#[test]
fn forward_matches_the_reference() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    // The adapter's own tiles (on lavapipe: the unrolled subgroup kernel), then both K/V paths
    // (workgroup memory or direct) with other tile shapes, unrolled as CPU adapters run them, and the
    // staged path with its loops, as GPUs run it.
    let forced = [
        (None, true),
        (Some(FlashTiles { rows_per_workgroup: 32, keys_per_tile: 8, stage_kv: true }), true),
        (Some(FlashTiles { rows_per_workgroup: 16, keys_per_tile: 5, stage_kv: false }), true),
        (Some(FlashTiles { rows_per_workgroup: 64, keys_per_tile: 16, stage_kv: true }), false),
    ];
    // Every case with the adapter's tiles; every third case with d <= 64 (offset per config) with the
    // forced ones, to keep the test quick (each new tile shape and width is a pipeline to compile).
    for (config, (tiles, unrolled)) in forced.into_iter().enumerate() {
        kernels.flash.force_tiles(tiles);
        kernels.flash.set_unrolled(unrolled);
        check_forward_cases(&ctx, &kernels, &format!("{tiles:?} unrolled {unrolled}"), |n, d| {
            config == 0 || (n % 3 == config % 3 && d <= 64)
        });
    }
    close(ctx);
}

fn check_forward_cases(ctx: &GpuContext, kernels: &Kernels, tiles: &str, pick: impl Fn(usize, u32) -> bool) {
    for (n, c) in forward_cases().into_iter().enumerate().filter(|(n, c)| pick(*n, c.shape.d)) {
        let (q, k, v) = inputs(&c.shape, c.amp, 100 + n as u64);
        let scale = 1.0 / (c.shape.d as f32).sqrt();
        let want = reference::flash_attention(&AttentionProblem::new(&q, &k, &v, c.shape, c.mask, scale));
        let got = pollster::block_on(kernels.forward(ctx, &AttentionProblem::new(&q, &k, &v, c.shape, c.mask, scale)))
            .expect("forward runs");
        let what = format!("{:?} {:?} amp {} tiles {tiles}", c.shape, c.mask, c.amp);
        assert!(got.o.iter().chain(&got.lse).all(|x| x.is_finite()), "{what}: non-finite output");
        assert_close(&format!("O of {what}"), &got.o, &want.o, 1e-4, 1e-3);
        assert_close(&format!("lse of {what}"), &got.lse, &want.lse, 1e-4, 1e-3);
    }
}

/// The matrix-unit forward (`flash_attention_coop.wgsl`, f16 inputs) on every forward case, where the
/// device was opened with matrix units: against the f64 reference within the f16 tolerance its twin
/// states (`cpu::flash_attention_coop`), for the cases with inputs of the benchmark's size (|x| <= 1;
/// logits of 1e4 from inputs of 30 are past what f16 inputs keep). Everywhere else (lavapipe) asking
/// for f16 inputs changes nothing: the forward keeps its f32 forms and the reference's usual tolerance,
/// and the plan says why.
#[test]
fn the_coop_forward_meets_the_f16_tolerance_where_matrix_units_exist() {
    use attention_lab::cpu::flash_attention_coop::{F16_LSE_ABS, F16_O_ABS, F16_O_REL};
    use attention_lab::gpu::launch::padded_dim;
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    kernels.flash.set_f16_inputs(true);
    println!("matrix units: {:?}", ctx.matrix_units);
    for (n, c) in forward_cases().into_iter().enumerate().filter(|(_, c)| c.amp == 1.0) {
        let (q, k, v) = inputs(&c.shape, c.amp, 300 + n as u64);
        let scale = 1.0 / (c.shape.d as f32).sqrt();
        let p = AttentionProblem::new(&q, &k, &v, c.shape, c.mask, scale);
        let want = reference::flash_attention(&p);
        let got = pollster::block_on(kernels.forward(&ctx, &p)).expect("forward runs");
        let padded = AttentionShape { d: padded_dim(c.shape.d), ..c.shape };
        let plan = kernels.flash.coop_plan(FlashLaunch { shape: padded, kv_stride: c.shape.n_kv, mask: c.mask, scale });
        let what = format!("{:?} {:?}", c.shape, c.mask);
        assert!(got.o.iter().chain(&got.lse).all(|x| x.is_finite()), "{what}: non-finite output");
        match plan {
            Ok(_) => {
                let d = c.shape.d as usize;
                for (row, (g, w)) in got.o.chunks(d).zip(want.o.chunks(d)).enumerate() {
                    let diff: f32 = g.iter().zip(w).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt();
                    let norm: f32 = w.iter().map(|b| b * b).sum::<f32>().sqrt();
                    assert!(diff <= F16_O_REL * norm, "{what}: row {row} off by {diff} of {norm}");
                }
                assert_close(&format!("O of {what}"), &got.o, &want.o, F16_O_ABS, 0.0);
                assert_close(&format!("lse of {what}"), &got.lse, &want.lse, F16_LSE_ABS, 0.0);
            }
            Err(why) => {
                assert!(ctx.matrix_units.is_err() || why.contains("workgroup memory"), "{what}: {why}");
                assert_close(&format!("O of {what}"), &got.o, &want.o, 1e-4, 1e-3);
                assert_close(&format!("lse of {what}"), &got.lse, &want.lse, 1e-4, 1e-3);
            }
        }
    }
    close(ctx);
}

/// Rows that see no key: sliding window 1 with more query rows than keys puts rows past the last key
/// (only reachable through the low-level launch; the high-level call refuses n_q > n_kv).
#[test]
fn rows_without_visible_keys_give_zero_and_minus_infinity() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let shape = AttentionShape { h_q: 2, h_kv: 1, n_q: 10, n_kv: 4, d: 8 };
    let mask = Mask::Sliding { window_tokens: 1 };
    let (q, k, v) = inputs(&shape, 1.0, 7);
    let want = reference::flash_attention(&AttentionProblem::new(&q, &k, &v, shape, mask, 0.5));
    assert_eq!(want.lse[9], f32::NEG_INFINITY);
    let buf = |label, data: &[f32]| ctx.storage_from(label, data).expect("upload");
    let (qb, kb, vb) = (buf("q", &q), buf("k", &k), buf("v", &v));
    let o = ctx.storage_output("o", (shape.q_len() * 4) as u64).expect("o");
    let lse = ctx.storage_output("lse", u64::from(shape.h_q * shape.n_q) * 4).expect("lse");
    let buffers = FlashBuffers { q: &qb, k: &kb, v: &vb, o: &o, lse: &lse };
    let dispatch = kernels
        .flash
        .prepare(&ctx, &buffers, FlashLaunch { shape, kv_stride: shape.n_kv, mask, scale: 0.5 })
        .expect("prepare");
    Dispatch::submit_all(&ctx, &[&dispatch]);
    let got_o: Vec<f32> = pollster::block_on(ctx.read_back(&o)).expect("read O");
    let got_lse: Vec<f32> = pollster::block_on(ctx.read_back(&lse)).expect("read lse");
    assert_close("O", &got_o, &want.o, 1e-4, 1e-3);
    assert_close("lse", &got_lse, &want.lse, 1e-4, 1e-3);
    close(ctx);
}

/// `distance_mass` against its twin, both from the twin's log-sum-exp: every mask (window and chunk 1
/// and small), GQA, queries as the last rows of the keys, a width off the vec4 grid, and a long head
/// (1,399 distances a head, past one workgroup row). f32 sums of up to n terms: within 2e-5 + 1e-4 |want|.
/// Then the same from the kernels' own log-sum-exp ([`Kernels::masses_by_distance`], the view's path).
#[test]
fn distance_mass_matches_its_twin() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let masks = [
        Mask::Full,
        Mask::Causal,
        Mask::Sliding { window_tokens: 1 },
        Mask::Sliding { window_tokens: 5 },
        Mask::Chunked { chunk_tokens: 1 },
        Mask::Chunked { chunk_tokens: 6 },
    ];
    let mut cases: Vec<(AttentionShape, Mask)> =
        masks.into_iter().map(|m| (AttentionShape { h_q: 4, h_kv: 2, n_q: 29, n_kv: 37, d: 23 }, m)).collect();
    cases.push((AttentionShape::square(2, 700, 64), Mask::Causal));
    for (i, (shape, mask)) in cases.into_iter().enumerate() {
        let (q, k, v) = inputs(&shape, 1.0, 40 + i as u64);
        let p = AttentionProblem::new(&q, &k, &v, shape, mask, 1.0 / (shape.d as f32).sqrt());
        let lse = reference::flash_attention(&p).lse;
        let want = attention_lab::cpu::distance_mass::distance_mass(&p, &lse);
        let got = pollster::block_on(kernels.distance_mass(&ctx).run(&ctx, &p, &lse)).expect("distance_mass");
        assert_close(&format!("distance_mass {shape:?} {mask:?}"), &got, &want, 2e-5, 1e-4);
        // The view's path: the row softmax's log-sum-exp and the masses in one submission, on padded rows.
        let fused = pollster::block_on(kernels.masses_by_distance(&ctx, &p)).expect("masses_by_distance");
        assert_close(&format!("masses_by_distance {shape:?} {mask:?}"), &fused, &want, 2e-5, 1e-4);
        // Each head's masses sum to 1: every query sees a key under these masks.
        for head in got.chunks(2 * shape.n_kv as usize - 1).chain(fused.chunks(2 * shape.n_kv as usize - 1)) {
            assert!((head.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{mask:?}");
        }
    }
    close(ctx);
}

#[test]
fn probabilities_match_the_reference() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let cases = [
        case(2, 2, 37, 37, 32, Mask::Causal),
        case(4, 2, 45, 70, 64, Mask::Sliding { window_tokens: 9 }),
        case(8, 1, 30, 30, 16, Mask::Chunked { chunk_tokens: 7 }),
        case(2, 1, 66, 66, 64, Mask::Full),
        Case { amp: 30.0, ..case(2, 1, 40, 40, 32, Mask::Causal) },
        // Head widths with 4 and 2 rows per invocation on CPU adapters, and one padded to a multiple of 4.
        case(8, 2, 50, 50, 128, Mask::Causal),
        case(2, 1, 21, 21, 256, Mask::Sliding { window_tokens: 5 }),
        case(3, 3, 17, 23, 30, Mask::Full),
    ];
    for (n, c) in cases.into_iter().enumerate() {
        let s = c.shape;
        let (q, k, v) = inputs(&s, c.amp, 500 + n as u64);
        let scale = 1.0 / (s.d as f32).sqrt();
        let want = reference::row_softmax(&AttentionProblem::scores(&q, &k, s, c.mask, scale));
        let fwd = pollster::block_on(kernels.forward(&ctx, &AttentionProblem::new(&q, &k, &v, s, c.mask, scale)))
            .expect("forward");
        let what = format!("{s:?} {:?}", c.mask);
        // The row softmax: every probability in one pass, and the log-sum-exp alone, in every form
        // (on lavapipe: with subgroups, without, and as GPUs run it).
        let want_lse = reference::flash_attention(&AttentionProblem::new(&q, &k, &v, s, c.mask, scale)).lse;
        let adapters_form = kernels.rows.form();
        for form in [RowForm::CpuSubgroup, RowForm::Cpu, RowForm::Gpu] {
            kernels.rows.set_form(form);
            let got = pollster::block_on(
                kernels.whole_probabilities(&ctx, &AttentionProblem::scores(&q, &k, s, c.mask, scale)),
            )
            .expect("whole rows");
            assert_close(&format!("row softmax ({form:?}) P of {what}"), &got, &want, 1e-4, 0.0);
            let got =
                pollster::block_on(kernels.log_sum_exp(&ctx, &AttentionProblem::scores(&q, &k, s, c.mask, scale)))
                    .expect("lse");
            assert_close(&format!("row softmax ({form:?}) lse of {what}"), &got, &want_lse, 1e-4, 1e-3);
        }
        kernels.rows.set_form(adapters_form);
        // The whole matrix, then an off-centre window.
        let all = ProbRegion { row0: 0, rows: s.n_q, col0: 0, cols: s.n_kv };
        let got = pollster::block_on(kernels.probabilities(
            &ctx,
            &AttentionProblem::scores(&q, &k, s, c.mask, scale),
            &fwd.lse,
            all,
        ))
        .expect("probabilities");
        assert_close(&format!("P of {what}"), &got, &want, 1e-4, 0.0);
        let win = ProbRegion { row0: 3, rows: s.n_q - 5, col0: 2, cols: s.n_kv - 3 };
        let got = pollster::block_on(kernels.probabilities(
            &ctx,
            &AttentionProblem::scores(&q, &k, s, c.mask, scale),
            &fwd.lse,
            win,
        ))
        .expect("window");
        let want_win: Vec<f32> = (0..s.h_q)
            .flat_map(|h| (win.row0..win.row0 + win.rows).map(move |i| (h, i)))
            .flat_map(|(h, i)| {
                let row = ((h * s.n_q + i) * s.n_kv) as usize;
                want[row + win.col0 as usize..row + (win.col0 + win.cols) as usize].to_vec()
            })
            .collect();
        assert_close(&format!("window of {what}"), &got, &want_win, 1e-4, 0.0);
        // Pooled: blocks that divide unevenly, more output rows than queries (upsampling), and more
        // columns than keys (pooled_heads then takes the log-sum-exp path).
        for (rows, cols) in [(7, 9), (s.n_q, s.n_kv), (s.n_q + 3, 4), (1, 1), (3, s.n_kv + 2)] {
            for pool in [Pool::Max, Pool::Mean] {
                let want_pool = reference::pool_rows(&want, s.h_q, s.n_q, s.n_kv, rows, cols, pool);
                let got = pollster::block_on(kernels.pooled_probabilities(
                    &ctx,
                    &AttentionProblem::scores(&q, &k, s, c.mask, scale),
                    &fwd.lse,
                    rows,
                    cols,
                    pool,
                ))
                .expect("pooled");
                assert_close(&format!("{pool:?} {rows}x{cols} of {what}"), &got, &want_pool, 1e-4, 0.0);
                let map = PooledMap::whole(s.n_q, rows, cols, pool);
                for form in [RowForm::CpuSubgroup, RowForm::Cpu, RowForm::Gpu] {
                    kernels.rows.set_form(form);
                    let got = pollster::block_on(kernels.pooled_heads(
                        &ctx,
                        &AttentionProblem::scores(&q, &k, s, c.mask, scale),
                        map,
                    ))
                    .expect("pooled heads");
                    assert_close(
                        &format!("{pool:?} {rows}x{cols} pooled heads ({form:?}) of {what}"),
                        &got,
                        &want_pool,
                        1e-4,
                        0.0,
                    );
                }
                kernels.rows.set_form(adapters_form);
                // In slices of rows (a long head, one submission per slice), each from its own queries.
                if cols <= s.n_kv {
                    let mut by_head = vec![Vec::new(); s.h_q as usize];
                    for slice in map.slices(3) {
                        let (q0, q1) = slice.queries();
                        let d = s.d as usize;
                        let q_slice: Vec<f32> = (0..s.h_q as usize)
                            .flat_map(|h| {
                                q[(h * s.n_q as usize + q0 as usize) * d..(h * s.n_q as usize + q1 as usize) * d]
                                    .to_vec()
                            })
                            .collect();
                        let shape = AttentionShape { n_q: q1 - q0, ..s };
                        let got = pollster::block_on(kernels.pooled_heads(
                            &ctx,
                            &AttentionProblem::scores(&q_slice, &k, shape, c.mask, scale),
                            slice,
                        ))
                        .expect("pooled slice");
                        for (h, part) in got.chunks(got.len() / s.h_q as usize).enumerate() {
                            by_head[h].extend_from_slice(part);
                        }
                    }
                    assert_close(
                        &format!("{pool:?} {rows}x{cols} pooled in slices, {what}"),
                        &by_head.concat(),
                        &want_pool,
                        1e-4,
                        0.0,
                    );
                }
            }
        }
    }
    close(ctx);
}

/// Heads wider than 256 (Gemma 4's global 512, MLA's absorbed 576, imported configs up to 1,024, and
/// 320, the first width past the narrow kernels): every kernel that attends against the reference,
/// with each mask and GQA (4 query heads on 2 KV heads), queries the last rows of a longer sequence.
/// 1,024 is the width where the forward kernels re-read their query rows (`Q_REGS` = 0). One test
/// per width, so the widths' slow pipeline compiles on lavapipe run side by side.
#[test]
fn heads_320_wide_match_the_reference() {
    wide_heads_match_the_reference(320);
}

#[test]
fn heads_512_wide_match_the_reference() {
    wide_heads_match_the_reference(512);
}

#[test]
fn heads_576_wide_match_the_reference() {
    wide_heads_match_the_reference(576);
}

#[test]
fn heads_1024_wide_match_the_reference() {
    wide_heads_match_the_reference(1024);
}

fn wide_heads_match_the_reference(d: u32) {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let adapters_form = kernels.rows.form();
    let masks = [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 6 }, Mask::Chunked { chunk_tokens: 7 }];
    for (m, mask) in masks.into_iter().enumerate() {
        let s = AttentionShape { h_q: 4, h_kv: 2, n_q: 19, n_kv: 23, d };
        let (q, k, v) = inputs(&s, 1.0, 1300 + u64::from(d) + m as u64);
        let scale = 1.0 / (d as f32).sqrt();
        let what = format!("{s:?} {mask:?}");
        let problem = AttentionProblem::new(&q, &k, &v, s, mask, scale);
        let scores = AttentionProblem::scores(&q, &k, s, mask, scale);
        let want = reference::flash_attention(&problem);
        let want_p = reference::row_softmax(&scores);
        // The forward kernel with the adapter's tiles (lavapipe: the subgroup kernel, unrolled),
        // then as every WebGPU GPU runs it (K/V staged in 16 KiB of workgroup memory, loops kept).
        for tiles in [None, Some(FlashTiles::web_gpu(d))] {
            kernels.flash.force_tiles(tiles);
            kernels.flash.set_unrolled(tiles.is_none());
            let got = pollster::block_on(kernels.forward(&ctx, &problem)).expect("forward");
            assert_close(&format!("O of {what}, tiles {tiles:?}"), &got.o, &want.o, 1e-4, 1e-3);
            assert_close(&format!("lse of {what}, tiles {tiles:?}"), &got.lse, &want.lse, 1e-4, 1e-3);
        }
        kernels.flash.force_tiles(None);
        kernels.flash.set_unrolled(true);
        let naive = pollster::block_on(kernels.naive_forward(&ctx, &problem)).expect("naive");
        assert_close(&format!("naive O of {what}"), &naive.o, &want.o, 1e-4, 1e-3);
        // The row softmax: whole rows, log-sum-exp, and pooled heads (pool_rows); in the adapter's
        // form, and at the widest head in every form (each form and width is a slow compile on
        // lavapipe, and every width past 256 takes the same path in the shader).
        let map = PooledMap::whole(s.n_q, 5, 7, Pool::Max);
        let want_pool = reference::pool_rows(&want_p, s.h_q, s.n_q, s.n_kv, 5, 7, Pool::Max);
        let forms =
            if d == 1024 { vec![RowForm::CpuSubgroup, RowForm::Cpu, RowForm::Gpu] } else { vec![adapters_form] };
        for form in forms {
            kernels.rows.set_form(form);
            let got = pollster::block_on(kernels.whole_probabilities(&ctx, &scores)).expect("rows");
            assert_close(&format!("row softmax ({form:?}) P of {what}"), &got, &want_p, 1e-4, 0.0);
            let got = pollster::block_on(kernels.log_sum_exp(&ctx, &scores)).expect("lse");
            assert_close(&format!("row softmax ({form:?}) lse of {what}"), &got, &want.lse, 1e-4, 1e-3);
            let got = pollster::block_on(kernels.pooled_heads(&ctx, &scores, map)).expect("pooled heads");
            assert_close(&format!("pooled heads ({form:?}) of {what}"), &got, &want_pool, 1e-4, 0.0);
        }
        kernels.rows.set_form(adapters_form);
        // attention_probs: a window of probabilities and pooled blocks from the forward's lse.
        let win = ProbRegion { row0: 3, rows: 11, col0: 2, cols: 17 };
        let got = pollster::block_on(kernels.probabilities(&ctx, &scores, &want.lse, win)).expect("window");
        let want_win: Vec<f32> = (0..s.h_q)
            .flat_map(|h| (3..14).map(move |i| (h, i)))
            .flat_map(|(h, i)| want_p[((h * s.n_q + i) * s.n_kv) as usize..][2..19].to_vec())
            .collect();
        assert_close(&format!("window of {what}"), &got, &want_win, 1e-4, 0.0);
        let got = pollster::block_on(kernels.pooled_probabilities(&ctx, &scores, &want.lse, 5, 7, Pool::Max))
            .expect("pooled");
        assert_close(&format!("pooled of {what}"), &got, &want_pool, 1e-4, 0.0);
        // Decode (lm_forward's path): the last query against a cache holding every key.
        let mut cache = attention_lab::gpu::KvCache::new(&ctx, s.h_kv, d, 32).expect("cache");
        let token = |x: &[f32], t: u32| -> Vec<f32> {
            (0..s.h_kv).flat_map(|h| x[((h * s.n_kv + t) * d) as usize..][..d as usize].to_vec()).collect()
        };
        for t in 0..s.n_kv {
            cache.append(&ctx, &token(&k, t), &token(&v, t)).expect("append");
        }
        let last = |x: &[f32]| -> Vec<f32> {
            (0..s.h_q).flat_map(|h| x[((h * s.n_q + s.n_q - 1) * d) as usize..][..d as usize].to_vec()).collect()
        };
        let got = pollster::block_on(kernels.decode(&ctx, &cache, &last(&q), s.h_q, mask, scale)).expect("decode");
        let shape = AttentionShape { n_q: 1, ..s };
        let want_d = reference::flash_attention(&AttentionProblem::new(&last(&q), &k, &v, shape, mask, scale));
        assert_close(&format!("decode O of {what}"), &got.o, &want_d.o, 1e-4, 1e-3);
    }
    close(ctx);
}

/// Jobs of one size reuse their buffers (`GpuContext::scratch_*`): a job that writes fewer non-zero
/// values than the one before must still read back only its own.
#[test]
fn reused_buffers_never_show_an_earlier_jobs_values() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let s = AttentionShape { h_q: 4, h_kv: 2, n_q: 40, n_kv: 40, d: 32 };
    let scale = 1.0 / (s.d as f32).sqrt();
    for (n, mask) in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 3 }, Mask::Chunked { chunk_tokens: 6 }]
        .into_iter()
        .enumerate()
    {
        let (q, k, _) = inputs(&s, 1.0, 900 + n as u64);
        let want = reference::row_softmax(&AttentionProblem::scores(&q, &k, s, mask, scale));
        let got =
            pollster::block_on(kernels.whole_probabilities(&ctx, &AttentionProblem::scores(&q, &k, s, mask, scale)))
                .expect("whole rows");
        assert_close(&format!("P after earlier jobs, {mask:?}"), &got, &want, 1e-4, 0.0);
        let want_pool = reference::pool_rows(&want, s.h_q, s.n_q, s.n_kv, 9, 9, Pool::Mean);
        let got = pollster::block_on(kernels.pooled_heads(
            &ctx,
            &AttentionProblem::scores(&q, &k, s, mask, scale),
            PooledMap::whole(s.n_q, 9, 9, Pool::Mean),
        ))
        .expect("pooled heads");
        assert_close(&format!("pooled after earlier jobs, {mask:?}"), &got, &want_pool, 1e-4, 0.0);
        assert!(ctx.spare_bytes() > 0, "finished jobs give their buffers back");
    }
    close(ctx);
}

#[test]
fn inputs_larger_than_one_upload_piece_arrive_whole() {
    // Q, K and V of 20,000 tokens of 128 are 10.24 MB each: two 8 MiB writes apiece. A window of 4
    // keeps the work small; every row is checked against the reference.
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let s = AttentionShape { h_q: 1, h_kv: 1, n_q: 20_000, n_kv: 20_000, d: 128 };
    let mask = Mask::Sliding { window_tokens: 4 };
    let (q, k, v) = inputs(&s, 1.0, 4242);
    let p = AttentionProblem::new(&q, &k, &v, s, mask, 1.0 / (s.d as f32).sqrt());
    let got = pollster::block_on(kernels.forward(&ctx, &p)).expect("forward");
    let want = reference::flash_attention(&p);
    assert_close("O over piecewise uploads", &got.o, &want.o, 1e-4, 1e-3);
    assert_close("lse over piecewise uploads", &got.lse, &want.lse, 1e-4, 1e-3);
    close(ctx);
}

#[test]
fn a_job_that_runs_out_of_memory_fails_alone_and_the_next_one_computes() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let s = AttentionShape { h_q: 2, h_kv: 1, n_q: 24, n_kv: 24, d: 16 };
    let (q, k, _) = inputs(&s, 1.0, 77);
    let problem = AttentionProblem::scores(&q, &k, s, Mask::Causal, 0.25);
    pollster::block_on(kernels.whole_probabilities(&ctx, &problem)).expect("a first job");
    assert!(ctx.spare_bytes() > 0);
    // The device reports an allocation failure (recorded as its error handler records a real one).
    ctx.simulate_out_of_memory();
    let failed = pollster::block_on(kernels.whole_probabilities(&ctx, &problem)).expect_err("the job must fail");
    assert!(matches!(failed, GpuError::OutOfMemory(_)), "{failed}");
    assert!(failed.to_string().contains("ran out of memory"), "{failed}");
    assert_eq!(ctx.spare_bytes(), 0, "what the pool held is freed");
    assert!(ctx.check_fault().is_ok(), "the device itself is still good");
    let again = pollster::block_on(kernels.whole_probabilities(&ctx, &problem)).expect("the next job computes");
    assert_close("P after an out-of-memory job", &again, &reference::row_softmax(&problem), 1e-4, 0.0);
    // A benchmark case times its submissions without reading results back: it must not print times
    // for work the device could not allocate.
    let case = BenchCase { kernel: BenchKernel::Tiled, shape: s, mask: Mask::Causal };
    let reps = Repetitions { max: 2, budget_ms: 100.0, max_run_ms: None };
    let now_ms = || std::time::UNIX_EPOCH.elapsed().map_or(0.0, |t| t.as_secs_f64() * 1e3);
    ctx.simulate_out_of_memory();
    let timed = pollster::block_on(run_case(&ctx, &kernels, &case, 1.0, reps, now_ms));
    assert!(matches!(timed, Err(GpuError::OutOfMemory(_))), "{timed:?}");
    assert!(
        pollster::block_on(run_case(&ctx, &kernels, &case, 1.0, reps, now_ms)).is_ok_and(|r| r.ms_median.is_some())
    );
    close(ctx);
}

#[test]
fn naive_baseline_and_decode_cache_match_the_reference() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    // The naive three-pass kernel.
    for (n, c) in [
        case(2, 2, 37, 37, 32, Mask::Causal),
        case(4, 1, 20, 45, 64, Mask::Sliding { window_tokens: 6 }),
        case(2, 1, 33, 33, 16, Mask::Chunked { chunk_tokens: 5 }),
        Case { amp: 30.0, ..case(2, 2, 30, 30, 32, Mask::Full) },
    ]
    .into_iter()
    .enumerate()
    {
        let (q, k, v) = inputs(&c.shape, c.amp, 900 + n as u64);
        let scale = 1.0 / (c.shape.d as f32).sqrt();
        let want = reference::flash_attention(&AttentionProblem::new(&q, &k, &v, c.shape, c.mask, scale));
        let got =
            pollster::block_on(kernels.naive_forward(&ctx, &AttentionProblem::new(&q, &k, &v, c.shape, c.mask, scale)))
                .expect("naive runs");
        let what = format!("naive {:?} {:?}", c.shape, c.mask);
        assert_close(&format!("O of {what}"), &got.o, &want.o, 1e-4, 1e-3);
        assert_close(&format!("lse of {what}"), &got.lse, &want.lse, 1e-4, 1e-3);
    }
    // A too-large score matrix is refused with the bytes it needs, before any allocation.
    let huge = AttentionShape::square(8, 16384, 64);
    let need = attention_lab::gpu::naive_attention::scores_bytes(&huge);
    assert_eq!(need, 8 * 16384 * 16384 * 4);
    assert_eq!(attention_lab::gpu::naive_attention::fits(&ctx, &huge), Err(need));

    // Decode: a cache with spare capacity grows one token per step; each step equals the reference's
    // last query row over the tokens so far. GQA 4 -> 2, d = 20 (padded to 20), three masks.
    let (h_q, h_kv, d, steps) = (4u32, 2u32, 20u32, 37u32);
    let mut rng = SplitMix64::new(77);
    let k_all = random((h_kv * steps * d) as usize, 1.0, &mut rng); // [h_kv, steps, d]
    let v_all = random((h_kv * steps * d) as usize, 1.0, &mut rng);
    let q_all = random((h_q * steps * d) as usize, 1.0, &mut rng); // [h_q, steps, d]
    let token = |x: &[f32], heads: u32, t: u32| -> Vec<f32> {
        (0..heads).flat_map(|h| x[((h * steps + t) * d) as usize..][..d as usize].to_vec()).collect()
    };
    let scale = 0.3;
    for mask in [Mask::Causal, Mask::Sliding { window_tokens: 8 }, Mask::Chunked { chunk_tokens: 16 }] {
        let mut cache = attention_lab::gpu::KvCache::new(&ctx, h_kv, d, 64).expect("cache");
        for t in 0..steps {
            cache.append(&ctx, &token(&k_all, h_kv, t), &token(&v_all, h_kv, t)).expect("append");
            let q_t = token(&q_all, h_q, t);
            let got = pollster::block_on(kernels.decode(&ctx, &cache, &q_t, h_q, mask, scale)).expect("decode");
            // Reference over keys 0..=t: K/V rows re-packed as [h_kv, t + 1, d].
            let shape = AttentionShape { h_q, h_kv, n_q: 1, n_kv: t + 1, d };
            let prefix = |x: &[f32]| -> Vec<f32> {
                (0..h_kv).flat_map(|h| x[(h * steps * d) as usize..][..((t + 1) * d) as usize].to_vec()).collect()
            };
            let want = reference::flash_attention(&AttentionProblem::new(
                &q_t,
                &prefix(&k_all),
                &prefix(&v_all),
                shape,
                mask,
                scale,
            ));
            assert_close(&format!("decode O, {mask:?}, step {t}"), &got.o, &want.o, 1e-4, 1e-3);
            assert_close(&format!("decode lse, {mask:?}, step {t}"), &got.lse, &want.lse, 1e-4, 1e-3);
        }
        assert_eq!(cache.len_tokens(), steps);
    }
    close(ctx);
}

/// The FMA probe's launch runs and every invocation writes its bounded sum (each chain converges
/// towards 1, so 8 chains x 4 lanes sum to a finite value above 0): what keeps the work alive.
#[test]
fn fma_peak_writes_a_finite_sum_per_invocation() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let probe = kernels.fma_peak.prepare(&ctx, 3, 16).expect("fma_peak launch");
    assert_eq!(probe.flops, 3 * 64 * 16 * 8 * 4 * 2);
    Dispatch::submit_all(&ctx, &[&probe.dispatch]);
    let sums: Vec<f32> = pollster::block_on(ctx.read_back(&probe._out)).expect("read back");
    assert!(sums[..3 * 64].iter().all(|s| s.is_finite() && *s > 0.0), "{:?}", &sums[..8]);
    close(ctx);
}

/// Paged decode: K/V written token by token into pages scattered over one pool (the table maps
/// logical pages 0, 1, 2 to pool pages 5, 0, 3), a shared page copied on write, and at every step
/// the paged kernel equals the contiguous decode kernel and the paged CPU twin. GQA 4 -> 2, three
/// masks, d = 20, 128 (Llama's width) and 576 (MLA's absorbed head, past 256).
#[test]
fn paged_decode_equals_contiguous_decode_and_the_twin() {
    use attention_lab::cpu::paged_attention::{PagedProblem, paged_attention};
    use attention_lab::gpu::kernels::PagedStep;
    use attention_lab::gpu::{KvCache, KvPool};
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let (h_q, h_kv, steps, table) = (4u32, 2u32, 37u32, [5u32, 0, 3]);
    // Unrolled natively: the subgroup form where lavapipe has subgroups; then the loop form GPUs run
    // in the browser, at one width.
    for (d, unrolled) in [(20u32, true), (128, true), (576, true), (20, false)] {
        kernels.paged.set_unrolled(unrolled);
        let mut rng = SplitMix64::new(u64::from(d));
        let k_all = random((h_kv * steps * d) as usize, 1.0, &mut rng); // [steps, h_kv, d]: one token a row
        let v_all = random((h_kv * steps * d) as usize, 1.0, &mut rng);
        let q_all = random((h_q * steps * d) as usize, 1.0, &mut rng);
        let token = |x: &[f32], heads: u32, t: u32| x[(t * heads * d) as usize..][..(heads * d) as usize].to_vec();
        for mask in [Mask::Causal, Mask::Sliding { window_tokens: 8 }, Mask::Chunked { chunk_tokens: 16 }] {
            let pool = KvPool::new(&ctx, h_kv, d, 6).expect("pool");
            let mut twin = attention_lab::cpu::kv_pool::CpuKvPool::new(h_kv, d, 6).expect("twin pool");
            let mut cache = KvCache::new(&ctx, h_kv, d, 64).expect("cache");
            for t in 0..steps {
                let (k, v) = (token(&k_all, h_kv, t), token(&v_all, h_kv, t));
                let page = table[(t / 16) as usize];
                pool.write_token(&ctx, page, t % 16, &k, &v).expect("write");
                twin.write_token(page, t % 16, &k, &v).expect("twin write");
                cache.append(&ctx, &k, &v).expect("append");
                let q = token(&q_all, h_q, t);
                let step = PagedStep { pool: &pool, table: &table, n_kv: t + 1, q: &q, h_q, mask, scale: 0.3 };
                let got = pollster::block_on(kernels.paged_decode(&ctx, &step)).expect("paged decode");
                let flat = pollster::block_on(kernels.decode(&ctx, &cache, &q, h_q, mask, 0.3)).expect("decode");
                let shape = AttentionShape { h_q, h_kv, n_q: 1, n_kv: t + 1, d };
                let problem = PagedProblem {
                    q: &q,
                    k_pool: twin.keys(),
                    v_pool: twin.values(),
                    table: &table,
                    shape,
                    mask,
                    scale: 0.3,
                };
                let want = paged_attention(&problem).expect("twin");
                let what = format!("d {d}, unrolled {unrolled}, {mask:?}, step {t}");
                assert_close(&format!("paged O vs twin, {what}"), &got.o, &want.o, 1e-4, 1e-3);
                assert_close(&format!("paged lse vs twin, {what}"), &got.lse, &want.lse, 1e-4, 1e-3);
                assert_close(&format!("paged O vs contiguous, {what}"), &got.o, &flat.o, 1e-5, 1e-5);
            }
            // Copy-on-write: page 3 (tokens 32..37) copied to page 1 and read through [5, 0, 1].
            pool.copy_page(&ctx, 3, 1).expect("copy");
            let q = token(&q_all, h_q, steps - 1);
            let moved = [5u32, 0, 1];
            let step = PagedStep { pool: &pool, table: &moved, n_kv: steps, q: &q, h_q, mask, scale: 0.3 };
            let got = pollster::block_on(kernels.paged_decode(&ctx, &step)).expect("paged decode after copy");
            let flat = pollster::block_on(kernels.decode(&ctx, &cache, &q, h_q, mask, 0.3)).expect("decode");
            assert_close(&format!("copied page, d {d}, {mask:?}"), &got.o, &flat.o, 1e-5, 1e-5);
        }
    }
    // Bad input is refused before any launch, with a reason: a short table, a page past the pool.
    let pool = KvPool::new(&ctx, 1, 8, 2).expect("pool");
    let q = vec![0.5; 8];
    let refused = |table: &[u32], n_kv: u32| {
        let step = PagedStep { pool: &pool, table, n_kv, q: &q, h_q: 1, mask: Mask::Causal, scale: 1.0 };
        pollster::block_on(kernels.paged_decode(&ctx, &step)).unwrap_err().to_string()
    };
    assert!(refused(&[0], 17).contains("17 keys need 2 pages of 16, the page table has 1"), "{}", refused(&[0], 17));
    assert!(refused(&[0, 2], 17).contains("page 2 is outside the pool's 2 pages"));
    assert!(KvPool::new(&ctx, 1, 8, 0).is_err());
    close(ctx);
}
