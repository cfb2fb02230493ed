//! The kernels inside a real browser: WebGPU (SwiftShader in headless Chromium) against the f64 CPU
//! reference, the same comparison the native tests make on lavapipe, the shipped language model's
//! whole forward pass (and its evicting form) against the CPU forward pass, and every family fixture against candle. Run by scripts/test.sh through
//! wasm-bindgen-test-runner; natively this file is empty.
#![cfg(target_arch = "wasm32")]

use attention_lab::attention::inputs::SplitMix64;
use attention_lab::attention::pooled::{Pool, PooledMap};
use attention_lab::attention::{AttentionProblem, AttentionShape};
use attention_lab::cpu::reference;
use attention_lab::gpu::lm_forward::{self, LmRequest, LmWeights};
use attention_lab::gpu::lm_stream;
use attention_lab::gpu::row_softmax::RowOutput;
use attention_lab::gpu::{GpuContext, Kernels, ProbRegion, launch};
use attention_lab::lm::bpe::Tokenizer;
use attention_lab::lm::checkpoint::Checkpoint;
use attention_lab::lm::forward;
use attention_lab::model::Mask;
use attention_lab::model::kv_evict::EvictPolicy;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

#[path = "common/fixtures.rs"]
mod fixtures;

wasm_bindgen_test_configure!(run_in_browser);

fn random(len: usize, seed: u64, amplitude: f32) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..len).map(|_| rng.next_signed_unit() * amplitude).collect()
}

