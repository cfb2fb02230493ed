//! The lessons: a course over the live views, one Markdown file per lesson under `lessons/`, embedded
//! at build time so they work offline. [`format`] reads a file into steps (each a set of link
//! parameters, a text and maybe a check), [`markup`] turns its Markdown into nodes the page builds
//! one by one (never HTML), [`figures`] computes the live numbers the text names, and [`check`]
//! judges the reader's predictions.

pub mod check;
pub mod figures;
pub mod format;
pub mod markup;
pub mod params;
pub mod progress;

use std::sync::OnceLock;

pub use format::{Lesson, Step};

/// The lesson files, in course order.
const LESSON_FILES: &[(&str, &str)] = &[
    ("03-masks.md", include_str!("../../../lessons/03-masks.md")),
    ("05-rope.md", include_str!("../../../lessons/05-rope.md")),
    ("06-kv-cache.md", include_str!("../../../lessons/06-kv-cache.md")),
    ("07-gqa.md", include_str!("../../../lessons/07-gqa.md")),
    ("09-sliding-hybrid.md", include_str!("../../../lessons/09-sliding-hybrid.md")),
    ("10-kv-sharing.md", include_str!("../../../lessons/10-kv-sharing.md")),
];

/// Every lesson that parses, in course order (a native test proves they all do).
pub fn catalogue() -> &'static [Lesson] {
    static LESSONS: OnceLock<Vec<Lesson>> = OnceLock::new();
    LESSONS
        .get_or_init(|| LESSON_FILES.iter().filter_map(|(name, text)| format::parse_lesson(name, text).ok()).collect())
}

/// The lesson with this id.
pub fn lesson(id: &str) -> Option<&'static Lesson> {
    catalogue().iter().find(|l| l.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{AppState, View};
    use crate::views::link::encode_component;

    /// The state a step sets: its link parameters, read as a link would read them.
    fn step_state(step: &Step) -> (AppState, Vec<String>) {
        let query: Vec<String> = step.params.iter().map(|(k, v)| format!("{k}={}", encode_component(v))).collect();
        let (state, notices) = AppState::from_query(&query.join("&"));
        (state, notices.into_iter().map(|n| n.0).collect())
    }

    #[test]
    fn every_lesson_file_parses_and_sets_only_valid_parameters_and_known_figures() {
        assert_eq!(catalogue().len(), LESSON_FILES.len(), "a lesson file does not parse");
        for (name, text) in LESSON_FILES {
            let lesson = format::parse_lesson(name, text).unwrap();
            for (i, step) in lesson.steps.iter().enumerate() {
                let at = format!("{name} step {}", i + 1);
                let view: View = step.view.parse().unwrap_or_else(|e| panic!("{at}: {e}"));
                assert_ne!(view, View::Lesson, "{at}: a step shows a view, not the lessons");
                assert!(step.params.iter().all(|(k, _)| k != "view" && k != "lesson" && k != "step"), "{at}");
                let (state, notices) = step_state(step);
                assert!(notices.is_empty(), "{at}: {notices:?}");
                let model = state.resolved_model();
                let mut names = markup::figure_names(&step.body);
                names.extend(step.check.iter().filter_map(|c| c.figure().map(String::from)));
                names.extend(step.check.iter().flat_map(|c| markup::figure_names(&c.explain_nodes())));
                for name in names {
                    assert!(figures::is_known(&name), "{at}: unknown figure {{{name}}}");
                    assert!(figures::figure(&name, &state, &model).is_some(), "{at}: {{{name}}} has no value here");
                }
            }
        }
    }

    #[test]
    fn every_lesson_has_a_check_and_ids_are_unique() {
        let ids: Vec<&str> = catalogue().iter().map(|l| l.id.as_str()).collect();
        for lesson in catalogue() {
            assert!(lesson.steps.iter().any(|s| s.check.is_some()), "{} has no check", lesson.id);
            assert_eq!(ids.iter().filter(|&&id| id == lesson.id).count(), 1, "{}", lesson.id);
        }
        assert!(lesson("kv-cache").is_some_and(|l| l.steps.len() >= 2), "links to kv-cache step 2 exist");
    }
}
