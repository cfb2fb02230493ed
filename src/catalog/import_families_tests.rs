//! Import of the families beyond Llama (Falcon, ChatGLM/GLM-4, MPT, BLOOM, GPT-NeoX,
//! Phi, StarCoder2, Cohere, OLMo, GPT-OSS, Gemma 3n, a multimodal wrapper) from real `config.json` files in
//! `tests/data/configs/`, each with its KV cache worked out by hand beside the assertion.

use serde_json::{Value, json};

use super::hf_import::{ImportError, Imported, import_hf_value};
use super::import_files_tests::{import, read};
use crate::model::config::{AttnGeometry, CrossLayerSharing, FfnKind, NormKind, Positional};
use crate::model::dtype::DType::Fp16;
use crate::model::kv_cache::{kv_bytes_per_token, kv_total_bytes};
use crate::model::schedule::LayerKind;

fn kv(n_kv_heads: u32, head_dim: u32) -> AttnGeometry {
    AttnGeometry { n_kv_heads, head_dim, k_eq_v: false }
}

/// The report's readings, used fields and assumptions, for messages and searches.
pub(super) fn said(imp: &Imported, words: &str) -> bool {
    let r = &imp.report;
    r.readings.iter().chain(&r.assumed).chain(&r.warnings).any(|s| s.contains(words))
}

#[test]
fn falcon_7b_is_multi_query() {
    let imp = import("falcon-7b.json");
    let m = &imp.model;
    assert_eq!(m.attn, kv(1, 64));
    // 32 layers * 1 KV head * 2 (K, V) * 64 * 2 bytes = 8,192 per token
    assert_eq!(kv_bytes_per_token(m, Fp16), Ok(8_192));
    // Falcon's 2048-token context: 8,192 * 2048 = 16,777,216
    assert_eq!(m.max_position_embeddings, 2048);
    assert_eq!(kv_total_bytes(m, 2048, Fp16), Ok(16_777_216));
    assert!(said(&imp, "multi_query is true"), "{:?}", imp.report);
    // The published file also lists num_kv_heads = 71, which Falcon ignores without the new architecture.
    assert!(said(&imp, "num_kv_heads = 71 ignored"), "{:?}", imp.report);
    // A plain 4x GELU MLP, one LayerNorm per (parallel) block, no biases, tied embeddings.
    assert_eq!((m.ffn_kind, m.ffn_size, m.norm, m.norms_per_layer), (FfnKind::Mlp, 18_176, NormKind::LayerNorm, 1));
    assert!(m.tie_embeddings && !m.biases.qkv);
}

#[test]
fn falcon_40b_and_180b_are_grouped_not_multi_query() {
    // Both files also say multi_query: true, which the new decoder architecture ignores.
    for file in ["falcon-40b.json", "falcon-40b-refinedweb.json"] {
        let imp = import(file);
        let m = &imp.model;
        assert_eq!(m.attn, kv(8, 64), "{file}");
        // 60 layers * 8 KV heads * 2 * 64 * 2 bytes = 122,880 per token (not 15,360 as one KV head)
        assert_eq!(kv_bytes_per_token(m, Fp16), Ok(122_880), "{file}");
        // 2048 tokens: 122,880 * 2048 = 251,658,240
        assert_eq!(kv_total_bytes(m, 2048, Fp16), Ok(251_658_240), "{file}");
        assert_eq!(m.norms_per_layer, 2, "{file}: ln_attn and ln_mlp");
    }
    let forty = import("falcon-40b.json");
    assert!(said(&forty, "not 1 from multi_query"), "{:?}", forty.report);
    let old = import("falcon-40b-refinedweb.json");
    assert!(old.report.used.iter().any(|(p, v)| p == "n_head_kv" && v == "8"));

    let imp = import("falcon-180b.json");
    assert_eq!(imp.model.attn, kv(8, 64));
    // 80 layers * 8 KV heads * 2 * 64 * 2 bytes = 163,840 per token; * 2048 = 335,544,320
    assert_eq!(kv_bytes_per_token(&imp.model, Fp16), Ok(163_840));
    assert_eq!(kv_total_bytes(&imp.model, 2048, Fp16), Ok(335_544_320));
}

