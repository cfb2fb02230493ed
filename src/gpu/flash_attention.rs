//! Owner of `shaders/flash_attention.wgsl`: the tiled online-softmax forward (O and log-sum-exp).

use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_attention_coop::{self, FlashAttentionCoop};
use crate::gpu::flash_attention_subgroup::FlashSubgroup;
use crate::gpu::flash_io::{FLASH_BINDINGS, FlashBuffers, FlashLaunch};
use crate::gpu::flash_tiles::{FlashTiles, MAX_KEYS_PER_TILE, cpu_forward_rows_per_invocation, queries_in_registers};
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::subgroup_form::{Named, SubgroupForm};
use crate::gpu::{GpuContext, GpuError};
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, kernels_take_head_dim};

/// Whether the kernel is unrolled ([`crate::gpu::shader_text`]) unless told otherwise. Natively yes:
/// 5-15x faster on lavapipe, compiled in seconds, and 6-11x faster on an H100 (Vulkan), whose
/// compiler ran the loop form as it is. In the browser no: on SwiftShader the unrolled subgroup
/// kernel halves the explorer's time at n = 256, but its first compile made the first heatmap take
/// 9 s instead of 1.4 s; and a GPU's unrolled text is about 15,000 lines per head width, whose
/// compile time in browsers (Tint, then D3D or Metal) has not been measured. The benchmark view
/// turns it on (compiling is not timed), and a loaded model's passes take the subgroup form once a
/// page has built it for the model's head width ([`FlashAttention::warm_up`]).
const UNROLL_BY_DEFAULT: bool = !cfg!(target_arch = "wasm32");

/// The widest heads [`FlashAttention::warm_up`] builds the subgroup form for: a compile the page may
/// wait for must stay short. Measured on SwiftShader (headless Chromium, 2-core machine), warm-up to
/// the queue's next readback: d = 32 1.9 s in a fresh test page (0.8 s in the app, where the trained
/// model's first text change right after its load waited 0.86-1.09 s once), d = 64 6.8 s, d = 128
/// 7.9 s. Wider heads keep the loops.
const WARM_UP_MAX_HEAD_DIM: u32 = 32;

/// The launcher (per-head-width pipelines) and the tile choice.
pub struct FlashAttention {
    launcher: Launcher<Self>,
    limits: wgpu::Limits,
    is_cpu: bool,
    /// Tiles forced by the benchmark's `--tiles` (tuning), instead of [`FlashTiles::choose`].
    forced: std::cell::Cell<Option<FlashTiles>>,
    /// The subgroup-sharing kernel, used instead on CPU adapters that have subgroups, when unrolled (or,
    /// for a loaded model's passes, once built: [`FlashAttention::prepare_fastest`]).
    subgroup: Option<SubgroupForm<FlashSubgroup>>,
    /// The matrix-unit kernel (f16 inputs) where the device has matrix units, or why there is none.
    coop: Result<FlashAttentionCoop, String>,
    /// Whether launches may round their inputs to f16 to run on the matrix units ([`Self::set_f16_inputs`]).
    f16_inputs: std::cell::Cell<bool>,
}

impl Kernel for FlashAttention {
    const NAME: &'static str = "flash_attention";
    const SOURCE: &'static str = include_str!("../../shaders/flash_attention.wgsl");
    const BINDINGS: &'static [Binding] = &FLASH_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = AttentionParams;

    /// One workgroup per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

impl FlashAttention {
    pub fn new(ctx: &GpuContext) -> Self {
        let launcher = Launcher::new(ctx);
        launcher.pipelines().set_unrolled(UNROLL_BY_DEFAULT);
        let subgroup = if ctx.adapter.is_cpu { SubgroupForm::new(ctx, cpu_forward_rows_per_invocation) } else { None };
        Self {
            launcher,
            limits: ctx.limits.clone(),
            is_cpu: ctx.adapter.is_cpu,
            forced: Default::default(),
            subgroup,
            coop: FlashAttentionCoop::new(ctx),
            f16_inputs: Default::default(),
        }
    }

