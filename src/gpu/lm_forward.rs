//! The language model's forward pass on the GPU: a [`Checkpoint`]'s weights uploaded once
//! ([`LmWeights`]), then every step of `lm::forward::forward` as kernels, recorded into one command
//! encoder and submitted once:
//!
//! ```text
//! embed_gather                                   x = embed[ids] (times sqrt(d) for Gemma)
//! per layer:  rms_norm -> matmul (Q|K|V fused)   h = norm(x); qkv = h Wqkvᵀ + b
//!             (qk_norm)                          each Q and K head RMS-normed in place (Qwen3, Gemma 3)
//!             rope split_heads                   Q, K rotated; Q [h_q, T, d], K, V [h_kv, T, d]
//!             (kv_quant)                         K, V rounded to a quantised cache's values, when asked
//!             (kv_pack)                          into a packed quantised cache (decoding, or a pass's KIVI): K, V packed
//!             flash_attention                    O, lse under the layer's mask, GQA (packed_attention
//!                                                over a packed cache, dequantising as it reads;
//!                                                paged_attention over an f32 cache in pages of one
//!                                                pool, through the layer's page table: lm_paged.rs)
//!             (row_softmax)                      every head's probabilities, when asked
//!             rope merge_heads -> matmul (+=)    x += O Woᵀ
//!             rms_norm -> matmul (gate|up fused) h = norm(x); gu = h [Wg|Wu]ᵀ
//!             swiglu -> matmul (+=)              x += (act(g) * u) Wdownᵀ
//! rms_norm -> matmul                             logits = norm(x) Wheadᵀ (the last rows asked for)
//! ```
//!
//! Gemma 3 norms each block's output before it joins the residual stream: its O and down
//! projections write `h`, and `rms_norm` adds `norm(h)` to `x`. Its norms scale by `1 + w`.
//!
//! Every size is checked against the job limit and the binding limit before any buffer exists.

use crate::attention::AttentionShape;
use crate::attention::rope::RopeTable;
use crate::cpu::kv_pack::PackRows;
use crate::gpu::context::Scratch;
use crate::gpu::embed_gather::EmbedBuffers;
use crate::gpu::flash_io::{FlashBuffers, FlashLaunch};
use crate::gpu::launch::Dispatch;
use crate::gpu::lm_weights::{LayerBuffers, Matrix, check_sizes};
pub use crate::gpu::lm_weights::{LmGeometry, LmWeights};
use crate::gpu::matmul::{MatmulBuffers, MatmulLaunch};
use crate::gpu::packed_attention::{PackedBuffers, PackedLaunch};
use crate::gpu::rms_norm::{NormBuffers, NormConstants};
use crate::gpu::rope::{self, Heads, SplitBuffers};
use crate::gpu::row_softmax::{RowBuffers, RowLaunch, RowOutput};
use crate::gpu::{GpuContext, GpuError, Kernels};
use crate::model::config::Positional;
use crate::model::kv_evict::EvictPolicy;
use crate::model::kv_packed::{KiviCache, PackedCaches, PackedLayout};
use crate::model::kv_quant::{KvLayout, KvScheme, KvTensor};

#[path = "lm_evict.rs"]
mod evict;
pub use evict::run_with_eviction;
#[path = "lm_paged.rs"]
mod paged;
pub use paged::{LmPagedCache, decode_paged, prepare_decode_paged};

/// What a pass returns besides the last position's logits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LmRequest {
    /// Logits of the last this many positions (`None`: of every position).
    pub last_logits: Option<u32>,
    /// Every layer's probabilities, `[h_q, tokens, tokens]` each.
    pub probabilities: bool,
    /// The hidden states after every layer, `[tokens, d_model]` each.
    pub hidden_states: bool,
    /// Every layer's attention output per head before W_O, `[tokens, h_q * head_dim]` each.
    pub head_outputs: bool,
}

/// The results of one pass.
#[derive(Clone, Debug, PartialEq)]
pub struct LmOutput {
    pub tokens: usize,
    /// `[logit_rows, vocab]`: positions `tokens - logit_rows..tokens`.
    pub logits: Vec<f32>,
    pub logit_rows: usize,
    /// Per layer, when asked: `[h_q, tokens, tokens]`, 0 outside the layer's mask.
    pub probs: Vec<Vec<f32>>,
    /// Per layer, when asked: `[tokens, d_model]`, the residual stream after it.
    pub hidden: Vec<Vec<f32>>,
    /// Per layer, when asked: `[tokens, h_q * head_dim]`, each head's attention output before W_O.
    pub attended: Vec<Vec<f32>>,
}

/// One step of a recorded pass.
enum Step {
    Dispatch(Dispatch),
    /// Copy the hidden states and head outputs after this layer out, as asked (between compute passes).
    SaveHidden(u32),
    /// Copy this layer's new K and V rows into the KV cache (between compute passes).
    CacheKv(usize),
    /// An evicting cache decides what this layer's queries read (the submission ends here: the
    /// policy reads the layer's Q and K back, `lm_evict.rs`).
    Evict(usize),
}

