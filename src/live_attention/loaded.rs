//! A model with real weights, loaded: the trained model or a checkpoint the user dropped. Its
//! weights are uploaded once per GPU device and its forward pass runs on the GPU
//! (`gpu::lm_forward`) or, without WebGPU, on the CPU in steps that let the browser in. The last pass
//! is kept, so switching layers or heads, and the next generated token, reuse it. Fetching its files
//! is the page's (`ui/trained_compute.rs`).

use std::cell::RefCell;
use std::rc::Rc;

use crate::engine::{Engine, Job};
use crate::event_loop::{breathe, now_ms, resumed};
use crate::gpu::GpuContext;
use crate::gpu::kernels::Kernels;
use crate::gpu::lm_forward::{self, LmCache, LmPagedCache, LmRequest, LmWeights};
use crate::lm::bpe::Tokenizer;
use crate::lm::checkpoint::Checkpoint;
use crate::lm::forward::{CpuPass, max_tokens, max_tokens_of};
use crate::model::Model;
use crate::model::kv_quant::KvScheme;
use crate::model::paging::PoolUse;

/// A model with real weights, loaded: the trained model, or a checkpoint the user dropped.
pub struct LoadedLm {
    pub model: Model,
    pub tokenizer: Tokenizer,
    /// The most tokens it reads (its trained length, or what the page can hold of its results).
    pub max_tokens: usize,
    /// Where the weights live besides the GPU.
    host: Option<Checkpoint>,
    /// Its weights on the GPU, with the engine whose device holds them: a new engine (after a lost
    /// device) uploads again. The engine itself is kept, not its address, which a new one could reuse.
    gpu: RefCell<Option<(Rc<Engine>, Rc<LmWeights>)>>,
    last: RefCell<Option<Rc<TrainedPass>>>,
}

/// One forward pass's results as the explorer uses them.
pub struct TrainedPass {
    pub ids: Vec<u32>,
    /// Per layer, `[heads, tokens, tokens]`.
    pub probs: Vec<Vec<f32>>,
    /// After the last token.
    pub last_logits: Vec<f32>,
    pub on_gpu: bool,
    pub ms: f64,
    /// The first pass on this GPU: its time includes uploading the weights and compiling the kernels.
    pub first_on_device: bool,
}

impl LoadedLm {
    /// A checkpoint read into memory (the trained model's files): its weights go to a GPU when one
    /// first runs it.
    pub fn from_checkpoint(checkpoint: Checkpoint, tokenizer: Tokenizer) -> LoadedLm {
        LoadedLm {
            model: checkpoint.model.clone(),
            max_tokens: max_tokens(&checkpoint),
            host: Some(checkpoint),
            tokenizer,
            gpu: RefCell::new(None),
            last: RefCell::new(None),
        }
    }

    /// The most tokens it reads, and its embedding's rows (the ids it takes).
    pub fn reads(&self) -> (usize, u64) {
        (self.max_tokens, self.model.vocab_size)
    }

    /// A checkpoint whose weights were streamed to `engine`'s GPU, with their copy in memory when the
    /// page kept one (a small checkpoint's, for the backward pass; `views::backward::host_copy`).
    pub fn streamed(
        model: Model,
        tokenizer: Tokenizer,
        (engine, weights): (Rc<Engine>, LmWeights),
        host: Option<Checkpoint>,
    ) -> LoadedLm {
        LoadedLm {
            max_tokens: max_tokens_of(&model),
            model,
            tokenizer,
            host,
            gpu: RefCell::new(Some((engine, Rc::new(weights)))),
            last: RefCell::new(None),
        }
    }

    /// The checkpoint in host memory (none where its weights were streamed to the GPU).
    pub fn host(&self) -> Option<&Checkpoint> {
        self.host.as_ref()
    }

    pub fn layers(&self) -> usize {
        self.model.schedule.layers().len()
    }

