//! Zamba and Zamba2: every layer is a Mamba layer (Mamba-1 in Zamba, Mamba-2 in Zamba2); the
//! `hybrid` layers also call a shared transformer block (attention over the hidden state
//! concatenated with the embeddings, 2 x hidden_size wide, then an MLP) and a per-layer linear. Each
//! call caches its own K/V under its layer, so those layers are attention layers with a Mamba mixer
//! beside them. The shared block's weights exist once (Zamba2: `num_mem_blocks` copies used in
//! turn), which the model, counting attention per attention layer, cannot say: the reading gives the
//! difference.

use super::family::Family;
use super::mamba::{Mamba1, Mamba2, state_reading};
use super::mixer_common::{self as common, Built, attention_weights, named_layers, signed, size_or_auto, width};
use super::reader::Reader;
use super::report::{ImportError, invalid};
use crate::model::config::{Model, Positional, bounds};
use crate::model::schedule::{LayerKind, StateMixer};

const SSM: LayerKind = LayerKind::Stateful(StateMixer::Ssm);

/// Heads, KV heads and head dimension `2 hidden_size / heads`, always derived (the file's
/// `attention_head_dim` or `kv_channels` are not what the code uses).
fn attention(r: &mut Reader<'_>, m: &mut Model) -> Result<(), ImportError> {
    let heads = r.required(&["num_attention_heads"], "num_attention_heads")?;
    let heads = common::to_count("num_attention_heads", heads, bounds::MAX_HEADS)?.max(1);
    let kv = common::size(r, &["num_key_value_heads"], heads.into())?;
    let kv = common::to_count("num_key_value_heads", kv, bounds::MAX_HEADS)?;
    if kv == 0 || !heads.is_multiple_of(kv) {
        return Err(invalid("num_key_value_heads", format!("{heads} query heads cannot be split over {kv}")));
    }
    let hd = 2 * m.d_model / u64::from(heads);
    if hd == 0 || !(2 * m.d_model).is_multiple_of(u64::from(heads)) {
        return Err(invalid("num_attention_heads", "2 * hidden_size is not divisible by the heads"));
    }
    m.n_q_heads = heads;
    m.attn.n_kv_heads = kv;
    m.attn.head_dim = common::to_count("attention_head_dim", hd, bounds::MAX_CONFIG_HEAD_DIM)?;
    r.read_as(format!(
        "Attention reads the hidden state concatenated with the embeddings (2 * hidden_size wide): head_dim is \
         2 * hidden_size / heads = {hd}, whatever the file's attention_head_dim or kv_channels say"
    ));
    Ok(())
}

/// Which layers are hybrid: `layers_block_type`, else `default`.
fn hybrid_layers(r: &mut Reader<'_>, layers: u64, default: Vec<bool>) -> Result<Vec<bool>, ImportError> {
    let kind_of = |t: &str| match t {
        "mamba" | "linear_attention" => Some(false),
        "hybrid" => Some(true),
        _ => None,
    };
    if let Some(list) = named_layers(r, &["layers_block_type"], layers, kind_of)? {
        return Ok(list);
    }
    if default.len() as u64 != layers {
        return Err(invalid(
            "layers_block_type",
            format!("absent, and the default pattern does not have {layers} layers"),
        ));
    }
    r.assume("layers_block_type: absent, so the family's default pattern");
    Ok(default)
}

fn set_schedule(m: &mut Model, hybrid_layers: &[bool]) {
    let kinds = hybrid_layers.iter().map(|&h| if h { LayerKind::Global } else { SSM });
    m.schedule = common::schedule(kinds.collect());
    m.states.beside_attention = Some(StateMixer::Ssm);
    m.norms_per_layer = 1;
    m.ffn_size = 0;
}

/// The shared block's weights once (attention from 2d, MLP of three `d x f` matrices, norms 2d + d)
/// minus the model's count of attention in each hybrid layer.
fn shared_block_difference(m: &Model, blocks: u128, f: u128, per_call: u128) -> i128 {
    let d = u128::from(m.d_model);
    let calls = u128::from(m.attention_layers());
    let block = attention_weights(m, 2 * d) + 3 * d * f + 3 * d;
    signed(blocks * block + calls * (d * d + per_call)) - signed(calls * attention_weights(m, d))
}