/// A pass with its buffers made and its launches prepared: submit it (again, for a benchmark) and read
/// its results.
pub struct PreparedLm<'a> {
    geometry: LmGeometry,
    tokens: u32,
    logit_rows: u32,
    steps: Vec<Step>,
    /// The activations, by the names of [`LmGeometry::activations`] (plus `act`): alive while the
    /// launches that bind them may run.
    activations: Vec<(&'static str, Scratch<'a>)>,
    logits: Scratch<'a>,
    probs: Vec<Scratch<'a>>,
    hidden: Option<Scratch<'a>>,
    attended: Option<Scratch<'a>>,
    /// Decoding against a KV cache: where the new tokens' K and V go and what attention reads.
    cache: Option<CacheView>,
    kv_scheme: KvScheme,
    /// An evicting cache's policy, K and the buffer of each layer's kept list (`lm_evict.rs`).
    eviction: Option<evict::Evicting<'a>>,
}

/// A KV cache on the GPU for decoding: every layer's K and V, of which the first `len` rows of each
/// KV head are filled. Generation prefills it with the prompt, then adds one token a pass.
/// The f32 cache holds `[h_kv, capacity, d]` floats a layer. A quantised one is packed: each token's
/// vectors are quantised as they join (`kv_pack`) into `[h_kv, capacity, words]` u32 words of the
/// scheme's codes and scales ([`PackedLayout`]); KIVI's tokens wait in an f32 ring until they leave
/// its recent window, then K's whole blocks and V's tokens are quantised ([`KiviCache`]).
/// `packed_attention` dequantises them as it reads, so the cache holds, and a step reads, the
/// scheme's bytes.
pub struct LmCache {
    k: Vec<wgpu::Buffer>,
    v: Vec<wgpu::Buffer>,
    capacity: u32,
    len: u32,
    scheme: KvScheme,
    /// How the tokens are packed (`None`: the f32 cache; KIVI's with no tokens).
    packed: Option<PackedCaches>,
    h_kv: u32,
}

impl LmCache {
    /// An empty f32 cache for `capacity` tokens, its size checked against the job limit first.
    pub fn new(ctx: &GpuContext, weights: &LmWeights, capacity: u32) -> Result<Self, GpuError> {
        Self::stored_as(ctx, weights, capacity, KvScheme::Fp32)
    }

    /// An empty cache for `capacity` tokens stored as `scheme`: f32 rows for `Fp32`, packed words
    /// for a scheme with a packed form, so each token is quantised once, when it joins: fp16, int8,
    /// int4 and int2 in groups along the head, and fp8, whose scale (per tensor or per KV head) the
    /// prompt's values set and later tokens keep (past it they saturate). KIVI's tokens wait in f32
    /// until they leave its recent window; then K's whole blocks of G tokens and V's tokens are
    /// quantised, never again (its quantised tokens depend only on how many there are).
    pub fn stored_as(ctx: &GpuContext, weights: &LmWeights, capacity: u32, scheme: KvScheme) -> Result<Self, GpuError> {
        let d = weights.geometry.head_dim;
        let packed = PackedLayout::of(scheme, d)
            .map(PackedCaches::Rows)
            .or_else(|| KiviCache::decoding(scheme, d, capacity).map(PackedCaches::Kivi));
        if packed.is_none() && scheme != KvScheme::Fp32 {
            return Err(refused(scheme));
        }
        Self::allocate(ctx, weights, capacity, scheme, packed)
    }

    /// An f32 cache holding each token rounded to `scheme`'s values as it joins (`kv_quant` on the
    /// new rows): the numbers a packed cache of the scheme decodes to, at f32's bytes. The yardstick
    /// the packed cache is checked against (`tests/gpu_lm.rs`).
    pub fn rounded_f32(
        ctx: &GpuContext,
        weights: &LmWeights,
        capacity: u32,
        scheme: KvScheme,
    ) -> Result<Self, GpuError> {
        if !scheme.rounds_each_token_alone() {
            return Err(refused(scheme));
        }
        Self::allocate(ctx, weights, capacity, scheme, None)
    }

    fn allocate(
        ctx: &GpuContext,
        weights: &LmWeights,
        capacity: u32,
        scheme: KvScheme,
        packed: Option<PackedCaches>,
    ) -> Result<Self, GpuError> {
        let g = weights.geometry;
        let f32_rows = u64::from(g.h_kv) * u64::from(capacity) * u64::from(g.head_dim);
        let words = |tensor| packed.map_or(f32_rows, |caches| caches.words(tensor, g.h_kv, capacity));
        let buffers: Vec<(&str, u64)> =
            (0..g.layers).flat_map(|_| [("KV cache", words(KvTensor::K)), ("KV cache", words(KvTensor::V))]).collect();
        check_sizes(ctx, &format!("A KV cache of {capacity} tokens"), &buffers)?;
        let make = |tensor| {
            (0..g.layers).map(|_| ctx.storage_output("KV cache", words(tensor) * 4)).collect::<Result<Vec<_>, _>>()
        };
        Ok(Self { k: make(KvTensor::K)?, v: make(KvTensor::V)?, capacity, len: 0, scheme, packed, h_kv: g.h_kv })
    }

    /// Tokens cached so far.
    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How the cache stores K and V.
    pub fn scheme(&self) -> KvScheme {
        self.scheme
    }

