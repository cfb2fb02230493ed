//! Owner of `shaders/swiglu.wgsl`: the MLP's gate, `silu(gate) * up` (or Gemma's GELU in place of
//! silu), from the fused gate/up matmul.

use bytemuck::{Pod, Zeroable};

use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};
use crate::lm::model_config::Gate;

/// Keep in sync with `Params` in `shaders/swiglu.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct SwigluParams {
    pub rows: u32,
    pub ffn4: u32,
    /// 1: GELU's tanh form; 0: silu.
    pub gelu: u32,
    pub _pad: u32,
}

/// Invocations per workgroup (the shader's `WG`).
const WORKGROUP: u32 = 64;

pub struct Swiglu {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    max_per_dim: u32,
}

impl Swiglu {
    pub fn new(ctx: &GpuContext) -> Self {
        let layout = launch::bind_group_layout(
            &ctx.device,
            "swiglu",
            &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite],
        );
        let source = include_str!("../../shaders/swiglu.wgsl");
        let pipelines = PipelineCache::new(&ctx.device, "swiglu", source, "main", &layout);
        Self { layout, pipelines, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension }
    }

    /// Prepares `out [rows, ffn] = act(gate) * up` from `gate_up [rows, 2 ffn]` (each row's gate
    /// values, then its up values); `ffn` a multiple of 4.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        gate_up: &wgpu::Buffer,
        out: &wgpu::Buffer,
        rows: u32,
        ffn: u32,
        act: Gate,
    ) -> Result<Dispatch, GpuError> {
        if rows == 0 || ffn == 0 || !ffn.is_multiple_of(4) {
            return Err(GpuError::InvalidInput(format!(
                "swiglu needs rows and an MLP width that is a multiple of 4 (got {rows} x {ffn})"
            )));
        }
        let gelu = u32::from(act == Gate::GeluTanh);
        let params = ctx.uniform_from("swiglu params", &SwigluParams { rows, ffn4: ffn / 4, gelu, _pad: 0 });
        let pipeline = self.pipelines.get(&ctx.device, &[("WG", WORKGROUP)]);
        let bind_group = launch::bind_buffers(&ctx.device, &self.layout, "swiglu", &[&params, gate_up, out]);
        let workgroups = launch::workgroups_for(u64::from(rows) * u64::from(ffn / 4), WORKGROUP)?;
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_16_bytes() {
        assert_eq!(size_of::<super::SwigluParams>(), 16);
    }
}
