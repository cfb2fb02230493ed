//! Owner of `shaders/qk_norm.wgsl`: RMSNorm of each query and key head of the fused Q/K/V
//! projection, in place (Qwen3's QK-norm).

use bytemuck::{Pod, Zeroable};

use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
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
    launcher: Launcher<Self>,
}

impl Kernel for QkNorm {
    const NAME: &'static str = "qk_norm";
    const SOURCE: &'static str = include_str!("../../shaders/qk_norm.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = QkNormParams;

    /// One invocation per (token, query or key head).
    fn workgroups(p: &QkNormParams) -> Option<u64> {
        Some((u64::from(p.tokens) * u64::from(p.h_q + p.h_kv)).div_ceil(u64::from(WORKGROUP)))
    }
}

impl QkNorm {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
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
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[weight, qkv])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_32_bytes() {
        assert_eq!(size_of::<super::QkNormParams>(), 32);
    }
}
