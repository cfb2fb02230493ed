//! Owner of `shaders/flash_attention_subgroup.wgsl`: the tiled forward for CPU-class adapters, where
//! the lanes of a subgroup share K/V loads by shuffling them (see the shader's header for why).
//! Same buffers, parameters and results as `shaders/flash_attention.wgsl`, whose owner chooses this
//! kernel where it pays (so this module imports only what both share, never its chooser).

use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_io::FLASH_BINDINGS;
use crate::gpu::kernel::{CpuTwin, Kernel};
use crate::gpu::launch::Binding;

/// The kernel; its pipelines and tiles are a [`crate::gpu::subgroup_form::SubgroupForm`].
pub struct FlashSubgroup;

impl Kernel for FlashSubgroup {
    const NAME: &'static str = "flash_attention_subgroup";
    const SOURCE: &'static str = include_str!("../../shaders/flash_attention_subgroup.wgsl");
    const BINDINGS: &'static [Binding] = &FLASH_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("flash_attention");
    type Params = AttentionParams;

    /// One workgroup (one subgroup) per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}
