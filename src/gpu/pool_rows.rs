//! Owner of `shaders/pool_rows.wgsl`: pooled heatmap cells from the row softmax's per-row key blocks
//! (`RowOutput::Blocks`), the second half of pooling a long head in two short passes.

use bytemuck::{Pod, Zeroable};

use crate::attention::pooled::PooledMap;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};

/// Keep in sync with `Params` in `shaders/pool_rows.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct PoolRowsParams {
    pub n_q: u32,
    pub n_kv: u32,
    pub h_q: u32,
    pub out_rows: u32,
    pub cols: u32,
    pub pool: u32,
    pub first: u32,
    pub count: u32,
    pub q0: u32,
    pub slice_queries: u32,
    pub _pad: [u32; 2],
}

const WORKGROUP_SIZE: u32 = 64;

pub struct PoolRows {
    launcher: Launcher<Self>,
}

impl Kernel for PoolRows {
    const NAME: &'static str = "pool_rows";
    const SOURCE: &'static str = include_str!("../../shaders/pool_rows.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = PoolRowsParams;

    /// One invocation per pooled cell.
    fn workgroups(p: &PoolRowsParams) -> Option<u64> {
        let cells = u64::from(p.h_q) * u64::from(p.count) * u64::from(p.cols);
        Some(cells.div_ceil(u64::from(WORKGROUP_SIZE)))
    }
}

/// The row blocks (`[h_q, queries, cols]`) in and the pooled cells (`[h_q, count, cols]`) out.
pub struct PoolRowsBuffers<'a> {
    pub row_blocks: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
}

impl PoolRows {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
    }

    /// One launch pooling `h_q` heads to the wanted rows of `map`, from the row blocks of the queries
    /// those rows cover ([`PooledMap::queries`]), each already pooled to `map.cols` blocks of `n_kv` keys.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &PoolRowsBuffers<'_>,
        h_q: u32,
        n_kv: u32,
        map: &PooledMap,
    ) -> Result<Dispatch, GpuError> {
        let (q0, q1) = map.queries();
        let params = PoolRowsParams {
            n_q: map.n_q,
            n_kv,
            h_q,
            out_rows: map.rows,
            cols: map.cols,
            pool: map.pool.to_gpu(),
            first: map.first,
            count: map.count,
            q0,
            slice_queries: q1 - q0,
            _pad: [0; 2],
        };
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP_SIZE)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[buffers.row_blocks, buffers.out])
    }
}