    /// Whether the cache holds the scheme's own bits (codes and scales, dequantised by the
    /// attention kernel as it reads), rather than f32 rows.
    pub fn is_packed(&self) -> bool {
        self.packed.is_some()
    }

    /// Bytes one token takes in the cache, every layer's K and V: its buffers' bytes, less their fixed
    /// part, over their tokens (what was allocated, not a formula). KIVI's K and V are counted apart:
    /// each over the tokens its packed part has room for (K's whole blocks, V's older tokens).
    pub fn bytes_per_token(&self) -> u64 {
        let layers = self.k.len() as u64;
        let over = |buffers: &[wgpu::Buffer], fixed: u64, tokens: u32| {
            let bytes: u64 = buffers.iter().map(wgpu::Buffer::size).sum();
            (bytes - layers * fixed).checked_div(u64::from(tokens)).unwrap_or(0)
        };
        match self.packed {
            Some(PackedCaches::Kivi(kivi)) => {
                let part = |tensor| {
                    let ring = 4 * u64::from(self.h_kv) * u64::from(kivi.ring(tensor)) * u64::from(kivi.d);
                    let buffers = if tensor == KvTensor::K { &self.k } else { &self.v };
                    over(buffers, ring, kivi.packed_capacity(tensor))
                };
                part(KvTensor::K) + part(KvTensor::V)
            }
            _ => over(&[self.k.as_slice(), &self.v].concat(), self.fixed_bytes() / layers.max(1), self.capacity),
        }
    }

    /// Bytes that do not grow with the tokens: fp8's tails of scales, one a layer's K and V; KIVI's
    /// f32 rings of the tokens waiting to be quantised (K's R + G - 1 rows, as a block short of G
    /// waits too, and V's R: more than the scheme's own figure, which counts R of each).
    pub fn fixed_bytes(&self) -> u64 {
        let layers = self.k.len() as u64;
        match self.packed {
            Some(PackedCaches::Rows(layout)) => 2 * layers * u64::from(layout.tail_words(self.h_kv)) * 4,
            Some(PackedCaches::Kivi(kivi)) => layers * kivi.ring_bytes(self.h_kv),
            None => 0,
        }
    }
}

/// Why a decode cache cannot be stored as `scheme` (packed: a scheme with no packed form; f32 of
/// rounded values: one whose tokens are not rounded alone, as they join).
fn refused(scheme: KvScheme) -> GpuError {
    let why = if scheme.rounds_each_token_alone() { "has no packed form" } else { "shares scales across tokens" };
    GpuError::InvalidInput(format!("a cache of values rounded as each token joins: {} {why}", scheme.name()))
}

/// What one cached pass needs of the cache: its buffers, and the row its new tokens start at.
struct CacheView {
    k: Vec<wgpu::Buffer>,
    v: Vec<wgpu::Buffer>,
    capacity: u32,
    start: u32,
    /// The rounding an f32 cache's new rows get (`Fp32`: none; a packed cache quantises as it stores).
    rounding: KvScheme,
    packed: Option<PackedCaches>,
    /// An f32 cache in pages of one pool, read through each layer's page table (`lm_paged.rs`).
    paged: Option<paged::PagedView>,
}

impl CacheView {
    /// Whether this pass's attention reads the cache (a paged prefill reads its own K and V).
    fn attended(&self) -> bool {
        !self.paged.as_ref().is_some_and(|p| p.own_rows)
    }
}

