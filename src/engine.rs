//! The compute capability tier, decided once per page: WebGPU kernels, or the CPU reference.
//!
//! Views ask the engine for results and never see pipelines. The CPU tier is what a browser without
//! WebGPU gets (or `?backend=cpu`): the same numbers from the f64 reference, for small sizes only.

use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::flash_backward::{
    Backward, BackwardInputs, MULTIPLY_ADDS_PER_PAIR_AND_DIM, check_inputs, flash_backward,
};
use crate::cpu::flash_trace::{FlashTrace, flash_trace};
use crate::cpu::kv_cache::CpuKvCache;
use crate::cpu::reference::{self, Forward};
use crate::event_loop::breathe;
use crate::gpu::flash_attention::FlashForm;
use crate::gpu::flash_backward_io::backward_takes_head_dim;
use crate::gpu::flash_tiles::FlashTiles;
use crate::gpu::flash_trace::TRACE_MAX_TOKENS;
use crate::gpu::{GpuContext, Kernels, KvCache, PooledMap};
use crate::model::Mask;
use crate::model::limits::{
    CPU_MAX_MULTIPLY_ADDS, CPU_MAX_SCORE_PAIRS, CPU_SLICE_MULTIPLY_ADDS, KERNEL_MAX_HEAD_DIM, kernels_take_head_dim,
};
use crate::model::units::format_thousands;
use std::cell::RefCell;
use std::str::FromStr;
use std::task::{Context, Poll, Waker};

/// Where attention is computed (URL `backend=`): decided once per page load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// WebGPU when the browser has it, else the CPU reference.
    #[default]
    Auto,
    /// Always the CPU reference (what a browser without WebGPU gets).
    Cpu,
}

impl BackendChoice {
    pub fn id(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Cpu => "cpu",
        }
    }
}

impl FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" | "webgpu" | "gpu" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            _ => Err(format!("unknown backend \"{s}\" (expected auto or cpu)")),
        }
    }
}

#[expect(clippy::large_enum_variant, reason = "one engine per page, never moved once started")]
pub enum Engine {
    WebGpu { ctx: GpuContext, kernels: Kernels },
    Cpu { reason: String },
}

impl Engine {
    /// Opens the GPU unless the user asked for the CPU; a failure to find one is a reason, not an error.
    pub async fn start(choice: BackendChoice) -> Engine {
        if choice == BackendChoice::Cpu {
            return Engine::Cpu { reason: "CPU reference forced by the link (backend=cpu)".into() };
        }
        match GpuContext::new().await {
            Ok(ctx) => match ctx.validated(|| Kernels::new(&ctx)).await {
                Ok(kernels) => Engine::WebGpu { ctx, kernels },
                Err(e) => Engine::Cpu { reason: format!("this GPU could not build the attention kernels ({e})") },
            },
            Err(e) => Engine::Cpu { reason: format!("WebGPU is not available in this browser ({e})") },
        }
    }

    /// Why this engine's GPU can no longer be trusted, if it cannot: the device was lost, or it reported
    /// an error no job accounts for (running out of memory is a job's failure, not the device's). Its
    /// work fails from then on, and only a new device helps.
    pub fn broken(&self) -> Option<String> {
        match self {
            Engine::WebGpu { ctx, .. } => ctx.check_fault().err().map(|e| e.to_string()),
            Engine::Cpu { .. } => None,
        }
    }

    /// Destroys the GPU device (a test hook: the page must recover as from a driver reset).
    pub fn lose_device(&self) {
        if let Engine::WebGpu { ctx, .. } = self {
            ctx.lose_device();
        }
    }

    /// Makes the GPU's next job fail as if it ran out of memory (a test hook: the job must be refused
    /// with a notice, and the device kept).
    pub fn simulate_out_of_memory(&self) {
        if let Engine::WebGpu { ctx, .. } = self {
            ctx.simulate_out_of_memory();
        }
    }

