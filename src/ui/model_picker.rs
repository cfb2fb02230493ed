//! What the KV and compare views share: the model, dtype, context and layer pickers, the panel that
//! imports a Hugging Face `config.json` (pasted, dropped or chosen as a file), the model's config
//! values, and the three contract figures with their formulas.
//!
//! An imported model goes into `state.model.cfg` in the compact encoding, so the address bar carries it
//! and a copied link reopens the same model. Nothing from a paste or a file is inserted as HTML.

use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast as _;

use super::browser;
use crate::model::describe::model_facts;
use crate::model::formulas::{attn_params_formula, per_token_formula, total_formula};
use crate::model::params::attn_params;
use crate::model::presets::{all_presets, preset_info};
pub use crate::model::units::bytes_text;
use crate::model::units::{format_params, format_thousands, format_tokens};
use crate::model::{
    DType, ImportReport, decode_model, encode_model, import_hf_config, kv_bytes_per_token, kv_total_bytes,
};
use crate::state::AppState;
use crate::views::kv::MAX_CTX_TOKENS;

/// Largest paste or file read (a real config.json is a few KB; this keeps a stray drop harmless).
const MAX_CONFIG_BYTES: usize = 1 << 20;
/// One-click context lengths.
const CTX_CHOICES: [u64; 6] = [4096, 8192, 32_768, 131_072, 1_048_576, 10_485_760];
/// The select's value for a model that came from a paste or a link's `cfg=`.
const CUSTOM: &str = "custom";

