//! Samba in flash-linear-attention's layout (`model_type` "samba"): every block is an RMSNorm, one
//! token mixer, an RMSNorm and a SwiGLU MLP. The mixer is sliding-window attention in the layers the
//! `attn` object lists and a Mamba-1 layer elsewhere. The attention's settings live in that object
//! (`attn.num_heads`, `attn.window_size`, ...), not at the top level; the top-level
//! `intermediate_size` is the Mamba layer's inner width, and the MLP's width follows from
//! `hidden_ratio`. fla's cache keeps the last `window_size` keys and values of an attention layer, a
//! `conv_kernel`-input convolution window in the model's dtype and the SSM state in float32.

use super::family::Family;
use super::mamba::Mamba1;
use super::mixer_common::{self as common, Built, dtype_name, index_list_at, size_or_auto, width};
use super::reader::Reader;
use super::report::{ImportError, invalid};
use crate::model::config::{Biases, FfnKind, Model, Positional, bounds};
use crate::model::schedule::{LayerKind, StateMixer};

/// fla's `SambaConfig` default attention: 18 heads, every odd layer of 18, a 2,048-token window.
const DEFAULT_ATTENTION_LAYERS: [u64; 9] = [1, 3, 5, 7, 9, 11, 13, 15, 17];
const DEFAULT_HEADS: u64 = 18;
const DEFAULT_WINDOW: u64 = 2048;

pub(super) fn samba(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let (layers, d) = common::sizes(r)?;
    let mut m = common::start(r, family, layers, d)?;
    let layers = u64::from(m.n_layers());
    let has_attn_object = r.find(&["attn"]).is_some();
    if !has_attn_object {
        r.assume("attn: absent, so fla's default (18 heads at layers 1, 3, ..., 17, a 2048-token window)");
    }
    let attention = attention_layers(r, layers, has_attn_object)?;
    let window = if has_attn_object { r.nested_count("attn", "window_size")? } else { Some(DEFAULT_WINDOW) };
    if has_attn_object && window.is_none() {
        r.assume("attn.window_size: absent or null, so full causal attention in the attention layers");
    }
    let attention_kind = match window {
        Some(0) => return Err(invalid("attn.window_size", "0 is not a usable window")),
        Some(w) => {
            r.read_as(format!(
                "attn.window_size {w}: each attention layer sees the last {w} tokens (the query included) and \
                 its cache keeps only those"
            ));
            LayerKind::Sliding { window_tokens: w }
        }
        None => LayerKind::Global,
    };
    let ssm = LayerKind::Stateful(StateMixer::Ssm);
    let kinds = (0..layers).map(|i| if attention.contains(&i) { attention_kind } else { ssm });
    m.schedule = common::schedule(kinds.collect());
    attention_heads(r, &mut m, has_attn_object)?;
    let theta = if has_attn_object { r.nested_float("attn", "rope_theta") } else { None };
    if has_attn_object && theta.is_none() {
        r.assume("attn.rope_theta: absent, so 10000");
    }
    m.positional = Positional::rope(theta.unwrap_or(10_000.0));
    let mixer = mamba_mixer(r, d)?;
    let conv_bytes = common::dtype_bytes(r);
    m.states.ssm = Some(mixer.geometry(conv_bytes)?);
    m.ffn_kind = FfnKind::SwiGlu;
    m.ffn_size = mlp_width(r, d)?;
    r.read_as(format!(
        "Recurrent state as fla's Mamba layer caches it: a {}-input convolution window in {} and the SSM state in \
         float32, per layer per sequence",
        mixer.kernel,
        dtype_name(conv_bytes)
    ));
    Ok(Built::exact(m))
}

/// The attention layers: `attn.layers`, or fla's default list (the layers it names that exist).
fn attention_layers(r: &mut Reader<'_>, layers: u64, has_attn_object: bool) -> Result<Vec<u64>, ImportError> {
    match r.find_nested("attn", "layers") {
        Some((path, v)) => index_list_at(r, &path, v, layers),
        None if has_attn_object => Err(invalid("attn.layers", "absent: Samba's attention object must list its layers")),
        None => Ok(DEFAULT_ATTENTION_LAYERS.into_iter().filter(|&i| i < layers).collect()),
    }
}