#[test]
fn chatglm_groups_are_kv_heads() {
    let imp = import("chatglm3-6b.json");
    let m = &imp.model;
    assert_eq!((m.n_layers(), m.n_q_heads, m.attn), (28, 32, kv(2, 128)));
    // 28 layers * 2 KV heads * 2 * 128 * 2 bytes = 28,672 per token (not MHA's 458,752)
    assert_eq!(kv_bytes_per_token(m, Fp16), Ok(28_672));
    // seq_length 8192: 28,672 * 8192 = 234,881,024
    assert_eq!(m.max_position_embeddings, 8192);
    assert_eq!(kv_total_bytes(m, 8192, Fp16), Ok(234_881_024));
    assert!(said(&imp, "multi_query_group_num"), "{:?}", imp.report);
    assert_eq!((m.ffn_kind, m.ffn_size, m.vocab_size, m.norm), (FfnKind::SwiGlu, 13_696, 65_024, NormKind::RmsNorm));
    // Q, K and V carry biases (add_qkv_bias); the other linears do not (add_bias_linear).
    assert!(m.biases.qkv && !m.biases.o && !m.biases.ffn);
    assert!(matches!(m.positional, Positional::Rope { theta: 10_000.0, partial_rotary_factor: 0.5, .. }));

    let imp = import("glm-4-9b-chat.json");
    let m = &imp.model;
    assert_eq!((m.n_layers(), m.attn, m.vocab_size), (40, kv(2, 128), 151_552));
    // 40 layers * 2 KV heads * 2 * 128 * 2 bytes = 40,960 per token
    assert_eq!(kv_bytes_per_token(m, Fp16), Ok(40_960));
    // seq_length 131,072: 40,960 * 131,072 = 5,368,709,120 (exactly 5 GiB)
    assert_eq!(kv_total_bytes(m, 131_072, Fp16), Ok(5_368_709_120));
    // rope_ratio 500: theta 10000 * 500
    assert!(matches!(m.positional, Positional::Rope { theta: 5_000_000.0, .. }));
}

#[test]
fn mpt_reads_its_own_names() {
    let imp = import("mpt-7b.json");
    let m = &imp.model;
    assert_eq!((m.n_layers(), m.d_model, m.n_q_heads, m.attn), (32, 4096, 32, kv(32, 128)));
    // 32 layers * 32 KV heads * 2 * 128 * 2 bytes = 524,288 per token
    assert_eq!(kv_bytes_per_token(m, Fp16), Ok(524_288));
    // max_seq_len 2048: 524,288 * 2048 = 1,073,741,824 (1 GiB)
    assert_eq!(kv_total_bytes(m, 2048, Fp16), Ok(1_073_741_824));
    // expansion_ratio 4 * d_model 4096; no_bias; ALiBi rather than learned positions.
    assert_eq!((m.ffn_kind, m.ffn_size), (FfnKind::Mlp, 16_384));
    assert!(!m.biases.qkv && !m.biases.o && !m.biases.ffn && m.tie_embeddings);
    assert_eq!(m.positional, Positional::Alibi);
    assert!(said(&imp, "ALiBi"), "{:?}", imp.report);
    // Without ALiBi, MPT learns a table of max_seq_len positions.
    let learned = mpt_with(json!({"alibi": false})).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(learned.model.positional, Positional::Learned { max_positions: 2048 });
}

