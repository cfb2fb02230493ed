//! Models whose recurrent layers are short convolutions: LFM2 (gated short convolution layers
//! beside global attention) and RecurrentGemma / Griffin (RG-LRU recurrent blocks, a linear
//! recurrence with a short convolution, beside sliding-window attention).

use super::family::Family;
use super::mixer_common::{self as common, Built, dtype_name, index_list, named_layers, width};
use super::positions;
use super::reader::Reader;
use super::report::{ImportError, invalid};
use crate::model::config::{Biases, FfnKind, Positional, bounds};
use crate::model::schedule::{LayerKind, StateMixer};

const CONV: LayerKind = LayerKind::Stateful(StateMixer::Conv);

/// LFM2: `layer_types` (or attention at `full_attn_idxs`, convolutions elsewhere); attention with
/// QK-norm and RoPE; a SwiGLU FFN in every layer whose width LFM2 adjusts.
pub(super) fn lfm2(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = common::start_with_attention(r, family)?;
    if let Some(tied) = r.boolean("tie_embedding") {
        m.tie_embeddings = tied;
    }
    let (layers, d) = (u64::from(m.n_layers()), m.d_model);
    let kind_of = |t: &str| Some(if t == "conv" { CONV } else { LayerKind::Global });
    let kinds = match named_layers(r, &["layer_types"], layers, kind_of)? {
        Some(kinds) => kinds,
        None => match index_list(r, "full_attn_idxs", layers)? {
            Some(idx) => (0..layers).map(|i| if idx.contains(&i) { LayerKind::Global } else { CONV }).collect(),
            None => {
                r.assume("layer_types and full_attn_idxs: absent, so every layer is attention");
                vec![LayerKind::Global; layers as usize]
            }
        },
    };
    m.schedule = common::schedule(kinds);
    let cache = width(r, &["conv_L_cache"], 3)?;
    let bias = r.boolean("conv_bias").unwrap_or(false);
    let dw = u128::from(d);
    // in_proj d -> 3d, out_proj d -> d, a depthwise convolution of conv_L_cache taps (+ biases).
    let params = 4 * dw * dw + dw * u128::from(cache) + if bias { 5 * dw } else { 0 };
    let conv_bytes = common::dtype_bytes(r);
    if m.schedule.layers().contains(&CONV) {
        m.states.conv = Some(common::state_geometry(dw * u128::from(cache), conv_bytes, 0, 4, params)?);
    }
    m.qk_norm = true;
    m.positional = positions::read(r, family, m.max_position_embeddings, false).local;
    m.ffn_kind = FfnKind::SwiGlu;
    m.ffn_size = lfm2_ffn(r)?;
    r.read_as(format!(
        "Recurrent state as transformers 5.x caches it: the convolution's last {cache} inputs (conv_L_cache, the \
         kernel size) in {}, per convolution layer per sequence; nothing else{}",
        dtype_name(conv_bytes),
        super::mamba::one_input_fewer_elsewhere(super::mamba::VLLM, cache)
    ));
    Ok(Built::exact(m))
}

/// LFM2's FFN width: `block_ff_dim` (else `intermediate_size`), two thirds of it with
/// `block_auto_adjust_ff_dim`, times `block_ffn_dim_multiplier`, up to a multiple of `block_multiple_of`.
fn lfm2_ffn(r: &mut Reader<'_>) -> Result<u64, ImportError> {
    let named = width(r, &["block_ff_dim", "intermediate_size"], 12_288)?;
    if !r.boolean("block_auto_adjust_ff_dim").unwrap_or(true) {
        return Ok(named);
    }
    let mut f = 2 * named / 3;
    if let Some(mult) = r.float("block_ffn_dim_multiplier") {
        if !(mult > 0.0 && mult <= 64.0) {
            return Err(invalid("block_ffn_dim_multiplier", format!("{mult} is not a usable multiplier")));
        }
        f = (mult * f as f64) as u64;
        let multiple = width(r, &["block_multiple_of"], 256)?;
        f = f.div_ceil(multiple) * multiple;
    }
    if f == 0 {
        return Err(invalid("block_ff_dim", "leaves no FFN width"));
    }
    r.read_as(format!(
        "LFM2 adjusts its FFN width: {named} becomes {f} (two thirds, times the multiplier, rounded up)"
    ));
    Ok(f)
}

