//! The second batch of configs copied byte for byte from stored public copies (ai-dynamo/aiconfigurator's
//! `model_configs/`, sources in `tests/data/config-sources.md`), each with the cache bytes per token
//! (and recurrent state bytes) worked out by hand from the reference implementation's cache code:
//!
//! - Softmax attention: transformers 4.57.1 `cache_utils.py` lines 119-120 (`DynamicLayer.update`
//!   appends `key_states` and `value_states`, each `[batch, kv_heads, seq, head_dim]`, per layer) and
//!   lines 204-207 (`DynamicSlidingWindowLayer` keeps at most the window).
//! - MLA: DeepSeek-V3 `inference/model.py` lines 443-444 at 9b4e978 (`kv_cache` of `kv_lora_rank` and
//!   `pe_cache` of `qk_rope_head_dim` per token per layer, bf16 by `generate.py`'s default dtype).
//! - Mamba-2 state: transformers 4.57.1 `models/bamba/modeling_bamba.py` lines 116-134
//!   (`HybridMambaAttentionDynamicCache`: conv `(expand × hidden + 2 × groups × d_state) × d_conv`,
//!   SSM `heads × head_dim × d_state`), the layout Nemotron-H's Mamba-2 layers share.
//! - Gated DeltaNet state: transformers 4.57.1 `models/qwen3_next/modeling_qwen3_next.py` line 704
//!   (conv state padded to `linear_conv_kernel_dim` columns of the q, k, v channels) and lines 530-541
//!   (the recurrent state `heads × k_head_dim × v_head_dim`, made float32 at line 530).

use super::import_families_tests::said;
use super::import_files_tests::{import, read};
use super::import_verbatim_tests::{assert_by_hand, assert_refused};
use crate::model::dtype::DType::Bf16;
use crate::model::kv_cache::{kv_bytes_per_token, kv_total_bytes, state_bytes};
use crate::model::schedule::LayerKind;

/// (file, layers, cache bytes per token at 16 bits, state bytes), each worked out in the comment above.
const BY_HAND: &[(&str, u32, u128, u128)] = &[
    // DynamicLayer: layers × KV heads × head_dim × 2 (K, V) × 2 B.
    // 28 × 2 × (1,536 / 12 = 128) × 2 × 2
    ("qwen2.5-1.5b.json", 28, 28_672, 0),
    // 28 × 4 × (3,584 / 28 = 128) × 2 × 2
    ("qwen2.5-7b.json", 28, 57_344, 0),
    // 64 × 8 × (5,120 / 40 = 128) × 2 × 2
    ("qwen2.5-32b.json", 64, 262_144, 0),
    ("deepseek-r1-distill-qwen-32b.json", 64, 262_144, 0),
    // 80 × 8 × (8,192 / 64 = 128) × 2 × 2
    ("qwen2.5-72b.json", 80, 327_680, 0),
    // 28 × 8 × 128 (head_dim) × 2 × 2
    ("qwen3-0.6b.json", 28, 114_688, 0),
    ("qwen3-1.7b.json", 28, 114_688, 0),
    // 64 × 8 × 128 × 2 × 2
    ("qwen3-32b.json", 64, 262_144, 0),
    ("qwen3-32b-fp8.json", 64, 262_144, 0),
    // text_config: 64 × 8 × 128 × 2 × 2
    ("qwen3-vl-32b-instruct.json", 64, 262_144, 0),
    // 48 × 4 × 128 × 2 × 2
    ("qwen3-30b-a3b.json", 48, 98_304, 0),
    // 94 × 4 × 128 × 2 × 2
    ("qwen3-235b-a22b.json", 94, 192_512, 0),
    // 32 × 32 × (4,096 / 32 = 128) × 2 × 2
    ("llama-2-7b.json", 32, 524_288, 0),
    // 40 × 40 × (5,120 / 40 = 128) × 2 × 2
    ("llama-2-13b-hf.json", 40, 819_200, 0),
    // 80 × 8 × (8,192 / 64 = 128) × 2 × 2
    ("llama-2-70b.json", 80, 327_680, 0),
    ("llama-3.3-70b-instruct.json", 80, 327_680, 0),
    ("llama-3.1-70b-instruct-fp8.json", 80, 327_680, 0),
    // 32 × 8 × (4,096 / 32 = 128) × 2 × 2
    ("mixtral-8x7b-v0.1.json", 32, 131_072, 0),
    // 36 × 8 × 128 × 2 × 2 (its window is switched off: use_sliding_window false)
    ("mimo-7b-base.json", 36, 147_456, 0),
    // 62 × 8 × 128 × 2 × 2; attn_type_list is all 1 (softmax in every layer)
    ("minimax-m2.7.json", 62, 253_952, 0),
    // Under the 1,024-token window every layer caches: 25 sliding × 8 × 256 × 2 × 2 = 204,800 and
    // 5 global × 2 (num_global_key_value_heads) × 512 (global_head_dim) × 1 (K = V) × 2 = 10,240.
    ("gemma-4-26b-a4b.json", 30, 215_040, 0),
    // MLA: 61 × (512 + 64) × 2 B.
    ("deepseek-v3.json", 61, 70_272, 0),
    ("deepseek-r1.json", 61, 70_272, 0),
    ("deepseek-v3.1.json", 61, 70_272, 0),
    ("kimi-k2.5.json", 61, 70_272, 0),
    ("kimi-k2.6-nvfp4.json", 61, 70_272, 0),
    ("kimi-k2.7-code-nvfp4.json", 61, 70_272, 0),
    // MLA and the lightning indexer's key (model dtype, as transformers keeps it): 61 × (512 + 64 + 128) × 2.
    ("deepseek-v3.2.json", 61, 85_888, 0),
    // 78 × (512 + 64 + 128) × 2: no indexer_types or index_topk_freq, so transformers' defaults
    // (freq 1) put the indexer in every layer.
    ("glm-5.json", 78, 109_824, 0),
    // GLM-5.3 keeps the indexer key only in the 21 layers its indexer_types marks full, as GLM-5.2:
    // 78 × 1,152 + 21 × 256 = 95,232 B.
    ("glm-5.3.json", 78, 95_232, 0),
    // 12 full layers (every 4th) × 2 KV heads × 256 × 2 × 2 = 24,576. State, 36 Gated DeltaNet layers:
    // conv (2 × 16 × 128 + 32 × 128 = 8,192 channels) × 4 × 2 B = 65,536; recurrent 32 × 128 × 128 ×
    // 4 B = 2,097,152; 36 × 2,162,688 = 77,856,768.
    ("qwen3-next-80b-a3b-thinking.json", 48, 24_576, 77_856_768),
    // 6 attention layers × 2 × 128 × 2 × 2 = 6,144. State, 23 Mamba-2 layers: conv (64 × 64 + 2 × 8 ×
    // 128 = 6,144) × 4 × 2 B = 49,152; SSM 64 × 64 × 128 × 4 B (mamba_ssm_cache_dtype float32) =
    // 2,097,152; 23 × 2,146,304 = 49,364,992.
    ("nemotron-3.5-lightning-30b-a3b-nvfp4.json", 52, 6_144, 49_364_992),
];

