//! What every view is to the registry ([`super::registry`]): one trait, in a file of its own so that
//! a view's module can implement it without referring to the list that names the view.

use super::link::LinkParams;

/// One view of the app, as the registry lists it.
pub trait ViewClass {
    /// Its value of `view=` in a link.
    const ID: &'static str;
    /// The name on its tab.
    const TITLE: &'static str;
    /// The link keys it owns, with their parsers and what it writes back.
    type Params: LinkParams + Clone + std::fmt::Debug + PartialEq + Eq;
    /// Where the numbers of a lesson step that shows this view come from (the course index says it):
    /// `step.trained` when the step's model is the one trained here, `step.highlights(name)` when the
    /// step outlines an element whose name contains `name`.
    fn numbers_source(step: &StepShows) -> NumbersSource;
}

/// What [`ViewClass::numbers_source`] knows of a lesson step.
pub struct StepShows<'a> {
    pub trained: bool,
    pub highlight: Option<&'a str>,
}

impl StepShows<'_> {
    /// Whether the step outlines an element whose name contains `name`.
    pub fn highlights(&self, name: &str) -> bool {
        self.highlight.is_some_and(|h| h.contains(name))
    }
}

/// What a lesson's numbers come from: the weights of the model trained here, seeded synthetic weights
/// and inputs, or a layout's arithmetic alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NumbersSource {
    /// The model this project trained, or runs of its training crate.
    Trained,
    /// Weights, tokens or inputs drawn from a seed, labelled synthetic in the view.
    Seeded,
    /// Counts from a model's layout: bytes, FLOPs, parameters. No weights at all.
    Arithmetic,
}

impl NumbersSource {
    /// The trained model's where the step chose it, else seeded weights over a layout.
    pub fn trained_or_seeded(step: &StepShows) -> NumbersSource {
        if step.trained { NumbersSource::Trained } else { NumbersSource::Seeded }
    }

    /// The index's `data-sources` word.
    pub fn id(self) -> &'static str {
        match self {
            NumbersSource::Trained => "trained",
            NumbersSource::Seeded => "seeded",
            NumbersSource::Arithmetic => "arithmetic",
        }
    }

    /// What the index says.
    pub fn label(self) -> &'static str {
        match self {
            NumbersSource::Trained => "real weights (trained here)",
            NumbersSource::Seeded => "synthetic weights or inputs",
            NumbersSource::Arithmetic => "arithmetic only",
        }
    }
}
