//! State-space and hybrid models: which families the importer reads (their layers keep a state of
//! fixed size instead of, or beside, a KV cache), the pieces their readers share, and the refusal of
//! the ones it does not read (Hymba, PLaMo 2, or any file with state-space fields and no
//! known `model_type`), which are never imported as if every layer were attention.
//!
//! One module per kind of mixer reads its families: `mamba` (Mamba, Mamba-2), `mamba_hybrids`
//! (Jamba, Bamba, Granite 4 hybrid, Nemotron-H, Falcon-H1), `zamba` (Zamba, Zamba2), `rwkv`
//! (RWKV-4/6/7), `gated_deltanet` (Qwen3-Next), `short_conv` (LFM2, RecurrentGemma) and `samba`. Each builds
//! the [`Model`] and the parameter count of the checkpoint as the reference modules hold it; when the
//! model's arithmetic counts the parameters differently (a shared block counted per use, a gate the
//! model has no term for), a reading says by how much.

use super::family::Family;
use super::mixer_common::Built;
use super::reader::Reader;
use super::report::{ImportError, invalid};
use super::{gated_deltanet, mamba, mamba_hybrids, rwkv, samba, short_conv, zamba};
use crate::model::config::Model;
use crate::model::params::model_params;

/// The state-space and hybrid families read, by `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Mamba,
    Mamba2,
    Jamba,
    Bamba,
    Granite,
    NemotronH,
    FalconH1,
    Zamba,
    Zamba2,
    Qwen3Next,
    Rwkv4,
    Rwkv6,
    Rwkv7,
    Lfm2,
    RecurrentGemma,
    Samba,
}

impl Kind {
    fn of(model_type: &str) -> Option<Kind> {
        Some(match model_type.to_ascii_lowercase().as_str() {
            "mamba" => Kind::Mamba,
            "mamba2" => Kind::Mamba2,
            "jamba" => Kind::Jamba,
            "bamba" => Kind::Bamba,
            "granitemoehybrid" => Kind::Granite,
            "nemotron_h" => Kind::NemotronH,
            "falcon_h1" => Kind::FalconH1,
            "zamba" => Kind::Zamba,
            "zamba2" => Kind::Zamba2,
            "qwen3_next" => Kind::Qwen3Next,
            "rwkv" => Kind::Rwkv4,
            "rwkv6" => Kind::Rwkv6,
            "rwkv7" => Kind::Rwkv7,
            "lfm2" => Kind::Lfm2,
            "recurrent_gemma" => Kind::RecurrentGemma,
            "samba" => Kind::Samba,
            _ => return None,
        })
    }
}

/// Model types of state-space and hybrid families the importer does not read (matched as prefixes).
const UNREAD_TYPES: &[&str] = &["mamba", "jamba", "zamba", "bamba", "rwkv", "plamo2", "hymba", "samba", "lfm2"];

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

/// The family this config belongs to, if it is a state-space or hybrid family the importer reads;
/// an error with the reason for one it does not read; `None` for a transformer.
pub(super) fn kind(r: &Reader<'_>, model_type: &str) -> Result<Option<Kind>, ImportError> {
    if let Some(kind) = Kind::of(model_type) {
        return Ok(Some(kind));
    }
    let lower = model_type.to_ascii_lowercase();
    let by_type = UNREAD_TYPES.iter().find(|t| lower.starts_with(**t)).map(|_| format!("model_type {model_type}"));
    let by_field = || RECURRENT_FIELDS.iter().find(|f| r.find(&[**f]).is_some()).map(|f| format!("the field {f}"));
    let Some(sign) = by_type.or_else(by_field) else { return Ok(None) };
    Err(ImportError::Unsupported(format!(
        "This is a state-space or hybrid model ({sign}): only its attention layers keep a KV cache, the \
         others keep a state of fixed size. The importer reads Mamba, Mamba-2, Jamba, Bamba, Granite 4, \
         Nemotron-H, Falcon-H1, Zamba, Zamba2, Qwen3-Next, RWKV-4/6/7, LFM2, RecurrentGemma and Samba, not this \
         one, so it does not import this file rather than count every layer as attention."
    )))
}

