//! The language model's kernels and its whole forward pass on a real wgpu device (lavapipe in CI),
//! against their CPU twins in `lm::forward` (f32 storage, f64 sums).
//!
//! Tolerances, from measured differences on lavapipe (the GPU sums in f32, in another order):
//! - each kernel on random inputs: within `1e-5 + 1e-5 |want|` (matmul over up to 512 inputs:
//!   measured at most 3.4e-6 absolute; the others are elementwise, a copy, or one row's sum);
//! - `kept_attention` (each query over the keys its evicting cache kept) within `1e-5 + 1e-5 |want|`;
//! - `packed_attention` (attention over a packed quantised cache) within `1e-5 + 1e-5 |want|`;
//!   `kv_pack` (tokens packed into it): the values its words decode to within `1e-6 |want|`;
//! - decoding against a packed cache, 80 tokens: logits within 1e-4 of decoding against an f32 cache
//!   holding the same rounded values (the same numbers, summed in another order), and the
//!   tolerances of the pass over a quantised cache below against the CPU pass;
//! - `kv_quant` (K or V rounded to a quantised cache's values) within `1e-6 |want|`: measured bit
//!   for bit, every scheme, both layouts;
//! - the whole pass over a quantised cache, 100 tokens: logits within 5e-2 of the CPU pass over the
//!   same scheme, and within a third of what the scheme moves them (measured at most 2.6e-2, int8, and
//!   2.5e-3, fp16: a K value the two passes compute 1e-6 apart lies at a rounding boundary and rounds
//!   the other way; the schemes move logits by 1.7e-2 (fp16) to 17.9 (int2-g32));
//! - the whole pass on the shipped checkpoint, 1 to 128 tokens: hidden states after each layer within
//!   2e-4 absolute or 1e-5 of the layer's largest value, whichever is wider (the last layer's residual
//!   holds values up to 1,888; measured at most 1.4e-3 on values up to 807: 1.8e-6 of the largest),
//!   logits within 1e-4 (measured at most 1.6e-5) and probabilities within 1e-5 (measured at most
//!   1.4e-6), with the most likely next token the same at every position.
//!
//! - a gradient step (the shipped model's layer-1 W_Q, W_K, W_V moved to `W - eta dW`, dW from the CPU
//!   backward `lm::backward`), rerun on the GPU against the CPU pass with the same stepped weights:
//!   the tolerances above, and the counted tokens' probabilities within 1e-5 relative (measured at most
//!   4.1e-6; logits 2.6e-5, attention 1.5e-6), the loss within 1e-5 (measured 1.8e-7). The step moves
//!   the loss by 1.4 and 0.094, so the test fails if the GPU ran the old weights. dW from layer 1's
//!   input as the GPU computed it within 1e-4 of the largest (relative) of dW from the CPU's (measured
//!   1.1e-6).
//!
//! Under `CI=true` a missing adapter fails; otherwise the tests print `SKIP: no adapter` and pass.

use attention_lab::attention::AttentionShape;
use attention_lab::attention::inputs::SplitMix64;
use attention_lab::attention::rope::RopeTable;
use attention_lab::cpu::kept_attention::{KeptShape, kept_attention};
use attention_lab::cpu::kv_pack::{PackRows, kivi_append, kivi_pack, kv_pack, unpack_rows};
use attention_lab::cpu::kv_quant::kv_quant;
use attention_lab::cpu::packed_attention::{PackedProblem, packed_attention};
use attention_lab::gpu::embed_gather::EmbedBuffers;
use attention_lab::gpu::kept_attention::KeptBuffers;
use attention_lab::gpu::launch::Dispatch;
use attention_lab::gpu::lm_forward::{self, LmRequest, LmWeights};
use attention_lab::gpu::matmul::{DirectBlock, MatmulBuffers, MatmulForm, MatmulLaunch};
use attention_lab::gpu::packed_attention::{PackedBuffers, PackedLaunch, PackedPlan};
use attention_lab::gpu::rms_norm::{NormBuffers, NormConstants};
use attention_lab::gpu::rope::{self, Heads, SplitBuffers};
use attention_lab::gpu::widen::Half;
use attention_lab::gpu::{GpuContext, Kernels};
use attention_lab::lm::backward::{LossTarget, counted, layer_gradients, layer_gradients_from};
use attention_lab::lm::checkpoint::Checkpoint;
use attention_lab::lm::forward::{self, Gate};
use attention_lab::lm::grad_step::{read_targets, stepped};
use attention_lab::lm::safetensors::{TensorDType, to_f32};
use attention_lab::lm::weight_plan::WeightFormat;
use attention_lab::model::Mask;
use attention_lab::model::config::Positional;
use attention_lab::model::kv_evict::{EvictPolicy, kept_list};
use attention_lab::model::kv_packed::{KiviCache, PackedCaches, PackedLayout};
use attention_lab::model::kv_quant::{Fp8, KvLayout, KvScheme, KvTensor, ScaleScope};

mod common;
use common::gpu::{close, device, random};
#[path = "common/shipped.rs"]
mod shipped;
use shipped::{shipped, token_ids};

/// The largest `|got - want| / (abs + rel |want|)`: at most 1 passes. Also checks lengths and finiteness.
fn worst(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) -> f32 {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut worst = 0.0f32;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(g.is_finite(), "{what}[{i}]: got {g}, want {w}");
        let ratio = (g - w).abs() / (abs + rel * w.abs());
        assert!(ratio <= 1.0, "{what}[{i}]: got {g}, want {w}");
        worst = worst.max(ratio);
    }
    worst
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn run(ctx: &GpuContext, dispatch: &Dispatch, out: &wgpu::Buffer, len: usize) -> Vec<f32> {
    Dispatch::submit_all(ctx, &[dispatch]);
    let mut values: Vec<f32> = pollster::block_on(ctx.read_back(out)).expect("read back");
    values.truncate(len);
    values
}

const KERNEL_ABS: f32 = 1e-5;
const KERNEL_REL: f32 = 1e-5;

/// `values` as a weight buffer in `format`, and the values it holds: as they are (f32), or cut to
/// bf16 (the high half of each f32) and laid out as a bf16 safetensors file stores them, read back
/// by the checkpoint reader's own `to_f32`.
fn weights(ctx: &GpuContext, values: &[f32], format: WeightFormat) -> (Vec<f32>, wgpu::Buffer) {
    match format {
        WeightFormat::F32 => (values.to_vec(), ctx.storage_from("w", values).unwrap()),
        WeightFormat::Bf16 => {
            let bytes: Vec<u8> = values.iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).collect();
            (to_f32(TensorDType::Bf16, &bytes), ctx.storage_from("w", &bytes).unwrap())
        }
    }
}

