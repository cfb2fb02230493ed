//! What an import did not read, said: every key of the file it never looked at (after the fields it
//! used, in alphabetical order), the keys known not to matter for attention or the cache grouped apart, and the attention
//! and cache settings the arithmetic does not implement refused or warned of by name, with why. A
//! per-layer list read by no section (a list as long as the layers, a `*_pattern`, a `*_layers`
//! index list) is warned of too: nothing a file says about its layers goes unsaid.

use serde_json::Value;

use super::reader::{Reader, show};
use super::report::ImportError;

/// Keys that change neither the attention, the cache nor the sizes the page shows: token ids,
/// tokenizer and generation settings, training and numerical details, other towers of a multimodal
/// file. Also every key ending in `_token_id(s)` / `_token_index` and every dropout.
const NOT_RELEVANT: &[&str] = &[
    "transformers_version",
    "torch_dtype",
    "dtype",
    "tokenizer_class",
    "auto_map",
    "use_cache",
    "initializer_range",
    "initializer_factor",
    "output_attentions",
    "output_hidden_states",
    "return_dict",
    "pretraining_tp",
    "rms_norm_eps",
    "layer_norm_eps",
    "layer_norm_epsilon",
    "norm_epsilon",
    "norm_eps",
    "router_aux_loss_coef",
    "output_router_logits",
    "router_z_loss_coef",
    "use_flash_attn",
    "_attn_implementation",
    "attn_implementation",
    "id2label",
    "label2id",
    "problem_type",
    "task_specific_params",
    "final_logit_softcapping",
    "use_bfloat16",
    "torchscript",
    "bad_words_ids",
    "max_length",
    "min_length",
    "do_sample",
    "temperature",
    "top_k",
    "top_p",
    "repetition_penalty",
    "length_penalty",
    "num_beams",
    "early_stopping",
    "vision_config",
    "audio_config",
    "vision_feature_layer",
    "vision_feature_select_strategy",
    "projector_hidden_act",
    "mm_tokens_per_image",
    "image_seq_length",
    "summary_type",
    "summary_use_proj",
    "summary_activation",
    "summary_proj_to_labels",
    "summary_first_dropout",
    "scale_attn_weights",
];

/// What the import does with a setting its arithmetic does not implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unimplemented {
    /// The figures would be wrong by a factor: no import.
    Refuse,
    /// The figures stand, with this beside them.
    Warn,
}