fn shape_padded(s: AttentionShape) -> AttentionShape {
    AttentionShape { d: launch::padded_dim(s.d), ..s }
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[wasm_bindgen_test]
async fn kernels_match_the_reference_on_browser_webgpu() {
    let ctx = GpuContext::new().await.expect("a WebGPU adapter (Chromium needs --enable-unsafe-webgpu)");
    assert_eq!(ctx.adapter.backend, wgpu::Backend::BrowserWebGpu.to_string(), "must run on WebGPU, not a fallback");
    // Chromium offers subgroups (4 lanes on SwiftShader); wgpu cannot ask for them, web_subgroups does.
    assert!(ctx.subgroup_size.is_some(), "the device should have subgroups of one fixed size");
    let kernels = Kernels::new(&ctx);
    let cases = [
        (AttentionShape { h_q: 2, h_kv: 2, n_q: 37, n_kv: 37, d: 32 }, Mask::Causal),
        (AttentionShape { h_q: 4, h_kv: 1, n_q: 20, n_kv: 45, d: 64 }, Mask::Sliding { window_tokens: 7 }),
        (AttentionShape { h_q: 4, h_kv: 2, n_q: 33, n_kv: 33, d: 64 }, Mask::Chunked { chunk_tokens: 8 }),
        (AttentionShape { h_q: 2, h_kv: 1, n_q: 1, n_kv: 70, d: 128 }, Mask::Full),
    ];
    // The page's loop form for every case, then the benchmark's unrolled form (the subgroup kernel,
    // with subgroups) for one.
    let runs = cases.iter().map(|c| (*c, false)).chain([(cases[2], true)]);
    for (i, ((shape, mask), unrolled)) in runs.enumerate() {
        kernels.flash.set_unrolled(unrolled);
        let seed = 100 + i as u64;
        let (q, k, v) = (
            random(shape.q_len(), seed, 2.0),
            random(shape.kv_len(), seed + 1, 2.0),
            random(shape.kv_len(), seed + 2, 1.0),
        );
        let scale = 1.0 / (shape.d as f32).sqrt();
        let expected = reference::flash_attention(&AttentionProblem::new(&q, &k, &v, shape, mask, scale));
        let got = kernels.forward(&ctx, &AttentionProblem::new(&q, &k, &v, shape, mask, scale)).await.expect("forward");
        let o_err = max_abs_diff(&got.o, &expected.o);
        assert!(o_err < 1e-3, "case {i} {mask:?} (unrolled: {unrolled}): output differs by {o_err}");
        let region = ProbRegion { row0: 0, rows: shape.n_q, col0: 0, cols: shape.n_kv };
        let p = kernels
            .probabilities(&ctx, &AttentionProblem::scores(&q, &k, shape, mask, scale), &got.lse, region)
            .await
            .expect("probabilities");
        let want_p = reference::row_softmax(&AttentionProblem::scores(&q, &k, shape, mask, scale));
        let p_err = max_abs_diff(&p, &want_p);
        assert!(p_err < 1e-4, "case {i} {mask:?}: probabilities differ by {p_err}");
        // The explorer's kernels: the row softmax, whole and lse only, in the form a page starts with
        // (loops, quick to compile) and, built by warm_up, the fast one (unrolled, subgroups).
        for form in ["quick", "fast"] {
            if form == "fast" {
                kernels.rows.warm_up(&ctx, shape_padded(shape), RowOutput::Probabilities);
                kernels.rows.warm_up(&ctx, shape_padded(shape), RowOutput::LogSumExp);
            }
            let p = kernels
                .whole_probabilities(&ctx, &AttentionProblem::scores(&q, &k, shape, mask, scale))
                .await
                .expect("whole rows");
            let p_err = max_abs_diff(&p, &want_p);
            assert!(p_err < 1e-4, "case {i} {mask:?}: row softmax ({form}) probabilities differ by {p_err}");
            let lse =
                kernels.log_sum_exp(&ctx, &AttentionProblem::scores(&q, &k, shape, mask, scale)).await.expect("lse");
            let lse_err = max_abs_diff(&lse, &expected.lse);
            assert!(lse_err < 1e-3, "case {i} {mask:?}: row softmax ({form}) lse differs by {lse_err}");
            // Pooled heads: each row's key blocks in the same pass, then pool_rows.
            let (rows, cols) = (3, 5);
            for pool in [Pool::Max, Pool::Mean] {
                if form == "fast" {
                    kernels.rows.warm_up(&ctx, shape_padded(shape), RowOutput::Blocks { cols, pool });
                }
                let got = kernels
                    .pooled_heads(
                        &ctx,
                        &AttentionProblem::scores(&q, &k, shape, mask, scale),
                        PooledMap::whole(shape.n_q, rows, cols, pool),
                    )
                    .await
                    .expect("pooled heads");
                let want = reference::pool_rows(&want_p, shape.h_q, shape.n_q, shape.n_kv, rows, cols, pool);
                let err = max_abs_diff(&got, &want);
                assert!(err < 1e-4, "case {i} {mask:?}: {pool:?}-pooled heads ({form}) differ by {err}");
            }
        }
    }
}

/// The shipped model (compiled into the test: 4.9 MB of float16 weights), 83 tokens (past the 64-token
/// window of layers 0-2), on WebGPU against `lm::forward`: every layer's hidden states and
/// probabilities and every logit, within the tolerances of tests/gpu_lm.rs (measured on lavapipe);
/// then the same logits decoded token by token against the GPU KV cache.
/// The shipped checkpoint, and its weights uploaded to a browser WebGPU device.
async fn shipped_on_gpu() -> (Checkpoint, GpuContext, Kernels, LmWeights) {
    let config = include_str!("../www/models/attention-lab-tiny/config.json");
    let safetensors = include_bytes!("../www/models/attention-lab-tiny/model.safetensors");
    let ck = Checkpoint::load(config, safetensors).expect("the shipped checkpoint loads");
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    (ck, ctx, kernels, weights)
}

#[wasm_bindgen_test]
async fn the_language_model_matches_the_cpu_forward_pass_on_browser_webgpu() {
    let (ck, ctx, kernels, weights) = shipped_on_gpu().await;
    let mut rng = SplitMix64::new(83);
    let ids: Vec<u32> = (0..83).map(|_| (rng.next_u64() % u64::from(weights.geometry.vocab)) as u32).collect();
    let want = forward::forward(&ck, &ids).expect("CPU forward");
    let request = LmRequest { last_logits: None, probabilities: true, hidden_states: true, head_outputs: false };
    let got = lm_forward::run(&ctx, &kernels, &weights, &ids, request).await.expect("GPU forward");
    assert_eq!((got.hidden.len(), got.probs.len()), (ck.layers.len(), ck.layers.len()));
    for (l, (g, w)) in got.hidden.iter().zip(&want.hidden).enumerate() {
        // As tests/gpu_lm.rs: 2e-4, or 1e-5 of the layer's largest value (the last layer's residual
        // reaches the hundreds, where f32 keeps only a few 1e-4).
        let largest = w.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = max_abs_diff(g, w);
        assert!(err < 2e-4f32.max(1e-5 * largest), "hidden states after layer {l} differ by {err} (largest {largest})");
    }
    for (l, (g, w)) in got.probs.iter().zip(&want.probs).enumerate() {
        let err = max_abs_diff(g, w);
        assert!(err < 1e-5, "layer {l} probabilities differ by {err}");
    }
    let err = max_abs_diff(&got.logits, &want.logits);
    assert!(err < 1e-4, "logits differ by {err}");

    // Generation's path: the first 70 tokens prefilled into a KV cache, then 13 one at a time (past
    // the window), each step's logits against the CPU pass's at that position.
    let mut cache = lm_forward::LmCache::new(&ctx, &weights, 128).expect("cache");
    let prefill = lm_forward::decode(&ctx, &kernels, &weights, &mut cache, &ids[..70]).await.expect("prefill");
    let err = max_abs_diff(&prefill, want.logits_at(69));
    assert!(err < 1e-4, "logits after the prefill differ by {err}");
    for i in 70..83 {
        let got = lm_forward::decode(&ctx, &kernels, &weights, &mut cache, &ids[i..=i]).await.expect("decode step");
        let err = max_abs_diff(&got, want.logits_at(i));
        assert!(err < 1e-4, "logits after token {i} (decoded against the cache) differ by {err}");
    }
}

/// After `lm_forward::warm_up` (what the page calls after the trained model's first pass), the
/// model's passes take the fast forms on SwiftShader (the forward kernel's subgroup form and the row
/// softmax's), where they started with forms quick to compile: the same hidden states, probabilities
/// and logits as the CPU pass, within the same bounds.
#[wasm_bindgen_test]
async fn the_language_model_s_pass_after_the_kernels_warm_up_matches_the_cpu_pass() {
    let (ck, ctx, kernels, weights) = shipped_on_gpu().await;
    let mut rng = SplitMix64::new(89);
    let ids: Vec<u32> = (0..97).map(|_| (rng.next_u64() % u64::from(weights.geometry.vocab)) as u32).collect();
    let want = forward::forward(&ck, &ids).expect("CPU forward");
    let g = weights.geometry;
    let shape = AttentionShape { h_q: g.h_q, h_kv: g.h_kv, n_q: 97, n_kv: 97, d: g.head_dim };
    assert!(!kernels.rows.is_warm(&ctx, shape, RowOutput::Probabilities), "a quick form stands in at first");
    lm_forward::warm_up(&ctx, &kernels, &weights, 97);
    assert!(kernels.flash.is_warm(g.head_dim), "SwiftShader has subgroups: the form is built");
    assert!(kernels.rows.is_warm(&ctx, shape, RowOutput::Probabilities), "the row softmax's fast form is built");
    let request = LmRequest { last_logits: None, probabilities: true, hidden_states: true, head_outputs: false };
    let got = lm_forward::run(&ctx, &kernels, &weights, &ids, request).await.expect("GPU forward");
    for (l, (g, w)) in got.hidden.iter().zip(&want.hidden).enumerate() {
        let largest = w.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = max_abs_diff(g, w);
        assert!(err < 2e-4f32.max(1e-5 * largest), "hidden states after layer {l} differ by {err} (largest {largest})");
    }
    assert_eq!(got.probs.len(), ck.layers.len());
    for (l, (g, w)) in got.probs.iter().zip(&want.probs).enumerate() {
        let err = max_abs_diff(g, w);
        assert!(err < 1e-5, "layer {l} probabilities differ by {err}");
    }
    let err = max_abs_diff(&got.logits, &want.logits);
    assert!(err < 1e-4, "logits differ by {err}");
}

#[wasm_bindgen_test]
async fn every_family_fixture_matches_candle_on_browser_webgpu() {
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let reference = fixtures::reference();
    for fixtures::FixtureFiles { name, config, weights: safetensors, tokenizer } in fixtures::FIXTURES {
        let tokenizer = Tokenizer::from_json(tokenizer).expect("the fixture's tokenizer");
        for case in &reference.fixtures[name].tokenizer_cases {
            assert_eq!(tokenizer.encode(&case.text), case.ids, "{name}: {:?}", case.text);
        }
        // As a user's files, whole and in two shards: planned from the headers, streamed in chunks,
        // 16-bit values widened on the GPU.
        let [a, b] = fixtures::split_in_two(safetensors);
        for files in [vec![safetensors], vec![&a[..], &b[..]]] {
            let plan = lm_stream::plan(config, &files[..]).await.unwrap_or_else(|e| panic!("{name}: {e}"));
            let weights = LmWeights::stream(&ctx, &kernels, &plan, &files[..], &mut |_, _| {})
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            for input in &reference.fixtures[name].inputs {
                assert_eq!(tokenizer.encode(&input.text), input.ids, "{name}: {:?}", input.text);
                let request = LmRequest { last_logits: Some(1), ..Default::default() };
                let out = lm_forward::run(&ctx, &kernels, &weights, &input.ids, request).await.expect("GPU forward");
                let what = format!("{name} on WebGPU from {} files, {} tokens", files.len(), input.ids.len());
                fixtures::check(&what, &out.logits, input);
            }
        }
    }
}

#[wasm_bindgen_test]
async fn the_trained_model_streamed_as_files_matches_its_reference_on_browser_webgpu() {
    #[derive(serde::Deserialize)]
    struct Reference {
        inputs: Vec<Input>,
    }
    #[derive(serde::Deserialize)]
    struct Input {
        ids: Vec<u32>,
        last_logits: Vec<f32>,
    }
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let config = include_str!("../www/models/attention-lab-tiny/config.json");
    let files: &[&[u8]] = &[include_bytes!("../www/models/attention-lab-tiny/model.safetensors")];
    let plan = lm_stream::plan(config, files).await.expect("plan");
    let weights = LmWeights::stream(&ctx, &kernels, &plan, files, &mut |_, _| {}).await.expect("stream");
    let reference: Reference = serde_json::from_str(include_str!("data/tiny-model/reference.json")).expect("reference");
    for input in reference.inputs {
        let request = LmRequest { last_logits: Some(1), ..Default::default() };
        let out = lm_forward::run(&ctx, &kernels, &weights, &input.ids, request).await.expect("GPU forward");
        let err = max_abs_diff(&out.logits, &input.last_logits);
        assert!(err < 1e-4, "{} tokens: logits differ by {err}", input.ids.len());
    }
}

/// Qwen's NFC normalizer runs on the browser's own `String.prototype.normalize` in the page: a
/// decomposed é reads as the composed one, as the `tokenizers` library reads it.
#[wasm_bindgen_test]
fn an_nfc_normalizer_composes_text_in_the_browser() {
    let json = include_str!("../www/models/attention-lab-tiny/tokenizer.json");
    let plain = Tokenizer::from_json(json).expect("tokenizer");
    let mut file: serde_json::Value = serde_json::from_str(json).expect("json");
    file["normalizer"] = serde_json::json!({"type": "NFC"});
    let nfc = Tokenizer::from_json(&file.to_string()).expect("NFC tokenizer");
    let decomposed = "cafe\u{301} \u{212b}ngstr\u{f6}m";
    assert_eq!(nfc.encode(decomposed), plain.encode("caf\u{e9} \u{c5}ngstr\u{f6}m"));
    assert_ne!(nfc.encode(decomposed), plain.encode(decomposed));
    assert_eq!(nfc.encode("plain ascii"), plain.encode("plain ascii"));
}

/// Attention's backward (the page's form; the subgroup form's shader is built beside it on this CPU
/// adapter, so Tint compiles it too) and the forward and backward at heads wider than 256 (512 keeps
/// Q and dO in registers, 1,024 re-reads them and runs dK and dV as two launches), on WebGPU against
/// the twins: Tint, not naga, compiles them here, and it is stricter (uniform control flow, 8 KiB of
/// function variables).
#[wasm_bindgen_test]
async fn the_backward_and_wide_heads_match_the_twins_on_browser_webgpu() {
    use attention_lab::engine::Engine;
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let engine = Engine::WebGpu { kernels: Kernels::new(&ctx), ctx };
    let Engine::WebGpu { ctx, kernels } = &engine else { unreachable!() };
    let rel = |a: &[f32], b: &[f32]| {
        let largest = b.iter().fold(1e-2f32, |m, x| m.max(x.abs()));
        max_abs_diff(a, b) / largest
    };
    let narrow = AttentionShape { h_q: 4, h_kv: 2, n_q: 21, n_kv: 21, d: 64 };
    let cases = [
        (narrow, Mask::Causal),
        (narrow, Mask::Sliding { window_tokens: 5 }),
        (narrow, Mask::Chunked { chunk_tokens: 8 }),
        (AttentionShape { h_q: 2, h_kv: 1, n_q: 11, n_kv: 11, d: 512 }, Mask::Causal),
        (AttentionShape { h_q: 2, h_kv: 1, n_q: 9, n_kv: 9, d: 1024 }, Mask::Sliding { window_tokens: 4 }),
    ];
    for (i, (shape, mask)) in cases.into_iter().enumerate() {
        let seed = 300 + i as u64;
        let (q, k, v) = (
            random(shape.q_len(), seed, 1.0),
            random(shape.kv_len(), seed + 1, 1.0),
            random(shape.kv_len(), seed + 2, 1.0),
        );
        let d_o = random(shape.q_len(), seed + 3, 1.0);
        let p = AttentionProblem::new(&q, &k, &v, shape, mask, 1.0 / (shape.d as f32).sqrt());
        let want = Engine::Cpu { reason: "twin".into() }.attention_gradients(&p, &d_o).await.expect("twin");
        let got = engine.attention_gradients(&p, &d_o).await.expect("backward");
        for (name, g, w) in [
            ("dq", &got.grads.dq, &want.grads.dq),
            ("dk", &got.grads.dk, &want.grads.dk),
            ("dv", &got.grads.dv, &want.grads.dv),
        ] {
            let err = rel(g, w);
            assert!(err < 2e-4, "d = {}, {mask:?}: {name} differs by {err} of its largest", shape.d);
        }
    }
    for d in [512, 576] {
        let shape = AttentionShape { h_q: 2, h_kv: 1, n_q: 19, n_kv: 19, d };
        let (q, k, v) =
            (random(shape.q_len(), d as u64, 1.0), random(shape.kv_len(), 1, 1.0), random(shape.kv_len(), 2, 1.0));
        let p = AttentionProblem::new(&q, &k, &v, shape, Mask::Causal, 1.0 / (d as f32).sqrt());
        let got = kernels.forward(ctx, &p).await.expect("wide forward");
        let err = max_abs_diff(&got.o, &reference::flash_attention(&p).o);
        assert!(err < 1e-3, "d = {d}: output differs by {err}");
    }
}

/// The distance view's kernel on WebGPU (Tint's compiler): every mask kind, GQA, queries as the last
/// rows of the keys, against its twin from the twin's log-sum-exp; then the view's whole GPU path.
#[wasm_bindgen_test]
async fn distance_mass_matches_its_twin_on_browser_webgpu() {
    use attention_lab::cpu::distance_mass::distance_mass;
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 29, n_kv: 37, d: 23 };
    let masks = [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 5 }, Mask::Chunked { chunk_tokens: 6 }];
    for (i, mask) in masks.into_iter().enumerate() {
        let seed = 500 + 3 * i as u64;
        let (q, k) = (random(shape.q_len(), seed, 1.0), random(shape.kv_len(), seed + 1, 1.0));
        let p = AttentionProblem::scores(&q, &k, shape, mask, 0.2);
        let lse = reference::flash_attention(&AttentionProblem { v: &vec![0.0; shape.kv_len()], ..p }).lse;
        let want = distance_mass(&p, &lse);
        let got = kernels.distance_mass(&ctx).run(&ctx, &p, &lse).await.expect("distance_mass");
        let err = max_abs_diff(&got, &want);
        assert!(err < 2e-5, "{mask:?}: masses differ by {err}");
        // The view's path: the row softmax's log-sum-exp and the masses in one submission (d = 23 padded).
        let fused = kernels.masses_by_distance(&ctx, &p).await.expect("masses_by_distance");
        let err = max_abs_diff(&fused, &want);
        assert!(err < 2e-5, "{mask:?}: masses from the kernels' own lse differ by {err}");
    }
}

