//! The memory view's eviction half (`tech=evict`): each policy run during teacher-forced decoding of
//! the link's text on the trained model's pass (on the GPU, or the CPU without WebGPU), at the link's K and at the chart's sizes; rows,
//! the chart of KL against K, and the chosen policy's kept keys per layer. What it shows is decided in
//! [`crate::views::memory::evict`]; the live-attention service runs the passes
//! (`LoadedLm::pass_with_eviction`); this file lays them out.

use std::rc::Rc;

use leptos::prelude::*;
use wasm_bindgen::Clamped;

use super::browser;
use super::chart::LineChart;
use super::engine_signal::{EngineSignal, newest_job};
use super::memory_common::{TechChoice, TextAndRefusal, status};
use super::params::set_param;
use super::trained_compute::load;
use crate::catalog::presets::{TRAINED_ID, preset};
use crate::engine::Engine;
use crate::lm::forward::EvictionRecord;
use crate::lm::kv_quality::quality;
use crate::model::Model;
use crate::model::kv_evict::{EvictPolicy, POLICIES};
use crate::state::AppState;
use crate::views::heatmaps::trained::model_tokens;
use crate::views::memory::evict::{
    EvictRow, LayerGrid, chart, evict_cells, evict_row, heading, layer_grids, planned_runs, policy_words,
};
use crate::views::memory::rows::quality_cells;
use crate::views::memory::{MAX_KEEP, MemoryParams};

#[derive(Clone)]
struct Measured {
    heading: String,
    model: Model,
    rows: Vec<EvictRow>,
    keep: usize,
    chosen: EvictPolicy,
    grids: Vec<LayerGrid>,
    on_gpu: bool,
}

#[component]
pub fn EvictView(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let result = newest_job(
        engine,
        move || state.with(|s| (s.input.text.clone(), s.memory.clone())),
        |engine, (text, params), wanted| async move { measure(engine, text, params, &|| wanted.get()).await },
    );
    view! {
        <section class="memory-view" data-testid="memory-view" data-tech="evict">
            <EvictControls state/>
            {move || match result.get() {
                Some(Ok(m)) => view! { <EvictResults m/> }.into_any(),
                other => status(other.and_then(Result::err), "Decoding with each policy on the trained model…"),
            }}
        </section>
    }
}

/// The plain pass, then every planned run, each through the live-attention service.
async fn measure(
    engine: Rc<Engine>,
    text: String,
    params: MemoryParams,
    current: &dyn Fn() -> bool,
) -> Result<Measured, String> {
    let lm = load().await?;
    let (ids, _) = model_tokens(&lm.tokenizer, &text, lm.reads())?;
    let model = preset(TRAINED_ID).unwrap_or(&lm.model).clone();
    let masks = lm.layer_masks().ok_or("the trained model's weights are not in host memory")?;
    let (full, everything) = lm.pass_with_eviction(&engine, &ids, EvictPolicy::Full, ids.len(), current).await?;
    let (keep, chosen) = (params.keep as usize, params.chosen_policy());
    let (mut rows, mut grids) = (Vec::new(), Vec::new());
    for (size, policy) in planned_runs(params.keep, ids.len()) {
        // Keeping everything is the reference pass itself (bit for bit, tested): not run twice.
        let (out, record) = match policy {
            EvictPolicy::Full => (full.clone(), EvictionRecord { keep: size, ..everything.clone() }),
            _ => lm.pass_with_eviction(&engine, &ids, policy, size, current).await?,
        };
        let q = quality(&full.logits, &out.logits, &ids).ok_or("the passes' logits do not match the text")?;
        rows.push(evict_row(&model, &record, q));
        if size == keep && policy == chosen {
            grids = layer_grids(&masks, &record);
        }
    }
    let heading = heading(&model, ids.len(), params.keep, full.on_gpu);
    Ok(Measured { heading, model, rows, keep, chosen, grids, on_gpu: full.on_gpu })
}

