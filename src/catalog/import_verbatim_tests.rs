//! Configs copied byte for byte from the Hugging Face hub (sources in `tests/data/config-sources.md`),
//! each with its cache and parameter count worked out by hand beside the assertion.

use super::hf_import::{ImportError, import_hf_config};
use super::import_families_tests::said;
use super::import_files_tests::{import, read};
use crate::model::config::{FfnKind, Positional};
use crate::model::dtype::DType::{Bf16, Fp16};
use crate::model::kv_cache::{kv_bytes_per_token, kv_bytes_per_token_fp8_indexer, kv_total_bytes, state_bytes};
use crate::model::params::model_params;
use crate::model::schedule::LayerKind;

/// The hub writes `config.json` as `json.dumps(indent=2)` plus a newline; a file re-typed or
/// trimmed by hand would not have the hub's byte size.
fn hub_bytes(name: &str) -> usize {
    read(name).len()
}

#[test]
fn smollm_135m_by_hand() {
    // The hub lists this file at 724 bytes (HuggingFaceTB/SmolLM-135M, blob 08113ae).
    assert_eq!(hub_bytes("smollm-135m.json"), 724);
    let m = import("smollm-135m.json").model;
    // head_dim 576 / 9 = 64; 30 layers × 3 KV heads × 2 (K, V) × 64 × 2 B = 23,040 B per token
    assert_eq!(kv_bytes_per_token(&m, Fp16), Ok(23_040));
    // its 2,048-token context: 23,040 × 2,048 = 47,185,920 B
    assert_eq!((m.max_position_embeddings, kv_total_bytes(&m, 2048, Fp16)), (2048, Ok(47_185_920)));
    assert_eq!(state_bytes(&m), Ok(0));
    // embeddings 49,152 × 576 = 28,311,552 (tied); per layer Q 576² + K, V 576 × 192 each + O 576²
    // = 884,736, SwiGLU 3 × 576 × 1,536 = 2,654,208, two RMSNorms 1,152: 3,540,096 × 30 =
    // 106,202,880; final norm 576: 134,515,008, SmolLM-135M's published count.
    assert_eq!(model_params(&m).total(), 134_515_008);
    assert!(m.tie_embeddings && m.ffn_kind == FfnKind::SwiGlu);
}

#[test]
fn smollm_360m_and_smollm2_360m_by_hand() {
    // 725 bytes (HuggingFaceTB/SmolLM-360M, refs/pr/4 at 1182e7e) and 689 bytes (SmolLM2-360M, 3ce05f6).
    assert_eq!((hub_bytes("smollm-360m.json"), hub_bytes("smollm2-360m.json")), (725, 689));
    for (file, context, theta) in [("smollm-360m.json", 2048, 10_000.0), ("smollm2-360m.json", 8192, 100_000.0)] {
        let m = import(file).model;
        // head_dim 960 / 15 = 64; 32 layers × 5 KV heads × 2 × 64 × 2 B = 40,960 B per token
        assert_eq!(kv_bytes_per_token(&m, Bf16), Ok(40_960), "{file}");
        // full context: 40,960 × 2,048 = 83,886,080 B; 40,960 × 8,192 = 335,544,320 B
        let whole = if context == 2048 { 83_886_080 } else { 335_544_320 };
        assert_eq!(kv_total_bytes(&m, context, Bf16), Ok(whole), "{file}");
        assert_eq!(m.max_position_embeddings, context, "{file}");
        assert_eq!(m.positional, Positional::rope(theta), "{file}");
        // embeddings 49,152 × 960 = 47,185,920 (tied); per layer Q, O 960² each + K, V 960 × 320
        // each = 2,457,600, SwiGLU 3 × 960 × 2,560 = 7,372,800, norms 1,920: 9,832,320 × 32 =
        // 314,634,240; final norm 960: 361,821,120.
        assert_eq!(model_params(&m).total(), 361_821_120, "{file}");
    }
    // SmolLM2's own keys are listed, not silently dropped: `is_llama_config` unread, `rope_interleaved`
    // false (so unset).
    let report = import("smollm2-360m.json").report;
    assert_eq!(report.unread, ["is_llama_config"]);
    assert!(report.not_relevant.iter().any(|k| k == "rope_interleaved (unset)"), "{report:?}");
}