    /// Whether results come from the GPU.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Engine::WebGpu { .. })
    }

    /// The GPU and its kernels, when this is the WebGPU tier (the benchmark needs them directly).
    pub fn gpu(&self) -> Option<(&GpuContext, &Kernels)> {
        match self {
            Engine::WebGpu { ctx, kernels } => Some((ctx, kernels)),
            Engine::Cpu { .. } => None,
        }
    }

    /// One line for the footer: which adapter computes, or why the CPU does.
    pub fn describe(&self) -> String {
        match self {
            Engine::WebGpu { ctx, .. } => format!("WebGPU: {}", ctx.adapter),
            Engine::Cpu { reason } => format!("CPU reference: {reason}"),
        }
    }
}

/// A K/V cache that grows by one token per decode step: a [`KvCache`] on the GPU, or its CPU twin
/// [`CpuKvCache`] for the CPU tier. Either way it is allocated once for its capacity in tokens.
pub enum DecodeCache {
    Gpu(KvCache),
    Cpu(CpuKvCache),
}

impl DecodeCache {
    pub fn len_tokens(&self) -> u32 {
        match self {
            DecodeCache::Gpu(c) => c.len_tokens(),
            DecodeCache::Cpu(c) => c.len_tokens(),
        }
    }

    /// Bytes of K and V held for the current tokens (f32, unpadded).
    pub fn used_bytes(&self) -> u64 {
        let (h_kv, d) = match self {
            DecodeCache::Gpu(c) => (c.h_kv(), c.d()),
            DecodeCache::Cpu(c) => (c.h_kv(), c.d()),
        };
        2 * 4 * u64::from(h_kv) * u64::from(d) * u64::from(self.len_tokens())
    }
}

impl Engine {
    /// An empty decode cache of `h_kv` heads of `d` dims for up to `capacity_tokens` tokens.
    pub fn decode_cache(&self, h_kv: u32, d: u32, capacity_tokens: u32) -> Result<DecodeCache, String> {
        self.run_now(&NewDecodeCache { h_kv, d, capacity_tokens })
    }

    /// Appends one token's K and V rows (`[h_kv, d]` each) to the cache, without touching the past.
    pub fn append_kv(&self, cache: &mut DecodeCache, k_token: &[f32], v_token: &[f32]) -> Result<(), String> {
        self.run_now(&AppendKv { cache: RefCell::new(cache), k_token, v_token })
    }

    /// One decode step: `q` (`[h_q, d]`, one query per head, at the newest position) attends to the
    /// cache's tokens under `mask`. On the GPU this is the tiled kernel reading the persistent buffer.
    pub async fn decode(
        &self,
        cache: &DecodeCache,
        q: &[f32],
        h_q: u32,
        mask: Mask,
        scale: f32,
    ) -> Result<Forward, String> {
        self.run(&Decode { cache, q, h_q, mask, scale }).await
    }

    /// Runs `job` on the GPU kernels when this engine has them and the job fits them, else on their
    /// CPU twins: the one place that chooses, so no job branches on the tier itself.
    pub async fn run<J: Job>(&self, job: &J) -> Result<J::Output, String> {
        match self {
            Engine::WebGpu { ctx, kernels } if job.fits_gpu() => job.on_gpu(ctx, kernels).await,
            _ => job.on_cpu(self.is_gpu()).await,
        }
    }

    /// Runs a job that never waits (allocating buffers, writing into them) at once, through [`Engine::run`]'s
    /// one choice of tier: its future is ready at the first poll.
    pub(crate) fn run_now<J: Job>(&self, job: &J) -> Result<J::Output, String> {
        let mut future = std::pin::pin!(self.run(job));
        match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => Err("this job waits, so it cannot run at once".into()),
        }
    }
}

/// One result either tier computes: with the GPU kernels, or with their CPU twins ([`crate::cpu`]).
#[expect(async_fn_in_trait, reason = "jobs run on the page's one thread: no `Send` bound is wanted")]
pub trait Job {
    type Output;
    /// Whether the GPU kernels take this job (heads wider than the kernels' do not, say).
    fn fits_gpu(&self) -> bool;
    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Self::Output, String>;
    /// `gpu_declined`: the engine has a GPU, which did not take the job.
    async fn on_cpu(&self, gpu_declined: bool) -> Result<Self::Output, String>;
}

/// An empty decode cache ([`Engine::decode_cache`]): on the GPU when there is one. Heads wider than
/// the kernels' are refused there with a reason rather than kept on the CPU, as before.
struct NewDecodeCache {
    h_kv: u32,
    d: u32,
    capacity_tokens: u32,
}