    /// Whether launches prepared from now on may run on the matrix units ([`Self::coop_plan`]), with
    /// Q, K, V and the weights rounded to f16 (`src/cpu/flash_attention_coop.rs` states the tolerance).
    /// Off unless asked for: every other caller gets the f32 forms, and devices without matrix units
    /// (lavapipe, SwiftShader, every browser) never change.
    pub fn set_f16_inputs(&self, allowed: bool) {
        self.f16_inputs.set(allowed);
    }

    pub fn f16_inputs(&self) -> bool {
        self.f16_inputs.get()
    }

    /// How one launch runs on the matrix units, or why it cannot on this device (no matrix units, or
    /// heads too wide for their tiles' workgroup memory).
    pub fn coop_plan(&self, launch: FlashLaunch) -> Result<FlashPlan, String> {
        check(&launch).map_err(|e| e.to_string())?;
        let coop = self.coop.as_ref().map_err(String::clone)?;
        let FlashLaunch { shape, kv_stride, mask, scale } = launch;
        let tiles = coop.tiles(shape.d)?;
        let rows_total = shape.n_q * shape.group_size();
        let params = AttentionParams::new(shape, kv_stride, mask, scale, rows_total.div_ceil(tiles.rows));
        let constants = flash_attention_coop::constants(&tiles, shape.d);
        let overrides = [("SG", coop.subgroup_size())];
        Ok(FlashPlan { form: FlashForm::Coop, params, constants, overrides, tile: (tiles.rows, tiles.keys) })
    }

    /// Whether pipelines built from now on unroll their loops (the benchmark asks for them; see
    /// [`UNROLL_BY_DEFAULT`]). GPUs in the browser keep the loops even then: the unrolled text's
    /// compile time there is unmeasured.
    pub fn set_unrolled(&self, unroll: bool) {
        self.launcher.pipelines().set_unrolled(unroll && (self.is_cpu || UNROLL_BY_DEFAULT));
    }

    pub fn is_unrolled(&self) -> bool {
        self.launcher.pipelines().is_unrolled()
    }

    pub fn tiles(&self, d_pad: u32) -> FlashTiles {
        self.forced.get().unwrap_or_else(|| FlashTiles::choose(&self.limits, self.is_cpu, d_pad))
    }

    /// The tile a launch of `rows_total` (query, head) rows of `d_pad`-wide heads works on: (rows,
    /// keys), whichever of the two kernels [`FlashAttention::prepare`] picks (a loaded model's passes,
    /// [`FlashAttention::prepare_fastest`], may take the subgroup form where this names the loops).
    pub fn launch_tiles(&self, d_pad: u32, rows_total: u32) -> (u32, u32) {
        if let (None, Some(subgroup), true) = (self.forced.get(), &self.subgroup, self.is_unrolled()) {
            return subgroup.tile(d_pad);
        }
        let tiles = self.tiles(d_pad).for_rows(d_pad, rows_total);
        (tiles.rows_per_tile(d_pad), tiles.keys_per_tile)
    }

    /// Forces tile sizes (for tuning with the benchmark); `None` goes back to the adapter's choice.
    /// Sizes beyond the shader's limits or this device's are clamped.
    pub fn force_tiles(&self, tiles: Option<FlashTiles>) {
        let max_rows = self.limits.max_compute_invocations_per_workgroup.min(self.limits.max_compute_workgroup_size_x);
        self.forced.set(tiles.map(|t| FlashTiles {
            rows_per_workgroup: t.rows_per_workgroup.clamp(1, max_rows),
            keys_per_tile: t.keys_per_tile.clamp(1, MAX_KEYS_PER_TILE),
            stage_kv: t.stage_kv,
        }));
    }

