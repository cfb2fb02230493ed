//! "See your own checkpoint": the user drops (or chooses) a model's config.json, tokenizer.json and
//! safetensors files; the page checks them (`views::heatmaps::checkpoint_files`, the weight plan),
//! streams the weights to the GPU a chunk at a time (`gpu::lm_stream`), and shows the model's real
//! heads in the heatmaps view. A small checkpoint's weights file is then read once more, whole, and
//! kept in memory too, for the backward view's gradients (`views::backward::host_copy`). Nothing is
//! uploaded anywhere: the files are read in the page.

use std::cell::{Cell, RefCell};
use std::ops::Range;
use std::rc::Rc;

use js_sys::Uint8Array;
use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast as _;
use wasm_bindgen_futures::JsFuture;

use super::engine_signal::EngineSignal;
use super::trained_compute::LoadedLm;
use crate::engine::Engine;
use crate::event_loop::{breathe, resumed};
use crate::gpu::lm_forward::LmWeights;
use crate::gpu::lm_stream::{self, WeightSource};
use crate::lm::LmError;
use crate::lm::bpe::{BpeError, Tokenizer};
use crate::lm::bpe_reader::TokenizerReader;
use crate::lm::checkpoint::Checkpoint;
use crate::lm::safetensors::{SafeTensors, Widened, Widening};
use crate::model::encoding::encode_model;
use crate::model::units::format_bytes;
use crate::state::AppState;
use crate::views::backward::host_copy::{host_copy, not_kept, status_note};
use crate::views::heatmaps::checkpoint_files::{
    check_tokenizer, classify, job_params_millions, loaded_text, pick_shards,
};
use crate::views::model_choice::ModelChoice;

/// The checkpoint read from the user's files: the layout it is shown as (`cfg`), and the model.
pub struct Dropped {
    /// Counts the loads, so a second checkpoint of the same layout is told from the first.
    pub serial: u64,
    pub cfg: String,
    pub lm: Rc<LoadedLm>,
    /// Bytes of weights read.
    pub file_bytes: u64,
    /// Weight files dropped that the index does not name.
    pub left_out: Vec<String>,
    /// Why its weights are not kept in memory too (then it has no gradients); `Ok` when they are.
    pub host_copy: Result<(), String>,
}

thread_local! {
    static DROPPED: RefCell<Option<Rc<Dropped>>> = const { RefCell::new(None) };
    /// Loads so far, and whether one is running (page-wide: the panel may be unmounted and made again).
    static LOADS: Cell<(u64, bool)> = const { Cell::new((0, false)) };
}

/// The dropped checkpoint, when the views show its layout.
pub fn shown(choice: &ModelChoice) -> Option<Rc<Dropped>> {
    DROPPED.with_borrow(|d| d.clone().filter(|d| choice.cfg.as_deref() == Some(d.cfg.as_str())))
}

/// Whether the views show real weights for `choice`: the trained model's, or the dropped checkpoint's.
pub fn shows_real_weights(choice: &ModelChoice) -> bool {
    choice.is_trained() || shown(choice).is_some()
}

/// Where a load stands.
#[derive(Clone, Debug, PartialEq)]
enum LoadStatus {
    Idle,
    Working(String),
    Done(String),
    Failed(String),
}

/// The dropped files, read through `Blob.slice` a range at a time.
struct DroppedFiles(Vec<web_sys::File>);

impl WeightSource for DroppedFiles {
    fn shards(&self) -> usize {
        self.0.len()
    }

    fn file_len(&self, shard: usize) -> u64 {
        self.0.get(shard).map_or(0, |f| f.size() as u64)
    }

    async fn read(&self, shard: usize, range: Range<u64>) -> Result<Vec<u8>, String> {
        read_range(self.0.get(shard).ok_or("no such file")?, range).await
    }
}