#[test]
fn bloom_reads_its_own_names_and_uses_alibi() {
    let imp = import("bloom-560m.json");
    let m = &imp.model;
    // n_layer, hidden_size, n_head; head dim 1024 / 16 = 64, one KV head per query head.
    assert_eq!((m.n_layers(), m.d_model, m.n_q_heads, m.attn), (24, 1024, 16, kv(16, 64)));
    // 24 layers * 16 KV heads * 2 (K, V) * 64 * 2 bytes = 98,304 per token
    assert_eq!(kv_bytes_per_token(m, Fp16), Ok(98_304));
    // No context length in the file: BLOOM's 2048-token training length; 98,304 * 2048 = 201,326,592
    assert_eq!(m.max_position_embeddings, 2048);
    assert_eq!(kv_total_bytes(m, 2048, Fp16), Ok(201_326_592));
    assert_eq!(m.positional, Positional::Alibi);
    assert!(said(&imp, "BLOOM always uses ALiBi"), "{:?}", imp.report);
    // A 4x GELU MLP, LayerNorm, biases on every linear, tied embeddings.
    assert_eq!((m.ffn_kind, m.ffn_size, m.norm, m.vocab_size), (FfnKind::Mlp, 4096, NormKind::LayerNorm, 250_880));
    assert!(m.biases.qkv && m.biases.o && m.biases.ffn && m.tie_embeddings);
    // embeddings 250,880 * 1024 = 256,901,120
    // per layer: attention 4 * 1024^2 + 4 * 1024 = 4,198,400; MLP 2 * 1024 * 4096 + 4096 + 1024 =
    //   8,393,728; two LayerNorms 2 * 2048 = 4,096; together 12,596,224, * 24 = 302,309,376
    // final LayerNorm 2,048: total 559,212,544, the published 559,214,592 less the 2,048 of the
    // LayerNorm after the embeddings, which the report says is not counted, and by how much.
    assert_eq!(crate::model::params::model_params(m).total(), 559_212_544);
    assert!(
        said(
            &imp,
            "The parameter total is 559,212,544, under the checkpoint's 559,214,592 by 2,048: BLOOM's word_embeddings_layernorm"
        ),
        "{:?}",
        imp.report
    );
}

#[test]
fn bloom_n_embed_overrides_hidden_size() {
    let mut v: Value = serde_json::from_str(&read("bloom-560m.json")).unwrap_or_else(|e| panic!("{e}"));
    // Older BLOOM files say n_embed and num_attention_heads (BloomConfig maps both).
    if let Some(o) = v.as_object_mut() {
        o.remove("hidden_size");
        o.remove("n_head");
        o.insert("n_embed".into(), json!(1024));
        o.insert("num_attention_heads".into(), json!(16));
    }
    let older = import_hf_value(&v).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(older.model, import("bloom-560m.json").model);
    // Both present: n_embed wins, as in BloomConfig. 24 * 16 * 2 * 128 * 2 bytes = 196,608 per token
    v["hidden_size"] = json!(999);
    v["n_embed"] = json!(2048);
    let both = import_hf_value(&v).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((both.model.d_model, both.model.attn.head_dim), (2048, 128));
    assert_eq!(kv_bytes_per_token(&both.model, Fp16), Ok(196_608));
}

#[test]
fn falcon_with_alibi_is_alibi_and_without_is_rope() {
    let mut v: Value = serde_json::from_str(&read("falcon-7b.json")).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(import_hf_value(&v).map(|i| i.model.positional), Ok(Positional::Rope { .. })));
    v["alibi"] = json!(true);
    let imp = import_hf_value(&v).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(imp.model.positional, Positional::Alibi);
    assert!(said(&imp, "positions: ALiBi"), "{:?}", imp.report);
    // The cache is unchanged: ALiBi stores nothing. 32 layers * 1 KV head * 2 * 64 * 2 bytes = 8,192
    assert_eq!(kv_bytes_per_token(&imp.model, Fp16), Ok(8_192));
}

/// MPT-7B's file with its attention switched, as llm-foundry spells the other two types.
fn mpt_with(attn: Value) -> Result<Imported, ImportError> {
    let mut v: Value = serde_json::from_str(&read("mpt-7b.json")).unwrap_or_else(|e| panic!("{e}"));
    if let (Some(cfg), Some(extra)) = (v["attn_config"].as_object_mut(), attn.as_object()) {
        cfg.extend(extra.clone());
    }
    import_hf_value(&v)
}

