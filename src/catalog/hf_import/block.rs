//! What the parameter count needs of a block beyond attention and FFN widths: linear biases, norms,
//! QK-norm and per-layer input embeddings.

use super::family::Family;
use super::reader::Reader;
use super::report::ImportError;
use crate::model::config::{Biases, Model, NormKind};

pub(super) struct Block {
    pub biases: Biases,
    pub norm: NormKind,
    pub norms_per_layer: u32,
    pub qk_norm: bool,
    /// QK-norm over the whole projection (OLMo 2, Cohere).
    pub qk_norm_per_head: bool,
    /// GPT-OSS's attention sinks.
    pub attn_sinks: bool,
    /// Gemma's per-layer input embeddings (E2B/E4B); 0 when absent.
    pub per_layer_input_dim: u64,
    /// Parameters the checkpoint holds that the model has no term for, counted once the model is
    /// built: BLOOM's embedding norm, Gemma 3n's AltUp and LAuReL.
    pub uncounted: Option<Uncounted>,
}

/// What the model's count leaves out, read from the family's own fields.
pub(super) enum Uncounted {
    /// BLOOM's `word_embeddings_layernorm` (a LayerNorm with bias over `hidden_size`).
    BloomEmbeddingNorm,
    /// Gemma 3n's extras: AltUp with `altup` streams, LAuReL of rank `laurel`, the per-layer input
    /// norms, and the per-layer table's own vocabulary.
    Gemma3n { altup: u64, laurel: u64, vocab_per_layer: u64 },
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family) -> Result<Block, ImportError> {
    let norm = match r.boolean("rmsnorm") {
        // ChatGLM names its norm.
        Some(false) => NormKind::LayerNorm,
        Some(true) => NormKind::RmsNorm,
        None => family.norm(),
    };
    let norms_per_layer = if family.is_falcon() { falcon_norms(r, family)? } else { family.norms_per_layer() };
    // Llama 4 also writes `use_qk_norm`, but its norm has no weights; Cohere's and Hunyuan's have.
    let qk_norm = family.qk_norm()
        || ((family.is_cohere() || family.is_hunyuan()) && r.boolean("use_qk_norm") == Some(true))
        || r.boolean("qk_layernorm") == Some(true)
        || r.nested_boolean("attn_config", "qk_ln") == Some(true);
    let uncounted = if family.is_bloom() {
        Some(Uncounted::BloomEmbeddingNorm)
    } else if family.is_gemma3n() {
        Some(gemma3n_unmodelled(r)?)
    } else {
        None
    };
    Ok(Block {
        biases: read_biases(r, family),
        norm,
        norms_per_layer,
        qk_norm,
        qk_norm_per_head: qk_norm && family.qk_norm_per_head(),
        attn_sinks: family.is_gpt_oss(),
        per_layer_input_dim: r.count(&["hidden_size_per_layer_input"])?.unwrap_or(0),
        uncounted,
    })
}

/// Gemma 3n's AltUp (extra copies of the residual stream with small predict/correct weights) and
/// LAuReL (a low-rank residual) add parameters the model has no term for, and nothing to the KV
/// cache; [`uncounted_params`] says how many.
fn gemma3n_unmodelled(r: &mut Reader<'_>) -> Result<Uncounted, ImportError> {
    // Gemma3nTextConfig's defaults where the file is silent.
    let altup = r.count_or_assume(&["altup_num_inputs"], 4, "altup_num_inputs: absent, so 4 (the Gemma 3n default)")?;
    let laurel = r.count_or_assume(&["laurel_rank"], 64, "laurel_rank: absent, so 64 (the Gemma 3n default)")?;
    let vocab_per_layer = r.count_or_assume(
        &["vocab_size_per_layer_input"],
        262_144,
        "vocab_size_per_layer_input: absent, so 262144 (the Gemma 3n default)",
    )?;
    r.warn(format!(
        "AltUp (altup_num_inputs = {altup}) and LAuReL (laurel_rank = {laurel}) are not modelled: they add \
         nothing to the KV cache, and their parameters are left out of the total (a reading gives the difference)"
    ));
    Ok(Uncounted::Gemma3n { altup, laurel, vocab_per_layer })
}

/// The checkpoint's parameters less the model's count, and why (0 when the model counts them all).
///
/// Gemma 3n (`Gemma3nTextModel`, `n` AltUp streams, LAuReL rank `r`, per-layer width `p`):
/// per layer, AltUp's `correct_output_scale` `d`, `correction_coefs` `n^2`, `prediction_coefs` `n^3`,
/// `modality_router` `d n` and `router_norm` `d`; LAuReL's `linear_left` and `linear_right` `2 d r`
/// and `post_laurel_norm` `d`; `post_per_layer_input_norm` `d`. Once: `altup_projections` and
/// `altup_unembed_projections`, `2 (n - 1) d^2`, and `per_layer_projection_norm` `p`. Less: the
/// per-layer table has `vocab_size_per_layer_input` rows, where the model counts `vocab_size`.
pub(super) fn uncounted_params(model: &Model, uncounted: &Uncounted) -> (i128, String) {
    let d = i128::from(model.d_model);
    let layers = i128::from(model.n_layers());
    match *uncounted {
        Uncounted::BloomEmbeddingNorm => {
            (2 * d, "BLOOM's word_embeddings_layernorm (a LayerNorm over hidden_size, with bias) is not counted".into())
        }
        Uncounted::Gemma3n { altup, laurel, vocab_per_layer } => {
            let (n, r, p) = (i128::from(altup), i128::from(laurel), i128::from(model.per_layer_input_dim));
            let altup_layer = d + n * n + n * n * n + d * n + d;
            let laurel_layer = 2 * d * r + d;
            let once = 2 * (n - 1) * d * d + p;
            // Rows the model counts in the per-layer table beyond the checkpoint's (vocab_size of them).
            let table = (i128::from(model.vocab_size) - i128::from(vocab_per_layer)) * layers * p;
            let missing = layers * (altup_layer + laurel_layer + d) + once - table;
            let t = |v: i128| crate::model::units::format_thousands(v.unsigned_abs());
            let why = format!(
                "AltUp ({} per layer, {} in its input and output projections), LAuReL ({} per layer) and the \
                 per-layer input norms ({} per layer, {} once) are not counted, and the per-layer table is counted \
                 with vocab_size rows where it has vocab_size_per_layer_input ({} parameters too many)",
                t(altup_layer),
                t(once - p),
                t(laurel_layer),
                t(d),
                t(p),
                t(table)
            );
            (missing, why)
        }
    }
}

/// Each family's bias switch: Falcon's `bias`, StarCoder2's `use_bias`, MPT's `no_bias`, ChatGLM's
/// `add_qkv_bias` and `add_bias_linear`, else Llama's `attention_bias` and `mlp_bias`.
fn read_biases(r: &mut Reader<'_>, family: &Family) -> Biases {
    let all = |on: bool| Biases { qkv: on, o: on, ffn: on };
    if family.biases_everywhere() {
        return all(true);
    }
    if family.is_gpt_oss() {
        // Every expert's gate_up and down projections carry biases, and so does the router.
        let attention_bias = r.boolean("attention_bias").unwrap_or(true);
        return Biases { qkv: attention_bias, o: attention_bias, ffn: true };
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