/// Attention and cache settings the arithmetic does not implement, each with what it would change.
/// A section that reads one exactly consults it, and it is then not on this list's path at all.
pub(super) const NOT_IMPLEMENTED: &[(&str, Unimplemented, &str)] = &[
    (
        "index_head_dim",
        Unimplemented::Refuse,
        "a lightning indexer's key without MLA (no kv_lora_rank): the cache figures count it only beside an MLA \
      latent, as DeepSeek V3.2 has it",
    ),
    (
        "compress_ratios",
        Unimplemented::Refuse,
        "DeepSeek V4 compresses each layer's KV cache by its own ratio (compressed and sparse attention): read as \
      plain layers, the cache would be wrong by those factors",
    ),
    (
        "indexer_types",
        Unimplemented::Warn,
        "which layers run a lightning indexer, for a model without one the import reads (index_head_dim beside an \
      MLA kv_lora_rank): no indexer key is in the cache figures",
    ),
    (
        "index_topk_freq",
        Unimplemented::Warn,
        "how often a lightning indexer runs, for a model without one the import reads (index_head_dim beside an MLA \
      kv_lora_rank): no indexer key is in the cache figures",
    ),
    (
        "index_skip_topk_offset",
        Unimplemented::Warn,
        "where a lightning indexer's schedule starts, for a model without one the import reads (index_head_dim beside \
      an MLA kv_lora_rank): no indexer key is in the cache figures",
    ),
    (
        "index_topk_pattern",
        Unimplemented::Warn,
        "which layers run a lightning indexer (F/S), for a model without one the import reads (index_head_dim beside \
      an MLA kv_lora_rank): no indexer key is in the cache figures",
    ),
    (
        "sparse_attention_config",
        Unimplemented::Refuse,
        "MiniMax M3's block-sparse attention keeps index keys of its own beside the KV cache and reads only the top \
      blocks: neither is in the cache figures",
    ),
    (
        "moe_latent_size",
        Unimplemented::Refuse,
        "Nemotron 3's latent MoE runs its experts in a narrower latent space (projected down and back up): counted at \
      the full width, the parameter total and weights memory would be several times too large",
    ),
    (
        "rotary_dim",
        Unimplemented::Warn,
        "RoPE turns only the first rotary_dim dimensions of each head (MiniMax M2): the RoPE panel and heatmaps turn \
      the whole head (the cache is unaffected)",
    ),
    (
        "index_n_heads",
        Unimplemented::Warn,
        "the lightning indexer's query heads (its scores pick the keys each query reads): not drawn, and the \
      indexer's weights are not in the parameter total",
    ),
    (
        "index_topk",
        Unimplemented::Warn,
        "sparse attention: each query reads only the top-k keys the indexer picks; the heatmaps and FLOPs assume it reads \
      every key its mask allows",
    ),
    (
        "no_rope_layers",
        Unimplemented::Warn,
        "the layers marked 0 use no positions at all (NoPE, SmolLM3's every 4th layer): the RoPE panel and heatmaps \
      turn every layer's queries and keys (the cache and sizes are unaffected)",
    ),
    (
        "no_rope_layer_interval",
        Unimplemented::Warn,
        "every n-th layer uses no positions at all (NoPE): the RoPE panel and heatmaps turn every layer's queries and \
      keys (the cache and sizes are unaffected)",
    ),
    (
        "attn_logit_softcapping",
        Unimplemented::Warn,
        "scores are capped by a tanh before the softmax; the heatmaps do not apply it (sizes and cache are unaffected)",
    ),
    (
        "query_pre_attn_scalar",
        Unimplemented::Warn,
        "scores are scaled by 1/sqrt(query_pre_attn_scalar), not 1/sqrt(head_dim); the heatmaps use 1/sqrt(head_dim)",
    ),
    (
        "attn_temperature_tuning",
        Unimplemented::Warn,
        "Llama 4 scales queries of its NoPE layers with the position (temperature tuning); the heatmaps do not",
    ),
    (
        "attention_multiplier",
        Unimplemented::Warn,
        "scores are scaled by attention_multiplier (Granite), not 1/sqrt(head_dim); the heatmaps use 1/sqrt(head_dim) \
      (sizes and cache are unaffected)",
    ),
    (
        "use_bidirectional_attention",
        Unimplemented::Warn,
        "attention runs both ways (\"vision\": among an image's tokens); the figures and heatmaps are of text under the \
      causal mask",
    ),
    (
        "mtp_transformer_layers",
        Unimplemented::Warn,
        "multi-token-prediction modules' layers beside the main stack (MiniMax): not counted (they cache K/V only while \
      drafting tokens)",
    ),
    (
        "num_mtp_modules",
        Unimplemented::Warn,
        "multi-token-prediction modules beside the main stack (MiniMax): not counted (they cache K/V only while \
      drafting tokens)",
    ),
    (
        "mtp_layers_block_type",
        Unimplemented::Warn,
        "the kinds of the multi-token-prediction layers beside the main stack (Nemotron): not counted (they cache K/V \
      only while drafting tokens)",
    ),
    (
        "num_nextn_predict_layers",
        Unimplemented::Warn,
        "multi-token-prediction layers beside the main stack: not counted (they cache K/V only while drafting tokens)",
    ),
    (
        "linear_attn_config",
        Unimplemented::Refuse,
        "linear-attention layers (Kimi Linear's KDA) keep a fixed-size state, not a KV cache: read as softmax layers, the \
      cache would be too large",
    ),
    (
        "swa_num_key_value_heads",
        Unimplemented::Refuse,
        "sliding-window layers with KV heads of their own (MiMo-V2-Flash): counted with the full layers' heads, the \
      cache would be wrong by their ratio",
    ),
    (
        "swa_head_dim",
        Unimplemented::Refuse,
        "sliding-window layers with a head size of their own (MiMo-V2-Flash): counted with the full layers' head \
      size, the cache would be wrong by their ratio",
    ),
    (
        "swa_v_head_dim",
        Unimplemented::Refuse,
        "sliding-window layers with a value size of their own (MiMo-V2-Flash): the cache figures size V like K with \
      the full layers' head size",
    ),
    (
        "attn_type_list",
        Unimplemented::Refuse,
        "MiniMax's lightning-attention layers keep a fixed-size state, not a KV cache: read as softmax layers, the cache \
      would be too large",
    ),
];

