//! Owner of `shaders/flash_backward_subgroup.wgsl`: the backward for CPU-class adapters, where the
//! lanes of a subgroup share their loads by shuffling them (see the shader's header for why). Same
//! buffers, parameters, passes and results as `shaders/flash_backward.wgsl`, whose owner chooses this
//! kernel where it pays (so this module imports only what both share, never its chooser). Two entry
//! points with bindings of their own: [`FlashBackwardSubgroup`] (`main`) and
//! [`FlashBackwardSubgroupKeys`] (`key_grads`).

use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_backward_io::BACKWARD_BINDINGS;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, PipelineCache};
use crate::gpu::{GpuContext, shader_text};

/// The pipelines of both entry points, one per (head width, subgroup size).
pub struct FlashBackwardSubgroup {
    launcher: Launcher<Self>,
    keys: Launcher<FlashBackwardSubgroupKeys>,
    subgroup_size: u32,
}

impl Kernel for FlashBackwardSubgroup {
    const NAME: &'static str = "flash_backward_subgroup";
    const SOURCE: &'static str = include_str!("../../shaders/flash_backward_subgroup.wgsl");
    const BINDINGS: &'static [Binding] = &BACKWARD_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("flash_backward");
    type Params = AttentionParams;

    /// One workgroup (one subgroup) per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

/// `key_grads`: the first eight of `main`'s bindings (no O).
pub struct FlashBackwardSubgroupKeys;

impl Kernel for FlashBackwardSubgroupKeys {
    const NAME: &'static str = "flash_backward_subgroup";
    const SOURCE: &'static str = FlashBackwardSubgroup::SOURCE;
    const ENTRY_POINT: &'static str = "key_grads";
    const BINDINGS: &'static [Binding] = BACKWARD_BINDINGS.split_at(8).0;
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("flash_backward");
    type Params = AttentionParams;

    /// One workgroup (one subgroup) per tile of a KV head's keys.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

impl FlashBackwardSubgroup {
    /// `None` unless the device has subgroups of one fixed size (the shader's `BC`).
    pub fn new(ctx: &GpuContext) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let source = shader_text::for_subgroups(Self::SOURCE);
        let launcher = Launcher::from_source(ctx, &source);
        let keys = Launcher::from_source(ctx, &source);
        // Its point is registers shared across lanes, which only unrolled code keeps in registers.
        launcher.pipelines().set_unrolled(true);
        keys.pipelines().set_unrolled(true);
        Some(Self { launcher, keys, subgroup_size })
    }

    /// Rows each invocation of `main` owns (R) and keys each of `key_grads` owns (RK, four head-wide
    /// vectors per key). On lavapipe at n = 2048, d = 64, causal (`bench --kernel backward`), 4 and 4
    /// ran as fast as or faster than 8/4, 8/8, 8/2, 4/2 and 2/4 (the machine's noise is about 20 %).
    pub fn per_invocation(d_pad: u32) -> (u32, u32) {
        if d_pad <= 64 {
            (4, 4)
        } else if d_pad <= 128 {
            (2, 2)
        } else {
            (1, 1)
        }
    }

    /// Rows (`main`) and keys (`key_grads`) one workgroup covers: one subgroup.
    pub fn tiles(&self, d_pad: u32) -> (u32, u32) {
        let (rows, keys) = Self::per_invocation(d_pad);
        (self.subgroup_size * rows, self.subgroup_size * keys)
    }

    /// The pipelines of `main` and `key_grads` for heads `d_pad` wide.
    pub fn pipelines(&self, device: &wgpu::Device, d_pad: u32) -> [wgpu::ComputePipeline; 2] {
        let (rows, keys) = Self::per_invocation(d_pad);
        let constants = [("D", d_pad), ("D4", d_pad / 4), ("R", rows), ("RK", keys), ("BC", self.subgroup_size)];
        let overrides = [("BR", self.subgroup_size)];
        let build = |cache: &PipelineCache| cache.get_specialised(device, &constants, &overrides);
        [build(self.launcher.pipelines()), build(self.keys.pipelines())]
    }

    /// Its owner (`flash_backward`, which checks the launch) dispatches through these.
    pub fn launchers(&self) -> (&Launcher<Self>, &Launcher<FlashBackwardSubgroupKeys>) {
        (&self.launcher, &self.keys)
    }
}
