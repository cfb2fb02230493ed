//! Pieces the state-space and hybrid family readers share (`mamba`, `mamba_hybrids`, `zamba`,
//! `rwkv`, `gated_deltanet`, `short_conv`): a model to start from, sizes and dtypes read with their
//! defaults, layer lists, and the state geometry. Kept apart from `hybrid`, which picks the family,
//! so the readers never refer back to the module that calls them.

use super::embeddings;
use super::family::Family;
use super::reader::{Reader, as_count, show};
use super::report::{ImportError, invalid};
use crate::model::config::{Model, NormKind, Positional, States};
use crate::model::schedule::Schedule;

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

/// A model of `layers` layers of width `d` with this family's vocabulary, tying and context, RMSNorm
/// and no attention, FFN or positions yet: each family's reader fills in the rest.
pub(super) fn start(r: &mut Reader<'_>, family: &Family, layers: u64, d: u64) -> Result<Model, ImportError> {
    use super::reader::{positive, positive_u32};
    use crate::model::config::bounds;
    let layers = positive_u32("num_hidden_layers", layers, bounds::MAX_LAYERS)?;
    let d = positive("hidden_size", d, bounds::MAX_D_MODEL)?;
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
            r.assume("torch_dtype: absent, so bfloat16 (2 bytes) for the convolution window or token shifts");
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
    index_list_at(r, &path, v, layers).map(Some)
}

/// The layer indices listed in `v` (found at `path`), each a layer.
pub(super) fn index_list_at(
    r: &mut Reader<'_>,
    path: &str,
    v: &serde_json::Value,
    layers: u64,
) -> Result<Vec<u64>, ImportError> {
    let list = v.as_array().ok_or_else(|| invalid(path, "must be a list of layer indices"))?;
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let i = as_count(item).map_err(|e| invalid(path, e))?;
        if i >= layers {
            return Err(invalid(path, format!("layer {} is not one of the {layers} layers", show(item))));
        }
        out.push(i);
    }
    r.note_used(path, v);
    Ok(out)
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
    use crate::model::config::bounds::{MAX_MIXER_PARAMS, MAX_STATE_ELEMENTS};
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

/// A mixture of experts read from a config: `experts` routed experts (from the field `experts_field`)
/// of width `expert`, `num_experts_per_tok` of them active (default `active`), `shared` always-on
/// experts of the same width (counted from `shared_field`), in every `step`-th layer (from the field
/// `step_field`) from `first` on.
pub(super) struct MoeFields<'a> {
    pub experts_field: &'a str,
    pub experts: u64,
    pub active: u64,
    pub shared_field: &'a str,
    pub shared: u64,
    pub expert: u64,
    pub first: u64,
    pub step_field: &'a str,
    pub step: u64,
}

impl MoeFields<'_> {
    /// The model's MoE, each count checked against its limit.
    pub fn read(&self, r: &mut Reader<'_>) -> Result<crate::model::config::Moe, ImportError> {
        use crate::model::config::bounds::{MAX_EXPERTS, MAX_LAYERS};
        let active = size(r, &["num_experts_per_tok"], self.active)?;
        Ok(crate::model::config::Moe {
            n_routed_experts: to_count(self.experts_field, self.experts, MAX_EXPERTS)?,
            n_active_experts: to_count("num_experts_per_tok", active, MAX_EXPERTS)?,
            n_shared_experts: to_count(self.shared_field, self.shared, MAX_EXPERTS)?,
            expert_ffn_size: self.expert,
            first_dense_layers: to_count("expert_layer_offset", self.first, MAX_LAYERS)?,
            layer_step: to_count(self.step_field, self.step, MAX_LAYERS)?,
        })
    }
}