/// K, the policy of the grid, the technique and the text, each through the link's parser.
#[component]
fn EvictControls(state: RwSignal<AppState>) -> impl IntoView {
    let refused = RwSignal::new(None::<String>);
    let write = move |key: &'static str, ev: leptos::ev::Event| {
        refused.set(set_param(state, key, &event_target_value(&ev)).err())
    };
    let policy = move || state.with(|s| s.memory.policy);
    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default() data-testid="memory-controls">
            <TechChoice state refused/>
            <label>"Kept tokens per layer K"
                <input type="number" min="1" max=MAX_KEEP.to_string() data-testid="memory-keep"
                    prop:value=move || state.with(|s| s.memory.keep) on:change=move |ev| write("keep", ev)/>
            </label>
            <label>"Kept keys of"
                <select data-testid="memory-policy" on:change=move |ev| write("policy", ev)>
                    {POLICIES.iter().enumerate().map(|(i, p)| view! { <option value=p.name() selected=move || policy() == i>{p.name()}</option> }).collect_view()}
                </select>
            </label>
            <TextAndRefusal state refused/>
        </form>
    }
}

#[component]
fn EvictResults(m: Measured) -> impl IntoView {
    let data = chart(&m.rows, &m.model);
    let rows = m.rows.iter().filter(|r| r.keep == m.keep).map(|r| {
        let [kl, top1, loss] = quality_cells(&r.quality);
        let [keep, last, read, dropped] = evict_cells(r);
        view! {
            <tr data-testid="memory-row" data-tech="evict" data-name=r.policy.name() data-keep=r.keep
                data-bytes-per-token=r.bytes_last.to_string() data-bytes-read=r.bytes_read.to_string()
                data-kl=r.quality.kl.to_string() data-top1=r.quality.top1.to_string()
                data-loss=r.quality.loss.map(|l| l.to_string()).unwrap_or_default() data-dropped=r.dropped.to_string()>
                <td>{r.policy.name()}</td><td title=policy_words(r.policy, r.keep)>{keep}</td><td>{last}</td><td>{read}</td>
                <td>{kl}</td><td>{top1}</td><td>{loss}</td><td>{dropped}</td>
            </tr>
        }
    }).collect_view();
    view! {
        <p class="memory-heading" data-testid="memory-heading" data-on-gpu=m.on_gpu.to_string()>{m.heading.clone()}</p>
        <table class="memory-table">
            <thead><tr><th>"policy"</th><th>"K"</th><th>"bytes read at the last token"</th><th>"bytes read over the text"</th>
                <th>"KL from keeping everything (nats)"</th><th>"top-1 agreement"</th><th>"loss on the text (nats/token)"</th>
                <th>"attention thrown away per query"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        <LineChart data=data marker=Signal::derive(|| None) testid="memory-chart"/>
        <KeptGrids chosen=m.chosen keep=m.keep grids=m.grids.clone()/>
    }
}

#[component]
fn KeptGrids(chosen: EvictPolicy, keep: usize, grids: Vec<LayerGrid>) -> impl IntoView {
    let figures = grids.into_iter().map(|g| view! { <KeptGrid g/> }).collect_view();
    view! {
        <h3>{format!("Keys {} kept at each step (K = {keep}: {})", chosen.name(), policy_words(chosen, keep))}</h3>
        <p class="legend">"Rows are queries (steps), columns keys: blue kept and read, orange evicted though the \
            layer's mask lets it through, grey later or outside the layer's own window. The deeper a cell's colour, \
            the more attention the full cache gives that key (the mean of the layer's heads, with the evicting \
            pass's own queries and keys): deep orange is attention thrown away."</p>
        <div class="evict-grids">{figures}</div>
    }
}

#[component]
fn KeptGrid(g: LayerGrid) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    let (tokens, pixels) = (g.tokens as u32, g.pixels.clone());
    Effect::new(move |_| {
        let Some(canvas) = canvas.get() else { return };
        canvas.set_width(tokens);
        canvas.set_height(tokens);
        let Some(ctx) = browser::context_2d(&canvas) else { return };
        let bytes = Clamped(bytemuck::cast_slice(&pixels));
        if let Ok(image) = web_sys::ImageData::new_with_u8_clamped_array_and_sh(bytes, tokens, tokens) {
            ctx.put_image_data(&image, 0.0, 0.0).ok();
        }
    });
    let last = serde_json::to_string(&g.last_kept).unwrap_or_default();
    let rows = serde_json::to_string(&g.dropped_rows).unwrap_or_default();
    view! {
        <figure class="evict-grid" data-testid="evict-grid" data-layer=g.layer data-last-kept=last
            data-dropped=g.dropped.to_string() data-dropped-rows=rows>
            <canvas node_ref=canvas class="evict-canvas"></canvas>
            <figcaption>{format!("layer {}: {:.1} % of the attention thrown away per query", g.layer, g.dropped * 100.0)}</figcaption>
        </figure>
    }
}