#[test]
fn qwen3_8b_is_the_hubs_text() {
    // The hub's layout of Qwen/Qwen3-8B's file (copied by the hub's "copy config.json" into
    // thejaminator/qwen-hook-layer-9, commit 478fb72): 30 lines, 729 bytes.
    assert_eq!(hub_bytes("qwen3-8b.json"), 729);
    assert_eq!(read("qwen3-8b.json").lines().count(), 30);
    let m = import("qwen3-8b.json").model;
    // 36 layers × 8 KV heads × 2 × 128 × 2 B = 147,456 B per token
    assert_eq!(kv_bytes_per_token(&m, Bf16), Ok(147_456));
}

/// (file, layers, cache bytes per token at 16 bits, recurrent state bytes): each worked out by hand
/// from the file's own fields in the comment above its row.
const BY_HAND: &[(&str, u32, u128, u128)] = &[
    // 80 layers × 8 KV heads × (8,192 / 64 = 128) × 2 (K, V) × 2 B
    ("llama-3.1-70b.json", 80, 327_680, 0),
    // 126 layers × 8 KV heads × (16,384 / 128 = 128) × 2 × 2 B
    ("llama-3.1-405b.json", 126, 516_096, 0),
    // 62 layers × 8 KV heads × 128 × 2 × 2 B
    ("qwen3-coder-480b-a35b-instruct.json", 62, 253_952, 0),
    // MLA: 61 × (512 + 64) × 2 B
    ("deepseek-v3.1-nvfp4.json", 61, 70_272, 0),
    // MLA in every layer, the indexer key only in the 21 layers its `indexer_types` marks `full`
    // (0, 1, 2, then every 4th from 6; the 57 `shared` ones reuse a top-k and run no indexer):
    // 78 × (512 + 64) × 2 + 21 × 128 × 2 = 89,856 + 5,376 = 95,232 B.
    ("glm-5.2.json", 78, 95_232, 0),
    // 56 layers × 8 KV heads × (6,144 / 48 = 128) × 2 × 2 B
    ("mixtral-8x22b-v0.1.json", 56, 229_376, 0),
    // text_config: 48 layers × 4 KV heads × 128 × 2 × 2 B
    ("qwen3-vl-30b-a3b-instruct.json", 48, 98_304, 0),
    // 62 layers × 8 KV heads × 128 × 2 × 2 B
    ("minimax-m2.5.json", 62, 253_952, 0),
    // MLA: 61 layers × (512 latent + 64 RoPE key) × 2 B
    ("kimi-k2-instruct.json", 61, 70_272, 0),
    // MLA and indexer: 61 × (512 + 64 + 128) × 2 B
    ("deepseek-v3.2-nvfp4.json", 61, 85_888, 0),
    // MLA and indexer: 78 × (512 + 64 + 128) × 2 B
    ("glm-5.1.json", 78, 109_824, 0),
    // every layer caches while the context is under the 512-token window: 45 × 8 × 128 × 2 × 2 B
    ("step-3.7-flash.json", 45, 184_320, 0),
    // 49 of 80 blocks have attention, each 64 / 8 = 8 KV heads of 8,192 / 64 = 128: 49 × 8 × 128 × 2 × 2 B
    ("llama-3.3-nemotron-super-49b-v1.json", 80, 200_704, 0),
    // 10 `*` layers × 8 KV heads × 128 (attention_head_dim) × 2 × 2 B. State, 54 `M` layers: conv
    // (256 heads × 64 + 2 × 8 groups × 256) × 4 taps × 2 B = 163,840; SSM 256 × 64 × 256 × 4 B =
    // 16,777,216; 54 × 16,941,056 = 914,817,024
    ("nemotron-h-56b-base-8k.json", 118, 40_960, 914_817_024),
    // 6 `*` layers × 2 KV heads × 128 × 2 × 2 B. State, 23 `M` layers: conv (64 × 64 + 2 × 8 × 128)
    // × 4 × 2 B = 49,152; SSM 64 × 64 × 128 × 4 B (mamba_ssm_cache_dtype float32) = 2,097,152;
    // 23 × 2,146,304 = 49,364,992
    ("nemotron-3-nano-30b-a3b.json", 52, 6_144, 49_364_992),
    // head_dim 128 read from the file (5,120 / 32 would give 160): 40 layers × 8 KV heads × 128 × 2 × 2 B
    ("mistral-nemo-instruct-2407.json", 40, 163_840, 0),
    // 40 layers × 8 KV heads × 128 × 2 × 2 B
    ("qwen3-14b.json", 40, 163_840, 0),
    // 60 layers × 8 KV heads × (7,168 / 56 = 128) × 2 × 2 B
    ("yi-34b.json", 60, 245_760, 0),
    // 48 layers × 8 KV heads × (8,192 / 64 = 128) × 2 × 2 B
    ("codellama-34b-instruct-hf.json", 48, 196_608, 0),
    // the base model's geometry: 56 layers × 8 KV heads × (6,144 / 48 = 128) × 2 × 2 B
    ("mixtral-8x22b-instruct-v0.1.json", 56, 229_376, 0),
    // MLA without query compression (q_lora_rank null): 27 layers × (512 latent + 64 RoPE key) × 2 B
    ("deepseek-v2-lite.json", 27, 31_104, 0),
    // head_dim 128 read (96 × 128 is not the 5,120 width); the one MTP layer (num_nextn_predict_layers)
    // is not among the 92 the model runs: 92 layers × 8 KV heads × 128 × 2 × 2 B
    ("glm-4.5.json", 92, 376_832, 0),
];

