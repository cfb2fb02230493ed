//! Mixture of experts: routed, active and shared experts, their width, and which layers have them.

use serde_json::Value;

use super::family::Family;
use super::reader::{Reader, positive_u32, show, to_u32};
use super::report::ImportError;
use crate::model::config::{Moe, bounds};

/// The MoE FFN, or `None` when the config names no (or zero) routed experts, or switches them off
/// (Gemma 4's `enable_moe_block`).
pub(super) fn read(r: &mut Reader<'_>, family: &Family) -> Result<Option<Moe>, ImportError> {
    if family.is_hunyuan() {
        return super::hunyuan::read_moe(r);
    }
    let experts = r.count(&["n_routed_experts", "num_local_experts", "num_experts"])?;
    let switched_on = r.boolean("enable_moe_block");
    let Some(experts) = experts.filter(|&e| e > 0) else {
        return Ok(None);
    };
    if switched_on == Some(false) {
        r.read_as(format!("enable_moe_block is false: no experts (the {experts} of num_experts are not built)"));
        return Ok(None);
    }
    let n_routed_experts = positive_u32("experts", experts, bounds::MAX_EXPERTS)?;
    // Gemma 4 names its top-k `top_k_experts`.
    let active = r.count(&["num_experts_per_tok", "top_k_experts"])?;
    let n_active_experts = to_u32("num_experts_per_tok", active.unwrap_or(1))?;
    if active.is_none() {
        r.assume("num_experts_per_tok: absent, so each token uses 1 expert");
    }
    let n_shared_experts = match r.count(&["n_shared_experts"])? {
        Some(s) => to_u32("n_shared_experts", s)?,
        // Llama 4 has one shared expert and no field for it.
        None if family.is_llama4() => 1,
        None if switched_on == Some(true) => dense_beside_experts(r)?,
        None => 0,
    };
    // Llama 4's intermediate_size is the expert width (intermediate_size_mlp the dense one).
    let width_keys: &[&str] =
        if family.is_llama4() { &["intermediate_size"] } else { &["moe_intermediate_size", "intermediate_size"] };
    let expert_ffn_size = r.count(width_keys)?.ok_or(ImportError::Missing("moe_intermediate_size"))?;
    let mut first_dense_layers = to_u32("first_k_dense_replace", r.count(&["first_k_dense_replace"])?.unwrap_or(0))?;
    let step_keys = ["interleave_moe_layer_step", "moe_layer_freq", "decoder_sparse_step"];
    let layer_step = match r.find(&step_keys) {
        Some((path, Value::Array(list))) => {
            first_dense_layers = dense_prefix(&path, list)?;
            r.note_used(&path, &Value::Array(list.clone()));
            1
        }
        _ => to_u32("moe layer step", r.count(&step_keys)?.unwrap_or(1))?,
    };
    Ok(Some(Moe {
        n_routed_experts,
        n_active_experts,
        n_shared_experts,
        expert_ffn_size,
        first_dense_layers,
        layer_step,
    }))
}

/// Gemma 4's MoE layers run the dense MLP (`intermediate_size`) beside the experts, for every token
/// (transformers' `Gemma4TextDecoderLayer` keeps `mlp` and adds `experts` after it). A dense MLP a
/// whole number of experts wide has exactly their parameters (each matrix is `d × width`), so it is
/// counted as that many always-on experts; any other width is refused.
fn dense_beside_experts(r: &mut Reader<'_>) -> Result<u32, ImportError> {
    let (Some(dense), Some(expert)) = (r.count(&["intermediate_size"])?, r.count(&["moe_intermediate_size"])?) else {
        return Ok(0);
    };
    if expert == 0 || !dense.is_multiple_of(expert) {
        return Err(ImportError::Unsupported(format!(
            "enable_moe_block: the dense MLP ({dense} wide) runs beside experts {expert} wide, and is not a whole \
             number of them; the arithmetic has no term for a dense MLP beside experts. Not imported."
        )));
    }
    let shared = to_u32("intermediate_size", dense / expert)?;
    r.read_as(format!(
        "enable_moe_block: the dense MLP (intermediate_size {dense}) runs beside the experts in every layer, for every \
         token: counted as {shared} always-on experts of {expert} (the same parameters). The router's scales and the \
         block's three extra norms (d + experts + 3 d a layer) are not counted"
    ));
    Ok(shared)
}

/// A per-layer `moe_layer_freq` list (MiniMax M3, MiMo-V2): `k` dense layers (0) then experts (1) in
/// every other layer is read exactly as `k` first dense layers; any other list is refused, since the
/// arithmetic places experts by a dense prefix and a step only.
fn dense_prefix(path: &str, list: &[Value]) -> Result<u32, ImportError> {
    let flags: Option<Vec<u64>> = list.iter().map(Value::as_u64).collect();
    let prefix = flags.as_ref().map_or(0, |f| f.iter().take_while(|&&x| x == 0).count());
    match flags {
        Some(f) if f[prefix..].iter().all(|&x| x == 1) => to_u32(path, prefix as u64),
        _ => Err(ImportError::Unsupported(format!(
            "{path} = {}: experts in layers that are not a dense prefix followed by every other layer; the \
             arithmetic places them by a first-dense count and a step only. Not imported.",
            show(&Value::Array(list.to_vec()))
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{ImportError, import_hf_value};

    fn moe(freq: serde_json::Value) -> serde_json::Value {
        json!({"model_type": "minimax_m3", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
               "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "num_local_experts": 8,
               "num_experts_per_tok": 2, "moe_intermediate_size": 32, "moe_layer_freq": freq})
    }

    #[test]
    fn a_per_layer_expert_list_is_read_as_its_dense_prefix_or_refused() {
        let m = import_hf_value(&moe(json!([0, 0, 1, 1]))).unwrap_or_else(|e| panic!("{e}")).model;
        let experts = m.moe.unwrap_or_else(|| panic!("no experts"));
        assert_eq!((experts.first_dense_layers, experts.layer_step), (2, 1));
        let Err(ImportError::Unsupported(why)) = import_hf_value(&moe(json!([0, 1, 0, 1]))) else { panic!() };
        assert!(why.starts_with("moe_layer_freq = [0,1,0,1]: experts in layers"), "{why}");
    }
}
