//! Controls write the link's parameters through the same parser as the link itself, so a typed value
//! and a shared link can never disagree on what is valid. Nothing in `ui/` writes the state otherwise:
//! its fields are private, and a change that is not one key is a named transition on the state.

use leptos::prelude::*;

use crate::state::AppState;

/// Sets `key` from a control's `value` as a link would (surrounding spaces dropped); an unusable
/// value changes nothing (so no effect reruns) and comes back as the reason.
pub fn set_param(state: RwSignal<AppState>, key: &str, value: &str) -> Result<(), String> {
    change(state, |s| s.set_from_control(key, value))
}

/// Several keys at once, all or nothing ([`AppState::edit`]): `Some` values read as given (a typed
/// text keeps its spaces), `None` clears the key to its default.
pub fn edit(state: RwSignal<AppState>, changes: &[(&str, Option<&str>)]) -> Result<(), String> {
    change(state, |s| s.edit(changes))
}

/// A typed field's value through [`set_param`], an emptied field clearing its key (back to what a
/// link without it reads); a refusal goes to `refused`, where the form says it.
pub fn write_typed(state: RwSignal<AppState>, refused: RwSignal<Option<String>>, key: &str, value: &str) {
    let said = if value.trim().is_empty() { edit(state, &[(key, None)]) } else { set_param(state, key, value) };
    refused.set(said.err());
}

/// Applies `apply` to a copy of the state and writes the copy back only when it succeeds (a signal
/// already disposed, as when the view closed meanwhile, changes nothing).
fn change(state: RwSignal<AppState>, apply: impl FnOnce(&mut AppState) -> Result<(), String>) -> Result<(), String> {
    let mut next = state.try_get_untracked().ok_or("the view has closed")?;
    apply(&mut next)?;
    state.try_set(next);
    Ok(())
}
