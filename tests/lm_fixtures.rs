//! Every family fixture loaded as a user's files are, its text tokenised by the app, and its last
//! position's logits compared with candle-transformers' (`tests/common/fixtures.rs` says how
//! closely): on the CPU forward pass, and on the GPU forward pass on a real wgpu device (lavapipe in
//! CI). The browser's twin of the GPU test is in `web.rs`.

use attention_lab::gpu::GpuContext;
use attention_lab::gpu::Kernels;
use attention_lab::gpu::lm_forward::{self, LmRequest, LmWeights};
use attention_lab::gpu::lm_stream::{self, WeightSource};
use attention_lab::lm::bpe::Tokenizer;
use attention_lab::lm::checkpoint::Checkpoint;
use attention_lab::lm::forward;
use attention_lab::lm::safetensors::TensorDType;
use attention_lab::lm::weight_plan::{WeightFormat, WeightPlan};

#[expect(dead_code, reason = "common::gpu::random is for the kernel tests")]
mod common;
use common::gpu::{close, device};
#[path = "common/fixtures.rs"]
mod fixtures;
use fixtures::{FIXTURES, FixtureFiles, Input, TOKENIZER, check, reference, split_in_two};

fn loaded() -> impl Iterator<Item = (&'static str, Checkpoint)> {
    FIXTURES
        .into_iter()
        .map(|f| (f.name, Checkpoint::load(f.config, f.weights).unwrap_or_else(|e| panic!("{}: {e}", f.name))))
}

#[test]
fn every_fixture_is_tokenised_as_the_reference_says() {
    let reference = reference();
    let names: Vec<&str> = reference.fixtures.keys().map(String::as_str).collect();
    assert_eq!(names, FIXTURES.map(|f| f.name));
    for f in FIXTURES {
        let tok = Tokenizer::from_json(f.tokenizer).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let fixture = &reference.fixtures[f.name];
        let texts = fixture
            .inputs
            .iter()
            .map(|i| (&i.text, &i.ids))
            .chain(fixture.tokenizer_cases.iter().map(|c| (&c.text, &c.ids)));
        for (text, ids) in texts {
            assert_eq!(&tok.encode(text), ids, "{}: {text:?}", f.name);
        }
    }
    // SmolLM's tokenizer splits digits: its own cases are checked, and they differ from the shipped one's.
    let smollm = &reference.fixtures["smollm"];
    assert_eq!(smollm.tokenizer_cases.len(), 21);
    let shipped = Tokenizer::from_json(TOKENIZER).unwrap();
    assert!(smollm.tokenizer_cases.iter().any(|c| shipped.encode(&c.text) != c.ids));
}

/// Every family's weights widened a slice at a time (how the page keeps a dropped checkpoint in
/// memory, `safetensors::Widening`) are the weights one read of each tensor gives: the same logits.
#[test]
fn a_checkpoint_widened_in_steps_is_the_checkpoint_read_at_once() {
    use attention_lab::lm::safetensors::{SafeTensors, Widening};
    let reference = reference();
    for (f, (name, at_once)) in FIXTURES.into_iter().zip(loaded()) {
        // Steps of 1,000 values: hundreds of them, most ending inside a tensor.
        let mut widening = Widening::new(SafeTensors::parse(f.weights).unwrap(), 1000).unwrap();
        let mut steps = 1;
        while widening.step() {
            steps += 1;
        }
        assert!(steps > 100, "{name}: {steps} steps");
        let in_steps = Checkpoint::from_widened(f.config, &widening.finish()).unwrap();
        assert_eq!(in_steps.embed, at_once.embed, "{name}");
        assert_eq!((&in_steps.final_norm, &in_steps.lm_head), (&at_once.final_norm, &at_once.lm_head), "{name}");
        let input = &reference.fixtures[name].inputs[0];
        let logits = |ck: &Checkpoint| forward::forward(ck, &input.ids).unwrap().logits;
        assert_eq!(logits(&in_steps), logits(&at_once), "{name}");
    }
}

