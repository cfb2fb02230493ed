//! The trained model on the page: its files fetched once when it is first chosen, its weights
//! uploaded once per GPU device, and its forward pass run for the explorer: on the GPU
//! (`gpu::lm_forward`) or, without WebGPU, on the CPU in steps that let the browser in. The last
//! pass is kept, so switching layers or heads, and the next generated token, reuse it.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use js_sys::Uint8Array;
use leptos::prelude::*;
use wasm_bindgen::JsCast as _;
use wasm_bindgen_futures::JsFuture;

use super::browser;
use super::explorer_compute::{Sinks, micro_yield};
use super::heatmap::Shared;
use crate::engine::Engine;
use crate::event_loop::{breathe, resumed};
use crate::gpu::lm_forward::{self, LmCache, LmRequest, LmWeights};
use crate::lm::bpe::Tokenizer;
use crate::lm::checkpoint::Checkpoint;
use crate::lm::forward::{CpuPass, max_tokens, max_tokens_of};
use crate::model::Model;
use crate::model::presets::{TRAINED_DIR, TRAINED_FILES};
use crate::views::heatmaps::jobs::Progress;
use crate::views::heatmaps::request::Request;
use crate::views::heatmaps::trained::{ShownCandidate, head_maps, next_tokens};

/// Largest file accepted from the model folder: the shipped files are far smaller, so anything
/// bigger is not them (a misconfigured server's page, say) and is refused before it is copied in.
const MAX_FILE_BYTES: u32 = 64 << 20;

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

/// The next-token panel's content: the candidates after the text's last token.
#[derive(Clone)]
pub struct Prediction {
    pub ids: Vec<u32>,
    pub candidates: Vec<ShownCandidate>,
}

thread_local! {
    static LOADED: RefCell<Option<Rc<LoadedLm>>> = const { RefCell::new(None) };
}

/// The model, fetched and read the first time (later calls return the same one).
pub async fn load() -> Result<Rc<LoadedLm>, String> {
    if let Some(lm) = LOADED.with_borrow(Clone::clone) {
        return Ok(lm);
    }
    let [(config, _), (tokenizer, _), (weights, _)] = TRAINED_FILES;
    let config = String::from_utf8(fetch_bytes(config).await?).map_err(|_| "config.json is not UTF-8 text")?;
    let tokenizer_json = String::from_utf8(fetch_bytes(tokenizer).await?).map_err(|_| "tokenizer.json is not UTF-8")?;
    let weights = fetch_bytes(weights).await?;
    let tokenizer = Tokenizer::from_json(&tokenizer_json).map_err(|e| format!("tokenizer.json: {e}"))?;
    let checkpoint = Checkpoint::load(&config, &weights).map_err(|e| e.0)?;
    let lm = Rc::new(LoadedLm {
        model: checkpoint.model.clone(),
        max_tokens: max_tokens(&checkpoint),
        host: Some(checkpoint),
        tokenizer,
        gpu: RefCell::new(None),
        last: RefCell::new(None),
    });
    LOADED.with_borrow_mut(|slot| *slot = Some(lm.clone()));
    Ok(lm)
}

async fn fetch_bytes(name: &str) -> Result<Vec<u8>, String> {
    let url = format!("{TRAINED_DIR}/{name}");
    let failed = |why: String| format!("Could not load the trained model's {name} ({why}).");
    let window = web_sys::window().ok_or_else(|| failed("no window".into()))?;
    let response = JsFuture::from(window.fetch_with_str(&url)).await.map_err(|e| failed(js_text(&e)))?;
    let response: web_sys::Response = response.dyn_into().map_err(|_| failed("not a response".into()))?;
    if !response.ok() {
        return Err(failed(format!("HTTP {}", response.status())));
    }
    let promise = response.array_buffer().map_err(|e| failed(js_text(&e)))?;
    let buffer = JsFuture::from(promise).await.map_err(|e| failed(js_text(&e)))?;
    resumed();
    let bytes = Uint8Array::new(&buffer);
    if bytes.length() > MAX_FILE_BYTES {
        return Err(failed(format!("{} bytes, more than the model's files can be", bytes.length())));
    }
    Ok(bytes.to_vec())
}

/// A failed fetch's reason in words (a network error, say).
fn js_text(e: &wasm_bindgen::JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "unknown".into())
}

impl LoadedLm {
    /// The most tokens it reads, and its embedding's rows (the ids it takes).
    pub fn reads(&self) -> (usize, u64) {
        (self.max_tokens, self.model.vocab_size)
    }

