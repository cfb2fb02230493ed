//! One kernel, one [`Kernel`] implementation: what a shader is (its name, WGSL text, entry point,
//! bindings, params struct, grid and CPU twin), written once beside its owner module, and one generic
//! [`Launcher`] that turns a launch's params and buffers into a [`Dispatch`].
//!
//! The name is the unit (as in vello): `shaders/<NAME>.wgsl`, `src/gpu/<NAME>.rs` and the CPU twin
//! `src/cpu/<NAME>.rs` share it, and [`crate::gpu::kernels::KERNELS`] lists every kernel once
//! (`tests/kernel_names.rs` checks the files, and the bindings against the WGSL).

use std::marker::PhantomData;

use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};

/// A compute shader as its owner module declares it.
pub trait Kernel {
    /// The shader file's stem, its owner module's name and its CPU twin's.
    const NAME: &'static str;
    /// The WGSL text as written (`include_str!("../../shaders/<NAME>.wgsl")`); includes are pasted in
    /// by the [`PipelineCache`].
    const SOURCE: &'static str;
    const ENTRY_POINT: &'static str = "main";
    /// The `@group(0)` bindings in `@binding` order, as the entry point uses them: the params uniform
    /// first when there is one (keep in sync with the shader's declarations).
    const BINDINGS: &'static [Binding];
    /// Where the same results are computed on the CPU.
    const CPU_TWIN: CpuTwin;
    /// The uniform at binding 0: `#[repr(C)]`, `Pod`, and kept in sync with the shader's `Params`
    /// (`()` for a kernel without one).
    type Params: bytemuck::Pod;

    /// Workgroups of a launch with these params, before [`launch::grid`] folds them into a 2D grid.
    /// `None` where the grid also follows a block chosen per launch (a compile-time constant), which
    /// the owner then passes to [`Launcher::dispatch_workgroups`].
    fn workgroups(params: &Self::Params) -> Option<u64>;
}

