//! The backward view's "Gradients on the model" panel: for real weights, the loss of the text (or of
//! one next token) differentiated down to the layer's keys and values, and a step on its W_Q, W_K,
//! W_V rerun through the model (the live-attention service's `text_gradients`), for the trained model
//! and a dropped checkpoint the page kept in memory; for synthetic weights, or a checkpoint too large
//! to keep, why there is nothing to show and how to get it. What it says and draws is worked out in
//! [`crate::views::backward::model_grad`]; this file binds it.

use std::rc::Rc;

use leptos::prelude::*;

use super::engine_signal::{EngineSignal, newest_job};
use super::params::write_typed;
use super::trained_compute::load;
use super::user_checkpoint::{self, Dropped, shows_real_weights};
use crate::engine::Engine;
use crate::live_attention::{TextGradients, text_gradients};
use crate::state::AppState;
use crate::views::backward::model_grad::{
    BeforeAfter, GradSettings, attention_cells, attention_heading, bars_caption, headline, json_numbers, key_bars,
    needs_real_weights, step_line, target_rows, tier_line,
};
use crate::views::heatmaps::trained::model_input;

/// A finished job, with the model's token pieces and layer count the words need.
#[derive(Clone)]
struct Shown {
    g: TextGradients,
    pieces: Vec<String>,
    layers: usize,
}

#[component]
pub fn ModelGradientsPanel(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let real = Memo::new(move |_| state.with(|s| shows_real_weights(&s.model)));
    view! {
        <section class="panel" data-testid="grad-model-panel">
            <h3>"Gradients on the model"</h3>
            {move || match real.get() {
                true => view! { <ModelGradients state engine/> }.into_any(),
                false => view! { <p class="hint" data-testid="grad-model-note">{needs_real_weights()}</p> }.into_any(),
            }}
        </section>
    }
}

/// Runs the job whenever what it reads changes; an older job stops at its next step.
#[component]
fn ModelGradients(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    let asked = Memo::new(move |_| state.with(|s| (GradSettings::of(s), s.model.is_trained(), s.model.cfg.clone())));
    let result = newest_job(
        engine,
        move || {
            let (asked, trained, _) = asked.get();
            (asked, trained, state.with_untracked(|s| user_checkpoint::shown(&s.model)))
        },
        |engine, (asked, trained, dropped), wanted| async move {
            compute(engine, (trained, dropped), asked, &|| wanted.get()).await
        },
    );
    view! {
        <GradControls state/>
        {move || match result.get() {
            None => view! { <p class="status" data-testid="grad-model-running">
                "Running the forward pass, the backward pass on the CPU, and the pass after the step…"</p> }.into_any(),
            Some(Err(why)) => view! { <p class="status error" data-testid="grad-model-error">{why}</p> }.into_any(),
            Some(Ok(shown)) => view! { <GradFigures shown/> }.into_any(),
        }}
    }
}

/// The trained model (fetched once) or the dropped checkpoint (when the page kept its weights in
/// memory); its tokens of the link's text; the job.
async fn compute(
    engine: Rc<Engine>,
    (trained, dropped): (bool, Option<Rc<Dropped>>),
    asked: GradSettings,
    wanted: &dyn Fn() -> bool,
) -> Result<Shown, String> {
    let lm = match (trained, dropped) {
        (true, _) => load().await?,
        (false, Some(d)) => d.host_copy.clone().map(|()| d.lm.clone())?,
        (false, None) => return Err("The dropped checkpoint is no longer loaded: drop its files again.".into()),
    };
    let (ids, pieces) = model_input(&lm.tokenizer, &asked.input, lm.reads())?;
    let ask = asked.ask(&ids, lm.model.n_q_heads)?;
    let g = text_gradients(&engine, &lm, &ids, ask, wanted).await?;
    Ok(Shown { g, pieces, layers: lm.layers() })
}

/// The target and the step size, each through the link's parser; the layer and head are the
/// controls above.
#[component]
fn GradControls(state: RwSignal<AppState>) -> impl IntoView {
    let refused = RwSignal::new(None::<String>);
    let write =
        move |key: &'static str, ev: leptos::ev::Event| write_typed(state, refused, key, &event_target_value(&ev));
    view! {
        <form class="controls" on:submit=|ev| ev.prevent_default() data-testid="grad-model-controls">
            <label>"Loss of (text, or a token position)"
                <input type="text" data-testid="grad-target" placeholder="text"
                    prop:value=move || state.with(|s| s.backward.target.to_string()) on:change=move |ev| write("target", ev)/>
            </label>
            <label>"Step size η"
                <input type="number" min="0" max="100" step="any" data-testid="grad-eta"
                    prop:value=move || state.with(|s| s.backward.eta.to_string()) on:change=move |ev| write("eta", ev)/>
            </label>
            {move || refused.get().map(|why| view! { <small class="field-error" role="alert" data-testid="grad-refused">{why}</small> })}
        </form>
    }
}

