//! Under each view, links to the lessons that explain it (the first step of each that shows it).

use leptos::prelude::*;

use crate::state::{AppState, View};
use crate::views::lesson::lessons_showing;

#[component]
pub fn ViewLessons(state: RwSignal<AppState>, view: View) -> impl IntoView {
    let lessons = lessons_showing(view.id());
    (!lessons.is_empty()).then(|| {
        let links = lessons
            .into_iter()
            .map(|(lesson, step)| {
                let href = format!("?view=lesson&lesson={}&step={step}", lesson.id);
                view! {
                    <a href=href data-testid="view-lesson-link" data-lesson=lesson.id.clone() data-step=step
                        on:click=move |ev| {
                            ev.prevent_default();
                            state.set(AppState::at_step(&lesson.id, step));
                        }
                    >{lesson.title.clone()}</a>
                }
            })
            .collect_view();
        view! { <nav class="view-lessons" data-testid="view-lessons" aria-label="Lessons on this view"><span>"Learn it: "</span>{links}</nav> }
    })
}