/// The paged decode kernel on WebGPU (Tint compiles it here, stricter than naga): 37 tokens written
/// into pages 2, 0, 3 of a 4-page pool, a page copied on write, each step against the paged twin.
#[wasm_bindgen_test]
async fn paged_decode_matches_its_twin_on_browser_webgpu() {
    use attention_lab::cpu::kv_pool::CpuKvPool;
    use attention_lab::cpu::paged_attention::{PagedProblem, paged_attention};
    use attention_lab::gpu::KvPool;
    use attention_lab::gpu::kernels::PagedStep;
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let (h_q, h_kv, d, steps) = (4u32, 2u32, 64u32, 37u32);
    let pool = KvPool::new(&ctx, h_kv, d, 4).expect("pool");
    let mut twin = CpuKvPool::new(h_kv, d, 4).expect("twin pool");
    let mut table = vec![2u32, 0, 3];
    for t in 0..steps {
        let (k, v) = (
            random((h_kv * d) as usize, 500 + u64::from(t), 1.0),
            random((h_kv * d) as usize, 900 + u64::from(t), 1.0),
        );
        let page = table[(t / 16) as usize];
        pool.write_token(&ctx, page, t % 16, &k, &v).expect("write");
        twin.write_token(page, t % 16, &k, &v).expect("twin write");
        if t == steps - 1 {
            pool.copy_page(&ctx, 3, 1).expect("copy");
            twin.copy_page(3, 1).expect("twin copy");
            table[2] = 1;
        }
        let q = random((h_q * d) as usize, 1300 + u64::from(t), 1.0);
        for mask in [Mask::Causal, Mask::Sliding { window_tokens: 8 }] {
            let step = PagedStep { pool: &pool, table: &table, n_kv: t + 1, q: &q, h_q, mask, scale: 0.125 };
            let got = kernels.paged_decode(&ctx, &step).await.expect("paged decode");
            let shape = AttentionShape { h_q, h_kv, n_q: 1, n_kv: t + 1, d };
            let problem = PagedProblem {
                q: &q,
                k_pool: twin.keys(),
                v_pool: twin.values(),
                table: &table,
                shape,
                mask,
                scale: 0.125,
            };
            let want = paged_attention(&problem).expect("twin");
            let err = max_abs_diff(&got.o, &want.o);
            assert!(err < 1e-3, "step {t} {mask:?}: output differs by {err}");
        }
    }
    // The unrolled form (the bench page's), the subgroup kernel on this CPU adapter, on the last step.
    kernels.paged.set_unrolled(true);
    let q = random((h_q * d) as usize, 77, 1.0);
    let step = PagedStep { pool: &pool, table: &table, n_kv: steps, q: &q, h_q, mask: Mask::Causal, scale: 0.125 };
    let got = kernels.paged_decode(&ctx, &step).await.expect("unrolled paged decode");
    let shape = AttentionShape { h_q, h_kv, n_q: 1, n_kv: steps, d };
    let problem = PagedProblem {
        q: &q,
        k_pool: twin.keys(),
        v_pool: twin.values(),
        table: &table,
        shape,
        mask: Mask::Causal,
        scale: 0.125,
    };
    let err = max_abs_diff(&got.o, &paged_attention(&problem).expect("twin").o);
    assert!(err < 1e-3, "unrolled: output differs by {err}");
}