#[test]
fn the_cpu_forward_pass_matches_candle_on_every_family() {
    let reference = reference();
    for (name, ck) in loaded() {
        for input in &reference.fixtures[name].inputs {
            let out = forward::forward(&ck, &input.ids).unwrap_or_else(|e| panic!("{name}: {e}"));
            let what = format!("{name} CPU, {} tokens", input.ids.len());
            let worst = check(&what, out.logits_at(input.ids.len() - 1), input);
            println!("{what}: largest difference {worst:.2e}");
        }
    }
}

/// The last position's logits of `input` on `weights`, checked against candle.
fn check_gpu(ctx: &GpuContext, kernels: &Kernels, weights: &LmWeights, what: &str, input: &Input) {
    let request = LmRequest { last_logits: Some(1), ..Default::default() };
    let out = pollster::block_on(lm_forward::run(ctx, kernels, weights, &input.ids, request))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let what = format!("{what}, {} tokens", input.ids.len());
    let worst = check(&what, &out.logits, input);
    println!("{what}: largest difference {worst:.2e}");
}

/// Plans from the files' headers and streams the weights a chunk at a time, as the page does; with
/// `small_chunks`, in chunks of 4 KiB, so every fixture's larger tensors cross many chunk seams
/// (the page's 4 MiB chunks hold them whole).
fn stream_with(ctx: &GpuContext, kernels: &Kernels, config: &str, files: &[&[u8]], small_chunks: bool) -> LmWeights {
    let plan = pollster::block_on(lm_stream::plan(config, files)).unwrap();
    // A bf16 file's matrices stay bf16 on the GPU (the kernels widen them as they read); others are f32.
    let bf16 = plan.pieces.iter().all(|p| p.dtype == TensorDType::Bf16);
    assert!(plan.formats.iter().all(|(slot, &f)| (f == WeightFormat::Bf16) == (bf16 && slot.is_matrix())));
    let total: u64 = (0..files.shards()).map(|s| files.file_len(s)).sum();
    let mut seen = Vec::new();
    let chunk = if small_chunks { 4096 } else { lm_stream::CHUNK_BYTES };
    let mut progress = |done, all| seen.push((done, all));
    let streamed = LmWeights::stream_in_chunks(ctx, kernels, &plan, files, &mut progress, chunk);
    let weights = pollster::block_on(streamed).unwrap();
    // Progress rises to every byte of every tensor: all of the files but their headers.
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    let headers: u64 = files.iter().map(|f| 8 + u64::from_le_bytes(f[..8].try_into().unwrap())).sum();
    assert_eq!(*seen.last().unwrap(), (total - headers, total - headers));
    weights
}

fn stream(ctx: &GpuContext, kernels: &Kernels, config: &str, files: &[&[u8]]) -> LmWeights {
    stream_with(ctx, kernels, config, files, false)
}

#[test]
fn streamed_weights_match_candle_on_every_family_whole_or_sharded() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let reference = reference();
    for FixtureFiles { name, config, weights: safetensors, .. } in FIXTURES {
        let [a, b] = split_in_two(safetensors);
        let ways = [
            (vec![safetensors], "streamed", false),
            (vec![safetensors], "streamed in 4 KiB chunks", true),
            (vec![&b[..], &a[..]], "streamed from 2 shards", false),
        ];
        for (files, how, small_chunks) in ways {
            let weights = stream_with(&ctx, &kernels, config, &files, small_chunks);
            for input in &reference.fixtures[name].inputs {
                check_gpu(&ctx, &kernels, &weights, &format!("{name} {how}"), input);
            }
        }
    }
    close(ctx);
}

#[test]
fn the_gpu_forward_pass_matches_candle_on_every_family() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let reference = reference();
    for (name, ck) in loaded() {
        let weights = LmWeights::upload(&ctx, &ck).unwrap_or_else(|e| panic!("{name}: {e}"));
        for input in &reference.fixtures[name].inputs {
            check_gpu(&ctx, &kernels, &weights, &format!("{name} GPU"), input);
        }
    }
    close(ctx);
}

/// Llama's vectors in each layer: its two norms.
const LLAMA_VECTORS: [(&str, u64); 2] = [("input_layernorm.weight", 0), ("post_attention_layernorm.weight", 0)];

