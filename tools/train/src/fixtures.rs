//! Test checkpoints for the families the app loads (issue 18): for each, a tiny model with seeded
//! weights in that family's real Hugging Face layout (tensor names, biases, QK-norm, tied or separate
//! output weights, dtype), and reference logits from candle-transformers' own implementation of the
//! family, an implementation independent of the app's forward pass and of this crate's `model`.
//!
//! Every fixture uses the shipped model's vocabulary (4,096 ids); SmolLM's has its own
//! `tokenizer.json` beside it, the shipped one behind a `Digits` pre-tokenizer and with a template
//! post-processor, as SmolLM's and StarCoder's tokenizers are made. Each writes `config.json` and
//! `model.safetensors` into `tests/data/fixtures/<name>/`; `reference.json` beside them holds, per
//! fixture and input, the token ids, the log-sum-exp of the last position's logits, its ten largest
//! logits with their ids and every 16th logit (rounded to 1e-5), which together pin the whole vector.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{gemma3, llama, mistral, qwen2, qwen3};
use serde_json::{Value, json};

use crate::rng::Rng;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Sizes shared by every fixture: small enough to commit, large enough for GQA, several heads and
/// two layers (the vocabulary is the shipped tokenizer's).
const VOCAB: usize = 4096;
const HIDDEN: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const FFN: usize = 128;
const LAYERS: usize = 2;
/// Mistral's and Gemma 3's window, shorter than the longer input so that rows past it are checked.
const MISTRAL_WINDOW: usize = 8;

/// One family's fixture.
pub struct Fixture {
    pub name: &'static str,
    /// What it stands for, written into reference.json.
    pub about: &'static str,
    pub config: Value,
    pub dtype: DType,
    /// Its own tokenizer.json's pipeline, when it is not the shipped one's: (pre_tokenizer,
    /// post_processor) to put in the shipped file.
    pub tokenizer: Option<(Value, Value)>,
}

