//! How many KV heads a config gives, under each family's names: the standard
//! `num_key_value_heads`, Falcon's `multi_query` / `num_kv_heads` (`n_head_kv` in older files),
//! ChatGLM's `multi_query_group_num` and MPT's `attn_config`. Where two fields disagree the
//! report says which was taken and why.

use super::family::Family;
use super::reader::{Reader, positive_u32};
use super::report::{ImportError, invalid};
use crate::model::config::bounds;

pub(super) fn read(r: &mut Reader<'_>, family: &Family, heads: u32) -> Result<u32, ImportError> {
    let n = if let Some(n) = r.count(&["num_key_value_heads"])? {
        n
    } else if family.is_falcon() {
        falcon(r, family, heads)?
    } else if family.is_chatglm() || r.find(&["multi_query_group_num"]).is_some() {
        chatglm(r, heads)?
    } else if r.find(&["attn_config"]).is_some() {
        mpt(r, heads)?
    } else if r.boolean("multi_query") == Some(true) {
        r.read_as("multi_query is true, so 1 KV head (multi-query attention)");
        1
    } else {
        r.assume(format!("num_key_value_heads: absent, so {heads} (one per query head, MHA)"));
        u64::from(heads)
    };
    positive_u32("num_key_value_heads", n, bounds::MAX_HEADS)
}

/// Falcon 7B sets `multi_query` (one KV head). Falcon 40B/180B set `new_decoder_architecture`
/// with `num_kv_heads` (grouped-query), and their files often keep `multi_query: true`, which
/// transformers then ignores; so does this.
fn falcon(r: &mut Reader<'_>, family: &Family, heads: u32) -> Result<u64, ImportError> {
    let listed = r.count(&["num_kv_heads", "n_head_kv"])?;
    let multi_query = r.boolean("multi_query");
    let new_architecture = match r.boolean("new_decoder_architecture") {
        Some(b) => b,
        None if family.is_refined_web_40b() => {
            r.assume("new_decoder_architecture: absent, but a RefinedWeb (Falcon 40B) file always has it");
            true
        }
        None => false,
    };
    Ok(match (new_architecture, listed) {
        (true, Some(n)) => {
            if multi_query == Some(true) {
                r.read_as(format!(
                    "{n} KV heads from num_kv_heads, not 1 from multi_query: with new_decoder_architecture \
                     Falcon ignores multi_query (as transformers does)"
                ));
            }
            n
        }
        (true, None) => {
            r.assume(format!("num_kv_heads: absent, so {heads} (Falcon's default: one per query head)"));
            u64::from(heads)
        }
        (false, listed) if multi_query != Some(false) => {
            if multi_query.is_none() {
                r.assume("multi_query: absent, so true (Falcon's default): 1 KV head");
            } else {
                r.read_as("multi_query is true without new_decoder_architecture, so 1 KV head");
            }
            if let Some(n) = listed.filter(|&n| n != 1) {
                r.warn(format!("num_kv_heads = {n} ignored: without new_decoder_architecture Falcon uses multi_query"));
            }
            1
        }
        (false, Some(n)) => n,
        (false, None) => {
            r.assume(format!("num_kv_heads: absent and multi_query false, so {heads} (MHA)"));
            u64::from(heads)
        }
    })
}

/// ChatGLM 2/3 and GLM-4: `multi_query_attention` switches on grouped-query attention with
/// `multi_query_group_num` KV heads (the name says "multi-query", the layout is grouped).
fn chatglm(r: &mut Reader<'_>, heads: u32) -> Result<u64, ImportError> {
    if r.boolean("multi_query_attention") == Some(true) {
        let n = r.count_or_assume(
            &["multi_query_group_num"],
            1,
            "multi_query_group_num: absent, so 1 (ChatGLM's default)",
        )?;
        r.read_as(format!(
            "multi_query_attention is true, so {n} KV heads from multi_query_group_num (grouped-query, \
             despite the name)"
        ));
        return Ok(n);
    }
    if r.find(&["multi_query_group_num"]).is_some() {
        r.warn("multi_query_group_num ignored: multi_query_attention is not true");
    }
    r.assume(format!("multi_query_attention: not true, so {heads} KV heads (MHA)"));
    Ok(u64::from(heads))
}

/// MPT: `attn_config.attn_type` chooses MHA, MQA or GQA (`kv_n_heads`); DBRX-style files give
/// `kv_n_heads` alone.
fn mpt(r: &mut Reader<'_>, heads: u32) -> Result<u64, ImportError> {
    let attn_type = r.nested_text("attn_config", "attn_type");
    let kv_n_heads = r.nested_count("attn_config", "kv_n_heads")?;
    Ok(match (attn_type.as_deref(), kv_n_heads) {
        (Some("multiquery_attention"), _) => {
            r.read_as("attn_config.attn_type is multiquery_attention, so 1 KV head");
            1
        }
        (Some("grouped_query_attention"), Some(n)) => n,
        (Some("grouped_query_attention"), None) => {
            return Err(ImportError::Missing("attn_config.kv_n_heads (grouped_query_attention needs it)"));
        }
        (None, Some(n)) => {
            r.read_as(format!("attn_config.kv_n_heads = {n} with no attn_type: read as grouped-query attention"));
            n
        }
        (Some("multihead_attention") | None, listed) => {
            if attn_type.is_none() {
                r.assume(format!("attn_config.attn_type: absent, so multihead_attention ({heads} KV heads)"));
            }
            if let Some(n) = listed.filter(|&n| n != u64::from(heads)) {
                r.warn(format!("attn_config.kv_n_heads = {n} ignored: attn_type is multihead_attention"));
            }
            u64::from(heads)
        }
        (Some(other), _) => {
            return Err(invalid(
                "attn_config.attn_type",
                format!(
                    "unknown attention type \"{}\" (expected multihead_attention, multiquery_attention or \
                     grouped_query_attention)",
                    other.chars().take(40).collect::<String>()
                ),
            ));
        }
    })
}
