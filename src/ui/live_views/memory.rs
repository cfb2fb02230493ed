//! The memory view: each quantised-KV scheme measured on the trained model over the link's text (rows
//! of bytes per token and quality, a chart, the chosen scheme's heads), or with `tech=evict` each
//! eviction policy (`memory_evict_view`). What it shows is decided in [`crate::views::memory`]; this
//! file asks the live-attention service for the quantised passes (on the GPU or the CPU) and lays the
//! results out.

use std::rc::Rc;

use leptos::prelude::*;

use crate::catalog::presets::{TRAINED_ID, preset};
use crate::engine::Engine;
use crate::live_attention::kv_groups::STOPPED;
use crate::lm::kv_quality::quality;
use crate::model::kv_quant::{GROUPS, KvScheme};
use crate::state::AppState;
use crate::ui::chart::LineChart;
use crate::ui::engine_signal::{EngineSignal, newest_job};
use crate::ui::memory_common::{TechChoice, TextAndRefusal, status};
use crate::ui::memory_evict_view::EvictView;
use crate::ui::params::set_param;
use crate::ui::trained_compute::load;
use crate::views::heatmaps::trained::model_tokens;
use crate::views::memory::rows::{
    HeadRow, LayerOutputs, SchemeRow, chart, head_cells, head_rows, heading, quality_cells, scheme_row,
};
use crate::views::memory::{MemoryParams, SCHEME_KINDS, Tech};

/// One measurement, as the page shows it.
#[derive(Clone)]
struct Measured {
    heading: String,
    model_name: String,
    tokens: usize,
    rows: Vec<SchemeRow>,
    chosen: String,
    heads: Vec<HeadRow>,
}

#[component]
pub fn MemoryView(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let tech = Memo::new(move |_| state.with(|s| s.memory.tech()));
    move || match tech.get() {
        Tech::Quant => view! { <QuantView state engine/> }.into_any(),
        Tech::Evict => view! { <EvictView state engine/> }.into_any(),
    }
}

#[component]
fn QuantView(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let result = newest_job(
        engine,
        move || state.with(|s| (s.input.text.clone(), s.memory.clone())),
        |engine, (text, params), wanted| async move { measure(engine, text, params, move || wanted.get()).await },
    );
    view! {
        <section class="memory-view" data-testid="memory-view">
            <MemoryControls state/>
            {move || match result.get() {
                Some(Ok(m)) => view! { <MemoryResults m/> }.into_any(),
                other => status(other.and_then(Result::err), "Measuring each scheme on the trained model…"),
            }}
        </section>
    }
}

/// The full-precision pass and one per scheme, each reading its quantised cache in every layer, on
/// the GPU or the CPU (the live-attention service's); `wanted` says no once a newer request came.
async fn measure(
    engine: Rc<Engine>,
    text: String,
    params: MemoryParams,
    wanted: impl Fn() -> bool,
) -> Result<Measured, String> {
    let lm = load().await?;
    let (ids, _) = model_tokens(&lm.tokenizer, &text, lm.reads())?;
    let pass = async |scheme| lm.pass_with_kv_scheme(&engine, &ids, scheme, &wanted).await;
    // The preset's record of the same config.json: its name is the model's, not its family's.
    let model = preset(TRAINED_ID).unwrap_or(&lm.model);
    let full = pass(KvScheme::Fp32).await?;
    let (mut rows, mut heads) = (Vec::new(), Vec::new());
    for scheme in params.schemes() {
        if !wanted() {
            return Err(STOPPED.into());
        }
        // The full-precision row is the reference pass itself: not run twice.
        let out = if scheme == KvScheme::Fp32 { full.clone() } else { pass(scheme).await? };
        let q = quality(&full.logits, &out.logits, &ids).ok_or("the passes' logits do not match the text")?;
        rows.push(scheme_row(model, scheme, q));
        if scheme == params.chosen() {
            let full = LayerOutputs { probs: &full.probs, attended: &full.attended };
            heads = head_rows(full, LayerOutputs { probs: &out.probs, attended: &out.attended }, ids.len());
        }
    }
    let (model_name, tokens, chosen) = (model.name.clone(), ids.len(), params.chosen().name());
    Ok(Measured { heading: heading(model, tokens, full.on_gpu), model_name, tokens, rows, chosen, heads })
}

