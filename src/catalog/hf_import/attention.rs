//! The stack's sizes and attention geometry: layers, hidden size, query and KV heads, head
//! dimension, MLA (DeepSeek) and the global layers' own geometry (Gemma 4).

use super::family::Family;
use super::reader::{Reader, positive, positive_u32, to_u32};
use super::report::{ImportError, invalid};
use super::{indexer_layers, kv_heads};
use crate::model::config::{AttnGeometry, Mla, bounds};

pub(super) struct Attention {
    pub layers: u32,
    pub d_model: u64,
    pub heads: u32,
    /// Every layer's geometry, or the non-global layers' when `global` is set.
    pub local: AttnGeometry,
    pub global: Option<AttnGeometry>,
    pub mla: Option<Mla>,
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family) -> Result<Attention, ImportError> {
    let layers = r.required(&["num_hidden_layers", "n_layer", "num_layers", "n_layers"], "num_hidden_layers")?;
    let layers = positive_u32("num_hidden_layers", layers, bounds::MAX_LAYERS)?;
    // BLOOM's config class lets an `n_embed` (older BLOOM files) override `hidden_size`.
    let d_names: &[&str] =
        if family.is_bloom() { &["n_embed", "hidden_size"] } else { &["hidden_size", "n_embd", "d_model"] };
    let d = r.required(d_names, "hidden_size")?;
    let d = positive("hidden_size", d, bounds::MAX_D_MODEL)?;
    let heads = r.required(&["num_attention_heads", "n_head", "n_heads"], "num_attention_heads")?;
    let heads = positive_u32("num_attention_heads", heads, bounds::MAX_HEADS)?;
    let kv = kv_heads::read(r, family, heads)?;
    // MLA before head_dim: it supplies the V head size.
    let mla = read_mla(r, layers)?;
    if mla.is_none() && !heads.is_multiple_of(kv) {
        return Err(invalid(
            "num_key_value_heads",
            format!("{heads} query heads cannot be split evenly over {kv} KV heads"),
        ));
    }
    let head_dim = read_head_dim(r, d, heads, mla)?;
    let local = AttnGeometry { n_kv_heads: kv, head_dim, k_eq_v: false };
    let global = read_global(r, heads, local)?;
    Ok(Attention { layers, d_model: d, heads, local, global, mla })
}

/// Multi-head latent attention, present when `kv_lora_rank` is.
fn read_mla(r: &mut Reader<'_>, layers: u32) -> Result<Option<Mla>, ImportError> {
    let Some(rank) = r.count(&["kv_lora_rank"])? else {
        return Ok(None);
    };
    let kv_lora_rank = positive_u32("kv_lora_rank", rank, bounds::MAX_RANK)?;
    let mut dim = |key: &str, default: u64| -> Result<u32, ImportError> {
        to_u32(key, r.count_or_assume(&[key], default, format!("{key}: absent, so {default}"))?)
    };
    let qk_rope_head_dim = dim("qk_rope_head_dim", 64)?;
    let qk_nope_head_dim = dim("qk_nope_head_dim", 128)?;
    let v_head_dim = dim("v_head_dim", 128)?;
    let index_head_dim = read_indexer(r)?;
    let q_lora_rank = match r.count(&["q_lora_rank"])? {
        Some(q) => Some(positive_u32("q_lora_rank", q, bounds::MAX_RANK)?),
        None => {
            r.assume("q_lora_rank: absent or null, so queries are projected directly");
            None
        }
    };
    let step = match index_head_dim {
        Some(dim) => indexer_layers::read(r, layers, dim)?,
        None => indexer_layers::Step { freq: 1, offset: 0 },
    };
    Ok(Some(Mla {
        kv_lora_rank,
        qk_rope_head_dim,
        q_lora_rank,
        qk_nope_head_dim,
        v_head_dim,
        index_head_dim,
        index_topk_freq: step.freq,
        index_skip_topk_offset: step.offset,
    }))
}

/// DeepSeek V3.2's lightning indexer: the width of the key it caches per token per layer beside the
/// latent (`index_head_dim`), counted by the cache figures; the rule is stated once the layers are
/// known ([`super::indexer`]).
fn read_indexer(r: &mut Reader<'_>) -> Result<Option<u32>, ImportError> {
    let Some(dim) = r.count(&["index_head_dim"])? else { return Ok(None) };
    Ok(Some(positive_u32("index_head_dim", dim, bounds::MAX_CONFIG_HEAD_DIM)?))
}

/// `head_dim` (ChatGLM: `kv_channels`), else MLA's V head size, else hidden size / heads.
fn read_head_dim(r: &mut Reader<'_>, d: u64, heads: u32, mla: Option<Mla>) -> Result<u32, ImportError> {
    let head_dim = match (r.count(&["head_dim", "kv_channels"])?, mla) {
        (Some(h), _) => positive_u32("head_dim", h, bounds::MAX_CONFIG_HEAD_DIM)?,
        (None, Some(m)) => m.v_head_dim,
        (None, None) => {
            if !d.is_multiple_of(u64::from(heads)) {
                return Err(invalid(
                    "hidden_size",
                    format!("{d} is not divisible by {heads} heads and no head_dim is given"),
                ));
            }
            let hd = to_u32("head_dim", d / u64::from(heads))?;
            r.assume(format!("head_dim: absent, so hidden_size / heads = {hd}"));
            hd
        }
    };
    if mla.is_none()
        && let Some(v) = r.count(&["v_head_dim"])?
        && v != u64::from(head_dim)
    {
        // The cache figures size V like K: a narrower V (MiMo-V2-Flash: K 192, V 128) would be overcounted.
        return Err(ImportError::Unsupported(format!(
            "v_head_dim = {v} differs from head_dim = {head_dim}: values of another width than the keys (without \
             MLA) are not in the cache arithmetic, which sizes V like K. Not imported."
        )));
    }
    let q_width = u64::from(heads) * u64::from(head_dim);
    if mla.is_none() && q_width != d {
        r.warn(format!("heads * head_dim = {q_width} differs from hidden_size {d} (allowed; Q/O are not square)"));
    }
    Ok(head_dim)
}

/// Gemma 4: the global layers' geometry, when they have their own head size or K=V. K=V applies
/// to the global layers only, with their own KV head count.
fn read_global(r: &mut Reader<'_>, heads: u32, local: AttnGeometry) -> Result<Option<AttnGeometry>, ImportError> {
    let k_eq_v = r.boolean("attention_k_eq_v").unwrap_or(false);
    let global_hd = r.count(&["global_head_dim"])?;
    let global_kv = r.count(&["num_global_key_value_heads"])?;
    if global_hd.is_none() && !k_eq_v {
        return Ok(None);
    }
    let n_kv_heads = match (k_eq_v, global_kv) {
        (true, Some(n)) => positive_u32("num_global_key_value_heads", n, bounds::MAX_HEADS)?,
        (false, Some(_)) => {
            r.warn("num_global_key_value_heads is only used with attention_k_eq_v; ignored");
            local.n_kv_heads
        }
        (_, None) => local.n_kv_heads,
    };
    if !heads.is_multiple_of(n_kv_heads) {
        return Err(invalid(
            "num_global_key_value_heads",
            format!("{heads} query heads cannot be split evenly over {n_kv_heads}"),
        ));
    }
    let head_dim = match global_hd {
        Some(h) => positive_u32("global_head_dim", h, bounds::MAX_CONFIG_HEAD_DIM)?,
        None => local.head_dim,
    };
    Ok(Some(AttnGeometry { n_kv_heads, head_dim, k_eq_v }))
}