/// Import a state-space or hybrid config of family `kind`.
pub(super) fn import(r: &mut Reader<'_>, family: &Family, kind: Kind) -> Result<Model, ImportError> {
    let built = match kind {
        Kind::Mamba => mamba::mamba(r, family)?,
        Kind::Mamba2 => mamba::mamba2(r, family)?,
        Kind::Jamba => mamba_hybrids::jamba(r, family)?,
        Kind::Bamba => mamba_hybrids::bamba(r, family)?,
        Kind::Granite => mamba_hybrids::granite(r, family)?,
        Kind::NemotronH => mamba_hybrids::nemotron_h(r, family)?,
        Kind::FalconH1 => mamba_hybrids::falcon_h1(r, family)?,
        Kind::Zamba => zamba::zamba(r, family)?,
        Kind::Zamba2 => zamba::zamba2(r, family)?,
        Kind::Qwen3Next => gated_deltanet::qwen3_next(r, family)?,
        Kind::Rwkv4 => rwkv::rwkv4(r, family)?,
        Kind::Rwkv6 => rwkv::rwkv6(r, family)?,
        Kind::Rwkv7 => rwkv::rwkv7(r, family)?,
        Kind::Lfm2 => short_conv::lfm2(r, family)?,
        Kind::RecurrentGemma => short_conv::recurrent_gemma(r, family)?,
        Kind::Samba => samba::samba(r, family)?,
    };
    let Built { model, missing, unmodelled } = built;
    model.validate().map_err(|e| invalid("config", e.to_string()))?;
    report_missing(r, &model, missing, &unmodelled);
    Ok(model)
}

/// Say how far the model's parameter total is from the checkpoint's, which holds `missing` more
/// (fewer when negative), and why; nothing when they agree.
pub(super) fn report_missing(r: &mut Reader<'_>, model: &Model, missing: i128, why: &str) {
    if missing == 0 {
        return;
    }
    let counted = model_params(model).total();
    let checkpoint = counted.checked_add_signed(missing).unwrap_or(0);
    let word = if missing > 0 { "under" } else { "over" };
    let t = crate::model::units::format_thousands;
    r.read_as(format!(
        "The parameter total is {}, {word} the checkpoint's {} by {}: {why}. The weights memory and the FLOP \
         figures follow the model's count and carry the same difference",
        t(counted),
        t(checkpoint),
        t(missing.unsigned_abs())
    ));
}

#[cfg(test)]
mod tests {
    use super::super::{ImportError, import_hf_value};
    use serde_json::json;

    #[test]
    fn unread_state_space_families_are_refused_with_the_reason() {
        let hymba = json!({"model_type": "hymba", "num_hidden_layers": 32, "hidden_size": 1600,
            "num_attention_heads": 25});
        let plamo = json!({"model_type": "plamo2", "num_hidden_layers": 32, "hidden_size": 2048,
            "num_attention_heads": 16});
        let hidden = json!({"model_type": "custom", "num_hidden_layers": 4, "hidden_size": 64,
            "num_attention_heads": 4, "layers_block_type": ["mamba", "attention", "mamba", "mamba"]});
        let ssm = json!({"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "ssm_state_size": 16});
        for (config, sign) in [
            (hymba, "model_type hymba"),
            (plamo, "model_type plamo2"),
            (hidden, "layers_block_type"),
            (ssm, "ssm_state_size"),
        ] {
            match import_hf_value(&config) {
                Err(ImportError::Unsupported(why)) => {
                    assert!(why.contains(sign) && why.contains("only its attention layers keep a KV cache"), "{why}")
                }
                other => panic!("{sign}: {other:?}"),
            }
        }
        let llama = json!({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4});
        assert!(import_hf_value(&llama).is_ok());
    }
}