#[test]
fn matmul_matches_its_twin_in_both_forms() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(7);
    // (rows, inputs, outputs): the model's shapes with rows that fill no tile, and odd outputs; rows
    // of whole vec4s that end inside a block (36, 4: the subgroup form's vec4 stores).
    let shapes = [
        (37, 192, 256),
        (83, 192, 64),
        (5, 192, 1024),
        (130, 512, 192),
        (27, 192, 4096),
        (1, 64, 3),
        (70, 4, 65),
        (9, 64, 36),
        (3, 8, 4),
    ];
    // The subgroup form with its default block (vec4 stores), two vec4s a lane, and f32 stores.
    let blocks =
        [None, Some(DirectBlock { rows: 2, cols: 8, lanes: 0 }), Some(DirectBlock { rows: 3, cols: 3, lanes: 0 })];
    let forms = [(MatmulForm::Tiled, None), (MatmulForm::Direct, None)];
    let configs = forms.into_iter().chain(blocks.map(|b| (MatmulForm::Subgroup, b)));
    // Every form reads W as f32, and as a bf16 checkpoint's matrix kept packed.
    for ((form, block), w_format) in configs.flat_map(|c| [(c, WeightFormat::F32), (c, WeightFormat::Bf16)]) {
        kernels.matmul.set_form(form);
        kernels.matmul.set_block(block.unwrap_or_default());
        for (n, &(rows, inputs, outputs)) in shapes.iter().enumerate() {
            // Every other case reads from row 3 of X, has a bias and adds to Y.
            let (x_row0, with_bias, accumulate) = if n % 2 == 1 { (3, true, true) } else { (0, false, false) };
            let x = random((x_row0 + rows) * inputs, 1.0, &mut rng);
            let (w, wb) = weights(&ctx, &random(outputs * inputs, 0.2, &mut rng), w_format);
            let bias = random(outputs, 1.0, &mut rng);
            let y0 = random(rows * outputs, 1.0, &mut rng);
            let bias_used = with_bias.then_some(bias.as_slice());
            let mut want = forward::matmul(&x[x_row0 * inputs..], &w, bias_used, inputs);
            if accumulate {
                want.iter_mut().zip(&y0).for_each(|(a, b)| *a += b);
            }
            let xb = ctx.storage_from("x", &x).unwrap();
            let bias_buffer = ctx.storage_from("bias", &bias).unwrap();
            let y = ctx.storage_from("y", &y0).unwrap();
            let buffers = MatmulBuffers { x: &xb, w: &wb, w_format, bias: with_bias.then_some(&bias_buffer), y: &y };
            let launch = MatmulLaunch {
                x_row0: x_row0 as u32,
                accumulate,
                ..MatmulLaunch::new(rows as u32, inputs as u32, outputs as u32)
            };
            let dispatch = kernels.matmul.prepare(&ctx, &buffers, launch).expect("prepare");
            let got = run(&ctx, &dispatch, &y, want.len());
            // The form that ran: a GPU without subgroups runs Direct when Subgroup is asked for.
            let what =
                format!("{:?} {:?} {w_format:?} matmul {launch:?}", kernels.matmul.form(), kernels.matmul.block());
            worst(&what, &got, &want, KERNEL_ABS, KERNEL_REL);
            println!("{what}: max |diff| {:e}", max_abs_diff(&got, &want));
        }
    }
    // Sizes the buffers cannot hold are refused before anything runs.
    let small = ctx.storage_output("small", 16).unwrap();
    let buffers = MatmulBuffers { x: &small, w: &small, w_format: WeightFormat::F32, bias: None, y: &small };
    assert!(kernels.matmul.prepare(&ctx, &buffers, MatmulLaunch::new(2, 4, 4)).is_err());
    assert!(kernels.matmul.prepare(&ctx, &buffers, MatmulLaunch::new(1, 3, 1)).is_err());
    // W [2, 4] takes 32 bytes as f32, 16 as bf16.
    assert!(kernels.matmul.prepare(&ctx, &buffers, MatmulLaunch::new(1, 4, 2)).is_err());
    let packed = MatmulBuffers { w_format: WeightFormat::Bf16, ..buffers };
    assert!(kernels.matmul.prepare(&ctx, &packed, MatmulLaunch::new(1, 4, 2)).is_ok());
    close(ctx);
}

#[test]
fn norm_gather_rope_and_swiglu_match_their_twins() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(11);
    // (rows, width, weight offset, add to what out holds): Llama's norm, Gemma's `1 + w` written
    // over NaN (a write must not read out) and added to the residual stream.
    for (rows, width, offset, accumulate) in [(37, 192, 0.0, false), (1, 64, 1.0, false), (130, 512, 1.0, true)] {
        let x = random(rows * width, 3.0, &mut rng);
        let weight = random(width, 1.0, &mut rng);
        let before = match accumulate {
            true => random(rows * width, 2.0, &mut rng),
            false => vec![f32::NAN; rows * width],
        };
        let mut want = forward::rms_norm(&x, &weight, 1e-6, offset);
        if accumulate {
            want.iter_mut().zip(&before).for_each(|(w, b)| *w += b);
        }
        let (xb, wb) = (ctx.storage_from("x", &x).unwrap(), ctx.storage_from("w", &weight).unwrap());
        let out = ctx.storage_from("out", &before).unwrap();
        let buffers = NormBuffers { x: &xb, weight: &wb, out: &out, accumulate };
        let constants = NormConstants { eps: 1e-6, offset };
        let dispatch = kernels.rms_norm.prepare(&ctx, &buffers, rows as u32, width as u32, constants).unwrap();
        worst(
            &format!("rms_norm {rows} x {width}, offset {offset}, accumulate {accumulate}"),
            &run(&ctx, &dispatch, &out, want.len()),
            &want,
            KERNEL_ABS,
            KERNEL_REL,
        );
    }

    let (vocab, width) = (100, 192);
    // Scaled by 1, or by Gemma's sqrt(d) (one f32 product each, correctly rounded on both sides).
    for (format, scale) in [(WeightFormat::F32, 1.0), (WeightFormat::Bf16, 1.0), (WeightFormat::Bf16, 640f32.sqrt())] {
        let (embed, eb) = weights(&ctx, &random(vocab * width, 1.0, &mut rng), format);
        let ids: Vec<u32> = (0..27).map(|i| (i * 37 % vocab) as u32).collect();
        let want = forward::embed_gather(&embed, &ids, width, scale);
        let idb = ctx.storage_from("ids", &ids).unwrap();
        let out = ctx.storage_output("out", (want.len() * 4) as u64).unwrap();
        let buffers = EmbedBuffers { ids: &idb, embed: &eb, format, out: &out };
        let dispatch = kernels.embed_gather.prepare(&ctx, &buffers, ids.len() as u32, width as u32, scale).unwrap();
        assert_eq!(run(&ctx, &dispatch, &out, want.len()), want, "embed_gather of {format:?} times {scale} is exact");
    }

    for (rows, ffn, act) in [(27, 512, Gate::Silu), (3, 4, Gate::Silu), (27, 512, Gate::GeluTanh)] {
        // Gate values down to -40: silu's tail, where exp(-g) is huge; GELU's cube overflows tanh's
        // argument far beyond where tanh is 1.
        let gate_up = random(rows * 2 * ffn, 40.0, &mut rng);
        let (gate, up): (Vec<f32>, Vec<f32>) = {
            let rows_of = |half: usize| gate_up.chunks(ffn).skip(half).step_by(2).flatten().copied().collect();
            (rows_of(0), rows_of(1))
        };
        let want = forward::swiglu(&gate, &up, act);
        let gub = ctx.storage_from("gate_up", &gate_up).unwrap();
        let out = ctx.storage_output("out", (want.len() * 4) as u64).unwrap();
        let dispatch = kernels.swiglu.prepare(&ctx, &gub, &out, rows as u32, ffn as u32, act).unwrap();
        worst(
            &format!("swiglu {rows} x {ffn} {act:?}"),
            &run(&ctx, &dispatch, &out, want.len()),
            &want,
            KERNEL_ABS,
            KERNEL_REL,
        );
    }

    for (tokens, h_q, h_kv, d) in [(27, 8, 2, 32), (83, 3, 1, 64), (1, 2, 2, 8)] {
        check_rope(&ctx, &kernels, Heads { tokens, h_q, h_kv, d }, &mut rng);
    }
    close(ctx);
}

#[test]
fn qk_norm_matches_rms_norm_of_each_query_and_key_head() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(13);
    // (tokens, h_q, h_kv, d, weight offset): Qwen3's 128-wide heads, GQA and MHA, one token; Gemma 3's
    // 256-wide heads with `1 + w`.
    for (tokens, h_q, h_kv, d, offset) in
        [(9, 4, 2, 32, 0.0), (1, 2, 2, 128, 0.0), (70, 8, 1, 16, 0.0), (5, 4, 1, 256, 1.0)]
    {
        let width = (h_q + 2 * h_kv) * d;
        let qkv = random(tokens * width, 3.0, &mut rng);
        let weight = random(2 * d, 1.0, &mut rng);
        // Each query head by the first weight, each key head by the second, values untouched.
        let mut want = qkv.clone();
        for (c, head) in want.chunks_exact_mut(d).enumerate() {
            let slot = c % (h_q + 2 * h_kv);
            if slot < h_q + h_kv {
                let w = if slot < h_q { &weight[..d] } else { &weight[d..] };
                head.copy_from_slice(&forward::rms_norm(head, w, 1e-6, offset));
            }
        }
        let (buffer, wb) = (ctx.storage_from("qkv", &qkv).unwrap(), ctx.storage_from("w", &weight).unwrap());
        let heads = Heads { tokens: tokens as u32, h_q: h_q as u32, h_kv: h_kv as u32, d: d as u32 };
        let dispatch = kernels.qk_norm.prepare(&ctx, &buffer, &wb, heads, NormConstants { eps: 1e-6, offset }).unwrap();
        let got = run(&ctx, &dispatch, &buffer, want.len());
        worst(&format!("qk_norm {heads:?}"), &got, &want, KERNEL_ABS, KERNEL_REL);
    }
}

/// Values spread over many binades (so fp8's scaled values reach its subnormals), a few zeros.
fn spread(len: usize, rng: &mut SplitMix64) -> Vec<f32> {
    (0..len).map(|i| if i % 97 == 0 { 0.0 } else { rng.next_signed_unit() * 2f32.powi((i % 23) as i32 - 12) }).collect()
}

