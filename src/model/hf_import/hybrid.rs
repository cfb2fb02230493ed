//! State-space and hybrid models: which families the importer reads (their layers keep a state of
//! fixed size instead of, or beside, a KV cache), the pieces their readers share, and the refusal of
//! the ones it does not read (Samba, Hymba, PLaMo 2, or any file with state-space fields and no
//! known `model_type`), which are never imported as if every layer were attention.
//!
//! One module per kind of mixer reads its families: `mamba` (Mamba, Mamba-2), `mamba_hybrids`
//! (Jamba, Bamba, Granite 4 hybrid, Nemotron-H, Falcon-H1), `zamba` (Zamba, Zamba2), `rwkv`
//! (RWKV-4/6/7), `gated_deltanet` (Qwen3-Next) and `short_conv` (LFM2, RecurrentGemma). Each builds
//! the [`Model`] and the parameter count of the checkpoint as the reference modules hold it; when the
//! model's arithmetic counts the parameters differently (a shared block counted per use, a gate the
//! model has no term for), a reading says by how much.

use super::family::Family;
use super::reader::{Reader, as_count, show};
use super::report::{ImportError, invalid};
use super::{embeddings, gated_deltanet, mamba, mamba_hybrids, rwkv, short_conv, zamba};
use crate::model::config::{Model, NormKind, Positional, States};
use crate::model::params::model_params;
use crate::model::schedule::Schedule;

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
         Nemotron-H, Falcon-H1, Zamba, Zamba2, Qwen3-Next, RWKV-4/6/7, LFM2 and RecurrentGemma, not this \
         one, so it does not import this file rather than count every layer as attention."
    )))
}

/// What a family's reader builds: the model, and how far the checkpoint's parameters (as the
/// reference modules hold them) are from the model's count, with the reason.
pub(super) struct Built {
    pub model: Model,
    /// The checkpoint's parameters minus the model's count (0 when the model counts them exactly).
    pub missing: i128,
    /// Why the two differ (the end of a sentence), when they do.
    pub unmodelled: String,
}

impl Built {
    /// A model whose parameters the arithmetic counts exactly.
    pub fn exact(model: Model) -> Built {
        Built { model, missing: 0, unmodelled: String::new() }
    }
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
    };
    let Built { model, missing, unmodelled } = built;
    model.validate().map_err(|e| invalid("config", e.to_string()))?;
    if missing != 0 {
        let counted = model_params(&model).total();
        let checkpoint = counted.checked_add_signed(missing).unwrap_or(0);
        let word = if missing > 0 { "under" } else { "over" };
        r.read_as(format!(
            "The parameter total is {counted}, {word} the checkpoint's {checkpoint} by {}: {unmodelled}",
            missing.unsigned_abs()
        ));
    }
    Ok(model)
}

/// A model of `layers` layers of width `d` with this family's vocabulary, tying and context, RMSNorm
/// and no attention, FFN or positions yet: each family's reader fills in the rest.
pub(super) fn start(r: &mut Reader<'_>, family: &Family, layers: u64, d: u64) -> Result<Model, ImportError> {
    use super::reader::{positive, positive_u32};
    use crate::model::config::limits;
    let layers = positive_u32("num_hidden_layers", layers, limits::MAX_LAYERS)?;
    let d = positive("hidden_size", d, limits::MAX_D_MODEL)?;
    let e = embeddings::read(r, family)?;
    let mut m = Model::simple(layers, d, 1);
    m.id = "imported".into();
    m.name = family.model_name(r);
    // No attention until a reader adds some: one head whose geometry nothing uses.
    m.attn.head_dim = 64;
    m.ffn_size = 0;
    m.vocab_size = e.vocab;
    m.tie_embeddings = e.tied;
    m.max_position_embeddings = e.max_positions;
    m.positional = Positional::NoPe;
    m.norm = NormKind::RmsNorm;
    m.states = States::default();
    Ok(m)
}

