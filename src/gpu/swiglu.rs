//! Owner of `shaders/swiglu.wgsl`: the MLP's gate, `silu(gate) * up` (or Gemma's GELU in place of
//! silu), from the fused gate/up matmul.

use bytemuck::{Pod, Zeroable};

use crate::cpu::swiglu::Gate;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};

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
    launcher: Launcher<Self>,
}

impl Kernel for Swiglu {
    const NAME: &'static str = "swiglu";
    const SOURCE: &'static str = include_str!("../../shaders/swiglu.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = SwigluParams;

    /// One invocation per vec4 of the output.
    fn workgroups(p: &SwigluParams) -> Option<u64> {
        Some((u64::from(p.rows) * u64::from(p.ffn4)).div_ceil(u64::from(WORKGROUP)))
    }
}

impl Swiglu {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
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
        let params = SwigluParams { rows, ffn4: ffn / 4, gelu, _pad: 0 };
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[gate_up, out])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_16_bytes() {
        assert_eq!(size_of::<super::SwigluParams>(), 16);
    }
}