/// Fills the report's unread and not-relevant lists, and refuses or warns of each unread setting the
/// arithmetic does not implement and each unread per-layer list. `layers`: the model's layer count.
pub(super) fn finish(r: &mut Reader<'_>, layers: usize) -> Result<(), ImportError> {
    read_softmax_type_list(r, layers);
    for path in r.unread() {
        let key = path.strip_prefix("text_config.").unwrap_or(&path);
        let value = r.value_at(&path);
        if value.is_none_or(is_unset) {
            r.report.not_relevant.push(format!("{path} (unset)"));
        } else if let Some((_, verdict, why)) = NOT_IMPLEMENTED.iter().find(|(k, _, _)| *k == key) {
            let value = value.map(show).unwrap_or_default();
            match verdict {
                Unimplemented::Refuse => {
                    return Err(ImportError::Unsupported(format!("{path} = {value}: {why}. Not imported.")));
                }
                Unimplemented::Warn => r.warn(format!("{path} = {value}: {why}.")),
            }
        } else if key == "mamba_ssm_cache_dtype" {
            let dtype = value.and_then(Value::as_str).map(str::to_owned);
            ssm_cache_dtype(r, &path, dtype.as_deref());
        } else if is_not_relevant(key) {
            r.report.not_relevant.push(path);
        } else {
            if key.ends_with("sliding_window_pattern")
                && r.value_at("layer_types").or(r.value_at("text_config.layer_types")).is_some()
            {
                r.read_as(format!("{path} not read: layer_types lists every layer's kind"));
            } else if value.is_some_and(|v| is_per_layer(key, v, layers)) {
                r.warn(format!(
                    "{path}: a per-layer setting the import does not read; the figures treat every layer alike here."
                ));
            }
            r.report.unread.push(path);
        }
    }
    Ok(())
}

/// `mamba_ssm_cache_dtype`, a runtime's setting (vLLM's) for the SSM state: the figures count that state
/// in float32, so another dtype is warned of.
fn ssm_cache_dtype(r: &mut Reader<'_>, path: &str, dtype: Option<&str>) {
    match dtype {
        Some("float32") => r.read_as(format!("{path} = float32: the dtype the SSM state is counted in")),
        other => r.warn(format!(
            "{path} = {}: the figures count the SSM state in float32, as transformers' reference keeps it; a runtime \
             that follows this file keeps it in that dtype instead",
            other.unwrap_or("not a dtype name")
        )),
    }
}

