//! Owner of `shaders/paged_attention_subgroup.wgsl`: the paged kernel for CPU-class adapters with
//! subgroups, each lane fetching one key's rows through the page table and the subgroup shuffling
//! them around (`flash_attention_subgroup.wgsl`'s loop). Same buffers, parameters and results as
//! `shaders/paged_attention.wgsl`, whose owner chooses this form where it pays (so this module
//! imports only what both share, never its chooser).

use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_io::FLASH_BINDINGS;
use crate::gpu::flash_tiles::{cpu_rows_per_invocation, subgroup_constants};
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::Binding;
use crate::gpu::{GpuContext, shader_text};

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

/// The pipelines, one per (head width, subgroup size).
pub struct PagedSubgroup {
    launcher: Launcher<Self>,
    subgroup_size: u32,
}

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

impl PagedSubgroup {
    /// `None` unless the device has subgroups of one fixed size (the shader's `BC`, keys per step).
    pub fn new(ctx: &GpuContext) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let launcher = Launcher::from_source(ctx, &shader_text::for_subgroups(Self::SOURCE));
        // Its point is registers shared across lanes, which only unrolled code keeps in registers.
        launcher.pipelines().set_unrolled(true);
        Some(Self { launcher, subgroup_size })
    }

    /// The tile one workgroup works on: (rows, keys).
    pub fn tile(&self, d_pad: u32) -> (u32, u32) {
        (self.subgroup_size * cpu_rows_per_invocation(d_pad), self.subgroup_size)
    }

    /// The pipeline for heads `d_pad` wide: one subgroup per workgroup.
    pub fn pipeline(&self, device: &wgpu::Device, d_pad: u32) -> wgpu::ComputePipeline {
        let constants = subgroup_constants(d_pad, self.subgroup_size);
        self.launcher.pipelines().get_specialised(device, &constants, &[("BR", self.subgroup_size)])
    }

    /// Its owner (`paged_attention`, which checks the launch) dispatches through this.
    pub fn launcher(&self) -> &Launcher<Self> {
        &self.launcher
    }
}
