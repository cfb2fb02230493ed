//! What both halves of the memory view show alike: the technique switch, the text field with the
//! reason a control's value was refused, and the line that stands in for results.

use leptos::prelude::*;

use super::params::set_param;
use super::text_field::TextField;
use crate::state::AppState;
use crate::views::memory::Tech;

/// The technique, through the link's parser.
#[component]
pub fn TechChoice(state: RwSignal<AppState>, refused: RwSignal<Option<String>>) -> impl IntoView {
    let evict = move || state.with(|s| s.memory.tech() == Tech::Evict);
    view! {
        <label>"Technique"
            <select data-testid="memory-tech" on:change=move |ev| refused.set(set_param(state, "tech", &event_target_value(&ev)).err())>
                <option value="quant" selected=move || !evict()>"quantised cache"</option>
                <option value="evict" selected=evict>"evicted tokens"</option>
            </select>
        </label>
    }
}

/// The text field and the reason the last control's value was refused, closing both halves' controls.
#[component]
pub fn TextAndRefusal(state: RwSignal<AppState>, refused: RwSignal<Option<String>>) -> impl IntoView {
    view! {
        <TextField state refused/>
        {move || refused.get().map(|why| view! { <small class="field-error" role="alert" data-testid="memory-refused">{why}</small> })}
    }
}

/// What stands in for the results while they are measured, or why they failed.
pub fn status(failed: Option<String>, waiting: &'static str) -> AnyView {
    match failed {
        Some(why) => view! { <p class="status error" data-testid="memory-error">{why}</p> }.into_any(),
        None => view! { <p class="status" data-testid="memory-status">{waiting}</p> }.into_any(),
    }
}