impl PreparedLm<'_> {
    /// Every launch in order (the benchmark times them in one compute pass; hidden-state copies left out).
    pub fn dispatches(&self) -> Vec<&Dispatch> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Dispatch(d) => Some(d),
                Step::SaveHidden(_) | Step::CacheKv(_) | Step::Evict(_) => None,
            })
            .collect()
    }

    /// Records every step into one command encoder (a compute pass between hidden-state copies) and
    /// submits it.
    pub fn submit(&self, ctx: &GpuContext) -> wgpu::SubmissionIndex {
        self.submit_steps(ctx, &self.steps)
    }

    /// Records `steps` (some of this pass's) into one command encoder and submits it.
    fn submit_steps(&self, ctx: &GpuContext, steps: &[Step]) -> wgpu::SubmissionIndex {
        let mut encoder =
            ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("lm forward") });
        let mut steps = steps.iter().peekable();
        while steps.peek().is_some() {
            {
                let mut pass =
                    encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
                while let Some(Step::Dispatch(d)) = steps.peek() {
                    d.record(&mut pass);
                    steps.next();
                }
            }
            match (steps.next(), &self.cache) {
                (Some(Step::SaveHidden(layer)), _) => self.save_layer(&mut encoder, *layer),
                (Some(Step::CacheKv(layer)), Some(cache)) => self.copy_into_cache(&mut encoder, cache, *layer),
                _ => {}
            }
        }
        ctx.queue.submit([encoder.finish()])
    }

    /// The hidden states (`x`) and head outputs (`attended`) after `layer`, where asked for.
    fn save_layer(&self, encoder: &mut wgpu::CommandEncoder, layer: u32) {
        let g = self.geometry;
        let outputs = [(&self.hidden, "x", u64::from(g.d_model)), (&self.attended, "attended", g.q_width())];
        for (out, name, width) in outputs {
            if let Some(out) = out {
                let bytes = u64::from(self.tokens) * width * 4;
                encoder.copy_buffer_to_buffer(self.buffer(name), 0, out, u64::from(layer) * bytes, bytes);
            }
        }
    }

    /// Each KV head's new rows (`[h_kv, tokens, d]` in `k` and `v`) to rows `start..` of the cache's
    /// `[h_kv, capacity, d]`.
    fn copy_into_cache(&self, encoder: &mut wgpu::CommandEncoder, cache: &CacheView, layer: usize) {
        if let Some(paged) = &cache.paged {
            let (new, pool) = ([self.buffer("k"), self.buffer("v")], [&cache.k[layer], &cache.v[layer]]);
            let g = self.geometry;
            return paged.copy_rows(encoder, new, pool, (g.h_kv, self.tokens, g.head_dim), layer);
        }
        let row_bytes = u64::from(self.geometry.head_dim) * 4;
        let new_bytes = u64::from(self.tokens) * row_bytes;
        for g in 0..u64::from(self.geometry.h_kv) {
            let at = (g * u64::from(cache.capacity) + u64::from(cache.start)) * row_bytes;
            encoder.copy_buffer_to_buffer(self.buffer("k"), g * new_bytes, &cache.k[layer], at, new_bytes);
            encoder.copy_buffer_to_buffer(self.buffer("v"), g * new_bytes, &cache.v[layer], at, new_bytes);
        }
    }

    fn buffer(&self, name: &str) -> &wgpu::Buffer {
        let (_, buffer) = self.activations.iter().find(|(n, _)| *n == name).expect("every activation is made");
        buffer
    }

    /// Reads the results of the last submission back, in as few round trips as
    /// [`GpuContext::read_back_all`] gathers them.
    pub async fn read(&self, ctx: &GpuContext) -> Result<LmOutput, GpuError> {
        let (t, d) = (self.tokens as usize, self.geometry.d_model as usize);
        let per_layer = [&self.hidden, &self.attended].map(|b| b.as_deref());
        let buffers: Vec<&wgpu::Buffer> = std::iter::once(&*self.logits)
            .chain(self.probs.iter().map(|b| &**b))
            .chain(per_layer.iter().flatten().copied())
            .collect();
        let mut values = ctx.read_back_all::<f32>(&buffers).await?.into_iter();
        let mut logits = values.next().unwrap_or_default();
        logits.truncate(self.logit_rows as usize * self.geometry.vocab as usize);
        let probs = (0..self.probs.len())
            .map(|_| {
                let mut p = values.next().unwrap_or_default();
                p.truncate(self.geometry.h_q as usize * t * t);
                p
            })
            .collect();
        let mut layers = |present: bool, floats: usize| match present {
            true => self.per_layer(values.next().unwrap_or_default(), floats),
            false => Vec::new(),
        };
        let hidden = layers(self.hidden.is_some(), t * d);
        let attended = layers(self.attended.is_some(), t * self.geometry.q_width() as usize);
        Ok(LmOutput { tokens: t, logits, logit_rows: self.logit_rows as usize, probs, hidden, attended })
    }

    /// One buffer's every layer's `floats` values, one vector a layer.
    fn per_layer(&self, all: Vec<f32>, floats: usize) -> Vec<Vec<f32>> {
        all.chunks_exact(floats).take(self.geometry.layers as usize).map(<[f32]>::to_vec).collect()
    }
}

/// Runs the whole pass for `ids` and reads the results back.
pub async fn run(
    ctx: &GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    ids: &[u32],
    request: LmRequest,
) -> Result<LmOutput, GpuError> {
    run_with_kv_scheme(ctx, kernels, weights, ids, request, KvScheme::Fp32).await
}

/// [`run`] over a KV cache stored as `scheme`. Every scheme but f32 is packed: every layer's K
/// (rotated) and V are quantised into a packed cache of the text ([`PackedLayout`], `kv_pack`; fp8's
/// scale from the whole text's values; KIVI's blocks of tokens counted from the first token, its
/// recent tokens and K's partial block f32 rows, [`KiviCache`]) that `packed_attention` reads,
/// dequantising as it reads; K and V are also rounded in place to the same values for the
/// probability rows (`row_softmax` reads f32). `KvScheme::Fp32` leaves K and V as they are.
pub async fn run_with_kv_scheme(
    ctx: &GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    ids: &[u32],
    request: LmRequest,
    scheme: KvScheme,
) -> Result<LmOutput, GpuError> {
    let prepared = prepare_pass(ctx, kernels, weights, ids, request, Passing::Scheme(scheme)).await?;
    prepared.submit(ctx);
    prepared.read(ctx).await
}

/// Builds the fast forms of a pass's kernels where launches take a quick one until then (CPU
/// adapters in the browser): the forward kernel's subgroup form for the model's heads
/// ([`FlashAttention::warm_up`](crate::gpu::flash_attention::FlashAttention::warm_up)) and the row
/// softmax's form for its probability rows over `tokens`. Call after reading a pass back: a browser
/// compiles at the first dispatch, while the page draws, and the next pass takes them.
pub fn warm_up(ctx: &GpuContext, kernels: &Kernels, weights: &LmWeights, tokens: u32) {
    let g = weights.geometry;
    kernels.flash.warm_up(ctx, g.head_dim);
    let shape = AttentionShape { h_q: g.h_q, h_kv: g.h_kv, n_q: tokens, n_kv: tokens, d: g.head_dim };
    kernels.rows.warm_up(ctx, shape, RowOutput::Probabilities);
}