impl Job for NewDecodeCache {
    type Output = DecodeCache;

    fn fits_gpu(&self) -> bool {
        true
    }

    async fn on_gpu(&self, ctx: &GpuContext, _: &Kernels) -> Result<DecodeCache, String> {
        KvCache::new(ctx, self.h_kv, self.d, self.capacity_tokens).map(DecodeCache::Gpu).map_err(|e| e.to_string())
    }

    async fn on_cpu(&self, _: bool) -> Result<DecodeCache, String> {
        CpuKvCache::new(self.h_kv, self.d, self.capacity_tokens).map(DecodeCache::Cpu)
    }
}

/// One token appended to a decode cache ([`Engine::append_kv`]), where the cache lives. The cache
/// sits in a `RefCell` because a job is run by shared reference; nothing awaits while it is borrowed.
struct AppendKv<'a, 'c> {
    cache: RefCell<&'c mut DecodeCache>,
    k_token: &'a [f32],
    v_token: &'a [f32],
}

impl Job for AppendKv<'_, '_> {
    type Output = ();

    fn fits_gpu(&self) -> bool {
        matches!(**self.cache.borrow(), DecodeCache::Gpu(_))
    }

    async fn on_gpu(&self, ctx: &GpuContext, _: &Kernels) -> Result<(), String> {
        let mut cache = self.cache.borrow_mut();
        let DecodeCache::Gpu(cache) = &mut **cache else { return Err("the cache is not on the GPU".into()) };
        cache.append(ctx, self.k_token, self.v_token).map_err(|e| e.to_string())
    }

    async fn on_cpu(&self, _: bool) -> Result<(), String> {
        let mut cache = self.cache.borrow_mut();
        let DecodeCache::Cpu(cache) = &mut **cache else { return Err(GPU_CACHE_ON_CPU.into()) };
        cache.append(self.k_token, self.v_token)
    }
}

pub(crate) const GPU_CACHE_ON_CPU: &str = "a GPU cache cannot be used by the CPU engine";

/// One decode step ([`Engine::decode`]): on the GPU when the cache lives there.
pub struct Decode<'a> {
    pub cache: &'a DecodeCache,
    pub q: &'a [f32],
    pub h_q: u32,
    pub mask: Mask,
    pub scale: f32,
}

impl Job for Decode<'_> {
    type Output = Forward;

    fn fits_gpu(&self) -> bool {
        matches!(self.cache, DecodeCache::Gpu(_))
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Forward, String> {
        let DecodeCache::Gpu(cache) = self.cache else { return Err("the cache is not on the GPU".into()) };
        kernels.decode(ctx, cache, self.q, self.h_q, self.mask, self.scale).await.map_err(|e| e.to_string())
    }

    async fn on_cpu(&self, _: bool) -> Result<Forward, String> {
        let DecodeCache::Cpu(cache) = self.cache else { return Err(GPU_CACHE_ON_CPU.into()) };
        let (q, h_q) = (self.q, self.h_q);
        let shape = AttentionShape { h_q, h_kv: cache.h_kv(), n_q: 1, n_kv: cache.len_tokens(), d: cache.d() };
        shape.validate()?;
        check_cpu_size(shape)?;
        if q.len() != shape.q_len() {
            return Err(format!("a decode query holds h_q * d = {} values, got {}", shape.q_len(), q.len()));
        }
        let (k, v) = (cache.keys(), cache.values());
        Ok(cpu_flash_attention(&AttentionProblem::new(q, &k, &v, shape, self.mask, self.scale)).await)
    }
}

/// The f64 CPU reference of one decode step over `k`/`v` laid out `[h_kv, n_kv, d]`: what the views
/// check the GPU's answer against.
pub fn reference_decode(p: &AttentionProblem) -> Result<Forward, String> {
    p.validate(true).map_err(|e| format!("the reference decode got inputs of the wrong length: {e}"))?;
    Ok(reference::flash_attention(p))
}

/// [`reference::flash_attention`] computed row by row, yielding to the event loop between slices.
async fn cpu_flash_attention(p: &AttentionProblem<'_>) -> Forward {
    let mut out = Forward::zeroed(p);
    cpu_rows(p.shape, |h, i| reference::flash_attention_row(p, h, i, &mut out)).await;
    out
}

