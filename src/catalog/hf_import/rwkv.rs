//! RWKV-4 (transformers' `rwkv`), RWKV-6 (flash-linear-attention's `rwkv6`, or RWKV-org's remote
//! code, which shares the `model_type`) and RWKV-7 (flash-linear-attention's `rwkv7`):
//! every layer a time-mix (linear attention with a per-channel or per-head state) and a channel-mix
//! FFN, LayerNorms with biases, no attention (a hybrid `attn` spec is not read).
//!
//! The channel mix is counted as a two-matrix FFN; its other weights (RWKV-4/6's receptance matrix
//! and mix vectors, RWKV-7's mix vector) are counted with the layer's mixer, since every layer has
//! one of each.

use super::family::Family;
use super::mixer_common::{self as common, Built, dtype_name, signed, width};
use super::reader::Reader;
use super::report::{ImportError, invalid};
use crate::model::config::{FfnKind, Model, NormKind};
use crate::model::schedule::{LayerKind, StateMixer};

/// The common start: all layers linear attention, a two-matrix FFN, two LayerNorms per layer.
fn start(r: &mut Reader<'_>, family: &Family) -> Result<Model, ImportError> {
    let (layers, d) = common::sizes(r)?;
    let mut m = common::start(r, family, layers, d)?;
    m.schedule = common::schedule(vec![LayerKind::Stateful(StateMixer::Linear); layers as usize]);
    m.ffn_kind = FfnKind::Mlp;
    m.norm = NormKind::LayerNorm;
    m.norms_per_layer = 2;
    Ok(m)
}

/// FLA's hybrid spec (`attn`) makes listed layers softmax attention; it is not read.
fn refuse_attn(r: &mut Reader<'_>) -> Result<(), ImportError> {
    if r.find(&["attn"]).is_some() {
        return Err(ImportError::Unsupported(
            "This RWKV config lists softmax-attention layers (attn); the importer reads RWKV models without them only."
                .into(),
        ));
    }
    Ok(())
}

/// A fraction field (`expand_k`) times `d`, as Python's `int(d * x)`.
fn scaled(r: &mut Reader<'_>, key: &str, d: u64, default: f64) -> Result<u64, ImportError> {
    let x = r.float(key).unwrap_or_else(|| {
        r.assume(format!("{key}: absent, so {default}"));
        default
    });
    let v = d as f64 * x;
    if !(v >= 1.0 && v <= (1u64 << 24) as f64) {
        return Err(invalid(key, format!("{x} gives no usable width")));
    }
    Ok(v as u64)
}

/// The FFN width: `intermediate_size`, else `32 ceil(int(d * hidden_ratio) / 32)`.
fn ffn_width(r: &mut Reader<'_>, d: u64, ratio: f64) -> Result<u64, ImportError> {
    if let Some(i) = r.count(&["intermediate_size"])? {
        return Ok(i);
    }
    let i = scaled(r, "hidden_ratio", d, ratio)?.div_ceil(32) * 32;
    r.read_as(format!("intermediate_size is absent: 32 * ceil(hidden_size * hidden_ratio / 32) = {i}"));
    Ok(i)
}

/// A missing pre-norm (`norm_first`: a LayerNorm before layer 0) in parameters.
fn pre_norm(m: &Model) -> i128 {
    signed(2 * u128::from(m.d_model))
}

const PRE_NORM: &str = "layer 0's extra LayerNorm before the first block is not counted";

fn state_reading(r: &mut Reader<'_>, conv_bytes: u32, state: &str) {
    r.read_as(format!(
        "Recurrent state as the reference caches it: the two token shifts (time mix and channel mix, hidden_size \
         each) in {} and {state} in float32, per layer per sequence",
        dtype_name(conv_bytes)
    ));
}

/// RWKV-4: a per-channel WKV state (numerator, denominator, max) over `attention_hidden_size`.
pub(super) fn rwkv4(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = start(r, family)?;
    let d = m.d_model;
    let a = width(r, &["attention_hidden_size"], d)?;
    m.ffn_size = width(r, &["intermediate_size"], 4 * d)?;
    let (dw, aw) = (u128::from(d), u128::from(a));
    // key, value, receptance, output; time_decay, time_first; three mix vectors; plus the channel
    // mix's receptance (d x d) and two mix vectors.
    let params = 4 * dw * aw + 3 * dw + 2 * aw + dw * dw + 2 * dw;
    let conv_bytes = common::dtype_bytes(r);
    m.states.linear = Some(common::state_geometry(2 * dw, conv_bytes, 3 * dw, 4, params)?);
    state_reading(r, conv_bytes, "the WKV numerator, denominator and running maximum (hidden_size each)");
    Ok(Built { missing: pre_norm(&m), model: m, unmodelled: PRE_NORM.into() })
}

/// The fields that mark the RWKV-org layout of an `rwkv6` config (RWKV/v6-Finch-*-HF, remote code).
const RWKV_ORG_FIELDS: [&str; 3] = ["head_size", "head_size_divisor", "attention_hidden_size"];

