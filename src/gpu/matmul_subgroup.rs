//! Owner of `shaders/matmul_subgroup.wgsl`: the matmul for CPU-class adapters whose lanes share X
//! loads by shuffling. Same bindings, parameters and results as `shaders/matmul.wgsl`, whose owner
//! launches this as one of its forms.

use crate::gpu::launch::PipelineCache;
use crate::gpu::{GpuContext, shader_text};

/// The pipelines, one per block.
pub struct MatmulSubgroup {
    pipelines: PipelineCache,
    /// Lanes per subgroup: invocations per workgroup, and Y rows per X row each lane loads.
    pub subgroup_size: u32,
}

impl MatmulSubgroup {
    /// `None` unless the device has subgroups of one fixed size.
    pub fn new(ctx: &GpuContext, layout: &wgpu::BindGroupLayout) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let source = shader_text::for_subgroups(include_str!("../../shaders/matmul_subgroup.wgsl"));
        let pipelines = PipelineCache::new(&ctx.device, "matmul_subgroup", &source, "main", layout);
        // Sharing registers across lanes only pays when they are registers: unrolled.
        pipelines.set_unrolled(true);
        Some(Self { pipelines, subgroup_size })
    }

    /// The pipeline whose lanes each load `row_loads` X rows and own `cols` Y columns per step.
    pub fn pipeline(&self, device: &wgpu::Device, row_loads: u32, cols: u32) -> wgpu::ComputePipeline {
        let constants = [("LANES", self.subgroup_size), ("RB", row_loads), ("COLS", cols)];
        self.pipelines.get_specialised(device, &constants, &[])
    }
}