/// [`reference::row_softmax`] computed row by row, yielding to the event loop between slices.
async fn cpu_row_softmax(p: &AttentionProblem<'_>) -> Vec<f32> {
    let mut out = Vec::with_capacity(p.shape.h_q as usize * p.shape.n_q as usize * p.shape.n_kv as usize);
    cpu_rows(p.shape, |h, i| reference::row_softmax_row(p, h, i, &mut out)).await;
    out
}

/// Calls `row(h, i)` for every query row of every head of `shape`, in slices of about
/// [`CPU_SLICE_MULTIPLY_ADDS`] multiply-adds with a yield to the event loop after each.
async fn cpu_rows(shape: AttentionShape, mut row: impl FnMut(u32, u32)) {
    let per_slice = rows_per_slice(shape);
    let mut in_slice = 0;
    for h in 0..shape.h_q {
        for i in 0..shape.n_q {
            row(h, i);
            in_slice += 1;
            if in_slice == per_slice {
                in_slice = 0;
                breathe().await;
            }
        }
    }
}

/// Query rows per slice: rows of `n_kv` keys `d` wide in [`CPU_SLICE_MULTIPLY_ADDS`], at least one.
fn rows_per_slice(shape: AttentionShape) -> u64 {
    (CPU_SLICE_MULTIPLY_ADDS / (u64::from(shape.n_kv) * u64::from(shape.d)).max(1)).max(1)
}

pub(crate) fn check_cpu_size(shape: AttentionShape) -> Result<(), String> {
    let pairs = u64::from(shape.h_q).saturating_mul(u64::from(shape.n_q)).saturating_mul(u64::from(shape.n_kv));
    if pairs > CPU_MAX_SCORE_PAIRS {
        return Err(format!(
            "{pairs} query-key pairs is too much for the CPU fallback (at most {CPU_MAX_SCORE_PAIRS}); \
             a browser with WebGPU computes this on the GPU"
        ));
    }
    let work = pairs.saturating_mul(u64::from(shape.d));
    if work > CPU_MAX_MULTIPLY_ADDS {
        return Err(format!(
            "{} multiply-adds ({pairs} query-key pairs of {}-wide heads) is too much for the CPU fallback (at most {}); \
             fewer tokens fit",
            format_thousands(work.into()),
            shape.d,
            format_thousands(CPU_MAX_MULTIPLY_ADDS.into())
        ));
    }
    Ok(())
}

/// [`check_cpu_size`], and the backward twin's work (it is not sliced: several times the forward's
/// per pair) within the same bound of multiply-adds.
fn check_cpu_backward_size(shape: AttentionShape) -> Result<(), String> {
    check_cpu_size(shape)?;
    let pairs = u64::from(shape.h_q) * u64::from(shape.n_q) * u64::from(shape.n_kv);
    let work = pairs.saturating_mul(u64::from(shape.d)).saturating_mul(MULTIPLY_ADDS_PER_PAIR_AND_DIM);
    if work > CPU_MAX_MULTIPLY_ADDS {
        return Err(format!(
            "the backward's {} multiply-adds is too much for the CPU fallback (at most {}); fewer tokens fit",
            format_thousands(work.into()),
            format_thousands(CPU_MAX_MULTIPLY_ADDS.into())
        ));
    }
    Ok(())
}

/// What a heatmap needs from one batch of heads: every probability, or blocks pooled to a size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapOutput {
    /// `[h_q, n_q, n_kv]`.
    Exact,
    /// `[h_q, map.count, map.cols]`: the map's wanted rows, each cell the max or mean of its block (never
    /// materialising n x n on the GPU). The queries given are those the rows cover.
    Pooled(PooledMap),
}

impl Engine {
    /// Tile sizes of the tiled forward kernel for heads of width `d` ((query, head) rows per
    /// workgroup, keys per tile), as its launch picks them for `rows_total` rows; `None` on the CPU tier.
    /// (A loaded model's own passes may run the subgroup form's tiles instead, once it is built:
    /// `FlashAttention::prepare_fastest`.)
    pub fn flash_tiles(&self, d: u32, rows_total: u32) -> Option<(u32, u32)> {
        match self {
            Engine::WebGpu { kernels, .. } => {
                Some(kernels.flash.launch_tiles(crate::gpu::launch::padded_dim(d), rows_total))
            }
            Engine::Cpu { .. } => None,
        }
    }