#[test]
fn kv_quant_rounds_every_scheme_as_its_twin_does() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(17);
    let per_head = KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Head };
    let schemes = KvScheme::compared(16, 5).into_iter().chain([per_head, KvScheme::IntGroup { bits: 2, group: 12 }]);
    // Heads first ([h_kv, tokens, d], as the GPU pass holds K and V) and tokens first (the CPU pass).
    let (heads, tokens, d) = (3u32, 37u32, 32u32);
    let layouts = [
        KvLayout { heads, tokens, d, head_stride: tokens * d, token_stride: d },
        KvLayout { heads, tokens, d, head_stride: d, token_stride: heads * d },
    ];
    let x = spread((heads * tokens * d) as usize, &mut rng);
    for scheme in schemes {
        for layout in layouts {
            for tensor in [KvTensor::K, KvTensor::V] {
                let Some(pass) = scheme.pass(tensor, tokens) else { continue };
                let mut want = x.clone();
                kv_quant(&mut want, layout, &pass);
                let buffer = ctx.storage_from("kv", &x).unwrap();
                let dispatch = kernels.kv_quant.prepare(&ctx, &buffer, layout, &pass).unwrap().unwrap();
                let got = run(&ctx, &dispatch, &buffer, want.len());
                let what = format!("{} {tensor:?} {layout:?}", scheme.name());
                assert!(want != x, "{what} rounds nothing");
                // Measured on lavapipe: every value bit for bit; 1e-6 allows a fused multiply-add.
                worst(&what, &got, &want, 1e-30, 1e-6);
            }
        }
    }
    // A long text's one scale per tensor (or per head): 2 heads x 2,000 tokens x 32 = 128,000 values
    // share one box (64,000 per head). One invocation per box left most of them unrounded here.
    let (heads, tokens) = (2u32, 2000u32);
    let layout = KvLayout { heads, tokens, d, head_stride: tokens * d, token_stride: d };
    let x = spread((heads * tokens * d) as usize, &mut rng);
    for scope in [ScaleScope::Tensor, ScaleScope::Head] {
        let scheme = KvScheme::Fp8 { format: Fp8::E4m3, scope };
        let pass = scheme.pass(KvTensor::V, tokens).unwrap();
        let mut want = x.clone();
        kv_quant(&mut want, layout, &pass);
        let buffer = ctx.storage_from("kv", &x).unwrap();
        let dispatch = kernels.kv_quant.prepare(&ctx, &buffer, layout, &pass).unwrap().unwrap();
        let got = run(&ctx, &dispatch, &buffer, want.len());
        worst(&format!("{} over {tokens} tokens", scheme.name()), &got, &want, 1e-30, 1e-6);
    }
    close(ctx);
}

#[test]
fn widen_unpacks_f16_and_bf16_exactly() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(17);
    for (dtype, half) in [(TensorDType::F16, Half::F16), (TensorDType::Bf16, Half::Bf16)] {
        // 1001 finite values (odd: the last word's high half is padding), subnormals and both zeros
        // among them, written from float 7 on.
        let top = if dtype == TensorDType::F16 { 0x7c00 } else { 0x7f80 }; // exponent all ones: inf / NaN
        let mut values: Vec<u16> = (0..997)
            .map(|_| {
                loop {
                    let bits = rng.next_u64() as u16;
                    if bits & top != top {
                        break bits;
                    }
                }
            })
            .collect();
        values.extend([0x0000, 0x8000, 0x0001, 0x83ff]);
        let mut bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let want = to_f32(dtype, &bytes);
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        let src = ctx.storage_from("src", &bytes).unwrap();
        let dst = ctx.storage_from("dst", &vec![-1.0f32; 7 + 1001 + 3]).unwrap();
        let dispatch = kernels.widen.prepare(&ctx, &src, &dst, (1001, 7), half).unwrap();
        let got = run(&ctx, &dispatch, &dst, 7 + 1001 + 3);
        assert_eq!(&got[7..1008], &want[..], "{dtype:?}");
        assert!(got[..7].iter().chain(&got[1008..]).all(|&v| v == -1.0), "{dtype:?}: wrote outside its range");
        assert!(kernels.widen.prepare(&ctx, &src, &dst, (1001, 11), half).is_err(), "past the end of dst");
    }
}

/// `split_heads` against the twin's rotation and a transpose, then `merge_heads` back.
fn check_rope(ctx: &GpuContext, kernels: &Kernels, heads: Heads, rng: &mut SplitMix64) {
    let Heads { tokens, h_q, h_kv, d } = heads;
    let (t, d_us) = (tokens as usize, d as usize);
    let (q_width, kv_width) = ((h_q * d) as usize, (h_kv * d) as usize);
    let qkv = random(t * (q_width + 2 * kv_width), 2.0, rng);
    let table = RopeTable::new(t, d_us, Positional::rope(10_000.0));
    let columns = |from: usize, width: usize| -> Vec<f32> {
        qkv.chunks(q_width + 2 * kv_width).flat_map(|row| row[from..from + width].to_vec()).collect()
    };
    let (mut q, mut k, v) = (columns(0, q_width), columns(q_width, kv_width), columns(q_width + kv_width, kv_width));
    forward::rope(&mut q, q_width, d_us, &table);
    forward::rope(&mut k, kv_width, d_us, &table);
    let qkv_b = ctx.storage_from("qkv", &qkv).unwrap();
    let angles = ctx.storage_from("angles", &rope::angles(&table)).unwrap();
    let out = |floats: usize| ctx.storage_output("out", (floats * 4) as u64).unwrap();
    let (qb, kb, vb) = (out(t * q_width), out(t * kv_width), out(t * kv_width));
    let buffers = SplitBuffers { qkv: &qkv_b, angles: &angles, q: &qb, k: &kb, v: &vb };
    Dispatch::submit_all(ctx, &[&kernels.rope.prepare_split(ctx, &buffers, heads, &table).unwrap()]);
    for (name, buffer, want, n_heads) in [("Q", &qb, &q, h_q), ("K", &kb, &k, h_kv), ("V", &vb, &v, h_kv)] {
        let got: Vec<f32> = pollster::block_on(ctx.read_back(buffer)).unwrap();
        let want = heads_first(want, t, n_heads as usize, d_us);
        worst(&format!("rope {name} {heads:?}"), &got[..want.len()], &want, KERNEL_ABS, KERNEL_REL);
    }
    let merged = out(t * q_width);
    let dispatch = kernels.rope.prepare_merge(ctx, &qb, &merged, heads).unwrap();
    assert_eq!(
        run(ctx, &dispatch, &merged, q.len()),
        pollster::block_on(ctx.read_back(&qb)).map(|o| tokens_first(&o[..q.len()], t, h_q as usize, d_us)).unwrap()
    );
}

/// `[tokens, heads * d]` to `[heads, tokens, d]`.
fn heads_first(x: &[f32], tokens: usize, heads: usize, d: usize) -> Vec<f32> {
    (0..heads).flat_map(|h| (0..tokens).flat_map(move |t| x[(t * heads + h) * d..][..d].to_vec())).collect()
}

/// `[heads, tokens, d]` to `[tokens, heads * d]`.
fn tokens_first(x: &[f32], tokens: usize, heads: usize, d: usize) -> Vec<f32> {
    (0..tokens).flat_map(|t| (0..heads).flat_map(move |h| x[(h * tokens + t) * d..][..d].to_vec())).collect()
}

const HIDDEN_ABS: f32 = 2e-4;
/// f32 keeps about 7 digits: a residual stream whose largest value is in the hundreds is summed to
/// within a few 1e-4 by any order, so the bound grows with the layer's largest value.
const HIDDEN_OF_LARGEST: f32 = 1e-5;
const LOGIT_ABS: f32 = 1e-4;
const PROB_ABS: f32 = 1e-5;
/// Logits decoded through a packed cache against the f32 cache of the same rounded values: the same
/// numbers summed in another order (packed_attention slices the keys and adds each slice's lanes; the
/// f32 decode walks them in tiles). Its attention matches its twin within 2e-7 on the trained model's
/// shapes; over 4 layers that order moved the logits by 1.1e-4 at most on lavapipe (int8; fp16 8.3e-5,
/// int4 and int2 under 2e-5) with the model shipped since issue 36, whose last layer amplifies more
/// than the first model's did (4.3e-5 at most, and int2-g32's 2.4e-4: presumably at int2's coarse
/// steps a later layer's K that differs by float error rounds to the neighbouring code, not
/// confirmed), so int2-g32 keeps the wider bound.
fn packed_logit_abs(scheme: KvScheme) -> f32 {
    if scheme == (KvScheme::IntGroup { bits: 2, group: 32 }) { 5e-4 } else { 3e-4 }
}
/// Logits of the pass over a quantised cache, GPU against CPU (see the test).
const QUANT_LOGIT_ABS: f32 = 5e-2;

