//! The views, listed once, and the settings they read.
//!
//! Each view is a [`ViewClass`]: its id in the link (`view=`), its title, and the parameter set it
//! owns in the link. `views/mod.rs` lists every view once (`every_view!`); from that list
//! [`list_views!`] makes the [`View`] switch and [`Settings`], every view's parameters beside the two
//! sets several views share (the model choice and the attention input). Nothing else routes a view's
//! keys or writes them; only their place in the written order is by hand.
//!
//! The order in which a link's keys are written is one table, [`WRITE_ORDER`] (listed beside the
//! views), checked against the registry by a test: new keys go at its end, so every link written so
//! far reads back byte for byte.

use std::str::FromStr;

use super::link::{Accepted, LinkParams, Notice, notice_of, unknown_key_notice};
use super::model_choice::default_layer;
pub use super::view_class::{NumbersSource, StepShows, ViewClass};
use crate::model::Model;

/// `pairs` sorted into [`WRITE_ORDER`] and joined as a query string (no leading `?`).
pub fn write_query(mut pairs: Vec<(&str, String)>) -> String {
    pairs.sort_by_key(|(key, _)| WRITE_ORDER.iter().position(|k| k == key));
    let encoded: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", super::link::encode_component(v))).collect();
    encoded.join("&")
}

/// Makes the [`View`] switch, [`Settings`] and [`WRITE_ORDER`] from `views/mod.rs`' `every_view!`.
macro_rules! list_views {
    (
        views { $($variant:ident => $field:ident: $class:ty),+ $(,)? }
        write_order [ $($key:literal),+ $(,)? ]
    ) => {
        /// The order in which a link's keys are written (what links written so far look like): new
        /// keys go at the end. `view`, `backend` and `edited` belong to the app state, the others to
        /// [`Settings`].
        pub const WRITE_ORDER: &[&str] = &[$($key),+];

        /// The top-level views (URL `view=`), in the order of their tabs.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub enum View {
            #[default]
            $($variant),+
        }

        impl View {
            pub const ALL: &'static [View] = &[$(View::$variant),+];

            pub fn id(self) -> &'static str {
                match self { $(View::$variant => <$class as $crate::views::view_class::ViewClass>::ID),+ }
            }

            pub fn title(self) -> &'static str {
                match self { $(View::$variant => <$class as $crate::views::view_class::ViewClass>::TITLE),+ }
            }

            /// Where a lesson step's numbers come from when it shows this view.
            pub fn numbers_source(self, step: &$crate::views::view_class::StepShows) -> $crate::views::view_class::NumbersSource {
                match self { $(View::$variant => <$class as $crate::views::view_class::ViewClass>::numbers_source(step)),+ }
            }
        }

        /// What every view reads from the link: the shared model choice and attention input, and each
        /// view's own parameters. Read-only outside the app state, which writes it through the link's
        /// parsers.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct Settings {
            /// `model`, `cfg`, `layer`: shared by the heatmaps, KV, compare and backward views.
            pub model: $crate::views::model_choice::ModelChoice,
            /// `text`, `mask`, `window`, `chunk`, `seed`, `n`: shared by the heatmaps, the benchmark and the
            /// backward view.
            pub input: $crate::views::attention_input::AttentionInput,
            $(pub $field: <$class as $crate::views::view_class::ViewClass>::Params),+
        }

        impl Settings {
            /// Every key a parameter set owns, set by set (a test checks each has one owner).
            pub fn owned_keys() -> Vec<&'static [&'static str]> {
                vec![$crate::views::model_choice::ModelChoice::KEYS, $crate::views::attention_input::AttentionInput::KEYS, $(<<$class as $crate::views::view_class::ViewClass>::Params as $crate::views::link::LinkParams>::KEYS),+]
            }

            /// Hands one key to the parameter set that owns it; `None` when none does.
            pub fn set(&mut self, key: &str, value: &str) -> Option<Result<$crate::views::link::Accepted, String>> {
                set_in(&mut self.model, key, value)
                    .or_else(|| set_in(&mut self.input, key, value))
                    $(.or_else(|| set_in(&mut self.$field, key, value)))+
            }

            /// The key back as a link without it would read (its default); `false` when no set owns it.
            /// The model choice is settled again, as a link is: without a `layer` it opens on the
            /// model's first attention layer, and a layer or heads the model lacks fall back.
            pub fn clear(&mut self, key: &str) -> bool {
                if $crate::views::model_choice::ModelChoice::KEYS.contains(&key) {
                    let layer_named = key != "layer" && self.model.pairs().iter().any(|(k, _)| *k == "layer");
                    clear_in(&mut self.model, key);
                    self.model.layer = if layer_named { self.model.layer } else { 0 };
                    self.settle(layer_named);
                    return true;
                }
                clear_in(&mut self.input, key)
                    $(|| clear_in(&mut self.$field, key))+
            }

            /// Every pair that differs from the defaults (or that the link named), in no order.
            pub fn pairs(&self) -> Vec<(&'static str, String)> {
                let mut out = self.model.pairs();
                out.extend(self.input.pairs());
                $(out.extend(self.$field.pairs());)+
                out
            }
        }
    };
}

