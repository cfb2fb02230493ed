//! Every pipeline of the app, built once per device, and the high-level calls the UI makes.
//!
//! Each call uploads its inputs, runs one kernel and reads the results back; the kernel modules
//! (`flash_attention`, `attention_probs`, ...) expose the lower-level `prepare` used by the benchmark and
//! by the decode cache, which keep buffers on the GPU between launches.

use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::distance_mass::distance_slots;
use crate::cpu::flash_trace::FlashTrace;
use crate::cpu::reference::Forward;
use crate::gpu::attention_probs::{ProbsBuffers, ProbsOutput};
use crate::gpu::context::Scratch;
use crate::gpu::distance_mass::{DistanceLaunch, DistanceMassBuffers};
use crate::gpu::flash_attention::FlashForm;
use crate::gpu::flash_io::{FlashBuffers, FlashLaunch};
use crate::gpu::flash_trace::{TRACE_MAX_FLOATS, TRACE_MAX_TOKENS, parse_trace, trace_floats};
use crate::gpu::kv_cache::KvCache;
use crate::gpu::kv_pool::KvPool;
use crate::gpu::launch::{self, Dispatch};
use crate::gpu::naive_attention::NaiveBuffers;
use crate::gpu::paged_attention::PagedLaunch;
use crate::gpu::pool_rows::PoolRowsBuffers;
use crate::gpu::row_softmax::{RowBuffers, RowLaunch, RowOutput};
use crate::gpu::{GpuContext, GpuError};
use crate::model::Mask;
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, kernels_take_head_dim};

pub use crate::attention::pooled::{Pool, PooledMap};

/// A window of the probability matrix: query rows `row0..row0+rows` (of `0..n_q`) and key positions
/// `col0..col0+cols` (of `0..n_kv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbRegion {
    pub row0: u32,
    pub rows: u32,
    pub col0: u32,
    pub cols: u32,
}

