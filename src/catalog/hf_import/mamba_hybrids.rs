//! Hybrids of Mamba layers and attention: Jamba (Mamba-1, attention 1 layer in 8, MoE every other
//! layer), Bamba and Granite 4 (Mamba-2 with attention at listed layers), Nemotron-H (one mixer or
//! FFN per layer, from a letter pattern) and Falcon-H1 (Mamba-2 beside attention in every layer).

use super::family::Family;
use super::mamba::{Mamba1, Mamba2, state_reading};
use super::mixer_common::{self as common, Built, MoeFields, index_list, named_layers, signed, size_or_auto, width};
use super::positions;
use super::reader::Reader;
use super::report::{ImportError, invalid};
use crate::model::config::{Biases, FfnKind, Model, Positional, bounds};
use crate::model::schedule::{LayerKind, StateMixer};

const SSM: LayerKind = LayerKind::Stateful(StateMixer::Ssm);

/// The `mamba_*` fields Bamba, Granite 4 and Falcon-H1 share, as a Mamba-2 mixer of inner width
/// `inner` (`expand * hidden_size` unless the family says otherwise).
fn mamba2_fields(r: &mut Reader<'_>, d: u64, inner: Option<u64>) -> Result<Mamba2, ImportError> {
    let expand = width(r, &["mamba_expand"], 2)?;
    let inner = inner.unwrap_or(expand * d);
    let heads = width(r, &["mamba_n_heads"], 128)?;
    let head_dim = size_or_auto(r, "mamba_d_head", inner / heads, "inner width / mamba_n_heads")?;
    let bias = r.boolean("mamba_proj_bias").unwrap_or(false);
    let mixer = Mamba2 {
        d,
        inner,
        heads,
        head_dim,
        groups: width(r, &["mamba_n_groups"], 1)?,
        state: width(r, &["mamba_d_state"], 256)?,
        kernel: width(r, &["mamba_d_conv"], 4)?,
        conv_bias: r.boolean("mamba_conv_bias").unwrap_or(true),
        in_bias: bias,
        out_bias: bias,
        gated_norm: true,
    };
    mixer.check("mamba_n_heads")?;
    Ok(mixer)
}

/// Attention biases (`attention_bias`) and FFN biases (`mlp_bias`).
fn biases(r: &mut Reader<'_>) -> Biases {
    let a = r.boolean("attention_bias").unwrap_or(false);
    Biases { qkv: a, o: a, ffn: r.boolean("mlp_bias").unwrap_or(false) }
}

/// Jamba: attention where `i % attn_layer_period == attn_layer_offset` (no positions), Mamba
/// elsewhere; every layer has an FFN, MoE where `i % expert_layer_period == expert_layer_offset`.
pub(super) fn jamba(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = common::start_with_attention(r, family)?;
    let d = m.d_model;
    let period = width(r, &["attn_layer_period"], 8)?;
    let offset = common::size(r, &["attn_layer_offset"], 4)?;
    let kinds = (0..u64::from(m.n_layers())).map(|i| if i % period == offset { LayerKind::Global } else { SSM });
    m.schedule = common::schedule(kinds.collect());
    let state = width(r, &["mamba_d_state"], 16)?;
    let dt_rank = size_or_auto(r, "mamba_dt_rank", d.div_ceil(16), "ceil(hidden_size / 16)")?;
    let mixer = Mamba1 {
        d,
        inner: width(r, &["mamba_expand"], 2)? * d,
        state,
        kernel: width(r, &["mamba_d_conv"], 4)?,
        dt_rank,
        conv_bias: r.boolean("mamba_conv_bias").unwrap_or(true),
        proj_bias: r.boolean("mamba_proj_bias").unwrap_or(false),
        inner_norms: dt_rank + 2 * state,
    };
    let conv_bytes = common::dtype_bytes(r);
    m.states.ssm = Some(mixer.geometry(conv_bytes)?);
    m.ffn_kind = FfnKind::SwiGlu;
    m.ffn_size = width(r, &["intermediate_size"], 14_336)?;
    let experts = common::size(r, &["num_experts", "num_local_experts"], 16)?;
    if experts > 0 {
        let step = width(r, &["expert_layer_period"], 2)?;
        let offset = common::size(r, &["expert_layer_offset"], 1)? % step;
        // The model's MoE layers are those with (i - first + 1) % step == 0, from `first` on.
        let first = if offset + 1 == step { 0 } else { offset + 1 };
        if first > 0 {
            r.warn(format!("MoE layer {offset} is counted as dense: the model's MoE pattern starts after it"));
        }
        let fields = MoeFields {
            experts_field: "num_experts",
            experts,
            active: 2,
            shared_field: "shared experts",
            shared: 0,
            expert: m.ffn_size,
            first,
            step_field: "expert_layer_period",
            step,
        };
        m.moe = Some(fields.read(r)?);
    }
    m.biases = Biases::default();
    r.read_as("Jamba's attention layers use no positional encoding (NoPE): its attention applies no rotary");
    state_reading(r, mixer.kernel, conv_bytes);
    Ok(Built::exact(m))
}