#[test]
fn mpt_grouped_and_multi_query_variants() {
    let gqa =
        mpt_with(json!({"attn_type": "grouped_query_attention", "kv_n_heads": 8})).unwrap_or_else(|e| panic!("{e}"));
    // 32 layers * 8 KV heads * 2 * 128 * 2 bytes = 131,072 per token
    assert_eq!(kv_bytes_per_token(&gqa.model, Fp16), Ok(131_072));
    let mqa = mpt_with(json!({"attn_type": "multiquery_attention"})).unwrap_or_else(|e| panic!("{e}"));
    // 32 layers * 1 KV head * 2 * 128 * 2 bytes = 16,384 per token
    assert_eq!(kv_bytes_per_token(&mqa.model, Fp16), Ok(16_384));
    let missing = mpt_with(json!({"attn_type": "grouped_query_attention"})).err();
    assert!(missing.is_some_and(|e| e.to_string().contains("attn_config.kv_n_heads")));
    let unknown = mpt_with(json!({"attn_type": "sparse_attention"})).err();
    assert!(unknown.is_some_and(|e| e.to_string().contains("attn_config.attn_type")));
}

#[test]
fn gpt_neox_and_pythia_rotate_a_quarter() {
    let m = import("gpt-neox-20b.json").model;
    assert_eq!(m.attn, kv(64, 96));
    // 44 layers * 64 KV heads * 2 * 96 * 2 bytes = 1,081,344 per token; * 2048 = 2,214,592,512
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(1_081_344));
    assert_eq!(kv_total_bytes(&m, 2048, Fp16), Ok(2_214_592_512));
    assert_eq!(
        m.positional,
        Positional::Rope { theta: 10_000.0, partial_rotary_factor: 0.25, proportional: false, linear_factor: 1.0 }
    );
    assert_eq!((m.ffn_kind, m.norm), (FfnKind::Mlp, NormKind::LayerNorm));
    assert!(m.biases.qkv && m.biases.o && m.biases.ffn);

    let m = import("pythia-160m.json").model;
    // 12 layers * 12 KV heads * 2 * 64 * 2 bytes = 36,864 per token; * 2048 = 75,497,472
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(36_864));
    assert_eq!(kv_total_bytes(&m, 2048, Fp16), Ok(75_497_472));
}

#[test]
fn phi_1_and_2_are_partial_rotary_mha() {
    // Phi-1.5 writes num_key_value_heads: null, which means one per query head.
    let imp = import("phi-1_5.json");
    let m = &imp.model;
    assert_eq!(m.attn, kv(32, 64));
    assert!(said(&imp, "num_key_value_heads: absent"), "{:?}", imp.report);
    // 24 layers * 32 KV heads * 2 * 64 * 2 bytes = 196,608 per token; * 2048 = 402,653,184
    assert_eq!(kv_bytes_per_token(m, Fp16), Ok(196_608));
    assert_eq!(kv_total_bytes(m, 2048, Fp16), Ok(402_653_184));

    let m = import("phi-2.json").model;
    assert_eq!(m.attn, kv(32, 80));
    // 32 layers * 32 KV heads * 2 * 80 * 2 bytes = 327,680 per token; * 2048 = 671,088,640
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(327_680));
    assert_eq!(kv_total_bytes(&m, 2048, Fp16), Ok(671_088_640));
    assert!(matches!(m.positional, Positional::Rope { partial_rotary_factor: 0.4, .. }));
    // Attention and MLP in parallel from one LayerNorm; a plain GELU MLP with biases.
    assert_eq!((m.ffn_kind, m.norm, m.norms_per_layer), (FfnKind::Mlp, NormKind::LayerNorm, 1));
    assert!(m.biases.qkv && m.biases.o && m.biases.ffn);
}