/// `kept_attention` in Chromium (Tint compiles it, not naga): the trained model's evicting pass, each
/// query reading only its kept entries, against the CPU pass through the same evicting cache.
#[wasm_bindgen_test]
async fn the_evicting_pass_matches_the_cpu_twin_on_browser_webgpu() {
    let (ck, ctx, kernels, weights) = shipped_on_gpu().await;
    let mut rng = SplitMix64::new(84);
    let ids: Vec<u32> = (0..70).map(|_| (rng.next_u64() % u64::from(weights.geometry.vocab)) as u32).collect();
    for (policy, keep) in [(EvictPolicy::HeavyHitters, 8), (EvictPolicy::Sinks, 16), (EvictPolicy::Full, 70)] {
        let mut cpu = forward::CpuPass::new(&ck, &ids, ids.len()).expect("CPU pass").with_eviction(policy, keep);
        while cpu.step() {}
        let record = cpu.take_eviction().expect("a record");
        let want = cpu.finish();
        let request = LmRequest { last_logits: None, ..Default::default() };
        let run = lm_forward::run_with_eviction(&ctx, &kernels, &weights, &ids, request, policy, keep);
        let (got, got_record) = run.await.expect("GPU evicting pass");
        assert_eq!(got_record.kept, record.kept, "{policy:?}: the kept sets");
        for (l, (g, w)) in got.probs.iter().zip(&want.probs).enumerate() {
            let err = max_abs_diff(g, w);
            assert!(err < 1e-5, "{policy:?}: layer {l} probabilities differ by {err}");
        }
        let err = max_abs_diff(&got.logits, &want.logits);
        assert!(err < 1e-4, "{policy:?}: logits differ by {err}");
    }
}