#[test]
fn the_whole_pass_matches_the_cpu_forward_pass_layer_by_layer() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    // 83 tokens reach past the 64-token window of layers 0-2; 128 is the trained context.
    for (n, tokens) in [1, 27, 83, 128].into_iter().enumerate() {
        let ids = token_ids(tokens, weights.geometry.vocab, 40 + n as u64);
        let want = forward::forward(&ck, &ids).expect("CPU forward");
        let request = LmRequest { last_logits: None, probabilities: true, hidden_states: true, head_outputs: true };
        let got = pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &ids, request)).expect("GPU forward");
        for (l, (g, w)) in got.hidden.iter().zip(&want.hidden).enumerate() {
            let scale = w.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let bound = HIDDEN_ABS.max(HIDDEN_OF_LARGEST * scale);
            worst(&format!("{tokens} tokens: hidden states after layer {l}"), g, w, bound, 0.0);
            println!("{tokens} tokens, layer {l}: hidden max |diff| {:e} (largest value {scale})", max_abs_diff(g, w));
        }
        assert_eq!(got.hidden.len(), ck.layers.len());
        for (l, (g, w)) in got.attended.iter().zip(&want.attended).enumerate() {
            worst(&format!("{tokens} tokens: layer {l} head outputs"), g, w, HIDDEN_ABS, 0.0);
            println!("{tokens} tokens, layer {l}: head outputs max |diff| {:e}", max_abs_diff(g, w));
        }
        assert_eq!(got.attended.len(), ck.layers.len());
        for (l, (g, w)) in got.probs.iter().zip(&want.probs).enumerate() {
            worst(&format!("{tokens} tokens: layer {l} probabilities"), g, w, PROB_ABS, 0.0);
            println!("{tokens} tokens, layer {l}: probabilities max |diff| {:e}", max_abs_diff(g, w));
        }
        assert_eq!(got.probs.len(), ck.layers.len());
        worst(&format!("{tokens} tokens: logits"), &got.logits, &want.logits, LOGIT_ABS, 0.0);
        println!("{tokens} tokens: logits max |diff| {:e}", max_abs_diff(&got.logits, &want.logits));
        let vocab = weights.geometry.vocab as usize;
        for (i, (g, w)) in got.logits.chunks(vocab).zip(want.logits.chunks(vocab)).enumerate() {
            assert_eq!(argmax(g), argmax(w), "{tokens} tokens: the most likely token after position {i}");
        }
    }
    close(ctx);
}

/// The CPU pass over `ids` reading a cache stored as `scheme`, every position's logits.
fn cpu_pass(ck: &Checkpoint, ids: &[u32], scheme: KvScheme) -> forward::ModelPass {
    let mut pass = forward::CpuPass::new(ck, ids, ids.len()).expect("CPU pass").with_kv_scheme(scheme);
    while pass.step() {}
    pass.finish()
}

#[test]
fn the_pass_over_a_quantised_cache_matches_the_cpu_pass_over_the_same_scheme() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    // 100 tokens: past the sliding layers' 64, three whole KIVI groups of 32 before its 16 recent.
    let ids = token_ids(100, weights.geometry.vocab, 11);
    let request = LmRequest { last_logits: None, ..Default::default() };
    let gpu = |scheme| {
        let run = lm_forward::run_with_kv_scheme(&ctx, &kernels, &weights, &ids, request, scheme);
        pollster::block_on(run).expect("GPU forward").logits
    };
    let full = forward::forward(&ck, &ids).expect("CPU forward").logits;
    // Fp32 rounds nothing: both passes give what they give without a scheme, bit for bit.
    assert_eq!(cpu_pass(&ck, &ids, KvScheme::Fp32).logits, full);
    let gpu_full = gpu(KvScheme::Fp32);
    assert_eq!(gpu_full, pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &ids, request)).unwrap().logits);
    let per_head = KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Head };
    for scheme in KvScheme::compared(32, 16).into_iter().chain([per_head]) {
        let (got, want) = (gpu(scheme), cpu_pass(&ck, &ids, scheme).logits);
        let moved = max_abs_diff(&want, &full);
        println!(
            "{}: GPU - CPU max |diff| {:e}; the scheme moved logits by {moved:e}",
            scheme.name(),
            max_abs_diff(&got, &want)
        );
        // A pass that rounds nothing is held to the plain pass's bound.
        let bound = if scheme == KvScheme::Fp32 { LOGIT_ABS } else { QUANT_LOGIT_ABS };
        worst(&format!("{} logits", scheme.name()), &got, &want, bound, 0.0);
        // Both passes round: they agree far better than either agrees with the full-precision pass.
        if scheme != KvScheme::Fp32 {
            assert!(max_abs_diff(&got, &want) <= moved / 3.0, "{}: GPU and CPU differ by what it moves", scheme.name());
        }
    }
    close(ctx);
}

#[test]
fn the_last_logits_alone_and_bad_requests() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    let ids = token_ids(40, weights.geometry.vocab, 3);
    let want = forward::forward(&ck, &ids).expect("CPU forward");
    let request = LmRequest { last_logits: Some(2), ..Default::default() };
    let got = pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &ids, request)).expect("GPU forward");
    let vocab = weights.geometry.vocab as usize;
    assert_eq!((got.logit_rows, got.logits.len()), (2, 2 * vocab));
    assert!(got.probs.is_empty() && got.hidden.is_empty());
    worst("the last two positions' logits", &got.logits, &want.logits[38 * vocab..], LOGIT_ABS, 0.0);
    for bad in [vec![], vec![1, 4096]] {
        let err = pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &bad, LmRequest::default()));
        assert!(err.is_err(), "{bad:?}");
    }
    // Every layer's probabilities of 8192 tokens (4 x 8 x 8192^2 x 4 B = 8 GiB) exceed the job budget:
    // refused before any buffer is made.
    let long = token_ids(8192, weights.geometry.vocab, 5);
    let request = LmRequest { probabilities: true, ..Default::default() };
    let err = pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &long, request)).unwrap_err();
    assert!(err.to_string().contains("8192 tokens"), "{err}");
    close(ctx);
}

fn argmax(x: &[f32]) -> usize {
    (0..x.len()).max_by(|&a, &b| x[a].total_cmp(&x[b])).expect("not empty")
}

#[test]
fn decoding_against_the_kv_cache_gives_the_whole_pass_logits() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    // A 60-token prompt prefilled at once, then 20 tokens one at a time: past the 64-token window of
    // layers 0-2, so the cached rows the window leaves behind must stop counting.
    let ids = token_ids(80, weights.geometry.vocab, 9);
    let want = forward::forward(&ck, &ids).expect("CPU forward");
    let vocab = weights.geometry.vocab as usize;
    let mut cache = lm_forward::LmCache::new(&ctx, &weights, 128).expect("cache");
    let mut step =
        |tokens: &[u32]| pollster::block_on(lm_forward::decode(&ctx, &kernels, &weights, &mut cache, tokens));
    let mut worst_diff = 0.0f32;
    let prefill = step(&ids[..60]).expect("prefill");
    worst("logits after the prefill", &prefill, want.logits_at(59), LOGIT_ABS, 0.0);
    for i in 60..80 {
        let got = step(&ids[i..=i]).expect("decode step");
        assert_eq!(got.len(), vocab);
        worst(&format!("logits after token {i}"), &got, want.logits_at(i), LOGIT_ABS, 0.0);
        assert_eq!(argmax(&got), argmax(want.logits_at(i)), "the most likely token after position {i}");
        worst_diff = worst_diff.max(max_abs_diff(&got, want.logits_at(i)));
    }
    println!("decode with the KV cache: logits max |diff| {worst_diff:e}");
    assert_eq!(cache.len(), 80);
    // Past the cache's capacity: refused, and the cache is left as it was.
    let more = token_ids(49, weights.geometry.vocab, 10);
    let err = pollster::block_on(lm_forward::decode(&ctx, &kernels, &weights, &mut cache, &more)).unwrap_err();
    assert!(err.to_string().contains("do not fit a KV cache of 128"), "{err}");
    assert_eq!(cache.len(), 80);
    close(ctx);
}

