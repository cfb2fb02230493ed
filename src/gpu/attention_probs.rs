//! Owner of `shaders/attention_probs.wgsl`: exact probabilities of a region, or pooled whole heads,
//! recomputed from Q, K and the forward pass's log-sum-exp.

use bytemuck::{Pod, Zeroable};

use crate::attention::AttentionShape;
use crate::attention::pooled::Pool;
use crate::gpu::attention_io::QueryHeadParams;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};
use crate::model::Mask;

/// Keep in sync with `Params` in `shaders/attention_probs.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct ProbsParams {
    pub heads: QueryHeadParams,
    pub row0: u32,
    pub rows: u32,
    pub col0: u32,
    pub cols: u32,
    pub row_tiles: u32,
    pub col_tiles: u32,
    pub pool: u32,
    pub _pad: u32,
}

/// Output rows per workgroup (`WG`) and columns per workgroup of `region` (`COLS`).
const ROWS_PER_WORKGROUP: u32 = 64;
const COLS_PER_WORKGROUP: u32 = 64;

/// Which output: a window of exact probabilities, or pooled blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbsOutput {
    /// Rows `row0..row0+rows`, keys `col0..col0+cols`.
    Region {
        row0: u32,
        rows: u32,
        col0: u32,
        cols: u32,
    },
    Pooled {
        out_rows: u32,
        out_cols: u32,
        pool: Pool,
    },
}

impl ProbsOutput {
    /// Output `(rows, cols)` per head.
    pub fn size(&self) -> (u32, u32) {
        match *self {
            ProbsOutput::Region { rows, cols, .. } => (rows, cols),
            ProbsOutput::Pooled { out_rows, out_cols, .. } => (out_rows, out_cols),
        }
    }
}

/// The `region` entry point's launcher, and the `pooled` entry point's pipelines (same bindings).
pub struct AttentionProbs {
    launcher: Launcher<Self>,
    pooled: PipelineCache,
}

impl Kernel for AttentionProbs {
    const NAME: &'static str = "attention_probs";
    const SOURCE: &'static str = include_str!("../../shaders/attention_probs.wgsl");
    const ENTRY_POINT: &'static str = "region";
    const BINDINGS: &'static [Binding] =
        &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("row_softmax");
    type Params = ProbsParams;

    /// One workgroup per tile of output rows and columns, per query head.
    fn workgroups(p: &ProbsParams) -> Option<u64> {
        Some(u64::from(p.row_tiles) * u64::from(p.col_tiles) * u64::from(p.heads.h_q))
    }
}

/// Q `[h_q, n_q, d_pad]`, K `[h_kv, n_kv, d_pad]`, lse `[h_q, n_q]`, out `[h_q, rows, cols]`.
pub struct ProbsBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub lse: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
}

impl AttentionProbs {
    pub fn new(ctx: &GpuContext) -> Self {
        let launcher = Launcher::new(ctx);
        let pooled = launcher.pipelines_of(ctx, Self::SOURCE, "pooled");
        Self { launcher, pooled }
    }

    /// Prepares one launch; `shape.d` must be padded to a multiple of 4 and the region inside the shape.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &ProbsBuffers<'_>,
        shape: AttentionShape,
        mask: Mask,
        scale: f32,
        output: ProbsOutput,
    ) -> Result<Dispatch, GpuError> {
        let (rows, cols) = output.size();
        if rows == 0 || cols == 0 {
            return Err(GpuError::LimitExceeded("an empty probability region".into()));
        }
        let (row0, col0, pool, col_tiles) = match output {
            ProbsOutput::Region { row0, col0, .. } => (row0, col0, 0, cols.div_ceil(COLS_PER_WORKGROUP)),
            ProbsOutput::Pooled { pool, out_cols, .. } => (0, 0, pool.to_gpu(), out_cols),
        };
        let row_tiles = rows.div_ceil(ROWS_PER_WORKGROUP);
        let params = ProbsParams {
            heads: QueryHeadParams::new(shape, mask, scale),
            row0,
            rows,
            col0,
            cols,
            row_tiles,
            col_tiles,
            pool,
            _pad: 0,
        };
        let overrides = [("D", shape.d), ("WG", ROWS_PER_WORKGROUP), ("COLS", COLS_PER_WORKGROUP)];
        let pipeline = match output {
            ProbsOutput::Region { .. } => self.launcher.pipelines().get(&ctx.device, &overrides),
            ProbsOutput::Pooled { .. } => self.pooled.get(&ctx.device, &overrides[..2]),
        };
        self.launcher.dispatch(ctx, pipeline, &params, &[buffers.q, buffers.k, buffers.lse, buffers.out])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_16_byte_aligned() {
        assert_eq!(size_of::<super::ProbsParams>(), 64);
    }
}
