//! Import of the realistic and malformed `config.json` files in `tests/data/configs/`.

use super::hf_import::{ImportError, Imported, import_hf_config};
use super::presets::{preset, preset_info};
use crate::model::config::{CrossLayerSharing, FfnKind, Model, Positional};
use crate::model::dtype::DType;
use crate::model::kv_cache::{kv_bytes_per_token, kv_total_bytes};
use crate::model::params::{attn_params, model_params};
use crate::model::schedule::LayerKind;

pub(super) fn read(name: &str) -> String {
    let path = format!("{}/tests/data/configs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub(super) fn import(name: &str) -> Imported {
    import_hf_config(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The imported model matches the preset in every field the arithmetic reads.
fn assert_matches_preset(name: &str, id: &str) {
    let imported = import(name).model;
    let p = preset(id).unwrap_or_else(|| panic!("{id}"));
    let mut a: Model = imported.clone();
    a.id.clone_from(&p.id);
    a.name.clone_from(&p.name);
    assert_eq!(&a, p, "{name} vs {id}");
    for n in [1u64, 4096, 131_072] {
        assert_eq!(kv_total_bytes(&imported, n, DType::Fp16), kv_total_bytes(p, n, DType::Fp16), "{name} at {n}");
    }
    assert_eq!(model_params(&imported), model_params(p), "{name}");
}

/// Every preset but the 2017 Transformer: that model was released with tensor2tensor's settings, not
/// as a Hugging Face `config.json` (and the importer refuses encoder-decoder configs).
#[test]
fn real_configs_reproduce_presets() {
    for (file, id) in [
        ("llama-2-7b.json", "llama-2-7b"),
        ("llama-2-70b.json", "llama-2-70b"),
        ("llama-3-8b.json", "llama-3-8b"),
        ("llama-3.1-8b.json", "llama-3.1-8b"),
        ("llama-3-70b.json", "llama-3-70b"),
        ("mistral-7b-v0.1.json", "mistral-7b"),
        ("qwen3-8b.json", "qwen3-8b"),
        ("gemma-3-27b.json", "gemma-3-27b"),
        ("gemma-4-12b.json", "gemma-4-12b"),
        ("gemma-4-e4b.json", "gemma-4-e4b"),
        ("deepseek-v2.json", "deepseek-v2"),
        ("deepseek-v3.json", "deepseek-v3"),
        ("gpt2.json", "gpt2-small"),
        ("llama-4-scout.json", "llama-4-scout"),
        ("llama-4-maverick.json", "llama-4-maverick"),
    ] {
        assert_matches_preset(file, id);
    }
}

#[test]
fn report_lists_fields_and_assumptions() {
    let imp = import("gemma-4-12b.json");
    let used = |k: &str| imp.report.used.iter().find(|(p, _)| p == k).map(|(_, v)| v.clone());
    assert_eq!(used("text_config.global_head_dim").as_deref(), Some("512"));
    assert_eq!(used("text_config.attention_k_eq_v").as_deref(), Some("true"));
    assert_eq!(used("text_config.num_global_key_value_heads").as_deref(), Some("1"));
    assert!(used("text_config.layer_types").is_some());
    assert_eq!(imp.report.model_type, "gemma4_text");

    let scout = import("llama-4-scout.json");
    assert!(scout.report.assumed.iter().any(|a| a.contains("every 4th layer")));
    assert_eq!(scout.model.global_positional, Some(Positional::NoPe));

    let gpt2 = import("gpt2.json");
    assert!(gpt2.report.used.iter().any(|(p, v)| p == "n_embd" && v == "768"));
    assert!(gpt2.report.assumed.iter().any(|a| a.starts_with("intermediate_size")));
}

#[test]
fn rope_types_are_read_or_named() {
    // Gemma 3: rope_scaling {linear, 8} belongs to the global layers (rope_theta), not the local ones.
    let g3 = import("gemma-3-27b.json").model;
    assert_eq!(g3.positional, Positional::rope(10_000.0));
    assert_eq!(
        g3.global_positional,
        Some(Positional::Rope { theta: 1e6, partial_rotary_factor: 1.0, proportional: false, linear_factor: 8.0 })
    );
    // Gemma 4: the full-attention layers' "proportional" type.
    let g4 = import("gemma-4-12b.json").model;
    assert!(matches!(g4.global_positional, Some(Positional::Rope { proportional: true, .. })));
    // Llama 4's llama3 scaling is not modelled, and the report says so.
    let scout = import("llama-4-scout.json");
    assert!(scout.report.warnings.iter().any(|w| w.contains("\"llama3\" is not modelled")), "{:?}", scout.report);
    assert_eq!(scout.model.positional, Positional::rope(500_000.0));
}

#[test]
fn llama_3_1_is_llama_3_with_a_longer_context_and_names_its_unmodelled_scaling() {
    // Same layout as Llama 3 8B: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes
    // per token, 8,030,261,248 parameters; only max_position_embeddings differs (131,072 against 8,192).
    let imp = import("llama-3.1-8b.json");
    let (long, short) = (&imp.model, preset("llama-3-8b").unwrap());
    assert_eq!(kv_bytes_per_token(long, DType::Fp16), Ok(131_072));
    assert_eq!(model_params(long), model_params(short));
    assert_eq!((long.max_position_embeddings, short.max_position_embeddings), (131_072, 8192));
    assert_eq!(long.positional, Positional::rope(500_000.0));
    assert!(imp.report.warnings.iter().any(|w| w.contains("\"llama3\" is not modelled")), "{:?}", imp.report);
    assert!(preset_info("llama-3.1-8b").unwrap().notes.contains("rope_scaling"));
}

#[test]
fn qwen2_has_qkv_bias_and_ignores_disabled_window() {
    let imp = import("qwen2-7b.json");
    let m = &imp.model;
    assert!(m.schedule.layers().iter().all(|k| k.is_global()));
    assert!(imp.report.warnings.iter().any(|w| w.contains("use_sliding_window")));
    // 28 layers * 4 kv heads * 2 * 128 * 2 bytes = 57,344
    assert_eq!(kv_bytes_per_token(m, DType::Fp16), Ok(57_344));
    // Q 3584*3584 (12,845,056) + K,V 3584*512 (1,835,008) each + O 12,845,056
    // + biases 3584 + 512 + 512 = 29,364,736
    assert_eq!(attn_params(m, LayerKind::Global).total(), 29_364_736);
}

#[test]
fn gemma2_alternates() {
    let m = import("gemma-2-9b.json").model;
    assert_eq!(m.schedule.summary(), "1 sliding : 1 global");
    assert_eq!(m.schedule.kind(0), Some(LayerKind::Sliding { window_tokens: 4096 }));
    assert_eq!(m.ffn_kind, FfnKind::GeGlu);
    // 42 layers * 8 kv heads * 2 * 256 * 2 bytes = 344,064 per token
    assert_eq!(kv_bytes_per_token(&m, DType::Fp16), Ok(344_064));
    // 8192: 21 sliding * 8,192 B * 4096 + 21 global * 8,192 B * 8192 = 704,643,072 + 1,409,286,144
    assert_eq!(kv_total_bytes(&m, 8192, DType::Fp16), Ok(2_113_929_216));
    assert_eq!(m.cross_layer, CrossLayerSharing::None);
}

#[test]
fn malformed_configs_are_clear_errors() {
    let expect = |file: &str| import_hf_config(&read(file)).err().unwrap_or_else(|| panic!("{file} imported"));
    assert!(matches!(expect("bad-truncated.json"), ImportError::Json(_)));
    assert_eq!(expect("bad-not-object.json"), ImportError::NotAnObject);
    let e = expect("bad-wrong-types.json");
    assert!(e.to_string().contains("num_hidden_layers") && e.to_string().contains("not a number"), "{e}");
    assert!(expect("bad-zero-heads.json").to_string().contains("at least 1"));
    assert!(expect("bad-negative.json").to_string().contains("negative"));
    assert!(expect("bad-huge.json").to_string().contains("intermediate_size"));
    assert!(expect("bad-heads-not-divisible.json").to_string().contains("cannot be split"));
    assert!(expect("bad-layer-types.json").to_string().contains("mystery_attention"));
    assert!(expect("bad-mla-rank-string.json").to_string().contains("kv_lora_rank"));
}

#[test]
fn every_file_imports_or_errors_without_panicking() {
    let dir = format!("{}/tests/data/configs", env!("CARGO_MANIFEST_DIR"));
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
    let mut count = 0;
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let name = entry.file_name().to_string_lossy().into_owned();
        let result = import_hf_config(&text);
        // `bad-`: malformed on purpose; `refused-`: a real file whose settings the arithmetic does not
        // implement, refused with the reason rather than imported wrong.
        let refused = name.starts_with("refused-");
        assert_eq!(result.is_err(), name.starts_with("bad-") || refused, "{name}: {result:?}");
        assert!(!refused || matches!(result, Err(ImportError::Unsupported(_))), "{name}: {result:?}");
        // Truncations of every file never panic either.
        for cut in (0..text.len()).step_by(97) {
            if text.is_char_boundary(cut) {
                let _ = import_hf_config(&text[..cut]);
            }
        }
        count += 1;
    }
    assert!(count >= 20);
}

/// Keys of published files that look like attention or cache settings (by the pattern below) but that
/// the import may leave unread, each with why; a key it checks against one it reads is checked below.
const UNREAD_AND_WHY: &[(&str, &str)] = &[
    ("chunk_size", "the SSD scan's chunk length in prefill: the state and the cache do not depend on it"),
    ("mamba_chunk_size", "the SSD scan's chunk length in prefill: the state and the cache do not depend on it"),
    ("attention_softmax_in_fp32", "the softmax's arithmetic precision: the same probabilities"),
    (
        "apply_query_key_layer_scaling",
        "ChatGLM divides scores by the layer number and multiplies back: the same probabilities",
    ),
    ("layernorm_epsilon", "a norm's epsilon"),
    ("post_layer_norm", "whether a norm follows the stack: hidden_size parameters, not attention or cache"),
    ("mamba_inner_layernorms", "norms inside Jamba's Mamba mixer: parameters, not the state"),
    ("original_rope", "how positions are rotated: positions change neither the cache nor the sizes"),
    ("rope_interleave", "how positions are rotated: positions change neither the cache nor the sizes"),
    ("indexer_rope_interleave", "how positions are rotated: positions change neither the cache nor the sizes"),
    ("mrope_interleaved", "how positions are rotated: positions change neither the cache nor the sizes"),
    ("mrope_section", "how positions are split between time, height and width (M-RoPE): not the cache or sizes"),
    ("use_rotary_pos_emb", "true: the rotary positions the import reads"),
    (
        "rope_theta",
        "a position setting of a family whose positions come from other fields or are none: not the cache or sizes",
    ),
    (
        "partial_rotary_factor",
        "a position setting of a family whose positions come from other fields or are none: not the cache or sizes",
    ),
    ("max_window_layers", "read only with use_sliding_window true (schedule.rs), which no file leaving it unread has"),
    ("parallel_attn", "with new_decoder_architecture the block's norms come from num_ln_in_parallel_attn (block.rs)"),
    (
        "cache_implementation",
        "which cache class transformers builds: the KV view's sliding note says what a static one allocates",
    ),
    ("_sliding_window_pattern", "layer_types lists every layer's kind, and the report says it was read instead"),
    ("vocab_size_per_layer_input", "the per-layer embeddings' rows: vocab_size, which the import reads, in every file"),
    ("chunk_size_feed_forward", "the feed-forward's chunking in training: not attention"),
    ("use_unified_vision_chunk", "how images are cut into chunks: not the language model's attention"),
    ("_attn_implementation_autoset", "which kernel runs attention"),
    ("attn_impl", "which kernel runs attention"),
    ("attn_mode", "which kernel runs RWKV's recurrence"),
    ("qk_head_dim", "qk_nope_head_dim + qk_rope_head_dim, which the import reads"),
    ("mlp_layer_types", "which layers' FFN is dense: first_k_dense_replace, which the import reads, says the same"),
    ("kv_channels", "Zamba2Config keeps it; its attention sizes heads by attention_head_dim, 2 x hidden_size / heads"),
    ("hybrid_layer_ids", "the positions of layers_block_type's hybrid layers, which the import reads"),
    ("n_mamba_heads", "how the Mamba state is split into heads: heads x head size is the inner width either way"),
    ("mamba_headdim", "how the Mamba state is split into heads: heads x head size is the inner width either way"),
    ("num_heads", "LFM2: num_attention_heads, which the import reads"),
    ("sliding_window_size", "Gemma 2's second name for sliding_window, which the import reads"),
];

/// The corpus's unread keys: none names an attention or cache setting (a key about heads, windows,
/// chunks, positions, the KV cache, latents or layer kinds) that the import left unread without a
/// reason in [`UNREAD_AND_WHY`]; a new one fails until it is read, refused, warned of, or listed there.
/// The reasons that say a key repeats one the import reads are checked on each file.
#[test]
fn no_published_file_leaves_an_attention_or_cache_setting_unread() {
    let pattern = ["attn", "attention", "head", "window", "chunk", "rope", "rotary", "kv", "cache", "latent", "layer"];
    let dir = format!("{}/tests/data/configs", env!("CARGO_MANIFEST_DIR"));
    let (mut unexplained, mut seen) = (Vec::new(), std::collections::BTreeSet::new());
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}")).flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let Ok(imported) = import_hf_config(&text) else { continue };
        let file: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        for path in &imported.report.unread {
            let key = path.rsplit('.').next().unwrap_or(path);
            if !pattern.iter().any(|p| key.to_lowercase().contains(p)) {
                continue;
            }
            if UNREAD_AND_WHY.iter().any(|(k, _)| *k == key) {
                seen.insert(key.to_string());
                repeats_what_is_read(&name, &file, path);
            } else {
                unexplained.push(format!("{name}: {path}"));
            }
        }
    }
    assert!(unexplained.is_empty(), "unread without a reason:\n{}", unexplained.join("\n"));
    // Every reason still applies to some file (a stale entry would hide nothing).
    let stale: Vec<&str> = UNREAD_AND_WHY.iter().map(|(k, _)| *k).filter(|k| !seen.contains(*k)).collect();
    assert!(stale.is_empty(), "reasons for keys no file leaves unread: {stale:?}");
}