/// Bytes `range` of `file`.
async fn read_range(file: &web_sys::File, range: Range<u64>) -> Result<Vec<u8>, String> {
    let failed = |e: wasm_bindgen::JsValue| format!("{} could not be read ({e:?})", file.name());
    let blob = file.slice_with_f64_and_f64(range.start as f64, range.end as f64).map_err(failed)?;
    let buffer = JsFuture::from(blob.array_buffer()).await.map_err(failed)?;
    resumed();
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// Bytes of a text file taken into the page's memory between pauses.
const TEXT_CHUNK_BYTES: u64 = 2 << 20;

/// `file` as UTF-8 text, read and checked a chunk at a time: the browser's `text()` of Gemma 3's 33 MB
/// tokenizer.json takes over 200 ms to turn into the page's string in one piece. A byte-order mark
/// is dropped, as `text()` drops it. (`classify` has checked the size.)
async fn text_of(file: &web_sys::File) -> Result<String, String> {
    let len = file.size() as u64;
    let mut text = String::with_capacity(len as usize);
    let mut carried = Vec::new();
    for start in (0..len).step_by(TEXT_CHUNK_BYTES as usize) {
        let mut bytes = std::mem::take(&mut carried);
        bytes.extend(read_range(file, start..(start + TEXT_CHUNK_BYTES).min(len)).await?);
        // A character cut by the chunk's end waits for the next chunk.
        let whole = match std::str::from_utf8(&bytes) {
            Ok(all) => all,
            Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
            Err(_) => return Err(format!("{} is not UTF-8 text", file.name())),
        };
        let skip = if start == 0 && whole.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
        text.push_str(&whole[skip..]);
        carried = bytes.split_off(whole.len());
        breathe().await;
    }
    match carried.is_empty() {
        true => Ok(text),
        false => Err(format!("{} is not UTF-8 text (it ends inside a character)", file.name())),
    }
}

/// Reads `json` a few ms at a time, letting the browser in between (Gemma 3's 33 MB file takes most of a
/// second in all).
async fn read_tokenizer(json: &str) -> Result<Tokenizer, BpeError> {
    let mut reader = TokenizerReader::new(json);
    while reader.step()? {
        breathe().await;
    }
    Ok(reader.finish())
}

/// Checks and streams `files`; `status` says how far it got.
async fn load(
    files: Vec<web_sys::File>,
    engine: Rc<Engine>,
    status: RwSignal<LoadStatus>,
    release_previous: &dyn Fn(),
) -> Result<Dropped, String> {
    let listed: Vec<(String, u64)> = files.iter().map(|f| (f.name(), f.size() as u64)).collect();
    let roles = classify(&listed)?;
    let config = text_of(&files[roles.config]).await?;
    let weight_names: Vec<&str> = roles.weights.iter().map(|&i| listed[i].0.as_str()).collect();
    let (weights, left_out) = match roles.index {
        Some(index) => pick_shards(&text_of(&files[index]).await?, &weight_names)?,
        None => ((0..weight_names.len()).collect(), Vec::new()),
    };
    let Some((ctx, kernels)) = engine.gpu() else {
        return Err("Your checkpoint runs on the GPU, and this browser offers no WebGPU (the app is on its CPU \
                    fallback): open the page in a browser with WebGPU to see it."
            .into());
    };
    let source = DroppedFiles(weights.iter().map(|&w| files[roles.weights[w]].clone()).collect());
    status.set(LoadStatus::Working("Reading the weight files' headers…".into()));
    let plan = lm_stream::plan(&config, &source).await.map_err(|e| e.0)?;
    // A model the GPU cannot hold is refused before its tokenizer (up to 64 MiB) is read.
    lm_stream::check(ctx, &plan).map_err(|e| e.to_string())?;
    status.set(LoadStatus::Working("Reading tokenizer.json…".into()));
    let tokenizer_json = text_of(&files[roles.tokenizer]).await?;
    let tokenizer = read_tokenizer(&tokenizer_json).await.map_err(|e| format!("tokenizer.json: {e}"))?;
    check_tokenizer(&tokenizer, plan.model())?;
    release_previous();
    let total = plan.file_bytes();
    let mut progress = |done: u64, all: u64| {
        let line =
            format!("Streaming the weights to the GPU: {} of {}", format_bytes(done.into()), format_bytes(all.into()));
        status.try_set(LoadStatus::Working(line));
    };
    let streamed: LmWeights =
        LmWeights::stream(ctx, kernels, &plan, &source, &mut progress).await.map_err(|e| e.to_string())?;
    let (host, host_copy) = match keep_in_memory(&config, &source, status).await {
        Ok(checkpoint) => (Some(checkpoint), Ok(())),
        Err(why) => (None, Err(why)),
    };
    let model = plan.config.model.clone();
    let cfg = encode_model(&model);
    let lm = Rc::new(LoadedLm::streamed(model, tokenizer, (engine.clone(), streamed), host));
    let serial = LOADS.get().0;
    Ok(Dropped { serial, cfg, lm, file_bytes: total, left_out, host_copy })
}

/// Values widened to f32 between two pauses for the browser (a few ms).
const WIDEN_STEP_ELEMENTS: usize = 1 << 18;

/// A small checkpoint's weights, read whole once more and kept as f32 (the size is checked first, and
/// the values widened a slice at a time), or why not: the gradients panel says it.
async fn keep_in_memory(
    config: &str,
    source: &DroppedFiles,
    status: RwSignal<LoadStatus>,
) -> Result<Checkpoint, String> {
    let sizes: Vec<u64> = (0..source.shards()).map(|i| source.file_len(i)).collect();
    host_copy(&sizes)?;
    status.try_set(LoadStatus::Working("Keeping a copy of the weights in this page's memory…".into()));
    let unread = |e: LmError| not_kept(&format!("its weights could not be read for the CPU: {}", e.0));
    let mut shards = Vec::with_capacity(sizes.len());
    for (i, &len) in sizes.iter().enumerate() {
        let bytes =
            source.read(i, 0..len).await.map_err(|e| not_kept(&format!("its weights could not be read again: {e}")))?;
        let mut widening =
            Widening::new(SafeTensors::parse(&bytes).map_err(unread)?, WIDEN_STEP_ELEMENTS).map_err(unread)?;
        while widening.step() {
            breathe().await;
        }
        shards.push(widening.finish());
    }
    Checkpoint::from_widened(config, &Widened::join(shards).map_err(unread)?).map_err(unread)
}

/// The drop zone and file chooser, with what the page checks and how far a load got.
#[component]
pub fn UserCheckpointPanel(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let status = RwSignal::new(LoadStatus::Idle);
    let dragging = RwSignal::new(false);
    let take = move |list: Option<web_sys::FileList>| take_files(state, engine, status, list);
    view! {
        <details class="panel user-checkpoint" data-testid="user-checkpoint"
            open=move || !matches!(status.get(), LoadStatus::Idle)>
            <summary>"See your own checkpoint's attention"</summary>
            <CheckpointHint/>
            <div class="drop-zone" data-testid="checkpoint-drop" class:dragging=move || dragging.get()
                on:dragover=move |ev: web_sys::DragEvent| { ev.prevent_default(); dragging.set(true); }
                on:dragleave=move |_| dragging.set(false)
                on:drop=move |ev: web_sys::DragEvent| {
                    ev.prevent_default();
                    dragging.set(false);
                    take(ev.data_transfer().and_then(|d| d.files()));
                }>
                "Drop the files here, or "
                <label class="file">
                    "choose them "
                    <input type="file" multiple data-testid="checkpoint-files" on:change=move |ev| {
                        let input = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok());
                        take(input.as_ref().and_then(web_sys::HtmlInputElement::files));
                        if let Some(input) = input {
                            input.set_value(""); // the same files can be chosen again
                        }
                    }/>
                </label>
            </div>
            <CheckpointStatus status=status/>
        </details>
    }
}

