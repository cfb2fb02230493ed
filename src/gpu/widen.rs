//! Owner of `shaders/widen.wgsl`: f16 or bf16 values, uploaded as stored, written to an f32 buffer.

use bytemuck::{Pod, Zeroable};

use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};

/// Keep in sync with `Params` in `shaders/widen.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct WidenParams {
    pub count: u32,
    pub dst_offset: u32,
    pub bf16: u32,
    pub _pad: u32,
}

/// Invocations (pairs of values) per workgroup (the shader's `WG`).
const WORKGROUP: u32 = 64;

/// The 16-bit formats the kernel unpacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    F16,
    Bf16,
}

pub struct Widen {
    launcher: Launcher<Self>,
}

impl Kernel for Widen {
    const NAME: &'static str = "widen";
    const SOURCE: &'static str = include_str!("../../shaders/widen.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = WidenParams;

    /// One invocation per pair of values.
    fn workgroups(p: &WidenParams) -> Option<u64> {
        Some(u64::from(p.count).div_ceil(2).div_ceil(u64::from(WORKGROUP)))
    }
}

impl Widen {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
    }

    /// Prepares `dst[dst_offset..dst_offset + count] = widen(src[..count])`; `src` holds the values
    /// as stored (2 bytes each, little-endian).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        src: &wgpu::Buffer,
        dst: &wgpu::Buffer,
        (count, dst_offset): (u32, u32),
        half: Half,
    ) -> Result<Dispatch, GpuError> {
        let fits = |buffer: &wgpu::Buffer, bytes: u64| bytes <= buffer.size();
        if count == 0 || !fits(src, 2 * u64::from(count)) || !fits(dst, 4 * (u64::from(dst_offset) + u64::from(count)))
        {
            return Err(GpuError::InvalidInput(format!(
                "widen: {count} values at {dst_offset} do not fit buffers of {} and {} bytes",
                src.size(),
                dst.size()
            )));
        }
        let params = WidenParams { count, dst_offset, bf16: u32::from(half == Half::Bf16), _pad: 0 };
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[src, dst])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_16_bytes() {
        assert_eq!(size_of::<super::WidenParams>(), 16);
    }
}