/// SmolLM's pipeline: each digit on its own, then GPT-2's byte-level pattern; a template that adds
/// nothing without special tokens.
fn digits_pipeline() -> (Value, Value) {
    let pre = json!({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": true},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]});
    let post = json!({"type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {}});
    (pre, post)
}

/// The fixtures: Llama 3, Mistral (sliding window), Qwen2 (Q/K/V biases), Qwen3 (QK-norm, a head
/// width that is not hidden / heads), SmolLM (Llama layout, tied embeddings, full multi-head) and
/// Gemma 3 (its own block: see [`gemma3_config`]).
pub fn fixtures() -> Vec<Fixture> {
    let base = |model_type: &str, arch: &str| {
        json!({
            "architectures": [arch], "model_type": model_type, "vocab_size": VOCAB, "hidden_size": HIDDEN,
            "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS, "hidden_act": "silu", "max_position_embeddings": 256,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "bos_token_id": 0, "eos_token_id": 0,
            "tie_word_embeddings": false,
        })
    };
    let with = |mut v: Value, extra: Value| {
        for (k, x) in extra.as_object().expect("an object") {
            v[k] = x.clone();
        }
        v
    };
    vec![
        Fixture {
            name: "llama3",
            about: "Llama 3.1 layout: GQA 4/2, rotary base 500,000 with Llama 3.1's rotary scaling (factor 8; at head \
                    width 16 it leaves 4 pairs, blends one and slows 3), separate lm_head, bfloat16",
            config: with(
                base("llama", "LlamaForCausalLM"),
                json!({"rope_theta": 500000.0, "torch_dtype": "bfloat16", "rope_scaling": {"rope_type": "llama3",
                       "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}}),
            ),
            dtype: DType::BF16,
            tokenizer: None,
        },
        Fixture {
            name: "mistral",
            about: "Mistral layout: sliding window of 8 keys on every layer, float16",
            config: with(
                base("mistral", "MistralForCausalLM"),
                json!({"sliding_window": MISTRAL_WINDOW, "head_dim": HIDDEN / HEADS, "torch_dtype": "float16"}),
            ),
            dtype: DType::F16,
            tokenizer: None,
        },
        Fixture {
            name: "qwen2",
            about: "Qwen2 layout: Q/K/V biases, tied embeddings, no sliding window, float32",
            config: with(
                base("qwen2", "Qwen2ForCausalLM"),
                json!({"tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": 4096,
                       "max_window_layers": LAYERS, "rope_theta": 1000000.0, "torch_dtype": "float32"}),
            ),
            dtype: DType::F32,
            tokenizer: None,
        },
        Fixture {
            name: "qwen3",
            about: "Qwen3 layout: RMSNorm on each query and key head (QK-norm), head width 32 (4 x 32 != 64), tied, bfloat16",
            config: with(
                base("qwen3", "Qwen3ForCausalLM"),
                json!({"head_dim": 32, "attention_bias": false, "tie_word_embeddings": true, "use_sliding_window": false,
                       "sliding_window": null, "max_window_layers": LAYERS, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                       "torch_dtype": "bfloat16"}),
            ),
            dtype: DType::BF16,
            tokenizer: None,
        },
        Fixture {
            name: "smollm",
            about: "SmolLM layout (Llama): 4 heads with their own K/V (no grouping), tied embeddings, float16; its \
                    tokenizer splits digits first",
            config: with(
                base("llama", "LlamaForCausalLM"),
                json!({"num_key_value_heads": HEADS, "tie_word_embeddings": true, "rope_theta": 100000.0, "torch_dtype": "float16"}),
            ),
            dtype: DType::F16,
            tokenizer: Some(digits_pipeline()),
        },
        Fixture {
            name: "gemma3",
            about: "Gemma 3 text layout (gemma3_text, as Gemma 3 270M): embedding times sqrt(64), norms as (1 + w), four \
                    per layer (before and after attention and MLP), QK-norm, GELU-tanh gate, one KV head for 4 query \
                    heads 32 wide, a sliding layer (8 keys, rotary base 10,000) then a global one (base 1,000,000), \
                    tied, bfloat16",
            config: gemma3_config(),
            dtype: DType::BF16,
            tokenizer: None,
        },
    ]
}

/// Gemma 3 270M's config.json at the fixtures' sizes: the fields its real file has (its layer list
/// and `sliding_window_pattern` for candle, which reads only that), tied embeddings by Gemma's
/// default. `query_pre_attn_scalar` is the head width, as in the 270M: candle scales by the head width.
fn gemma3_config() -> Value {
    json!({
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": VOCAB,
        "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": 1, "head_dim": 32, "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
        "rope_scaling": null, "query_pre_attn_scalar": 32, "sliding_window": MISTRAL_WINDOW, "sliding_window_pattern": 2,
        "layer_types": ["sliding_attention", "full_attention"], "attention_bias": false, "attn_logit_softcapping": null,
        "final_logit_softcapping": null, "use_bidirectional_attention": false, "bos_token_id": 0, "eos_token_id": 0,
        "pad_token_id": 0, "torch_dtype": "bfloat16",
    })
}

/// The seeded weights of `f` by their transformers names, f32 (stored in `f.dtype`).
pub fn weights(f: &Fixture, seed: u64) -> Result<HashMap<String, Tensor>, Error> {
    let c = &f.config;
    let n = |k: &str| c[k].as_u64().map(|v| v as usize);
    let head_dim = n("head_dim").unwrap_or(HIDDEN / HEADS);
    let (q, kv) = (HEADS * head_dim, n("num_key_value_heads").unwrap_or(HEADS) * head_dim);
    let mut w = Seeded { rng: Rng::new(seed), out: HashMap::new() };
    let gemma = c["model_type"] == "gemma3_text";
    // Gemma stores norm weights as w - 1 (it scales by 1 + w).
    let norm_mean = if gemma { 0.0 } else { 1.0 };
    // Projections ~ N(0, 1 / inputs) keep every layer's activations near unit size; embeddings
    // N(0, 1); norm weights near 1 and biases near 0, but not exactly, so a missed one shows.
    w.put("model.embed_tokens.weight", &[VOCAB, HIDDEN], 0.0, 1.0)?;
    for l in 0..LAYERS {
        let p = |part: &str| format!("model.layers.{l}.{part}");
        w.linear(&p("self_attn.q_proj"), q, HIDDEN)?;
        w.linear(&p("self_attn.k_proj"), kv, HIDDEN)?;
        w.linear(&p("self_attn.v_proj"), kv, HIDDEN)?;
        w.linear(&p("self_attn.o_proj"), HIDDEN, q)?;
        w.linear(&p("mlp.gate_proj"), FFN, HIDDEN)?;
        w.linear(&p("mlp.up_proj"), FFN, HIDDEN)?;
        w.linear(&p("mlp.down_proj"), HIDDEN, FFN)?;
        w.put(&p("input_layernorm.weight"), &[HIDDEN], norm_mean, 0.2)?;
        w.put(&p("post_attention_layernorm.weight"), &[HIDDEN], norm_mean, 0.2)?;
        if c["model_type"] == "qwen2" {
            for (part, width) in [("q_proj", q), ("k_proj", kv), ("v_proj", kv)] {
                w.put(&p(&format!("self_attn.{part}.bias")), &[width], 0.0, 0.1)?;
            }
        }
        if c["model_type"] == "qwen3" || gemma {
            w.put(&p("self_attn.q_norm.weight"), &[head_dim], norm_mean, 0.2)?;
            w.put(&p("self_attn.k_norm.weight"), &[head_dim], norm_mean, 0.2)?;
        }
        if gemma {
            w.put(&p("pre_feedforward_layernorm.weight"), &[HIDDEN], norm_mean, 0.2)?;
            w.put(&p("post_feedforward_layernorm.weight"), &[HIDDEN], norm_mean, 0.2)?;
        }
    }
    w.put("model.norm.weight", &[HIDDEN], norm_mean, 0.2)?;
    if c["tie_word_embeddings"] == false {
        w.linear("lm_head", VOCAB, HIDDEN)?;
    }
    Ok(w.out)
}

/// Tensors filled in order from one seeded generator.
struct Seeded {
    rng: Rng,
    out: HashMap<String, Tensor>,
}

impl Seeded {
    /// `name` of `shape`, each value `mean + std * N(0, 1)`.
    fn put(&mut self, name: &str, shape: &[usize], mean: f64, std: f64) -> Result<(), Error> {
        let len = shape.iter().product();
        let values: Vec<f32> = (0..len).map(|_| (mean + std * self.rng.normal()) as f32).collect();
        self.out.insert(name.to_string(), Tensor::from_vec(values, shape, &Device::Cpu)?);
        Ok(())
    }

    fn linear(&mut self, name: &str, outputs: usize, inputs: usize) -> Result<(), Error> {
        self.put(&format!("{name}.weight"), &[outputs, inputs], 0.0, 1.0 / (inputs as f64).sqrt())
    }
}

/// Writes `f`'s files into `dir` and returns the weights as stored (rounded to its dtype), widened
/// back to f32 for the reference.
pub fn save(f: &Fixture, dir: &Path, seed: u64) -> Result<HashMap<String, Tensor>, Error> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("config.json"), serde_json::to_string_pretty(&f.config)? + "\n")?;
    let stored: HashMap<String, Tensor> =
        weights(f, seed)?.into_iter().map(|(k, t)| Ok((k, t.to_dtype(f.dtype)?))).collect::<Result<_, Error>>()?;
    candle_core::safetensors::save(&stored, dir.join("model.safetensors"))?;
    stored.into_iter().map(|(k, t)| Ok((k, t.to_dtype(DType::F32)?))).collect()
}

/// The last position's logits of `ids` by candle-transformers' model of `f`'s family.
pub fn last_logits(f: &Fixture, weights: &HashMap<String, Tensor>, ids: &[u32]) -> Result<Vec<f32>, Error> {
    let dev = Device::Cpu;
    let vb = VarBuilder::from_tensors(weights.clone(), DType::F32, &dev);
    let input = Tensor::new(ids, &dev)?.unsqueeze(0)?;
    let text = serde_json::to_string(&f.config)?;
    let logits = match f.config["model_type"].as_str() {
        Some("llama") => {
            let cfg = serde_json::from_str::<llama::LlamaConfig>(&text)?.into_config(false);
            let model = llama::Llama::load(vb, &cfg)?;
            let mut cache = llama::Cache::new(false, DType::F32, &cfg, &dev)?;
            model.forward(&input, 0, &mut cache)?
        }
        Some("mistral") => {
            let mut cfg: mistral::Config = serde_json::from_str(&text)?;
            // candle's Mistral lets a query see `sliding_window + 1` keys (itself and that many
            // before it, as transformers once did); transformers and the app see `sliding_window`.
            cfg.sliding_window = cfg.sliding_window.map(|w| w - 1);
            mistral::Model::new(&cfg, vb)?.forward(&input, 0)?
        }
        Some("qwen2") => {
            let cfg: qwen2::Config = serde_json::from_str(&text)?;
            qwen2::ModelForCausalLM::new(&cfg, vb)?.forward(&input, 0)?
        }
        Some("qwen3") => {
            let cfg: qwen3::Config = serde_json::from_str(&text)?;
            qwen3::ModelForCausalLM::new(&cfg, vb)?.forward(&input, 0)?
        }
        Some("gemma3_text") => {
            let mut cfg: gemma3::Config = serde_json::from_str(&text)?;
            // As Mistral's: candle's window is one key wider than transformers'.
            cfg.sliding_window -= 1;
            gemma3::Model::new(false, &cfg, vb)?.forward(&input, 0)?
        }
        other => return Err(format!("no reference model for {other:?}").into()),
    };
    Ok(logits.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?)
}

/// The reference entry of one input: ids, log-sum-exp, top ten, every 16th logit.
pub fn summary(text: &str, ids: &[u32], logits: &[f32]) -> Value {
    let round = |v: f32| (f64::from(v) * 1e5).round() / 1e5;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = f64::from(max) + logits.iter().map(|&v| (f64::from(v) - f64::from(max)).exp()).sum::<f64>().ln();
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    json!({
        "text": text,
        "ids": ids,
        "lse": (lse * 1e5).round() / 1e5,
        "top10": order[..10].iter().map(|&i| json!([i, round(logits[i])])).collect::<Vec<_>>(),
        "every16": logits.iter().step_by(16).map(|&v| round(v)).collect::<Vec<_>>(),
    })
}
