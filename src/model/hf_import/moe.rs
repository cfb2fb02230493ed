//! Mixture of experts: routed, active and shared experts, their width, and which layers have them.

use super::family::Family;
use super::reader::{Reader, positive_u32, to_u32};
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
    let first_dense_layers = to_u32("first_k_dense_replace", r.count(&["first_k_dense_replace"])?.unwrap_or(0))?;
    let step_keys = ["interleave_moe_layer_step", "moe_layer_freq", "decoder_sparse_step"];
    let layer_step = to_u32("moe layer step", r.count(&step_keys)?.unwrap_or(1))?;
    Ok(Some(Moe {
        n_routed_experts,
        n_active_experts,
        n_shared_experts,
        expert_ffn_size,
        first_dense_layers,
        layer_step,
    }))
}