/// The forward kernel's traced build (lesson 11's online softmax) in both forms the page can run
/// here: the loop form (the page's) and the unrolled subgroup form (the benchmark's), compiled by
/// Tint; each trace equals the CPU twin's and the traced O the shipped kernel's.
#[wasm_bindgen_test]
async fn the_traced_forward_matches_its_twin_on_browser_webgpu() {
    use attention_lab::cpu::flash_trace::flash_trace;
    use attention_lab::gpu::flash_attention::FlashForm;
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let cases = [
        (AttentionShape { h_q: 1, h_kv: 1, n_q: 64, n_kv: 64, d: 64 }, Mask::Causal),
        (AttentionShape { h_q: 4, h_kv: 2, n_q: 29, n_kv: 29, d: 16 }, Mask::Sliding { window_tokens: 6 }),
    ];
    for (unrolled, want_form) in [(false, FlashForm::Loop), (true, FlashForm::Subgroup)] {
        kernels.flash.set_unrolled(unrolled);
        for (i, (shape, mask)) in cases.into_iter().enumerate() {
            let seed = 500 + i as u64;
            let (q, k, v) = (
                random(shape.q_len(), seed, 1.5),
                random(shape.kv_len(), seed + 1, 1.5),
                random(shape.kv_len(), seed + 2, 1.0),
            );
            let p = AttentionProblem::new(&q, &k, &v, shape, mask, 1.0 / (shape.d as f32).sqrt());
            let (forward, trace, form) = kernels.forward_traced(&ctx, &p).await.expect("traced forward");
            assert_eq!(form, want_form);
            let twin = flash_trace(&p, trace.rows_per_tile, trace.keys_per_step);
            let diff = trace.max_difference(&twin).expect("the twin walks the same steps");
            assert!(diff <= 1e-4, "{shape:?} {mask:?} {form:?}: trace differs from the twin by {diff}");
            let shipped = kernels.forward(&ctx, &p).await.expect("forward");
            assert_eq!(forward, shipped, "{form:?}: the traced build computes what the shipped kernel does");
        }
    }
    kernels.flash.set_unrolled(false);
}

/// The packed quantised KV cache in Chromium (Tint compiles `kv_pack` and `packed_attention`, not
/// naga): tokens packed as the twin packs them (fp16, int8, int4-g32, fp8 E4M3 per head with its
/// scales pass), and a decode step's attention over an int4-g32 and an fp8 E5M2 cache (GQA, 300
/// keys: three slices, weighed together by `combine`) against its twin.
#[wasm_bindgen_test]
async fn the_packed_cache_kernels_match_their_twins_on_browser_webgpu() {
    use attention_lab::cpu::kv_pack::{PackRows, kv_pack, unpack_rows};
    use attention_lab::cpu::packed_attention::{PackedProblem, packed_attention};
    use attention_lab::gpu::launch::Dispatch;
    use attention_lab::gpu::packed_attention::{PackedBuffers, PackedLaunch};
    use attention_lab::model::kv_packed::PackedLayout;
    use attention_lab::model::kv_quant::{Fp8, KvScheme, ScaleScope};
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 1, n_kv: 300, d: 32 };
    let (kv_stride, int4) = (310u32, KvScheme::IntGroup { bits: 4, group: 32 });
    let rows = PackRows { heads: shape.h_kv, tokens: shape.n_kv, capacity: kv_stride, start: 0 };
    let e4m3 = KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Head };
    for (i, scheme) in [KvScheme::Fp16, KvScheme::Int8, int4, e4m3].into_iter().enumerate() {
        let layout = PackedLayout::of(scheme, shape.d).expect("a packed form");
        let x = random(shape.kv_len(), 40 + i as u64, 2.0);
        let mut want = vec![0u32; layout.cache_words(shape.h_kv, kv_stride) as usize];
        kv_pack(&x, &mut want, rows, layout).expect("twin");
        let (xb, packed) =
            (ctx.storage_from("x", &x).unwrap(), ctx.storage_from("packed", &vec![0u32; want.len()]).unwrap());
        let dispatches = kernels.kv_pack.prepare(&ctx, &xb, &packed, rows, layout).expect("kv_pack");
        Dispatch::submit_all(&ctx, &dispatches.iter().collect::<Vec<_>>());
        let got: Vec<u32> = ctx.read_back(&packed).await.expect("read back");
        let decode = |w: &[u32]| unpack_rows(&w[..want.len()], &layout, shape.h_kv, kv_stride, shape.n_kv);
        let (got, want) = (decode(&got), decode(&want));
        let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs() / (1e-30 + w.abs())).fold(0.0f32, f32::max);
        assert!(worst <= 1e-6, "kv_pack {}: values differ by {worst} of themselves", scheme.name());
    }
    let e5m2 = KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Tensor };
    for scheme in [int4, e5m2] {
        let layout = PackedLayout::of(scheme, shape.d).expect("a packed form");
        let pack = |seed| {
            let mut words = vec![0u32; layout.cache_words(shape.h_kv, kv_stride) as usize];
            kv_pack(&random(shape.kv_len(), seed, 1.0), &mut words, rows, layout).expect("twin");
            words
        };
        let (k, v, q) = (pack(50), pack(51), random(shape.q_len(), 52, 2.0));
        let (mask, scale) = (Mask::Sliding { window_tokens: 64 }, 0.18);
        let want = packed_attention(&PackedProblem {
            q: &q,
            k: &k,
            v: &v,
            shape,
            kv_stride,
            caches: layout.into(),
            mask,
            scale,
        })
        .expect("twin");
        let (qb, kb, vb) = (
            ctx.storage_from("q", &q).unwrap(),
            ctx.storage_from("k", &k).unwrap(),
            ctx.storage_from("v", &v).unwrap(),
        );
        let o = ctx.storage_output("o", want.len() as u64 * 4).unwrap();
        let launch = PackedLaunch { shape, kv_stride, caches: layout.into(), mask, scale };
        let dispatch =
            kernels.packed.prepare(&ctx, &PackedBuffers { q: &qb, k: &kb, v: &vb, o: &o }, launch).expect("prepare");
        Dispatch::submit_all(&ctx, &dispatch.iter().collect::<Vec<_>>());
        let got: Vec<f32> = ctx.read_back(&o).await.expect("read back");
        let err = max_abs_diff(&got[..want.len()], &want);
        assert!(err < 1e-4, "packed_attention {}: output differs by {err}", scheme.name());
    }
}

