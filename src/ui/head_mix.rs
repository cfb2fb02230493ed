//! The head-mixing panel: what each query head of the layer adds, through W_O, to one token's
//! attention output (computed by [`crate::views::heatmaps::head_mix`]).

use std::sync::Arc;

use leptos::prelude::*;

use super::params::{edit, set_param};

use super::chart::BarTrack;
use crate::attention::layer_inputs::{D_MODEL, LayerInputs};
use crate::attention::tokens::display_token;
use crate::state::AppState;
use crate::views::heatmaps::head_mix::{HeadMix, head_mix, mix_row};
use crate::views::heatmaps::params::MixRow;
use crate::views::heatmaps::request::Request;

/// What one computation of the panel shows.
#[derive(Clone, Debug, PartialEq)]
struct Shown {
    tokens: Vec<String>,
    /// The designed teaching head at each query head, by id (empty where the head is seeded random).
    designed: Vec<&'static str>,
    concat_width: u32,
    mix: Result<HeadMix, String>,
}

#[component]
pub fn HeadMixPanel(
    state: RwSignal<AppState>,
    inputs: RwSignal<Option<Arc<LayerInputs>>>,
    request: Memo<Result<Request, String>>,
) -> impl IntoView {
    let requested = Memo::new(move |_| state.with(|s| s.explorer.mix.and_then(MixRow::token)));
    let shown = Memo::new(move |_| {
        let inputs = inputs.get()?;
        let mask = request.with(|r| r.as_ref().ok().map(|r| r.mask))?;
        let row = mix_row(requested.get(), inputs.q_tokens().len());
        let layout = &inputs.layout;
        Some(Shown {
            tokens: inputs.q_tokens().to_vec(),
            designed: (0..layout.n_q_heads).map(|h| inputs.teaching_head(h).map_or("", |t| t.id())).collect(),
            concat_width: layout.n_q_heads * layout.head_dim,
            mix: head_mix(&inputs, mask, row),
        })
    });
    view! {
        <section class="panel head-mix" data-testid="head-mix">
            {move || shown.with(|s| s.as_ref().map(|s| match &s.mix {
                Err(why) => view! { <p class="status" data-testid="head-mix-error">{why.clone()}</p> }.into_any(),
                Ok(mix) => view! { <MixBars mix=mix.clone() tokens=s.tokens.clone() designed=s.designed.clone() concat_width=s.concat_width state=state/> }.into_any(),
            }))}
        </section>
    }
}

#[component]
fn MixBars(
    mix: HeadMix,
    tokens: Vec<String>,
    designed: Vec<&'static str>,
    concat_width: u32,
    state: RwSignal<AppState>,
) -> impl IntoView {
    let row = mix.row;
    let token = tokens.get(row).map(|t| display_token(t)).unwrap_or_default();
    let largest = mix.heads.iter().map(|h| h.norm).fold(0.0, f64::max);
    let options = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| view! { <option value=i selected={i == row}>{format!("{i} {}", display_token(t))}</option> })
        .collect_view();
    let bars = mix
        .heads
        .iter()
        .map(|h| {
            let label = match designed.get(h.head as usize).copied().unwrap_or_default() {
                "" => format!("head {}", h.head),
                id => format!("head {} · {id} (designed)", h.head),
            };
            let fraction = if largest > 0.0 { h.norm / largest } else { 0.0 };
            view! {
                <li class="bar-row" data-testid="head-mix-bar" data-head=h.head data-value=h.norm data-share=h.share>
                    <span class="bar-label">{label}</span>
                    <BarTrack fraction=fraction class=""/>
                    <span class="bar-value">{format!("{:.3}", h.norm)}<small>{format!(" {:.1}% of the heads' sum", h.share * 100.0)}</small></span>
                </li>
            }
        })
        .collect_view();
    view! {
        <h3 data-testid="head-mix-title" data-row=row data-output-norm=mix.output_norm()>
            {format!("What each head adds to token {row} “{token}”")}
        </h3>
        <label>
            "Token "
            <select data-testid="mix-row" on:change=move |ev| {
                let _ = set_param(state, "mix", &event_target_value(&ev));
            }>{options}</select>
        </label>
        <button type="button" class="secondary" data-testid="head-mix-close" on:click=move |_| {
            let _ = edit(state, &[("mix", None)]);
        }>"Close"</button>
        <p class="hint">
            {format!(
                "The layer's output for this token is concat(O₀ … O_{}) · W_O: the {} heads' outputs side by side ({concat_width} wide) \
                 times W_O, which maps them to the {D_MODEL}-wide synthetic residual stream. W_O's rows come in one block per head, so \
                 each head adds its own vector, O_h · W_O[h·d … (h+1)·d]. Each bar is that vector's length (its norm); the shares divide \
                 by the sum of all the norms (vectors can also cancel: the output's own norm is {:.3}). W_O is seeded random, not trained.",
                mix.heads.len().saturating_sub(1),
                mix.heads.len(),
                mix.output_norm()
            )}
        </p>
        <ol class="bars head-mix-bars">{bars}</ol>
    }
}