/// Starts a load of the files dropped or chosen, unless one is running or the GPU is not open yet.
fn take_files(
    state: RwSignal<AppState>,
    engine: EngineSignal,
    status: RwSignal<LoadStatus>,
    list: Option<web_sys::FileList>,
) {
    let files: Vec<web_sys::File> =
        list.map(|l| (0..l.length()).filter_map(|i| l.get(i)).collect()).unwrap_or_default();
    if files.is_empty() {
        return;
    }
    let (loads, running) = LOADS.get();
    if running {
        status.set(LoadStatus::Working("Still reading the files dropped before; drop these again after it.".into()));
        return;
    }
    let Some(engine) = engine.get_untracked() else {
        status.set(LoadStatus::Failed("the page is still opening the GPU: drop the files again in a moment".into()));
        return;
    };
    LOADS.set((loads + 1, true));
    status.set(LoadStatus::Working(format!("Checking {} files…", files.len())));
    // Once the new files pass every check, the last checkpoint's GPU buffers go before the new
    // ones are made (the view lets go of them once its layout is no longer the one shown).
    let release_previous = move || {
        if DROPPED.with_borrow_mut(Option::take).is_some() {
            state.try_update(|_| {});
        }
    };
    spawn_local(async move {
        let loaded = load(files, engine, status, &release_previous).await;
        LOADS.set((loads + 1, false));
        match loaded {
            Ok(dropped) => {
                let done = loaded_text(&dropped.lm.model.name, dropped.file_bytes, &dropped.left_out);
                let done = format!("{done} {}", status_note(&dropped.host_copy));
                // A panel gone meanwhile (another view) does not switch the model under it.
                if status.try_set(LoadStatus::Done(done)).is_none() {
                    let cfg = dropped.cfg.clone();
                    DROPPED.with_borrow_mut(|d| *d = Some(Rc::new(dropped)));
                    state.try_update(|s| s.show_dropped_checkpoint(cfg));
                }
            }
            Err(why) => _ = status.try_set(LoadStatus::Failed(why)),
        }
    });
}

