//! The few browser facts the UI needs: the URL, time, the clipboard, the panic panel, and the page's
//! own computed style rules.

use std::cell::RefCell;

use wasm_bindgen::JsCast as _;

use crate::state::AppState;
use crate::views::heatmaps::request::Screen;

/// The current query string, with its leading `?` (empty when there is none).
pub fn location_search() -> String {
    web_sys::window().and_then(|w| w.location().search().ok()).unwrap_or_default()
}

/// Whether the test switch `name` is on: `window.attentionLabTestSwitches[name] === true`, which only a
/// script run before the page (a browser test's init script) can set. Never read from a link, so no
/// shared link can turn on a test hook or the deliberate panic.
pub fn test_switch(name: &str) -> bool {
    let Some(window) = web_sys::window() else { return false };
    js_sys::Reflect::get(&window, &"attentionLabTestSwitches".into())
        .and_then(|switches| js_sys::Reflect::get(&switches, &name.into()))
        .is_ok_and(|on| on.as_bool() == Some(true))
}

/// Writes `?query` to the address bar without scrolling: as a new history entry when `push` (a lesson
/// step changed, so back returns to the previous step), else replacing the current one.
pub fn write_query(query: &str, push: bool) {
    let Some(window) = web_sys::window() else { return };
    let path = window.location().pathname().unwrap_or_else(|_| "/".into());
    let url = if query.is_empty() { path } else { format!("{path}?{query}") };
    let Ok(history) = window.history() else { return };
    let written = if push {
        history.push_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url))
    } else {
        history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url))
    };
    if let Err(e) = written {
        web_sys::console::warn_1(&e);
    }
}

/// A value kept in the browser's storage for this site; `None` when there is none or storage is off.
pub fn stored(key: &str) -> Option<String> {
    web_sys::window()?.local_storage().ok()??.get_item(key).ok()?
}

/// Keeps `value` under `key` in the browser's storage (silently not, where storage is off or full).
pub fn store(key: &str, value: &str) {
    if let Some(storage) = web_sys::window().and_then(|w| w.local_storage().ok().flatten()) {
        let _ = storage.set_item(key, value);
    }
}

/// The full address of the current page, as a user would copy it.
pub fn current_href() -> String {
    web_sys::window().and_then(|w| w.location().href().ok()).unwrap_or_default()
}

/// The window's width in CSS pixels and its device pixel ratio, as the heatmaps size themselves by.
pub fn screen() -> Screen {
    let window = web_sys::window();
    Screen {
        width_css_px: window.as_ref().and_then(|w| w.inner_width().ok()).and_then(|v| v.as_f64()).unwrap_or(1280.0),
        device_pixel_ratio: window.map_or(1.0, |w| w.device_pixel_ratio()),
    }
}

/// Milliseconds from the page's time origin (`std::time::Instant` does not exist in the browser).
pub fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}

/// Puts `text` on the clipboard; resolves to whether it worked (it needs a user gesture and focus).
pub async fn copy_to_clipboard(text: &str) -> bool {
    let Some(window) = web_sys::window() else { return false };
    let promise = window.navigator().clipboard().write_text(text);
    wasm_bindgen_futures::JsFuture::from(promise).await.is_ok()
}

/// Appends an error panel to the page with plain text (never HTML), and a way back.
/// Removes index.html's "Loading…" note.
pub fn remove_loading_note() {
    if let Some(note) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.get_element_by_id("loading")) {
        note.remove();
    }
}

pub fn show_panic_panel(message: &str) {
    let Some(document) = web_sys::window().and_then(|w| w.document()) else { return };
    let Some(body) = document.body() else { return };
    if document.get_element_by_id("panic-panel").is_some() {
        return;
    }
    let Ok(panel) = document.create_element("div") else { return };
    panel.set_id("panic-panel");
    panel.set_attribute("role", "alert").ok();
    panel.set_attribute("data-testid", "panic-panel").ok();
    let lines = [
        ("h2", "Something went wrong inside Attention Lab".to_string()),
        ("p", "The page hit an internal error and stopped. The link below may be what caused it, so the button opens the same view with default settings instead. If it happens again, please report the message and the link.".to_string()),
        ("pre", message.to_string()),
        ("pre", current_href()),
    ];
    for (tag, text) in lines {
        if let Ok(el) = document.create_element(tag) {
            el.set_text_content(Some(&text));
            panel.append_child(&el).ok();
        }
    }
    if let Ok(link) = document.create_element("a") {
        let path = web_sys::window().and_then(|w| w.location().pathname().ok()).unwrap_or_else(|| "/".into());
        let query = AppState::restart_query(&location_search());
        link.set_text_content(Some("Open this view with default settings"));
        link.set_attribute("href", &if query.is_empty() { path } else { format!("{path}?{query}") }).ok();
        link.set_attribute("data-testid", "panic-restart").ok();
        panel.append_child(&link).ok();
    }
    body.append_child(&panel).ok();
}

/// The 2D context of a canvas, kept in memory (`willReadFrequently`): a GPU-backed canvas is a layer
/// and a GPU resource of its own, which with 32 heatmaps cost the frames after an update tens of ms
/// (traces on SwiftShader); ours only ever receive pixels.
pub fn context_2d(canvas: &web_sys::HtmlCanvasElement) -> Option<web_sys::CanvasRenderingContext2d> {
    let options = js_sys::Object::new();
    js_sys::Reflect::set(&options, &"willReadFrequently".into(), &true.into()).ok()?;
    canvas.get_context_with_context_options("2d", &options).ok().flatten()?.dyn_into().ok()
}

thread_local! {
    /// The page's computed style rules (a lesson step's highlight): one constructed stylesheet adopted
    /// by the document, and which showing of it is current. A constructed sheet, not a `<style>`
    /// element: the page's Content-Security-Policy refuses inline style elements.
    static PAGE_STYLE: RefCell<(Option<web_sys::CssStyleSheet>, u64)> = const { RefCell::new((None, 0)) };
}

/// Shows `rules` as the page's computed style (replacing any before) and returns this showing's
/// number, for [`clear_page_style`].
pub fn show_page_style(rules: &str) -> u64 {
    PAGE_STYLE.with_borrow_mut(|(sheet, showing)| {
        *showing += 1;
        if sheet.is_none() {
            *sheet = adopted_sheet();
        }
        if let Some(sheet) = sheet {
            let _ = sheet.replace_sync(rules);
        }
        *showing
    })
}

/// Clears the page's computed style if `showing` is still the current one (a newer step's rules stay).
pub fn clear_page_style(showing: u64) {
    PAGE_STYLE.with_borrow(|(sheet, current)| {
        if let (Some(sheet), true) = (sheet, *current == showing) {
            let _ = sheet.replace_sync("");
        }
    });
}

/// A new empty stylesheet, added to the document's adopted sheets.
fn adopted_sheet() -> Option<web_sys::CssStyleSheet> {
    let document = web_sys::window()?.document()?;
    let sheet = web_sys::CssStyleSheet::new().ok()?;
    let sheets = document.adopted_style_sheets();
    sheets.push(&sheet);
    document.set_adopted_style_sheets(&sheets);
    Some(sheet)
}
