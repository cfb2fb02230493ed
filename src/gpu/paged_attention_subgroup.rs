//! Owner of `shaders/paged_attention_subgroup.wgsl`: the paged kernel for CPU-class adapters with
//! subgroups, each lane fetching one key's rows through the page table and the subgroup shuffling
//! them around (`flash_attention_subgroup.wgsl`'s loop). Same buffers, parameters and results as
//! `shaders/paged_attention.wgsl`, whose owner chooses this form where it pays (so this module
//! imports only what both share, never its chooser).

use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_io::FLASH_BINDINGS;
use crate::gpu::kernel::{CpuTwin, Kernel};
use crate::gpu::launch::Binding;

/// The forward kernel's bindings, then the page table (the paged kernel's, in the same order).
pub const PAGED_BINDINGS: [Binding; 7] = [
    FLASH_BINDINGS[0],
    FLASH_BINDINGS[1],
    FLASH_BINDINGS[2],
    FLASH_BINDINGS[3],
    FLASH_BINDINGS[4],
    FLASH_BINDINGS[5],
    Binding::ReadOnly,
];

/// The kernel; its pipelines and tiles are a [`crate::gpu::subgroup_form::SubgroupForm`].
pub struct PagedSubgroup;

impl Kernel for PagedSubgroup {
    const NAME: &'static str = "paged_attention_subgroup";
    const SOURCE: &'static str = include_str!("../../shaders/paged_attention_subgroup.wgsl");
    const BINDINGS: &'static [Binding] = &PAGED_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("paged_attention");
    type Params = AttentionParams;

    /// One workgroup (one subgroup) per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}
