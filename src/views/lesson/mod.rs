//! The lessons: a course over the live views, one Markdown file per lesson under `lessons/`, embedded
//! at build time so they work offline. [`format`] reads a file into steps (each a set of link
//! parameters, a text and maybe a check), [`markup`] turns its Markdown into nodes the page builds
//! one by one (never HTML), [`figures`] computes the live numbers the text names, and [`check`]
//! judges the reader's predictions.

pub mod check;
pub mod figures;
pub mod format;
pub mod highlight;
pub mod markup;
#[cfg(test)]
mod measured_claims;
pub mod params;
pub mod progress;
#[cfg(test)]
mod proofread;
#[cfg(test)]
mod trained_heads_claims;
pub mod walk;
pub mod weights;

use std::sync::OnceLock;

pub use format::{Lesson, LessonOutline, Step};

/// The lesson files, in course order.
const LESSON_FILES: &[(&str, &str)] = &[
    ("01-one-head.md", include_str!("../../../lessons/01-one-head.md")),
    ("02-scaling.md", include_str!("../../../lessons/02-scaling.md")),
    ("03-masks.md", include_str!("../../../lessons/03-masks.md")),
    ("04-many-heads.md", include_str!("../../../lessons/04-many-heads.md")),
    ("05-rope.md", include_str!("../../../lessons/05-rope.md")),
    ("06-kv-cache.md", include_str!("../../../lessons/06-kv-cache.md")),
    ("07-gqa.md", include_str!("../../../lessons/07-gqa.md")),
    ("08-mla.md", include_str!("../../../lessons/08-mla.md")),
    ("09-sliding-hybrid.md", include_str!("../../../lessons/09-sliding-hybrid.md")),
    ("10-kv-sharing.md", include_str!("../../../lessons/10-kv-sharing.md")),
    ("11-flash-tiles.md", include_str!("../../../lessons/11-flash-tiles.md")),
    ("12-flops-bytes.md", include_str!("../../../lessons/12-flops-bytes.md")),
    ("13-will-it-fit.md", include_str!("../../../lessons/13-will-it-fit.md")),
    ("14-paged.md", include_str!("../../../lessons/14-paged.md")),
    ("15-benchmark.md", include_str!("../../../lessons/15-benchmark.md")),
    ("16-quantised-cache.md", include_str!("../../../lessons/16-quantised-cache.md")),
    ("17-mla-both-ways.md", include_str!("../../../lessons/17-mla-both-ways.md")),
    ("18-eviction.md", include_str!("../../../lessons/18-eviction.md")),
    ("19-backward.md", include_str!("../../../lessons/19-backward.md")),
    ("20-what-sharing-costs.md", include_str!("../../../lessons/20-what-sharing-costs.md")),
    ("21-trained-heads.md", include_str!("../../../lessons/21-trained-heads.md")),
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

/// Every lesson's outline, in course order. The page's views link to their lessons as it mounts; the
/// whole [`catalogue`] (every step's Markdown parsed) took 10-47 ms there, cold, on the test machine.
fn outlines() -> &'static [LessonOutline] {
    static OUTLINES: OnceLock<Vec<LessonOutline>> = OnceLock::new();
    OUTLINES.get_or_init(|| LESSON_FILES.iter().filter_map(|(name, text)| format::outline(name, text)).collect())
}

/// The lessons that use the view `view_id`, each with the first of its steps that shows it, in course
/// order: every view links back to the lessons that explain it.
pub fn lessons_showing(view_id: &str) -> Vec<(&'static LessonOutline, u32)> {
    outlines()
        .iter()
        .filter_map(|lesson| {
            let step = lesson.step_views.iter().position(|v| v == view_id)?;
            Some((lesson, step as u32 + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::views::registry::{Settings, View};
    use highlight::Highlight;
    use walk::{figure_names, step_state};

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
                for name in figure_names(step) {
                    assert!(figures::is_known(&name), "{at}: unknown figure {{{name}}}");
                    assert!(figures::figure(&name, &state, &model).is_some(), "{at}: {{{name}}} has no value here");
                }
                if let Some(text) = &step.highlight {
                    let list = Highlight::parse_list(text).unwrap_or_else(|e| panic!("{at}: highlight: {e}"));
                    list.iter().for_each(|h| assert_highlight_in_view(*h, view, &state, &model, &at));
                }
            }
        }
    }

    /// A highlight names something the step's view shows: a head, row or layer that exists.
    fn assert_highlight_in_view(h: Highlight, view: View, state: &Settings, model: &Model, at: &str) {
        let tokens = || figures::figure("token_count", state, model).map_or(0, |f| f.value as u32);
        let fits = match h {
            Highlight::Head(n) => view == View::Heatmaps && n < model.n_q_heads,
            Highlight::Row(n) => view == View::Heatmaps && n < tokens(),
            Highlight::Layer(n) => view == View::Heatmaps && n < model.n_layers(),
            Highlight::Line(_) => view == View::Kv,
            Highlight::Element(name) => highlight::element_view(name) == Some(view),
        };
        assert!(fits, "{at}: highlight {h} is not in this step's view");
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

    #[test]
    fn each_view_links_back_to_the_lessons_that_show_it() {
        let ids = |view: &str| lessons_showing(view).iter().map(|(l, s)| format!("{}/{s}", l.id)).collect::<Vec<_>>();
        let kv = ids("kv");
        assert!(kv.contains(&"kv-cache/1".to_string()) && kv.contains(&"gqa/1".to_string()), "{kv:?}");
        assert!(ids("compare").contains(&"gqa/4".to_string()));
        assert!(ids("heatmaps").contains(&"masks/1".to_string()));
        for view in ["heatmaps", "kv", "compare", "bench"] {
            for (outline, step) in lessons_showing(view) {
                let lesson = lesson(&outline.id).unwrap();
                assert_eq!((&lesson.title, lesson.steps[step as usize - 1].view.as_str()), (&outline.title, view));
            }
        }
        assert!(lessons_showing("lesson").is_empty());
    }

    #[test]
    fn every_outline_is_its_lesson_s_frame() {
        assert_eq!(outlines().len(), catalogue().len());
        for (outline, lesson) in outlines().iter().zip(catalogue()) {
            let views: Vec<String> = lesson.steps.iter().map(|s| s.view.clone()).collect();
            assert_eq!((&outline.id, &outline.title, &outline.step_views), (&lesson.id, &lesson.title, &views));
        }
        // A file without its title, or a step without a view, has none.
        assert_eq!(format::outline("01-x.md", "## Step\n```set\nview: kv\n```\n"), None);
        assert_eq!(format::outline("01-x.md", "# T\ngoal\n## Step\n```set\nseed: 1\n```\n"), None);
        let ok = format::outline("01-x.md", "# T\ngoal\n## Step\n```set\nview: heatmaps\nview: kv\n```\n").unwrap();
        assert_eq!((ok.id.as_str(), ok.title.as_str(), ok.step_views.as_slice()), ("x", "T", &["kv".to_string()][..]));
    }

    #[test]
    fn every_lesson_has_three_to_six_steps() {
        for lesson in catalogue() {
            assert!((3..=6).contains(&lesson.steps.len()), "{} has {} steps", lesson.id, lesson.steps.len());
        }
    }
}