#[test]
fn phi_3_slides_and_phi_4s_window_is_its_context() {
    let m = import("phi-3-mini-4k-instruct.json").model;
    assert_eq!(m.schedule.kind(0), Some(LayerKind::Sliding { window_tokens: 2047 }));
    // 32 layers * 32 KV heads * 2 * 96 * 2 bytes = 393,216 per token
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(393_216));
    // 4096 tokens, every layer keeps its last 2047: 393,216 * 2047 = 804,913,152
    assert_eq!(kv_total_bytes(&m, 4096, Fp16), Ok(804_913_152));
    assert_eq!(m.ffn_kind, FfnKind::SwiGlu);

    // Phi-4 writes a sliding_window as long as its context (16,384): every layer slides, and at
    // its context holds every token (see import_verbatim_vendor_tests).
    let m = import("phi-4.json").model;
    assert!(m.schedule.layers().iter().all(|k| *k == LayerKind::Sliding { window_tokens: 16_384 }));
    // 40 layers * 10 KV heads * 2 * 128 * 2 bytes = 204,800 per token; * 16,384 = 3,355,443,200
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(204_800));
    assert_eq!(kv_total_bytes(&m, 16_384, Fp16), Ok(3_355_443_200));
}

#[test]
fn starcoder2_slides_every_layer() {
    let m = import("starcoder2-15b.json").model;
    assert_eq!(m.attn, kv(4, 128));
    assert!(m.schedule.layers().iter().all(|k| *k == LayerKind::Sliding { window_tokens: 4096 }));
    // 40 layers * 4 KV heads * 2 * 128 * 2 bytes = 81,920 per token
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(81_920));
    // 16,384 tokens, each layer keeps 4096: 81,920 * 4096 = 335,544,320
    assert_eq!(kv_total_bytes(&m, 16_384, Fp16), Ok(335_544_320));
    assert_eq!((m.ffn_kind, m.norm), (FfnKind::Mlp, NormKind::LayerNorm));
    assert!(m.biases.qkv && m.biases.o && m.biases.ffn);
}

#[test]
fn cohere_and_olmo() {
    let m = import("command-r-v01.json").model;
    assert_eq!(m.attn, kv(64, 128));
    // 40 layers * 64 KV heads * 2 * 128 * 2 bytes = 1,310,720 per token; * 8192 = 10,737,418,240 (10 GiB)
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(1_310_720));
    assert_eq!(kv_total_bytes(&m, 8192, Fp16), Ok(10_737_418_240));
    assert!(m.tie_embeddings && m.norms_per_layer == 1 && m.norm == NormKind::LayerNormNoBias);

    let m = import("olmo-7b-hf.json").model;
    // 32 layers * 32 KV heads * 2 * 128 * 2 bytes = 524,288 per token; * 2048 = 1,073,741,824
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(524_288));
    assert_eq!(kv_total_bytes(&m, 2048, Fp16), Ok(1_073_741_824));
    assert_eq!(m.norm, NormKind::NonParametric);

    let m = import("olmo-2-1124-7b.json").model;
    // Same heads: 524,288 per token; its 4096-token context: 524,288 * 4096 = 2,147,483,648 (2 GiB)
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(524_288));
    assert_eq!(kv_total_bytes(&m, 4096, Fp16), Ok(2_147_483_648));
    assert!(m.qk_norm && m.norm == NormKind::RmsNorm);
    assert_eq!(m.positional, Positional::rope(500_000.0));
}

#[test]
fn multimodal_wrapper_imports_its_text_model() {
    let imp = import("mistral-small-3.1-24b.json");
    let m = &imp.model;
    // The vision tower's 24 layers and 16 heads are not the language model's.
    assert_eq!((m.n_layers(), m.n_q_heads, m.attn), (40, 32, kv(8, 128)));
    // 40 layers * 8 KV heads * 2 * 128 * 2 bytes = 163,840 per token
    assert_eq!(kv_bytes_per_token(m, Fp16), Ok(163_840));
    // 131,072 tokens: 163,840 * 131,072 = 21,474,836,480 (20 GiB)
    assert_eq!(kv_total_bytes(m, 131_072, Fp16), Ok(21_474_836_480));
    assert!(said(&imp, "read from text_config"), "{:?}", imp.report);
    assert!(said(&imp, "\"mistral3\" wrapper"), "{:?}", imp.report);
    assert_eq!(imp.report.model_type, "mistral");
}

