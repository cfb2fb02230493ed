//! Owner of `shaders/matmul_subgroup.wgsl`: the matmul for CPU-class adapters whose lanes share X
//! loads by shuffling. Same bindings, parameters and results as `shaders/matmul.wgsl`, whose owner
//! launches this as one of its forms.

use crate::gpu::launch::PipelineCache;
use crate::gpu::{GpuContext, shader_text};
use crate::lm::weight_plan::WeightFormat;

/// The pipelines, one per block and way of storing Y.
pub struct MatmulSubgroup {
    /// Y stored a vec4 at a time (`matmul_subgroup_y4.wgsl`).
    quads: PipelineCache,
    /// Y stored an f32 at a time (`matmul_subgroup_y.wgsl`), where rows or blocks are not whole vec4s.
    singles: PipelineCache,
    /// Lanes per subgroup: invocations per workgroup, and Y rows per X row each lane loads.
    pub subgroup_size: u32,
}

impl MatmulSubgroup {
    /// `None` unless the device has subgroups of one fixed size; W read in `format`.
    pub fn new(ctx: &GpuContext, layout: &wgpu::BindGroupLayout, format: WeightFormat) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let source = include_str!("../../shaders/matmul_subgroup.wgsl");
        let source = shader_text::for_subgroups(&shader_text::with_weights(source, format));
        let singles_source = with_single_stores(&source);
        let quads = PipelineCache::new(&ctx.device, "matmul_subgroup", &source, "main", layout);
        let singles = PipelineCache::new(&ctx.device, "matmul_subgroup f32 stores", &singles_source, "main", layout);
        // Sharing registers across lanes only pays when they are registers: unrolled.
        quads.set_unrolled(true);
        singles.set_unrolled(true);
        Some(Self { quads, singles, subgroup_size })
    }

    /// The pipeline whose lanes each load `row_loads` X rows and own `cols` Y columns per step, for
    /// Y rows `outputs` wide.
    pub fn pipeline(&self, device: &wgpu::Device, row_loads: u32, cols: u32, outputs: u32) -> wgpu::ComputePipeline {
        let constants = [("LANES", self.subgroup_size), ("RB", row_loads), ("COLS", cols)];
        if stores_quads(cols, outputs) {
            let constants = [constants[0], constants[1], constants[2], ("QUADS", cols / 4)];
            self.quads.get_specialised(device, &constants, &[])
        } else {
            self.singles.get_specialised(device, &constants, &[])
        }
    }
}

/// `source` (matmul_subgroup.wgsl) storing Y an f32 at a time: `matmul_subgroup_y.wgsl` in place of
/// `matmul_subgroup_y4.wgsl`.
pub fn with_single_stores(source: &str) -> String {
    source.replace("// #include matmul_subgroup_y4.wgsl", "// #include matmul_subgroup_y.wgsl")
}

/// Whether Y can be stored a vec4 at a time: each lane's columns and each row are whole vec4s.
pub fn stores_quads(cols: u32, outputs: u32) -> bool {
    cols.is_multiple_of(4) && outputs.is_multiple_of(4)
}

#[cfg(test)]
mod tests {
    #[test]
    fn vec4_stores_need_whole_vec4s() {
        assert!(super::stores_quads(4, 4096));
        assert!(super::stores_quads(8, 384));
        assert!(!super::stores_quads(4, 32_001)); // a vocabulary with one added token
        assert!(!super::stores_quads(3, 4096));
    }
}