/// Bamba: attention (RoPE on part of each head, [`bamba_rotary_share`]) at `attn_layer_indices`,
/// Mamba-2 elsewhere, a SwiGLU FFN in every layer.
pub(super) fn bamba(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = common::start_with_attention(r, family)?;
    let layers = u64::from(m.n_layers());
    let attention = index_list(r, "attn_layer_indices", layers)?.unwrap_or_else(|| {
        r.assume("attn_layer_indices: absent, so no attention layers");
        Vec::new()
    });
    let kinds = (0..layers).map(|i| if attention.contains(&i) { LayerKind::Global } else { SSM });
    m.schedule = common::schedule(kinds.collect());
    let mixer = mamba2_fields(r, m.d_model, None)?;
    let conv_bytes = common::dtype_bytes(r);
    set_ssm(&mut m, &mixer, conv_bytes)?;
    dense_swiglu(r, &mut m)?;
    let theta = rope_theta(r, family, &m);
    let partial_rotary_factor = bamba_rotary_share(r, m.attn.head_dim)?;
    m.positional = Positional::Rope { theta, partial_rotary_factor, proportional: false, linear_factor: 1.0 };
    state_reading(r, mixer.kernel, conv_bytes);
    Ok(Built::exact(m))
}

/// The share of each Bamba head that RoPE rotates. transformers' config class fixes half and keeps
/// `attn_rotary_emb` unread (as did older vLLM, through that half); recent vLLM rotates
/// `attn_rotary_emb` dimensions, the whole head without it. The published 9B's 64 of 128 is the
/// same half. Where they disagree the file's count is taken, and said; none of it changes a cache
/// figure.
fn bamba_rotary_share(r: &mut Reader<'_>, head_dim: u32) -> Result<f64, ImportError> {
    let Some(dims) = r.count(&["attn_rotary_emb"])? else {
        r.assume(
            "attn_rotary_emb: absent, so half of each head rotated, as transformers' Bamba fixes it (recent vLLM \
             rotates the whole head without it)",
        );
        return Ok(0.5);
    };
    if dims == 0 || dims > u64::from(head_dim) || dims % 2 == 1 {
        let reason = format!("{dims} rotary dimensions for a {head_dim}-wide head (need an even count up to it)");
        return Err(ImportError::Invalid { field: "attn_rotary_emb".into(), reason });
    }
    let share = dims as f64 / f64::from(head_dim);
    r.read_as(format!("attn_rotary_emb = {dims} of each {head_dim}-wide head rotated (partial rotary factor {share})"));
    if dims * 2 != u64::from(head_dim) {
        r.warn(format!(
            "attn_rotary_emb = {dims}: recent vLLM rotates that many dimensions of each head, as here, but \
             transformers' Bamba (and older vLLM) rotates half ({}) whatever the file says",
            head_dim / 2
        ));
    }
    Ok(share)
}