/// A model with the file's attention geometry (query and KV heads, head dimension), else as
/// [`start`]; the schedule is the reader's to set.
pub(super) fn start_with_attention(r: &mut Reader<'_>, family: &Family) -> Result<Model, ImportError> {
    let a = super::attention::read(r, family)?;
    if a.mla.is_some() || a.global.is_some() {
        return Err(invalid("config", "latent or per-kind attention geometry is not read for this family"));
    }
    let mut m = start(r, family, a.layers.into(), a.d_model)?;
    m.n_q_heads = a.heads;
    m.attn = a.local;
    Ok(m)
}

/// Standard attention's weights with `d_in` inputs: Q, K, V from `d_in`, O back to `d`.
pub(super) fn attention_weights(m: &Model, d_in: u128) -> u128 {
    let (h, kv, hd) = (u128::from(m.n_q_heads), u128::from(m.attn.n_kv_heads), u128::from(m.attn.head_dim));
    d_in * h * hd + 2 * d_in * kv * hd + h * hd * u128::from(m.d_model)
}

/// A count the model holds as `u32`, at most `max` (0 allowed).
pub(super) fn to_count(field: &str, v: u64, max: u32) -> Result<u32, ImportError> {
    if v > u64::from(max) {
        return Err(invalid(field, format!("{v} is larger than the supported {max}")));
    }
    super::reader::to_u32(field, v)
}

/// `x` as a signed count (parameter counts stay far below `i128::MAX`).
pub(super) fn signed(x: u128) -> i128 {
    i128::try_from(x).unwrap_or(i128::MAX)
}

/// The layer count and hidden size every family states.
pub(super) fn sizes(r: &mut Reader<'_>) -> Result<(u64, u64), ImportError> {
    let layers = r.required(&["num_hidden_layers", "n_layer", "num_layers"], "num_hidden_layers")?;
    let d = r.required(&["hidden_size", "d_model"], "hidden_size")?;
    Ok((layers, d))
}

/// A size field, or `default` with the assumption noted.
pub(super) fn size(r: &mut Reader<'_>, keys: &[&str], default: u64) -> Result<u64, ImportError> {
    r.count_or_assume(keys, default, format!("{}: absent, so {default}", keys[0]))
}

/// A size field that must be at least 1 (a divisor or a width).
pub(super) fn width(r: &mut Reader<'_>, keys: &[&str], default: u64) -> Result<u64, ImportError> {
    let n = size(r, keys, default)?;
    if n == 0 || n > 1 << 24 {
        return Err(invalid(keys[0], format!("{n} is not a usable size")));
    }
    Ok(n)
}

/// A size that may be written `"auto"` (Mamba's `time_step_rank`, Jamba's `mamba_dt_rank`): then
/// `auto`, with the reading noted.
pub(super) fn size_or_auto(r: &mut Reader<'_>, key: &str, auto: u64, rule: &str) -> Result<u64, ImportError> {
    match r.find(&[key]) {
        Some((path, v)) if v.as_str() == Some("auto") => {
            r.note_used(&path, v);
            r.read_as(format!("{path} \"auto\" is {rule} = {auto}"));
            Ok(auto)
        }
        Some((path, v)) => {
            let n = as_count(v).map_err(|e| invalid(&path, e))?;
            r.note_used(&path, v);
            Ok(n)
        }
        None => {
            r.assume(format!("{key}: absent, so {rule} = {auto}"));
            Ok(auto)
        }
    }
}

/// Bytes per element of the model's dtype (`torch_dtype`, or `dtype` in transformers 5): what the
/// reference cache keeps convolution windows and token shifts in.
pub(super) fn dtype_bytes(r: &mut Reader<'_>) -> u32 {
    let named = r.text("torch_dtype").or_else(|| r.text("dtype"));
    match named.as_deref() {
        Some("float32") => 4,
        Some("float64") => 8,
        Some("bfloat16" | "float16") => 2,
        Some(other) => {
            r.warn(format!("dtype {other} is not one the cache is kept in; the state is counted in bfloat16"));
            2
        }
        None => {
            r.assume("torch_dtype: absent, so bfloat16 (2 bytes) for the convolution window");
            2
        }
    }
}