#[test]
fn kept_attention_reads_each_querys_kept_keys_as_its_twin_does() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(23);
    // GQA (4 query heads on 2 KV heads), a width off the vec4 grid, a cache with spare rows, lists
    // of every length from 1 to 70 (past one workgroup's 64 invocations).
    // Heads past 256 too: MLA's absorbed 576 and the widest, 1,024.
    let cases =
        [(4u32, 2u32, 40u32, 40u32, 40u32, 32u32), (2, 1, 9, 70, 80, 6), (4, 4, 7, 23, 24, 576), (1, 1, 5, 9, 9, 1024)];
    for (h_q, group, n_q, n_kv, kv_stride, d) in cases {
        let shape = KeptShape { h_q, group, n_q, n_kv, kv_stride, d, scale: 0.3 };
        let kv_len = (h_q / group * kv_stride * d) as usize;
        let (q, k, v) = (
            random((h_q * n_q * d) as usize, 2.0, &mut rng),
            random(kv_len, 2.0, &mut rng),
            random(kv_len, 1.0, &mut rng),
        );
        let kept: Vec<Vec<u32>> = (0..n_q)
            .map(|i| (0..n_kv).filter(|&p| i > 0 && (p * 7 + i * 3) % (i % 5 + 1) == 0 || p == i % n_kv).collect())
            .collect();
        let (want_o, want_p) = kept_attention(&q, &k, &v, &kept, shape);
        let list = kept_list(&kept, n_kv).unwrap();
        let buffer = |x: &[f32]| ctx.storage_from("x", x).unwrap();
        let (qb, kb, vb, lb) = (buffer(&q), buffer(&k), buffer(&v), ctx.storage_from("kept", &list).unwrap());
        let o = ctx.storage_output("o", want_o.len() as u64 * 4).unwrap();
        let p = ctx.storage_output("p", want_p.len() as u64 * 4).unwrap();
        let buffers = KeptBuffers { q: &qb, k: &kb, v: &vb, kept: &lb, o: &o, probs: &p };
        let dispatch = kernels.kept.prepare(&ctx, &buffers, shape).unwrap();
        let got_p = run(&ctx, &dispatch, &p, want_p.len());
        let got_o: Vec<f32> = pollster::block_on(ctx.read_back(&o)).unwrap()[..want_o.len()].to_vec();
        worst("kept_attention probabilities", &got_p, &want_p, KERNEL_ABS, KERNEL_REL);
        worst("kept_attention outputs", &got_o, &want_o, KERNEL_ABS, KERNEL_REL);
        // Not kept: exactly 0.
        for (r, row) in got_p.chunks(n_kv as usize).enumerate() {
            let set = &kept[r % n_q as usize];
            assert!(row.iter().enumerate().all(|(j, &x)| x == 0.0 || set.contains(&(j as u32))), "row {r}");
        }
        println!(
            "kept_attention d = {d}: max |diff| p {:e}, o {:e}",
            max_abs_diff(&got_p, &want_p),
            max_abs_diff(&got_o, &want_o)
        );
    }
    close(ctx);
}

#[test]
fn the_evicting_pass_matches_the_cpu_pass_through_the_same_cache() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    // 100 tokens: past the sliding layers' own window of 64, which the cache also honours.
    let ids = token_ids(100, weights.geometry.vocab, 12);
    for (policy, keep) in [(EvictPolicy::HeavyHitters, 8), (EvictPolicy::SnapKv, 16), (EvictPolicy::Full, 100)] {
        let mut cpu = forward::CpuPass::new(&ck, &ids, ids.len()).expect("CPU pass").with_eviction(policy, keep);
        while cpu.step() {}
        let record = cpu.take_eviction().expect("a record");
        let want = cpu.finish();
        let request = LmRequest { last_logits: None, ..Default::default() };
        let run = lm_forward::run_with_eviction(&ctx, &kernels, &weights, &ids, request, policy, keep);
        let (got, got_record) = pollster::block_on(run).expect("GPU evicting pass");
        assert_eq!(got_record.kept, record.kept, "{policy:?}: the kept sets");
        for (l, (g, w)) in got.probs.iter().zip(&want.probs).enumerate() {
            worst(&format!("{policy:?}: layer {l} probabilities"), g, w, PROB_ABS, 0.0);
        }
        worst(&format!("{policy:?}: logits"), &got.logits, &want.logits, LOGIT_ABS, 0.0);
        println!("{policy:?} K = {keep}: logits max |diff| {:e}", max_abs_diff(&got.logits, &want.logits));
    }
    close(ctx);
}

#[test]
fn decoding_against_a_quantised_cache_gives_the_cpu_pass_over_the_same_scheme() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    let ids = token_ids(80, weights.geometry.vocab, 13);
    let full = forward::forward(&ck, &ids).expect("CPU forward");
    let g = weights.geometry;
    let schemes = [
        KvScheme::Fp16,
        KvScheme::Int8,
        KvScheme::IntGroup { bits: 4, group: 32 },
        KvScheme::IntGroup { bits: 2, group: 32 },
        KvScheme::IntGroup { bits: 2, group: 16 },
    ];
    for scheme in schemes {
        // The CPU twin rounds every token's K and V of the whole text at once: each token's groups lie
        // within it, so that is what rounding each token as it joins the cache gives.
        let want = cpu_pass(&ck, &ids, scheme);
        // The cache Generate uses, packed in the scheme's bits, and the f32 cache of rounded values.
        let mut packed = lm_forward::LmCache::stored_as(&ctx, &weights, 128, scheme).expect("a packed cache");
        let mut rounded = lm_forward::LmCache::rounded_f32(&ctx, &weights, 128, scheme).expect("a rounded cache");
        assert!(packed.is_packed() && !rounded.is_packed());
        // Its buffers hold the memory view's bytes per token (int4-g32: 320 B, model::kv_packed).
        assert_eq!(packed.bytes_per_token(), scheme.bytes_per_token(g.layers, g.h_kv, g.head_dim), "{}", scheme.name());
        let step = |cache: &mut lm_forward::LmCache, tokens: &[u32]| {
            pollster::block_on(lm_forward::decode(&ctx, &kernels, &weights, cache, tokens)).expect("decode step")
        };
        let (mut diff, mut moved, mut storage) = (0.0f32, 0.0f32, 0.0f32);
        for (from, to) in std::iter::once((0, 60)).chain((60..80).map(|i| (i, i + 1))) {
            let (got, yardstick) = (step(&mut packed, &ids[from..to]), step(&mut rounded, &ids[from..to]));
            let what = format!("{} logits after token {}", scheme.name(), to - 1);
            // The same numbers, dequantised as read or rounded and held in f32: float error only.
            worst(&format!("{what}, packed against rounded"), &got, &yardstick, packed_logit_abs(scheme), 0.0);
            worst(&what, &got, want.logits_at(to - 1), QUANT_LOGIT_ABS, 0.0);
            storage = storage.max(max_abs_diff(&got, &yardstick));
            diff = diff.max(max_abs_diff(&got, want.logits_at(to - 1)));
            moved = moved.max(max_abs_diff(want.logits_at(to - 1), full.logits_at(to - 1)));
        }
        println!(
            "decode over a packed {} cache ({} B a token): packed - rounded f32 max |diff| {storage:e}; GPU - CPU \
             {diff:e}; the scheme moved logits by {moved:e}",
            scheme.name(),
            packed.bytes_per_token()
        );
        assert!(diff <= moved / 3.0, "{}: GPU and CPU differ by what the scheme moves", scheme.name());
    }
    // The f32 cache is not packed: 4 layers x 2 heads x (K, V) x 32 x 4 B = 2048 B a token.
    let plain = lm_forward::LmCache::stored_as(&ctx, &weights, 16, KvScheme::Fp32).expect("cache");
    assert_eq!((plain.is_packed(), plain.bytes_per_token()), (false, 2048));
    // KIVI's cache quantises a token once, as it leaves the recent window; an f32 cache of rounded
    // values cannot hold it (a token is rounded only later), so that one is refused by name.
    let kivi = KvScheme::Kivi { bits: 2, group: 32, recent: 16 };
    let err = lm_forward::LmCache::rounded_f32(&ctx, &weights, 16, kivi).err().expect("refused").to_string();
    assert!(err.contains("shares scales across tokens"), "{err}");
    close(ctx);
}

/// Logits decoded through KIVI's cache, GPU against the CPU pass reading it as decoding does. The
/// kernels agree to f32's rounding (int2, G = 32: 1.8e-5 over 70 steps on lavapipe; G = 8: 2.3e-4),
/// but a K or V that differs by float error can round to the neighbouring code: at int4 a logit moved
/// by 2.8e-3 (as KIVI int4's whole-text loss moved in the 4th decimal).
const KIVI_DECODE_LOGIT_ABS: f32 = 1e-2;