/// KIVI's cache of a pass in Chromium (Tint compiles `kv_pack`'s key blocks and `packed_attention`'s
/// KIVI form): K and V packed as the twin packs them, word for word (the trained model's text: 98
/// tokens, 2 KV heads of 32, int2, G = 32, R = 16, so K's partial block and the recent tokens are f32
/// rows), and a prefill's attention over them (8 query heads, window 64) against its twin.
#[wasm_bindgen_test]
async fn kivi_s_packed_cache_matches_its_twins_on_browser_webgpu() {
    use attention_lab::cpu::kv_pack::kivi_pack;
    use attention_lab::cpu::packed_attention::{PackedProblem, packed_attention};
    use attention_lab::gpu::launch::Dispatch;
    use attention_lab::gpu::packed_attention::{PackedBuffers, PackedLaunch};
    use attention_lab::model::kv_packed::{KiviCache, PackedCaches};
    use attention_lab::model::kv_quant::{KvScheme, KvTensor};
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let shape = AttentionShape { h_q: 8, h_kv: 2, n_q: 98, n_kv: 98, d: 32 };
    let kivi = KiviCache::of(KvScheme::Kivi { bits: 2, group: 32, recent: 16 }, 32, 98).expect("KIVI");
    let mut packed = Vec::new();
    for (tensor, seed) in [(KvTensor::K, 71), (KvTensor::V, 72)] {
        let x = random(shape.kv_len(), seed, 2.0);
        let want = kivi_pack(&x, shape.h_kv, &kivi, tensor).expect("twin");
        let (xb, cache) =
            (ctx.storage_from("x", &x).unwrap(), ctx.storage_from("cache", &vec![0u32; want.len()]).unwrap());
        let heads = (shape.h_kv, shape.n_kv);
        let dispatches = kernels.kv_pack.prepare_kivi(&ctx, &xb, &cache, heads, kivi, tensor).expect("kv_pack");
        Dispatch::submit_all(&ctx, &dispatches.iter().collect::<Vec<_>>());
        let got: Vec<u32> = ctx.read_back(&cache).await.expect("read back");
        let differing = got[..want.len()].iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(differing, 0, "kv_pack KIVI {tensor:?}: {differing} words differ from the twin's");
        packed.push(want);
    }
    let q = random(shape.q_len(), 73, 2.0);
    let (caches, mask, scale) = (PackedCaches::Kivi(kivi), Mask::Sliding { window_tokens: 64 }, 0.18);
    let problem = PackedProblem { q: &q, k: &packed[0], v: &packed[1], shape, kv_stride: 98, caches, mask, scale };
    let want = packed_attention(&problem).expect("twin");
    let (qb, kb, vb) = (
        ctx.storage_from("q", &q).unwrap(),
        ctx.storage_from("k", &packed[0]).unwrap(),
        ctx.storage_from("v", &packed[1]).unwrap(),
    );
    let o = ctx.storage_output("o", want.len() as u64 * 4).unwrap();
    let launch = PackedLaunch { shape, kv_stride: 98, caches, mask, scale };
    let dispatch =
        kernels.packed.prepare(&ctx, &PackedBuffers { q: &qb, k: &kb, v: &vb, o: &o }, launch).expect("prepare");
    Dispatch::submit_all(&ctx, &dispatch.iter().collect::<Vec<_>>());
    let got: Vec<f32> = ctx.read_back(&o).await.expect("read back");
    let err = max_abs_diff(&got[..want.len()], &want);
    assert!(err < 1e-4, "packed_attention over KIVI: output differs by {err}");
}

