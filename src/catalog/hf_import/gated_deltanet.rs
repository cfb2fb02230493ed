//! Qwen3-Next: Gated DeltaNet (linear attention) in three layers of four, gated softmax attention
//! (partial RoPE, QK-norm) in the fourth, and an MoE with a shared expert in every layer.

use super::family::Family;
use super::mixer_common::{self as common, Built, MoeFields, named_layers, signed, width};
use super::positions;
use super::reader::Reader;
use super::report::ImportError;
use crate::model::config::{FfnKind, Positional};
use crate::model::schedule::{LayerKind, StateMixer};

const LINEAR: LayerKind = LayerKind::Stateful(StateMixer::Linear);

pub(super) fn qwen3_next(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let mut m = common::start_with_attention(r, family)?;
    let (layers, d) = (u64::from(m.n_layers()), m.d_model);
    let kind_of = |t: &str| match t {
        "linear_attention" => Some(LINEAR),
        "full_attention" => Some(LayerKind::Global),
        _ => None,
    };
    let kinds = match named_layers(r, &["layer_types"], layers, kind_of)? {
        Some(kinds) => kinds,
        None => {
            let interval = width(r, &["full_attention_interval"], 4)?;
            (0..layers).map(|i| if (i + 1) % interval == 0 { LayerKind::Global } else { LINEAR }).collect()
        }
    };
    m.schedule = common::schedule(kinds);
    // Gated DeltaNet: q, k of nk heads of dk, v of nv heads of dv, a depthwise convolution over all.
    let nk = u128::from(width(r, &["linear_num_key_heads"], 16)?);
    let dk = u128::from(width(r, &["linear_key_head_dim"], 128)?);
    let nv = u128::from(width(r, &["linear_num_value_heads"], 32)?);
    let dv = u128::from(width(r, &["linear_value_head_dim"], 128)?);
    let kernel = width(r, &["linear_conv_kernel_dim"], 4)?;
    let (key_dim, value_dim, dw) = (nk * dk, nv * dv, u128::from(d));
    let conv_dim = 2 * key_dim + value_dim;
    // in_proj_qkvz, in_proj_ba, conv1d (no bias), dt_bias, A_log, the gated norm over dv, out_proj.
    let params =
        dw * (2 * key_dim + 2 * value_dim) + dw * 2 * nv + conv_dim * u128::from(kernel) + 2 * nv + dv + value_dim * dw;
    let conv_bytes = common::dtype_bytes(r);
    m.states.linear = Some(common::state_geometry(conv_dim * u128::from(kernel), conv_bytes, nv * dk * dv, 4, params)?);
    m.qk_norm = true;
    let rope = positions::read(r, family, m.max_position_embeddings, false).local;
    let partial_given = r.find(&["partial_rotary_factor"]).is_some()
        || r.find(&["rope_parameters"]).is_some_and(|(path, v)| {
            v.as_object().is_some_and(|obj| r.member(&path, obj, "partial_rotary_factor").is_some())
        });
    m.positional = match rope {
        Positional::Rope { theta, partial_rotary_factor, proportional, linear_factor } => {
            let partial_rotary_factor = if partial_given { partial_rotary_factor } else { 0.25 };
            Positional::Rope { theta, partial_rotary_factor, proportional, linear_factor }
        }
        other => other,
    };
    if !partial_given {
        r.assume("partial_rotary_factor: absent, so Qwen3-Next's 0.25");
    }
    m.ffn_kind = FfnKind::SwiGlu;
    m.ffn_size = width(r, &["intermediate_size"], 5632)?;
    let experts = common::size(r, &["num_experts"], 512)?;
    let mut missing = 0i128;
    let attention_layers = i128::from(m.attention_layers());
    // The output gate doubles q_proj: d x heads x head_dim more per attention layer.
    let gate = signed(dw * u128::from(m.n_q_heads) * u128::from(m.attn.head_dim));
    missing += attention_layers * gate;
    if experts > 0 {
        let expert = width(r, &["moe_intermediate_size"], 512)?;
        let shared = common::size(r, &["shared_expert_intermediate_size"], 512)?;
        let n_shared = shared / expert;
        let step = width(r, &["decoder_sparse_step"], 1)?;
        let fields = MoeFields {
            experts_field: "num_experts",
            experts,
            active: 10,
            shared_field: "shared_expert_intermediate_size",
            shared: n_shared,
            expert,
            first: 0,
            step_field: "decoder_sparse_step",
            step,
        };
        m.moe = Some(fields.read(r)?);
        let moe_layers = (0..layers).filter(|l| (l + 1) % step == 0).count() as i128;
        // The shared expert's gate (d x 1), and any shared width the expert width does not divide.
        let rounding = signed(3 * dw * u128::from(shared)) - signed(3 * dw * u128::from(n_shared * expert));
        missing += moe_layers * (signed(dw) + rounding);
        if r.find(&["mlp_only_layers"]).and_then(|(_, v)| v.as_array().map(|a| !a.is_empty())) == Some(true) {
            r.warn(
                "mlp_only_layers is not modelled: those layers are counted with the MoE pattern of decoder_sparse_step",
            );
        }
    }
    r.read_as(format!(
        "Recurrent state as transformers 5.x caches it: a {kernel}-input convolution window over q, k and v in {} and \
         the Gated DeltaNet state (value heads x key dim x value dim) in float32, per layer per sequence{}",
        common::dtype_name(conv_bytes),
        super::mamba::one_input_fewer_elsewhere(super::mamba::VLLM, kernel)
    ));
    r.read_as("Qwen3-Next's attention layers are global, with QK-norm and an output gate; the MoE has a shared expert");
    Ok(Built {
        model: m,
        missing,
        unmodelled: "the attention's output gate (q_proj is twice as wide) and the shared expert's gate (hidden_size \
                     per MoE layer) have no term in the model"
            .into(),
    })
}
