//! The shipped model (`www/models/attention-lab-tiny/`): its config imports as trained, and the
//! app's CPU forward pass reproduces the training crate's reference outputs
//! (`tests/data/tiny-model/reference.json`, candle in f32 on the same float16 weights).
//!
//! Tolerances: both sides compute in f32 (this one sums in f64) and the file rounds logits to 1e-4 and
//! probabilities to 1e-7, so they differ by rounding only: measured at most 5.7e-5 on a logit and
//! 1.5e-6 on a probability (with the first shipped model, before issue 36's retrain); the tests allow about ten times that (`LOGIT_TOLERANCE`, `PROB_TOLERANCE`).

use serde::Deserialize;

use super::checkpoint::Checkpoint;
use super::forward::{MAX_CPU_TOKENS, forward, max_tokens};
use super::shipped_model::{shipped, shipped_config, shipped_file};
use crate::catalog::hf_import::import_hf_config;
use crate::model::config::{FfnKind, Positional};
use crate::model::mask::Mask;
use crate::model::params::model_params;
use crate::model::schedule::LayerKind;

const LOGIT_TOLERANCE: f32 = 5e-4;
const PROB_TOLERANCE: f32 = 2e-5;

#[derive(Deserialize)]
struct Reference {
    inputs: Vec<Input>,
}

#[derive(Deserialize)]
struct Input {
    name: String,
    /// The text the ids came from (the library's tokenizer), when they came from one.
    text: Option<String>,
    ids: Vec<u32>,
    logsumexp: Vec<f32>,
    top5: Vec<Vec<(u32, f32)>>,
    last_logits: Vec<f32>,
    rows: Vec<usize>,
    /// [layer][head][row][key]
    probs: Vec<Vec<Vec<Vec<f32>>>>,
}

