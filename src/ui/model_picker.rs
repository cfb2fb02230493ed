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
use crate::catalog::ImportReport;
use crate::catalog::presets::all_presets;
use crate::model::{DType, Model};
use crate::state::AppState;
use crate::ui::params::set_param;
use crate::views::describe::model_facts;
use crate::views::kv::MAX_CTX_TOKENS;
// The decode demo (another view's file) still reads `bytes_text` from here.
use crate::views::model_figures::{
    ConfigSource, MAX_CONFIG_BYTES, ModelFigure, config_source, ctx_choices, dtype_text, import_config, import_summary,
    key_figures,
};

/// The select's value for a model that came from a paste or a link's `cfg=`.
const CUSTOM: &str = "custom";

/// The model select of every view: the presets, and "Imported / custom model" while the link carries
/// a `cfg` (a pasted config or a shared custom model), so the select never names a preset the page is
/// not showing.
#[component]
pub fn ModelSelect(state: RwSignal<AppState>) -> impl IntoView {
    let is_custom = move || state.with(|s| s.model.cfg.is_some());
    view! {
        <select data-testid="model-select" on:change=move |ev| {
            let id = event_target_value(&ev);
            if id != CUSTOM {
                state.try_update(|s| s.choose_model(id, None));
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
    }
}

/// Model, dtype, context, layer, copy-link, the import panel and the config values.
#[component]
pub fn ModelPicker(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let report = RwSignal::new(None::<Result<ImportReport, String>>);
    let copied = RwSignal::new(None::<bool>);
    let n_layers = move || model.with(Model::n_layers);

    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default()>
            <label>
                "Model"
                <ModelSelect state/>
            </label>
            <label>
                "KV cache dtype"
                <select data-testid="dtype-select" on:change=move |ev| {
                    let _ = set_param(state, "dtype", &event_target_value(&ev));
                }>
                    {DType::ALL
                        .into_iter()
                        .map(|d| view! {
                            <option value=d.url_name() selected=move || state.with(|s| s.kv.dtype == d)>
                                {dtype_text(d)}
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
                        let _ = set_param(state, "ctx", &event_target_value(&ev));
                    }/>
            </label>
            <div class="chips" role="group" aria-label="Common context lengths">
                {ctx_choices()
                    .into_iter()
                    .map(|(n, label)| view! {
                        <button type="button" class="chip" data-testid="ctx-choice" data-value=n
                            class:active=move || state.with(|s| s.kv.ctx_tokens == n)
                            on:click=move |_| { let _ = set_param(state, "ctx", &n.to_string()); }>
                            {label}
                        </button>
                    })
                    .collect_view()}
            </div>
            <label>
                "Layer"
                <input type="number" min="0" data-testid="layer-input" max=move || n_layers().saturating_sub(1)
                    prop:value=move || state.with(|s| s.model.layer.to_string())
                    on:change=move |ev| {
                        let _ = set_param(state, "layer", &event_target_value(&ev));
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
            <ConfigValues state=state model=model/>
        </div>
    }
}

/// Reads `text` as a config.json; on success the model goes into the link.
fn import_text(state: RwSignal<AppState>, report: RwSignal<Option<Result<ImportReport, String>>>, text: &str) {
    let outcome = import_config(text).map(|(code, imported)| {
        state.update(|s| s.choose_model(s.model.preset.clone(), Some(code)));
        imported
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
    let summary = import_summary(&report);
    view! {
        <div class="import-report" data-testid="import-report" role="status">
            <p class="ok">{summary}</p>
            <h4>"Fields used"</h4>
            <ul class="fields" data-testid="import-used">
                {report.used.into_iter().map(|(path, value)| view! { <li><code>{path}</code>" = "{value}</li> }).collect_view()}
            </ul>
            <h4>"Not read (no attention or cache setting the import knows of)"</h4>
            <ul class="fields" data-testid="import-unread">
                {if report.unread.is_empty() {
                    view! { <li>"nothing"</li> }.into_any()
                } else {
                    report.unread.into_iter().map(|path| view! { <li><code>{path}</code></li> }).collect_view().into_any()
                }}
            </ul>
            <h4>"Not relevant (token ids, tokenizer, training and dtype notes, unset keys)"</h4>
            <p class="fields" data-testid="import-not-relevant">{report.not_relevant.join(", ")}</p>
            {(!report.readings.is_empty()).then(|| view! {
                <h4>"Read as (the file allows more than one reading)"</h4>
                <ul data-testid="import-readings">
                    {report.readings.clone().into_iter().map(|w| view! { <li>{w}</li> }).collect_view()}
                </ul>
            })}
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
fn ConfigValues(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let source = Memo::new(move |_| state.with(|s| config_source(&s.model)));
    view! {
        <details class="panel facts">
            <summary>"Config values of this model"</summary>
            {move || match source.get() {
                ConfigSource::LinkCode(code) => view! {
                    <p class="hint">"From the link's model code: " <code class="code" data-testid="cfg-code">{code}</code></p>
                }.into_any(),
                ConfigSource::Preset { name, fields, notes } => view! {
                    <p class="hint">"Published config of " {name} ". Fields it uses: "
                        <span data-testid="preset-fields">{fields}</span> "."</p>
                    <p class="hint">{notes}</p>
                }.into_any(),
                ConfigSource::Unknown => ().into_any(),
            }}
            <table class="facts-table" data-testid="config-values">
                <tbody>
                    {move || model.with(model_facts).into_iter().map(|(k, v)| view! { <tr><th scope="row">{k}</th><td>{v}</td></tr> }).collect_view()}
                </tbody>
            </table>
        </details>
    }
}

/// `kv-bytes-per-token`, `kv-total-bytes` and `attn-params-per-layer`, each with its formula.
#[component]
pub fn KeyFigures(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let f = Memo::new(move |_| model.with(|m| state.with(|s| key_figures(m, &s.kv, s.model.layer))));
    view! {
        <section class="figures" aria-label="Key figures">
            {move || model.with(|m| state.with(|s| crate::views::kv::context::past_context_notice(m, s.kv.ctx_tokens)))
                .map(|text| view! { <p class="notice" data-testid="ctx-past-context">{text}</p> })}
            <FigureView figure=Signal::derive(move || f.with(|f| f.per_token.clone()))
                testid="kv-bytes-per-token" formula_testid="kv-bytes-per-token-formula"/>
            <FigureView figure=Signal::derive(move || f.with(|f| f.total.clone()))
                testid="kv-total-bytes" formula_testid="kv-total-bytes-formula"/>
            <FigureView figure=Signal::derive(move || f.with(|f| f.attn_params.clone()))
                testid="attn-params-per-layer" formula_testid="attn-params-formula"/>
            <FigureView figure=Signal::derive(move || f.with(|f| f.state.clone()))
                testid="state-bytes" formula_testid="state-bytes-formula"/>
            <p class="units-note">"GB = 10^9 bytes, GiB = 2^30 bytes; every figure is computed exactly in integers, then rounded only for display."</p>
        </section>
    }
}

/// One figure: heading, the exact value (text and `data-value`) and its formula.
#[component]
fn FigureView(figure: Signal<ModelFigure>, testid: &'static str, formula_testid: &'static str) -> impl IntoView {
    view! {
        <div class="figure">
            <h3>{move || figure.with(|f| f.heading.clone())}</h3>
            <p class="big"><strong data-testid=testid data-value=move || figure.with(|f| f.value.clone())>
                {move || figure.with(|f| f.text.clone())}
            </strong></p>
            <p class="formula" data-testid=formula_testid>{move || figure.with(|f| f.formula.clone())}</p>
        </div>
    }
}