/// Granite 4 hybrid: `layer_types` (Mamba-2 or attention, NoPE unless `position_embedding_type` is
/// "rope"), and in every layer a shared SwiGLU MLP plus, with experts, an MoE.
pub(super) fn granite(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = common::start_with_attention(r, family)?;
    let layers = u64::from(m.n_layers());
    let kind_of = |t: &str| match t {
        "mamba" | "linear_attention" => Some(SSM),
        "attention" | "full_attention" => Some(LayerKind::Global),
        _ => None,
    };
    let kinds = named_layers(r, &["layer_types", "layers_block_type"], layers, kind_of)?.unwrap_or_else(|| {
        r.assume("layer_types: absent, so every layer is Mamba-2");
        vec![SSM; layers as usize]
    });
    m.schedule = common::schedule(kinds);
    let mixer = mamba2_fields(r, m.d_model, None)?;
    let conv_bytes = common::dtype_bytes(r);
    set_ssm(&mut m, &mixer, conv_bytes)?;
    m.biases = biases(r);
    m.ffn_kind = FfnKind::SwiGlu;
    let shared = width(r, &["shared_intermediate_size"], 1024)?;
    m.ffn_size = shared;
    let mut built = Built::exact(m);
    let experts = common::size(r, &["num_local_experts"], 8)?;
    if experts > 0 {
        let expert = width(r, &["intermediate_size"], 1024)?;
        // The shared MLP is counted as shared experts of the expert width.
        let n_shared = (shared / expert).max(1);
        let fields = MoeFields {
            experts_field: "num_local_experts",
            experts,
            active: 2,
            shared_field: "shared_intermediate_size",
            shared: n_shared,
            expert,
            first: 0,
            step_field: "MoE layer step",
            step: 1,
        };
        built.model.moe = Some(fields.read(r)?);
        r.read_as(format!(
            "Every layer has the shared MLP of width {shared} and {experts} routed experts of {expert}; the shared MLP \
             is counted as {n_shared} always-on expert(s) of {expert}"
        ));
        let (d, counted) = (u128::from(built.model.d_model), u128::from(n_shared * expert));
        if counted != u128::from(shared) {
            let off = signed(3 * d * u128::from(shared)) - signed(3 * d * counted);
            built.missing = off * i128::from(layers);
            built.unmodelled = format!("the shared MLP of {shared} is counted as {n_shared} expert(s) of {expert}");
        }
    }
    if r.text("position_embedding_type").as_deref() == Some("rope") {
        let theta = rope_theta(r, family, &built.model);
        built.model.positional = Positional::rope(theta);
    } else {
        r.read_as("Granite 4's attention uses no positional encoding (position_embedding_type is not \"rope\")");
    }
    state_reading(r, mixer.kernel, conv_bytes);
    Ok(built)
}

