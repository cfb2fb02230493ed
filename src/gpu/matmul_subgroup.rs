//! Owner of `shaders/matmul_subgroup.wgsl`: the matmul for CPU-class adapters whose lanes share X
//! loads by shuffling. Same bindings, parameters and results as `shaders/matmul.wgsl`, whose owner
//! launches this as one of its forms.

use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, PipelineCache};
use crate::gpu::matmul_io::{MATMUL_BINDINGS, MatmulParams};
use crate::gpu::{GpuContext, shader_text};
use crate::lm::weight_plan::WeightFormat;

/// The pipelines, one per block and way of storing Y.
pub struct MatmulSubgroup {
    /// Y stored a vec4 at a time (`matmul_subgroup_y4.wgsl`).
    quads: Launcher<Self>,
    /// Y stored an f32 at a time (`matmul_subgroup_y.wgsl`), where rows or blocks are not whole vec4s.
    singles: PipelineCache,
    /// Lanes per subgroup: invocations per workgroup, and Y rows per X row each lane loads.
    pub subgroup_size: u32,
}

impl Kernel for MatmulSubgroup {
    const NAME: &'static str = "matmul_subgroup";
    const SOURCE: &'static str = include_str!("../../shaders/matmul_subgroup.wgsl");
    const BINDINGS: &'static [Binding] = &MATMUL_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("matmul");
    type Params = MatmulParams;

    /// The block is chosen per launch.
    fn workgroups(_: &MatmulParams) -> Option<u64> {
        None
    }
}

impl MatmulSubgroup {
    /// `None` unless the device has subgroups of one fixed size; W read in `format`.
    pub fn new(ctx: &GpuContext, format: WeightFormat) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let source = shader_text::for_subgroups(&shader_text::with_weights(Self::SOURCE, format));
        let quads = Launcher::from_source(ctx, &source);
        let singles = quads.pipelines_of(ctx, &with_single_stores(&source), Self::ENTRY_POINT);
        // Sharing registers across lanes only pays when they are registers: unrolled.
        quads.pipelines().set_unrolled(true);
        singles.set_unrolled(true);
        Some(Self { quads, singles, subgroup_size })
    }

    /// Both ways of storing Y bind alike: either pipeline launches through this.
    pub fn launcher(&self) -> &Launcher<Self> {
        &self.quads
    }

    /// The pipeline whose lanes each load `row_loads` X rows and own `cols` Y columns per step, for
    /// Y rows `outputs` wide.
    pub fn pipeline(&self, device: &wgpu::Device, row_loads: u32, cols: u32, outputs: u32) -> wgpu::ComputePipeline {
        let constants = [("LANES", self.subgroup_size), ("RB", row_loads), ("COLS", cols)];
        if stores_quads(cols, outputs) {
            let constants = [constants[0], constants[1], constants[2], ("QUADS", cols / 4)];
            self.quads.pipelines().get_specialised(device, &constants, &[])
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