/// RWKV-6: two layouts share `model_type: "rwkv6"`. RWKV-org's Hugging Face repos (remote code)
/// name `head_size` and `attention_hidden_size`; flash-linear-attention names `num_heads`,
/// `expand_k` and `expand_v`. Either of the first marks the RWKV-org layout.
pub(super) fn rwkv6(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    refuse_attn(r)?;
    if r.find(&RWKV_ORG_FIELDS).is_some() { rwkv6_org(r, family) } else { rwkv6_fla(r, family) }
}

/// RWKV-6 as RWKV-org's remote code builds it (`Rwkv6SelfAttention`, `Rwkv6FeedForward`):
/// `attention_hidden_size / head_size` heads of `head_size` x `head_size`; r, k, v, g of
/// `hidden_size x attention_hidden_size`; the token-shift LoRA of 32 and decay LoRA of 64 (64 and
/// 128 when `hidden_size` is 4096); a GroupNorm over `hidden_size`; a pre-LayerNorm on layer 0.
fn rwkv6_org(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = start(r, family)?;
    let d = m.d_model;
    let a = width(r, &["attention_hidden_size"], d)?;
    let head = width(r, &["head_size"], 64)?;
    if !a.is_multiple_of(head) {
        return Err(invalid("head_size", format!("{head} does not divide attention_hidden_size {a}")));
    }
    let heads = a / head;
    if a != d {
        r.warn(format!(
            "attention_hidden_size {a} differs from hidden_size {d}: the remote code's ln_x is a GroupNorm over \
             hidden_size and cannot run on the {a}-wide WKV output; its parameters are counted as declared"
        ));
    }
    if let Some(n) = r.count(&["num_attention_heads"])?
        && n != heads
    {
        r.warn(format!("num_attention_heads {n} is ignored: attention_hidden_size / head_size = {heads}"));
    }
    let fla: Vec<&str> = ["num_heads", "expand_k", "expand_v", "proj_low_rank_dim", "gate_low_rank_dim"]
        .into_iter()
        .filter(|k| r.find(&[k]).is_some())
        .collect();
    if !fla.is_empty() {
        r.warn(format!(
            "{} ignored: head_size or attention_hidden_size marks the RWKV-org layout, which does not read them",
            fla.join(", ")
        ));
    }
    m.ffn_size = if r.find(&["intermediate_size"]).is_some() {
        width(r, &["intermediate_size"], 0)?
    } else {
        let i = 7 * d / 64 * 32;
        if i == 0 {
            return Err(invalid(
                "intermediate_size",
                format!("absent, and hidden_size {d} gives int({d} * 3.5 // 32 * 32) = 0"),
            ));
        }
        r.read_as(format!("intermediate_size is absent: int(hidden_size * 3.5 // 32 * 32) = {i}"));
        i
    };
    let (mix, decay) = if d == 4096 { (64u128, 128u128) } else { (32, 64) };
    r.read_as(format!(
        "RWKV-org layout: {heads} heads of {head} over attention_hidden_size {a}; token-shift LoRA {mix}, decay LoRA \
         {decay} (the remote code's constants, doubled only when hidden_size is 4096)"
    ));
    let (dw, aw) = (u128::from(d), u128::from(a));
    // Six mix vectors (6d); time_maa_w1/w2 (d x 5 mix, 5 x mix x d); time_decay and time_faaaa (a
    // each); decay LoRA (d x decay, decay x a); r, k, v, g (d x a) and output (a x d); ln_x, a
    // GroupNorm over hidden_size (2d); plus the channel mix's receptance (d x d) and mix vectors (2d).
    let params = 6 * dw + 10 * mix * dw + 2 * aw + decay * (dw + aw) + 5 * dw * aw + 2 * dw + dw * dw + 2 * dw;
    let conv_bytes = common::dtype_bytes(r);
    let state = aw * u128::from(head);
    m.states.linear = Some(common::state_geometry(2 * dw, conv_bytes, state, 4, params)?);
    state_reading(r, conv_bytes, "the WKV state (heads x head_size x head_size)");
    Ok(Built { missing: pre_norm(&m), model: m, unmodelled: PRE_NORM.into() })
}

