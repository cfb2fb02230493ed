//! The config fields (or paper quantities) each preset's values come from, shown beside it.

pub(super) const TRANSFORMER_FIELDS: &[&str] =
    &["d_model", "N (layers)", "h (heads)", "d_k", "d_ff", "vocab (shared BPE)"];

pub(super) const GPT2_FIELDS: &[&str] =
    &["n_layer", "n_embd", "n_head", "n_inner (null: 4 * n_embd)", "vocab_size", "n_positions", "activation_function"];

pub(super) const LLAMA_FIELDS: &[&str] = &[
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "hidden_act",
    "vocab_size",
    "rope_theta",
    "max_position_embeddings",
    "tie_word_embeddings",
];

pub(super) const LLAMA4_FIELDS: &[&str] = &[
    "text_config.num_hidden_layers",
    "text_config.hidden_size",
    "text_config.num_attention_heads",
    "text_config.num_key_value_heads",
    "text_config.head_dim",
    "text_config.attention_chunk_size",
    "text_config.no_rope_layers",
    "text_config.intermediate_size",
    "text_config.intermediate_size_mlp",
    "text_config.num_local_experts",
    "text_config.num_experts_per_tok",
    "text_config.interleave_moe_layer_step",
    "text_config.vocab_size",
    "text_config.rope_theta",
    "text_config.max_position_embeddings",
];

pub(super) const MISTRAL_FIELDS: &[&str] = &[
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "sliding_window",
    "vocab_size",
    "rope_theta",
    "max_position_embeddings",
];

pub(super) const QWEN3_FIELDS: &[&str] = &[
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "rope_theta",
    "max_position_embeddings",
    "tie_word_embeddings",
];

pub(super) const GEMMA3_FIELDS: &[&str] = &[
    "text_config.num_hidden_layers",
    "text_config.hidden_size",
    "text_config.num_attention_heads",
    "text_config.num_key_value_heads",
    "text_config.head_dim",
    "text_config.sliding_window",
    "text_config.sliding_window_pattern",
    "text_config.intermediate_size",
    "text_config.rope_theta",
    "text_config.rope_local_base_freq",
    "text_config.rope_scaling",
    "text_config.vocab_size",
];

pub(super) const GEMMA4_FIELDS: &[&str] = &[
    "text_config.num_hidden_layers",
    "text_config.hidden_size",
    "text_config.num_attention_heads",
    "text_config.num_key_value_heads",
    "text_config.num_global_key_value_heads",
    "text_config.head_dim",
    "text_config.global_head_dim",
    "text_config.attention_k_eq_v",
    "text_config.layer_types",
    "text_config.sliding_window",
    "text_config.num_kv_shared_layers",
    "text_config.intermediate_size",
    "text_config.hidden_size_per_layer_input",
    "text_config.rope_parameters",
    "text_config.vocab_size",
    "text_config.max_position_embeddings",
];

pub(super) const DEEPSEEK_FIELDS: &[&str] = &[
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "intermediate_size",
    "moe_intermediate_size",
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "first_k_dense_replace",
    "moe_layer_freq",
    "vocab_size",
    "rope_theta",
    "max_position_embeddings",
];