every_view!(list_views);

fn set_in<P: LinkParams>(params: &mut P, key: &str, value: &str) -> Option<Result<Accepted, String>> {
    P::KEYS.contains(&key).then(|| params.set(key, value))
}

/// `params` as its own pairs read back without `key`: the round trip every set's tests pin (a pair
/// a set writes is one its parser takes as written).
fn clear_in<P: LinkParams>(params: &mut P, key: &str) -> bool {
    if !P::KEYS.contains(&key) {
        return false;
    }
    let mut fresh = P::default();
    for (k, v) in params.pairs().into_iter().filter(|(k, _)| *k != key) {
        let read = fresh.set(k, &v);
        debug_assert!(matches!(read, Ok(Accepted::Yes)), "{k}={v} does not read back");
    }
    *params = fresh;
    true
}

impl FromStr for View {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        View::ALL.iter().copied().find(|v| v.id() == s).ok_or_else(|| {
            let ids: Vec<&str> = View::ALL.iter().map(|v| v.id()).collect();
            let (last, rest) = ids.split_last().unwrap_or((&"", &[]));
            format!("unknown view \"{s}\" (expected {} or {last})", rest.join(", "))
        })
    }
}

impl Settings {
    /// The model the views show: the custom `cfg` if there is one, else the preset.
    pub fn resolved_model(&self) -> Model {
        self.model.resolve()
    }

    /// [`Settings::from_pairs`] of a query string's pairs (the view's own keys: no `view` or `backend`).
    pub fn from_query(query: &str) -> (Self, Vec<Notice>) {
        let pairs = super::link::parse_query(query);
        Self::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// Sets each pair of a step or a link; the notices say what was refused or cut.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> (Self, Vec<Notice>) {
        let mut settings = Self::default();
        let mut notices = Vec::new();
        let mut layer_named = false;
        for (key, value) in pairs {
            layer_named |= key == "layer";
            match settings.set(key, value) {
                Some(read) => notices.extend(notice_of(key, read)),
                None => notices.push(unknown_key_notice(key)),
            }
        }
        notices.extend(settings.settle(layer_named));
        (settings, notices)
    }

    /// After a link's keys are read: a layer or heads the model lacks fall back (with notices), and
    /// a link that names no layer opens on the model's first attention layer (a hybrid's may not be 0).
    pub fn settle(&mut self, layer_named: bool) -> Vec<Notice> {
        let model = self.resolved_model();
        let mut notices: Vec<Notice> = self.model.check_layer(&model).into_iter().collect();
        if !layer_named && self.model.layer == 0 {
            self.model.layer = default_layer(&model);
        }
        notices.extend(self.explorer.check_heads(model.n_q_heads));
        notices
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_view_is_listed_once_with_its_own_id() {
        let ids: Vec<&str> = View::ALL.iter().map(|v| v.id()).collect();
        assert_eq!(ids, ["heatmaps", "kv", "compare", "lesson", "bench", "backward", "memory", "mla", "distance"]);
        for view in View::ALL {
            assert_eq!(view.id().parse::<View>(), Ok(*view));
        }
        assert_eq!(
            "nope".parse::<View>(),
            Err("unknown view \"nope\" (expected heatmaps, kv, compare, lesson, bench, backward, memory, mla or distance)".into())
        );
    }

    #[test]
    fn the_readme_lists_every_view_id() {
        let readme = include_str!("../../README.md");
        let listed = readme.split("`view` (").nth(1).and_then(|rest| rest.split(')').next()).expect("the view list");
        let listed: Vec<&str> = listed.split_whitespace().map(|id| id.trim_matches('`')).collect();
        let ids: Vec<&str> = View::ALL.iter().map(|v| v.id()).collect();
        assert_eq!(listed, ids, "README's \"Link parameters\" lists the view values");
    }

    #[test]
    fn every_settings_key_has_one_owner_and_a_place_in_the_written_order() {
        let owned: Vec<&str> = Settings::owned_keys().concat();
        let mut sorted = owned.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), owned.len(), "a key with two owners: {owned:?}");
        // The app state's own keys, then every settings key: the written order names each once.
        let mut expected: Vec<&str> = ["view", "backend", "edited"].into_iter().chain(owned).collect();
        expected.sort_unstable();
        let mut order = WRITE_ORDER.to_vec();
        order.sort_unstable();
        assert_eq!(order, expected);
    }

    #[test]
    fn clearing_a_key_reads_as_the_link_without_it() {
        let (mut settings, notices) =
            Settings::from_pairs([("mask", "sliding"), ("window", "8"), ("focus", "3"), ("mix", "2")]);
        assert!(notices.is_empty(), "{notices:?}");
        assert!(settings.clear("mask") && settings.clear("focus") && settings.clear("mix"));
        let (expected, _) = Settings::from_pairs([("window", "8")]);
        assert_eq!(settings, expected);
        assert!(!settings.clear("view") && !settings.clear("zzz"));
    }
}