/// Heads and KV heads from `attn`; fla's attention derives head_dim = hidden_size / heads. Q, K
/// and V carry biases when `attn.qkv_bias` says so, the output projection and the MLP never.
fn attention_heads(r: &mut Reader<'_>, m: &mut Model, has_attn_object: bool) -> Result<(), ImportError> {
    let count = |r: &mut Reader<'_>, key| if has_attn_object { r.nested_count("attn", key) } else { Ok(None) };
    let heads = count(r, "num_heads")?.unwrap_or_else(|| {
        if has_attn_object {
            r.assume(format!("attn.num_heads: absent, so fla's default {DEFAULT_HEADS}"));
        }
        DEFAULT_HEADS
    });
    let heads = common::to_count("attn.num_heads", heads, bounds::MAX_HEADS)?;
    let kv = count(r, "num_kv_heads")?.unwrap_or_else(|| {
        if has_attn_object {
            r.assume(format!("attn.num_kv_heads: absent, so one per query head ({heads})"));
        }
        heads.into()
    });
    let kv = common::to_count("attn.num_kv_heads", kv, bounds::MAX_HEADS)?;
    if heads == 0 || kv == 0 || !heads.is_multiple_of(kv) {
        return Err(invalid("attn.num_kv_heads", format!("{heads} query heads cannot be split over {kv}")));
    }
    if !m.d_model.is_multiple_of(u64::from(heads)) {
        return Err(invalid("attn.num_heads", format!("hidden_size {} is not divisible by {heads}", m.d_model)));
    }
    m.n_q_heads = heads;
    m.attn.n_kv_heads = kv;
    m.attn.head_dim = common::to_count("head_dim", m.d_model / u64::from(heads), bounds::MAX_CONFIG_HEAD_DIM)?;
    let qkv_bias = has_attn_object
        && r.nested_boolean("attn", "qkv_bias").unwrap_or_else(|| {
            r.assume("attn.qkv_bias: absent, so no Q/K/V biases");
            false
        });
    m.biases = Biases { qkv: qkv_bias, o: false, ffn: false };
    Ok(())
}

/// The Mamba-1 mixer as fla's `SambaBlock` builds it: the file's `intermediate_size` (written by
/// the config class as `expand * hidden_size`), a convolution bias always (the block does not pass
/// `use_conv_bias` on), `use_bias` on the in and out projections.
fn mamba_mixer(r: &mut Reader<'_>, d: u64) -> Result<Mamba1, ImportError> {
    let expand = width(r, &["expand"], 2)?;
    let inner = width(r, &["intermediate_size"], expand * d)?;
    if r.boolean("use_conv_bias") == Some(false) {
        r.warn("use_conv_bias false is ignored: fla's Samba block always builds its convolution with a bias");
    }
    Ok(Mamba1 {
        d,
        inner,
        state: width(r, &["state_size"], 16)?,
        kernel: width(r, &["conv_kernel"], 4)?,
        dt_rank: size_or_auto(r, "time_step_rank", d.div_ceil(16), "ceil(hidden_size / 16)")?,
        conv_bias: true,
        proj_bias: r.boolean("use_bias").unwrap_or(false),
        inner_norms: 0,
    })
}

/// fla's `GatedMLP` width: `floor(2/3 * hidden_size * hidden_ratio)` rounded up to a multiple of 256.
fn mlp_width(r: &mut Reader<'_>, d: u64) -> Result<u64, ImportError> {
    let ratio = width(r, &["hidden_ratio"], 4)?;
    let raw = d.saturating_mul(ratio).saturating_mul(2) / 3;
    let ffn = raw.div_ceil(256).saturating_mul(256);
    r.read_as(format!(
        "The MLP is {ffn} wide: 2/3 of hidden_size * hidden_ratio = {raw}, rounded up to a multiple of 256 (fla's \
         GatedMLP); intermediate_size is the Mamba layers' inner width"
    ));
    if ffn > bounds::MAX_FFN {
        return Err(invalid("hidden_ratio", format!("an MLP {ffn} wide is far too large")));
    }
    Ok(ffn)
}