/// Where a reason says an unread key repeats (or depends on) one the import reads, the file agrees.
fn repeats_what_is_read(name: &str, file: &serde_json::Value, path: &str) {
    let section = match path.rsplit_once('.') {
        Some((parent, _)) => parent.split('.').fold(file, |v, k| &v[k]),
        None => file,
    };
    let at = |k: &str| &section[k];
    let key = path.rsplit('.').next().unwrap_or(path);
    match key {
        "max_window_layers" => assert_ne!(at("use_sliding_window"), &serde_json::json!(true), "{name}"),
        "vocab_size_per_layer_input" => assert_eq!(at(key), at("vocab_size"), "{name}"),
        "qk_head_dim" => {
            let sum = at("qk_nope_head_dim").as_u64().unwrap_or(0) + at("qk_rope_head_dim").as_u64().unwrap_or(0);
            assert_eq!(at(key).as_u64(), Some(sum), "{name}");
        }
        "num_heads" => assert_eq!(at(key), at("num_attention_heads"), "{name}"),
        "sliding_window_size" => assert_eq!(at(key), at("sliding_window"), "{name}"),
        "use_rotary_pos_emb" => assert_eq!(at(key), &serde_json::json!(true), "{name}"),
        "hybrid_layer_ids" => {
            let kinds = at("layers_block_type").as_array().cloned().unwrap_or_default();
            let hybrid: Vec<u64> = (0..kinds.len() as u64).filter(|&i| kinds[i as usize] == "hybrid").collect();
            let ids: Vec<u64> = at(key).as_array().into_iter().flatten().filter_map(|v| v.as_u64()).collect();
            assert_eq!(ids, hybrid, "{name}");
        }
        "mlp_layer_types" => {
            let kinds = at(key).as_array().cloned().unwrap_or_default();
            let dense = kinds.iter().take_while(|k| *k == "dense").count() as u64;
            assert_eq!(Some(dense), at("first_k_dense_replace").as_u64(), "{name}");
            assert!(kinds[dense as usize..].iter().all(|k| k == "sparse"), "{name}");
        }
        _ => {}
    }
}
