//! Controls write the link's parameters through the same parser as the link itself, so a typed value
//! and a shared link can never disagree on what is valid.

use leptos::prelude::*;

use crate::state::AppState;

/// Sets `key` from a control's `value` as a link would; an unusable value changes nothing (so no
/// effect reruns) and comes back as the reason.
pub fn set_param(state: RwSignal<AppState>, key: &str, value: &str) -> Result<(), String> {
    let mut next = state.get_untracked();
    next.set_from_control(key, value)?;
    state.set(next);
    Ok(())
}