fn reference() -> Reference {
    let path = format!("{}/tests/data/tiny-model/reference.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn the_shipped_config_imports_as_trained() {
    let imp = import_hf_config(&shipped_config()).unwrap();
    let m = &imp.model;
    assert_eq!(imp.report.model_type, "qwen2");
    assert_eq!((m.d_model, m.n_q_heads, m.attn.n_kv_heads, m.attn.head_dim), (192, 8, 2, 32));
    let sliding = LayerKind::Sliding { window_tokens: 64 };
    assert_eq!(m.schedule.layers(), [sliding, sliding, sliding, LayerKind::Global]);
    assert_eq!((m.ffn_kind, m.ffn_size, m.vocab_size, m.tie_embeddings), (FfnKind::SwiGlu, 512, 4096, true));
    assert_eq!((m.positional, m.biases.qkv, m.biases.o), (Positional::rope(10_000.0), true, false));
    // Embeddings 4096*192 = 786,432; per layer Q 192*256 + 256, K and V 192*64 + 64 each, O 256*192
    // = 123,264; MLP 3*192*512 = 294,912; norms 2*192: 418,560 a layer, 1,674,240 for 4; final norm
    // 192: 2,460,864, the trainer's own count.
    assert_eq!(model_params(m).total(), 2_460_864);
    assert!(imp.report.assumed.is_empty(), "{:?}", imp.report.assumed);
}

#[test]
fn the_forward_pass_reproduces_the_reference() {
    let ck = shipped();
    for input in reference().inputs {
        let out = forward(&ck, &input.ids).unwrap();
        let name = &input.name;
        let t = input.ids.len();
        for i in 0..t {
            let logits = out.logits_at(i);
            let lse = log_sum_exp(logits);
            assert!((lse - input.logsumexp[i]).abs() < LOGIT_TOLERANCE, "{name} position {i}: {lse}");
            for &(id, value) in &input.top5[i] {
                let got = logits[id as usize];
                assert!((got - value).abs() < LOGIT_TOLERANCE, "{name} position {i} token {id}: {got} vs {value}");
            }
            let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap();
            assert_eq!(best as u32, input.top5[i][0].0, "{name} position {i}: the most likely next token");
        }
        let worst = out.logits_at(t - 1).iter().zip(&input.last_logits).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(worst < LOGIT_TOLERANCE, "{name}: last logits differ by {worst}");
        for (l, heads) in input.probs.iter().enumerate() {
            for (h, rows) in heads.iter().enumerate() {
                let ours = out.head(l, h);
                for (&r, expected) in input.rows.iter().zip(rows) {
                    let row = &ours[r * t..][..t];
                    for (k, (&a, &b)) in row.iter().zip(expected).enumerate() {
                        assert!(
                            (a - b).abs() < PROB_TOLERANCE,
                            "{name} layer {l} head {h} row {r} key {k}: {a} vs {b}"
                        );
                        let visible = ck.layers[l].mask.visible(r as u32, k as u32);
                        assert_eq!(a > 0.0, visible, "{name} layer {l} head {h}: ({r}, {k}) visible = {visible}");
                    }
                }
            }
        }
    }
}

#[test]
fn the_app_tokenises_the_reference_texts_as_training_did() {
    let trained = format!("{}/tools/train/data/tokenizer.json", env!("CARGO_MANIFEST_DIR"));
    assert!(
        std::fs::read(trained).unwrap() == shipped_file("tokenizer.json"),
        "the shipped tokenizer is the trained one"
    );
    let tokenizer = String::from_utf8(shipped_file("tokenizer.json")).unwrap();
    let tokenizer = super::bpe::Tokenizer::from_json(&tokenizer).unwrap();
    for input in reference().inputs {
        if let Some(text) = &input.text {
            assert_eq!(tokenizer.encode(text), input.ids, "{}", input.name);
        }
    }
}

#[test]
fn the_reference_reaches_past_the_sliding_window() {
    // One input must hold rows the 64-token window cuts off, so the mask is tested, not assumed.
    let long = reference().inputs.into_iter().map(|i| i.ids.len()).max().unwrap();
    assert!(long > 64 + 2, "longest reference input {long} tokens");
    assert_eq!(shipped().layers[0].mask, Mask::Sliding { window_tokens: 64 });
}

fn log_sum_exp(x: &[f32]) -> f32 {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = x.iter().map(|&v| f64::from(v - max).exp()).sum();
    max + sum.ln() as f32
}

#[test]
fn bad_inputs_and_checkpoints_are_errors() {
    let ck = shipped();
    assert!(forward(&ck, &[]).unwrap_err().0.contains("1 to"));
    assert!(forward(&ck, &[1, 4096]).unwrap_err().0.contains("token id 4096"));
    // Trained on 128 tokens: longer inputs are refused, with the limit named.
    assert_eq!(max_tokens(&ck), 128);
    assert!(forward(&ck, &[1; 128]).is_ok());
    assert!(forward(&ck, &[1; 129]).unwrap_err().0.contains("1 to 128 tokens"));
    // A model with 16,384 heads would hold 4 x 16,384 x t^2 floats of probabilities: within 256 MiB
    // (with the logits) only up to 16 tokens, found by halving from the trained length.
    let mut wide = shipped();
    wide.model.n_q_heads = 16_384;
    assert_eq!(max_tokens(&wide), 16);
    wide.model.max_position_embeddings = u64::MAX;
    wide.model.n_q_heads = 8;
    assert_eq!(max_tokens(&wide), MAX_CPU_TOKENS);
    // The page keeps the last position's logits only: Gemma 3 270M (vocabulary 262,144) reads 512
    // tokens, its probabilities 18 x 4 x 512^2 floats (75.5 MB); every position's logits would be
    // 512 x 262,144 floats more (537 MB), past the 256 MiB.
    let gemma = include_str!("../../tests/data/configs/gemma-3-270m.json");
    assert_eq!(super::forward::max_tokens_of(&import_hf_config(gemma).unwrap().model), 512);
    let weights = shipped_file("model.safetensors");
    let config = shipped_config();
    let wider = config.replace("\"hidden_size\": 192", "\"hidden_size\": 200");
    let err = Checkpoint::load(&wider, &weights).err().unwrap().0;
    assert!(err.contains("has shape") && err.contains("expected"), "{err}");
    let untied = config.replace("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    assert!(Checkpoint::load(&untied, &weights).err().unwrap().0.contains("no tensor lm_head.weight"));
    // Qwen3 normalises Q and K per head: this checkpoint has no such weights, and says which.
    let qwen3 = config.replace("\"model_type\": \"qwen2\"", "\"model_type\": \"qwen3\"");
    let err = Checkpoint::load(&qwen3, &weights).err().unwrap().0;
    assert!(err.contains("no tensor model.layers.0.self_attn.q_norm.weight"), "{err}");
    // A family whose forward pass differs (Gemma's scaled embeddings and norms) is refused by name.
    let gemma = config.replace("\"model_type\": \"qwen2\"", "\"model_type\": \"gemma\"");
    assert!(Checkpoint::load(&gemma, &weights).err().unwrap().0.contains("not model_type \"gemma\""));
    // Llama 3.1's rotary scaling runs (tests/lm_fixtures.rs checks it against candle); broken numbers for
    // it, or another scaling, are refused by name.
    let scaled =
        |scaling: &str| config.replace("\"rope_theta\"", &format!("\"rope_scaling\": {scaling}, \"rope_theta\""));
    let llama3 = |low: f64| {
        format!(
            "{{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": {low}, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}"
        )
    };
    let want = crate::attention::rope::Llama3Scaling::new(8.0, 1.0, 4.0, 8192.0);
    assert_eq!(Checkpoint::load(&scaled(&llama3(1.0)), &weights).unwrap().rope_scaling, want);
    // transformers' older key name for the type.
    let older = scaled(&llama3(1.0).replace("rope_type", "type"));
    assert_eq!(Checkpoint::load(&older, &weights).unwrap().rope_scaling, want);
    // Both keys, disagreeing: the layout would read one and the pass apply the other.
    let both = config.replace(
        "\"rope_theta\"",
        &format!("\"rope_scaling\": {}, \"rope_parameters\": {{\"rope_type\": \"default\", \"rope_theta\": 10000.0}}, \"rope_theta\"", llama3(1.0)),
    );
    assert!(Checkpoint::load(&both, &weights).err().unwrap().0.contains("disagree"));
    assert!(
        Checkpoint::load(&scaled(&llama3(5.0)), &weights)
            .err()
            .unwrap()
            .0
            .contains("low_freq_factor below high_freq_factor")
    );
    let yarn = scaled("{\"rope_type\": \"yarn\", \"factor\": 4.0}");
    assert!(Checkpoint::load(&yarn, &weights).err().unwrap().0.contains("yarn rotary scaling"));
    let no_eps = config.replace("\"rms_norm_eps\"", "\"rms_norm_epsilon\"");
    assert!(Checkpoint::load(&no_eps, &weights).err().unwrap().0.contains("rms_norm_eps"));
    assert!(Checkpoint::load(&config, &weights[..weights.len() - 1]).is_err());
    assert!(Checkpoint::load("{", &weights).err().unwrap().0.starts_with("config.json"));
}

#[test]
fn the_page_s_stepped_pass_gives_the_whole_pass_s_last_logits_and_heads() {
    use super::forward::CpuPass;
    let ck = shipped();
    let ids: Vec<u32> = (0..83).map(|i| (i * 37 + 5) % 4096).collect();
    let whole = forward(&ck, &ids).unwrap();
    let mut pass = CpuPass::new(&ck, &ids, 1).unwrap();
    let mut steps = 0;
    while pass.step() {
        steps += 1;
    }
    // 83 rows in blocks of 16 (6 blocks) for Q/K/V and again for the MLP, 8 heads, in 4 layers; one
    // block of logits: 4 x (6 + 8 + 6) + 1 = 81 steps of a few ms each.
    assert_eq!(steps, 81);
    let last = pass.finish();
    assert_eq!((last.logit_rows, last.logits.len()), (1, 4096));
    assert_eq!(last.logits_at(82), whole.logits_at(82), "bit for bit");
    assert_eq!(last.probs, whole.probs);
    assert_eq!(last.hidden, whole.hidden);
}