#[test]
fn unknown_family_with_standard_fields_imports() {
    let v = json!({"model_type": "someday", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
                    "num_key_value_heads": 2});
    let m = import_hf_value(&v).unwrap_or_else(|e| panic!("{e}")).model;
    // 4 layers * 2 KV heads * 2 * 32 * 2 bytes = 1,024 per token
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(1_024));
    let e = import_hf_value(&json!({"model_type": "someday", "hidden_size": 256, "num_attention_heads": 8}));
    assert_eq!(e.err(), Some(ImportError::Missing("num_hidden_layers")));
}

#[test]
fn llava_relies_on_the_llama_defaults() {
    // Llava 1.5 nests a text_config with no sizes at all: transformers fills in LlamaConfig's.
    let imp = import("llava-1.5-7b.json");
    let m = &imp.model;
    assert_eq!((m.n_layers(), m.d_model, m.n_q_heads, m.attn), (32, 4096, 32, kv(32, 128)));
    assert_eq!((m.ffn_size, m.vocab_size, m.max_position_embeddings), (11_008, 32_064, 4096));
    // 32 layers * 32 KV heads * 2 * 128 * 2 bytes = 524,288 per token; * 4096 = 2,147,483,648 (2 GiB)
    assert_eq!(kv_bytes_per_token(m, Fp16), Ok(524_288));
    assert_eq!(kv_total_bytes(m, 4096, Fp16), Ok(2_147_483_648));
    assert!(
        said(&imp, "text_config.num_hidden_layers: absent, so 32 (transformers' llama default)"),
        "{:?}",
        imp.report
    );
    assert!(said(&imp, "\"llava\" wrapper"), "{:?}", imp.report);
}

#[test]
fn gpt_oss_alternates_sliding_and_full_layers() {
    for (file, layers, experts) in [("gpt-oss-20b.json", 24, 32), ("gpt-oss-120b.json", 36, 128)] {
        let imp = import(file);
        let m = &imp.model;
        assert_eq!((m.n_layers(), m.d_model, m.n_q_heads, m.attn), (layers, 2880, 64, kv(8, 64)), "{file}");
        assert_eq!(m.schedule.layers()[0], LayerKind::Sliding { window_tokens: 128 }, "{file}");
        assert_eq!(m.schedule.layers()[1], LayerKind::Global, "{file}");
        let moe = m.moe.unwrap_or_else(|| panic!("{file}: no MoE"));
        assert_eq!((moe.n_routed_experts, moe.n_active_experts, moe.expert_ffn_size), (experts, 4, 2880), "{file}");
        assert!(m.biases.qkv && m.biases.o && m.biases.ffn && m.attn_sinks && !m.tie_embeddings, "{file}");
        assert!(said(&imp, "\"yarn\" is not modelled"), "{:?}", imp.report);
    }
    // One layer: 8 KV heads * 2 (K, V) * 64 * 2 bytes = 2,048 bytes per token.
    // 20b: 24 layers * 2,048 = 49,152 per token. At 131,072 tokens the 12 full layers keep all of
    // them (12 * 2,048 * 131,072 = 3,221,225,472) and the 12 sliding ones 128
    // (12 * 2,048 * 128 = 3,145,728): 3,224,371,200.
    let m = import("gpt-oss-20b.json").model;
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(49_152));
    assert_eq!(kv_total_bytes(&m, 131_072, Fp16), Ok(3_224_371_200));
    // 120b: 36 layers * 2,048 = 73,728 per token; at 131,072 tokens
    // 18 * 2,048 * 131,072 = 4,831,838,208 plus 18 * 2,048 * 128 = 4,718,592: 4,836,556,800.
    let m = import("gpt-oss-120b.json").model;
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(73_728));
    assert_eq!(kv_total_bytes(&m, 131_072, Fp16), Ok(4_836_556_800));
}

