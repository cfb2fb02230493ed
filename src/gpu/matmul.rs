//! Owner of `shaders/matmul.wgsl`: `Y = X Wᵀ + bias` (or `Y +=`, the residual add) with W stored
//! (outputs, inputs) as PyTorch keeps it: every projection of the language model.

use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch, PerWeightFormat, PipelineCache};
use crate::gpu::matmul_io::MATMUL_BINDINGS;
pub use crate::gpu::matmul_io::MatmulParams;
use crate::gpu::matmul_subgroup::MatmulSubgroup;
use crate::gpu::{GpuContext, GpuError, shader_text};
use crate::lm::weight_plan::WeightFormat;

/// The `tiled` entry point's tile of Y (keep in sync with `TILE` in the shader).
const TILE: u32 = 64;

/// The `tiled` entry point's constants (as in the shader), passed so that its loops over them are
/// written out ([`crate::gpu::shader_text::unroll_loops`] unrolls loops over named constants only).
const TILED_CONSTANTS: [(&str, u32); 2] = [("PER", 4), ("STEP4", 4)];

/// Which entry point runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulForm {
    /// `tiled`: tiles staged in workgroup memory (GPUs).
    Tiled,
    /// `direct`: register blocks read straight from the buffers, loops written out (CPU adapters).
    Direct,
    /// `matmul_subgroup.wgsl`: as `Direct`, X rows shared across a subgroup's lanes by shuffles (CPU
    /// adapters with subgroups).
    Subgroup,
}

/// The CPU forms' block. `Direct`: Y rows per workgroup (`ROWS`), columns per lane (`COLS`), lanes
/// per workgroup (`WG`). `Subgroup`: X rows each lane loads per step (`RB`, so `RB x` the subgroup
/// size Y rows per workgroup) and columns per lane (`COLS`); its lanes are the subgroup's.
/// The defaults measured fastest on lavapipe at the model's shapes (`bench --lm --matmul-block`, on
/// a 2-core machine shared with other work, so within about 10 %): direct 8 x 4 on 8 lanes (13 % of
/// the FMA peak; 4 x 4: 12 %, 8 x 1: 4 %: every load is a scalar load per lane), subgroup 8 x 4
/// (40-55 %, and 50-57 % since Y is stored a vec4 at a time; 4 x 4 a few % slower, 2 x 4: 33 %, 1 x 4: 25 %, 8 x 1: 25 %, 8 x 2 between 33 % and 65 %
/// from run to run; four fmas in place of dot() and an add, or two vec4s of the inputs per step,
/// gained nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectBlock {
    pub rows: u32,
    pub cols: u32,
    pub lanes: u32,
}

impl Default for DirectBlock {
    fn default() -> Self {
        Self { rows: 8, cols: 4, lanes: 8 }
    }
}

/// One launch: Y `[rows, outputs]` from X rows `x_row0..x_row0 + rows` (each `inputs` wide, a
/// multiple of 4); `accumulate` adds to Y instead of overwriting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulLaunch {
    pub rows: u32,
    pub inputs: u32,
    pub outputs: u32,
    pub x_row0: u32,
    pub accumulate: bool,
}

impl MatmulLaunch {
    /// `Y = X Wᵀ` over every row of X.
    pub fn new(rows: u32, inputs: u32, outputs: u32) -> Self {
        Self { rows, inputs, outputs, x_row0: 0, accumulate: false }
    }

    /// 2 flops (a multiply and an add) per input per output per row.
    pub fn flops(&self) -> u64 {
        2 * u64::from(self.rows) * u64::from(self.inputs) * u64::from(self.outputs)
    }
}

/// X `[x_row0 + rows, inputs]`, W `[outputs, inputs]` held in `w_format`, bias `[outputs]` if any,
/// Y `[rows, outputs]`.
pub struct MatmulBuffers<'a> {
    pub x: &'a wgpu::Buffer,
    pub w: &'a wgpu::Buffer,
    pub w_format: WeightFormat,
    pub bias: Option<&'a wgpu::Buffer>,
    pub y: &'a wgpu::Buffer,
}