/// Group size, recent tokens, the scheme of the head table and the text, each through the link's parser.
#[component]
fn MemoryControls(state: RwSignal<AppState>) -> impl IntoView {
    let refused = RwSignal::new(None::<String>);
    let write = move |key: &'static str, ev: leptos::ev::Event| {
        refused.set(set_param(state, key, &event_target_value(&ev)).err())
    };
    let group = move || state.with(|s| s.memory.group);
    let scheme = move || state.with(|s| s.memory.scheme);
    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default() data-testid="memory-controls">
            <TechChoice state refused/>
            <label>"Group size G"
                <select data-testid="memory-group" on:change=move |ev| write("group", ev)>
                    {GROUPS.map(|g| view! { <option value=g.to_string() selected=move || group() == g>{g}</option> }).to_vec()}
                </select>
            </label>
            <label>"KIVI's recent tokens R"
                <input type="number" min="0" max="128" data-testid="memory-recent"
                    prop:value=move || state.with(|s| s.memory.recent) on:change=move |ev| write("recent", ev)/>
            </label>
            <label>"Heads of"
                <select data-testid="memory-scheme" on:change=move |ev| write("scheme", ev)>
                    {SCHEME_KINDS.iter().enumerate().map(|(i, k)| view! { <option value=*k selected=move || scheme() == i>{*k}</option> }).collect_view()}
                </select>
            </label>
            <TextAndRefusal state refused/>
        </form>
    }
}

#[component]
fn MemoryResults(m: Measured) -> impl IntoView {
    let data = chart(&m.rows, &m.model_name);
    let rows = m.rows.iter().map(|r| {
        let [kl, top1, loss] = quality_cells(&r.quality);
        view! {
            <tr data-testid="memory-row" data-tech="quant" data-name=r.name.clone()
                data-bytes-per-token=r.bytes_per_token.to_string() data-kl=r.quality.kl.to_string()
                data-top1=r.quality.top1.to_string() data-loss=r.quality.loss.map(|l| l.to_string()).unwrap_or_default()>
                <td>{r.name.clone()}</td><td>{r.bytes_per_token}</td><td>{r.fixed_bytes}</td>
                <td>{kl}</td><td>{top1}</td><td>{loss}</td>
            </tr>
        }
    }).collect_view();
    view! {
        <p class="memory-heading" data-testid="memory-heading">{m.heading.clone()}</p>
        <table class="memory-table">
            <thead><tr><th>"scheme"</th><th>"bytes per token"</th><th>"fixed bytes"</th>
                <th>"KL from fp32 (nats)"</th><th>"top-1 agreement"</th><th>"loss on the text (nats/token)"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        <LineChart data=data marker=Signal::derive(|| None) testid="memory-chart"/>
        <HeadTable chosen=m.chosen.clone() heads=m.heads.clone() tokens=m.tokens/>
    }
}

#[component]
fn HeadTable(chosen: String, heads: Vec<HeadRow>, tokens: usize) -> impl IntoView {
    let rows = heads.iter().map(|h| {
        let [max_abs, mean_abs, moved, output] = head_cells(h, tokens);
        view! {
            <tr data-testid="memory-head" data-layer=h.layer data-head=h.head data-max-change=h.change.max_abs.to_string()
                data-output-error=h.output_error.to_string()>
                <td>{h.layer}</td><td>{h.head}</td><td>{max_abs}</td><td>{mean_abs}</td><td>{moved}</td><td>{output}</td>
            </tr>
        }
    }).collect_view();
    view! {
        <h3>{format!("Each head under {chosen}, against full precision")}</h3>
        <table class="memory-heads">
            <thead><tr><th>"layer"</th><th>"head"</th><th>"largest |Δp|"</th><th>"mean |Δp| (causal pairs)"</th>
                <th>"rows whose top key moved"</th><th>"output's relative error"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