/// Null, false, an empty list or object: says nothing.
/// MiniMax's `attn_type_list`: 1 marks a softmax-attention layer, 0 a lightning-attention one
/// (MiniMax-Text-01 and M1 build `MiniMaxText01LightningAttention` where the entry is 0). A list of
/// 1s, one per layer (MiniMax M2.7), says every layer is the softmax attention the figures count:
/// read exactly. Any other list stays unread and is refused by [`NOT_IMPLEMENTED`].
fn read_softmax_type_list(r: &mut Reader<'_>, layers: usize) {
    // Looked up without consulting it: a list this does not read stays unread, for `finish` to refuse.
    let found = ["attn_type_list", "text_config.attn_type_list"].into_iter().find_map(|p| Some((p, r.value_at(p)?)));
    let Some((path, v)) = found else { return };
    let all_softmax = v.as_array().is_some_and(|l| l.len() == layers && l.iter().all(|t| t.as_u64() == Some(1)));
    if all_softmax {
        r.consult(path);
        r.note_used(path, v);
        r.read_as(format!("{path}: all {layers} layers are softmax attention (1), as the figures count them"));
    }
}

fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn is_not_relevant(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    NOT_RELEVANT.contains(&key)
        || ["_token_id", "_token_ids", "_token_index"].iter().any(|s| last.ends_with(s))
        || last.contains("dropout")
        || last.ends_with("_pdrop")
        // A vision tower's settings in a text model's file (Hunyuan-A13B's `vit_*`, `anyres_*`).
        || last.starts_with("vit_")
        || last.starts_with("anyres_")
}

