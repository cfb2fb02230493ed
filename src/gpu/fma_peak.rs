//! Owner of `shaders/fma_peak.wgsl`: the adapter's measured WGSL FMA throughput, the yardstick that
//! turns the benchmark's GFLOP/s into a fraction of what this device can do.

use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};

/// Independent vec4 accumulators per invocation. Keep in sync with `CHAINS` in `shaders/fma_peak.wgsl`.
pub const CHAINS: u64 = 8;
const WORKGROUP_SIZE: u32 = 64;

pub struct FmaPeak {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    max_per_dim: u32,
}

/// One prepared measurement and the flops it performs.
pub struct FmaLaunch {
    pub dispatch: Dispatch,
    pub flops: u64,
    /// Keeps the output buffer alive while the launch is in use.
    pub _out: wgpu::Buffer,
}

impl FmaPeak {
    pub fn new(ctx: &GpuContext) -> Self {
        let layout = launch::bind_group_layout(&ctx.device, "fma_peak", &[Binding::ReadWrite]);
        let pipelines =
            PipelineCache::new(&ctx.device, "fma_peak", include_str!("../../shaders/fma_peak.wgsl"), "main", &layout);
        Self { layout, pipelines, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension }
    }

    /// A launch of `workgroups` x 64 invocations doing `iters` rounds each.
    pub fn prepare(&self, ctx: &GpuContext, workgroups: u32, iters: u32) -> Result<FmaLaunch, GpuError> {
        let invocations = u64::from(workgroups) * u64::from(WORKGROUP_SIZE);
        let out = ctx.storage_output("fma_peak out", invocations * 4)?;
        let pipeline = self.pipelines.get(&ctx.device, &[("WG", WORKGROUP_SIZE), ("ITERS", iters)]);
        let bind_group = launch::bind_buffers(&ctx.device, &self.layout, "fma_peak", &[&out]);
        let dispatch = Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) };
        Ok(FmaLaunch { dispatch, flops: flops(invocations, iters), _out: out })
    }
}

/// 2 flops per fma, 4 lanes per vec4, `CHAINS` fmas per round.
pub fn flops(invocations: u64, iters: u32) -> u64 {
    invocations * u64::from(iters) * CHAINS * 4 * 2
}

#[cfg(test)]
mod tests {
    #[test]
    fn flops_by_hand() {
        // 64 invocations x 10 rounds x 8 chains x 4 lanes x 2 flops.
        assert_eq!(super::flops(64, 10), 40960);
    }
}