/// RWKV-6 (FLA): `num_heads` heads of `key_dim / heads` x `value_dim / heads`, data-dependent
/// token shift (LoRA of `proj_low_rank_dim`) and decay (LoRA of `gate_low_rank_dim`).
fn rwkv6_fla(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = start(r, family)?;
    let d = m.d_model;
    let k = scaled(r, "expand_k", d, 0.5)?;
    let v = scaled(r, "expand_v", d, 1.0)?;
    let heads = width(r, &["num_heads"], 4)?;
    if !k.is_multiple_of(heads) || !v.is_multiple_of(heads) {
        return Err(invalid("num_heads", format!("{heads} heads do not divide the key and value widths {k}, {v}")));
    }
    let rank = u128::from(width(r, &["proj_low_rank_dim"], 32)?);
    let gate = u128::from(width(r, &["gate_low_rank_dim"], 64)?);
    m.ffn_size = ffn_width(r, d, 3.5)?;
    let (dw, kw, vw) = (u128::from(d), u128::from(k), u128::from(v));
    // x_proj (LerpLinear d -> 5r, then 5r -> d), x_bias 5d, r/k (d x K), v/g (d x V), w LoRA with bias,
    // bonus K, GroupNorm 2V, o (V x d); plus the channel mix's receptance and mix vectors.
    let params = 10 * rank * dw
        + 6 * dw
        + 2 * dw * kw
        + gate * (dw + kw)
        + 2 * kw
        + 2 * dw * vw
        + 2 * vw
        + vw * dw
        + dw * dw
        + 2 * dw;
    let conv_bytes = common::dtype_bytes(r);
    let state = kw * vw / u128::from(heads);
    m.states.linear = Some(common::state_geometry(2 * dw, conv_bytes, state, 4, params)?);
    state_reading(r, conv_bytes, "the WKV state (heads x key dim x value dim)");
    let missing = if r.boolean("norm_first").unwrap_or(true) { pre_norm(&m) } else { 0 };
    Ok(Built { missing, model: m, unmodelled: PRE_NORM.into() })
}

/// A low-rank width: the field, else FLA's rule `max(32, round(c sqrt(d) factor / 32) 32)`.
fn low_rank(r: &mut Reader<'_>, key: &str, d: u64, c: f64) -> Result<u128, ImportError> {
    if let Some(n) = r.count(&[key])? {
        return Ok(n.into());
    }
    let n = ((c * (d as f64).sqrt() / 32.0).round_ties_even() * 32.0).max(32.0) as u128;
    r.assume(format!("{key}: absent, so FLA's rule gives {n}"));
    Ok(n)
}

/// RWKV-7 (FLA): heads of `head_dim`, a DPLR state per head, LoRAs for decay, in-context rate,
/// gate and (from layer 1 on) the value residual.
pub(super) fn rwkv7(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    refuse_attn(r)?;
    let mut m = start(r, family)?;
    let d = m.d_model;
    let head_dim = width(r, &["head_dim"], 64)?;
    if !d.is_multiple_of(head_dim) {
        return Err(invalid("head_dim", format!("{head_dim} does not divide hidden_size {d}")));
    }
    let heads = d / head_dim;
    if let Some(n) = r.count(&["num_heads"])?
        && n != heads
    {
        r.warn(format!("num_heads {n} is ignored: hidden_size / head_dim = {heads}"));
    }
    let v = match r.find(&["value_dim"]) {
        Some((path, val)) if !val.is_u64() => return Err(invalid(&path, "only one value_dim for all layers is read")),
        _ => width(r, &["value_dim"], d)?,
    };
    if !v.is_multiple_of(heads) {
        return Err(invalid("value_dim", format!("{v} is not split evenly over {heads} heads")));
    }
    // FLA scales the decay, a and v ranks by head_dim / 64.
    let factor = head_dim as f64 / 64.0;
    let dw_rank = low_rank(r, "decay_low_rank_dim", d, 2.5 * factor)?;
    let a_rank = low_rank(r, "a_low_rank_dim", d, 2.5 * factor)?;
    let g_rank = low_rank(r, "gate_low_rank_dim", d, 5.0)?;
    let v_rank = low_rank(r, "v_low_rank_dim", d, 1.7 * factor)?;
    m.ffn_size = ffn_width(r, d, 4.0)?;
    let (dd, vw) = (u128::from(d), u128::from(v));
    let value_lora = dd * v_rank + v_rank * vw + vw;
    // Six mix vectors, k_k, k_a, r_k (9d); r, k (d x d), v (d x V), o (V x d); decay and a LoRAs with
    // bias; gate LoRA; GroupNorm 2V; the value LoRA; plus the channel mix's mix vector (d).
    let params = 9 * dd
        + 2 * dd * dd
        + 2 * dd * vw
        + (2 * dd * dw_rank + dd)
        + (2 * dd * a_rank + dd)
        + (dd * g_rank + g_rank * vw)
        + 2 * vw
        + value_lora
        + dd;
    let conv_bytes = common::dtype_bytes(r);
    let state = u128::from(head_dim) * vw;
    m.states.linear = Some(common::state_geometry(2 * dd, conv_bytes, state, 4, params)?);
    state_reading(r, conv_bytes, "the WKV state (heads x head_dim x value head dim)");
    let t = crate::model::units::format_thousands;
    r.read_as(format!(
        "Every RWKV-7 layer is counted with the mixer of layers 1 on ({} with the channel mix's mix vector); \
         layer 0 has no value LoRA and holds {} fewer",
        t(params),
        t(value_lora)
    ));
    let pre = if r.boolean("norm_first").unwrap_or(true) { pre_norm(&m) } else { 0 };
    Ok(Built {
        missing: pre - signed(value_lora),
        model: m,
        unmodelled: "layer 0 has no value LoRA but is counted with one, and its extra LayerNorm before the first \
                     block is not counted"
            .into(),
    })
}
