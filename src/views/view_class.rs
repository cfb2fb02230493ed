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
}
