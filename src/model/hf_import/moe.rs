//! Mixture of experts: routed, active and shared experts, their width, and which layers have them.

use serde_json::Value;

use super::family::Family;
use super::reader::{Reader, positive_u32, show, to_u32};
use super::report::ImportError;
use crate::model::config::{Moe, bounds};

/// The MoE FFN, or `None` when the config names no (or zero) routed experts.
pub(super) fn read(r: &mut Reader<'_>, family: &Family) -> Result<Option<Moe>, ImportError> {
    let experts = r.count(&["n_routed_experts", "num_local_experts", "num_experts"])?;
    let Some(experts) = experts.filter(|&e| e > 0) else {
        return Ok(None);
    };
    let n_routed_experts = positive_u32("experts", experts, bounds::MAX_EXPERTS)?;
    let n_active_experts = to_u32("num_experts_per_tok", r.count(&["num_experts_per_tok"])?.unwrap_or(1))?;
    let n_shared_experts = match r.count(&["n_shared_experts"])? {
        Some(s) => to_u32("n_shared_experts", s)?,
        // Llama 4 has one shared expert and no field for it.
        None if family.is_llama4() => 1,
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
