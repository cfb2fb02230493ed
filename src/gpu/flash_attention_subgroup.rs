//! Owner of `shaders/flash_attention_subgroup.wgsl`: the tiled forward for CPU-class adapters, where
//! the lanes of a subgroup share K/V loads by shuffling them (see the shader's header for why).
//! Same buffers, parameters and results as `shaders/flash_attention.wgsl`, whose owner chooses this
//! kernel where it pays (so this module imports only what both share, never its chooser).

use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_io::FLASH_BINDINGS;
use crate::gpu::flash_tiles::{cpu_rows_per_invocation, subgroup_constants};
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::Binding;
use crate::gpu::{GpuContext, shader_text};

/// A compile-time constant or an override: its name in the shader and its value.
pub type Named = (&'static str, u32);

/// The pipelines, one per (head width, subgroup size).
pub struct FlashSubgroup {
    launcher: Launcher<Self>,
    subgroup_size: u32,
}

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

impl FlashSubgroup {
    /// `None` unless the device has subgroups of one fixed size (the shader's `BC`, keys per step).
    pub fn new(ctx: &GpuContext) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let launcher = Launcher::from_source(ctx, &shader_text::for_subgroups(Self::SOURCE));
        // Its point is registers shared across lanes, which only unrolled code keeps in registers.
        launcher.pipelines().set_unrolled(true);
        Some(Self { launcher, subgroup_size })
    }

    /// The tile one workgroup works on: (rows, keys): one subgroup of invocations with several rows
    /// each, and one key per lane at every step.
    pub fn tile(&self, d_pad: u32) -> (u32, u32) {
        (self.subgroup_size * cpu_rows_per_invocation(d_pad), self.subgroup_size)
    }

    /// The specialisation for heads `d_pad` wide: its constants, and one subgroup per workgroup (the
    /// smallest row tile, so the key range around a causal diagonal or a sliding window stays tight).
    pub fn specialisation(&self, d_pad: u32) -> (Vec<Named>, [Named; 1]) {
        (subgroup_constants(d_pad, self.subgroup_size).to_vec(), [("BR", self.subgroup_size)])
    }

    /// Its owner (`flash_attention`, which checks the launch) dispatches through this.
    pub fn launcher(&self) -> &Launcher<Self> {
        &self.launcher
    }
}