#[test]
fn decoding_against_kivi_s_cache_gives_the_cpu_pass_that_reads_it_as_decoding_does() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    let ids = token_ids(100, weights.geometry.vocab, 17);
    let g = weights.geometry;
    // A prompt of 30, then one token a step to 100: K's blocks are quantised at 48, 80 (G = 32, R =
    // 16) and V's tokens from 31 on, so the steps cross every case; G = 8 crosses many more.
    for scheme in [
        KvScheme::Kivi { bits: 2, group: 32, recent: 16 },
        KvScheme::Kivi { bits: 4, group: 32, recent: 16 },
        KvScheme::Kivi { bits: 2, group: 8, recent: 4 },
    ] {
        let prompt = 30;
        let mut pass =
            forward::CpuPass::new(&ck, &ids, ids.len()).expect("CPU pass").with_kv_scheme_decoded(scheme, prompt);
        while pass.step() {}
        let want = pass.finish();
        // Its whole-text pass quantises every row's keys as the last token's cache does: not decoding.
        let whole = cpu_pass(&ck, &ids, scheme);
        let mut cache = lm_forward::LmCache::stored_as(&ctx, &weights, 128, scheme).expect("KIVI's cache");
        assert!(cache.is_packed());
        // The cache's packed bytes per token are the scheme's (its f32 rings are its fixed bytes:
        // 4 layers x 2 heads x (47 + 16) rows x 32 x 4 B = 64,512 at G = 32, R = 16).
        assert_eq!(cache.bytes_per_token(), scheme.bytes_per_token(g.layers, g.h_kv, g.head_dim), "{}", scheme.name());
        let (mut diff, mut apart) = (0.0f32, 0.0f32);
        for (from, to) in std::iter::once((0, prompt)).chain((prompt..ids.len()).map(|i| (i, i + 1))) {
            let got = pollster::block_on(lm_forward::decode(&ctx, &kernels, &weights, &mut cache, &ids[from..to]))
                .expect("decode step");
            worst(
                &format!("{} logits after token {}", scheme.name(), to - 1),
                &got,
                want.logits_at(to - 1),
                KIVI_DECODE_LOGIT_ABS,
                0.0,
            );
            diff = diff.max(max_abs_diff(&got, want.logits_at(to - 1)));
            apart = apart.max(max_abs_diff(want.logits_at(to - 1), whole.logits_at(to - 1)));
        }
        println!(
            "decode over {}'s cache ({} B a token, {} B fixed): GPU - CPU max |diff| {diff:e}; the decoded CPU \
             pass and the whole-text one differ by {apart:e}",
            scheme.name(),
            cache.bytes_per_token(),
            cache.fixed_bytes()
        );
        assert!(apart > 10.0 * diff.max(1e-6), "{}: decoding reads another cache than the whole text", scheme.name());
    }
    close(ctx);
}

#[test]
fn kv_pack_packs_tokens_as_its_twin_does() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(29);
    // 3 heads x 37 tokens into rows 5..42 of 50; d = 40 is off the word grid for int2 and leaves a
    // partial group of 12.
    let (heads, tokens, capacity, start) = (3u32, 37u32, 50u32, 5u32);
    let cases = [
        (KvScheme::Fp16, 32),
        (KvScheme::Int8, 32),
        (KvScheme::IntGroup { bits: 4, group: 32 }, 32),
        (KvScheme::IntGroup { bits: 2, group: 32 }, 32),
        (KvScheme::IntGroup { bits: 2, group: 16 }, 40),
        (KvScheme::IntGroup { bits: 4, group: 12 }, 40),
    ];
    for (scheme, d) in cases {
        let layout = PackedLayout::of(scheme, d).unwrap();
        let x = spread((heads * tokens * d) as usize, &mut rng);
        pack_as_the_twin_does(&ctx, &kernels, &[&x], PackRows { heads, tokens, capacity, start }, layout);
    }
    // fp8 keeps one scale a tensor (or a KV head) in the cache's tail: the pack that starts the cache
    // (rows 0..20) sets it, the next one (rows 20..40, values twice as large: some saturate) keeps it.
    for scheme in [
        KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor },
        KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Head },
    ] {
        let layout = PackedLayout::of(scheme, 40).unwrap();
        let first = spread((heads * 20 * 40) as usize, &mut rng);
        let later: Vec<f32> = spread((heads * 20 * 40) as usize, &mut rng).iter().map(|v| 2.0 * v).collect();
        pack_as_the_twin_does(
            &ctx,
            &kernels,
            &[&first, &later],
            PackRows { heads, tokens: 20, capacity, start: 0 },
            layout,
        );
    }
    close(ctx);
}

/// Packs each of `xs` in turn (the n-th at row `rows.start + n * rows.tokens`) with `kv_pack` and with
/// its twin, and checks what the caches decode to.
fn pack_as_the_twin_does(ctx: &GpuContext, kernels: &Kernels, xs: &[&[f32]], rows: PackRows, layout: PackedLayout) {
    let mut want = vec![0u32; layout.cache_words(rows.heads, rows.capacity) as usize];
    let packed = ctx.storage_from("packed", &vec![0u32; want.len()]).unwrap();
    for (n, x) in xs.iter().enumerate() {
        let rows = PackRows { start: rows.start + n as u32 * rows.tokens, ..rows };
        kv_pack(x, &mut want, rows, layout).unwrap();
        let xb = ctx.storage_from("x", x).unwrap();
        let dispatches = kernels.kv_pack.prepare(ctx, &xb, &packed, rows, layout).unwrap();
        Dispatch::submit_all(ctx, &dispatches.iter().collect::<Vec<_>>());
    }
    let got: Vec<u32> = pollster::block_on(ctx.read_back(&packed)).unwrap()[..want.len()].to_vec();
    let decode = |w: &[u32]| unpack_rows(w, &layout, rows.heads, rows.capacity, rows.capacity);
    let differing = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    let what = format!("kv_pack {:?} d = {}", layout.packing, layout.d);
    println!("{what}: {differing} of {} words differ from the twin's", want.len());
    // Measured on lavapipe: every word bit for bit. The values they decode to within 1e-6 |want|
    // (a fused multiply-add in a scale); a code rounded the other way moves a value a whole step.
    worst(&what, &decode(&got), &decode(&want), 1e-30, 1e-6);
}

