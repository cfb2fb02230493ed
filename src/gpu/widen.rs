//! Owner of `shaders/widen.wgsl`: f16 or bf16 values, uploaded as stored, written to an f32 buffer.

use bytemuck::{Pod, Zeroable};

use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
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
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    max_per_dim: u32,
}

impl Widen {
    pub fn new(ctx: &GpuContext) -> Self {
        let layout =
            launch::bind_group_layout(&ctx.device, "widen", &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite]);
        let source = include_str!("../../shaders/widen.wgsl");
        let pipelines = PipelineCache::new(&ctx.device, "widen", source, "main", &layout);
        Self { layout, pipelines, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension }
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
        let params = ctx.uniform_from("widen params", &params);
        let pipeline = self.pipelines.get(&ctx.device, &[("WG", WORKGROUP)]);
        let bind_group = launch::bind_buffers(&ctx.device, &self.layout, "widen", &[&params, src, dst]);
        let workgroups = launch::workgroups_for(u64::from(count).div_ceil(2), WORKGROUP)?;
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_16_bytes() {
        assert_eq!(size_of::<super::WidenParams>(), 16);
    }
}
