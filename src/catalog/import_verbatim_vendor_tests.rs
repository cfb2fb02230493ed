//! The third batch of configs copied byte for byte from stored public copies: vendors' own GitHub
//! repositories and mirrors of hub repositories (sources in `tests/data/config-sources.md`), each with
//! the cache bytes per token worked out by hand from the reference implementation's cache code:
//!
//! - SmolLM3 and Phi-4: transformers 4.57.1 `cache_utils.py` lines 119-120 (`DynamicLayer.update`
//!   appends `key_states` and `value_states`, `[batch, kv_heads, seq, head_dim]` each, per layer) and
//!   lines 204-207 (`DynamicSlidingWindowLayer` keeps at most the window); SmolLM3's NoPE layers
//!   (`SmolLM3Attention.use_rope`, `modular_smollm3.py`) skip RoPE only and cache K and V like the rest.
//! - Hunyuan-A13B: the vendor's `models/modeling_hunyuan.py` (Tencent-Hunyuan/Hunyuan-A13B at df832eb)
//!   lines 544-545 (`head_dim = hidden_size // num_heads`, `num_key_value_heads`), lines 559-565 (K and
//!   V projections in every layer whose `attention_type` is 'self', line 533: all of them with `use_cla`
//!   false) and line 684 (`past_key_value.update(key_states, value_states, self.layer_idx, ...)`,
//!   transformers' `DynamicCache`).
//! - MiniMax-M1: refused; its `attn_type_list` marks 70 of 80 layers lightning attention, whose state
//!   the arithmetic does not hold.
//! - ERNIE 4.5 0.3B: the `modeling_ernie4_5.py` kept beside the checkpoint's files in that copy (Hchnr/early_exiting at ca9794d,
//!   `ERNIE45_03B_Base/`) lines 569-575: each layer's cache is `[key_states, value_states]`,
//!   `[batch, seq, kv_heads, head_dim]` each, concatenated along the sequence (`torch.cat(..., dim=1)`).
//! - Mamba 2.8B is counted in `import_hybrids_tests.rs`, Mistral 7B v0.1 against its preset in
//!   `import_files_tests.rs` (`real_configs_reproduce_presets`).
//! - Kimi Linear 48B-A3B: refused; its `linear_attn_config` makes 20 of 27 layers Kimi Delta Attention,
//!   whose state the arithmetic does not hold.

use super::import_families_tests::said;
use super::import_files_tests::{import, read};
use super::import_verbatim_tests::{assert_by_hand, assert_refused};
use crate::model::dtype::DType::Bf16;
use crate::model::kv_cache::{kv_total_bytes, state_bytes};
use crate::model::params::{ffn_active_params, ffn_params, model_params};
use crate::model::schedule::LayerKind;

/// (file, layers, cache bytes per token at 16 bits, state bytes), each worked out in the comment above.
const BY_HAND: &[(&str, u32, u128, u128)] = &[
    // 36 layers × 4 KV heads × 128 (2,048 / 16) × 2 (K, V) × 2 B; every layer caches, NoPE or not.
    ("smollm3-3b.json", 36, 73_728, 0),
    // 32 layers × 8 KV heads × 128 (4,096 / 32) × 2 × 2 B.
    ("hunyuan-a13b.json", 32, 131_072, 0),
    // 40 layers × 10 KV heads × 128 (5,120 / 40) × 2 × 2 B.
    ("phi-4.json", 40, 204_800, 0),
    // 18 layers × 2 KV heads × 128 (head_dim) × 2 × 2 B.
    ("ernie-4.5-0.3b-base.json", 18, 18_432, 0),
];

/// Routed, active and shared experts and their width.
fn experts(m: &crate::model::config::Model) -> (u32, u32, u32, u64) {
    let moe = m.moe.unwrap_or_else(|| panic!("no experts"));
    (moe.n_routed_experts, moe.n_active_experts, moe.n_shared_experts, moe.expert_ffn_size)
}

#[test]
fn third_batch_by_hand() {
    assert_by_hand(BY_HAND);
}

#[test]
fn the_copies_have_their_sources_byte_counts() {
    // fetchwiki/HuggingFaceTB-SmolLM3-3B (24f7882): 1,884 B; Tencent-Hunyuan/Hunyuan-A13B models/config.json
    // (df832eb): 3,350 B; MiniMax-AI/MiniMax-M1 config.json (4917af1): 1,866 B; mehmetcc/pal phi-4/config.json
    // (b5a7a0d): 821 B, the size the hub shows for a second upload of the same text (Gunulhona/phi4-backup).
    // Hchnr/early_exiting ERNIE45_03B_Base/config.json (ca9794d): 742 B; confucianfighter/mamba-2.8b-hf-breakdown
    // mamba_ssm/models/mamba_2.8b_hf_config.json (69d31ad): 842 B; inference-sim model_configs/mistral-7b-v0.1
    // (903c374): 571 B; Kimi Linear as transformers writes a config (sorted keys, two-space indent, a final
    // newline), which the transcription's text is exactly: 1,751 B.
    let copies = [
        ("smollm3-3b.json", 1884),
        ("hunyuan-a13b.json", 3350),
        ("refused-minimax-m1.json", 1866),
        ("phi-4.json", 821),
        ("ernie-4.5-0.3b-base.json", 742),
        ("mamba-2.8b-hf.json", 842),
        ("mistral-7b-v0.1.json", 571),
        ("refused-kimi-linear-48b-a3b-instruct.json", 1751),
    ];
    for (file, bytes) in copies {
        assert_eq!(read(file).len(), bytes, "{file}");
    }
}