/// Zamba: Mamba-1 mixers (`n_mamba_heads` of them, same weights in total), hybrid layers by
/// `attn_layer_period` / `attn_layer_offset` after the first three layers; NoPE.
pub(super) fn zamba(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let (layers, d) = common::sizes(r)?;
    let mut m = common::start(r, family, layers, d)?;
    attention(r, &mut m)?;
    let period = width(r, &["attn_layer_period"], 6)?;
    let offset = common::size(r, &["attn_layer_offset"], 4)?;
    let default = (0..layers).map(|i| i == 2 || (i >= 3 && (i - 3) % period == offset)).collect();
    set_schedule(&mut m, &hybrid_layers(r, layers, default)?);
    let mixer = Mamba1 {
        d,
        inner: width(r, &["mamba_expand"], 2)? * d,
        state: width(r, &["mamba_d_state"], 16)?,
        kernel: width(r, &["mamba_d_conv"], 4)?,
        dt_rank: size_or_auto(r, "mamba_dt_rank", d.div_ceil(16), "ceil(hidden_size / 16)")?,
        conv_bias: r.boolean("mamba_conv_bias").unwrap_or(true),
        proj_bias: r.boolean("mamba_proj_bias").unwrap_or(false),
        inner_norms: 0,
    };
    let conv_bytes = common::dtype_bytes(r);
    m.states.ssm = Some(mixer.geometry(conv_bytes)?);
    let f = width(r, &["intermediate_size"], 4 * d)?;
    let missing = shared_block_difference(&m, 1, f.into(), 0);
    r.read_as("Zamba's shared attention uses no positional encoding (NoPE)");
    state_reading(r, mixer.kernel, conv_bytes);
    Ok(Built {
        model: m,
        missing,
        unmodelled: "the shared transformer block exists once but the model counts its attention (from hidden_size \
                     inputs, not 2 * hidden_size) in every hybrid layer and its MLP nowhere, nor each hybrid layer's \
                     hidden_size x hidden_size linear"
            .into(),
    })
}

/// Zamba2: Mamba-2 mixers (`n_mamba_heads`, head dim always `expand * hidden / heads`), hybrid
/// layers calling `num_mem_blocks` shared blocks in turn, LoRA adapters per call; RoPE only with
/// `use_mem_rope`.
pub(super) fn zamba2(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let (layers, d) = common::sizes(r)?;
    let mut m = common::start(r, family, layers, d)?;
    attention(r, &mut m)?;
    let mut default = vec![false];
    for _ in 0..7 {
        default.extend([false, false, false, false, false, true]);
    }
    default.extend([false, false, false, false, true, false, false, false, true, false, false]);
    set_schedule(&mut m, &hybrid_layers(r, layers, default)?);
    let inner = width(r, &["mamba_expand"], 2)? * d;
    let heads = width(r, &["n_mamba_heads"], 8)?;
    if !inner.is_multiple_of(heads) {
        return Err(invalid("n_mamba_heads", format!("{heads} heads do not divide the inner width {inner}")));
    }
    let bias = r.boolean("add_bias_linear").unwrap_or(false);
    let mixer = Mamba2 {
        d,
        inner,
        heads,
        head_dim: inner / heads,
        groups: width(r, &["mamba_ngroups"], 1)?,
        state: width(r, &["mamba_d_state"], 64)?,
        kernel: width(r, &["mamba_d_conv"], 4)?,
        conv_bias: true,
        in_bias: bias,
        out_bias: bias,
        gated_norm: true,
    };
    r.read_as(format!("Zamba2's Mamba head dimension is expand * hidden_size / n_mamba_heads = {}", inner / heads));
    let conv_bytes = common::dtype_bytes(r);
    m.states.ssm = Some(mixer.geometry(conv_bytes)?);
    if r.boolean("use_mem_rope") == Some(true) {
        let theta = r.float("rope_theta").unwrap_or(10_000.0);
        m.positional = Positional::rope(theta);
    } else {
        r.read_as("Zamba2's shared attention uses no positional encoding (use_mem_rope is not true)");
    }
    let f = u128::from(width(r, &["intermediate_size"], 4 * d)?);
    let blocks = u128::from(width(r, &["num_mem_blocks"], 1)?).min(u128::from(m.attention_layers()).max(1));
    let rank = u128::from(common::size(r, &["adapter_rank"], 128)?);
    let d2 = u128::from(d);
    // Per call: the MLP's gate/up adapter (d -> rank -> 2f), and with the attention adapter q, k, v
    // adapters (2d -> rank -> 2d each).
    let attention_adapters =
        if r.boolean("use_shared_attention_adapter") == Some(true) { 3 * 4 * d2 * rank } else { 0 };
    let per_call = d2 * rank + rank * 2 * f + attention_adapters;
    let missing = shared_block_difference(&m, blocks, f, per_call);
    state_reading(r, mixer.kernel, conv_bytes);
    Ok(Built {
        model: m,
        missing,
        unmodelled:
            "the shared transformer blocks exist once each (num_mem_blocks) but the model counts their attention \
                     (from hidden_size inputs, not 2 * hidden_size) in every hybrid layer and their MLP nowhere, nor \
                     each hybrid layer's linear and LoRA adapters"
                .into(),
    })
}