#[test]
fn gemma3_scales_attention_by_query_pre_attn_scalar_on_the_cpu_and_the_gpu_alike() {
    // candle scales by the head width (32), as the fixture's query_pre_attn_scalar says; at 256 the
    // logits must move away from candle's, and the GPU pass must follow the CPU pass there.
    let f = FIXTURES.iter().find(|f| f.name == "gemma3").expect("the gemma3 fixture");
    let config = f.config.replace("\"query_pre_attn_scalar\": 32", "\"query_pre_attn_scalar\": 256");
    assert_ne!(config, f.config);
    let ck = Checkpoint::load(&config, f.weights).unwrap();
    let input = &reference().fixtures["gemma3"].inputs[1];
    let cpu = forward::forward(&ck, &input.ids).unwrap();
    let cpu = cpu.logits_at(input.ids.len() - 1);
    let moved = cpu.iter().step_by(16).zip(&input.every16).map(|(&c, &w)| (f64::from(c) - w).abs()).fold(0.0, f64::max);
    assert!(moved > 0.01, "the scalar moved no logit: {moved}");
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let weights = LmWeights::upload(&ctx, &ck).unwrap();
    let request = LmRequest { last_logits: Some(1), ..Default::default() };
    let gpu = pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &input.ids, request)).unwrap();
    let apart = gpu.logits.iter().zip(cpu).map(|(g, c)| (g - c).abs()).fold(0.0, f32::max);
    assert!(apart < 1e-4, "GPU and CPU differ by {apart}");
    close(ctx);
}

/// A plan made from a header alone (no weights exist: the plan and the check read nothing else) for
/// a tied layout: `layers` layers of `d`, Q/K/V `[q, d]`, `[kv, d]`, MLP `ffn`, `vocab`, each layer's
/// `vectors` (name, length; 0 for `d`), every tensor in `dtype`.
fn header_only_plan(
    config: &str,
    (layers, d, q, kv, ffn, vocab): (u64, u64, u64, u64, u64, u64),
    vectors: &[(&str, u64)],
    dtype: &str,
) -> WeightPlan {
    let mut tensors = serde_json::Map::new();
    let mut at = 0u64;
    let mut add = |name: String, shape: &[u64]| {
        let bytes = 2 * shape.iter().product::<u64>();
        tensors.insert(name, serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [at, at + bytes]}));
        at += bytes;
    };
    add("model.embed_tokens.weight".into(), &[vocab, d]);
    add("model.norm.weight".into(), &[d]);
    for l in 0..layers {
        let p = |part: &str| format!("model.layers.{l}.{part}");
        add(p("self_attn.q_proj.weight"), &[q, d]);
        add(p("self_attn.k_proj.weight"), &[kv, d]);
        add(p("self_attn.v_proj.weight"), &[kv, d]);
        add(p("self_attn.o_proj.weight"), &[d, q]);
        add(p("mlp.gate_proj.weight"), &[ffn, d]);
        add(p("mlp.up_proj.weight"), &[ffn, d]);
        add(p("mlp.down_proj.weight"), &[d, ffn]);
        for &(name, len) in vectors {
            add(p(name), &[if len == 0 { d } else { len }]);
        }
    }
    let json = serde_json::to_vec(&tensors).unwrap();
    let header = attention_lab::lm::safetensors::Header::parse(&json, 8 + json.len() as u64 + at).unwrap();
    WeightPlan::new(config, &[header]).unwrap()
}