    /// Whether heads this wide run on this engine's GPU (wider ones use the CPU reference, small sizes only).
    pub fn gpu_supports_dim(&self, d: u32) -> bool {
        self.is_gpu() && kernels_take_head_dim(d)
    }

    /// The heatmap data of a batch of heads: every probability in one pass, or blocks pooled from each
    /// row's log-sum-exp. Heads wider than the kernels support fall back to the CPU reference.
    pub async fn head_maps(&self, p: &AttentionProblem<'_>, output: MapOutput) -> Result<Vec<f32>, String> {
        p.validate(false)?;
        self.run(&HeadMaps { problem: p, output }).await
    }
}

/// The heatmap data of a batch of heads ([`Engine::head_maps`]).
pub struct HeadMaps<'a, 'p> {
    pub problem: &'a AttentionProblem<'p>,
    pub output: MapOutput,
}

impl Job for HeadMaps<'_, '_> {
    type Output = Vec<f32>;

    fn fits_gpu(&self) -> bool {
        kernels_take_head_dim(self.problem.shape.d)
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Vec<f32>, String> {
        let p = self.problem;
        let maps = match self.output {
            MapOutput::Exact => kernels.whole_probabilities(ctx, p).await,
            MapOutput::Pooled(map) => kernels.pooled_heads(ctx, p, map).await,
        };
        maps.map_err(|e| e.to_string())
    }

    async fn on_cpu(&self, gpu_declined: bool) -> Result<Vec<f32>, String> {
        let (p, shape) = (self.problem, self.problem.shape);
        check_cpu_size(shape).map_err(|e| {
            if !gpu_declined {
                return e;
            }
            format!(
                "heads of {} dims are wider than the GPU kernels' {KERNEL_MAX_HEAD_DIM} and too long for the CPU reference ({e})",
                shape.d
            )
        })?;
        let probs = cpu_row_softmax(p).await;
        match self.output {
            MapOutput::Exact => Ok(probs),
            // The reference takes queries as the last rows of the keys: whole maps only.
            MapOutput::Pooled(map) if map.first == 0 && map.count == map.rows && map.n_q == shape.n_q => {
                Ok(reference::pool_rows(&probs, shape.h_q, shape.n_q, shape.n_kv, map.rows, map.cols, map.pool))
            }
            MapOutput::Pooled(map) => Err(format!(
                "the CPU reference pools whole maps, not rows {}..{} of {}",
                map.first,
                map.first + map.count,
                map.rows
            )),
        }
    }
}

impl Engine {
    /// Each query's attention output (`[h_q, n_q, d]`) and log-sum-exp: the tiled forward kernel, or
    /// its CPU twin without a GPU or for heads wider than the kernels (small sizes only).
    pub async fn attention(&self, p: &AttentionProblem<'_>) -> Result<Forward, String> {
        p.validate(true)?;
        self.run(&Attend { problem: p }).await
    }
}

/// The attention output of a batch of heads ([`Engine::attention`]).
pub struct Attend<'a, 'p> {
    pub problem: &'a AttentionProblem<'p>,
}

impl Job for Attend<'_, '_> {
    type Output = Forward;

    fn fits_gpu(&self) -> bool {
        kernels_take_head_dim(self.problem.shape.d)
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Forward, String> {
        kernels.forward(ctx, self.problem).await.map_err(|e| e.to_string())
    }

    async fn on_cpu(&self, _: bool) -> Result<Forward, String> {
        check_cpu_size(self.problem.shape)?;
        Ok(cpu_flash_attention(self.problem).await)
    }
}

impl Engine {
    /// The forward pass of `p` and its gradients dQ, dK, dV given dO (`d_o`, `[h_q, n_q, d]`): the tiled
    /// forward and the FlashAttention-2 backward on the GPU, or their CPU twins (small sizes only).
    pub async fn attention_gradients(&self, p: &AttentionProblem<'_>, d_o: &[f32]) -> Result<Backward, String> {
        p.validate(true)?;
        if d_o.len() != p.shape.q_len() {
            return Err(format!("dO needs h_q * n_q * d = {} values, got {}", p.shape.q_len(), d_o.len()));
        }
        self.run(&AttentionGradients { problem: p, d_o }).await
    }
}

/// The gradients of a batch of heads ([`Engine::attention_gradients`]).
pub struct AttentionGradients<'a, 'p> {
    pub problem: &'a AttentionProblem<'p>,
    pub d_o: &'a [f32],
}

impl Job for AttentionGradients<'_, '_> {
    type Output = Backward;

