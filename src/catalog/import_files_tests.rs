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