#[test]
fn gemma_3n_counts_only_the_layers_that_store_a_cache() {
    for (file, layers, shared, ffn) in [("gemma-3n-e4b.json", 35, 15, 16_384), ("gemma-3n-e2b.json", 30, 10, 8192)] {
        let imp = import(file);
        let m = &imp.model;
        assert_eq!(imp.report.model_type, "gemma3n_text", "{file}");
        assert_eq!((m.n_layers(), m.d_model, m.n_q_heads, m.attn), (layers, 2048, 8, kv(2, 256)), "{file}");
        assert_eq!(m.cross_layer, CrossLayerSharing::ReuseLast { shared_layers: shared }, "{file}");
        // intermediate_size is a list with one (equal) width per layer.
        assert_eq!((m.ffn_kind, m.ffn_size, m.per_layer_input_dim), (FfnKind::GeGlu, ffn, 256), "{file}");
        assert!(said(&imp, "one FFN width per layer"), "{:?}", imp.report);
        assert!(said(&imp, "AltUp (altup_num_inputs = 4) and LAuReL (laurel_rank = 64)"), "{:?}", imp.report);
        // One layer: 2 KV heads * 2 (K, V) * 256 * 2 bytes = 2,048 bytes per token. Only the first
        // 35 - 15 = 20 (E4B) or 30 - 10 = 20 (E2B) layers store a cache, four patterns of 4 sliding
        // and 1 full: 20 * 2,048 = 40,960 per token (not 35 * 2,048 = 71,680 for E4B).
        assert_eq!(kv_bytes_per_token(m, Fp16), Ok(40_960), "{file}");
        // At 32,768 tokens: 4 full layers * 2,048 * 32,768 = 268,435,456 plus 16 sliding layers
        // * 2,048 * 512 = 16,777,216: 285,212,672.
        assert_eq!(kv_total_bytes(m, 32_768, Fp16), Ok(285_212_672), "{file}");
    }
    // Unequal per-layer widths are counted at the largest, with a warning.
    let mut v: Value = serde_json::from_str(&read("gemma-3n-e2b.json")).unwrap_or_else(|e| panic!("{e}"));
    v["text_config"]["intermediate_size"] = json!([8192, 4096]);
    let imp = import_hf_value(&v).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(imp.model.ffn_size, 8192);
    assert!(said(&imp, "different FFN widths"), "{:?}", imp.report);
    for bad in [json!([]), json!([8192, 0]), json!([8192, "x"])] {
        v["text_config"]["intermediate_size"] = bad;
        assert!(import_hf_value(&v).is_err());
    }
}

#[test]
fn encoders_and_encoder_decoders_are_refused_with_the_reason() {
    let t5 = json!({"model_type": "t5", "d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12,
        "num_heads": 12, "vocab_size": 32128, "is_encoder_decoder": true});
    let bart = json!({"model_type": "bart", "d_model": 768, "decoder_layers": 6, "decoder_attention_heads": 12,
        "vocab_size": 50265});
    let marian = json!({"model_type": "marian", "d_model": 512, "decoder_layers": 6, "decoder_attention_heads": 8});
    let whisper = json!({"architectures": ["WhisperForConditionalGeneration"], "is_encoder_decoder": true,
        "d_model": 384, "decoder_layers": 4, "decoder_attention_heads": 6});
    let bert = json!({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "vocab_size": 30522});
    let roberta = json!({"model_type": "xlm-roberta", "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "vocab_size": 250002});
    for (config, words) in [
        (t5, "encoder-decoder model (model_type t5)"),
        (bart, "encoder-decoder model (model_type bart)"),
        (marian, "encoder-decoder model (model_type marian)"),
        (whisper, "encoder-decoder model"),
        (bert, "encoder-only model (model_type bert)"),
        (roberta, "encoder-only model (model_type xlm_roberta)"),
    ] {
        match import_hf_value(&config) {
            Err(ImportError::Unsupported(why)) => assert!(why.contains(words), "{words}: {why}"),
            other => panic!("{words}: {other:?}"),
        }
    }
    // BERT set up as a causal decoder (BertLMHeadModel) caches like any decoder.
    let causal_bert = json!({"model_type": "bert", "is_decoder": true, "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522});
    // 12 layers * 2 * 768 * 2 B = 36,864 per token.
    assert_eq!(kv_bytes_per_token(&import_hf_value(&causal_bert).unwrap().model, Fp16), Ok(36_864));
}
