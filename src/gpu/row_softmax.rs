//! Owner of `shaders/row_softmax.wgsl`: whole rows of attention probabilities in one pass (heads shown
//! whole), each row's probabilities pooled over blocks of keys (long heads, with `pool_rows`), or each
//! row's log-sum-exp alone; the forward pass without its P·V half.

use crate::attention::AttentionShape;
use crate::attention::pooled::Pool;
use crate::gpu::attention_io::AttentionParams;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::row_softmax_subgroup::RowSoftmaxSubgroup;
use crate::gpu::{GpuContext, GpuError};
use crate::model::Mask;
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, kernels_take_head_dim};

/// One launch: which rows against which keys, and what to write.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowLaunch {
    /// `shape.d` padded to a multiple of 4.
    pub shape: AttentionShape,
    /// The position of query 0 among the keys: `shape.q_offset()` (queries are the last rows of the
    /// keys) unless the queries are a slice of a longer sequence.
    pub q_offset: u32,
    pub mask: Mask,
    pub scale: f32,
    pub output: RowOutput,
}

/// What the kernel writes (the shader's `OUTPUT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOutput {
    /// `[h_q, n_q, n_kv]` probabilities.
    Probabilities,
    /// `[h_q, n_q]` log-sum-exp.
    LogSumExp,
    /// `[h_q, n_q, cols]`: each row's probabilities pooled over `cols <= n_kv` blocks of keys (max, or
    /// the sum for a mean), for `pool_rows` to pool rows.
    Blocks { cols: u32, pool: Pool },
}

impl RowOutput {
    fn to_gpu(self) -> u32 {
        match self {
            RowOutput::Probabilities => 0,
            RowOutput::LogSumExp => 1,
            RowOutput::Blocks { pool: Pool::Max, .. } => 2,
            RowOutput::Blocks { pool: Pool::Mean, .. } => 3,
        }
    }

    /// Floats of results for `shape`.
    pub fn len(self, shape: &AttentionShape) -> u64 {
        let rows = u64::from(shape.h_q) * u64::from(shape.n_q);
        match self {
            RowOutput::Probabilities => rows * u64::from(shape.n_kv),
            RowOutput::LogSumExp => rows,
            RowOutput::Blocks { cols, .. } => rows * u64::from(cols),
        }
    }

    fn key_blocks(self) -> u32 {
        match self {
            RowOutput::Blocks { cols, .. } => cols,
            _ => 0,
        }
    }
}

/// Q, K (`[h_q, n_q, d_pad]`, `[h_kv, n_kv, d_pad]`) and the output ([`RowOutput::len`] floats).
pub struct RowBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
}

/// How a launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowForm {
    /// One row per invocation, 64 per workgroup (GPUs; its loops written out there, kept when it is
    /// the quick form of CPU adapters in the browser).
    Gpu,
    /// CPU adapters: several rows per invocation (each K read serves them all), loops over the head
    /// width and the rows written out.
    Cpu,
    /// CPU adapters with subgroups: as `Cpu`, plus K rows shared across lanes (`row_softmax_subgroup.wgsl`).
    CpuSubgroup,
}

pub struct RowSoftmax {
    launcher: Launcher<Self>,
    subgroup: Option<RowSoftmaxSubgroup>,
    /// The adapter's fastest form (or one a test forced).
    form: std::cell::Cell<RowForm>,
    max_invocations: u32,
    /// Whether the adapter is a GPU (not CPU-emulated).
    on_gpu: bool,
}

/// CPU adapters compile the unrolled forms slowly in the browser (SwiftShader: about a second for a
/// 128-wide head, against a fifth of that for the loops), which a first heatmap would wait for. So
/// there, until the fast form for a head width is built, launches with less work than this
/// (multiply-adds) run the GPU form, and [`RowSoftmax::warm_up`] builds the fast form afterwards.
/// Natively compiling is quick: always the fast form.
const QUICK_FORM_MAX_WORK: u64 = 1 << 28;
const QUICK_FORM_FIRST: bool = cfg!(target_arch = "wasm32");