    fn fits_gpu(&self) -> bool {
        backward_takes_head_dim(self.problem.shape.d)
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Backward, String> {
        kernels.backward(ctx).gradients(ctx, &kernels.flash, self.problem, self.d_o).await.map_err(|e| e.to_string())
    }

    async fn on_cpu(&self, _: bool) -> Result<Backward, String> {
        let p = self.problem;
        check_cpu_backward_size(p.shape)?;
        let forward = cpu_flash_attention(p).await;
        breathe().await;
        let inputs = BackwardInputs { o: &forward.o, lse: &forward.lse, d_o: self.d_o };
        check_inputs(p, &inputs)?;
        let grads = flash_backward(p, &inputs);
        Ok(Backward { forward, grads })
    }
}

impl Engine {
    /// `Y = X Wᵀ` (`x` rows `inputs` wide, `w` stored `[outputs, inputs]` as PyTorch keeps it): the
    /// matmul kernel on the GPU, or its twin. Rows are padded to a multiple of 4 with zeros, which
    /// adds nothing to any sum, since the kernel reads four values at a time.
    pub async fn project(&self, x: &[f32], w: &[f32], inputs: usize) -> Result<Vec<f32>, String> {
        let well_formed = inputs > 0 && x.len().is_multiple_of(inputs) && w.len().is_multiple_of(inputs);
        if !well_formed || x.is_empty() || w.is_empty() {
            return Err(format!("a projection needs whole rows of {inputs} inputs, got {} and {}", x.len(), w.len()));
        }
        let work = (x.len() / inputs) as u64 * w.len() as u64;
        if work > CPU_MAX_MULTIPLY_ADDS {
            return Err(format!(
                "a projection of {} multiply-adds is more than one job takes here",
                format_thousands(work.into())
            ));
        }
        self.run(&Project { x, w, inputs }).await
    }
}

/// One projection ([`Engine::project`]).
pub struct Project<'a> {
    pub x: &'a [f32],
    pub w: &'a [f32],
    pub inputs: usize,
}

impl Job for Project<'_> {
    type Output = Vec<f32>;