#[component]
fn GradFigures(shown: Shown) -> impl IntoView {
    let Shown { g, pieces, layers } = shown;
    let after = g.after.as_ref().map(|a| a.loss.to_string()).unwrap_or_default();
    let tier = if g.on_gpu { "gpu" } else { "cpu" };
    view! {
        <div data-testid="grad-model" data-loss-before=g.before.loss.to_string() data-loss-after=after
            data-tier=tier data-backward-loss=g.backward_loss.to_string()
            data-grad-norm=g.grad_norm.to_string() data-tokens=g.tokens data-layer=g.ask.layer
            data-eta=g.ask.eta.to_string()>
            <p>{headline(&g, &pieces)}</p>
            <p data-testid="grad-model-step">{step_line(&g)}</p>
            <p class="hint" data-testid="grad-model-tier">{tier_line(&g, layers)}</p>
        </div>
        <KeyBars g=g.clone() pieces=pieces.clone()/>
        <BeforeAfterTables g pieces/>
    }
}

/// Per head, a bar per key position (an SVG of unit-wide bars, a title on each).
#[component]
fn KeyBars(g: TextGradients, pieces: Vec<String>) -> impl IntoView {
    let heads = key_bars(&g.key_norms, &pieces);
    view! {
        <p class="hint">{bars_caption(&g)}</p>
        <div class="key-bars">
            {heads.into_iter().map(|h| {
                let n = h.bars.len().max(1);
                view! {
                    <figure data-testid="grad-key-bars" data-head=h.head data-largest=h.largest.to_string()
                        data-norms=json_numbers(h.bars.iter().map(|b| b.norm))>
                        <svg viewBox=format!("0 0 {n} 1") preserveAspectRatio="none" width="240" height="60" role="img"
                            aria-label=format!("Head {}: gradient norm per key position", h.head)>
                            {h.bars.iter().map(|b| view! {
                                <rect x=b.position y=(1.0 - b.height).to_string() width="0.8" height=b.height.to_string()>
                                    <title>{format!("key {} (“{}”): ‖dk‖ {:.3e}, ‖dv‖ {:.3e}", b.position, b.token, b.key, b.value)}</title>
                                </rect>
                            }).collect_view()}
                        </svg>
                        <figcaption>{format!("head {} (largest {:.3e})", h.head, h.largest)}</figcaption>
                    </figure>
                }
            }).collect_view()}
        </div>
    }
}

/// Each counted token's probability, and the chosen head's attention row, before and after the step.
#[component]
fn BeforeAfterTables(g: TextGradients, pieces: Vec<String>) -> impl IntoView {
    view! {
        <BeforeAfterTable rows=target_rows(&g, &pieces) columns=["after position", "next token"] testid="grad-target-prob"/>
        <h4>{attention_heading(&g, &pieces)}</h4>
        <div data-testid="grad-attention" data-head=g.ask.head data-row=g.row>
            <BeforeAfterTable rows=attention_cells(&g, &pieces) columns=["key", "token"] testid="grad-attention-key"/>
        </div>
    }
}

/// Rows of a position, its token and a probability before and after; each row carries `testid`.
#[component]
fn BeforeAfterTable(rows: Vec<BeforeAfter>, columns: [&'static str; 2], testid: &'static str) -> impl IntoView {
    let fmt = |p: Option<f64>| p.map_or("–".into(), |p| format!("{p:.4}"));
    view! {
        <table class="data">
            <thead><tr><th>{columns[0]}</th><th>{columns[1]}</th><th>"probability before"</th><th>"after the step"</th></tr></thead>
            <tbody>
                {rows.into_iter().map(|r| view! {
                    <tr data-testid=testid data-position=r.position data-before=r.before.to_string()
                        data-after=r.after.map(|a| a.to_string()).unwrap_or_default()>
                        <td class="num">{r.position}</td><td>{r.token}</td>
                        <td class="num">{fmt(Some(r.before))}</td><td class="num">{fmt(r.after)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
