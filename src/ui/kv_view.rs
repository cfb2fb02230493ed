//! The KV-cache view: the exact figures, a per-layer-type breakdown that shows why, a GPU memory
//! budget with the longest context that fits, the memory-against-context chart, and the live decode
//! animation. Everything is computed by `crate::model`; this file only lays it out.

use leptos::prelude::*;

use super::chart::{LineChart, LineChartData, RefLine, Series};
use super::decode_demo::DecodeDemo;
use super::engine_signal::EngineSignal;
use super::model_picker::{KeyFigures, ModelPicker, bytes_text};
use crate::model::budget::{BUDGET_PRESETS_GB, BudgetFit, budget_fit, format_gb, parse_gb};
use crate::model::curves::{chart_max_tokens, chart_samples, kv_curves};
use crate::model::formulas::{cached_tokens_reason, elements_factors, row_formula};
use crate::model::plot::{Axis, Scale, short_bytes_label, short_tokens_label};
use crate::model::units::{format_bytes, format_thousands, format_tokens};
use crate::model::{ContextFit, DType, LayerKind, kv_breakdown};
use crate::state::AppState;

#[component]
pub fn KvView(state: RwSignal<AppState>, engine: EngineSignal) -> impl IntoView {
    // The decode animation's position: (tokens of request A, bytes of the model's cache at that length).
    let decode_marker = RwSignal::new(None::<(u64, u128)>);
    view! {
        <section class="kv-view">
            <ModelPicker state=state/>
            <KeyFigures state=state/>
            <Breakdown state=state/>
            <Budget state=state/>
            <KvChart state=state marker=decode_marker/>
            <DecodeDemo state=state model=expect_context() engine=engine marker=decode_marker/>
        </section>
    }
}

/// One row per layer type: the columns a calculator needs to be right about.
#[component]
fn Breakdown(state: RwSignal<AppState>) -> impl IntoView {
    view! {
        <section class="panel breakdown">
            <h3>"Why: the cache by layer type"</h3>
            {move || {
                let (m, n, dtype) = state.with(|s| (s.resolved_model(), s.kv.ctx_tokens, s.kv.dtype));
                let Ok(b) = kv_breakdown(&m, n, dtype) else {
                    return view! { <p class="status error">"These sizes are too large to represent."</p> }.into_any();
                };
                let rows = b.rows.iter().map(|r| {
                    let (heads, dims) = match m.mla {
                        Some(x) => ("1 latent".to_string(), format!("{} + {}", x.kv_lora_rank, x.qk_rope_head_dim)),
                        None => {
                            let g = m.geometry(r.kind);
                            (g.n_kv_heads.to_string(), format!("{}{}", g.head_dim, if g.k_eq_v { " (K = V)" } else { "" }))
                        }
                    };
                    let layers = if r.storing_layers == r.layers {
                        r.layers.to_string()
                    } else {
                        format!("{} ({} reuse another layer's cache)", r.storing_layers, r.layers - r.storing_layers)
                    };
                    view! {
                        <tr data-testid="kv-breakdown-row" data-kind=r.kind.noun() data-bytes=r.bytes.to_string()
                            data-cached-tokens=r.cached_tokens.to_string()>
                            <th scope="row">{kind_name(r.kind)}</th>
                            <td>{layers}</td>
                            <td>{heads}</td>
                            <td>{dims}</td>
                            <td>{elements_factors(&m, r.kind)}</td>
                            <td>{format_thousands(r.cached_tokens.into())}<br/><small>{cached_tokens_reason(r.kind, n)}</small></td>
                            <td class="num">{bytes_text(r.bytes)}<br/><small class="formula">{row_formula(&m, r, dtype)}</small></td>
                        </tr>
                    }
                }).collect_view();
                view! {
                    <div class="table-scroll">
                        <table class="data">
                            <thead><tr>
                                <th scope="col">"Layer type"</th><th scope="col">"Layers storing a cache"</th>
                                <th scope="col">"KV heads"</th><th scope="col">"Head dim"</th>
                                <th scope="col">"Elements per token per layer"</th>
                                <th scope="col">{format!("Tokens cached at {}", format_thousands(n.into()))}</th>
                                <th scope="col">{format!("Bytes ({})", dtype.label())}</th>
                            </tr></thead>
                            <tbody>{rows}</tbody>
                            <tfoot><tr>
                                <th scope="row">"Total"</th><td colspan="5"></td>
                                <td class="num">{bytes_text(b.total_bytes)}</td>
                            </tr></tfoot>
                        </table>
                    </div>
                }.into_any()
            }}
            <p class="explain">
                "A layer caches K and V for each of its KV heads (not its query heads: with GQA several query heads "
                "share one), unless K = V, and only for the tokens it can still attend to: all of them for a global "
                "layer, the last W for a sliding window, the current chunk for chunked attention. MLA caches one "
                "compressed latent and a shared RoPE key per token, whatever the head count. Layers that reuse "
                "another layer's cache store nothing."
            </p>
        </section>
    }
}

