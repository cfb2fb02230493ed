//! The trained model on the page: its files fetched once when it is first chosen. What runs it (its
//! weights on the GPU, its forward pass kept for the next job, generation) is live attention's
//! [`LoadedLm`], re-exported here for the panels that use it.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Uint8Array;
use wasm_bindgen::JsCast as _;
use wasm_bindgen_futures::JsFuture;

use crate::catalog::presets::{TRAINED_DIR, TRAINED_FILES};
use crate::event_loop::resumed;
pub use crate::live_attention::LoadedLm;
use crate::lm::bpe::Tokenizer;
use crate::lm::checkpoint::Checkpoint;
use crate::views::heatmaps::trained::ShownCandidate;

/// Largest file accepted from the model folder: the shipped files are far smaller, so anything
/// bigger is not them (a misconfigured server's page, say) and is refused before it is copied in.
const MAX_FILE_BYTES: u32 = 64 << 20;

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
    let lm = Rc::new(LoadedLm::from_checkpoint(checkpoint, tokenizer));
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