/// KIVI's decode cache on the trained model's KV heads (2 of 32, int2, G = 32, R = 16) grown as
/// Generate grows it: a prompt of 40, then a token a step to 52, so K's first block is quantised at
/// 48 from its ring rows. After every step `kv_pack`'s words equal the twin's (`kivi_append`).
#[wasm_bindgen_test]
async fn kivi_s_decode_cache_grows_as_its_twin_does_on_browser_webgpu() {
    use attention_lab::cpu::kv_pack::kivi_append;
    use attention_lab::gpu::launch::Dispatch;
    use attention_lab::model::kv_packed::KiviCache;
    use attention_lab::model::kv_quant::{KvScheme, KvTensor};
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let (h_kv, d) = (2u32, 32u32);
    let mut kivi = KiviCache::decoding(KvScheme::Kivi { bits: 2, group: 32, recent: 16 }, d, 64).expect("KIVI");
    let words = [KvTensor::K, KvTensor::V].map(|t| kivi.words(t, h_kv) as usize);
    let mut twins = words.map(|w| vec![0u32; w]);
    let caches = words.map(|w| ctx.storage_from("cache", &vec![0u32; w]).unwrap());
    let mut len = 0;
    for (i, step) in std::iter::once(40u32).chain(std::iter::repeat_n(1, 12)).enumerate() {
        kivi = kivi.holding(len + step);
        for (tensor, (twin, cache)) in [KvTensor::K, KvTensor::V].into_iter().zip(twins.iter_mut().zip(&caches)) {
            let new = random((h_kv * step * d) as usize, 80 + i as u64, 2.0);
            kivi_append(twin, &new, h_kv, &kivi, tensor).expect("twin");
            let xb = ctx.storage_from("x", &new).unwrap();
            let dispatches =
                kernels.kv_pack.prepare_kivi(&ctx, &xb, cache, (h_kv, step), kivi, tensor).expect("kv_pack");
            Dispatch::submit_all(&ctx, &dispatches.iter().collect::<Vec<_>>());
        }
        len += step;
        for (tensor, (cache, twin)) in [KvTensor::K, KvTensor::V].iter().zip(caches.iter().zip(&twins)) {
            let got: Vec<u32> = ctx.read_back(cache).await.expect("read back");
            let differing = got.iter().zip(twin).filter(|(a, b)| a != b).count();
            assert_eq!(differing, 0, "kv_pack KIVI {tensor:?} at {len} tokens: {differing} words differ");
        }
    }
}

/// Heads past 256 in the kernels that attend over a cache, on SwiftShader's 4-lane subgroups (Tint
/// compiles them): MLA's absorbed 576 through the decode kernel (a contiguous cache), the paged
/// decode (pages 1, 0 of a pool), `packed_attention` over an int8 cache and `kept_attention` over a
/// kept-index list, each against its CPU twin with GQA (4 query heads on 2 KV heads).
#[wasm_bindgen_test]
async fn the_cache_kernels_take_heads_576_wide_on_browser_webgpu() {
    use attention_lab::cpu::kept_attention::{KeptShape, kept_attention};
    use attention_lab::cpu::kv_pack::{PackRows, kv_pack};
    use attention_lab::cpu::packed_attention::{PackedProblem, packed_attention};
    use attention_lab::gpu::kept_attention::KeptBuffers;
    use attention_lab::gpu::kernels::PagedStep;
    use attention_lab::gpu::launch::Dispatch;
    use attention_lab::gpu::packed_attention::{PackedBuffers, PackedLaunch};
    use attention_lab::gpu::{KvCache, KvPool};
    use attention_lab::model::kv_evict::kept_list;
    use attention_lab::model::kv_packed::PackedLayout;
    use attention_lab::model::kv_quant::KvScheme;
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let (h_q, h_kv, n, d) = (4u32, 2u32, 21u32, 576u32);
    let (mask, scale) = (Mask::Sliding { window_tokens: 13 }, 1.0 / (d as f32).sqrt());
    // K and V heads first, [h_kv, n, d]; the last query of each head.
    let shape = AttentionShape { h_q, h_kv, n_q: 1, n_kv: n, d };
    let (k, v, q) = (random(shape.kv_len(), 61, 1.0), random(shape.kv_len(), 62, 1.0), random(shape.q_len(), 63, 2.0));
    let want = reference::flash_attention(&AttentionProblem::new(&q, &k, &v, shape, mask, scale)).o;
    let token = |x: &[f32], t: u32| -> Vec<f32> {
        (0..h_kv).flat_map(|h| x[((h * n + t) * d) as usize..][..d as usize].to_vec()).collect()
    };

    let mut cache = KvCache::new(&ctx, h_kv, d, 32).expect("cache");
    let pool = KvPool::new(&ctx, h_kv, d, 2).expect("pool");
    let table = [1u32, 0];
    for t in 0..n {
        cache.append(&ctx, &token(&k, t), &token(&v, t)).expect("append");
        pool.write_token(&ctx, table[(t / 16) as usize], t % 16, &token(&k, t), &token(&v, t)).expect("write");
    }
    let got = kernels.decode(&ctx, &cache, &q, h_q, mask, scale).await.expect("decode");
    assert!(max_abs_diff(&got.o, &want) < 1e-4, "decode: {}", max_abs_diff(&got.o, &want));
    let step = PagedStep { pool: &pool, table: &table, n_kv: n, q: &q, h_q, mask, scale };
    let got = kernels.paged_decode(&ctx, &step).await.expect("paged decode");
    assert!(max_abs_diff(&got.o, &want) < 1e-4, "paged: {}", max_abs_diff(&got.o, &want));

    let layout = PackedLayout::of(KvScheme::Int8, d).expect("a packed form");
    let rows = PackRows { heads: h_kv, tokens: n, capacity: n, start: 0 };
    let pack = |x: &[f32]| {
        let mut words = vec![0u32; (h_kv * n * layout.words()) as usize];
        kv_pack(x, &mut words, rows, layout).expect("twin");
        words
    };
    let (kp, vp) = (pack(&k), pack(&v));
    let problem = PackedProblem { q: &q, k: &kp, v: &vp, shape, kv_stride: n, caches: layout.into(), mask, scale };
    let want_packed = packed_attention(&problem).expect("twin");
    let buffer = |name, x: &[u32]| ctx.storage_from(name, x).unwrap();
    let (qb, kb, vb) = (ctx.storage_from("q", &q).unwrap(), buffer("k", &kp), buffer("v", &vp));
    let o = ctx.storage_output("o", want_packed.len() as u64 * 4).unwrap();
    let launch = PackedLaunch { shape, kv_stride: n, caches: layout.into(), mask, scale };
    let dispatch = kernels.packed.prepare(&ctx, &PackedBuffers { q: &qb, k: &kb, v: &vb, o: &o }, launch).unwrap();
    Dispatch::submit_all(&ctx, &dispatch.iter().collect::<Vec<_>>());
    let got: Vec<f32> = ctx.read_back(&o).await.expect("read back");
    let err = max_abs_diff(&got[..want_packed.len()], &want_packed);
    assert!(err < 1e-4, "packed_attention: {err}");

    // Every third key kept, and the query's own.
    let kept = vec![(0..n).filter(|p| p % 3 == 0 || *p == n - 1).collect::<Vec<u32>>()];
    let kept_shape = KeptShape { h_q, group: h_q / h_kv, n_q: 1, n_kv: n, kv_stride: n, d, scale };
    let (want_o, want_p) = kept_attention(&q, &k, &v, &kept, kept_shape);
    let (kb, vb) = (ctx.storage_from("k", &k).unwrap(), ctx.storage_from("v", &v).unwrap());
    let list = buffer("kept", &kept_list(&kept, n).unwrap());
    let o = ctx.storage_output("o", want_o.len() as u64 * 4).unwrap();
    let p = ctx.storage_output("p", want_p.len() as u64 * 4).unwrap();
    let buffers = KeptBuffers { q: &qb, k: &kb, v: &vb, kept: &list, o: &o, probs: &p };
    let dispatch = kernels.kept.prepare(&ctx, &buffers, kept_shape).expect("kept");
    Dispatch::submit_all(&ctx, &[&dispatch]);
    let (got_o, got_p): (Vec<f32>, Vec<f32>) =
        (ctx.read_back(&o).await.expect("o"), ctx.read_back(&p).await.expect("p"));
    assert!(max_abs_diff(&got_o[..want_o.len()], &want_o) < 1e-4, "kept_attention outputs");
    assert!(max_abs_diff(&got_p[..want_p.len()], &want_p) < 1e-5, "kept_attention probabilities");
}

