//! What a kernel's subgroup form holds and decides, shared by the tiled forward's
//! (`flash_attention_subgroup`) and the paged kernel's (`paged_attention_subgroup`): its pipelines,
//! compiled unrolled for the device's one subgroup size, and the tile one workgroup works on. Each
//! form's own module declares only its `Kernel` (shader, bindings, twin, workgroups).

use crate::gpu::flash_tiles::subgroup_constants;
use crate::gpu::kernel::{Kernel, Launcher};
use crate::gpu::{GpuContext, shader_text};

/// A compile-time constant or an override: its name in the shader and its value.
pub type Named = (&'static str, u32);

/// The pipelines of kernel `K`'s subgroup form, one per (head width, subgroup size).
pub struct SubgroupForm<K: Kernel> {
    launcher: Launcher<K>,
    subgroup_size: u32,
    /// Query rows per invocation for a head width (the shader's `R`).
    rows_per_invocation: fn(u32) -> u32,
}

impl<K: Kernel> SubgroupForm<K> {
    /// `None` unless the device has subgroups of one fixed size (the shader's `BC`, keys per step).
    /// `rows_per_invocation` gives the shader's `R` for a head width.
    pub fn new(ctx: &GpuContext, rows_per_invocation: fn(u32) -> u32) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let launcher = Launcher::from_source(ctx, &shader_text::for_subgroups(K::SOURCE));
        // Its point is registers shared across lanes, which only unrolled code keeps in registers.
        launcher.pipelines().set_unrolled(true);
        Some(Self { launcher, subgroup_size, rows_per_invocation })
    }

    /// The tile one workgroup works on: (rows, keys): one subgroup of invocations with several rows
    /// each, and one key per lane at every step.
    pub fn tile(&self, d_pad: u32) -> (u32, u32) {
        (self.subgroup_size * (self.rows_per_invocation)(d_pad), self.subgroup_size)
    }

    /// The specialisation for heads `d_pad` wide: its constants, and one subgroup per workgroup (the
    /// smallest row tile, so the key range around a causal diagonal or a sliding window stays tight).
    pub fn specialisation(&self, d_pad: u32) -> (Vec<Named>, [Named; 1]) {
        let rows = (self.rows_per_invocation)(d_pad);
        (subgroup_constants(d_pad, self.subgroup_size, rows).to_vec(), [("BR", self.subgroup_size)])
    }

    /// Whether the pipeline for heads `d_pad` wide is built.
    pub fn is_built(&self, d_pad: u32) -> bool {
        let (constants, overrides) = self.specialisation(d_pad);
        self.launcher.pipelines().is_built(&constants, &overrides)
    }

    /// The pipeline for heads `d_pad` wide.
    pub fn pipeline(&self, device: &wgpu::Device, d_pad: u32) -> wgpu::ComputePipeline {
        let (constants, overrides) = self.specialisation(d_pad);
        self.launcher.pipelines().get_specialised(device, &constants, &overrides)
    }

    /// The form's owner (which checks the launch) dispatches through this.
    pub fn launcher(&self) -> &Launcher<K> {
        &self.launcher
    }
}