#[test]
fn qwen3_0_6b_has_the_byte_count_of_a_second_copy() {
    // An independent upload of the same file on the hub (TensorStack/TextEncoder, 53c021a) is listed at
    // 726 bytes with the same keys, values and order; the hub layout without a final newline.
    assert_eq!(read("qwen3-0.6b.json").len(), 726);
    assert_eq!(read("qwen3-0.6b.json").lines().count(), 30);
}

#[test]
fn qwen2_5_32b_has_the_hubs_byte_count() {
    // The hub's page for Qwen/Qwen2.5-32B (main) lists config.json at 664 bytes: aiconfigurator's copy
    // (663) and the final newline the hub writes.
    assert_eq!(read("qwen2.5-32b.json").len(), 664);
}

#[test]
fn second_batch_by_hand() {
    assert_by_hand(BY_HAND);
}

#[test]
fn gemma_4_26b_caps_its_sliding_layers_at_the_window() {
    let m = import("gemma-4-26b-a4b.json").model;
    assert_eq!(m.schedule.summary(), "5 sliding : 1 global");
    assert_eq!(m.schedule.kind(0), Some(LayerKind::Sliding { window_tokens: 1024 }));
    // At its 262,144 tokens: 25 × 8,192 B × 1,024 = 209,715,200 and 5 × 2,048 B × 262,144 =
    // 2,684,354,560: 2,894,069,760 B.
    assert_eq!(kv_total_bytes(&m, 262_144, Bf16), Ok(2_894_069_760));
}

#[test]
fn minimax_m2_7s_type_list_is_read_as_all_softmax() {
    let imp = import("minimax-m2.7.json");
    assert!(said(&imp, "attn_type_list: all 62 layers are softmax attention (1)"), "{:?}", imp.report.readings);
    assert!(!imp.report.unread.iter().any(|k| k == "attn_type_list"));
}

#[test]
fn the_second_batchs_refusals_give_the_reason() {
    assert_refused(&[
        ("refused-mimo-v2-flash.json", "v_head_dim = 128 differs from head_dim = 192"),
        ("refused-nemotron-3-ultra-550b-a55b.json", "moe_latent_size = 2048: "),
        ("refused-deepseek-v4-pro.json", "compress_ratios = [128,128,4"),
        ("refused-kimi-k3.json", "text_config.linear_attn_config = {"),
        ("refused-qwen3.5-27b.json", "This is a state-space or hybrid model (the field linear_num_value_heads)"),
        ("refused-qwen3.5-35b-a3b.json", "This is a state-space or hybrid model (the field linear_num_value_heads)"),
        ("refused-qwen3.5-397b-a17b.json", "This is a state-space or hybrid model (the field linear_num_value_heads)"),
        ("refused-qwen3.6-35b-a3b.json", "This is a state-space or hybrid model (the field linear_num_value_heads)"),
    ]);
}

#[test]
fn a_nemotron_h_file_without_num_hidden_layers_counts_its_layer_list() {
    // Nemotron 3 Ultra's file gives layers_block_type and no num_hidden_layers; the list is the stack.
    let mut v: serde_json::Value = serde_json::from_str(&read("nemotron-3.5-lightning-30b-a3b-nvfp4.json")).unwrap();
    v.as_object_mut().unwrap().remove("num_hidden_layers");
    let m = super::hf_import::import_hf_value(&v).unwrap_or_else(|e| panic!("{e}")).model;
    assert_eq!((m.n_layers(), kv_bytes_per_token(&m, Bf16), state_bytes(&m)), (52, Ok(6_144), Ok(49_364_992)));
}