fn kind_name(kind: LayerKind) -> String {
    match kind {
        LayerKind::Global => "global".into(),
        LayerKind::Sliding { window_tokens } => format!("sliding, window {}", format_thousands(window_tokens.into())),
        LayerKind::Chunked { chunk_tokens } => format!("chunked, chunk {}", format_thousands(chunk_tokens.into())),
    }
}

fn fit_of(s: &AppState) -> Option<BudgetFit> {
    budget_fit(&s.resolved_model(), s.kv.dtype, s.kv.ctx_tokens, s.kv.budget_bytes, s.kv.weights).ok()
}

/// The budget, whether the weights count, and what fits.
#[component]
fn Budget(state: RwSignal<AppState>) -> impl IntoView {
    let fit = Memo::new(move |_| state.with(fit_of));
    let budget_text = RwSignal::new(state.with_untracked(|s| format_gb(s.kv.budget_bytes)));
    let budget_error = RwSignal::new(None::<String>);
    view! {
        <section class="panel budget">
            <h3>"Does it fit? A GPU memory budget"</h3>
            <form class="controls inline" on:submit=|ev| ev.prevent_default()>
                <label>
                    "Budget (GB = 10^9 bytes)"
                    <input type="text" inputmode="decimal" data-testid="budget-input"
                        prop:value=move || budget_text.get()
                        on:change=move |ev| {
                            let text = event_target_value(&ev);
                            match parse_gb(&text) {
                                Ok(bytes) => {
                                    budget_error.set(None);
                                    state.update(|s| s.kv.budget_bytes = bytes);
                                }
                                Err(e) => budget_error.set(Some(e)),
                            }
                            budget_text.set(text);
                        }/>
                </label>
                <div class="chips" role="group" aria-label="Common GPU memory sizes">
                    {BUDGET_PRESETS_GB.into_iter().map(|(gb, label)| {
                        let bytes = gb * 1_000_000_000;
                        view! {
                            <button type="button" class="chip" data-testid="budget-preset" data-gb=gb title=label
                                class:active=move || state.with(|s| s.kv.budget_bytes == bytes)
                                on:click=move |_| {
                                    budget_error.set(None);
                                    budget_text.set(gb.to_string());
                                    state.update(|s| s.kv.budget_bytes = bytes);
                                }>
                                {format!("{gb} GB")}
                            </button>
                        }
                    }).collect_view()}
                </div>
                <label>
                    "Weights"
                    <select data-testid="weights-select" on:change=move |ev| {
                        let v = event_target_value(&ev);
                        let weights = v.parse::<DType>().ok();
                        state.update(|s| s.kv.weights = weights);
                    }>
                        <option value="off" selected=move || state.with(|s| s.kv.weights.is_none())>"not counted (cache only)"</option>
                        {DType::ALL.into_iter().map(|d| view! {
                            <option value=d.url_name() selected=move || state.with(|s| s.kv.weights == Some(d))>
                                {format!("counted, in {}", d.label())}
                            </option>
                        }).collect_view()}
                    </select>
                </label>
            </form>
            {move || budget_error.get().map(|e| view! { <p class="status error" data-testid="budget-error">{e}</p> })}
            {move || match fit.get() {
                None => view! { <p class="status error">"These sizes are too large to represent."</p> }.into_any(),
                Some(f) => view! { <FitSummary fit=f state=state/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn FitSummary(fit: BudgetFit, state: RwSignal<AppState>) -> impl IntoView {
    let (ctx, budget) = state.with_untracked(|s| (s.kv.ctx_tokens, s.kv.budget_bytes));
    let (value, headline) = match fit.fit {
        ContextFit::WeightsDoNotFit => {
            ("none".to_string(), "The weights alone do not fit: no context fits.".to_string())
        }
        ContextFit::Unbounded => {
            ("unbounded".to_string(), "Any context fits: every layer is windowed and the plateau fits.".to_string())
        }
        ContextFit::Tokens(n) if n == u64::MAX => {
            ("unbounded".to_string(), "Any context a model could use fits.".to_string())
        }
        ContextFit::Tokens(n) => (
            n.to_string(),
            format!("Longest context that fits: {} tokens ({})", format_thousands(n.into()), format_tokens_approx(n)),
        ),
    };
    let weights_line = match fit.weights_bytes {
        Some(w) => format!(
            "{} budget − {} weights = {} left for the cache.",
            format_bytes(fit.budget_bytes),
            format_bytes(w),
            format_bytes(fit.kv_room_bytes)
        ),
        None => format!("The whole {} budget is for the cache (weights not counted).", format_bytes(fit.budget_bytes)),
    };
    let percent = fit.used_at_ctx_bytes as f64 / budget as f64 * 100.0;
    let at_ctx = match fit.weights_bytes {
        Some(w) => format!(
            "At {} tokens: {} cache + {} weights = {} of {}, {percent:.1}%.",
            format_thousands(ctx.into()),
            format_bytes(fit.kv_at_ctx_bytes),
            format_bytes(w),
            format_bytes(fit.used_at_ctx_bytes),
            format_bytes(fit.budget_bytes)
        ),
        None => format!(
            "At {} tokens: {} cache of {}, {percent:.1}%.",
            format_thousands(ctx.into()),
            format_bytes(fit.kv_at_ctx_bytes),
            format_bytes(fit.budget_bytes)
        ),
    };
    let verdict = if fit.ctx_fits() { "fits" } else { "does not fit" };
    view! {
        <p class="big"><strong data-testid="budget-fit" data-value=value data-room=fit.kv_room_bytes.to_string()>{headline}</strong></p>
        <p data-testid="budget-weights" data-value=fit.weights_bytes.map_or_else(|| "0".to_string(), |w| w.to_string())>{weights_line}</p>
        <p data-testid="budget-at-ctx" data-fits=fit.ctx_fits().to_string()>{at_ctx} " The chosen context " <strong>{verdict}</strong> "."</p>
        <p class="hint">"Activations, the runtime's workspace and fragmentation also take memory; real deployments keep a margin. Quantisation scales are not counted."</p>
    }
}

/// `610,351` -> `596K` style; exact powers stay exact (`8K`).
fn format_tokens_approx(n: u64) -> String {
    let exact = format_tokens(n);
    if exact.ends_with('K') || exact.ends_with('M') { exact } else { short_tokens_label(n as f64) }
}

/// The memory-against-context chart with the budget line and the decode marker.
#[component]
fn KvChart(state: RwSignal<AppState>, marker: RwSignal<Option<(u64, u128)>>) -> impl IntoView {
    let data = Memo::new(move |_| state.with(chart_data));
    let marker_point = Signal::derive(move || {
        marker.get().map(|(tokens, bytes)| {
            (tokens as f64, bytes as f64, format!("decode: {} tokens, {}", tokens, short_bytes_label(bytes as f64)))
        })
    });
    view! {
        <section class="panel chart">
            <div class="chart-head">
                <h3>"KV memory against context length"</h3>
                <label>
                    "Axes "
                    <select data-testid="axis-select" on:change=move |ev| {
                        if let Ok(a) = event_target_value(&ev).parse::<Axis>() { state.update(|s| s.kv.axis = a) }
                    }>
                        {Axis::ALL.into_iter().map(|a| view! {
                            <option value=a.name() selected=move || state.with(|s| s.kv.axis == a)>{a.name()}</option>
                        }).collect_view()}
                    </select>
                </label>
            </div>
            {move || match data.get() {
                Some(d) => view! { <LineChart data=d marker=marker_point testid="kv-chart"/> }.into_any(),
                None => view! { <p class="status error">"These sizes are too large to chart."</p> }.into_any(),
            }}
            <p class="explain">
                "Each line is one layer type (all its layers together) and the total. A sliding-window or chunked "
                "layer stops growing at its window: its line goes flat, while global layers keep growing. The dashed "
                "line is the budget left for the cache; where the total crosses it is the longest context that fits."
            </p>
        </section>
    }
}

const SERIES_CLASSES: [&str; 4] = ["s0", "s1", "s2", "s3"];

fn chart_data(s: &AppState) -> Option<LineChartData> {
    let m = s.resolved_model();
    let fit = fit_of(s)?;
    let max_tokens = chart_max_tokens(&m, s.kv.ctx_tokens, fit.fit);
    let fit_tokens = match fit.fit {
        ContextFit::Tokens(n) if n <= max_tokens => Some(n),
        _ => None,
    };
    let mut extra = vec![s.kv.ctx_tokens];
    extra.extend(fit_tokens);
    let samples = chart_samples(&m, s.kv.axis, max_tokens, &extra);
    let curves = kv_curves(&m, s.kv.dtype, &samples).ok()?;
    let top_bytes = curves.last().and_then(|c| c.points.last()).map_or(1, |p| p.1);
    let room = fit.kv_room_bytes;
    let show_room = room > 0;
    let y_max = (top_bytes.max(if show_room { room } else { 0 }) as f64 * 1.05).max(1.0);
    let y_min = match s.kv.axis {
        Axis::Linear => 0.0,
        Axis::Log => {
            let smallest =
                curves.iter().flat_map(|c| c.points.iter()).map(|p| p.1).filter(|&b| b > 0).min().unwrap_or(1);
            10f64.powf((smallest as f64).log10().floor())
        }
    };
    let x = Scale::new(s.kv.axis, if s.kv.axis == Axis::Log { 1.0 } else { 0.0 }, max_tokens as f64);
    let y = Scale::new(s.kv.axis, y_min, y_max);
    let series: Vec<Series> = curves
        .iter()
        .enumerate()
        .map(|(i, c)| Series {
            label: c.label(),
            class: if c.kind.is_none() { "total" } else { SERIES_CLASSES[i % SERIES_CLASSES.len()] },
            points: c
                .points
                .iter()
                .filter(|p| s.kv.axis == Axis::Linear || (p.0 > 0 && p.1 > 0))
                .map(|&(n, b)| (n as f64, b as f64))
                .collect(),
        })
        .collect();
    let mut h_lines = Vec::new();
    if show_room {
        let label = match fit.weights_bytes {
            Some(_) => format!(
                "{} GB budget − weights = {} for the cache",
                format_gb(s.kv.budget_bytes),
                short_bytes_label(room as f64)
            ),
            None => format!("{} GB budget", format_gb(s.kv.budget_bytes)),
        };
        h_lines.push(RefLine { value: room as f64, label, class: "budget" });
    }
    let mut v_lines = vec![RefLine {
        value: s.kv.ctx_tokens as f64,
        label: format!("context {}", short_tokens_label(s.kv.ctx_tokens as f64)),
        class: "ctx",
    }];
    if let Some(n) = fit_tokens {
        v_lines.push(RefLine {
            value: n as f64,
            label: format!("fits up to {}", format_thousands(n.into())),
            class: "fit",
        });
    }
    let description = format!(
        "KV cache of {} in {} against context length from 0 to {} tokens, {} axes.",
        m.name,
        s.kv.dtype.label(),
        format_thousands(max_tokens.into()),
        s.kv.axis.name()
    );
    Some(LineChartData {
        x_ticks: x.binary_ticks(6).into_iter().map(|t| (t, short_tokens_label(t))).collect(),
        y_ticks: y.decimal_ticks(5).into_iter().map(|t| (t, short_bytes_label(t))).collect(),
        x,
        y,
        series,
        h_lines,
        v_lines,
        x_title: "context length (tokens; K = 1,024)".into(),
        y_title: format!("KV cache, {} (GB = 10^9 B)", s.kv.dtype.label()),
        description,
    })
}
