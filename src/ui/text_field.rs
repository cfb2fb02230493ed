//! The shared text as the backward and memory views edit it: a text area (the text keeps its line
//! breaks), written through the link's own parser.

use leptos::prelude::*;

use super::params::edit;
use crate::state::AppState;
use crate::views::heatmaps::params::MAX_TEXT_CHARS;

/// The text field; a refused text is said through `refused`.
#[component]
pub fn TextField(state: RwSignal<AppState>, refused: RwSignal<Option<String>>) -> impl IntoView {
    view! {
        <label class="wide">"Text"
            <textarea data-testid="text-input" rows="1" maxlength=MAX_TEXT_CHARS
                prop:value=move || state.with(|s| s.input.text.clone())
                on:change=move |ev| refused.set(edit(state, &[("text", Some(&event_target_value(&ev)))]).err())></textarea>
        </label>
    }
}
