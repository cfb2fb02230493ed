//! Owner of `shaders/row_softmax_subgroup.wgsl`: the row softmax for CPU-class adapters whose lanes
//! share K rows by shuffling. Same bindings, parameters and results as `shaders/row_softmax.wgsl`,
//! whose owner launches this as one of its forms.

use crate::gpu::launch::PipelineCache;
use crate::gpu::{GpuContext, shader_text};

/// The pipelines, one per (head width, rows per invocation, output).
pub struct RowSoftmaxSubgroup {
    pipelines: PipelineCache,
    /// Lanes per subgroup: keys per step, and invocations per workgroup.
    pub subgroup_size: u32,
}

impl RowSoftmaxSubgroup {
    /// `None` unless the device has subgroups of one fixed size.
    pub fn new(ctx: &GpuContext, layout: &wgpu::BindGroupLayout) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let source = shader_text::for_subgroups(include_str!("../../shaders/row_softmax_subgroup.wgsl"));
        let pipelines = PipelineCache::new(&ctx.device, "row_softmax_subgroup", &source, "main", layout);
        // Sharing registers across lanes only pays when they are registers: unrolled.
        pipelines.set_unrolled(true);
        Some(Self { pipelines, subgroup_size })
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
        (build || self.pipelines.is_built(&all, &[])).then(|| self.pipelines.get_specialised(device, &all, &[]))
    }
}