#[test]
fn packed_attention_reads_the_packed_cache_as_its_twin_does() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(31);
    // A decode step (one query) over 70 keys, a prefill's 9 queries under a window, chunks with GQA,
    // an off-grid width with a partial group, a head of 256 (4 channels an invocation); a decode step
    // over 1,000 keys cut into 8 slices (`combine` weighs them), a prefill whose tiles of 8 rows span
    // 4 queries under a window, its keys in 3 slices, the trained model's prefill (8 heads on 2,
    // int2-g32, window 64), and chunks of 150 in 2 slices, where the tile of
    // queries 144..152 has rows that see nothing of the first slice; caches with spare rows.
    let cases = [
        (
            AttentionShape { h_q: 4, h_kv: 2, n_q: 1, n_kv: 70, d: 32 },
            Mask::Causal,
            KvScheme::IntGroup { bits: 4, group: 32 },
        ),
        (
            AttentionShape { h_q: 2, h_kv: 1, n_q: 9, n_kv: 45, d: 32 },
            Mask::Sliding { window_tokens: 7 },
            KvScheme::Int8,
        ),
        (
            AttentionShape { h_q: 4, h_kv: 2, n_q: 33, n_kv: 33, d: 64 },
            Mask::Chunked { chunk_tokens: 8 },
            KvScheme::Fp16,
        ),
        (
            AttentionShape { h_q: 2, h_kv: 2, n_q: 3, n_kv: 130, d: 40 },
            Mask::Causal,
            KvScheme::IntGroup { bits: 2, group: 16 },
        ),
        (
            AttentionShape { h_q: 2, h_kv: 1, n_q: 1, n_kv: 20, d: 256 },
            Mask::Full,
            KvScheme::IntGroup { bits: 2, group: 32 },
        ),
        (
            AttentionShape { h_q: 8, h_kv: 2, n_q: 1, n_kv: 1000, d: 64 },
            Mask::Causal,
            KvScheme::IntGroup { bits: 4, group: 16 },
        ),
        (
            AttentionShape { h_q: 2, h_kv: 1, n_q: 40, n_kv: 300, d: 64 },
            Mask::Sliding { window_tokens: 100 },
            KvScheme::Int8,
        ),
        (
            AttentionShape { h_q: 8, h_kv: 2, n_q: 60, n_kv: 62, d: 32 },
            Mask::Sliding { window_tokens: 64 },
            KvScheme::IntGroup { bits: 2, group: 32 },
        ),
        (
            AttentionShape { h_q: 1, h_kv: 1, n_q: 600, n_kv: 600, d: 128 },
            Mask::Chunked { chunk_tokens: 150 },
            KvScheme::Fp16,
        ),
        // Several slices and a padded last tile: 9 rows a KV head in tiles of 8.
        (
            AttentionShape { h_q: 6, h_kv: 2, n_q: 3, n_kv: 500, d: 32 },
            Mask::Causal,
            KvScheme::IntGroup { bits: 4, group: 32 },
        ),
        // Heads past 256 (issue 32 part 5): Gemma 4's global 512 and MLA's absorbed 576, decoding
        // and a short prefill.
        (
            AttentionShape { h_q: 4, h_kv: 2, n_q: 1, n_kv: 90, d: 512 },
            Mask::Causal,
            KvScheme::IntGroup { bits: 4, group: 32 },
        ),
        (
            AttentionShape { h_q: 2, h_kv: 1, n_q: 5, n_kv: 40, d: 576 },
            Mask::Sliding { window_tokens: 9 },
            KvScheme::Int8,
        ),
        (AttentionShape { h_q: 1, h_kv: 1, n_q: 1, n_kv: 33, d: 1024 }, Mask::Full, KvScheme::Fp16),
        // fp8, its scale in the cache's tail: per KV head (E4M3) decoding, per tensor (E5M2) over
        // several slices of a prefill.
        (
            AttentionShape { h_q: 4, h_kv: 2, n_q: 1, n_kv: 70, d: 32 },
            Mask::Causal,
            KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Head },
        ),
        (
            AttentionShape { h_q: 6, h_kv: 2, n_q: 3, n_kv: 500, d: 64 },
            Mask::Sliding { window_tokens: 100 },
            KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Tensor },
        ),
        (
            AttentionShape { h_q: 8, h_kv: 2, n_q: 98, n_kv: 98, d: 32 },
            Mask::Sliding { window_tokens: 64 },
            KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor },
        ),
        (
            AttentionShape { h_q: 8, h_kv: 2, n_q: 98, n_kv: 98, d: 32 },
            Mask::Causal,
            KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor },
        ),
    ];
    for (shape, mask, scheme) in cases {
        let kv_stride = shape.n_kv + 6;
        let layout = PackedLayout::of(scheme, shape.d).unwrap();
        let rows = PackRows { heads: shape.h_kv, tokens: shape.n_kv, capacity: kv_stride, start: 0 };
        let cache_words = layout.cache_words(shape.h_kv, kv_stride) as usize;
        let pack = |amplitude, rng: &mut SplitMix64| {
            let mut words = vec![0u32; cache_words];
            kv_pack(&random(shape.kv_len(), amplitude, rng), &mut words, rows, layout).unwrap();
            words
        };
        let (k, v) = (pack(2.0, &mut rng), pack(1.0, &mut rng));
        let q = random(shape.q_len(), 2.0, &mut rng);
        let scale = 1.0 / (shape.d as f32).sqrt();
        let problem = PackedProblem { q: &q, k: &k, v: &v, shape, kv_stride, caches: layout.into(), mask, scale };
        let launch = PackedLaunch { shape, kv_stride, caches: layout.into(), mask, scale };
        attend_as_the_twin_does(&ctx, &kernels, &problem, launch, &format!("{} {mask:?}", scheme.name()));
    }
    close(ctx);
}

/// Runs `launch` over `problem`'s Q, K and V with `packed_attention` and checks O against the twin.
fn attend_as_the_twin_does(
    ctx: &GpuContext,
    kernels: &Kernels,
    problem: &PackedProblem,
    launch: PackedLaunch,
    what: &str,
) {
    let want = packed_attention(problem).unwrap();
    let (qb, kb, vb) = (
        ctx.storage_from("q", problem.q).unwrap(),
        ctx.storage_from("k", problem.k).unwrap(),
        ctx.storage_from("v", problem.v).unwrap(),
    );
    let o = ctx.storage_output("o", want.len() as u64 * 4).unwrap();
    let buffers = PackedBuffers { q: &qb, k: &kb, v: &vb, o: &o };
    let dispatches = kernels.packed.prepare(ctx, &buffers, launch).unwrap();
    let (last, slices) = dispatches.split_last().unwrap();
    Dispatch::submit_all(ctx, slices.iter().collect::<Vec<_>>().as_slice());
    let got = run(ctx, last, &o, want.len());
    let what = format!("packed_attention {what} d = {}", launch.shape.d);
    worst(&what, &got, &want, KERNEL_ABS, KERNEL_REL);
    println!("{what}: max |diff| {:e}", max_abs_diff(&got, &want));
}

#[test]
fn kivi_s_cache_is_packed_and_read_as_the_twins_do() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(37);
    // The trained model's pass (8 heads on 2, d = 32, window 64) over 98 tokens: K's partial block and
    // the recent 16 in f32; int4 with a partial block past the recent 40 over 300 tokens in 2 slices;
    // an off-grid width whose V groups are partial; fewer tokens than R (nothing packed); a head of 512.
    let cases = [
        (
            AttentionShape { h_q: 8, h_kv: 2, n_q: 98, n_kv: 98, d: 32 },
            Mask::Sliding { window_tokens: 64 },
            (2, 32, 16),
        ),
        (AttentionShape { h_q: 2, h_kv: 1, n_q: 300, n_kv: 300, d: 64 }, Mask::Causal, (4, 16, 40)),
        (AttentionShape { h_q: 4, h_kv: 2, n_q: 45, n_kv: 45, d: 40 }, Mask::Chunked { chunk_tokens: 9 }, (2, 16, 4)),
        (AttentionShape { h_q: 2, h_kv: 2, n_q: 12, n_kv: 12, d: 32 }, Mask::Full, (4, 8, 16)),
        (AttentionShape { h_q: 1, h_kv: 1, n_q: 40, n_kv: 40, d: 512 }, Mask::Causal, (2, 8, 4)),
    ];
    for (shape, mask, (bits, group, recent)) in cases {
        let scheme = KvScheme::Kivi { bits, group, recent };
        let kivi = KiviCache::of(scheme, shape.d, shape.n_kv).unwrap();
        let (k, v) = (random(shape.kv_len(), 2.0, &mut rng), random(shape.kv_len(), 1.0, &mut rng));
        // kv_pack's words, bit for bit as the twin's.
        let mut packed = Vec::new();
        for (tensor, x) in [(KvTensor::K, &k), (KvTensor::V, &v)] {
            let want = kivi_pack(x, shape.h_kv, &kivi, tensor).unwrap();
            let (xb, cache) =
                (ctx.storage_from("x", x).unwrap(), ctx.storage_from("cache", &vec![0u32; want.len()]).unwrap());
            let heads = (shape.h_kv, shape.n_kv);
            let dispatches = kernels.kv_pack.prepare_kivi(&ctx, &xb, &cache, heads, kivi, tensor).unwrap();
            Dispatch::submit_all(&ctx, &dispatches.iter().collect::<Vec<_>>());
            let got: Vec<u32> = pollster::block_on(ctx.read_back(&cache)).unwrap()[..want.len()].to_vec();
            let differing = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(differing, 0, "kv_pack {} {tensor:?} d = {}: {differing} words differ", scheme.name(), shape.d);
            packed.push(got);
        }
        let q = random(shape.q_len(), 2.0, &mut rng);
        let scale = 1.0 / (shape.d as f32).sqrt();
        let caches = PackedCaches::Kivi(kivi);
        let problem =
            PackedProblem { q: &q, k: &packed[0], v: &packed[1], shape, kv_stride: shape.n_kv, caches, mask, scale };
        let launch = PackedLaunch { shape, kv_stride: shape.n_kv, caches, mask, scale };
        attend_as_the_twin_does(
            &ctx,
            &kernels,
            &problem,
            launch,
            &format!("{} G = {group} R = {recent} {mask:?}", scheme.name()),
        );
    }
    close(ctx);
}

