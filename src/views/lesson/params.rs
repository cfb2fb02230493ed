//! `lesson` and `step` in the link: which lesson, and which of its steps (counting from 1).

use super::{Lesson, lesson};
use crate::views::link::{Accepted, LinkParams, Notice, parse_bounded};

/// The most steps a lesson may have (a bound for the link's number).
pub const MAX_STEPS: u32 = 99;

/// The lessons in the view registry: the keys they own are [`LessonParams`]'s.
pub struct Lessons;

impl crate::views::view_class::ViewClass for Lessons {
    const ID: &'static str = "lesson";
    const TITLE: &'static str = "Lessons";
    type Params = LessonParams;

    fn numbers_source(_: &crate::views::view_class::StepShows) -> crate::views::view_class::NumbersSource {
        crate::views::view_class::NumbersSource::Arithmetic
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LessonParams {
    pub lesson: Option<String>,
    /// From 1.
    pub step: Option<u32>,
}

impl LessonParams {
    /// At this lesson's `step` (from 1).
    pub fn at(id: &str, step: u32) -> Self {
        Self { lesson: Some(id.to_string()), step: Some(step) }
    }

    /// The lesson shown and its step index from 1, when the lesson exists.
    pub fn current(&self) -> Option<(&'static Lesson, u32)> {
        let lesson = lesson(self.lesson.as_deref()?)?;
        Some((lesson, self.step.unwrap_or(1).clamp(1, lesson.steps.len() as u32)))
    }

    /// For the lessons view: an unknown lesson shows the index, a step past the end the nearest one;
    /// each says so.
    pub fn check(&mut self) -> Option<Notice> {
        let id = self.lesson.clone()?;
        let Some(found) = lesson(&id) else {
            *self = Self::default();
            return Some(Notice(format!("There is no lesson \"{id}\"; here is the list of lessons.")));
        };
        let steps = found.steps.len() as u32;
        match self.step {
            Some(step) if step > steps => {
                self.step = Some(steps);
                Some(Notice(format!("The lesson \"{id}\" has {steps} steps; showing the last.")))
            }
            None => {
                self.step = Some(1);
                None
            }
            _ => None,
        }
    }
}

impl LinkParams for LessonParams {
    const KEYS: &'static [&'static str] = &["lesson", "step"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "lesson" if is_lesson_id(value) => self.lesson = Some(value.to_string()),
            "lesson" => return Err(format!("\"{value}\" is not a lesson id")),
            "step" => self.step = Some(parse_bounded(value, 1, MAX_STEPS)?),
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(id) = &self.lesson {
            out.push(("lesson", id.clone()));
        }
        if let Some(step) = self.step {
            out.push(("step", step.to_string()));
        }
        out
    }
}

fn is_lesson_id(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::round_trip;

    #[test]
    fn every_parameter_round_trips() {
        for params in [LessonParams::at("kv-cache", 2), LessonParams::default()] {
            assert_eq!(round_trip(&params), params);
        }
    }

    #[test]
    fn unknown_lessons_and_steps_past_the_end() {
        let mut p = LessonParams::at("no-such-lesson", 1);
        assert!(p.check().is_some_and(|n| n.0.contains("no lesson")));
        assert_eq!(p, LessonParams::default());
        let mut p = LessonParams::at("kv-cache", 99);
        assert!(p.check().is_some());
        assert_eq!(p.current().map(|(l, s)| (l.id.as_str(), s)), Some(("kv-cache", 4)));
        let mut p = LessonParams { lesson: Some("kv-cache".into()), step: None };
        assert_eq!(p.check(), None);
        assert_eq!(p.step, Some(1));
        let mut bad = LessonParams::default();
        assert!(bad.set("lesson", "<b>").is_err() && bad.set("step", "0").is_err() && bad.set("step", "100").is_err());
    }
}