/// The name of a dtype size, for the readings.
pub(super) fn dtype_name(bytes: u32) -> &'static str {
    match bytes {
        4 => "float32",
        8 => "float64",
        _ => "bf16",
    }
}

/// Layers listed by index (`attn_layer_indices`, LFM2's `full_attn_idxs`): each must be a layer.
pub(super) fn index_list(r: &mut Reader<'_>, key: &str, layers: u64) -> Result<Option<Vec<u64>>, ImportError> {
    let Some((path, v)) = r.find(&[key]) else { return Ok(None) };
    let list = v.as_array().ok_or_else(|| invalid(&path, "must be a list of layer indices"))?;
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let i = as_count(item).map_err(|e| invalid(&path, e))?;
        if i >= layers {
            return Err(invalid(&path, format!("layer {} is not one of the {layers} layers", show(item))));
        }
        out.push(i);
    }
    r.note_used(&path, v);
    Ok(Some(out))
}

/// A list of layer type names (`layer_types`, `layers_block_type`), each mapped by `kind_of`; its
/// length must be the layer count.
pub(super) fn named_layers<T>(
    r: &mut Reader<'_>,
    keys: &[&str],
    layers: u64,
    kind_of: impl Fn(&str) -> Option<T>,
) -> Result<Option<Vec<T>>, ImportError> {
    let Some((path, v)) = r.find(keys) else { return Ok(None) };
    let list = v.as_array().ok_or_else(|| invalid(&path, "must be a list of layer types"))?;
    if list.len() as u64 != layers {
        return Err(invalid(&path, format!("has {} entries for {layers} layers", list.len())));
    }
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let kind = item.as_str().and_then(&kind_of);
        out.push(kind.ok_or_else(|| invalid(&path, format!("unknown layer type {}", show(item))))?);
    }
    r.note_used(&path, v);
    Ok(Some(out))
}

/// A state geometry within the model's limits (a huge config is an error, never an overflow).
pub(super) fn state_geometry(
    conv_elements: u128,
    conv_bytes: u32,
    state_elements: u128,
    state_bytes: u32,
    params: u128,
) -> Result<crate::model::config::StateGeometry, ImportError> {
    use crate::model::config::limits::{MAX_MIXER_PARAMS, MAX_STATE_ELEMENTS};
    let fit = |what: &str, n: u128, max: u64| {
        u64::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| invalid("config", format!("{what} {n} is far too large")))
    };
    Ok(crate::model::config::StateGeometry {
        conv_elements: fit("convolution window", conv_elements, MAX_STATE_ELEMENTS)?,
        state_elements: fit("recurrent state", state_elements, MAX_STATE_ELEMENTS)?,
        conv_bytes,
        state_bytes,
        params: fit("mixer parameters", params, MAX_MIXER_PARAMS)?,
    })
}

/// A schedule from per-layer kinds.
pub(super) fn schedule(kinds: Vec<crate::model::schedule::LayerKind>) -> Schedule {
    Schedule::from_layers(kinds)
}

#[cfg(test)]
mod tests {
    use super::super::{ImportError, import_hf_value};
    use serde_json::json;

    #[test]
    fn unread_state_space_families_are_refused_with_the_reason() {
        let samba = json!({"model_type": "samba", "num_hidden_layers": 32, "hidden_size": 4096,
            "num_attention_heads": 32});
        let hymba = json!({"model_type": "hymba", "num_hidden_layers": 32, "hidden_size": 1600,
            "num_attention_heads": 25});
        let plamo = json!({"model_type": "plamo2", "num_hidden_layers": 32, "hidden_size": 2048,
            "num_attention_heads": 16});
        let hidden = json!({"model_type": "custom", "num_hidden_layers": 4, "hidden_size": 64,
            "num_attention_heads": 4, "layers_block_type": ["mamba", "attention", "mamba", "mamba"]});
        let ssm = json!({"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "ssm_state_size": 16});
        for (config, sign) in [
            (samba, "model_type samba"),
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