/// Each file imports with the layer count, cache bytes per token (16 bits) and state bytes of its row.
pub(super) fn assert_by_hand(rows: &[(&str, u32, u128, u128)]) {
    for &(file, layers, per_token, state) in rows {
        let m = import(file).model;
        assert_eq!(m.n_layers(), layers, "{file}");
        assert_eq!(kv_bytes_per_token(&m, Bf16), Ok(per_token), "{file}");
        assert_eq!(state_bytes(&m), Ok(state), "{file}");
    }
}

/// Each file is refused as unsupported, the reason starting with the text beside it.
pub(super) fn assert_refused(rows: &[(&str, &str)]) {
    for &(file, reason) in rows {
        let Err(ImportError::Unsupported(why)) = import_hf_config(&read(file)) else { panic!("{file} imported") };
        assert!(why.starts_with(reason), "{file}: {why}");
    }
}

#[test]
fn newer_configs_by_hand() {
    assert_by_hand(BY_HAND);
}

#[test]
fn step_3_7_flash_caps_its_sliding_layers() {
    let m = import("step-3.7-flash.json").model;
    assert_eq!(m.schedule.summary(), "1 global : 3 sliding");
    assert_eq!(m.schedule.kind(1), Some(LayerKind::Sliding { window_tokens: 512 }));
    // At its 65,536 tokens: 12 global × 4,096 B × 65,536 = 3,221,225,472 and 33 sliding × 4,096 B
    // × 512 = 69,206,016: 3,290,431,488 B.
    assert_eq!(kv_total_bytes(&m, 65_536, Bf16), Ok(3_290_431_488));
}

#[test]
fn gemma_4_31b_by_hand() {
    let imp = import("gemma-4-31b-it-nvfp4.json");
    let m = &imp.model;
    assert_eq!(m.schedule.summary(), "5 sliding : 1 global");
    // Per token: 50 sliding layers × 16 KV heads × 256 × 2 (K, V) × 2 B = 819,200 and 10 global layers
    // × 4 KV heads × 512 × 1 (K = V) × 2 B = 40,960: 860,160 B.
    assert_eq!(kv_bytes_per_token(m, Bf16), Ok(860_160));
    // At its 262,144 tokens: 50 × 16,384 B × 1,024 (window) = 838,860,800 and 10 × 4,096 B × 262,144 =
    // 10,737,418,240: 11,576,279,040 B.
    assert_eq!(kv_total_bytes(m, 262_144, Bf16), Ok(11_576_279_040));
}

#[test]
fn a_real_nas_stack_counts_its_checkpoint_by_hand() {
    let imp = import("llama-3.3-nemotron-super-49b-v1.json");
    let m = &imp.model;
    assert_eq!(m.schedule.layers().iter().filter(|k| k.is_attention()).count(), 49);
    assert_eq!(m.attn.n_kv_heads, 8);
    // Embeddings and head 2 × 128,256 × 8,192 = 2,101,346,304, final norm 8,192; 49 attention blocks
    // × (Q, O 8,192² each + K, V 8,192 × 1,024 each + norm 8,192) = 7,399,153,664; 80 FFNs of widths
    // (DeciLM: 2 × ffn_mult × 8,192 / 3, up to a multiple of 256) 6 × 14,336 (2.625) + 49 × 28,672 (5.25)
    // + 17,920 (3.28125) + 10 × 7,168 (1.3125) + 8 × 5,632 (1.0) + 6 × 2,816 (0.5) = 1,642,496 in all:
    // 3 × 8,192 × 1,642,496 + 80 norms × 8,192 = 40,366,637,056. Together 49,867,145,216.
    assert!(said(&imp, "under the checkpoint's 49,867,145,216 by"), "{:?}", imp.report.readings);
    assert!(said(&imp, "49 of 80 layers have attention, each with 8 KV heads"));
}