    /// The pass over `ids`, and whether it was kept from the last one over the same tokens (another
    /// layer or heads) rather than run.
    /// A CPU pass stops between steps once `keep_going` says no (a newer text), with an error.
    pub async fn pass(
        &self,
        engine: &Rc<Engine>,
        ids: &[u32],
        keep_going: &dyn Fn() -> bool,
    ) -> Result<(Rc<TrainedPass>, bool), String> {
        if let Some(last) = self.last.borrow().as_ref().filter(|p| p.ids == ids) {
            return Ok((last.clone(), true));
        }
        let started = now_ms();
        let first_on_device =
            engine.is_gpu() && !self.gpu.borrow().as_ref().is_some_and(|(e, _)| Rc::ptr_eq(e, engine));
        let (probs, last_logits, on_gpu) = engine.run(&WholePass { lm: self, engine, ids, keep_going }).await?;
        let ms = now_ms() - started;
        let pass = Rc::new(TrainedPass { ids: ids.to_vec(), probs, last_logits, on_gpu, ms, first_on_device });
        *self.last.borrow_mut() = Some(pass.clone());
        Ok((pass, false))
    }

    /// The weights on `engine`'s GPU, uploaded the first time.
    pub fn gpu_weights(&self, engine: &Rc<Engine>) -> Result<Rc<LmWeights>, String> {
        let Some((ctx, _)) = engine.gpu() else { return Err("no GPU".into()) };
        if let Some((_, w)) = self.gpu.borrow().as_ref().filter(|(e, _)| Rc::ptr_eq(e, engine)) {
            return Ok(w.clone());
        }
        let Some(checkpoint) = &self.host else {
            return Err("The GPU was reset after your files were read, and their weights went with it: drop the \
                        files again."
                .into());
        };
        // The old device's weights go before the new ones are made.
        *self.gpu.borrow_mut() = None;
        let w = Rc::new(LmWeights::upload(ctx, checkpoint).map_err(|e| e.to_string())?);
        *self.gpu.borrow_mut() = Some((engine.clone(), w.clone()));
        Ok(w)
    }

    /// The weights in memory, for a pass on the CPU.
    pub(super) fn cpu_weights(&self) -> Result<&Checkpoint, String> {
        self.host.as_ref().ok_or_else(|| {
            "Your checkpoint's weights were streamed to the GPU, and the page computes on the CPU now (no WebGPU, \
             or backend=cpu)"
                .into()
        })
    }

    /// Generation on the GPU: a KV cache for the model's length stored as `scheme` (f32 in pages of
    /// one pool, read through each layer's page table; or packed in the scheme's own bits, each token
    /// quantised once, as it joins or, for KIVI, as it leaves the recent window, and read by the
    /// attention kernel, which dequantises as it reads), prefilled with `ids`, and the logits after
    /// them. `None` without WebGPU.
    pub async fn gpu_decoder(
        &self,
        engine: Rc<Engine>,
        ids: &[u32],
        scheme: KvScheme,
    ) -> Option<Result<(GpuDecoder, Vec<f32>), String>> {
        let (ctx, kernels) = engine.gpu()?;
        let start = async {
            let weights = self.gpu_weights(&engine)?;
            let capacity = self.max_tokens as u32;
            let mut cache = match scheme {
                KvScheme::Fp32 => LmPagedCache::new(ctx, &weights, capacity).map(GenerateCache::Paged),
                _ => LmCache::stored_as(ctx, &weights, capacity, scheme).map(GenerateCache::Contiguous),
            }
            .map_err(|e| e.to_string())?;
            let logits = cache.decode((ctx, kernels), &weights, ids).await?;
            resumed();
            Ok((cache, weights, logits))
        };
        Some(
            start.await.map(|(cache, weights, logits)| (GpuDecoder { engine: engine.clone(), weights, cache }, logits)),
        )
    }