    fn fits_gpu(&self) -> bool {
        true
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Vec<f32>, String> {
        use crate::gpu::launch::{Dispatch, pad_rows};
        use crate::gpu::matmul::{MatmulBuffers, MatmulLaunch};
        let padded = self.inputs.next_multiple_of(4);
        let (rows, outputs) = (self.x.len() / self.inputs, self.w.len() / self.inputs);
        let to_u32 = |v: usize| u32::try_from(v).map_err(|_| format!("{v} is too large for a projection"));
        let launch = MatmulLaunch::new(to_u32(rows)?, to_u32(padded)?, to_u32(outputs)?);
        let gpu = |e: crate::gpu::GpuError| e.to_string();
        let x = ctx.storage_from("x", &pad_rows(self.x, self.inputs, padded)).map_err(gpu)?;
        let w = ctx.storage_from("w", &pad_rows(self.w, self.inputs, padded)).map_err(gpu)?;
        let y = ctx.storage_output("y", 4 * (rows * outputs) as u64).map_err(gpu)?;
        let buffers =
            MatmulBuffers { x: &x, w: &w, w_format: crate::lm::weight_plan::WeightFormat::F32, bias: None, y: &y };
        let dispatch = kernels.matmul.prepare(ctx, &buffers, launch).map_err(gpu)?;
        Dispatch::submit_all(ctx, &[&dispatch]);
        let mut out: Vec<f32> = ctx.read_back(&y).await.map_err(gpu)?;
        out.truncate(rows * outputs);
        Ok(out)
    }

    /// Row by row through the twin, yielding to the event loop every [`CPU_SLICE_MULTIPLY_ADDS`].
    async fn on_cpu(&self, _: bool) -> Result<Vec<f32>, String> {
        let rows_per_slice = (CPU_SLICE_MULTIPLY_ADDS as usize / self.w.len().max(1)).max(1);
        let mut out = Vec::with_capacity(self.x.len() / self.inputs * (self.w.len() / self.inputs));
        for (i, rows) in self.x.chunks(rows_per_slice * self.inputs).enumerate() {
            if i > 0 {
                breathe().await;
            }
            out.extend(crate::cpu::matmul::matmul(rows, self.w, None, self.inputs));
        }
        Ok(out)
    }
}

impl Engine {
    /// The tiled forward of `p` (at most [`TRACE_MAX_TOKENS`] tokens) with every row's online softmax,
    /// step by step: the traced build of the kernel this adapter runs, or without a GPU (or for a
    /// head wider than the kernels take) the twin's trace in the tiles every WebGPU GPU uses.
    pub async fn flash_trace(&self, p: &AttentionProblem<'_>) -> Result<TracedForward, String> {
        p.validate(true)?;
        if p.shape.n_q.max(p.shape.n_kv) > TRACE_MAX_TOKENS {
            return Err(format!("a trace covers at most {TRACE_MAX_TOKENS} tokens"));
        }
        self.run(&Trace { problem: p }).await
    }
}

/// A traced forward ([`Engine::flash_trace`]).
#[derive(Clone, Debug)]
pub struct TracedForward {
    pub forward: Forward,
    pub trace: FlashTrace,
    /// The form of the kernel that wrote the trace; `None`: the CPU twin's trace.
    pub form: Option<FlashForm>,
}

struct Trace<'a, 'p> {
    problem: &'a AttentionProblem<'p>,
}

impl Job for Trace<'_, '_> {
    type Output = TracedForward;

