//! Owner of `shaders/qk_norm.wgsl`: RMSNorm of each query and key head of the fused Q/K/V
//! projection, in place (Qwen3's QK-norm).

use bytemuck::{Pod, Zeroable};

use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::rms_norm::NormConstants;
use crate::gpu::rope::Heads;
use crate::gpu::{GpuContext, GpuError};

/// Keep in sync with `Params` in `shaders/qk_norm.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct QkNormParams {
    pub tokens: u32,
    pub h_q: u32,
    pub h_kv: u32,
    pub d4: u32,
    pub eps: f32,
    pub offset: f32,
    pub _pad: [u32; 2],
}

/// Invocations (heads) per workgroup (the shader's `WG`).
const WORKGROUP: u32 = 64;

pub struct QkNorm {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    max_per_dim: u32,
}

impl QkNorm {
    pub fn new(ctx: &GpuContext) -> Self {
        let layout = launch::bind_group_layout(
            &ctx.device,
            "qk_norm",
            &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite],
        );
        let source = include_str!("../../shaders/qk_norm.wgsl");
        let pipelines = PipelineCache::new(&ctx.device, "qk_norm", source, "main", &layout);
        Self { layout, pipelines, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension }
    }

    /// Prepares the norm of every query and key head of `qkv` (`[tokens, (h_q + 2 h_kv) d]`) with
    /// `weight` (`[2, d]`: the query heads' weight, then the key heads').
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        qkv: &wgpu::Buffer,
        weight: &wgpu::Buffer,
        heads: Heads,
        constants: NormConstants,
    ) -> Result<Dispatch, GpuError> {
        heads.check()?;
        let NormConstants { eps, offset } = constants;
        let (tokens, h_q, h_kv, d4) = (heads.tokens, heads.h_q, heads.h_kv, heads.d / 4);
        let params = QkNormParams { tokens, h_q, h_kv, d4, eps, offset, _pad: [0; 2] };
        let params = ctx.uniform_from("qk_norm params", &params);
        let pipeline = self.pipelines.get(&ctx.device, &[("WG", WORKGROUP)]);
        let bind_group = launch::bind_buffers(&ctx.device, &self.layout, "qk_norm", &[&params, weight, qkv]);
        let invocations = u64::from(heads.tokens) * u64::from(heads.h_q + heads.h_kv);
        let workgroups = launch::workgroups_for(invocations, WORKGROUP)?;
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_32_bytes() {
        assert_eq!(size_of::<super::QkNormParams>(), 32);
    }
}
