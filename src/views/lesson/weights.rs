//! What a lesson's numbers come from, for the course index: the weights of the model trained here,
//! seeded synthetic weights and inputs, or a layout's arithmetic alone, as each view's `ViewClass`
//! says. Readers should know which heads are real before they read meaning into them.

use super::walk::step_state;
use super::{Lesson, Step};
use crate::views::registry::{NumbersSource, StepShows, View};

/// Where one step's numbers come from: the view it shows says, from the step's model and highlight.
pub fn step_source(step: &Step) -> NumbersSource {
    let trained = step_state(step).0.model.is_trained();
    let shows = StepShows { trained, highlight: step.highlight.as_deref() };
    View::ALL.iter().find(|v| v.id() == step.view).map_or(NumbersSource::Arithmetic, |v| v.numbers_source(&shows))
}

/// Every source a lesson's steps use, real weights first.
pub fn lesson_sources(lesson: &Lesson) -> Vec<NumbersSource> {
    let mut sources: Vec<NumbersSource> = lesson.steps.iter().map(step_source).collect();
    sources.sort();
    sources.dedup();
    sources
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::lesson::lesson;

    fn sources(id: &str) -> Vec<&'static str> {
        lesson_sources(lesson(id).unwrap_or_else(|| panic!("{id}"))).into_iter().map(NumbersSource::id).collect()
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
        assert_eq!(step_source(&step), NumbersSource::Arithmetic);
    }
}
