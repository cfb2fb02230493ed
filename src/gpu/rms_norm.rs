//! Owner of `shaders/rms_norm.wgsl`: RMSNorm of rows, times a weight (plus Gemma's offset), written
//! out or added to it.

use bytemuck::{Pod, Zeroable};

use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
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
    launcher: Launcher<Self>,
}

impl Kernel for RmsNorm {
    const NAME: &'static str = "rms_norm";
    const SOURCE: &'static str = include_str!("../../shaders/rms_norm.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = NormParams;

    /// One invocation per row.
    fn workgroups(p: &NormParams) -> Option<u64> {
        Some(u64::from(p.rows).div_ceil(u64::from(WORKGROUP)))
    }
}

impl RmsNorm {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
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
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[buffers.x, buffers.weight, buffers.out])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_32_bytes() {
        assert_eq!(size_of::<super::NormParams>(), 32);
    }
}
