//! Downloads: the whole view as a PNG, and one head's probabilities as a NumPy `.npz` with its query and
//! key tokens alongside.

use wasm_bindgen::JsCast as _;

use super::browser;
use super::heatmap::HeadMap;
use crate::views::heatmaps::npy::head_npz;

/// Offers `bytes` as a file download named `name`.
pub fn download_bytes(name: &str, mime: &str, bytes: &[u8]) -> Result<(), String> {
    let array = js_sys::Uint8Array::from(bytes);
    let parts = js_sys::Array::of1(&array);
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &options).map_err(|e| format!("{e:?}"))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|e| format!("{e:?}"))?;
    download_url(name, &url)?;
    web_sys::Url::revoke_object_url(&url).ok();
    Ok(())
}

fn download_url(name: &str, url: &str) -> Result<(), String> {
    let document = web_sys::window().and_then(|w| w.document()).ok_or("no document")?;
    let a: web_sys::HtmlAnchorElement = document.create_element("a").map_err(|e| format!("{e:?}"))?.unchecked_into();
    a.set_href(url);
    a.set_download(name);
    a.click();
    Ok(())
}

/// A file-name-safe version of `s`.
pub fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect()
}

/// The head's `.npz`: `probabilities` (or the pooled blocks), `query_tokens`, `key_tokens` (for pooled
/// maps, the first token of each block).
pub fn export_head(map: &HeadMap, base: &str) -> Result<(), String> {
    let bytes =
        head_npz(map.rows as usize, map.cols as usize, &map.values, &map.axis_tokens(true), &map.axis_tokens(false));
    let kind = match map.pooled {
        Some(p) => format!("-pooled-{}", p.name()),
        None => String::new(),
    };
    download_bytes(&format!("{base}-head{}{kind}.npz", map.head), "application/octet-stream", &bytes)
}

/// Draws every displayed head (its canvas, scaled crisply, with its caption) and the title onto one
/// canvas and downloads it as a PNG.
pub fn export_png(title: &str, file: &str) -> Result<(), String> {
    let document = web_sys::window().and_then(|w| w.document()).ok_or("no document")?;
    let figures = document.query_selector_all("[data-testid=\"head-heatmap\"]").map_err(|e| format!("{e:?}"))?;
    let count = figures.length();
    if count == 0 {
        return Err("nothing to export yet".into());
    }
    let (tile, caption_h, pad, title_h) = (200.0, 18.0, 12.0, 30.0);
    let per_row = (count as f64).sqrt().ceil().max(1.0) as u32;
    let rows = count.div_ceil(per_row);
    let width = pad + f64::from(per_row) * (tile + pad);
    let height = title_h + pad + f64::from(rows) * (tile + caption_h + pad);
    let canvas: web_sys::HtmlCanvasElement =
        document.create_element("canvas").map_err(|e| format!("{e:?}"))?.unchecked_into();
    canvas.set_width(width as u32);
    canvas.set_height(height as u32);
    let ctx = browser::context_2d(&canvas).ok_or("no 2D context")?;
    ctx.set_fill_style_str("#ffffff");
    ctx.fill_rect(0.0, 0.0, width, height);
    ctx.set_image_smoothing_enabled(false);
    ctx.set_fill_style_str("#1a1d24");
    ctx.set_font("bold 15px system-ui, sans-serif");
    ctx.fill_text(title, pad, 20.0).ok();
    ctx.set_font("12px system-ui, sans-serif");
    for i in 0..count {
        let Some(figure) = figures.item(i).and_then(|n| n.dyn_into::<web_sys::Element>().ok()) else { continue };
        let Some(source) = figure
            .query_selector("canvas.hm-canvas")
            .ok()
            .flatten()
            .and_then(|c| c.dyn_into::<web_sys::HtmlCanvasElement>().ok())
        else {
            continue;
        };
        let caption =
            figure.query_selector("figcaption").ok().flatten().and_then(|c| c.text_content()).unwrap_or_default();
        let (col, row) = (i % per_row, i / per_row);
        let x = pad + f64::from(col) * (tile + pad);
        let y = title_h + pad + f64::from(row) * (tile + caption_h + pad);
        ctx.fill_text(&caption, x, y + 12.0).ok();
        let (w, h) = (f64::from(source.width().max(1)), f64::from(source.height().max(1)));
        let s = tile / w.max(h);
        ctx.draw_image_with_html_canvas_element_and_dw_and_dh(&source, x, y + caption_h, w * s, h * s).ok();
    }
    let url = canvas.to_data_url_with_type("image/png").map_err(|e| format!("{e:?}"))?;
    download_url(file, &url)
}
