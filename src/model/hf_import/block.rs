//! What the parameter count needs of a block beyond attention and FFN widths: linear biases, norms,
//! QK-norm and per-layer input embeddings.

use super::family::Family;
use super::reader::Reader;
use super::report::ImportError;
use crate::model::config::{Biases, NormKind};

pub(super) struct Block {
    pub biases: Biases,
    pub norm: NormKind,
    pub norms_per_layer: u32,
    pub qk_norm: bool,
    /// Gemma's per-layer input embeddings (E2B/E4B); 0 when absent.
    pub per_layer_input_dim: u64,
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family) -> Result<Block, ImportError> {
    let norm = match r.boolean("rmsnorm") {
        // ChatGLM names its norm.
        Some(false) => NormKind::LayerNorm,
        Some(true) => NormKind::RmsNorm,
        None => family.norm(),
    };
    let norms_per_layer = if family.is_falcon() { falcon_norms(r, family)? } else { family.norms_per_layer() };
    // Llama 4 also writes `use_qk_norm`, but its norm has no weights; Cohere's has.
    let qk_norm = family.qk_norm()
        || (family.is_cohere() && r.boolean("use_qk_norm") == Some(true))
        || r.boolean("qk_layernorm") == Some(true)
        || r.nested_boolean("attn_config", "qk_ln") == Some(true);
    if family.is_bloom() {
        r.warn("BLOOM's LayerNorm after the word embeddings (2 * hidden_size parameters) is not counted");
    }
    if family.is_gemma3n() {
        gemma3n_unmodelled(r)?;
    }
    Ok(Block {
        biases: read_biases(r, family),
        norm,
        norms_per_layer,
        qk_norm,
        per_layer_input_dim: r.count(&["hidden_size_per_layer_input"])?.unwrap_or(0),
    })
}

/// Gemma 3n's AltUp (extra copies of the residual stream with small predict/correct weights) and
/// LAuReL (a low-rank residual) add parameters the count leaves out, and nothing to the KV cache.
fn gemma3n_unmodelled(r: &mut Reader<'_>) -> Result<(), ImportError> {
    let altup = r.count(&["altup_num_inputs"])?;
    let laurel = r.count(&["laurel_rank"])?;
    let shown = |n: Option<u64>| n.map_or_else(|| "absent".to_string(), |n| n.to_string());
    r.warn(format!(
        "AltUp (altup_num_inputs = {}) and LAuReL (laurel_rank = {}) are not modelled: their parameters \
         are not counted and they add nothing to the KV cache",
        shown(altup),
        shown(laurel)
    ));
    Ok(())
}

/// Each family's bias switch: Falcon's `bias`, StarCoder2's `use_bias`, MPT's `no_bias`, ChatGLM's
/// `add_qkv_bias` and `add_bias_linear`, else Llama's `attention_bias` and `mlp_bias`.
fn read_biases(r: &mut Reader<'_>, family: &Family) -> Biases {
    let all = |on: bool| Biases { qkv: on, o: on, ffn: on };
    if family.biases_everywhere() {
        return all(true);
    }
    if family.is_falcon() {
        return all(r.boolean("bias").unwrap_or(false));
    }
    if let Some(on) = r.boolean("use_bias") {
        return all(on);
    }
    if let Some(off) = r.boolean("no_bias") {
        return all(!off);
    }
    if family.is_mpt() {
        r.assume("no_bias: absent, so true (MPT's default): no biases");
        return all(false);
    }
    if family.is_chatglm() {
        let linear = r.boolean("add_bias_linear").unwrap_or(false);
        return Biases { qkv: r.boolean("add_qkv_bias").unwrap_or(false), o: linear, ffn: linear };
    }
    let attention_bias = r.boolean("attention_bias").unwrap_or(false);
    Biases { qkv: attention_bias || family.qkv_bias(), o: attention_bias, ffn: r.boolean("mlp_bias").unwrap_or(false) }
}

/// Falcon's block: 7B runs attention and MLP in parallel from one norm (`parallel_attn`); the new
/// decoder architecture (40B/180B) gives each its own norm unless `num_ln_in_parallel_attn` is 1.
fn falcon_norms(r: &mut Reader<'_>, family: &Family) -> Result<u32, ImportError> {
    let new_architecture = r.boolean("new_decoder_architecture").unwrap_or(family.is_refined_web_40b());
    if new_architecture {
        return Ok(if r.count(&["num_ln_in_parallel_attn"])? == Some(1) { 1 } else { 2 });
    }
    Ok(if r.boolean("parallel_attn") == Some(false) { 2 } else { 1 })
}