/// A list as long as the layers, a `*_pattern`, or a `*_layers` list.
fn is_per_layer(key: &str, v: &Value, layers: usize) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    v.as_array().is_some_and(|a| a.len() == layers || last.ends_with("_layers")) || last.ends_with("_pattern")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{ImportError, import_hf_value};
    use super::*;

    fn llama(extra: Value) -> Value {
        let mut v = json!({"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn keys_never_read_are_listed_and_irrelevant_ones_grouped_apart() {
        let v =
            llama(json!({"mystery_setting": 3, "bos_token_id": 1, "eos_token_id": [2, 3], "attention_dropout": 0.0,
                             "torch_dtype": "bfloat16", "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                             "low_freq_factor": 1.0}, "cache_hint": null}));
        let report = import_hf_value(&v).unwrap().report;
        assert_eq!(report.unread, ["mystery_setting", "rope_scaling.low_freq_factor"]);
        assert_eq!(
            report.not_relevant,
            ["attention_dropout", "bos_token_id", "cache_hint (unset)", "eos_token_id", "torch_dtype"]
        );
    }

    #[test]
    fn every_setting_the_arithmetic_does_not_implement_is_refused_or_warned_of_by_name() {
        for &(key, verdict, why) in NOT_IMPLEMENTED {
            let result = import_hf_value(&llama(json!({ key: 7 })));
            match (verdict, result) {
                (Unimplemented::Refuse, Err(ImportError::Unsupported(text))) => {
                    assert!(text.starts_with(&format!("{key} = 7: ")) && text.contains(why), "{text}");
                }
                (Unimplemented::Warn, Ok(imported)) => {
                    let warning = format!("{key} = 7: {why}.");
                    assert!(imported.report.warnings.contains(&warning), "{key}: {:?}", imported.report.warnings);
                    assert!(!imported.report.unread.iter().any(|k| k == key));
                }
                (verdict, other) => panic!("{key}: expected {verdict:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_ssm_cache_dtype_other_than_the_counted_float32_is_warned_of() {
        let read = import_hf_value(&llama(json!({"mamba_ssm_cache_dtype": "float32"}))).unwrap().report;
        assert!(
            read.readings.contains(&"mamba_ssm_cache_dtype = float32: the dtype the SSM state is counted in".into())
        );
        assert!(!read.unread.iter().any(|k| k == "mamba_ssm_cache_dtype") && read.warnings.is_empty());
        let other = import_hf_value(&llama(json!({"mamba_ssm_cache_dtype": "bfloat16"}))).unwrap().report;
        assert!(other.warnings.iter().any(|w| w.starts_with("mamba_ssm_cache_dtype = bfloat16: the figures count")));
    }

    #[test]
    fn deepseek_v3_2s_indexer_heads_and_top_k_are_warned_of_beside_the_figures() {
        let mut v = llama(json!({"index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048}));
        assert!(
            matches!(import_hf_value(&v), Err(ImportError::Unsupported(t)) if t.starts_with("index_head_dim = 128"))
        );
        v.as_object_mut().unwrap().insert("kv_lora_rank".into(), json!(512));
        let report = import_hf_value(&v).unwrap().report;
        assert!(report.warnings.iter().any(|w| w.starts_with("index_n_heads = 64: the lightning indexer")));
        assert!(report.warnings.iter().any(|w| w.starts_with("index_topk = 2048: sparse attention")));
        assert!(!report.warnings.iter().any(|w| w.contains("index_head_dim")), "{:?}", report.warnings);
        assert!(report.used.iter().any(|(k, v)| k == "index_head_dim" && v == "128"));
    }

    #[test]
    fn a_minimax_type_list_of_softmax_layers_is_read_and_any_lightning_layer_refused() {
        let layers = import_hf_value(&llama(json!({}))).unwrap().model.n_layers() as usize;
        let mut list = vec![1; layers];
        let imported = import_hf_value(&llama(json!({ "attn_type_list": list }))).unwrap();
        assert!(imported.report.used.iter().any(|(k, _)| k == "attn_type_list"), "{:?}", imported.report);
        assert!(imported.report.readings.iter().any(|w| w.starts_with("attn_type_list: all")));
        list[1] = 0;
        let refused = import_hf_value(&llama(json!({ "attn_type_list": list })));
        assert!(matches!(refused, Err(ImportError::Unsupported(t)) if t.starts_with("attn_type_list = [1,0,")));
        // One entry short of the layers: not read as all-softmax either.
        let short = import_hf_value(&llama(json!({ "attn_type_list": vec![1; layers - 1] })));
        assert!(matches!(short, Err(ImportError::Unsupported(_))));
    }

    #[test]
    fn a_value_head_of_its_own_width_without_mla_is_refused() {
        // MiMo-V2-Flash: K 192 wide, V 128; the cache arithmetic sizes V like K.
        let refused = import_hf_value(&llama(json!({"head_dim": 192, "v_head_dim": 128})));
        assert!(
            matches!(refused, Err(ImportError::Unsupported(t)) if t.starts_with("v_head_dim = 128 differs from head_dim = 192"))
        );
        let same = import_hf_value(&llama(json!({"head_dim": 64, "v_head_dim": 64}))).unwrap();
        assert!(same.report.used.iter().any(|(k, v)| k == "v_head_dim" && v == "64"));
    }

    #[test]
    fn a_per_layer_list_no_section_reads_is_warned_of() {
        let v = llama(json!({"odd_per_layer": [1, 0, 1, 0], "skip_layers": [2], "layout_pattern": "AABB",
                             "short_list": [1, 2]}));
        let report = import_hf_value(&v).unwrap().report;
        for key in ["odd_per_layer", "skip_layers", "layout_pattern"] {
            let warning = format!(
                "{key}: a per-layer setting the import does not read; the figures treat every layer alike here."
            );
            assert!(report.warnings.contains(&warning), "{key}: {:?}", report.warnings);
        }
        assert!(!report.warnings.iter().any(|w| w.starts_with("short_list")));
        assert_eq!(report.unread, ["layout_pattern", "odd_per_layer", "short_list", "skip_layers"]);
    }

    #[test]
    fn a_sliding_pattern_beside_layer_types_is_a_reading_not_a_warning() {
        let v = llama(json!({"sliding_window": 8, "_sliding_window_pattern": 2,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}));
        let report = import_hf_value(&v).unwrap().report;
        assert!(
            report
                .readings
                .iter()
                .any(|r| r == "_sliding_window_pattern not read: layer_types lists every layer's kind")
        );
        assert!(!report.warnings.iter().any(|w| w.contains("_sliding_window_pattern")));
    }
}