    fn fits_gpu(&self) -> bool {
        kernels_take_head_dim(self.problem.shape.d)
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<TracedForward, String> {
        let (forward, trace, form) = kernels.forward_traced(ctx, self.problem).await.map_err(|e| e.to_string())?;
        Ok(TracedForward { forward, trace, form: Some(form) })
    }

    async fn on_cpu(&self, _: bool) -> Result<TracedForward, String> {
        let p = self.problem;
        check_cpu_size(p.shape)?;
        let d_pad = crate::gpu::launch::padded_dim(p.shape.d);
        let tiles = FlashTiles::web_gpu(d_pad).for_rows(d_pad, p.shape.n_q * p.shape.group_size());
        let trace = flash_trace(p, tiles.rows_per_tile(d_pad), tiles.keys_per_tile);
        Ok(TracedForward { forward: cpu_flash_attention(p).await, trace, form: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_slices_hold_a_few_million_multiply_adds_and_at_least_a_row() {
        let shape = |n: u32, d: u32| AttentionShape { h_q: 1, h_kv: 1, n_q: n, n_kv: n, d };
        // 2,000,000 / (1,000 keys x 64) = 31.25 -> 31 rows; a row of 250 keys 16,384 wide is 4,096,000.
        assert_eq!(rows_per_slice(shape(1000, 64)), 31);
        assert_eq!(rows_per_slice(shape(250, 16_384)), 1);
        assert_eq!(rows_per_slice(shape(0, 0)), CPU_SLICE_MULTIPLY_ADDS);
    }

    #[test]
    fn sliced_cpu_results_equal_the_reference_in_one_go() {
        // 3 query heads over 1 KV head, 700 tokens of 64: 44,800 multiply-adds a row, 44 rows a slice.
        let shape = AttentionShape { h_q: 3, h_kv: 1, n_q: 700, n_kv: 700, d: 64 };
        let values = |n: usize, seed: f32| (0..n).map(|x| (x as f32 * seed).sin() * 0.5).collect::<Vec<f32>>();
        let (q, k, v) = (values(shape.q_len(), 0.37), values(700 * 64, 0.11), values(700 * 64, 0.23));
        let p = AttentionProblem::new(&q, &k, &v, shape, Mask::Causal, 0.125);
        assert_eq!(pollster::block_on(cpu_row_softmax(&p)), reference::row_softmax(&p));
        assert_eq!(pollster::block_on(cpu_flash_attention(&p)), reference::flash_attention(&p));
    }

    #[test]
    fn the_cpu_tier_runs_every_job_on_the_twins_without_asking_the_gpu() {
        struct Which;
        impl Job for Which {
            type Output = &'static str;
            fn fits_gpu(&self) -> bool {
                true
            }
            async fn on_gpu(&self, _: &GpuContext, _: &Kernels) -> Result<&'static str, String> {
                Ok("gpu")
            }
            async fn on_cpu(&self, gpu_declined: bool) -> Result<&'static str, String> {
                Ok(if gpu_declined { "cpu, the gpu declined" } else { "cpu" })
            }
        }
        let engine = Engine::Cpu { reason: "a test".into() };
        assert_eq!(pollster::block_on(engine.run(&Which)), Ok("cpu"));
    }

    #[test]
    fn a_projection_on_the_cpu_tier_is_x_times_w_transposed_and_bad_shapes_are_refused() {
        let engine = Engine::Cpu { reason: "a test".into() };
        // X = [[1, 2, 3]], W = [[1, 0, 1], [0, 2, 0]]: Y = [1 + 3, 4] = [4, 4].
        let y = pollster::block_on(engine.project(&[1.0, 2.0, 3.0], &[1.0, 0.0, 1.0, 0.0, 2.0, 0.0], 3));
        assert_eq!(y, Ok(vec![4.0, 4.0]));
        assert!(pollster::block_on(engine.project(&[1.0, 2.0], &[1.0, 0.0, 1.0], 3)).is_err());
        assert!(pollster::block_on(engine.project(&[], &[1.0], 1)).is_err());
        assert!(pollster::block_on(engine.project(&[1.0], &[1.0], 0)).is_err());
        // Sliced: 2,000,000 / (1,000 x 1,000) = 2 rows a slice over 5 rows; the same as in one go.
        let x: Vec<f32> = (0..5_000).map(|i| (i % 7) as f32 - 3.0).collect();
        let w: Vec<f32> = (0..1_000_000).map(|i| (i % 5) as f32 - 2.0).collect();
        let sliced = pollster::block_on(engine.project(&x, &w, 1000)).unwrap();
        assert_eq!(sliced, crate::cpu::matmul::matmul(&x, &w, None, 1000));
    }

    #[test]
    fn the_cpu_backward_is_bounded_by_its_own_work() {
        let shape = |n: u32, d: u32| AttentionShape { h_q: 1, h_kv: 1, n_q: n, n_kv: n, d };
        // 2,000^2 pairs x 64 x 7 = 1,792,000,000 > 1,024,000,000; 1,500^2 x 64 x 7 = 1,008,000,000 fits.
        assert!(check_cpu_size(shape(2000, 64)).is_ok());
        let why = check_cpu_backward_size(shape(2000, 64)).unwrap_err();
        assert!(why.starts_with("the backward's 1,792,000,000 multiply-adds"), "{why}");
        assert!(check_cpu_backward_size(shape(1500, 64)).is_ok());
    }

    #[test]
    fn the_cpu_fallback_bounds_pairs_and_the_work_wide_heads_bring() {
        let shape = |n: u32, d: u32| AttentionShape { h_q: 1, h_kv: 1, n_q: n, n_kv: n, d };
        // 2,000^2 = 4,000,000 pairs at d 256: 1,024,000,000 multiply-adds, the most allowed.
        assert!(check_cpu_size(shape(2000, 256)).is_ok());
        assert!(check_cpu_size(shape(2001, 8)).unwrap_err().contains("4004001 query-key pairs"));
        // One head 16,384 wide: 250^2 x 16,384 = 1,024,000,000 fits, 251^2 x 16,384 = 1,032,208,384 does not.
        assert!(check_cpu_size(shape(250, 16_384)).is_ok());
        let why = check_cpu_size(shape(251, 16_384)).unwrap_err();
        assert!(why.starts_with("1,032,208,384 multiply-adds (63001 query-key pairs of 16384-wide heads)"), "{why}");
        assert!(
            check_cpu_size(AttentionShape { h_q: u32::MAX, h_kv: 1, n_q: u32::MAX, n_kv: u32::MAX, d: 1 }).is_err()
        );
    }
}