#[test]
fn smollm3_ties_its_embeddings_and_warns_of_its_nope_layers() {
    let imp = import("smollm3-3b.json");
    let m = &imp.model;
    // No tie_word_embeddings in the file: SmolLM3Config's default is True.
    assert!(m.tie_embeddings);
    // At its 65,536 tokens: 73,728 × 65,536 = 4,831,838,208 B.
    assert_eq!(kv_total_bytes(m, 65_536, Bf16), Ok(4_831_838_208));
    // Per layer Q, O 2,048² each + K, V 2,048 × 512 each = 10,485,760, SwiGLU 3 × 2,048 × 11,008 =
    // 67,633,152, norms 4,096: 78,123,008 × 36 = 2,812,428,288; embeddings 128,256 × 2,048 = 262,668,288
    // (tied); final norm 2,048: 3,075,098,624, the "3B" of the model card.
    assert_eq!(model_params(m).total(), 3_075_098_624);
    assert!(said(&imp, "no_rope_layers = [1,1,1,0,"), "{:?}", imp.report.warnings);
    assert!(said(&imp, "no_rope_layer_interval = 4: every n-th layer uses no positions"));
}

#[test]
fn hunyuan_a13b_counts_its_experts_as_its_code_builds_them() {
    let imp = import("hunyuan-a13b.json");
    let m = &imp.model;
    assert_eq!(experts(m), (64, 8, 1, 3072));
    assert!(m.qk_norm && m.tie_embeddings);
    // Per layer: attention 2 × 4,096² + 2 × 4,096 × 1,024 = 41,943,040, QK-norm 256, norms 8,192;
    // experts 64 × 3 × 4,096 × 3,072 = 2,415,919,104, shared MLP 37,748,736, router 4,096 × 64 = 262,144:
    // 2,495,881,472 × 32 = 79,868,207,104; embeddings 128,167 × 4,096 = 524,972,032 (tied), final norm
    // 4,096: 80,393,183,232 (the card's 80B). Active: 9 of the 37,748,736-parameter MLPs instead of 65:
    // (41,943,040 + 256 + 8,192 + 339,738,624 + 262,144) × 32 + 524,976,128 = 12,747,448,320 (13B).
    let p = model_params(m);
    assert_eq!((p.total(), p.active()), (80_393_183_232, 12_747_448_320));
    assert!(said(&imp, "cla_share_factor = 2 not used: use_cla is not true"), "{:?}", imp.report.readings);
    // At its 32,768 tokens: 131,072 × 32,768 = 4,294,967,296 B.
    assert_eq!(kv_total_bytes(m, 32_768, Bf16), Ok(4_294_967_296));
    assert!(!imp.report.unread.iter().any(|k| k.starts_with("vit_") || k.starts_with("moe_")), "{:?}", imp.report);
}

#[test]
fn phi_4s_window_is_its_whole_context() {
    // The stored copy writes sliding_window 16,384, its max_position_embeddings: transformers' cache keeps
    // a sliding layer of that window, which at the model's context is every token.
    let m = import("phi-4.json").model;
    assert!(m.schedule.layers().iter().all(|&k| k == LayerKind::Sliding { window_tokens: 16_384 }));
    // 204,800 × 16,384 = 3,355,443,200 B, as if global.
    assert_eq!(kv_total_bytes(&m, 16_384, Bf16), Ok(3_355_443_200));
    assert_eq!(state_bytes(&m), Ok(0));
}

#[test]
fn the_state_keeping_layers_of_minimax_m1_and_kimi_linear_are_refused_with_the_reason() {
    // 80 layers, softmax (1) at every 8th: 70 lightning-attention layers keep a fixed state instead.
    // Kimi Linear: 7 MLA layers (full_attn_layers, counted from 1) and 20 Kimi Delta Attention layers.
    assert_refused(&[("refused-minimax-m1.json", "attn_type_list = [0,0,0,0,0,0,0,1,0,")]);
    assert_refused(&[("refused-kimi-linear-48b-a3b-instruct.json", "linear_attn_config")]);
}

#[test]
fn ernie_4_5_ties_its_embeddings_and_has_its_model_card_s_size() {
    let imp = import("ernie-4.5-0.3b-base.json");
    let m = &imp.model;
    assert!(m.tie_embeddings);
    assert_eq!((m.n_q_heads, m.attn.head_dim), (16, 128));
    // Per layer Q 1,024 × 2,048 and O 2,048 × 1,024 (2,097,152 each), K and V 1,024 × 256 (262,144 each):
    // 4,718,592; SwiGLU 3 × 1,024 × 3,072 = 9,437,184; two norms 2,048: 14,157,824 × 18 = 254,840,832;
    // embeddings 103,424 × 1,024 = 105,906,176 (tied); final norm 1,024: 360,748,032, the card's "0.36B".
    assert_eq!(model_params(m).total(), 360_748_032);
}

#[test]
fn gemma_4_26b_runs_its_dense_mlp_beside_eight_experts() {
    let imp = import("gemma-4-26b-a4b.json");
    let m = &imp.model;
    // top_k_experts 8; the dense MLP (2,112 = 3 × 704) beside the 128 experts in every layer.
    assert_eq!(experts(m), (128, 8, 3, 704));
    // One expert: 3 × 2,816 × 704 = 5,947,392; router 2,816 × 128 = 360,448. A layer: router + (128 + 3)
    // experts = 779,468,800; a token uses router + (8 + 3) experts = 65,781,760.
    assert_eq!((ffn_params(m, 0), ffn_active_params(m, 0)), (779_468_800, 65_781_760));
    assert!(
        said(&imp, "enable_moe_block: the dense MLP (intermediate_size 2112) runs beside the experts"),
        "{:?}",
        imp.report
    );
    assert!(!imp.report.unread.iter().any(|k| k.ends_with("top_k_experts") || k.ends_with("enable_moe_block")));
}