#[test]
fn lightning_indexer_files_state_both_forms() {
    // DeepSeek's form: 61 × (576 × 2 + 128 + 4) = 78,324; GLM-5.1: 78 × 1,284 = 100,152.
    for (file, fp8) in [("deepseek-v3.2-nvfp4.json", 78_324), ("glm-5.1.json", 100_152)] {
        let imp = import(file);
        assert_eq!(kv_bytes_per_token_fp8_indexer(&imp.model, Bf16), Ok(Some(fp8)), "{file}");
        let rules = imp.report.readings.iter().filter(|r| r.starts_with("index_head_dim = 128")).count();
        assert_eq!(rules, 1, "{file}: {:?}", imp.report.readings);
    }
}

#[test]
fn real_files_the_arithmetic_cannot_describe_are_refused_with_the_reason() {
    assert_refused(&[
        ("refused-deepseek-v4-flash.json", "compress_ratios = [0,0,4,128"),
        ("refused-nemotron-3-super-120b-a12b.json", "moe_latent_size = 1024: "),
        ("refused-qwen3.5-122b-a10b.json", "This is a state-space or hybrid model (the field linear_num_value_heads)"),
        // Its moe_layer_freq list (3 dense layers, then experts) is read; its sparse attention is not.
        ("refused-minimax-m3.json", "sparse_attention_config = {"),
    ]);
}

#[test]
fn glm_5_2_keeps_an_indexer_key_in_its_21_full_layers_only() {
    let imp = import("glm-5.2.json");
    let mla = imp.model.mla.unwrap_or_else(|| panic!("no mla"));
    // transformers' rule, read from indexer_types: layer i is full when max(i + 1 - 3, 0) % 4 == 0.
    assert_eq!((mla.index_topk_freq, mla.index_skip_topk_offset), (4, 3));
    let full: Vec<u32> = (0..78).filter(|&l| mla.keeps_indexer_key(l)).collect();
    assert_eq!((full.len(), &full[..5], full.last()), (21, &[0, 1, 2, 6, 10][..], Some(&74)));
    assert!(said(&imp, "indexer_types: 21 of 78 layers are full and cache the indexer's key"), "{:?}", imp.report);
    assert!(!imp.report.warnings.iter().any(|w| w.contains("indexer_types") || w.contains("index_topk_freq")));
    // At its 1,048,576 tokens: 95,232 × 1,048,576 = 99,857,989,632 B.
    assert_eq!(kv_total_bytes(&imp.model, 1_048_576, Bf16), Ok(99_857_989_632));
    // DeepSeek's fp8 key form: 78 × 1,152 + 21 × (128 + 4) = 89,856 + 2,772 = 92,628 B.
    assert_eq!(kv_bytes_per_token_fp8_indexer(&imp.model, Bf16), Ok(Some(92_628)));
    assert!(said(&imp, "in the 21 of 78 layers that run the indexer"), "{:?}", imp.report.readings);
    // The model's code keeps the step and offset: a link opens the same figure.
    let back = crate::model::encoding::decode_model(&crate::model::encoding::encode_model(&imp.model))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kv_bytes_per_token(&back, Bf16), Ok(95_232));
}

#[test]
fn mixtral_8x22b_parameters_by_hand() {
    // Embeddings and head 2 × 32,000 × 6,144 = 393,216,000; per layer Q, O 6,144² each + K, V 6,144 ×
    // 1,024 each = 88,080,384, 8 experts × 3 × 6,144 × 16,384 = 2,415,919,104, router 6,144 × 8 =
    // 49,152, norms 12,288: 2,504,060,928 × 56 = 140,227,411,968; final norm 6,144: 140,620,634,112.
    assert_eq!(model_params(&import("mixtral-8x22b-v0.1.json").model).total(), 140_620_634_112);
}

#[test]
fn a_window_switched_off_outside_qwen_is_off() {
    // MiMo (a Qwen2 derivative with its own model_type) gives a window but switches it off.
    let v = serde_json::json!({"model_type": "mimo", "num_hidden_layers": 4, "hidden_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
        "sliding_window": 32768, "max_window_layers": 2, "use_sliding_window": false});
    let imp = super::hf_import::import_hf_value(&v).unwrap_or_else(|e| panic!("{e}"));
    assert!(imp.model.schedule.layers().iter().all(|k| k.is_global()));
    assert!(said(&imp, "use_sliding_window is not true"), "{:?}", imp.report);
}