    /// How one launch runs: which form of the kernel, its params and its pipeline's specialisation.
    /// Checks the launch first. The traced build ([`crate::gpu::flash_trace`]) follows the same plan.
    pub fn plan(&self, launch: FlashLaunch) -> Result<FlashPlan, GpuError> {
        check(&launch)?;
        let FlashLaunch { shape, kv_stride, mask, scale } = launch;
        let d_pad = shape.d;
        let rows_total = shape.n_q * shape.group_size();
        // The subgroup kernel only pays unrolled, so it follows the unrolling choice.
        if let (None, Some(subgroup), true) = (self.forced.get(), &self.subgroup, self.is_unrolled()) {
            return Ok(subgroup_plan(subgroup, launch));
        }
        let tiles = self.tiles(d_pad).for_rows(d_pad, rows_total);
        let tile = (tiles.rows_per_tile(d_pad), tiles.keys_per_tile);
        let params = AttentionParams::new(shape, kv_stride, mask, scale, rows_total.div_ceil(tile.0));
        let rows = tiles.rows_per_invocation(d_pad);
        let constants = vec![
            ("D", d_pad),
            ("D4", d_pad / 4),
            ("BC", tiles.keys_per_tile),
            ("R", rows),
            ("STAGE_KV", u32::from(tiles.stage_kv)),
            ("Q_REGS", u32::from(queries_in_registers(d_pad, rows))),
        ];
        let form = if self.is_unrolled() { FlashForm::Unrolled } else { FlashForm::Loop };
        Ok(FlashPlan { form, params, constants, overrides: [("BR", tiles.rows_per_workgroup)], tile })
    }

    /// Builds the subgroup form for heads `d_pad` wide where launches keep the loops (CPU adapters in
    /// the browser, [`UNROLL_BY_DEFAULT`]), so that [`FlashAttention::prepare_fastest`] takes it from
    /// then on. Call after reading results back: a browser compiles at the first dispatch, while the
    /// page draws, and a launch submitted meanwhile waits for the compile.
    /// Heads wider than [`WARM_UP_MAX_HEAD_DIM`] are left as they are.
    pub fn warm_up(&self, ctx: &GpuContext, d_pad: u32) {
        let wanted = |s: &&SubgroupForm<FlashSubgroup>| {
            !self.is_unrolled() && d_pad <= WARM_UP_MAX_HEAD_DIM && check_width(d_pad) && !s.is_built(d_pad)
        };
        let Some(subgroup) = self.subgroup.as_ref().filter(wanted) else { return };
        subgroup.launcher().compile_now(ctx, subgroup.pipeline(&ctx.device, d_pad), &AttentionParams::IDLE);
    }

    /// Whether the subgroup form for heads `d_pad` wide is built, so that
    /// [`FlashAttention::prepare_fastest`] takes it.
    pub fn is_warm(&self, d_pad: u32) -> bool {
        self.subgroup.as_ref().is_some_and(|s| s.is_built(d_pad))
    }

    /// Prepares one launch as [`FlashAttention::prepare`] does, but in the subgroup form wherever its
    /// pipeline for the launch's head width is built ([`FlashAttention::warm_up`]): for a loaded
    /// model's passes, whose layers repeat one head width. The views that show the kernel's tiles or
    /// trace it keep the form [`FlashAttention::plan`] names.
    pub fn prepare_fastest(
        &self,
        ctx: &GpuContext,
        buffers: &FlashBuffers<'_>,
        launch: FlashLaunch,
    ) -> Result<Dispatch, GpuError> {
        let warm = self.subgroup.as_ref().filter(|s| self.forced.get().is_none() && s.is_built(launch.shape.d));
        match warm {
            Some(subgroup) if !self.f16_inputs.get() => {
                check(&launch)?;
                let plan = subgroup_plan(subgroup, launch);
                let pipeline = subgroup.pipeline(&ctx.device, launch.shape.d);
                subgroup.launcher().dispatch(ctx, pipeline, &plan.params, &buffers.bound())
            }
            _ => self.prepare(ctx, buffers, launch),
        }
    }

