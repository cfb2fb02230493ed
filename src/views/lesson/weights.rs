//! What a lesson's numbers come from, for the course index: the weights of the model trained here,
//! seeded synthetic weights and inputs, or a layout's arithmetic alone. Readers should know which
//! heads are real before they read meaning into them.

use super::walk::step_state;
use super::{Lesson, Step};
use crate::views::registry::View;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// The model this project trained, or runs of its training crate.
    Trained,
    /// Weights, tokens or inputs drawn from a seed, labelled synthetic in the view.
    Seeded,
    /// Counts from a model's layout: bytes, FLOPs, parameters. No weights at all.
    Arithmetic,
}

impl Source {
    /// The index's `data-sources` word.
    pub fn id(self) -> &'static str {
        match self {
            Source::Trained => "trained",
            Source::Seeded => "seeded",
            Source::Arithmetic => "arithmetic",
        }
    }

    /// What the index says.
    pub fn label(self) -> &'static str {
        match self {
            Source::Trained => "real weights (trained here)",
            Source::Seeded => "synthetic weights or inputs",
            Source::Arithmetic => "arithmetic only",
        }
    }
}

/// Where one step's numbers come from. A match on the view, so a new view must say.
pub fn step_source(step: &Step) -> Source {
    let trained = step_state(step).0.model.is_trained();
    let highlights = |name: &str| step.highlight.as_deref().is_some_and(|h| h.contains(name));
    let Some(view) = View::ALL.iter().copied().find(|v| v.id() == step.view) else { return Source::Arithmetic };
    match view {
        // The memory view always runs the trained model over the text.
        View::Memory => Source::Trained,
        View::Heatmaps | View::Backward if trained => Source::Trained,
        View::Heatmaps | View::Backward | View::Mla | View::Bench => Source::Seeded,
        View::Compare if highlights("trained-variants") => Source::Trained,
        View::Compare | View::Kv | View::Lesson => Source::Arithmetic,
    }
}

/// Every source a lesson's steps use, real weights first.
pub fn lesson_sources(lesson: &Lesson) -> Vec<Source> {
    let mut sources: Vec<Source> = lesson.steps.iter().map(step_source).collect();
    sources.sort();
    sources.dedup();
    sources
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::lesson::lesson;

    fn sources(id: &str) -> Vec<&'static str> {
        lesson_sources(lesson(id).unwrap_or_else(|| panic!("{id}"))).into_iter().map(Source::id).collect()
    }

    #[test]
    fn each_lesson_says_what_its_numbers_come_from() {
        // 07: KV and compare views over published layouts only.
        assert_eq!(sources("gqa"), ["arithmetic"]);
        // 16: the memory view runs the trained model in every step.
        assert_eq!(sources("quantised-cache"), ["trained"]);
        // 04: the trained model's heads in one step, GPT-2's layout on seeded weights in the others.
        assert_eq!(sources("many-heads"), ["trained", "seeded"]);
        // 17: the MLA view's seeded layer, and the KV arithmetic of DeepSeek-V3.
        assert_eq!(sources("mla-both-ways"), ["seeded"]);
        // 20: the bars are arithmetic, the table is runs of the training crate.
        assert_eq!(sources("what-sharing-costs"), ["trained", "arithmetic"]);
        // 21: every step shows the trained model's heads.
        assert_eq!(sources("trained-heads"), ["trained"]);
    }

    #[test]
    fn an_unknown_view_claims_no_weights() {
        let mut step = lesson("gqa").unwrap().steps[0].clone();
        step.view = "nowhere".into();
        assert_eq!(step_source(&step), Source::Arithmetic);
    }
}
