//! Owner of `shaders/row_softmax_subgroup.wgsl`: the row softmax for CPU-class adapters whose lanes
//! share K rows by shuffling. Same bindings, parameters and results as `shaders/row_softmax.wgsl`,
//! whose owner launches this as one of its forms.

use crate::gpu::attention_io::AttentionParams;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::Binding;
use crate::gpu::{GpuContext, shader_text};

/// The pipelines, one per (head width, rows per invocation, output).
pub struct RowSoftmaxSubgroup {
    launcher: Launcher<Self>,
    /// Lanes per subgroup: keys per step, and invocations per workgroup.
    pub subgroup_size: u32,
}

impl Kernel for RowSoftmaxSubgroup {
    const NAME: &'static str = "row_softmax_subgroup";
    const SOURCE: &'static str = include_str!("../../shaders/row_softmax_subgroup.wgsl");
    /// `row_softmax`'s (this file does not import its chooser).
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("row_softmax");
    type Params = AttentionParams;

    /// One workgroup (one subgroup) per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

impl RowSoftmaxSubgroup {
    /// `None` unless the device has subgroups of one fixed size.
    pub fn new(ctx: &GpuContext) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let launcher = Launcher::from_source(ctx, &shader_text::for_subgroups(Self::SOURCE));
        // Sharing registers across lanes only pays when they are registers: unrolled.
        launcher.pipelines().set_unrolled(true);
        // Written out, each step's shuffle comes from a constant lane: a broadcast, quicker on SwiftShader.
        launcher.pipelines().set_constant_lanes(true);
        Some(Self { launcher, subgroup_size })
    }

    pub fn launcher(&self) -> &Launcher<Self> {
        &self.launcher
    }

    /// The pipeline for these compile-time constants (`D4`, `R`, `OUTPUT`; `SG` added here), built
    /// now if `build`; otherwise `None` unless built before.
    pub fn pipeline(
        &self,
        device: &wgpu::Device,
        constants: &[(&'static str, u32)],
        build: bool,
    ) -> Option<wgpu::ComputePipeline> {
        let mut all = constants.to_vec();
        all.push(("SG", self.subgroup_size));
        let pipelines = self.launcher.pipelines();
        (build || pipelines.is_built(&all, &[])).then(|| pipelines.get_specialised(device, &all, &[]))
    }
}