    /// Prepares one launch.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &FlashBuffers<'_>,
        launch: FlashLaunch,
    ) -> Result<Dispatch, GpuError> {
        if self.f16_inputs.get()
            && let (Ok(plan), Ok(coop)) = (self.coop_plan(launch), &self.coop)
        {
            let launcher = coop.launcher();
            let pipeline = launcher.pipelines().get_specialised(&ctx.device, &plan.constants, &plan.overrides);
            return launcher.dispatch(ctx, pipeline, &plan.params, &buffers.bound());
        }
        let plan = self.plan(launch)?;
        if let (FlashForm::Subgroup, Some(subgroup)) = (plan.form, &self.subgroup) {
            let launcher = subgroup.launcher();
            let pipeline = launcher.pipelines().get_specialised(&ctx.device, &plan.constants, &plan.overrides);
            return launcher.dispatch(ctx, pipeline, &plan.params, &buffers.bound());
        }
        let pipeline = self.launcher.pipelines().get_specialised(&ctx.device, &plan.constants, &plan.overrides);
        self.launcher.dispatch(ctx, pipeline, &plan.params, &buffers.bound())
    }
}

/// A launch in the subgroup form (checked by the caller).
fn subgroup_plan(subgroup: &SubgroupForm<FlashSubgroup>, launch: FlashLaunch) -> FlashPlan {
    let FlashLaunch { shape, kv_stride, mask, scale } = launch;
    let tile = subgroup.tile(shape.d);
    let rows_total = shape.n_q * shape.group_size();
    let params = AttentionParams::new(shape, kv_stride, mask, scale, rows_total.div_ceil(tile.0));
    let (constants, overrides) = subgroup.specialisation(shape.d);
    FlashPlan { form: FlashForm::Subgroup, params, constants, overrides, tile }
}

/// Whether any form takes heads `d_pad` wide (a multiple of 4 within the kernels' limit).
fn check_width(d_pad: u32) -> bool {
    d_pad.is_multiple_of(4) && kernels_take_head_dim(d_pad)
}

/// Why a launch cannot run on any form: the head width (a multiple of 4 within the kernels' limit)
/// and the K/V stride.
fn check(launch: &FlashLaunch) -> Result<(), GpuError> {
    let d_pad = launch.shape.d;
    if !check_width(d_pad) || launch.kv_stride < launch.shape.n_kv {
        return Err(GpuError::LimitExceeded(format!(
            "flash attention needs d a multiple of 4 up to {KERNEL_MAX_HEAD_DIM} (got {d_pad}) and kv_stride >= n_kv"
        )));
    }
    Ok(())
}

/// The forms of the forward kernel: `flash_attention.wgsl` with its loops as written or written out
/// in full ([`crate::gpu::shader_text::unroll_loops`]), `flash_attention_subgroup.wgsl` (CPU
/// adapters with subgroups, unrolled), or `flash_attention_coop.wgsl` (matrix units, f16 inputs, only
/// when asked for: [`FlashAttention::set_f16_inputs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashForm {
    Loop,
    Unrolled,
    Subgroup,
    Coop,
}

impl FlashForm {
    /// The form's name on the page.
    pub fn name(self) -> &'static str {
        match self {
            FlashForm::Loop => "loop",
            FlashForm::Unrolled => "unrolled",
            FlashForm::Subgroup => "subgroup",
            FlashForm::Coop => "coop",
        }
    }
}

/// One launch as [`FlashAttention::plan`] decided it.
pub struct FlashPlan {
    pub form: FlashForm,
    pub params: AttentionParams,
    /// The pipeline's compile-time constants and its override (`BR`).
    pub constants: Vec<Named>,
    pub overrides: [Named; 1],
    /// One workgroup's tile: ((query, head) rows, keys per step).
    pub tile: (u32, u32),
}