/// Runs `ids`, the tokens after those already in `cache`, against it (the first call prefills it with
/// the prompt, each later one adds a generated token), and returns the logits after the last of
/// them; their K and V join the cache.
pub async fn decode(
    ctx: &GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    cache: &mut LmCache,
    ids: &[u32],
) -> Result<Vec<f32>, GpuError> {
    let end = room_for(cache.len, cache.capacity, ids.len())?;
    let prepared = prepare_decode(ctx, kernels, weights, cache, ids).await?;
    prepared.submit(ctx);
    let out = prepared.read(ctx).await?;
    cache.len = end;
    Ok(out.logits)
}

/// Prepares the pass [`decode`] runs for `ids` against `cache`, adding nothing to it (the benchmark
/// times it). A KIVI cache's pass is not to be submitted twice: its second submission would quantise
/// tokens from ring rows its first has overwritten.
pub async fn prepare_decode<'a>(
    ctx: &'a GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    cache: &LmCache,
    ids: &[u32],
) -> Result<PreparedLm<'a>, GpuError> {
    room_for(cache.len, cache.capacity, ids.len())?;
    let (k, v) = (cache.k.clone(), cache.v.clone());
    let rounding = if cache.packed.is_some() { KvScheme::Fp32 } else { cache.scheme };
    let end = cache.len + ids.len() as u32;
    let packed = cache.packed.map(|caches| match caches {
        PackedCaches::Kivi(kivi) => PackedCaches::Kivi(kivi.holding(end)),
        rows => rows,
    });
    let view = CacheView { k, v, capacity: cache.capacity, start: cache.len, rounding, packed, paged: None };
    let request = LmRequest { last_logits: Some(1), ..Default::default() };
    prepare_pass(ctx, kernels, weights, ids, request, Passing::Cached(view)).await
}

/// The length of a cache of `len` tokens (of `capacity`) after `tokens` more, or why they do not fit.
fn room_for(len: u32, capacity: u32, tokens: usize) -> Result<u32, GpuError> {
    let fits = u32::try_from(tokens).ok().and_then(|t| len.checked_add(t)).filter(|&end| end <= capacity);
    fits.ok_or_else(|| {
        GpuError::LimitExceeded(format!("{tokens} more tokens after {len} do not fit a KV cache of {capacity}"))
    })
}

/// Checks the request, makes the pass's buffers and prepares every launch.
pub async fn prepare<'a>(
    ctx: &'a GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    ids: &[u32],
    request: LmRequest,
) -> Result<PreparedLm<'a>, GpuError> {
    prepare_pass(ctx, kernels, weights, ids, request, Passing::Scheme(KvScheme::Fp32)).await
}

/// What a pass does with its K and V besides attending over them.
enum Passing {
    /// Rounds them to a quantised cache's values (`Fp32`: leaves them).
    Scheme(KvScheme),
    /// Appends them to a decode cache and attends over it.
    Cached(CacheView),
    /// Runs an evicting cache over them: each query reads its kept entries only.
    Evicted(EvictPolicy, usize),
}

async fn prepare_pass<'a>(
    ctx: &'a GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    ids: &[u32],
    request: LmRequest,
    passing: Passing,
) -> Result<PreparedLm<'a>, GpuError> {
    let g = weights.geometry;
    let tokens = check_ids(ids, g.vocab)?;
    let logit_rows = request.last_logits.unwrap_or(tokens).clamp(1, tokens);
    let t = u64::from(tokens);
    let mut sizes = g.activations(t).to_vec();
    sizes.push(("act", t * u64::from(g.ffn)));
    sizes.push(("logits", u64::from(logit_rows) * u64::from(g.vocab)));
    let probs_floats = u64::from(g.h_q) * t * t;
    if request.probabilities {
        sizes.extend((0..g.layers).map(|_| ("probabilities", probs_floats)));
    }
    if request.hidden_states {
        sizes.push(("hidden states", u64::from(g.layers) * t * u64::from(g.d_model)));
    }
    if request.head_outputs {
        sizes.push(("head outputs", u64::from(g.layers) * t * g.q_width()));
    }
    if let Passing::Evicted(policy, keep) = passing {
        sizes.push(("kept list", evict::list_words(policy, keep, tokens)));
    }
    let packed_pass = match passing {
        Passing::Scheme(scheme) => PackedLayout::of(scheme, g.head_dim)
            .map(PackedCaches::from)
            .or_else(|| KiviCache::of(scheme, g.head_dim, tokens).map(PackedCaches::Kivi)),
        _ => None,
    };
    if let Some(caches) = packed_pass {
        let words = |tensor| caches.words(tensor, g.h_kv, tokens);
        sizes.extend([("packed K", words(KvTensor::K)), ("packed V", words(KvTensor::V))]);
    }
    check_sizes(ctx, &format!("A forward pass over {tokens} tokens"), &sizes)?;

    let ids_buffer = ctx.scratch_from("ids", ids).await?;
    let mut activations = Vec::new();
    for (name, floats) in g.activations(t).into_iter().chain([("act", t * u64::from(g.ffn))]) {
        activations.push((name, ctx.scratch_output(name, floats * 4)?));
    }
    let mut probs = Vec::new();
    if request.probabilities {
        for _ in 0..g.layers {
            probs.push(ctx.scratch_output("probabilities", probs_floats * 4)?);
        }
    }
    let hidden = match request.hidden_states {
        true => Some(ctx.scratch_output("hidden states", u64::from(g.layers) * t * u64::from(g.d_model) * 4)?),
        false => None,
    };
    let attended = match request.head_outputs {
        true => Some(ctx.scratch_output("head outputs", u64::from(g.layers) * t * g.q_width() * 4)?),
        false => None,
    };
    let logits = ctx.scratch_output("logits", u64::from(logit_rows) * u64::from(g.vocab) * 4)?;
    let (cache, kv_scheme, eviction) = match passing {
        Passing::Scheme(scheme) => (packed_pass.map(|l| packed_view(ctx, g, tokens, l)).transpose()?, scheme, None),
        Passing::Cached(view) => {
            let rounding = view.rounding;
            (Some(view), rounding, None)
        }
        Passing::Evicted(policy, keep) => {
            (None, KvScheme::Fp32, Some(evict::Evicting::new(ctx, policy, keep, tokens, request)?))
        }
    };
    let mut prepared = PreparedLm {
        geometry: g,
        tokens,
        logit_rows,
        steps: Vec::new(),
        activations,
        logits,
        probs,
        hidden,
        attended,
        cache,
        kv_scheme,
        eviction,
    };
    let steps = Recorder { ctx, kernels, weights, pass: &prepared, ids: &ids_buffer }.steps()?;
    prepared.steps = steps;
    Ok(prepared)
}