/// One weight format's pipelines: the `tiled` entry point's launcher, the `direct` entry point's
/// pipelines (same bindings), and the subgroup kernel's.
struct FormPipelines {
    tiled: Launcher<Matmul>,
    direct: PipelineCache,
    subgroup: Option<MatmulSubgroup>,
}

impl FormPipelines {
    fn new(ctx: &GpuContext, format: WeightFormat) -> Self {
        let source = shader_text::with_weights(Matmul::SOURCE, format);
        let tiled = Launcher::from_source(ctx, &source);
        // GPUs too: with its loops kept the tiled form ran 7x slower on an H100 (Vulkan).
        tiled.pipelines().set_unrolled(true);
        let direct = tiled.pipelines_of(ctx, &source, "direct");
        // Only the loops over the block are written out, never the loop over the inputs.
        direct.set_unrolled(true);
        let subgroup = if ctx.adapter.is_cpu { MatmulSubgroup::new(ctx, format) } else { None };
        Self { tiled, direct, subgroup }
    }
}

pub struct Matmul {
    pipelines: PerWeightFormat<FormPipelines>,
    /// The block of the `Subgroup` form.
    subgroup_block: std::cell::Cell<DirectBlock>,
    form: std::cell::Cell<MatmulForm>,
    block: std::cell::Cell<DirectBlock>,
    max_invocations: u32,
    /// Bound in the bias's place when a launch has none.
    no_bias: wgpu::Buffer,
}

impl Kernel for Matmul {
    const NAME: &'static str = "matmul";
    const SOURCE: &'static str = include_str!("../../shaders/matmul.wgsl");
    const ENTRY_POINT: &'static str = "tiled";
    const BINDINGS: &'static [Binding] = &MATMUL_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = MatmulParams;

    /// Each form has its own block of Y rows.
    fn workgroups(_: &MatmulParams) -> Option<u64> {
        None
    }
}

impl Matmul {
    pub fn new(ctx: &GpuContext) -> Self {
        let pipelines = FormPipelines::new(ctx, WeightFormat::F32);
        let subgroup = &pipelines.subgroup;
        let form = match (ctx.adapter.is_cpu, subgroup) {
            (false, _) => MatmulForm::Tiled,
            (true, None) => MatmulForm::Direct,
            (true, Some(_)) => MatmulForm::Subgroup,
        };
        let max_invocations =
            ctx.limits.max_compute_invocations_per_workgroup.min(ctx.limits.max_compute_workgroup_size_x).max(1);
        let no_bias = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("matmul no bias"),
            size: 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let subgroup_lanes = subgroup.as_ref().map_or(1, |s| s.subgroup_size);
        Self {
            pipelines: PerWeightFormat::new(pipelines),
            subgroup_block: DirectBlock { rows: 8, cols: 4, lanes: subgroup_lanes }.into(),
            form: form.into(),
            block: Default::default(),
            max_invocations,
            no_bias,
        }
    }

    pub fn form(&self) -> MatmulForm {
        self.form.get()
    }

    /// Forces a form (tests run every form the adapter can); `Subgroup` without subgroups is `Direct`.
    pub fn set_form(&self, form: MatmulForm) {
        self.form.set(if form == MatmulForm::Subgroup && self.pipelines.f32().subgroup.is_none() {
            MatmulForm::Direct
        } else {
            form
        });
    }

    /// The block of the current form (`Tiled`: none, the direct form's).
    pub fn block(&self) -> DirectBlock {
        match self.form.get() {
            MatmulForm::Subgroup => self.subgroup_block.get(),
            _ => self.block.get(),
        }
    }