/// Makes [`KERNELS`] and [`Kernels`] from `gpu/mod.rs`' `every_kernel!` (its groups are described there).
macro_rules! kernel_set {
    (
        held { $( $(#[$held_doc:meta])* $held:ident: $held_type:ty, )* }
        lazy { $( $(#[$lazy_doc:meta])* $lazy:ident: $lazy_type:ty, )* }
        forms { $( $form_type:ty, )* }
        builds { $( $(#[$build_doc:meta])* $build:ident: $build_type:ty, )* }
    ) => {
        /// Every kernel, each once (see `kernel_set!`).
        pub const KERNELS: &[$crate::gpu::kernel::KernelInfo] = &[
            $( $crate::gpu::kernel::KernelInfo::of::<$held_type>(), )*
            $( $crate::gpu::kernel::KernelInfo::of::<$lazy_type>(), )*
            $( $crate::gpu::kernel::KernelInfo::of::<$form_type>(), )*
        ];

        /// All pipelines. Pipelines specialised per head width are built on first use of that width and kept.
        pub struct Kernels {
            $( $(#[$held_doc])* pub $held: $held_type, )*
            $( $(#[$lazy_doc])* $lazy: std::cell::OnceCell<$lazy_type>, )*
            $( $(#[$build_doc])* $build: std::cell::OnceCell<$build_type>, )*
        }

        impl Kernels {
            pub fn new(ctx: &$crate::gpu::GpuContext) -> Self {
                Self {
                    $( $held: <$held_type>::new(ctx), )*
                    $( $lazy: std::cell::OnceCell::new(), )*
                    $( $build: std::cell::OnceCell::new(), )*
                }
            }

            $(
                /// This kernel's pipelines, built now if this is their first use.
                pub fn $lazy(&self, ctx: &$crate::gpu::GpuContext) -> &$lazy_type {
                    self.$lazy.get_or_init(|| <$lazy_type>::new(ctx))
                }
            )*

            $(
                /// This build's pipelines, built now if this is their first use.
                pub fn $build(&self, ctx: &$crate::gpu::GpuContext) -> &$build_type {
                    self.$build.get_or_init(|| <$build_type>::new(ctx))
                }
            )*
        }
    };
}

every_kernel!(kernel_set);

/// One decode step of [`Kernels::paged_decode`].
#[derive(Clone, Copy)]
pub struct PagedStep<'a> {
    pub pool: &'a KvPool,
    /// Logical page -> pool page, covering at least `n_kv` tokens.
    pub table: &'a [u32],
    pub n_kv: u32,
    pub q: &'a [f32],
    pub h_q: u32,
    pub mask: Mask,
    pub scale: f32,
}

/// Q, K, V uploaded with rows padded to a multiple of 4 floats.
struct Uploaded<'a> {
    shape: AttentionShape,
    q: Scratch<'a>,
    k: Scratch<'a>,
    v: Option<Scratch<'a>>,
}

impl Kernels {
    /// One decode step: `q` holds one query per head (`[h_q, d]`), attending to the cache's current
    /// tokens. The query sits at the last position, so causal masks see everything and sliding/chunked
    /// masks see their last window. Returns O `[h_q, d]` and lse `[h_q]`.
    pub async fn decode(
        &self,
        ctx: &GpuContext,
        cache: &KvCache,
        q: &[f32],
        h_q: u32,
        mask: Mask,
        scale: f32,
    ) -> Result<Forward, GpuError> {
        let shape = AttentionShape { h_q, h_kv: cache.h_kv(), n_q: 1, n_kv: cache.len_tokens(), d: cache.d() };
        shape.validate().map_err(GpuError::InvalidInput)?;
        if q.len() != shape.q_len() {
            return Err(GpuError::InvalidInput(format!(
                "a decode query holds h_q * d = {} values, got {}",
                shape.q_len(),
                q.len()
            )));
        }
        let d_pad = cache.d_pad();
        let q_buf = ctx.storage_from("q", &launch::pad_rows(q, shape.d as usize, d_pad as usize))?;
        let out = ForwardOutputs::new(ctx, u64::from(h_q), d_pad)?;
        let buffers = FlashBuffers { q: &q_buf, k: &cache.k, v: &cache.v, o: &out.o, lse: &out.lse };
        let padded = AttentionShape { d: d_pad, ..shape };
        let dispatch = self.flash.prepare(
            ctx,
            &buffers,
            FlashLaunch { shape: padded, kv_stride: cache.capacity_tokens(), mask, scale },
        )?;
        Dispatch::submit_all(ctx, &[&dispatch]);
        out.read(ctx, shape.d).await
    }

    /// One decode step over a paged pool: `q` (`[h_q, d]`) attends to the request's `n_kv` tokens,
    /// found through `table` (its pages in `pool`). Returns O `[h_q, d]` and lse `[h_q]`.
    pub async fn paged_decode(&self, ctx: &GpuContext, step: &PagedStep<'_>) -> Result<Forward, GpuError> {
        let PagedStep { pool, table, n_kv, q, h_q, mask, scale } = *step;
        let shape = AttentionShape { h_q, h_kv: pool.h_kv(), n_q: 1, n_kv, d: pool.d() };
        let table_pages = u32::try_from(table.len()).unwrap_or(u32::MAX);
        let launch = PagedLaunch { shape, table_pages, pool_pages: pool.pages(), mask, scale };
        launch.check().map_err(GpuError::InvalidInput)?;
        if q.len() != shape.q_len() {
            return Err(GpuError::InvalidInput(format!(
                "a decode query holds h_q * d = {} values, got {}",
                shape.q_len(),
                q.len()
            )));
        }
        let needed = table.len().min(n_kv.div_ceil(crate::model::paging::PAGE_TOKENS as u32) as usize);
        crate::cpu::kv_pool::check_pages(pool.pages(), &table[..needed]).map_err(GpuError::InvalidInput)?;
        let d_pad = pool.d_pad();
        let q_buf = ctx.storage_from("q", &launch::pad_rows(q, shape.d as usize, d_pad as usize))?;
        let table_buf = ctx.storage_from("page table", table)?;
        let out = ForwardOutputs::new(ctx, u64::from(h_q), d_pad)?;
        let buffers = FlashBuffers { q: &q_buf, k: &pool.k, v: &pool.v, o: &out.o, lse: &out.lse };
        let padded = PagedLaunch { shape: AttentionShape { d: d_pad, ..shape }, ..launch };
        let dispatch = self.paged.prepare(ctx, &buffers, &table_buf, padded)?;
        Dispatch::submit_all(ctx, &[&dispatch]);
        out.read(ctx, shape.d).await
    }

    /// The naive three-pass baseline (same results as [`Kernels::forward`]); refuses, with the bytes it
    /// would need, when the n x n score matrix does not fit one binding.
    pub async fn naive_forward(&self, ctx: &GpuContext, p: &AttentionProblem<'_>) -> Result<Forward, GpuError> {
        let up = upload(ctx, p, true).await?;
        let AttentionProblem { shape, mask, scale, .. } = *p;
        let scores = ctx.storage_output("scores", crate::gpu::naive_attention::scores_bytes(&shape))?;
        let out = ForwardOutputs::new(ctx, u64::from(shape.h_q) * u64::from(shape.n_q), up.shape.d)?;
        let v_buf = up.v.as_ref().ok_or_else(|| GpuError::InvalidInput("V missing".into()))?;
        let buffers = NaiveBuffers { q: &up.q, k: &up.k, v: v_buf, scores: &scores, o: &out.o, lse: &out.lse };
        let [a, b, c] = self.naive.prepare(ctx, &buffers, up.shape, mask, scale)?;
        Dispatch::submit_all(ctx, &[&a, &b, &c]);
        out.read(ctx, shape.d).await
    }

    /// Forward pass (O `[h_q, n_q, d]` and lse `[h_q, n_q]`) with the tiled online-softmax kernel.
    /// A row that sees no key gets O = 0 and lse = -inf, as in the CPU reference.
    pub async fn forward(&self, ctx: &GpuContext, p: &AttentionProblem<'_>) -> Result<Forward, GpuError> {
        let up = upload(ctx, p, true).await?;
        let AttentionProblem { shape, mask, scale, .. } = *p;
        let out = ForwardOutputs::new(ctx, u64::from(shape.h_q) * u64::from(shape.n_q), up.shape.d)?;
        let v_buf = up.v.as_ref().ok_or_else(|| GpuError::InvalidInput("V missing".into()))?;
        let buffers = FlashBuffers { q: &up.q, k: &up.k, v: v_buf, o: &out.o, lse: &out.lse };
        let dispatch =
            self.flash.prepare(ctx, &buffers, FlashLaunch { shape: up.shape, kv_stride: shape.n_kv, mask, scale })?;
        Dispatch::submit_all(ctx, &[&dispatch]);
        out.read(ctx, shape.d).await
    }

    /// [`Kernels::forward`] with the traced build of the same form of the kernel, for problems of at
    /// most [`TRACE_MAX_TOKENS`] tokens: O, lse, every row's steps, and the form that ran.
    pub async fn forward_traced(
        &self,
        ctx: &GpuContext,
        p: &AttentionProblem<'_>,
    ) -> Result<(Forward, FlashTrace, FlashForm), GpuError> {
        let shape = p.shape;
        if shape.n_q.max(shape.n_kv) > TRACE_MAX_TOKENS {
            return Err(GpuError::LimitExceeded(format!("a trace covers at most {TRACE_MAX_TOKENS} tokens")));
        }
        let up = upload(ctx, p, true).await?;
        let launch = FlashLaunch { shape: up.shape, kv_stride: shape.n_kv, mask: p.mask, scale: p.scale };
        let keys_per_step = self.flash.plan(launch)?.tile.1;
        let floats = trace_floats(&up.shape, keys_per_step);
        if floats > TRACE_MAX_FLOATS {
            return Err(GpuError::LimitExceeded(format!("a trace of {floats} floats (at most {TRACE_MAX_FLOATS})")));
        }
        let trace_buf = ctx.storage_from("flash trace", &vec![-1.0f32; floats as usize])?;
        let out = ForwardOutputs::new(ctx, u64::from(shape.h_q) * u64::from(shape.n_q), up.shape.d)?;
        let v_buf = up.v.as_ref().ok_or_else(|| GpuError::InvalidInput("V missing".into()))?;
        let buffers = FlashBuffers { q: &up.q, k: &up.k, v: v_buf, o: &out.o, lse: &out.lse };
        let tracer = self.tracer(ctx);
        let (dispatch, plan) = tracer.prepare(ctx, &self.flash, &buffers, &trace_buf, launch)?;
        Dispatch::submit_all(ctx, &[&dispatch]);
        let forward = out.read(ctx, shape.d).await?;
        let records: Vec<f32> = ctx.read_back(&trace_buf).await?;
        Ok((forward, parse_trace(&records, up.shape, shape.d, plan.tile), plan.form))
    }

    /// Exact probabilities of a window of rows/cols for every query head, `[h_q, rows, cols]`, computed
    /// from Q, K and the lse of [`Kernels::forward`].
    pub async fn probabilities(
        &self,
        ctx: &GpuContext,
        p: &AttentionProblem<'_>,
        lse: &[f32],
        region: ProbRegion,
    ) -> Result<Vec<f32>, GpuError> {
        let inside = region.rows > 0
            && region.cols > 0
            && u64::from(region.row0) + u64::from(region.rows) <= u64::from(p.shape.n_q)
            && u64::from(region.col0) + u64::from(region.cols) <= u64::from(p.shape.n_kv);
        if !inside {
            return Err(GpuError::InvalidInput(format!(
                "region {region:?} is empty or outside {} x {} probabilities",
                p.shape.n_q, p.shape.n_kv
            )));
        }
        let output = ProbsOutput::Region { row0: region.row0, rows: region.rows, col0: region.col0, cols: region.cols };
        self.run_probs(ctx, p, lse, output).await
    }

    /// Pooled probabilities of whole heads at `out_rows x out_cols` (`[h_q, out_rows, out_cols]`; each
    /// cell = max or mean of P over its block), never materialising n x n.
    pub async fn pooled_probabilities(
        &self,
        ctx: &GpuContext,
        p: &AttentionProblem<'_>,
        lse: &[f32],
        out_rows: u32,
        out_cols: u32,
        pool: Pool,
    ) -> Result<Vec<f32>, GpuError> {
        check_pooled_size(out_rows, out_cols)?;
        self.run_probs(ctx, p, lse, ProbsOutput::Pooled { out_rows, out_cols, pool }).await
    }

    /// Every probability of every query head, `[h_q, n_q, n_kv]`, in one pass (no forward pass first):
    /// for heads small enough to show whole.
    pub async fn whole_probabilities(&self, ctx: &GpuContext, p: &AttentionProblem<'_>) -> Result<Vec<f32>, GpuError> {
        self.run_rows(ctx, p, RowOutput::Probabilities).await
    }

    /// Each row's log-sum-exp, `[h_q, n_q]` (-inf for a row that sees no key): the forward pass's lse
    /// without its P·V half.
    pub async fn log_sum_exp(&self, ctx: &GpuContext, p: &AttentionProblem<'_>) -> Result<Vec<f32>, GpuError> {
        self.run_rows(ctx, p, RowOutput::LogSumExp).await
    }

    /// Each head's attention mass by distance (`[h_q, 2 n_kv − 1]`, as `distance_mass`'s twin): the
    /// row softmax's log-sum-exp pass, then `distance_mass` from it, in one submission over one upload
    /// of Q and K; only the masses are read back.
    pub async fn masses_by_distance(&self, ctx: &GpuContext, p: &AttentionProblem<'_>) -> Result<Vec<f32>, GpuError> {
        let up = upload(ctx, p, false).await?;
        let AttentionProblem { shape, mask, scale, .. } = *p;
        let lse = ctx.scratch_output("row softmax", RowOutput::LogSumExp.len(&shape) * 4)?;
        let slots = shape.h_q as usize * distance_slots(shape.n_kv);
        let mass = ctx.storage_output("distance mass", slots as u64 * 4)?;
        let launch =
            RowLaunch { shape: up.shape, q_offset: up.shape.q_offset(), mask, scale, output: RowOutput::LogSumExp };
        let lse_pass = self.rows.prepare(ctx, &RowBuffers { q: &up.q, k: &up.k, out: &lse }, launch)?;
        let buffers = DistanceMassBuffers { q: &up.q, k: &up.k, lse: &lse, mass: &mass };
        let mass_pass =
            self.distance_mass(ctx).prepare(ctx, &buffers, DistanceLaunch { shape: up.shape, mask, scale })?;
        Dispatch::submit_all(ctx, &[&lse_pass, &mass_pass]);
        let mut out: Vec<f32> = ctx.read_back(&mass).await?;
        out.truncate(slots);
        // As `run_rows`: the row softmax's fast form for this shape, built while the page draws.
        self.rows.warm_up(ctx, up.shape, RowOutput::LogSumExp);
        Ok(out)
    }

    async fn run_rows(
        &self,
        ctx: &GpuContext,
        p: &AttentionProblem<'_>,
        output: RowOutput,
    ) -> Result<Vec<f32>, GpuError> {
        let up = upload(ctx, p, false).await?;
        let AttentionProblem { shape, mask, scale, .. } = *p;
        let len = output.len(&shape);
        let out = ctx.scratch_output("row softmax", len * 4)?;
        let launch = RowLaunch { shape: up.shape, q_offset: up.shape.q_offset(), mask, scale, output };
        let dispatch = self.rows.prepare(ctx, &RowBuffers { q: &up.q, k: &up.k, out: &out }, launch)?;
        Dispatch::submit_all(ctx, &[&dispatch]);
        let mut values: Vec<f32> = ctx.read_back(&out).await?;
        values.truncate(len as usize);
        self.rows.warm_up(ctx, up.shape, output);
        Ok(values)
    }

    /// Heads pooled as [`Kernels::pooled_probabilities`] (`[h_q, map.count, map.cols]`), in one
    /// submission and one read-back. `q` holds the queries of the wanted rows
    /// ([`PooledMap::queries`]; `shape.n_q` of them, of `map.n_q`, the last of which is the last key).
    /// With at most one column per key (what heatmaps ask for) the row softmax pools each row's keys
    /// in its single pass over Q·Kᵀ and `pool_rows` pools the rows; otherwise (whole maps only) the
    /// log-sum-exp pass runs first and `attention_probs` pools from it.
    pub async fn pooled_heads(
        &self,
        ctx: &GpuContext,
        p: &AttentionProblem<'_>,
        map: PooledMap,
    ) -> Result<Vec<f32>, GpuError> {
        check_pooled_size(map.rows, map.cols)?;
        let (q0, q1) = map.queries();
        let whole = map.first == 0 && map.count == map.rows;
        if map.count == 0
            || map.first + map.count > map.rows
            || q1 - q0 != p.shape.n_q
            || map.n_q > p.shape.n_kv
            || (!whole && map.cols > p.shape.n_kv)
        {
            return Err(GpuError::InvalidInput(format!(
                "{map:?} does not describe rows of {} queries against {} keys",
                p.shape.n_q, p.shape.n_kv
            )));
        }
        let up = upload(ctx, p, false).await?;
        let AttentionProblem { shape, mask, scale, .. } = *p;
        let len = u64::from(shape.h_q) * u64::from(map.count) * u64::from(map.cols);
        let out = ctx.scratch_output("pooled probabilities", len * 4)?;
        let row_output = if map.cols <= shape.n_kv {
            RowOutput::Blocks { cols: map.cols, pool: map.pool }
        } else {
            RowOutput::LogSumExp
        };
        let rows_out = ctx.scratch_output("row softmax", row_output.len(&shape) * 4)?;
        let q_offset = shape.n_kv - map.n_q + q0;
        let launch = RowLaunch { shape: up.shape, q_offset, mask, scale, output: row_output };
        let rows_pass = self.rows.prepare(ctx, &RowBuffers { q: &up.q, k: &up.k, out: &rows_out }, launch)?;
        let pool_pass = match row_output {
            RowOutput::Blocks { .. } => self.pool_rows.prepare(
                ctx,
                &PoolRowsBuffers { row_blocks: &rows_out, out: &out },
                shape.h_q,
                shape.n_kv,
                &map,
            )?,
            _ => {
                let output = ProbsOutput::Pooled { out_rows: map.rows, out_cols: map.cols, pool: map.pool };
                self.probs.prepare(
                    ctx,
                    &ProbsBuffers { q: &up.q, k: &up.k, lse: &rows_out, out: &out },
                    up.shape,
                    mask,
                    scale,
                    output,
                )?
            }
        };
        Dispatch::submit_all(ctx, &[&rows_pass, &pool_pass]);
        let mut p: Vec<f32> = ctx.read_back(&out).await?;
        p.truncate(len as usize);
        self.rows.warm_up(ctx, up.shape, row_output);
        Ok(p)
    }

    async fn run_probs(
        &self,
        ctx: &GpuContext,
        p: &AttentionProblem<'_>,
        lse: &[f32],
        output: ProbsOutput,
    ) -> Result<Vec<f32>, GpuError> {
        if lse.len() != (p.shape.h_q as usize) * (p.shape.n_q as usize) {
            return Err(GpuError::InvalidInput(format!(
                "lse has {} values, expected h_q * n_q = {}",
                lse.len(),
                p.shape.h_q * p.shape.n_q
            )));
        }
        let up = upload(ctx, p, false).await?;
        let AttentionProblem { shape, mask, scale, .. } = *p;
        let lse_buf = ctx.storage_from("lse", lse)?;
        let (rows, cols) = output.size();
        let out_len = u64::from(shape.h_q) * u64::from(rows) * u64::from(cols);
        let out = ctx.storage_output("probabilities", out_len * 4)?;
        let buffers = ProbsBuffers { q: &up.q, k: &up.k, lse: &lse_buf, out: &out };
        let dispatch = self.probs.prepare(ctx, &buffers, up.shape, mask, scale, output)?;
        Dispatch::submit_all(ctx, &[&dispatch]);
        let mut p: Vec<f32> = ctx.read_back(&out).await?;
        p.truncate(out_len as usize);
        Ok(p)
    }
}

/// The O and lse buffers of a forward pass (tiled, naive or decode) over `rows` (query, head) rows.
struct ForwardOutputs {
    o: wgpu::Buffer,
    lse: wgpu::Buffer,
    rows: u64,
    d_pad: u32,
}

impl ForwardOutputs {
    fn new(ctx: &GpuContext, rows: u64, d_pad: u32) -> Result<Self, GpuError> {
        let o = ctx.storage_output("o", rows * u64::from(d_pad) * 4)?;
        let lse = ctx.storage_output("lse", rows * 4)?;
        Ok(Self { o, lse, rows, d_pad })
    }

    /// O `[rows, d]` (its padding columns dropped) and lse `[rows]`, read back.
    async fn read(&self, ctx: &GpuContext, d: u32) -> Result<Forward, GpuError> {
        let [o_padded, mut lse]: [Vec<f32>; 2] =
            ctx.read_back_all(&[&self.o, &self.lse]).await?.try_into().map_err(|_| readback_count())?;
        lse.truncate(self.rows as usize);
        let o_len = (self.rows * u64::from(self.d_pad)) as usize;
        Ok(Forward { o: launch::unpad_rows(&o_padded[..o_len], d as usize, self.d_pad as usize), lse })
    }
}

fn check_pooled_size(out_rows: u32, out_cols: u32) -> Result<(), GpuError> {
    if out_rows == 0 || out_cols == 0 || out_rows > 65535 || out_cols > 65535 {
        return Err(GpuError::InvalidInput(format!("pooled size {out_rows} x {out_cols} must be 1..=65535 each")));
    }
    Ok(())
}

/// Checks lengths and shape, pads rows to a multiple of 4 floats and uploads.
async fn upload<'a>(ctx: &'a GpuContext, p: &AttentionProblem<'_>, with_v: bool) -> Result<Uploaded<'a>, GpuError> {
    p.validate(with_v).map_err(GpuError::InvalidInput)?;
    let shape = p.shape;
    if !kernels_take_head_dim(shape.d) {
        return Err(GpuError::InvalidInput(format!(
            "head dimension {} is above the kernels' maximum of {KERNEL_MAX_HEAD_DIM}",
            shape.d
        )));
    }
    let d = shape.d as usize;
    let d_pad = launch::padded_dim(shape.d);
    let pad = |x| launch::pad_rows(x, d, d_pad as usize);
    let q = ctx.scratch_from("q", &pad(p.q)).await?;
    let k = ctx.scratch_from("k", &pad(p.k)).await?;
    let v = if with_v { Some(ctx.scratch_from("v", &pad(p.v)).await?) } else { None };
    Ok(Uploaded { shape: AttentionShape { d: d_pad, ..shape }, q, k, v })
}

/// The error of a readback that returned another number of buffers than it was given (never seen).
pub(crate) fn readback_count() -> GpuError {
    GpuError::Readback("a readback returned a different number of buffers".into())
}