/// A packed cache for a whole pass over `tokens` tokens, one K and one V buffer that every layer
/// fills in turn (each layer's attention reads it before the next layer packs into it).
fn packed_view(ctx: &GpuContext, g: LmGeometry, tokens: u32, caches: PackedCaches) -> Result<CacheView, GpuError> {
    let bytes = |tensor| caches.words(tensor, g.h_kv, tokens) * 4;
    let (k, v) =
        (ctx.storage_output("packed K", bytes(KvTensor::K))?, ctx.storage_output("packed V", bytes(KvTensor::V))?);
    let layers = g.layers as usize;
    Ok(CacheView {
        k: vec![k; layers],
        v: vec![v; layers],
        capacity: tokens,
        start: 0,
        rounding: KvScheme::Fp32,
        packed: Some(caches),
        paged: None,
    })
}

/// The number of tokens, after checking each id against the vocabulary.
fn check_ids(ids: &[u32], vocab: u32) -> Result<u32, GpuError> {
    if ids.is_empty() {
        return Err(GpuError::InvalidInput("the forward pass needs at least one token".into()));
    }
    if let Some(bad) = ids.iter().find(|&&id| id >= vocab) {
        return Err(GpuError::InvalidInput(format!("token id {bad} is outside the vocabulary of {vocab}")));
    }
    u32::try_from(ids.len()).map_err(|_| GpuError::LimitExceeded(format!("{} tokens", ids.len())))
}

/// Prepares the launches of one pass over the buffers of `pass`.
struct Recorder<'p, 'a> {
    ctx: &'a GpuContext,
    kernels: &'p Kernels,
    weights: &'p LmWeights,
    pass: &'p PreparedLm<'a>,
    ids: &'p wgpu::Buffer,
}

impl Recorder<'_, '_> {
    fn steps(&self) -> Result<Vec<Step>, GpuError> {
        let (ctx, k, g, pass) = (self.ctx, self.kernels, self.weights.geometry, self.pass);
        let b = |name| pass.buffer(name);
        let mut steps = Vec::new();
        let table = &self.weights.embed;
        let embed = EmbedBuffers { ids: self.ids, embed: &table.buffer, format: table.format, out: b("x") };
        let scale = self.weights.style.embed_scale;
        steps.push(Step::Dispatch(k.embed_gather.prepare(ctx, &embed, pass.tokens, g.d_model, scale)?));
        let mut tables: Vec<(Positional, wgpu::Buffer, RopeTable)> = Vec::new();
        for (l, layer) in self.weights.layers.iter().enumerate() {
            if !tables.iter().any(|(p, ..)| *p == layer.positional) {
                let start = pass.cache.as_ref().map_or(0, |c| c.start as usize);
                let positions = start..start + pass.tokens as usize;
                let table =
                    RopeTable::scaled(positions, g.head_dim as usize, layer.positional, self.weights.rope_scaling);
                let angles = rope::angles(&table);
                let buffer =
                    ctx.storage_from("rope angles", if angles.is_empty() { &[[0.0; 2]; 2] } else { &angles })?;
                tables.push((layer.positional, buffer, table));
            }
            let (_, angles, table) = tables.iter().find(|(p, ..)| *p == layer.positional).expect("just added");
            steps.extend(self.layer_input(layer, angles, table)?.into_iter().map(Step::Dispatch));
            // A packed cache takes the values as computed (it quantises them itself); K and V are
            // rounded in place after that (a pass's probability rows read K as f32), and before an
            // f32 cache copies them.
            if let Some(cache @ CacheView { packed: Some(caches), .. }) = &pass.cache {
                steps.extend(self.packed_kv(l, cache, *caches)?.into_iter().map(Step::Dispatch));
            }
            steps.extend(self.quantised_kv()?.into_iter().map(Step::Dispatch));
            if let Some(CacheView { packed: None, .. }) = &pass.cache {
                steps.push(Step::CacheKv(l));
            }
            if pass.eviction.is_some() {
                steps.push(Step::Evict(l));
            }
            steps.extend(self.layer(layer, l)?.into_iter().map(Step::Dispatch));
            if pass.hidden.is_some() || pass.attended.is_some() {
                steps.push(Step::SaveHidden(l as u32));
            }
        }
        steps.push(Step::Dispatch(self.norm(b("x"), &self.weights.final_norm)?));
        let head = self.weights.lm_head.as_ref().unwrap_or(&self.weights.embed);
        let launch = MatmulLaunch {
            x_row0: pass.tokens - pass.logit_rows,
            ..MatmulLaunch::new(pass.logit_rows, g.d_model, g.vocab)
        };
        steps.push(Step::Dispatch(self.matmul(b("h"), head, None, &pass.logits, launch)?));
        Ok(steps)
    }