/// A kernel's CPU twin: the function tests compare the GPU with, and the CPU tier runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuTwin {
    /// `src/cpu/<NAME>.rs`, a function of the kernel's name.
    Named,
    /// A faster form of another kernel (same bindings and results), checked against that one's twin.
    FormOf(&'static str),
    /// None, on purpose, and why.
    Skipped(&'static str),
}

/// What [`crate::gpu::kernels::KERNELS`] records of each kernel.
#[derive(Clone, Copy, Debug)]
pub struct KernelInfo {
    pub name: &'static str,
    pub source: &'static str,
    pub entry_point: &'static str,
    pub bindings: &'static [Binding],
    pub cpu_twin: CpuTwin,
}

impl KernelInfo {
    pub const fn of<K: Kernel>() -> Self {
        Self {
            name: K::NAME,
            source: K::SOURCE,
            entry_point: K::ENTRY_POINT,
            bindings: K::BINDINGS,
            cpu_twin: K::CPU_TWIN,
        }
    }
}

/// A kernel's bind-group layout and pipelines, and the one place its launches are put together.
pub struct Launcher<K: Kernel> {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    max_per_dim: u32,
    kernel: PhantomData<fn() -> K>,
}

impl<K: Kernel> Launcher<K> {
    /// The kernel as written.
    pub fn new(ctx: &GpuContext) -> Self {
        Self::from_source(ctx, K::SOURCE)
    }

    /// The kernel from its WGSL text prepared first ([`crate::gpu::shader_text::with_weights`],
    /// [`crate::gpu::shader_text::for_subgroups`]).
    pub fn from_source(ctx: &GpuContext, source: &str) -> Self {
        // The layout is the Rust half of the shader's `@binding` declarations: the pipelines are built
        // against it and every launch's bind group follows it, so the two always agree.
        let layout = launch::bind_group_layout(&ctx.device, K::NAME, K::BINDINGS);
        let pipelines = PipelineCache::new(&ctx.device, K::NAME, source, K::ENTRY_POINT, &layout);
        Self { layout, pipelines, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension, kernel: PhantomData }
    }

    /// The entry point's pipelines, one per set of constants.
    pub fn pipelines(&self) -> &PipelineCache {
        &self.pipelines
    }

    /// Pipelines of another entry point (or text) over the same bindings and params.
    pub fn pipelines_of(&self, ctx: &GpuContext, source: &str, entry_point: &'static str) -> PipelineCache {
        PipelineCache::new(&ctx.device, K::NAME, source, entry_point, &self.layout)
    }

    /// A launch of `pipeline` (one of this launcher's) with its grid from the params ([`Kernel::workgroups`]).
    /// `buffers` are bound from binding 1 on, after the params' uniform (from 0 without one).
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        pipeline: wgpu::ComputePipeline,
        params: &K::Params,
        buffers: &[&wgpu::Buffer],
    ) -> Result<Dispatch, GpuError> {
        let workgroups = K::workgroups(params)
            .ok_or_else(|| GpuError::InvalidInput(format!("{}'s grid is chosen per launch", K::NAME)))?;
        self.dispatch_workgroups(ctx, pipeline, params, buffers, workgroups)
    }

    /// A launch of `pipeline` over `workgroups` workgroups (folded into a 2D grid where there are many).
    pub fn dispatch_workgroups(
        &self,
        ctx: &GpuContext,
        pipeline: wgpu::ComputePipeline,
        params: &K::Params,
        buffers: &[&wgpu::Buffer],
        workgroups: u64,
    ) -> Result<Dispatch, GpuError> {
        // Past 65535 workgroups a dimension is full (WebGPU's default limit): `grid` folds them into
        // rows of a 2D grid, which the shaders unfold (`shaders/include/grid.wgsl`).
        let workgroups = u32::try_from(workgroups)
            .map_err(|_| GpuError::LimitExceeded(format!("{workgroups} workgroups of {}", K::NAME)))?;
        let bind_group = self.bind_group(ctx, params, buffers)?;
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) })
    }

    /// Has a browser compile `pipeline` now rather than at its first real launch (browsers compile
    /// at a pipeline's first dispatch, not at its creation): one workgroup with `idle` params, which
    /// give it nothing to do, over 16-byte buffers. Failures are dropped: without the warm-up the
    /// pipeline compiles at its first launch instead.
    pub fn compile_now(&self, ctx: &GpuContext, pipeline: wgpu::ComputePipeline, idle: &K::Params) {
        let buffers = K::BINDINGS.iter().filter(|b| **b != Binding::Uniform).map(|_| ctx.storage_output("warm-up", 16));
        let Ok(buffers) = buffers.collect::<Result<Vec<_>, _>>() else { return };
        let Ok(dispatch) = self.dispatch_workgroups(ctx, pipeline, idle, &buffers.iter().collect::<Vec<_>>(), 1) else {
            return;
        };
        Dispatch::submit_all(ctx, &[&dispatch]);
    }

    /// The params' uniform (when the kernel has one) and `buffers`, bound in [`Kernel::BINDINGS`]' order.
    fn bind_group(
        &self,
        ctx: &GpuContext,
        params: &K::Params,
        buffers: &[&wgpu::Buffer],
    ) -> Result<wgpu::BindGroup, GpuError> {
        // A fresh uniform per launch: launches recorded together (a benchmark's repetitions, a
        // layer's steps) each keep their own params.
        let uniform = (K::BINDINGS.first() == Some(&Binding::Uniform))
            .then(|| ctx.uniform_from(&format!("{} params", K::NAME), params));
        let all: Vec<&wgpu::Buffer> = uniform.iter().chain(buffers.iter().copied()).collect();
        if all.len() != K::BINDINGS.len() {
            return Err(GpuError::InvalidInput(format!(
                "{} binds {} buffers, got {}",
                K::NAME,
                K::BINDINGS.len(),
                all.len()
            )));
        }
        Ok(launch::bind_buffers(&ctx.device, &self.layout, K::NAME, &all))
    }
}