#[test]
fn kivi_s_decode_cache_grows_and_is_read_as_the_twins_do() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let mut rng = SplitMix64::new(41);
    // A prompt, then one token a step (and some at once), in a cache with room for 64: after every
    // step kv_pack's words (the ring's stale rows too) are the twin's (kivi_append), word for word,
    // and a decode query (the last position) reads them as packed_attention's twin does. The trained
    // model's heads (8 on 2, d = 32, int2, G = 32, R = 16 would quantise a block only past 48
    // tokens, so G = 8 here), an off-grid width, and a head of 512.
    let cases = [(8u32, 2u32, 32u32, (2u8, 8u32, 16u32)), (2, 1, 40, (4, 16, 3)), (1, 1, 512, (2, 4, 5))];
    for (h_q, h_kv, d, (bits, group, recent)) in cases {
        let scheme = KvScheme::Kivi { bits, group, recent };
        let mut kivi = KiviCache::decoding(scheme, d, 64).unwrap();
        let words = [KvTensor::K, KvTensor::V].map(|t| kivi.words(t, h_kv) as usize);
        let mut twins = words.map(|w| vec![0u32; w]);
        let caches = words.map(|w| ctx.storage_from("cache", &vec![0u32; w]).unwrap());
        let mut len = 0;
        // 15 tokens, 12 one at a time, 10 at once (at G = 16 completing the block 16..32 partly from
        // the ring, partly from the new tokens), 6, then 9 at once (the block 32..48 likewise): 52.
        let steps = [[5u32, 1, 1, 1, 7].as_slice(), &[1; 12], &[10], &[1; 6], &[9]].concat();
        for (i, step) in steps.into_iter().enumerate() {
            kivi = kivi.holding(len + step);
            for (tensor, (twin, cache)) in [KvTensor::K, KvTensor::V].into_iter().zip(twins.iter_mut().zip(&caches)) {
                let new = random((h_kv * step * d) as usize, 2.0, &mut rng);
                kivi_append(twin, &new, h_kv, &kivi, tensor).unwrap();
                let xb = ctx.storage_from("x", &new).unwrap();
                let dispatches = kernels.kv_pack.prepare_kivi(&ctx, &xb, cache, (h_kv, step), kivi, tensor).unwrap();
                Dispatch::submit_all(&ctx, &dispatches.iter().collect::<Vec<_>>());
            }
            len += step;
            let got: Vec<Vec<u32>> = caches.iter().map(|c| pollster::block_on(ctx.read_back(c)).unwrap()).collect();
            for ((tensor, got), want) in [KvTensor::K, KvTensor::V].iter().zip(&got).zip(&twins) {
                let differing = got.iter().zip(want).filter(|(a, b)| a != b).count();
                assert_eq!(
                    differing,
                    0,
                    "{} {tensor:?} d = {d} at {len} tokens: {differing} words differ",
                    scheme.name()
                );
            }
            if i % 4 == 0 || len > 40 {
                let shape = AttentionShape { h_q, h_kv, n_q: 1, n_kv: len, d };
                let q = random(shape.q_len(), 2.0, &mut rng);
                let (scale, mask, caches) = (1.0 / (d as f32).sqrt(), Mask::Causal, PackedCaches::Kivi(kivi));
                let problem =
                    PackedProblem { q: &q, k: &got[0], v: &got[1], shape, kv_stride: 64, caches, mask, scale };
                let launch = PackedLaunch { shape, kv_stride: 64, caches, mask, scale };
                attend_as_the_twin_does(
                    &ctx,
                    &kernels,
                    &problem,
                    launch,
                    &format!("{} decode at {len}", scheme.name()),
                );
            }
        }
    }
    close(ctx);
}

/// The slices' partials of a packed launch are one buffer the kernel keeps, so the next layer's or
/// token's launch binds it again: decoding makes no new buffer per layer per token, and lends none
/// from the context's spares (a pass kept and submitted again would share a lent one with other jobs).
#[test]
fn packed_partials_are_one_kept_buffer() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    // A decode step over 1,000 keys: 8 slices, so partials of 8 x 8 rows x (64 + 1) floats.
    let shape = AttentionShape { h_q: 8, h_kv: 2, n_q: 1, n_kv: 1000, d: 64 };
    let layout = PackedLayout::of(KvScheme::Int8, shape.d).unwrap();
    assert_eq!(PackedPlan::of(shape).splits, 8);
    let words = u64::from(shape.h_kv * shape.n_kv * layout.words()) * 4;
    let (q, o) = (ctx.storage_output("q", 8 * 64 * 4).unwrap(), ctx.storage_output("o", 8 * 64 * 4).unwrap());
    let (k, v) = (ctx.storage_output("k", words).unwrap(), ctx.storage_output("v", words).unwrap());
    let buffers = PackedBuffers { q: &q, k: &k, v: &v, o: &o };
    let launch = PackedLaunch { shape, kv_stride: shape.n_kv, caches: layout.into(), mask: Mask::Causal, scale: 0.125 };
    assert_eq!(kernels.packed.partials_bytes(), 0);
    let first = kernels.packed.prepare(&ctx, &buffers, launch).unwrap();
    assert_eq!(first.len(), 2, "the slices, then combine");
    assert_eq!(kernels.packed.partials_bytes(), 8 * 8 * 65 * 4);
    // A shorter cache needs fewer partials: the kept buffer serves it.
    let shorter = PackedLaunch { shape: AttentionShape { n_kv: 600, ..shape }, ..launch };
    let second = kernels.packed.prepare(&ctx, &buffers, shorter).unwrap();
    assert_eq!(kernels.packed.partials_bytes(), 8 * 8 * 65 * 4);
    assert_eq!(ctx.spare_bytes(), 0, "nothing lent from the spares");
    drop((first, second));
    close(ctx);
}

/// Issue 33's "the probabilities after a gradient step match a CPU forward with the stepped weights".
#[test]
fn the_stepped_model_s_gpu_pass_matches_the_cpu_pass_with_the_stepped_weights() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    // 83 tokens reach past layers 0-2's 64-token window.
    let ids: Vec<u32> = (0..83).map(|i| (i * 211 + 7) % 4096).collect();
    let request = LmRequest { last_logits: None, probabilities: true, hidden_states: true, head_outputs: false };
    let first = LmWeights::upload(&ctx, &ck).expect("upload");
    let unstepped = pollster::block_on(lm_forward::run(&ctx, &kernels, &first, &ids, request)).expect("GPU forward");
    for (target, eta) in [(LossTarget::Text, 0.5), (LossTarget::Token { position: 70, token: 17 }, 0.05)] {
        // Layer 0 as the GPU ran it; layer 1 and above differentiated on the CPU.
        let grads = layer_gradients_from(&ck, &ids, target, 1, &unstepped.hidden[0]).expect("CPU backward");
        let all_cpu = layer_gradients(&ck, &ids, target, 1).expect("CPU backward");
        let largest = all_cpu.w_q.weight.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let dw = grads.w_q.weight.iter().zip(&all_cpu.w_q.weight).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        println!("{target:?}: dW_Q from the GPU's layer 0 within {:e} of the CPU's (relative)", dw / largest);
        assert!(dw < 1e-4 * largest, "{target:?}: dW_Q from the GPU's input differs by {dw:e} (largest {largest:e})");
        let pairs = counted(&ids, target);
        let vocab = ck.vocab();
        let before = read_targets(&forward::forward(&ck, &ids).unwrap().logits, vocab, ids.len(), &pairs).unwrap();
        let new = stepped(&ck, &grads, eta).expect("step");
        let cpu = forward::forward(&new, &ids).expect("CPU forward, stepped");
        let weights = LmWeights::upload(&ctx, &new).expect("upload the stepped weights");
        let gpu = pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &ids, request)).expect("GPU forward");
        let (want, got) = (
            read_targets(&cpu.logits, vocab, ids.len(), &pairs).unwrap(),
            read_targets(&gpu.logits, vocab, ids.len(), &pairs).unwrap(),
        );
        let prob_rel = got.probs.iter().zip(&want.probs).map(|(g, w)| (g - w).abs() / w).fold(0.0, f64::max);
        let logits = max_abs_diff(&gpu.logits, &cpu.logits);
        let attention = gpu.probs.iter().zip(&cpu.probs).map(|(g, w)| max_abs_diff(g, w)).fold(0.0, f32::max);
        println!(
            "{target:?}, eta {eta}: loss {} -> CPU {} / GPU {}; counted probabilities within {prob_rel:e} (relative), \
             logits {logits:e}, attention {attention:e}",
            before.loss, want.loss, got.loss
        );
        assert!(
            want.loss < before.loss - 1e-2,
            "{target:?}: the step lowers the loss ({} -> {})",
            before.loss,
            want.loss
        );
        assert!((got.loss - want.loss).abs() < 1e-5, "{target:?}: loss GPU {} vs CPU {}", got.loss, want.loss);
        assert!(prob_rel < 1e-5, "{target:?}: counted probabilities differ by {prob_rel:e} (relative)");
        assert!(logits < 1e-4, "{target:?}: logits differ by {logits:e}");
        assert_eq!(gpu.probs.len(), ck.layers.len());
        assert!(attention < 1e-5, "{target:?}: attention probabilities differ by {attention:e}");
    }
    close(ctx);
}