/// Nemotron-H: one mixer or FFN per layer from `hybrid_override_pattern` (M Mamba-2, * attention
/// without positions, - a two-matrix relu2 MLP, E an MoE); one RMSNorm per layer.
pub(super) fn nemotron_h(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let letters = nemotron_letters(r)?;
    let layers = letters.len() as u64;
    if let Some(n) = r.count(&["num_hidden_layers"])?
        && n != layers
    {
        r.warn(format!("num_hidden_layers {n} is ignored: the pattern has {layers} layers"));
    }
    let d = r.required(&["hidden_size"], "hidden_size")?;
    let mut m = common::start(r, family, layers, d)?;
    if letters.contains(&'*') {
        let heads = r.required(&["num_attention_heads"], "num_attention_heads")?;
        m.n_q_heads = common::to_count("num_attention_heads", heads, bounds::MAX_HEADS)?;
        let kv = common::size(r, &["num_key_value_heads"], heads)?;
        m.attn.n_kv_heads = common::to_count("num_key_value_heads", kv, bounds::MAX_HEADS)?;
        let hd = r.count(&["head_dim", "attention_head_dim"])?.unwrap_or_else(|| {
            r.assume("head_dim: absent (and attention_head_dim), so 128");
            128
        });
        m.attn.head_dim = common::to_count("attention_head_dim", hd, bounds::MAX_CONFIG_HEAD_DIM)?;
        if !m.n_q_heads.is_multiple_of(m.attn.n_kv_heads.max(1)) {
            return Err(invalid("num_key_value_heads", "query heads cannot be split evenly over the KV heads"));
        }
    }
    let kinds = letters.iter().map(|c| match c {
        'M' => SSM,
        '*' => LayerKind::Global,
        _ => LayerKind::FeedForward,
    });
    m.schedule = common::schedule(kinds.collect());
    let heads = width(r, &["mamba_num_heads"], 128)?;
    let head_dim = width(r, &["mamba_head_dim"], 64)?;
    let bias = r.boolean("use_bias").unwrap_or(false);
    let mixer = Mamba2 {
        d,
        inner: heads * head_dim,
        heads,
        head_dim,
        groups: width(r, &["n_groups", "mamba_n_groups"], 8)?,
        state: width(r, &["ssm_state_size"], 128)?,
        kernel: width(r, &["conv_kernel", "mamba_d_conv"], 4)?,
        conv_bias: r.boolean("use_conv_bias").unwrap_or(true),
        in_bias: bias,
        out_bias: bias,
        gated_norm: true,
    };
    let conv_bytes = common::dtype_bytes(r);
    if letters.contains(&'M') {
        set_ssm(&mut m, &mixer, conv_bytes)?;
    }
    m.norms_per_layer = 1;
    m.ffn_kind = FfnKind::Mlp;
    m.ffn_size = width(r, &["intermediate_size"], 21_504)?;
    m.biases = Biases { qkv: false, o: false, ffn: r.boolean("mlp_bias").unwrap_or(false) };
    let mut built = Built::exact(m);
    let (dense, moe) = (letters.iter().filter(|&&c| c == '-').count(), letters.iter().filter(|&&c| c == 'E').count());
    if moe > 0 {
        nemotron_moe(r, &mut built, dense as u128, moe as u128)?;
    }
    r.read_as("Each letter of Nemotron-H's pattern is one layer (one RMSNorm and one mixer or MLP); its attention uses no positions");
    state_reading(r, mixer.kernel, conv_bytes);
    Ok(built)
}

/// The letters of `hybrid_override_pattern`, or of a `layers_block_type` / `layer_types` list.
fn nemotron_letters(r: &mut Reader<'_>) -> Result<Vec<char>, ImportError> {
    if let Some((path, v)) = r.find(&["hybrid_override_pattern"]) {
        let s = v.as_str().ok_or_else(|| invalid(&path, "must be a string of M, *, - and E"))?;
        let letters: Vec<char> = s.chars().collect();
        if letters.is_empty() || letters.len() > bounds::MAX_LAYERS as usize {
            return Err(invalid(&path, "must name between 1 and 4096 layers"));
        }
        if let Some(c) = letters.iter().find(|c| !matches!(c, 'M' | '*' | '-' | 'E')) {
            return Err(invalid(&path, format!("unknown layer letter {c:?}")));
        }
        r.note_used(&path, v);
        return Ok(letters);
    }
    // Newer Nemotron-H files (Nemotron 3 Ultra) give no num_hidden_layers: the list is the stack.
    let listed = r.find(&["layers_block_type", "layer_types"]).and_then(|(_, v)| v.as_array().map(Vec::len));
    let layers = match r.count(&["num_hidden_layers"])? {
        Some(n) => n,
        None => listed.unwrap_or(0) as u64,
    };
    let kind_of = |t: &str| match t {
        "mamba" | "linear_attention" => Some('M'),
        "attention" | "full_attention" => Some('*'),
        "mlp" => Some('-'),
        "moe" => Some('E'),
        _ => None,
    };
    named_layers(r, &["layers_block_type", "layer_types"], layers, kind_of)?
        .filter(|l| !l.is_empty())
        .ok_or(ImportError::Missing("hybrid_override_pattern"))
}