/// Model, dtype, context, layer, copy-link, the import panel and the config values.
#[component]
pub fn ModelPicker(state: RwSignal<AppState>) -> impl IntoView {
    let report = RwSignal::new(None::<Result<ImportReport, String>>);
    let copied = RwSignal::new(None::<bool>);
    let n_layers = move || state.with(|s| s.resolved_model().n_layers());
    let is_custom = move || state.with(|s| s.model.cfg.is_some());

    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default()>
            <label>
                "Model"
                <select data-testid="model-select" on:change=move |ev| {
                    let id = event_target_value(&ev);
                    if id != CUSTOM {
                        state.update(|s| s.choose_model(id, None));
                    }
                }>
                    <Show when=is_custom>
                        <option value=CUSTOM selected=true>"Imported / custom model"</option>
                    </Show>
                    {all_presets()
                        .iter()
                        .map(|p| {
                            let id = p.id;
                            view! {
                                <option value=id selected=move || state.with(|s| s.model.cfg.is_none() && s.model.preset == id)>
                                    {p.display_name}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </label>
            <label>
                "KV cache dtype"
                <select data-testid="dtype-select" on:change=move |ev| {
                    if let Ok(d) = event_target_value(&ev).parse::<DType>() {
                        state.update(|s| s.kv.dtype = d);
                    }
                }>
                    {DType::ALL
                        .into_iter()
                        .map(|d| view! {
                            <option value=d.url_name() selected=move || state.with(|s| s.kv.dtype == d)>
                                {format!("{} ({} bits)", d.label(), d.bits())}
                            </option>
                        })
                        .collect_view()}
                </select>
            </label>
            <label>
                "Context (tokens)"
                <input type="number" min="1" max=MAX_CTX_TOKENS data-testid="ctx-input"
                    prop:value=move || state.with(|s| s.kv.ctx_tokens.to_string())
                    on:change=move |ev| {
                        if let Ok(n) = event_target_value(&ev).trim().parse::<u64>() && (1..=MAX_CTX_TOKENS).contains(&n) {
                            state.update(|s| s.kv.ctx_tokens = n);
                        }
                    }/>
            </label>
            <div class="chips" role="group" aria-label="Common context lengths">
                {CTX_CHOICES
                    .into_iter()
                    .map(|n| view! {
                        <button type="button" class="chip" data-testid="ctx-choice" data-value=n
                            class:active=move || state.with(|s| s.kv.ctx_tokens == n)
                            on:click=move |_| state.update(|s| s.kv.ctx_tokens = n)>
                            {format_tokens(n)}
                        </button>
                    })
                    .collect_view()}
            </div>
            <label>
                "Layer"
                <input type="number" min="0" data-testid="layer-input" max=move || n_layers().saturating_sub(1)
                    prop:value=move || state.with(|s| s.model.layer.to_string())
                    on:change=move |ev| {
                        if let Ok(l) = event_target_value(&ev).trim().parse::<u32>() && l < n_layers() {
                            state.update(|s| s.model.layer = l);
                        }
                    }/>
            </label>
            <button type="button" class="copy" data-testid="copy-link" on:click=move |_| {
                spawn_local(async move { copied.set(Some(browser::copy_to_clipboard(&browser::current_href()).await)) });
            }>
                {move || match copied.get() {
                    Some(true) => "Link copied",
                    Some(false) => "Copy failed: use the address bar",
                    None => "Copy link",
                }}
            </button>
        </form>
        <div class="model-panels">
            <ImportPanel state=state report=report/>
            <ConfigValues state=state/>
        </div>
    }
}

/// Reads `text` as a config.json; on success the model goes into the link.
fn import_text(state: RwSignal<AppState>, report: RwSignal<Option<Result<ImportReport, String>>>, text: &str) {
    if text.len() > MAX_CONFIG_BYTES {
        report.set(Some(Err(format!(
            "that is {} bytes; a config.json is a few KB (at most {MAX_CONFIG_BYTES} bytes here)",
            format_thousands(text.len() as u128)
        ))));
        return;
    }
    let outcome = import_hf_config(text).map_err(|e| e.to_string()).and_then(|imported| {
        let code = encode_model(&imported.model);
        // The link must read back; an irregular layer list too long for a URL is refused here.
        decode_model(&code).map_err(|e| format!("the model cannot be put in a link ({e})"))?;
        state.update(|s| s.choose_model(s.model.preset.clone(), Some(code)));
        Ok(imported.report)
    });
    report.set(Some(outcome));
}

/// Paste, drop or choose a config.json; lists what was used, assumed and doubted.
#[component]
fn ImportPanel(state: RwSignal<AppState>, report: RwSignal<Option<Result<ImportReport, String>>>) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let dragging = RwSignal::new(false);
    let read_file = move |file: web_sys::File| {
        spawn_local(async move {
            match wasm_bindgen_futures::JsFuture::from(file.text()).await.ok().and_then(|v| v.as_string()) {
                Some(content) => {
                    text.set(content.chars().take(MAX_CONFIG_BYTES + 1).collect());
                    import_text(state, report, &content);
                }
                None => report.set(Some(Err("the file could not be read as text".into()))),
            }
        });
    };
    view! {
        <details class="panel import" open=move || report.with(Option::is_some)>
            <summary>"Import a Hugging Face config.json"</summary>
            <p class="hint">
                "Paste the file's text, drop the file here, or choose it. Only the fields that shape attention are read; "
                "the model then travels in the link (" <code>"cfg="</code> ")."
            </p>
            <textarea data-testid="config-input" rows="7" spellcheck="false"
                class:dragging=move || dragging.get()
                placeholder="{ \"num_hidden_layers\": 32, \"hidden_size\": 4096, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, ... }"
                aria-label="config.json text"
                prop:value=move || text.get()
                on:input=move |ev| text.set(event_target_value(&ev))
                on:dragover=move |ev: web_sys::DragEvent| { ev.prevent_default(); dragging.set(true); }
                on:dragleave=move |_| dragging.set(false)
                on:drop=move |ev: web_sys::DragEvent| {
                    ev.prevent_default();
                    dragging.set(false);
                    if let Some(file) = ev.data_transfer().and_then(|d| d.files()).and_then(|f| f.get(0)) {
                        read_file(file);
                    }
                }
            ></textarea>
            <div class="import-actions">
                <button type="button" class="copy" data-testid="config-import"
                    on:click=move |_| import_text(state, report, &text.get_untracked())>
                    "Import"
                </button>
                <label class="file">
                    "or choose a file "
                    <input type="file" accept=".json,application/json" data-testid="config-file" on:change=move |ev| {
                        let file = ev
                            .target()
                            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
                            .and_then(|input| input.files())
                            .and_then(|files| files.get(0));
                        if let Some(file) = file {
                            read_file(file);
                        }
                    }/>
                </label>
            </div>
            {move || report.get().map(|r| match r {
                Err(why) => view! {
                    <p class="status error" role="alert" data-testid="import-error">
                        "Could not import this config: " {why}
                    </p>
                }.into_any(),
                Ok(rep) => view! { <ImportReportView report=rep/> }.into_any(),
            })}
        </details>
    }
}

#[component]
fn ImportReportView(report: ImportReport) -> impl IntoView {
    let kind =
        if report.model_type.is_empty() { "a model".to_string() } else { format!("a {} model", report.model_type) };
    let n_used = report.used.len();
    view! {
        <div class="import-report" data-testid="import-report" role="status">
            <p class="ok">{format!("Imported {kind}: {n_used} fields used. The link now carries it.")}</p>
            <h4>"Fields used"</h4>
            <ul class="fields" data-testid="import-used">
                {report.used.into_iter().map(|(path, value)| view! { <li><code>{path}</code>" = "{value}</li> }).collect_view()}
            </ul>
            <h4>"Assumed (absent from the file)"</h4>
            <ul data-testid="import-assumed">
                {if report.assumed.is_empty() {
                    view! { <li>"nothing"</li> }.into_any()
                } else {
                    report.assumed.into_iter().map(|a| view! { <li>{a}</li> }).collect_view().into_any()
                }}
            </ul>
            <h4>"Warnings"</h4>
            <ul data-testid="import-warnings">
                {if report.warnings.is_empty() {
                    view! { <li>"none"</li> }.into_any()
                } else {
                    report.warnings.into_iter().map(|w| view! { <li>{w}</li> }).collect_view().into_any()
                }}
            </ul>
        </div>
    }
}

/// The chosen model's config values, and for a preset the fields they come from and its notes.
#[component]
fn ConfigValues(state: RwSignal<AppState>) -> impl IntoView {
    view! {
        <details class="panel facts">
            <summary>"Config values of this model"</summary>
            {move || {
                let (model, cfg, id) = state.with(|s| (s.resolved_model(), s.model.cfg.clone(), s.model.preset.clone()));
                let source = match (&cfg, preset_info(&id)) {
                    (Some(code), _) => view! {
                        <p class="hint">"From the link's model code: " <code class="code" data-testid="cfg-code">{code.clone()}</code></p>
                    }.into_any(),
                    (None, Some(p)) => view! {
                        <p class="hint">"Published config of " {p.display_name} ". Fields it uses: "
                            <span data-testid="preset-fields">{p.fields.join(", ")}</span> "."</p>
                        <p class="hint">{p.notes}</p>
                    }.into_any(),
                    (None, None) => ().into_any(),
                };
                view! {
                    {source}
                    <table class="facts-table" data-testid="config-values">
                        <tbody>
                            {model_facts(&model).into_iter().map(|(k, v)| view! { <tr><th scope="row">{k}</th><td>{v}</td></tr> }).collect_view()}
                        </tbody>
                    </table>
                }
            }}
        </details>
    }
}

/// The exact figures of the contract, with the arithmetic written out.
#[derive(Clone, Debug, PartialEq)]
struct Figures {
    per_token: Option<u128>,
    per_token_formula: String,
    total: Option<u128>,
    total_formula: String,
    ctx: u64,
    dtype: DType,
    layer: u32,
    layer_kind: String,
    attn_params: u128,
    attn_formula: String,
}

fn figures(s: &AppState) -> Figures {
    let m = s.resolved_model();
    let kind = m.schedule.kind(s.model.layer as usize).unwrap_or(crate::model::LayerKind::Global);
    let p = attn_params(&m, kind);
    Figures {
        per_token: kv_bytes_per_token(&m, s.kv.dtype).ok(),
        per_token_formula: per_token_formula(&m, s.kv.dtype),
        total: kv_total_bytes(&m, s.kv.ctx_tokens, s.kv.dtype).ok(),
        total_formula: total_formula(&m, s.kv.ctx_tokens, s.kv.dtype),
        ctx: s.kv.ctx_tokens,
        dtype: s.kv.dtype,
        layer: s.model.layer,
        layer_kind: kind.to_string(),
        attn_params: p.total(),
        attn_formula: attn_params_formula(&m, kind, &p),
    }
}

/// `kv-bytes-per-token`, `kv-total-bytes` and `attn-params-per-layer`, each with its formula.
#[component]
pub fn KeyFigures(state: RwSignal<AppState>) -> impl IntoView {
    let f = Memo::new(move |_| state.with(figures));
    let value = |v: Option<u128>| v.map_or_else(|| "overflow".to_string(), |b| b.to_string());
    let text = |v: Option<u128>| v.map_or_else(|| "too large to represent".to_string(), bytes_text);
    view! {
        <section class="figures" aria-label="Key figures">
            <div class="figure">
                <h3>"KV cache per token"</h3>
                <p class="big"><strong data-testid="kv-bytes-per-token" data-value=move || value(f.with(|f| f.per_token))>
                    {move || text(f.with(|f| f.per_token))}
                </strong></p>
                <p class="formula" data-testid="kv-bytes-per-token-formula">{move || f.with(|f| f.per_token_formula.clone())}</p>
            </div>
            <div class="figure">
                <h3>{move || f.with(|f| format!("Whole cache at {} tokens, {}", format_thousands(f.ctx.into()), f.dtype.label()))}</h3>
                <p class="big"><strong data-testid="kv-total-bytes" data-value=move || value(f.with(|f| f.total))>
                    {move || text(f.with(|f| f.total))}
                </strong></p>
                <p class="formula" data-testid="kv-total-bytes-formula">{move || f.with(|f| f.total_formula.clone())}</p>
            </div>
            <div class="figure">
                <h3>{move || f.with(|f| format!("Attention weights of layer {} ({})", f.layer, f.layer_kind))}</h3>
                <p class="big"><strong data-testid="attn-params-per-layer" data-value=move || f.with(|f| f.attn_params.to_string())>
                    {move || f.with(|f| format!("{} parameters ({})", format_thousands(f.attn_params), format_params(f.attn_params)))}
                </strong></p>
                <p class="formula" data-testid="attn-params-formula">{move || f.with(|f| f.attn_formula.clone())}</p>
            </div>
            <p class="units-note">"GB = 10^9 bytes, GiB = 2^30 bytes; every figure is computed exactly in integers, then rounded only for display."</p>
        </section>
    }
}
