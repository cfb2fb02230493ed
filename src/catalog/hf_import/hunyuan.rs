//! Tencent's Hunyuan MoE files (`model_type` "hunyuan", Hunyuan-A13B), read as the vendor's own code
//! builds the model (`models/modeling_hunyuan.py` in Tencent-Hunyuan/Hunyuan-A13B at df832eb):
//!
//! - Experts: `HunYuanMoE` (lines 470-482) builds `num_experts` `HunYuanMLP`s of `intermediate_size`
//!   each (lines 413-416) and picks `moe_topk[0]` of them (line 465); with `use_mixed_mlp_moe` one
//!   shared MLP of `intermediate_size × num_shared_expert[0]` (line 414) runs beside them.
//!   `HunYuanDecoderLayer` makes every layer MoE when `num_experts > 1` (lines 1049-1050;
//!   `moe_layer_num_skipped` is not read there). The per-layer lists
//!   (`moe_topk`, `num_shared_expert`, `moe_intermediate_size`) are read only when every entry is
//!   the same, since the code reads entry 0 for every layer.
//! - Cross-layer attention: with `use_cla`, layers that are not a multiple of `cla_share_factor`
//!   build no K and V of their own (line 533); not read, so refused.

use serde_json::Value;

use super::reader::{Reader, positive_u32, show, to_u32};
use super::report::{ImportError, invalid};
use crate::model::config::{Moe, bounds};

/// Refuses cross-layer attention, and says a switched-off one is not used; says `attention_head_dim`
/// is not used either (`HunYuanAttention` takes `hidden_size // num_heads`, line 544).
pub(super) fn read_attention(r: &mut Reader<'_>) -> Result<(), ImportError> {
    if let Some((path, v)) = r.find(&["attention_head_dim"]) {
        r.read_as(format!("{path} = {} not used: Hunyuan's code takes hidden_size / num_attention_heads", show(v)));
    }
    let factor = r.find(&["cla_share_factor"]).map(|(_, v)| show(v));
    match r.boolean("use_cla") {
        Some(true) => Err(ImportError::Unsupported(format!(
            "use_cla = true: Hunyuan's cross-layer attention (layers not a multiple of cla_share_factor = {} reuse \
             an earlier layer's K and V) is not read; counted as layers of their own, the cache would be too large. \
             Not imported.",
            factor.unwrap_or_else(|| "?".into())
        ))),
        _ => {
            if let Some(f) = factor {
                r.read_as(format!(
                    "cla_share_factor = {f} not used: use_cla is not true, so every layer has its own K and V"
                ));
            }
            Ok(())
        }
    }
}

/// The experts as `HunYuanMoE` builds them, or `None` for a dense file.
pub(super) fn read_moe(r: &mut Reader<'_>) -> Result<Option<Moe>, ImportError> {
    let Some(experts) = r.count(&["num_experts"])?.filter(|&e| e > 1) else { return Ok(None) };
    let n_routed_experts = positive_u32("num_experts", experts, bounds::MAX_EXPERTS)?;
    let width = r.required(&["intermediate_size"], "intermediate_size")?;
    if let Some(listed) = first_of_uniform(r, "moe_intermediate_size")?
        && listed != width
    {
        r.warn(format!(
            "moe_intermediate_size = {listed} not used: Hunyuan's code sizes each expert by intermediate_size = {width}"
        ));
    }
    let top_k = first_of_uniform(r, "moe_topk")?.unwrap_or(1);
    let shared = match r.boolean("use_mixed_mlp_moe") {
        Some(true) => first_of_uniform(r, "num_shared_expert")?.unwrap_or(1),
        _ => 0,
    };
    if let Some((path, v)) = r.find(&["moe_layer_num_skipped"]) {
        r.read_as(format!("{path} = {} not used: Hunyuan's code makes every layer MoE", show(v)));
    }
    r.read_as(format!(
        "Hunyuan MoE: {experts} experts of intermediate_size {width}, {top_k} per token (moe_topk), and {shared} shared \
         MLP of {shared} × {width} (num_shared_expert, use_mixed_mlp_moe) in every layer, as the vendor's \
         modeling_hunyuan.py builds them"
    ));
    Ok(Some(Moe {
        n_routed_experts,
        n_active_experts: to_u32("moe_topk", top_k)?,
        n_shared_experts: to_u32("num_shared_expert", shared)?,
        expert_ffn_size: width,
        first_dense_layers: 0,
        layer_step: 1,
    }))
}

/// A count, or a per-layer list of equal counts (Hunyuan writes one entry per layer and its code
/// reads entry 0); a list whose entries differ is refused, since the arithmetic has one value.
fn first_of_uniform(r: &mut Reader<'_>, key: &str) -> Result<Option<u64>, ImportError> {
    let Some((path, v)) = r.find(&[key]) else { return Ok(None) };
    let counts: Option<Vec<u64>> = match v {
        Value::Array(items) => items.iter().map(Value::as_u64).collect(),
        other => other.as_u64().map(|n| vec![n]),
    };
    let counts =
        counts.filter(|c| !c.is_empty()).ok_or_else(|| invalid(&path, "must be a count or a list of counts"))?;
    if counts.iter().any(|&c| c != counts[0]) {
        return Err(ImportError::Unsupported(format!(
            "{path} = {}: differs from layer to layer; the arithmetic holds one value for every layer. Not imported.",
            show(v)
        )));
    }
    r.note_used(&path, v);
    Ok(Some(counts[0]))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{ImportError, import_hf_value};

    fn hunyuan(extra: serde_json::Value) -> serde_json::Value {
        let mut v = json!({"model_type": "hunyuan", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "intermediate_size": 32, "vocab_size": 100, "num_experts": 4,
                           "moe_topk": [2, 2], "use_mixed_mlp_moe": true, "num_shared_expert": [1, 1]});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn uniform_per_layer_lists_are_read_and_uneven_ones_refused() {
        let m = import_hf_value(&hunyuan(json!({}))).unwrap_or_else(|e| panic!("{e}")).model;
        let moe = m.moe.unwrap_or_else(|| panic!("no experts"));
        assert_eq!(
            (moe.n_routed_experts, moe.n_active_experts, moe.n_shared_experts, moe.expert_ffn_size),
            (4, 2, 1, 32)
        );
        let Err(ImportError::Unsupported(why)) = import_hf_value(&hunyuan(json!({"moe_topk": [2, 4]}))) else {
            panic!()
        };
        assert!(why.starts_with("moe_topk = [2,4]: differs from layer to layer"), "{why}");
    }

    #[test]
    fn cross_layer_attention_is_refused_and_its_factor_said_when_off() {
        let Err(ImportError::Unsupported(why)) =
            import_hf_value(&hunyuan(json!({"use_cla": true, "cla_share_factor": 2})))
        else {
            panic!()
        };
        assert!(why.starts_with("use_cla = true: Hunyuan's cross-layer attention"), "{why}");
        let off = import_hf_value(&hunyuan(json!({"use_cla": false, "cla_share_factor": 2}))).unwrap();
        assert!(off.report.readings.iter().any(|r| r.starts_with("cla_share_factor = 2 not used")), "{:?}", off.report);
    }
}
