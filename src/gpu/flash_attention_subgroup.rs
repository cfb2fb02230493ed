//! Owner of `shaders/flash_attention_subgroup.wgsl`: the tiled forward for CPU-class adapters, where
//! the lanes of a subgroup share K/V loads by shuffling them (see the shader's header for why).
//! Same buffers, parameters and results as `shaders/flash_attention.wgsl`, whose owner chooses this
//! kernel where it pays (so this module imports only what both share, never its chooser).

use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_io::{FLASH_BINDINGS, FlashBuffers, FlashLaunch};
use crate::gpu::flash_tiles::cpu_rows_per_invocation;
use crate::gpu::launch::{self, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError, shader_text};

/// The pipelines, one per (head width, subgroup size).
pub struct FlashSubgroup {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    subgroup_size: u32,
    max_workgroups: u32,
}

impl FlashSubgroup {
    /// `None` unless the device has subgroups of one fixed size (the shader's `BC`, keys per step).
    pub fn new(ctx: &GpuContext) -> Option<Self> {
        let subgroup_size = ctx.subgroup_size.filter(|&s| (4..=64).contains(&s))?;
        let layout = launch::bind_group_layout(&ctx.device, "flash_attention_subgroup", &FLASH_BINDINGS);
        let source = shader_text::for_subgroups(include_str!("../../shaders/flash_attention_subgroup.wgsl"));
        let pipelines = PipelineCache::new(&ctx.device, "flash_attention_subgroup", &source, "main", &layout);
        // Its point is registers shared across lanes, which only unrolled code keeps in registers.
        pipelines.set_unrolled(true);
        Some(Self { layout, pipelines, subgroup_size, max_workgroups: ctx.limits.max_compute_workgroups_per_dimension })
    }

    /// The tile one workgroup works on: (rows, keys): one subgroup of invocations with several rows
    /// each, and one key per lane at every step.
    pub fn tile(&self, d_pad: u32) -> (u32, u32) {
        (self.subgroup_size * cpu_rows_per_invocation(d_pad), self.subgroup_size)
    }

    /// Prepares one launch.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &FlashBuffers<'_>,
        launch: FlashLaunch,
    ) -> Result<Dispatch, GpuError> {
        let FlashLaunch { shape, kv_stride, mask, scale } = launch;
        let d_pad = shape.d;
        let rows = cpu_rows_per_invocation(d_pad);
        // One subgroup per workgroup: the smallest row tile, so the key range around a causal
        // diagonal or a sliding window stays tight.
        let invocations = self.subgroup_size;
        let rows_total = shape.n_q * shape.group_size();
        let tiles_per_kv_head = rows_total.div_ceil(self.tile(d_pad).0);
        let params = ctx.uniform_from(
            "flash_attention_subgroup params",
            &AttentionParams::new(shape, kv_stride, mask, scale, tiles_per_kv_head),
        );
        let constants = [("D", d_pad), ("D4", d_pad / 4), ("R", rows), ("BC", self.subgroup_size)];
        let pipeline = self.pipelines.get_specialised(&ctx.device, &constants, &[("BR", invocations)]);
        let bind_group = launch::bind_buffers(
            &ctx.device,
            &self.layout,
            "flash_attention_subgroup",
            &[&params, buffers.q, buffers.k, buffers.v, buffers.o, buffers.lse],
        );
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(tiles_per_kv_head * shape.h_kv, self.max_workgroups) })
    }
}
