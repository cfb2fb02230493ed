//! Owner of `shaders/rms_norm.wgsl`: RMSNorm of rows, times a weight (plus Gemma's offset), written
//! out or added to it.

use bytemuck::{Pod, Zeroable};

use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};

/// Keep in sync with `Params` in `shaders/rms_norm.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct NormParams {
    pub rows: u32,
    pub width4: u32,
    pub eps: f32,
    pub offset: f32,
    pub accumulate: u32,
    pub _pad: [u32; 3],
}

/// A norm's epsilon, and what is added to its weight (Gemma stores `w` and scales by `1 + w`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NormConstants {
    pub eps: f32,
    pub offset: f32,
}

/// Invocations (rows) per workgroup (the shader's `WG`).
const WORKGROUP: u32 = 64;

/// x and out `[rows, width]`, weight `[width]`.
pub struct NormBuffers<'a> {
    pub x: &'a wgpu::Buffer,
    pub weight: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
    /// Add the normed rows to `out` (Gemma 3's output norms join the residual stream) rather than
    /// write them.
    pub accumulate: bool,
}

pub struct RmsNorm {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    max_per_dim: u32,
}

impl RmsNorm {
    pub fn new(ctx: &GpuContext) -> Self {
        let layout = launch::bind_group_layout(
            &ctx.device,
            "rms_norm",
            &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite],
        );
        let source = include_str!("../../shaders/rms_norm.wgsl");
        let pipelines = PipelineCache::new(&ctx.device, "rms_norm", source, "main", &layout);
        Self { layout, pipelines, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension }
    }

    /// Prepares the norm of `rows` rows of `width` floats (a multiple of 4).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &NormBuffers<'_>,
        rows: u32,
        width: u32,
        constants: NormConstants,
    ) -> Result<Dispatch, GpuError> {
        if rows == 0 || width == 0 || !width.is_multiple_of(4) {
            return Err(GpuError::InvalidInput(format!(
                "rms_norm needs rows and a width that is a multiple of 4 (got {rows} x {width})"
            )));
        }
        let NormConstants { eps, offset } = constants;
        let accumulate = u32::from(buffers.accumulate);
        let params = NormParams { rows, width4: width / 4, eps, offset, accumulate, _pad: [0; 3] };
        let params = ctx.uniform_from("rms_norm params", &params);
        let pipeline = self.pipelines.get(&ctx.device, &[("WG", WORKGROUP)]);
        let bind_group = launch::bind_buffers(
            &ctx.device,
            &self.layout,
            "rms_norm",
            &[&params, buffers.x, buffers.weight, buffers.out],
        );
        let workgroups = launch::workgroups_for(u64::from(rows), WORKGROUP)?;
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_32_bytes() {
        assert_eq!(size_of::<super::NormParams>(), 32);
    }
}