    /// A checkpoint whose weights were streamed to `engine`'s GPU (they live nowhere else).
    pub fn streamed(model: Model, tokenizer: Tokenizer, engine: Rc<Engine>, weights: LmWeights) -> LoadedLm {
        LoadedLm {
            max_tokens: max_tokens_of(&model),
            model,
            tokenizer,
            host: None,
            gpu: RefCell::new(Some((engine, Rc::new(weights)))),
            last: RefCell::new(None),
        }
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
        let started = browser::now_ms();
        let first_on_device =
            engine.is_gpu() && !self.gpu.borrow().as_ref().is_some_and(|(e, _)| Rc::ptr_eq(e, engine));
        let (probs, last_logits, on_gpu) = match engine.gpu() {
            Some(_) => self.gpu_pass(engine, ids).await?,
            None => self.cpu_pass(ids, keep_going).await?,
        };
        let ms = browser::now_ms() - started;
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

    /// Generation on the GPU: a KV cache for the model's length, prefilled with `ids`, and the logits
    /// after them. `None` without WebGPU.
    pub async fn gpu_decoder(&self, engine: Rc<Engine>, ids: &[u32]) -> Option<Result<(GpuDecoder, Vec<f32>), String>> {
        let (ctx, kernels) = engine.gpu()?;
        let start = async {
            let weights = self.gpu_weights(&engine)?;
            let mut cache = LmCache::new(ctx, &weights, self.max_tokens as u32).map_err(|e| e.to_string())?;
            let logits =
                lm_forward::decode(ctx, kernels, &weights, &mut cache, ids).await.map_err(|e| e.to_string())?;
            resumed();
            Ok((cache, weights, logits))
        };
        Some(
            start.await.map(|(cache, weights, logits)| (GpuDecoder { engine: engine.clone(), weights, cache }, logits)),
        )
    }

    async fn gpu_pass(&self, engine: &Rc<Engine>, ids: &[u32]) -> Result<(Vec<Vec<f32>>, Vec<f32>, bool), String> {
        let Some((ctx, kernels)) = engine.gpu() else { return Err("no GPU".into()) };
        let weights = self.gpu_weights(engine)?;
        let request = LmRequest { last_logits: Some(1), probabilities: true, hidden_states: false };
        let out = lm_forward::run(ctx, kernels, &weights, ids, request).await.map_err(|e| e.to_string())?;
        resumed();
        Ok((out.probs, out.logits, true))
    }

    async fn cpu_pass(
        &self,
        ids: &[u32],
        keep_going: &dyn Fn() -> bool,
    ) -> Result<(Vec<Vec<f32>>, Vec<f32>, bool), String> {
        let Some(checkpoint) = &self.host else {
            return Err("Your checkpoint's weights were streamed to the GPU, and the page computes on the CPU now \
                        (no WebGPU, or backend=cpu)"
                .into());
        };
        let mut pass = CpuPass::new(checkpoint, ids, 1).map_err(|e| e.0)?;
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

/// Decoding on the GPU one token at a time against a KV cache (see [`LoadedLm::gpu_decoder`]).
pub struct GpuDecoder {
    engine: Rc<Engine>,
    weights: Rc<LmWeights>,
    cache: LmCache,
}

impl GpuDecoder {
    /// Adds token `id` to the cache and returns the logits after it.
    pub async fn next(&mut self, id: u32) -> Result<Vec<f32>, String> {
        let Some((ctx, kernels)) = self.engine.gpu() else { return Err("the GPU is gone".into()) };
        let logits =
            lm_forward::decode(ctx, kernels, &self.weights, &mut self.cache, &[id]).await.map_err(|e| e.to_string());
        resumed();
        logits
    }
}

/// Runs the trained model for `req` and hands each head's map to its slot, the candidates to
/// `prediction`; stops early when a newer job takes over.
pub async fn run(
    engine: Rc<Engine>,
    lm: Rc<LoadedLm>,
    req: Request,
    job: u64,
    started_ms: f64,
    sinks: Sinks,
    prediction: RwSignal<Option<Result<Prediction, String>>, LocalStorage>,
) {
    let live = move || sinks.jobs.try_with_value(|c| c.is_current(job)) == Some(true);
    let ids = req.ids.as_deref().cloned().unwrap_or_default();
    let on_gpu = engine.is_gpu();
    sinks.progress.try_set(Progress { job, total: req.heads.len(), on_gpu, ..Default::default() });
    sinks.inputs.try_set(None);
    let (pass, reused) = match lm.pass(&engine, &ids, &live).await {
        Ok(found) => found,
        Err(e) => {
            if live() {
                let error = format!("The model's forward pass failed: {e}");
                prediction.try_set(Some(Err(error.clone())));
                sinks.progress.try_update(|p| (p.error, p.finished) = (Some(error), true));
            }
            return;
        }
    };
    if !live() {
        return;
    }
    let candidates = next_tokens(&lm.tokenizer, &pass.last_logits);
    prediction.try_set(Some(Ok(Prediction { ids: ids.clone(), candidates })));
    let layer = req.layout.layer as usize;
    let maps = pass.probs.get(layer).map(|probs| head_maps(probs, &ids, &req)).unwrap_or_default();
    let slots = sinks.slots.try_get_untracked().unwrap_or_default();
    let draw_started = browser::now_ms();
    for (i, map) in maps.into_iter().enumerate() {
        if let Some(slot) = slots.get(i) {
            slot.try_set(Some(Shared(Arc::new(map))));
        }
        sinks.progress.try_update(|p| p.done = i + 1);
        micro_yield().await;
        breathe().await;
        if !live() {
            return;
        }
    }
    let where_ = if pass.on_gpu { "GPU" } else { "CPU" };
    let note = format!(
        "The model's whole forward pass ({} layers over {} tokens, every head's probabilities) ran on the {where_} in \
         {:.0} ms{}; these are layer {layer}'s heads.",
        lm.layers(),
        ids.len(),
        pass.ms,
        match (reused, pass.first_on_device) {
            (true, _) => " (kept from when this text was last computed)",
            (false, true) => " (the first pass: uploading the weights and compiling the kernels included)",
            (false, false) => "",
        }
    );
    let total_ms = browser::now_ms() - started_ms;
    sinks.progress.try_update(|p| {
        p.finished = true;
        p.on_gpu = pass.on_gpu;
        p.total_ms = total_ms;
        p.kernel_ms = if reused { 0.0 } else { pass.ms };
        p.draw_ms = browser::now_ms() - draw_started;
        p.note = Some(note);
    });
}