    /// The launches of one layer up to its rotated Q, K and V (see the module's diagram).
    fn layer_input(
        &self,
        layer: &LayerBuffers,
        angles: &wgpu::Buffer,
        table: &RopeTable,
    ) -> Result<Vec<Dispatch>, GpuError> {
        let (ctx, k, g, pass) = (self.ctx, self.kernels, self.weights.geometry, self.pass);
        let b = |name| pass.buffer(name);
        let t = pass.tokens;
        let heads = Heads { tokens: t, h_q: g.h_q, h_kv: g.h_kv, d: g.head_dim };
        let qkv_width = g.qkv_width() as u32;
        let split = SplitBuffers { qkv: b("qkv"), angles, q: b("q"), k: b("k"), v: b("v") };
        let mut out = vec![
            self.norm(b("x"), &layer.input_norm)?,
            self.matmul(
                b("h"),
                &layer.qkv,
                layer.qkv_bias.as_ref(),
                b("qkv"),
                MatmulLaunch::new(t, g.d_model, qkv_width),
            )?,
        ];
        if let Some(weight) = &layer.qk_norm {
            out.push(k.qk_norm.prepare(ctx, b("qkv"), weight, heads, self.norm_constants())?);
        }
        out.push(k.rope.prepare_split(ctx, &split, heads, table)?);
        Ok(out)
    }

    /// The layer's K and V (`[h_kv, T, d]`) rounded in place to the request's KV scheme.
    fn quantised_kv(&self) -> Result<Vec<Dispatch>, GpuError> {
        let (g, pass) = (self.weights.geometry, self.pass);
        let (t, d) = (pass.tokens, g.head_dim);
        let layout = KvLayout { heads: g.h_kv, tokens: t, d, head_stride: t * d, token_stride: d };
        let mut out = Vec::new();
        for (tensor, name) in [(KvTensor::K, "k"), (KvTensor::V, "v")] {
            if let Some(rounding) = pass.kv_scheme.pass(tensor, t) {
                out.extend(self.kernels.kv_quant.prepare(self.ctx, pass.buffer(name), layout, &rounding)?);
            }
        }
        Ok(out)
    }

    /// Layer `l`'s new K and V (`[h_kv, T, d]`) quantised into rows `start..` of the packed `cache`
    /// (KIVI's: joining it, the tokens they push out of the recent window quantised).
    fn packed_kv(&self, l: usize, cache: &CacheView, caches: PackedCaches) -> Result<Vec<Dispatch>, GpuError> {
        let (heads, tokens) = (self.weights.geometry.h_kv, self.pass.tokens);
        let (ctx, kv_pack, b) = (self.ctx, &self.kernels.kv_pack, |x| self.pass.buffer(x));
        match caches {
            PackedCaches::Rows(layout) => {
                let rows = PackRows { heads, tokens, capacity: cache.capacity, start: cache.start };
                let pack = |x, packed| kv_pack.prepare(ctx, b(x), packed, rows, layout);
                Ok([pack("k", &cache.k[l])?, pack("v", &cache.v[l])?].concat())
            }
            PackedCaches::Kivi(kivi) => {
                let pack = |x, packed, tensor| kv_pack.prepare_kivi(ctx, b(x), packed, (heads, tokens), kivi, tensor);
                Ok([pack("k", &cache.k[l], KvTensor::K)?, pack("v", &cache.v[l], KvTensor::V)?].concat())
            }
        }
    }