    async fn gpu_pass(
        &self,
        (ctx, kernels): (&GpuContext, &Kernels),
        engine: &Rc<Engine>,
        ids: &[u32],
    ) -> Result<(Vec<Vec<f32>>, Vec<f32>, bool), String> {
        let weights = self.gpu_weights(engine)?;
        let request = LmRequest { last_logits: Some(1), probabilities: true, ..Default::default() };
        let out = lm_forward::run(ctx, kernels, &weights, ids, request).await.map_err(|e| e.to_string())?;
        resumed();
        // The next text's pass takes the fast forms of the forward kernel and the row softmax (CPU
        // adapters in the browser start with forms quick to compile), built while this one's heads
        // are drawn.
        lm_forward::warm_up(ctx, kernels, &weights, ids.len() as u32);
        Ok((out.probs, out.logits, true))
    }

    async fn cpu_pass(
        &self,
        ids: &[u32],
        keep_going: &dyn Fn() -> bool,
    ) -> Result<(Vec<Vec<f32>>, Vec<f32>, bool), String> {
        let mut pass = CpuPass::new(self.cpu_weights()?, ids, 1).map_err(|e| e.0)?;
        while pass.step() {
            breathe().await;
            if !keep_going() {
                return Err("stopped for a newer text".into());
            }
        }
        let out = pass.finish();
        Ok((out.probs, out.logits, false))
    }
}

/// One whole forward pass of a loaded model (per layer the probabilities, and the last logits), as a
/// job of the engine: `gpu::lm_forward` on the GPU, `lm::forward`'s `CpuPass` in steps without one.
struct WholePass<'a> {
    lm: &'a LoadedLm,
    engine: &'a Rc<Engine>,
    ids: &'a [u32],
    keep_going: &'a dyn Fn() -> bool,
}

impl Job for WholePass<'_> {
    type Output = (Vec<Vec<f32>>, Vec<f32>, bool);

    fn fits_gpu(&self) -> bool {
        true
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Self::Output, String> {
        self.lm.gpu_pass((ctx, kernels), self.engine, self.ids).await
    }

    async fn on_cpu(&self, _: bool) -> Result<Self::Output, String> {
        self.lm.cpu_pass(self.ids, self.keep_going).await
    }
}

/// Decoding on the GPU one token at a time against a KV cache (see [`LoadedLm::gpu_decoder`]).
pub struct GpuDecoder {
    engine: Rc<Engine>,
    weights: Rc<LmWeights>,
    cache: GenerateCache,
}

/// Generate's KV cache: f32 in pages of one pool, or a quantised scheme's packed contiguous rows.
enum GenerateCache {
    Paged(LmPagedCache),
    Contiguous(LmCache),
}

impl GenerateCache {
    async fn decode(
        &mut self,
        (ctx, kernels): (&GpuContext, &Kernels),
        weights: &LmWeights,
        ids: &[u32],
    ) -> Result<Vec<f32>, String> {
        let logits = match self {
            GenerateCache::Paged(cache) => lm_forward::decode_paged(ctx, kernels, weights, cache, ids).await,
            GenerateCache::Contiguous(cache) => lm_forward::decode(ctx, kernels, weights, cache, ids).await,
        };
        logits.map_err(|e| e.to_string())
    }
}

impl GpuDecoder {
    /// Bytes a token takes in the cache, every layer's K and V, where it is packed in its scheme's
    /// bits (its buffers' size over their tokens); `None` for the f32 cache.
    pub fn packed_bytes_per_token(&self) -> Option<u64> {
        match &self.cache {
            GenerateCache::Contiguous(cache) => cache.is_packed().then(|| cache.bytes_per_token()),
            GenerateCache::Paged(_) => None,
        }
    }

    /// The pages of the f32 cache's pool, those in use now and their bytes; `None` for a packed cache.
    pub fn pool_use(&self) -> Option<PoolUse> {
        match &self.cache {
            GenerateCache::Paged(cache) => Some(cache.usage()),
            GenerateCache::Contiguous(_) => None,
        }
    }

    /// Adds token `id` to the cache and returns the logits after it.
    pub async fn next(&mut self, id: u32) -> Result<Vec<f32>, String> {
        let Some(gpu) = self.engine.gpu() else { return Err("the GPU is gone".into()) };
        let logits = self.cache.decode(gpu, &self.weights, &[id]).await;
        resumed();
        logits
    }
}
