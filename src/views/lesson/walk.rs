//! The walk plan: what the page must show at every step of every lesson, computed natively from the
//! lesson files and the model arithmetic. `src/bin/lesson_plan.rs` prints it as JSON, and the browser
//! walk (`tests/browser/lesson_walk.test.mjs`) compares each step of the page against it, so every live
//! figure the page shows is checked against this arithmetic.

use std::collections::BTreeMap;

use serde::Serialize;

use super::params::LessonParams;
use super::{Step, catalogue, figures, highlight, markup};
use crate::views::link::{LinkParams, Notice};
use crate::views::registry::{Settings, View, write_query};

#[derive(Clone, Debug, Serialize)]
pub struct LessonPlan {
    pub id: String,
    pub title: String,
    pub steps: Vec<StepPlan>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StepPlan {
    /// From 1.
    pub step: u32,
    pub view: String,
    /// The link of the step's view with its parameters ("Open this in the full view").
    pub full_query: String,
    /// Every live figure the step names (text, check and explanation): name → exact value.
    pub figures: BTreeMap<String, String>,
    /// The style text of the step's highlights.
    pub highlight_style: String,
}

/// The settings a step sets: its link parameters, read as a link would read them.
pub fn step_state(step: &Step) -> (Settings, Vec<Notice>) {
    Settings::from_pairs(step.params.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// Every figure a step names: in its text, as its check's answer and in the check's explanation.
pub fn figure_names(step: &Step) -> Vec<String> {
    let mut names = markup::figure_names(&step.body);
    names.extend(step.check.iter().filter_map(|c| c.figure().map(String::from)));
    names.extend(step.check.iter().flat_map(|c| markup::figure_names(&c.explain_nodes())));
    names.sort();
    names.dedup();
    names
}

/// The plan for every lesson, in course order.
pub fn plan() -> Vec<LessonPlan> {
    catalogue()
        .iter()
        .map(|lesson| LessonPlan {
            id: lesson.id.clone(),
            title: lesson.title.clone(),
            steps: lesson.steps.iter().zip(1..).map(|(step, n)| step_plan(&lesson.id, n, step)).collect(),
        })
        .collect()
}

fn step_plan(id: &str, n: u32, step: &Step) -> StepPlan {
    let (settings, _) = step_state(step);
    let model = settings.resolved_model();
    let figures = figure_names(step)
        .into_iter()
        .filter_map(|name| figures::figure(&name, &settings, &model).map(|f| (name, f.exact)))
        .collect();
    // The step's view with its settings, as the app writes that link (the default view unnamed).
    let view = step.view.parse::<View>().unwrap_or_default();
    let mut pairs: Vec<(&str, String)> =
        if view == View::default() { vec![] } else { vec![("view", view.id().to_string())] };
    pairs.extend(settings.pairs());
    pairs.extend(LessonParams::at(id, n).pairs());
    StepPlan {
        step: n,
        view: step.view.clone(),
        full_query: write_query(pairs),
        figures,
        highlight_style: highlight::style_text(step.highlight.as_deref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_covers_every_step_with_its_figures() {
        let plan = plan();
        assert_eq!(plan.len(), catalogue().len());
        let kv = plan.iter().find(|l| l.id == "kv-cache").unwrap();
        assert_eq!(kv.steps.len(), super::super::lesson("kv-cache").unwrap().steps.len());
        let first = &kv.steps[0];
        assert!(first.full_query.starts_with("view=kv&") && first.full_query.ends_with("&lesson=kv-cache&step=1"));
        // Llama 3 8B: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072 bytes per token.
        assert_eq!(first.figures.get("kv_bytes_per_token").map(String::as_str), Some("131072"));
    }
}