    /// The rest of one layer: attention (over the cache's rows when decoding), the output
    /// projection and the MLP.
    fn layer(&self, layer: &LayerBuffers, l: usize) -> Result<Vec<Dispatch>, GpuError> {
        let (ctx, k, g, pass) = (self.ctx, self.kernels, self.weights.geometry, self.pass);
        let b = |name| pass.buffer(name);
        let t = pass.tokens;
        let heads = Heads { tokens: t, h_q: g.h_q, h_kv: g.h_kv, d: g.head_dim };
        let (keys, values, n_kv, kv_stride) = match &pass.cache {
            Some(c) if c.attended() => (&c.k[l], &c.v[l], c.start + t, c.capacity),
            _ => (b("k"), b("v"), t, t),
        };
        let shape = AttentionShape { h_q: g.h_q, h_kv: g.h_kv, n_q: t, n_kv, d: g.head_dim };
        let scale = self.weights.style.attn_scale;
        let q_width = g.q_width() as u32;
        let mut out = Vec::new();
        if let (Some(evicting), Some(probs)) = (&pass.eviction, pass.probs.get(l)) {
            out.push(evicting.attention(ctx, k, [b("q"), b("k"), b("v"), b("o"), probs], shape, scale)?);
        } else if let Some(CacheView { packed: Some(caches), capacity, .. }) = &pass.cache {
            let packed = PackedBuffers { q: b("q"), k: keys, v: values, o: b("o") };
            let launch = PackedLaunch { shape, kv_stride: *capacity, caches: *caches, mask: layer.mask, scale };
            out.extend(k.packed.prepare(ctx, &packed, launch)?);
        } else if let Some(CacheView { paged: Some(paged), .. }) = pass.cache.as_ref().filter(|c| c.attended()) {
            let buffers = FlashBuffers { q: b("q"), k: keys, v: values, o: b("o"), lse: b("lse") };
            out.push(paged.attention(ctx, k, &buffers, (l, shape, layer.mask, scale))?);
        } else {
            let flash = FlashBuffers { q: b("q"), k: keys, v: values, o: b("o"), lse: b("lse") };
            out.push(k.flash.prepare_fastest(
                ctx,
                &flash,
                FlashLaunch { shape, kv_stride, mask: layer.mask, scale },
            )?);
        }
        if let (Some(probs), None) = (pass.probs.get(l), &pass.eviction) {
            let launch = RowLaunch { shape, q_offset: 0, mask: layer.mask, scale, output: RowOutput::Probabilities };
            out.push(k.rows.prepare(ctx, &RowBuffers { q: b("q"), k: b("k"), out: probs }, launch)?);
        }
        out.push(k.rope.prepare_merge(ctx, b("o"), b("attended"), heads)?);
        let norms = layer.output_norms.as_ref();
        out.extend(self.residual(b("attended"), &layer.o, q_width, norms.map(|n| &n.attention))?);
        out.push(self.norm(b("x"), &layer.mlp_norm)?);
        out.push(self.matmul(
            b("h"),
            &layer.gate_up,
            None,
            b("gate_up"),
            MatmulLaunch::new(t, g.d_model, 2 * g.ffn),
        )?);
        out.push(k.swiglu.prepare(ctx, b("gate_up"), b("act"), t, g.ffn, self.weights.style.gate)?);
        out.extend(self.residual(b("act"), &layer.down, g.ffn, norms.map(|n| &n.mlp))?);
        Ok(out)
    }

    /// A block's output projection of `x` (`inputs` wide) added to the residual stream: straight
    /// into `x`, or through `h` and Gemma 3's output norm `out_norm`.
    fn residual(
        &self,
        x: &wgpu::Buffer,
        w: &Matrix,
        inputs: u32,
        out_norm: Option<&wgpu::Buffer>,
    ) -> Result<Vec<Dispatch>, GpuError> {
        let (t, d) = (self.pass.tokens, self.weights.geometry.d_model);
        let (residual, h) = (self.pass.buffer("x"), self.pass.buffer("h"));
        Ok(match out_norm {
            None => {
                let launch = MatmulLaunch { accumulate: true, ..MatmulLaunch::new(t, inputs, d) };
                vec![self.matmul(x, w, None, residual, launch)?]
            }
            Some(weight) => vec![
                self.matmul(x, w, None, h, MatmulLaunch::new(t, inputs, d))?,
                self.rms_norm(NormBuffers { x: h, weight, out: residual, accumulate: true })?,
            ],
        })
    }

    /// `h = rms_norm(x) * weight` over every token.
    fn norm(&self, x: &wgpu::Buffer, weight: &wgpu::Buffer) -> Result<Dispatch, GpuError> {
        self.rms_norm(NormBuffers { x, weight, out: self.pass.buffer("h"), accumulate: false })
    }

    fn rms_norm(&self, buffers: NormBuffers<'_>) -> Result<Dispatch, GpuError> {
        let d = self.weights.geometry.d_model;
        self.kernels.rms_norm.prepare(self.ctx, &buffers, self.pass.tokens, d, self.norm_constants())
    }

    fn norm_constants(&self) -> NormConstants {
        NormConstants { eps: self.weights.rms_norm_eps, offset: self.weights.style.norm_offset }
    }

    fn matmul(
        &self,
        x: &wgpu::Buffer,
        w: &Matrix,
        bias: Option<&wgpu::Buffer>,
        y: &wgpu::Buffer,
        launch: MatmulLaunch,
    ) -> Result<Dispatch, GpuError> {
        let buffers = MatmulBuffers { x, w: &w.buffer, w_format: w.format, bias, y };
        self.kernels.matmul.prepare(self.ctx, &buffers, launch)
    }
}
