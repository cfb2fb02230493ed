//! Owner of `shaders/fma_peak.wgsl`: the adapter's measured WGSL FMA throughput, the yardstick that
//! turns the benchmark's GFLOP/s into a fraction of what this device can do.

use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};

/// Independent vec4 accumulators per invocation. Keep in sync with `CHAINS` in `shaders/fma_peak.wgsl`.
pub const CHAINS: u64 = 8;
const WORKGROUP_SIZE: u32 = 64;

pub struct FmaPeak {
    launcher: Launcher<Self>,
}

impl Kernel for FmaPeak {
    const NAME: &'static str = "fma_peak";
    const SOURCE: &'static str = include_str!("../../shaders/fma_peak.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Skipped("a throughput probe: its output only keeps the work alive");
    /// None: the rounds are an override constant, the size is the grid.
    type Params = ();

    /// Chosen per measurement.
    fn workgroups(_: &()) -> Option<u64> {
        None
    }
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
        Self { launcher: Launcher::new(ctx) }
    }

    /// A launch of `workgroups` x 64 invocations doing `iters` rounds each.
    pub fn prepare(&self, ctx: &GpuContext, workgroups: u32, iters: u32) -> Result<FmaLaunch, GpuError> {
        let invocations = u64::from(workgroups) * u64::from(WORKGROUP_SIZE);
        let out = ctx.storage_output("fma_peak out", invocations * 4)?;
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP_SIZE), ("ITERS", iters)]);
        let dispatch = self.launcher.dispatch_workgroups(ctx, pipeline, &(), &[&out], workgroups.into())?;
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