/// RecurrentGemma: `block_types` (or `_block_types`) repeated over the layers, recurrent blocks
/// (RG-LRU) and local attention (MQA, RoPE on half of each head); a GELU-gated MLP with biases of
/// `intermediate_size / 2` in every layer.
pub(super) fn recurrent_gemma(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = common::start_with_attention(r, family)?;
    let (layers, d) = (u64::from(m.n_layers()), m.d_model);
    let heads = u64::from(m.n_q_heads);
    if !d.is_multiple_of(heads) {
        return Err(invalid("num_attention_heads", format!("{heads} heads do not divide hidden_size {d}")));
    }
    m.attn.head_dim = common::to_count("head_dim", d / heads, bounds::MAX_CONFIG_HEAD_DIM)?;
    let window = width(r, &["attention_window_size", "sliding_window"], 2048)?;
    let sliding = LayerKind::Sliding { window_tokens: window };
    let ssm = LayerKind::Stateful(StateMixer::Ssm);
    let pattern = match r.find(&["block_types", "_block_types"]) {
        Some((path, v)) => {
            let list = v.as_array().filter(|l| !l.is_empty()).ok_or_else(|| invalid(&path, "must be a list"))?;
            let mut kinds = Vec::with_capacity(list.len());
            for item in list {
                kinds.push(match item.as_str() {
                    Some("recurrent") => ssm,
                    Some("attention") => sliding,
                    _ => return Err(invalid(&path, format!("unknown block type {}", super::reader::show(item)))),
                });
            }
            r.note_used(&path, v);
            kinds
        }
        None => {
            r.assume("block_types: absent, so recurrent, recurrent, attention");
            vec![ssm, ssm, sliding]
        }
    };
    m.schedule = common::schedule((0..layers as usize).map(|i| pattern[i % pattern.len()]).collect());
    let lru = width(r, &["lru_width"], d)?;
    if !lru.is_multiple_of(heads) {
        return Err(invalid("lru_width", format!("{lru} is not split evenly over {heads} heads")));
    }
    let cw = width(r, &["conv1d_width"], 4)?;
    let (dw, w, hw) = (u128::from(d), u128::from(lru), u128::from(heads));
    // linear_y, linear_x (d -> W, bias), linear_out (W -> d, bias), conv1d (W x cw + W), RG-LRU:
    // recurrent_param W, input and recurrent gates block-diagonal per head (W^2 / heads + W each).
    let params = 2 * (dw * w + w) + (w * dw + dw) + (w * u128::from(cw) + w) + w + 2 * (w * w / hw + w);
    let conv_bytes = common::dtype_bytes(r);
    if m.schedule.layers().contains(&ssm) {
        m.states.ssm = Some(common::state_geometry(dw * u128::from(cw - 1), conv_bytes, w, 4, params)?);
    }
    let rope = positions::read(r, family, m.max_position_embeddings, false).local;
    m.positional = match rope {
        Positional::Rope { theta, .. } => {
            let partial = r.float("partial_rotary_factor").unwrap_or(0.5);
            Positional::Rope { theta, partial_rotary_factor: partial, proportional: false, linear_factor: 1.0 }
        }
        other => other,
    };
    m.biases = Biases { qkv: r.boolean("attention_bias").unwrap_or(false), o: true, ffn: true };
    m.ffn_kind = FfnKind::GeGlu;
    m.ffn_size = width(r, &["intermediate_size"], 3 * d)? / 2;
    r.read_as(format!(
        "attention_window_size {window} is read as a {window}-token window, as for every sliding-window model here \
         (transformers' cache keeps the last {} tokens beside the current one)",
        window - 1
    ));
    r.read_as(format!("The MLP is GELU-gated with biases, of intermediate_size / 2 = {}", m.ffn_size));
    r.read_as(format!(
        "Recurrent state as transformers 5.x keeps it: the convolution's last {} inputs (hidden_size each) in {} and the \
         RG-LRU state (lru_width) in float32, per recurrent layer per sequence",
        cw - 1,
        dtype_name(conv_bytes)
    ));
    Ok(Built::exact(m))
}