#[test]
fn a_checkpoint_too_large_for_the_budget_is_refused_before_anything_is_made() {
    // SmolLM2-1.7B's layout: 24 layers of 2048, MLP 8192, vocab 49,152, tied; bf16.
    let config = r#"{"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 49152, "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5, "rope_theta": 130000, "tie_word_embeddings": true, "hidden_act": "silu"}"#;
    let plan = header_only_plan(config, (24, 2048, 2048, 2048, 8192, 49152), &LLAMA_VECTORS, "BF16");
    // 49,152 x 2,048 + 2,048 + 24 x (4 x 2,048^2 + 3 x 8,192 x 2,048 + 2 x 2,048) = 1,711,376,384.
    assert_eq!(plan.parameters(), 1_711_376_384);
    // Matrices kept as bf16: 2 x (1,711,376,384 - 49 x 2,048) + 4 x 49 x 2,048 = 3,422,953,472 bytes.
    assert_eq!(plan.gpu_bytes(), 3_422_953_472);
    let Some(ctx) = device() else { return };
    let err = lm_stream::check(&ctx, &plan).unwrap_err().to_string();
    // The budget is 1 GiB, less where the adapter's largest buffer is smaller.
    let want = "too large for this GPU: its 1,711,376,384 parameters take 3.42 GB (3.19 GiB) on the GPU (3.42 GB \
                (3.19 GiB) in its files), more than the ";
    let tail = "million parameters fit in bf16 (its weight matrices are kept as they are), half that in f16 or f32 (kept as f32)";
    assert!(err.starts_with(want) && err.ends_with(tail), "{err}");
    close(ctx);
}

#[test]
fn a_bf16_checkpoint_of_360_m_parameters_fits_where_its_f16_twin_does_not() {
    // SmolLM2-360M's layout: 32 layers of 960, 15 query heads and 5 KV heads of 64, MLP 2560, vocab
    // 49,152, tied.
    let config = r#"{"model_type": "llama", "hidden_size": 960, "intermediate_size": 2560, "num_hidden_layers": 32,
        "num_attention_heads": 15, "num_key_value_heads": 5, "vocab_size": 49152, "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5, "rope_theta": 100000, "tie_word_embeddings": true, "hidden_act": "silu"}"#;
    let dims = (32, 960, 960, 320, 2560, 49152);
    let bf16 = header_only_plan(config, dims, &LLAMA_VECTORS, "BF16");
    // 49,152 x 960 + 960 + 32 x (2 x 960^2 + 2 x 320 x 960 + 3 x 2,560 x 960 + 2 x 960) = 361,821,120.
    assert_eq!(bf16.parameters(), 361_821_120);
    // Norms (65 x 960 = 62,400) as f32, the rest as bf16: 2 x 361,758,720 + 4 x 62,400.
    assert_eq!(bf16.gpu_bytes(), 723_767_040);
    assert!(bf16.formats.iter().all(|(slot, &f)| (f == WeightFormat::Bf16) == slot.is_matrix()));
    let f16 = header_only_plan(config, dims, &LLAMA_VECTORS, "F16");
    assert_eq!(f16.gpu_bytes(), 4 * 361_821_120);
    let Some(ctx) = device() else { return };
    lm_stream::check(&ctx, &bf16).expect("724 MB fits the 1 GiB budget");
    let err = lm_stream::check(&ctx, &f16).unwrap_err().to_string();
    assert!(
        err.starts_with("too large for this GPU: its 361,821,120 parameters take 1.45 GB (1.35 GiB) on the GPU"),
        "{err}"
    );
    close(ctx);
}

#[test]
fn gemma_3_270m_fits_in_bf16() {
    let config = include_str!("data/configs/gemma-3-270m.json");
    // Four norms of 640 and QK-norm's two of 256 in each layer.
    let vectors = [
        ("input_layernorm.weight", 0),
        ("post_attention_layernorm.weight", 0),
        ("pre_feedforward_layernorm.weight", 0),
        ("post_feedforward_layernorm.weight", 0),
        ("self_attn.q_norm.weight", 256),
        ("self_attn.k_norm.weight", 256),
    ];
    let plan = header_only_plan(config, (18, 640, 1024, 256, 2048, 262_144), &vectors, "BF16");
    // 262,144 x 640 + 640 + 18 x (2 x 1,024 x 640 + 2 x 256 x 640 + 3 x 2,048 x 640 + 4 x 640 + 2 x 256)
    // = 167,772,160 + 640 + 18 x 5,573,632 = 268,098,176: the published 268 M, and the importer's count.
    assert_eq!(plan.parameters(), 268_098_176);
    assert_eq!(attention_lab::model::params::model_params(plan.model()).total(), 268_098_176);
    // Vectors (18 x 3,072 + 640 = 55,936) as f32, the rest as bf16: 2 x 268,042,240 + 4 x 55,936.
    assert_eq!(plan.gpu_bytes(), 536_308_224);
    // Its embedding is the largest binding: 262,144 x 640 x 2 = 335,544,320 bytes.
    assert_eq!(plan.gpu_buffers().iter().map(|b| b.1).max(), Some(335_544_320));
    let Some(ctx) = device() else { return };
    match ctx.limits.max_storage_buffer_binding_size >= 335_544_320 {
        true => {
            lm_stream::check(&ctx, &plan).expect("536 MB fits the 1 GiB budget");
        }
        false => {
            let err = lm_stream::check(&ctx, &plan).unwrap_err().to_string();
            assert!(err.contains("embed"), "{err}");
        }
    }
    close(ctx);
}