/// Nemotron-H's MoE layers: routed experts and a shared expert, each an up and a down matrix. The
/// model keeps one FFN for all feed-forward layers, so with dense ones beside, those are counted as
/// MoE too, and the reading says by how much.
fn nemotron_moe(r: &mut Reader<'_>, built: &mut Built, dense: u128, moe: u128) -> Result<(), ImportError> {
    let experts = width(r, &["n_routed_experts"], 8)?;
    let expert = width(r, &["moe_intermediate_size"], 7688)?;
    let shared = common::size(r, &["moe_shared_expert_intermediate_size"], expert)?;
    let n_shared = shared / expert;
    let m = &mut built.model;
    let fields = MoeFields {
        experts_field: "n_routed_experts",
        experts,
        active: 2,
        shared_field: "moe_shared_expert_intermediate_size",
        shared: n_shared,
        expert,
        first: 0,
        step_field: "MoE layer step",
        step: 1,
    };
    m.moe = Some(fields.read(r)?);
    let d = u128::from(m.d_model);
    let moe_layer = d * u128::from(experts) + 2 * d * (u128::from(experts) * u128::from(expert) + u128::from(shared));
    let counted_moe =
        d * u128::from(experts) + 2 * d * u128::from(expert) * (u128::from(experts) + u128::from(n_shared));
    let dense_layer = 2 * d * u128::from(m.ffn_size);
    built.missing = signed(moe * moe_layer + dense * dense_layer) - signed((moe + dense) * counted_moe);
    built.unmodelled =
        "the model keeps one feed-forward block for all FFN layers, so dense ones beside the MoE ones are \
                        counted as MoE, and a shared expert whose width is not a multiple of the experts' is rounded"
            .into();
    Ok(())
}

/// Falcon-H1: every layer runs attention (RoPE) and a Mamba-2 mixer side by side, then a SwiGLU FFN.
pub(super) fn falcon_h1(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = common::start_with_attention(r, family)?;
    let d = m.d_model;
    m.schedule = common::schedule(vec![LayerKind::Global; m.n_layers() as usize]);
    // FalconH1Config: mamba_d_ssm defaults to 1024; only an explicit null means mamba_expand * hidden_size.
    let inner = match r.count(&["mamba_d_ssm"])? {
        Some(n) => Some(n),
        None if r.is_null("mamba_d_ssm") => {
            r.read_as("mamba_d_ssm is null: the Mamba width is mamba_expand * hidden_size");
            None
        }
        None => {
            r.assume("mamba_d_ssm: absent, so 1024 (FalconH1Config's default)");
            Some(1024)
        }
    };
    let mut mixer = mamba2_fields(r, d, inner)?;
    mixer.out_bias = r.boolean("projectors_bias").unwrap_or(false);
    mixer.gated_norm = r.boolean("mamba_rms_norm").unwrap_or(false);
    let conv_bytes = common::dtype_bytes(r);
    m.states.ssm = Some(mixer.geometry(conv_bytes)?);
    m.states.beside_attention = Some(StateMixer::Ssm);
    dense_swiglu(r, &mut m)?;
    m.positional = Positional::rope(rope_theta(r, family, &m));
    r.read_as("Every Falcon-H1 layer runs attention and a Mamba-2 mixer side by side: it keeps a KV cache and a state");
    state_reading(r, mixer.kernel, conv_bytes);
    Ok(Built::exact(m))
}

fn set_ssm(m: &mut Model, mixer: &Mamba2, conv_bytes: u32) -> Result<(), ImportError> {
    m.states.ssm = Some(mixer.geometry(conv_bytes)?);
    Ok(())
}

/// A SwiGLU FFN of `intermediate_size` in every layer, with the family's biases.
fn dense_swiglu(r: &mut Reader<'_>, m: &mut Model) -> Result<(), ImportError> {
    m.ffn_kind = FfnKind::SwiGlu;
    m.ffn_size = width(r, &["intermediate_size"], 4 * m.d_model.min(1 << 22))?;
    m.biases = biases(r);
    Ok(())
}

/// The RoPE base the generic position reader finds (`rope_parameters` or `rope_theta`).
fn rope_theta(r: &mut Reader<'_>, family: &Family, m: &Model) -> f64 {
    match positions::read(r, family, m.max_position_embeddings, false).local {
        Positional::Rope { theta, .. } => theta,
        _ => 10_000.0,
    }
}
