//! Models whose layers are not all attention: state-space (Mamba, RWKV) and hybrid models (Jamba,
//! Zamba, Falcon-H1, ...). Only their attention layers keep a KV cache; the others keep a state of
//! fixed size. Until the model arithmetic has such layers, these configs are refused with a reason,
//! never imported as if every layer were attention (which overstates a Jamba's cache 8 times).

use super::reader::Reader;
use super::report::ImportError;

/// Model types of state-space, recurrent and hybrid families (lower case, matched as prefixes).
const RECURRENT_TYPES: &[&str] = &[
    "mamba",
    "jamba",
    "zamba",
    "bamba",
    "falcon_h1",
    "nemotron_h",
    "granitemoehybrid",
    "rwkv",
    "recurrent_gemma",
    "qwen3_next",
    "lfm2",
    "plamo2",
    "hymba",
    "samba",
];

/// Fields only such models write.
const RECURRENT_FIELDS: &[&str] = &[
    "attn_layer_period",
    "attn_layer_offset",
    "layers_block_type",
    "hybrid_override_pattern",
    "ssm_state_size",
    "mamba_d_state",
    "state_size",
    "linear_num_value_heads",
];

/// An error naming what makes `model_type`'s config a recurrent or hybrid model, if it is one.
pub(super) fn refuse_recurrent(r: &Reader<'_>, model_type: &str) -> Result<(), ImportError> {
    let lower = model_type.to_ascii_lowercase();
    let by_type = RECURRENT_TYPES.iter().find(|t| lower.starts_with(**t)).map(|t| format!("model_type {t}"));
    let by_field = || RECURRENT_FIELDS.iter().find(|f| r.find(&[**f]).is_some()).map(|f| format!("the field {f}"));
    let Some(sign) = by_type.or_else(by_field) else { return Ok(()) };
    Err(ImportError::Unsupported(format!(
        "This is a state-space or hybrid model ({sign}): only its attention layers keep a KV cache, the \
         others keep a state of fixed size. The importer does not read such layers yet, so it does not \
         import this file rather than count every layer as attention."
    )))
}

#[cfg(test)]
mod tests {
    use super::super::{ImportError, import_hf_value};
    use serde_json::json;

    #[test]
    fn hybrids_and_state_space_models_are_refused_with_the_reason() {
        // Jamba: attention in 1 layer of 8 (attn_layer_period 8); Mamba: no attention at all.
        let jamba = json!({"model_type": "jamba", "num_hidden_layers": 32, "hidden_size": 4096,
            "num_attention_heads": 32, "num_key_value_heads": 8, "attn_layer_period": 8, "attn_layer_offset": 4});
        let mamba = json!({"model_type": "mamba", "num_hidden_layers": 64, "hidden_size": 2560, "state_size": 16});
        let hidden = json!({"model_type": "custom", "num_hidden_layers": 4, "hidden_size": 64,
            "num_attention_heads": 4, "layers_block_type": ["mamba", "attention", "mamba", "mamba"]});
        for (config, sign) in [(jamba, "model_type jamba"), (mamba, "model_type mamba"), (hidden, "layers_block_type")]
        {
            match import_hf_value(&config) {
                Err(ImportError::Unsupported(why)) => {
                    assert!(why.contains(sign) && why.contains("only its attention layers keep a KV cache"), "{why}")
                }
                other => panic!("{sign}: {other:?}"),
            }
        }
        // Llama is not refused.
        let llama = json!({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4});
        assert!(import_hf_value(&llama).is_ok());
    }
}
