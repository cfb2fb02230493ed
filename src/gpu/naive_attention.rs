//! Owner of `shaders/naive_attention.wgsl`: the three-pass baseline (scores, softmax, P·V) that stores
//! the whole n x n score matrix, for the benchmark and the lessons.

use bytemuck::{Pod, Zeroable};

use crate::attention::AttentionShape;
use crate::gpu::attention_io::QueryHeadParams;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};
use crate::model::Mask;

/// Keep in sync with `Params` in `shaders/naive_attention.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct NaiveParams {
    pub heads: QueryHeadParams,
    pub invocations: u32,
    pub _pad: [u32; 3],
}

const WORKGROUP_SIZE: u32 = 64;

/// Bytes of the score matrix, `[h_q, n_q, n_kv]` f32.
pub fn scores_bytes(shape: &AttentionShape) -> u64 {
    u64::from(shape.h_q) * u64::from(shape.n_q) * u64::from(shape.n_kv) * 4
}

/// Whether the score matrix fits one binding of this device; `Err(bytes needed)` when it does not.
pub fn fits(ctx: &GpuContext, shape: &AttentionShape) -> Result<(), u64> {
    let bytes = scores_bytes(shape);
    let max = ctx.limits.max_storage_buffer_binding_size.min(ctx.limits.max_buffer_size);
    // The scores pass also counts its invocations in a u32.
    if bytes > max || bytes / 4 > u64::from(u32::MAX) {
        return Err(bytes);
    }
    Ok(())
}

/// The `scores` entry point's launcher, and the pipelines of the other two passes (same bindings).
pub struct NaiveAttention {
    launcher: Launcher<Self>,
    softmax: PipelineCache,
    pv: PipelineCache,
}

impl Kernel for NaiveAttention {
    const NAME: &'static str = "naive_attention";
    const SOURCE: &'static str = include_str!("../../shaders/naive_attention.wgsl");
    const ENTRY_POINT: &'static str = "scores";
    const BINDINGS: &'static [Binding] = {
        use Binding::{ReadOnly, ReadWrite, Uniform};
        &[Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite, ReadWrite]
    };
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("flash_attention");
    type Params = NaiveParams;

    /// Each pass says how many invocations it runs.
    fn workgroups(p: &NaiveParams) -> Option<u64> {
        Some(u64::from(p.invocations.div_ceil(WORKGROUP_SIZE)))
    }
}

/// Q/O `[h_q, n_q, d_pad]`, K/V `[h_kv, n_kv, d_pad]`, scores `[h_q, n_q, n_kv]`, lse `[h_q, n_q]`.
pub struct NaiveBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub scores: &'a wgpu::Buffer,
    pub o: &'a wgpu::Buffer,
    pub lse: &'a wgpu::Buffer,
}

impl NaiveAttention {
    pub fn new(ctx: &GpuContext) -> Self {
        let launcher = Launcher::new(ctx);
        let softmax = launcher.pipelines_of(ctx, Self::SOURCE, "softmax");
        let pv = launcher.pipelines_of(ctx, Self::SOURCE, "pv");
        Self { launcher, softmax, pv }
    }

    /// The three launches, in order. `shape.d` must be padded to a multiple of 4.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &NaiveBuffers<'_>,
        shape: AttentionShape,
        mask: Mask,
        scale: f32,
    ) -> Result<[Dispatch; 3], GpuError> {
        fits(ctx, &shape).map_err(|bytes| {
            GpuError::LimitExceeded(format!(
                "the naive kernel's {} x {} score matrix needs {bytes} bytes",
                shape.n_q, shape.n_kv
            ))
        })?;
        let rows = shape.h_q * shape.n_q;
        let d4 = shape.d / 4;
        let heads = QueryHeadParams::new(shape, mask, scale);
        let overrides = [("D", shape.d), ("WG", WORKGROUP_SIZE)];
        let bound = [buffers.q, buffers.k, buffers.v, buffers.scores, buffers.o, buffers.lse];
        let launch = |cache: &PipelineCache, invocations: u32| {
            let params = NaiveParams { heads, invocations, _pad: [0; 3] };
            self.launcher.dispatch(ctx, cache.get(&ctx.device, &overrides), &params, &bound)
        };
        let scores = self.launcher.pipelines();
        Ok([launch(scores, rows * shape.n_kv)?, launch(&self.softmax, rows)?, launch(&self.pv, rows * d4)?])
    }
}