    /// Sets the current CPU form's block (tuning with the benchmark); sizes are clamped to 1..=8 rows
    /// and columns and to this device's invocations (the subgroup form keeps its subgroup's lanes).
    pub fn set_block(&self, block: DirectBlock) {
        let clamped = |lanes| DirectBlock { rows: block.rows.clamp(1, 8), cols: block.cols.clamp(1, 8), lanes };
        match self.form.get() {
            MatmulForm::Subgroup => self.subgroup_block.set(clamped(self.subgroup_block.get().lanes)),
            _ => self.block.set(clamped(block.lanes.clamp(1, self.max_invocations))),
        }
    }

    /// Prepares one launch.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &MatmulBuffers<'_>,
        launch: MatmulLaunch,
    ) -> Result<Dispatch, GpuError> {
        check(buffers, launch)?;
        let format = buffers.w_format;
        let pipelines = self.pipelines.get(format, || FormPipelines::new(ctx, format));
        let subgroup = match self.form.get() {
            MatmulForm::Subgroup => {
                Some(pipelines.subgroup.as_ref().ok_or_else(|| GpuError::Device("no subgroups".into()))?)
            }
            _ => None,
        };
        let (row_block, col_block, pipeline) = match (self.form.get(), subgroup) {
            (MatmulForm::Subgroup, Some(subgroup)) => {
                let b = self.subgroup_block.get();
                (b.rows * b.lanes, b.cols * b.lanes, subgroup.pipeline(&ctx.device, b.rows, b.cols, launch.outputs))
            }
            (MatmulForm::Direct, _) => {
                let b = self.block.get();
                let constants = [("ROWS", b.rows), ("COLS", b.cols)];
                let pipeline = pipelines.direct.get_specialised(&ctx.device, &constants, &[("WG", b.lanes)]);
                (b.rows, b.cols * b.lanes, pipeline)
            }
            _ => (TILE, TILE, pipelines.tiled.pipelines().get_specialised(&ctx.device, &TILED_CONSTANTS, &[])),
        };
        let col_tiles = launch.outputs.div_ceil(col_block);
        let params = MatmulParams {
            rows: launch.rows,
            inputs4: launch.inputs / 4,
            outputs: launch.outputs,
            x_row0: launch.x_row0,
            has_bias: u32::from(buffers.bias.is_some()),
            accumulate: u32::from(launch.accumulate),
            col_tiles,
            _pad: 0,
        };
        let bound = [buffers.x, buffers.w, buffers.bias.unwrap_or(&self.no_bias), buffers.y];
        let workgroups = u64::from(launch.rows.div_ceil(row_block)) * u64::from(col_tiles);
        match subgroup {
            Some(subgroup) => subgroup.launcher().dispatch_workgroups(ctx, pipeline, &params, &bound, workgroups),
            None => pipelines.tiled.dispatch_workgroups(ctx, pipeline, &params, &bound, workgroups),
        }
    }
}

/// Refuses a launch whose sizes the buffers do not hold (before wgpu would raise a validation error,
/// or a shader would read past its rows).
fn check(buffers: &MatmulBuffers<'_>, launch: MatmulLaunch) -> Result<(), GpuError> {
    let MatmulLaunch { rows, inputs, outputs, x_row0, .. } = launch;
    if rows == 0 || outputs == 0 || inputs == 0 || !inputs.is_multiple_of(4) {
        return Err(GpuError::InvalidInput(format!(
            "matmul needs rows, outputs and inputs a multiple of 4 (got {launch:?})"
        )));
    }
    let floats = |a: u64, b: u32| 4 * a * u64::from(b);
    let needs = [
        ("X", buffers.x, floats(u64::from(x_row0) + u64::from(rows), inputs)),
        ("W", buffers.w, buffers.w_format.bytes() * u64::from(outputs) * u64::from(inputs)),
        ("Y", buffers.y, floats(rows.into(), outputs)),
    ];
    let bias = buffers.bias.map(|b| ("bias", b, floats(outputs.into(), 1)));
    for (name, buffer, bytes) in needs.into_iter().chain(bias) {
        if buffer.size() < bytes {
            return Err(GpuError::InvalidInput(format!(
                "matmul {launch:?}: {name} holds {} bytes, needs {bytes}",
                buffer.size()
            )));
        }
    }
    Ok(())
}
