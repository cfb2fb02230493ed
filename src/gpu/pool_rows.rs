//! Owner of `shaders/pool_rows.wgsl`: pooled heatmap cells from the row softmax's per-row key blocks
//! (`RowOutput::Blocks`), the second half of pooling a long head in two short passes.

use bytemuck::{Pod, Zeroable};

use crate::attention::pooled::PooledMap;
use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};

/// Keep in sync with `Params` in `shaders/pool_rows.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
struct PoolRowsParams {
    n_q: u32,
    n_kv: u32,
    h_q: u32,
    out_rows: u32,
    cols: u32,
    pool: u32,
    first: u32,
    count: u32,
    q0: u32,
    slice_queries: u32,
    _pad: [u32; 2],
}

const WORKGROUP_SIZE: u32 = 64;

pub struct PoolRows {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    max_per_dim: u32,
}

/// The row blocks (`[h_q, queries, cols]`) in and the pooled cells (`[h_q, count, cols]`) out.
pub struct PoolRowsBuffers<'a> {
    pub row_blocks: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
}

impl PoolRows {
    pub fn new(ctx: &GpuContext) -> Self {
        let layout = launch::bind_group_layout(
            &ctx.device,
            "pool_rows",
            &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite],
        );
        let pipelines =
            PipelineCache::new(&ctx.device, "pool_rows", include_str!("../../shaders/pool_rows.wgsl"), "main", &layout);
        Self { layout, pipelines, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension }
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
        let cells = u64::from(h_q) * u64::from(map.count) * u64::from(map.cols);
        let workgroups = u32::try_from(cells.div_ceil(u64::from(WORKGROUP_SIZE)))
            .map_err(|_| GpuError::LimitExceeded(format!("{cells} pooled cells")))?;
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
        let params = ctx.uniform_from("pool_rows params", &params);
        let pipeline = self.pipelines.get(&ctx.device, &[("WG", WORKGROUP_SIZE)]);
        let bind_group =
            launch::bind_buffers(&ctx.device, &self.layout, "pool_rows", &[&params, buffers.row_blocks, buffers.out]);
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) })
    }
}