/// `kv_quant` in Chromium (Tint compiles it): every scheme the memory view compares rounds K and V
/// (heads first, as the GPU pass holds them) to the values its CPU twin gives, within 1e-6 of each
/// value (a fused multiply-add), over values spread across many binades.
#[wasm_bindgen_test]
async fn kv_quant_rounds_every_scheme_as_its_twin_on_browser_webgpu() {
    use attention_lab::cpu::kv_quant::kv_quant;
    use attention_lab::gpu::launch::Dispatch;
    use attention_lab::model::kv_quant::{KvLayout, KvScheme, KvTensor};
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    let (heads, tokens, d) = (2u32, 37u32, 32u32);
    let layout = KvLayout { heads, tokens, d, head_stride: tokens * d, token_stride: d };
    let mut rng = SplitMix64::new(19);
    let x: Vec<f32> = (0..heads * tokens * d)
        .map(|i| if i % 97 == 0 { 0.0 } else { rng.next_signed_unit() * 2f32.powi((i % 23) as i32 - 12) })
        .collect();
    for scheme in KvScheme::compared(16, 5) {
        for tensor in [KvTensor::K, KvTensor::V] {
            let Some(pass) = scheme.pass(tensor, tokens) else { continue };
            let mut want = x.clone();
            kv_quant(&mut want, layout, &pass);
            let buffer = ctx.storage_from("kv", &x).unwrap();
            let dispatch = kernels.kv_quant.prepare(&ctx, &buffer, layout, &pass).unwrap().expect("a launch");
            Dispatch::submit_all(&ctx, &[&dispatch]);
            let got: Vec<f32> = ctx.read_back(&buffer).await.expect("read back");
            assert!(want != x, "{} {tensor:?} rounds nothing", scheme.name());
            let worst = got[..want.len()]
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs() / w.abs().max(1e-30))
                .fold(0.0f32, f32::max);
            assert!(worst <= 1e-6, "{} {tensor:?}: values differ by {worst} of themselves", scheme.name());
        }
    }
}

/// The backward kernel against finite differences of the forward kernel, on SwiftShader: the slope of
/// Σ dO ∘ O along a random direction of (Q, K, V), two forward launches at ±1e-2, against ⟨dQ, U_Q⟩ +
/// ⟨dK, U_K⟩ + ⟨dV, U_V⟩ (lavapipe's twin of this test: tests/gpu_backward.rs).
#[wasm_bindgen_test]
async fn the_backward_is_the_slope_of_the_forward_on_browser_webgpu() {
    let ctx = GpuContext::new().await.expect("a WebGPU adapter");
    let kernels = Kernels::new(&ctx);
    for (n, mask) in [Mask::Causal, Mask::Sliding { window_tokens: 5 }].into_iter().enumerate() {
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 23, n_kv: 23, d: 64 };
        let seed = 70 + 10 * n as u64;
        let [q, k, v, d_o, uq, uk, uv] = [0, 1, 2, 3, 4, 5, 6].map(|i| {
            let len = if i == 1 || i == 2 || i == 5 || i == 6 { shape.kv_len() } else { shape.q_len() };
            random(len, seed + i, 1.0)
        });
        let scale = 0.125;
        let p = AttentionProblem::new(&q, &k, &v, shape, mask, scale);
        let grads = kernels.backward(&ctx).gradients(&ctx, &kernels.flash, &p, &d_o).await.expect("backward").grads;
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>();
        let slope = dot(&grads.dq, &uq) + dot(&grads.dk, &uk) + dot(&grads.dv, &uv);
        let mut losses = [0.0; 2];
        for (at, sign) in [1.0f32, -1.0].into_iter().enumerate() {
            let moved = |x: &[f32], u: &[f32]| x.iter().zip(u).map(|(a, b)| a + sign * 1e-2 * b).collect::<Vec<f32>>();
            let (q, k, v) = (moved(&q, &uq), moved(&k, &uk), moved(&v, &uv));
            let p = AttentionProblem::new(&q, &k, &v, shape, mask, scale);
            losses[at] = dot(&kernels.forward(&ctx, &p).await.expect("forward").o, &d_o);
        }
        let numeric = (losses[0] - losses[1]) / 2e-2;
        let error = (numeric - slope).abs() / slope.abs().max(1e-3);
        assert!(error < 1e-3, "{mask:?}: backward {slope} vs the forward's slope {numeric} ({error:e})");
    }
}