/// CPU forms: rows per invocation (R) = this / head width, at most 2. More rows make each K read
/// serve more rows, but the unrolled code, and its compile time, grow with them: on SwiftShader the
/// subgroup form compiles in about 1.4 s at d = 128 with R = 2, and with R = 4 (at d = 64, and again
/// at d = 128 after its key loop took the shape of flash_attention_subgroup.wgsl) it did not finish
/// before the browser's GPU process gave up.
const CPU_ROW_VALUES: u32 = 256;

/// One launch's form and sizes.
struct Plan {
    form: RowForm,
    /// Rows per invocation (`R`) and invocations per workgroup.
    rows: u32,
    invocations: u32,
    constants: [(&'static str, u32); 3],
}

impl Kernel for RowSoftmax {
    const NAME: &'static str = "row_softmax";
    const SOURCE: &'static str = include_str!("../../shaders/row_softmax.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = AttentionParams;

    /// One workgroup per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

impl RowSoftmax {
    pub fn new(ctx: &GpuContext) -> Self {
        let subgroup = if ctx.adapter.is_cpu { RowSoftmaxSubgroup::new(ctx) } else { None };
        let form = match (ctx.adapter.is_cpu, &subgroup) {
            (false, _) => RowForm::Gpu,
            (true, None) => RowForm::Cpu,
            (true, Some(_)) => RowForm::CpuSubgroup,
        };
        let max_invocations =
            ctx.limits.max_compute_invocations_per_workgroup.min(ctx.limits.max_compute_workgroup_size_x).max(1);
        Self { launcher: Launcher::new(ctx), subgroup, form: form.into(), max_invocations, on_gpu: !ctx.adapter.is_cpu }
    }

    pub fn form(&self) -> RowForm {
        self.form.get()
    }

    /// Forces a form (tests run every form this adapter can); `CpuSubgroup` without subgroups is `Cpu`.
    pub fn set_form(&self, form: RowForm) {
        self.form.set(if form == RowForm::CpuSubgroup && self.subgroup.is_none() { RowForm::Cpu } else { form });
    }

    fn plan(&self, form: RowForm, d_pad: u32, rows_total: u32, output: RowOutput) -> Plan {
        let rows = if form == RowForm::Gpu { 1 } else { (CPU_ROW_VALUES / d_pad).clamp(1, 2) };
        let invocations = match (form, &self.subgroup) {
            (RowForm::CpuSubgroup, Some(sg)) => sg.subgroup_size,
            // 64 on GPUs, one SIMD batch on CPU adapters (8 lanes on lavapipe); fewer for few rows.
            _ => (if form == RowForm::Gpu { 64 } else { 8 })
                .min(rows_total.div_ceil(rows).next_power_of_two().max(8))
                .min(self.max_invocations),
        };
        Plan { form, rows, invocations, constants: [("D4", d_pad / 4), ("R", rows), ("OUTPUT", output.to_gpu())] }
    }

    /// Builds (if new) or looks up the plan's pipeline; `build: false` only looks.
    fn pipeline(&self, device: &wgpu::Device, plan: &Plan, build: bool) -> Option<wgpu::ComputePipeline> {
        match (plan.form, &self.subgroup) {
            (RowForm::CpuSubgroup, Some(sg)) => sg.pipeline(device, &plan.constants, build),
            _ => {
                // Only the loops over the head width and the rows are written out, never the key loop.
                // On GPUs the GPU form too (kept, they made it 2-3x slower on an H100); on CPU adapters
                // it stays the quick form to compile (`QUICK_FORM_FIRST`).
                let pipelines = self.launcher.pipelines();
                pipelines.set_unrolled(plan.form == RowForm::Cpu || self.on_gpu);
                let overrides = [("WG", plan.invocations)];
                (build || pipelines.is_built(&plan.constants, &overrides))
                    .then(|| pipelines.get_specialised(device, &plan.constants, &overrides))
            }
        }
    }

    /// A launch of the plan's pipeline, bound by the launcher of the kernel it comes from.
    fn dispatch(
        &self,
        ctx: &GpuContext,
        plan: &Plan,
        pipeline: wgpu::ComputePipeline,
        params: &AttentionParams,
        buffers: &[&wgpu::Buffer],
    ) -> Result<Dispatch, GpuError> {
        match (plan.form, &self.subgroup) {
            (RowForm::CpuSubgroup, Some(sg)) => sg.launcher().dispatch(ctx, pipeline, params, buffers),
            _ => self.launcher.dispatch(ctx, pipeline, params, buffers),
        }
    }

    /// Prepares one launch.
    pub fn prepare(&self, ctx: &GpuContext, buffers: &RowBuffers<'_>, launch: RowLaunch) -> Result<Dispatch, GpuError> {
        let RowLaunch { shape, q_offset, mask, scale, output } = launch;
        let d_pad = shape.d;
        if !d_pad.is_multiple_of(4) || !kernels_take_head_dim(d_pad) {
            return Err(GpuError::LimitExceeded(format!(
                "the row softmax needs d a multiple of 4 up to {KERNEL_MAX_HEAD_DIM} (got {d_pad})"
            )));
        }
        let rows_total = shape.n_q * shape.group_size();
        let fast = self.plan(self.form.get(), d_pad, rows_total, output);
        let quick = QUICK_FORM_FIRST
            && fast.form != RowForm::Gpu
            && shape.attended_pairs(mask) * u64::from(d_pad) < QUICK_FORM_MAX_WORK;
        let (plan, pipeline) = match self.pipeline(&ctx.device, &fast, !quick) {
            Some(p) => (fast, p),
            None => {
                let plan = self.plan(RowForm::Gpu, d_pad, rows_total, output);
                let pipeline = self.pipeline(&ctx.device, &plan, true).expect("built on request");
                (plan, pipeline)
            }
        };
        let tiles_per_kv_head = rows_total.div_ceil(plan.invocations * plan.rows);
        if let RowOutput::Blocks { cols, .. } = output
            && (cols == 0 || cols > shape.n_kv)
        {
            return Err(GpuError::InvalidInput(format!("{cols} key blocks for {} keys: need 1..=n_kv", shape.n_kv)));
        }
        if u64::from(q_offset) + u64::from(shape.n_q) > u64::from(shape.n_kv) {
            return Err(GpuError::InvalidInput(format!(
                "queries {q_offset}.. ({} of them) past the {} keys",
                shape.n_q, shape.n_kv
            )));
        }
        let params = AttentionParams {
            key_blocks: output.key_blocks(),
            q_offset,
            ..AttentionParams::new(shape, shape.n_kv, mask, scale, tiles_per_kv_head)
        };
        self.dispatch(ctx, &plan, pipeline, &params, &[buffers.q, buffers.k, buffers.out])
    }

    /// Whether the adapter's fast form for launches of this shape is built ([`RowSoftmax::warm_up`]).
    pub fn is_warm(&self, ctx: &GpuContext, shape: AttentionShape, output: RowOutput) -> bool {
        let plan = self.plan(self.form.get(), shape.d, shape.n_q * shape.group_size(), output);
        self.pipeline(&ctx.device, &plan, false).is_some()
    }

    /// Builds the fast form for this launch shape if a quick one stood in for it, so that later launches
    /// get it. Call after reading results back: a browser compiles while the page draws them (a launch
    /// submitted meanwhile waits for the compile).
    pub fn warm_up(&self, ctx: &GpuContext, shape: AttentionShape, output: RowOutput) {
        if self.is_warm(ctx, shape, output) {
            return;
        }
        let plan = self.plan(self.form.get(), shape.d, shape.n_q * shape.group_size(), output);
        let Some(pipeline) = self.pipeline(&ctx.device, &plan, true) else { return };
        match (plan.form, &self.subgroup) {
            (RowForm::CpuSubgroup, Some(sg)) => sg.launcher().compile_now(ctx, pipeline, &AttentionParams::IDLE),
            _ => self.launcher.compile_now(ctx, pipeline, &AttentionParams::IDLE),
        }
    }
}