/// Which files to drop, which models run, and how large they may be.
#[component]
fn CheckpointHint() -> impl IntoView {
    let (bf16_millions, f32_millions) = job_params_millions();
    view! {
        <p class="hint">
            "Drop a model's " <code>"config.json"</code> ", " <code>"tokenizer.json"</code> " and its "
            <code>".safetensors"</code> " file (or all its shards with " <code>"model.safetensors.index.json"</code>
            "). Llama 2 and 3, Mistral, Qwen2, Qwen3, SmolLM and Gemma 3 text (gemma3_text) layouts run (rotary \
            positions plain, linearly scaled or scaled as Llama 3.1's), with f32, f16 or bf16 weights, within one job's 1 GiB: " {format!("up to about {bf16_millions} million parameters in bf16 \
            (the weight matrices stay bf16 on your GPU; the kernels widen them as they read) and {f32_millions} million in f16 or f32 \
            (kept as f32), less where your GPU's largest buffer is smaller, ")}
            "so SmolLM2-135M and -360M fit, and Gemma 3 270M where your GPU takes its 335 MB embedding in one buffer; Gemma 3 1B and the multi-billion Llama, Mistral and Qwen checkpoints do not. These families' usual tokenizers are read: byte-level BPE (GPT-2's, SmolLM's, \
            Llama 3's, Qwen's) and SentencePiece-style BPE with byte fallback (Llama 2's, Mistral's, Gemma's), with the special \
            tokens the model expects before a text; other tokenizer settings are refused by name. The files are read \
            here and streamed to your GPU a few MB at a time; nothing is uploaded."
        </p>
    }
}

/// How far a load got, or why it failed.
#[component]
fn CheckpointStatus(status: RwSignal<LoadStatus>) -> impl IntoView {
    view! {
        {move || match status.get() {
            LoadStatus::Idle => None,
            LoadStatus::Working(line) | LoadStatus::Done(line) => Some(view! {
                <p class="status" role="status" data-testid="checkpoint-status">{line}</p>
            }.into_any()),
            LoadStatus::Failed(why) => Some(view! {
                <p class="status error" role="alert" data-testid="checkpoint-error">
                    "These files could not be shown: " {why}
                </p>
            }.into_any()),
        }}
    }
}