/// The shipped model's reference (`tests/data/tiny-model/reference.json`, by the training crate).
#[derive(serde::Deserialize)]
struct ShippedReference {
    inputs: Vec<ShippedInput>,
}

#[derive(serde::Deserialize)]
struct ShippedInput {
    ids: Vec<u32>,
    last_logits: Vec<f32>,
}

#[test]
fn the_trained_model_streamed_as_files_matches_its_reference() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/www/models/attention-lab-tiny");
    let config = std::fs::read_to_string(format!("{dir}/config.json")).unwrap();
    let safetensors = std::fs::read(format!("{dir}/model.safetensors")).unwrap();
    let weights = stream(&ctx, &kernels, &config, &[&safetensors]);
    let reference: ShippedReference =
        serde_json::from_str(include_str!("data/tiny-model/reference.json")).expect("reference.json");
    for input in reference.inputs {
        let request = LmRequest { last_logits: Some(1), ..Default::default() };
        let out = pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &input.ids, request)).unwrap();
        let worst = out.logits.iter().zip(&input.last_logits).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "{} tokens: logits differ by {worst}", input.ids.len());
    }
    close(ctx);
}

/// Decoding with the KV cache starts the rotary table past position 0: with Llama 3.1's scaling too,
/// each step gives the CPU pass's logits at that position, with the weights uploaded as f32 and
/// streamed from the bf16 file (matrices kept bf16).
#[test]
fn decoding_a_scaled_rope_fixture_against_the_kv_cache_gives_the_cpu_logits() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let (_, ck) = loaded().find(|(name, _)| *name == "llama3").expect("the llama3 fixture");
    assert!(ck.rope_scaling.is_some(), "the llama3 fixture has Llama 3.1's scaling");
    let ids = reference().fixtures["llama3"].inputs.iter().map(|i| i.ids.clone()).max_by_key(Vec::len).unwrap();
    let want = forward::forward(&ck, &ids).expect("CPU forward");
    let files = FIXTURES.iter().find(|f| f.name == "llama3").expect("the llama3 fixture's files");
    let uploaded = LmWeights::upload(&ctx, &ck).expect("upload");
    let streamed = stream(&ctx, &kernels, files.config, &[files.weights]);
    for (how, weights) in [("uploaded", &uploaded), ("streamed", &streamed)] {
        decode_steps(&ctx, &kernels, weights, &ids, &want, how);
    }
    close(ctx);
}

/// Prefills half of `ids`, decodes the rest a token at a time and checks each step's logits.
fn decode_steps(
    ctx: &GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    ids: &[u32],
    want: &forward::ModelPass,
    how: &str,
) {
    let mut cache = lm_forward::LmCache::new(ctx, weights, 64).expect("cache");
    let prefill = ids.len() / 2;
    let mut step = |tokens: &[u32]| pollster::block_on(lm_forward::decode(ctx, kernels, weights, &mut cache, tokens));
    let mut worst = 0.0f32;
    for (at, tokens) in
        std::iter::once((prefill - 1, &ids[..prefill])).chain((prefill..ids.len()).map(|i| (i, &ids[i..=i])))
    {
        let got = step(tokens).expect("decode");
        let diff = got.iter().zip(want.logits_at(at)).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(diff < 1e-4, "{how}, position {at}: logits differ by {diff}");
        worst = worst.max(diff);
    }
    println!("llama3 {how} decode with the KV cache: largest difference {worst:.2e}");
}
