//! The app state and its URL encoding: which view is shown, the backend, and every view's settings.
//!
//! Each view owns its parameters ([`crate::views`]: what they mean, their defaults, how they are read
//! and written) and the registry ([`crate::views::registry`]) composes them into [`Settings`]; this
//! module reads a link into them and writes them back in one fixed order, so a copied link reopens
//! the exact configuration. Parsing never fails: a missing parameter takes its default, an invalid one
//! takes its default *and* leaves a [`Notice`] the page shows.
//!
//! The fields are private: the page reads the settings through [`AppState`]'s `Deref`, and changes
//! them only through the link's own parsers ([`AppState::set_from_control`], [`AppState::edit`]) or
//! a named transition (choose a model, show a dropped checkpoint, back to the lesson index), so a
//! control can never hold a value a link would refuse.

use std::ops::Deref;

use crate::engine::BackendChoice;
use crate::model::Model;
pub use crate::views::link::Notice;
use crate::views::link::{
    Accepted, LinkParams, MAX_LINK_PAIRS, notice_of, parse_query, parse_query_capped, unknown_key_notice,
};
use crate::views::model_choice::default_layer;
use crate::views::registry::write_query;
pub use crate::views::registry::{Settings, View, WRITE_ORDER};

/// Everything a link can say.
///
/// In the lessons view a link `view=lesson&lesson=ID&step=N` opens that step as written: the state is
/// the step's own parameters, with any other key of the link on top. Once the reader has changed
/// something, the link says `edited=on` and carries the whole state instead.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppState {
    view: View,
    backend: BackendChoice,
    settings: Settings,
}

/// The settings are read through the state; there is no `DerefMut`, so nothing writes them but the
/// state's own parsers and transitions.
impl Deref for AppState {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.settings
    }
}

/// Set in a lessons link once the reader has changed the step: the link holds the whole state.
const EDITED: (&str, &str) = ("edited", "on");

/// The state's own keys, beside the settings' (every key has one owner: the registry's test lists
/// the same three, since views/ may not name this module).
pub const STATE_KEYS: [&str; 3] = ["view", "backend", EDITED.0];

/// Keys a control never sets alone: a model is chosen with [`AppState::choose_model`] (which moves
/// the layer and drops what the model lacks), and the backend is read once, when the page starts.
const TRANSITION_KEYS: [&str; 3] = ["model", "cfg", "backend"];

impl AppState {
    /// Parses a query string (with or without the leading `?`). Never fails.
    /// The backend a link asks for, read alone (the engine starts before the rest of the link is read,
    /// which for a lesson link parses the course): the value [`AppState::from_query`] settles on.
    pub fn backend_in_query(query: &str) -> BackendChoice {
        let (pairs, _) = parse_query_capped(query);
        let mut state = Self::default();
        for (key, value) in pairs.iter().filter(|(key, _)| key == "backend") {
            state.set(key, value);
        }
        state.backend()
    }

    pub fn from_query(query: &str) -> (Self, Vec<Notice>) {
        let (pairs, pairs_in_link) = parse_query_capped(query);
        let mut state = Self::default();
        let mut notices = Vec::new();
        if pairs_in_link > MAX_LINK_PAIRS {
            notices.push(Notice(format!(
                "The link has {} parameters; only the first {MAX_LINK_PAIRS} are read.",
                crate::model::units::format_thousands(pairs_in_link as u128)
            )));
        }
        for (key, value) in &pairs {
            match state.set(key, value) {
                Some(read) => notices.extend(notice_of(key, read)),
                None if (key.as_str(), value.as_str()) == EDITED => {}
                // One notice per unknown key, however often the link repeats it.
                None => {
                    let notice = unknown_key_notice(key);
                    if !notices.contains(&notice) {
                        notices.push(notice);
                    }
                }
            }
        }
        if state.view == View::Lesson {
            notices.extend(state.settings.lesson.check());
            let edited = pairs.iter().any(|(k, v)| (k.as_str(), v.as_str()) == EDITED);
            if let (false, Some((lesson, step))) = (edited, state.lesson.current()) {
                // The step as written, then the link's own keys on top (their notices are said above).
                let mut at_step = Self::at_step(&lesson.id, step);
                for (key, value) in pairs.iter().filter(|(k, _)| !["view", "lesson", "step"].contains(&k.as_str())) {
                    at_step.set(key, value);
                }
                state = at_step;
            }
        }
        let layer_named = pairs.iter().any(|(k, _)| k == "layer");
        notices.extend(state.settings.settle(layer_named));
        (state, notices)
    }

    /// Step `step` (from 1) of lesson `id` as written: the step's parameters on the defaults.
    pub fn at_step(id: &str, step: u32) -> Self {
        let lesson = crate::views::lesson::params::LessonParams::at(id, step);
        let Some((found, step)) = lesson.current() else { return Self { view: View::Lesson, ..Self::default() } };
        let mut state = Self::default();
        for (key, value) in &found.steps[step as usize - 1].params {
            state.set(key, value);
        }
        let model = state.resolved_model();
        state.settings.model.check_layer(&model);
        state.settings.explorer.check_heads(model.n_q_heads);
        state.view = View::Lesson;
        state.settings.lesson = crate::views::lesson::params::LessonParams::at(id, step);
        state
    }

    /// The view shown.
    pub fn view(&self) -> View {
        self.view
    }

    /// Where the page computes: the GPU when it can, or the CPU reference (`backend=cpu`).
    pub fn backend(&self) -> BackendChoice {
        self.backend
    }

    /// Hands one key to its owner: the state's own keys here, the others to the settings.
    fn set(&mut self, key: &str, value: &str) -> Option<Result<Accepted, String>> {
        match key {
            "view" => Some(value.parse().map(|v| self.view = v).map(|()| Accepted::Yes)),
            "backend" => Some(value.parse().map(|b| self.backend = b).map(|()| Accepted::Yes)),
            _ => self.settings.set(key, value),
        }
    }

    /// A value typed or picked in a control, read exactly as the same key in a link (surrounding
    /// spaces dropped). A value the link would refuse or cut to a limit (or a layer the model does
    /// not have) leaves the state as it is and comes back as the reason, for the control to show.
    pub fn set_from_control(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.edit(&[(key, Some(value.trim()))])
    }

    /// Several keys changed at once, all or nothing: each `Some` value is read by the key's link
    /// parser as given (a typed text keeps its spaces), each `None` clears the key to what a link
    /// without it reads. The first refusal leaves the state as it was and comes back as the reason.
    pub fn edit(&mut self, changes: &[(&str, Option<&str>)]) -> Result<(), String> {
        let mut next = self.clone();
        for &(key, value) in changes {
            match value {
                Some(value) => next.set_one(key, value)?,
                None if TRANSITION_KEYS.contains(&key) => {
                    return Err(format!("\"{key}\" changes through its own transition, not as one key"));
                }
                None if key == "view" => next.view = View::default(),
                None if next.settings.clear(key) => {}
                None => return Err(format!("unknown parameter \"{key}\"")),
            }
        }
        *self = next;
        Ok(())
    }

    fn set_one(&mut self, key: &str, value: &str) -> Result<(), String> {
        if TRANSITION_KEYS.contains(&key) {
            return Err(format!("\"{key}\" changes through its own transition, not as one key"));
        }
        match self.set(key, value) {
            Some(Ok(Accepted::Yes)) => {}
            Some(Ok(Accepted::Adjusted(notice))) => return Err(notice.0),
            Some(Err(why)) => return Err(why),
            None => return Err(format!("unknown parameter \"{key}\"")),
        }
        // What a link would drop when it is read (a layer, heads or a focus the model lacks) is
        // refused here, so a control never holds a value its own link would not reopen.
        let model = self.resolved_model();
        let mut notices: Vec<Notice> = self.settings.model.check_layer(&model).into_iter().collect();
        notices.extend(self.settings.explorer.check_heads(model.n_q_heads));
        notices.into_iter().next().map_or(Ok(()), |n| Err(n.0))
    }

    /// Shows another view (a tab), keeping every setting.
    pub fn show_view(&mut self, view: View) {
        self.view = view;
    }

    /// Back to the list of lessons, from a lesson's step.
    pub fn show_lesson_index(&mut self) {
        self.settings.lesson = Default::default();
    }

    /// The compare view's list with `variant` chosen for the knob it belongs to (one per kind).
    pub fn choose_variant(&mut self, base: &Model, variant: crate::model::Variant) {
        self.settings.compare.set_variant(base, variant);
    }

    /// Switches to another model (a preset id, or a custom one in `cfg`): a layer, heads or a focus it
    /// does not have fall back quietly (the user chose the model; nothing in a link was wrong).
    pub fn choose_model(&mut self, preset: String, cfg: Option<String>) {
        let on_default_layer = self.model.layer == default_layer(&self.resolved_model());
        self.settings.model.preset = preset;
        self.settings.model.cfg = cfg;
        let model = self.resolved_model();
        if on_default_layer {
            self.settings.model.layer = default_layer(&model);
        }
        self.settings.model.check_layer(&model);
        self.settings.explorer.check_heads(model.n_q_heads);
        if self.model.is_trained() {
            self.drop_what_the_trained_model_ignores(&model);
        }
    }

    /// Shows a checkpoint whose real weights the user dropped: its layout (`cfg`, the compact
    /// encoding) on the default layer, without the settings real weights do not take.
    pub fn show_dropped_checkpoint(&mut self, cfg: String) {
        self.settings.model.layer = 0;
        self.choose_model(self.model.preset.clone(), Some(cfg));
        let model = self.resolved_model();
        self.settings.model.layer = default_layer(&model);
        self.drop_what_the_trained_model_ignores(&model);
    }

    /// Picking the trained model clears the settings it does not take (a second text, a mask, a
    /// tokenisation, more generated words than it reads), so the controls and the link say what it
    /// shows. A link that names them keeps them, with a notice (`trained::ignored_settings`).
    fn drop_what_the_trained_model_ignores(&mut self, model: &Model) {
        let settings = &mut self.settings;
        for key in ["src", "tok", "mask"] {
            settings.clear(key);
        }
        if settings.input.seq_tokens.is_some_and(|n| u64::from(n) > model.max_position_embeddings) {
            settings.clear("n");
        }
    }

    /// The link a crashed page offers instead of its own: the same view with default settings (the
    /// settings of the link are what may have crashed it).
    pub fn restart_query(search: &str) -> String {
        let view = parse_query(search).into_iter().find(|(k, _)| k == "view").and_then(|(_, v)| v.parse().ok());
        Self { view: view.unwrap_or_default(), ..Self::default() }.to_query()
    }

    /// The query string for this state (no leading `?`), listing only what differs from the defaults;
    /// in a lesson, nothing but the lesson and step while the step is as written.
    pub fn to_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if self.view != View::default() {
            pairs.push(("view", self.view.id().into()));
        }
        if let (View::Lesson, Some((lesson, step))) = (self.view, self.lesson.current()) {
            // The debug switches are never written, so they do not make a step "edited" either.
            if *self == Self::at_step(&lesson.id, step) {
                pairs.extend(self.lesson.pairs());
                return write_query(pairs);
            }
            pairs.push((EDITED.0, EDITED.1.into()));
        }
        if self.backend != BackendChoice::default() {
            pairs.push(("backend", self.backend.id().into()));
        }
        pairs.extend(self.settings.pairs());
        write_query(pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashed_page_offers_its_view_with_default_settings() {
        assert_eq!(AppState::restart_query("?view=bench&n=131072&d=128&mask=sliding&window=1"), "view=bench");
        assert_eq!(AppState::restart_query("?cfg=L1.d16384.h1&n=65536"), "");
        assert_eq!(AppState::restart_query("?view=lesson&lesson=kv-cache&step=2&edited=on"), "view=lesson");
        assert_eq!(AppState::restart_query("?view=%3Cscript%3E"), "");
    }
    use crate::attention::pooled::Pool;
    use crate::attention::tokens::TokenMode;
    use crate::colormap::ColorScale;
    use crate::model::plot::Axis;
    use crate::model::{DType, Variant};
    use crate::views::attention_input::AttentionInput;
    use crate::views::backward::{BackwardParams, ScoreScale, TargetChoice};
    use crate::views::bench::BenchParams;
    use crate::views::compare::CompareParams;
    use crate::views::distance::DistanceParams;
    use crate::views::heatmaps::params::{ExplorerParams, HeadSelection, MAX_TEXT_CHARS, MixRow};
    use crate::views::kv::KvParams;
    use crate::views::lesson::params::LessonParams;
    use crate::views::link::encode_component;
    use crate::views::memory::{MemoryParams, Tech};
    use crate::views::mla::{KeyRotation, MlaParams};
    use crate::views::model_choice::ModelChoice;

    #[test]
    fn empty_query_is_the_default_without_notices() {
        assert_eq!(AppState::from_query(""), (AppState::default(), vec![]));
        assert_eq!(AppState::from_query("?"), (AppState::default(), vec![]));
        assert_eq!(AppState::default().to_query(), "");
    }

    #[test]
    fn the_states_own_keys_are_the_ones_the_settings_leave() {
        for key in STATE_KEYS {
            assert!(WRITE_ORDER.contains(&key), "{key}");
            assert!(Settings::owned_keys().concat().iter().all(|k| k != &key), "{key}");
        }
    }

    #[test]
    fn round_trip_of_every_field() {
        let settings = Settings {
            model: ModelChoice { preset: "gemma-3-27b".into(), cfg: None, layer: 5 },
            input: {
                let mut input = AttentionInput::default();
                let pairs = [("text", "héllo & <b>world</b> 100% + more"), ("n", "4096"), ("seed", "99")];
                for (key, value) in pairs.into_iter().chain([("mask", "sliding"), ("window", "3"), ("chunk", "7")]) {
                    input.set(key, value).unwrap();
                }
                input
            },
            explorer: ExplorerParams {
                scale: ColorScale::Log,
                tok: TokenMode::Char,
                src: Some("le chat & <i>".into()),
                heads: HeadSelection::List(vec![0, 1, 2, 9]),
                pool: Pool::Mean,
                focus: Some(9),
                teach: false,
                tiles: true,
                steps: true,
                mix: Some(MixRow::Last),
                rope: true,
                gencache: 4,
                trace_row: Some(40),
                trace_step: 7,
            },
            kv: KvParams {
                ctx_tokens: 131_072,
                dtype: DType::Int4,
                axis: Axis::Log,
                budget_bytes: 24_500_000_000,
                weights: Some(DType::Bf16),
            },
            compare: CompareParams {
                variants: Some(vec![
                    Variant::Mha,
                    Variant::Gqa { groups: 4 },
                    Variant::Hybrid { local_per_global: 5, window_tokens: 1024 },
                ]),
            },
            bench: BenchParams { head_dim: Some(128), kernel: None },
            lesson: LessonParams::at("kv-cache", 2),
            backward: BackwardParams {
                row: Some(3),
                jscale: ScoreScale::One,
                target: TargetChoice::After(2),
                eta: "0.05".parse().unwrap(),
            },
            memory: MemoryParams { tech: Some(Tech::Evict), group: 64, recent: 0, scheme: 8, keep: 16, policy: 3 },
            mla: MlaParams { tokens: 200, qheads: 3, mhead: 2, rot: KeyRotation::Whole },
            distance: DistanceParams { near: 12 },
        };
        let state = AppState { view: View::Kv, backend: BackendChoice::Cpu, settings };
        let query = state.to_query();
        assert!(!query.contains(' ') && !query.contains('<'));
        assert_eq!(AppState::from_query(&query), (state, vec![]));
    }

    #[test]
    fn invalid_values_fall_back_with_notices() {
        let (state, notices) = AppState::from_query(
            "view=nope&mask=diag&window=0&seed=-3&backend=tpu&zzz=1&chunk=99999999999&scale=cubic\
             &model=gpt-9&ctx=0&dtype=fp3&layer=x&cfg=%3Cscript%3E\
             &axis=cubic&budget=-80&weights=fp64&variants=mha,gqa-2",
        );
        assert_eq!(state, AppState::default());
        assert_eq!(notices.len(), 17, "{notices:?}");
        assert!(notices[0].0.contains("view"));
        assert!(notices.iter().any(|n| n.0.contains("\"zzz\"")));
    }

    #[test]
    fn explorer_heads_and_focus_are_checked_against_the_model() {
        let (state, notices) = AppState::from_query("model=gemma-4-e4b&heads=0-3,9&focus=8&tok=bpe&pool=sum");
        // Gemma 4 E4B has 8 query heads: head 9 and focus 8 do not exist.
        assert_eq!(state.explorer, ExplorerParams::default());
        assert_eq!(notices.len(), 4, "{notices:?}");
        let (state, notices) = AppState::from_query("model=gemma-4-e4b&heads=1-2&focus=7&teach=off");
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(state.explorer.heads.heads(8), vec![1, 2]);
        assert_eq!(AppState::from_query(&state.to_query()).0, state);
    }

    /// A Jamba-like hybrid (attention in the 5th of every 8 layers) and a pure Mamba, as cfg links.
    pub const JAMBA_CFG: &str =
        "L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144";
    pub const MAMBA_CFG: &str = "L64.d2560.h1.kv1.hd1.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048";

    #[test]
    fn a_hybrid_link_opens_on_its_first_attention_layer() {
        let (state, notices) = AppState::from_query(&format!("cfg={JAMBA_CFG}"));
        assert_eq!(notices, []);
        assert_eq!(state.model.layer, 4);
        assert_eq!(state.to_query(), format!("cfg={JAMBA_CFG}"));
        // Layer 0 (a Mamba layer) is no longer the default, so it is written out.
        let (state, _) = AppState::from_query(&format!("cfg={JAMBA_CFG}&layer=0"));
        assert_eq!(state.model.layer, 0);
        assert_eq!(state.to_query(), format!("cfg={JAMBA_CFG}&layer=0"));
        // A model without attention stays on layer 0; switching to a hybrid from a default layer moves on.
        let (mut state, notices) = AppState::from_query(&format!("cfg={MAMBA_CFG}"));
        assert_eq!((notices, state.model.layer), (vec![], 0));
        state.choose_model("llama-3-8b".into(), Some(JAMBA_CFG.into()));
        assert_eq!(state.model.layer, 4);
        state.choose_model("llama-3-8b".into(), None);
        assert_eq!(state.model.layer, 0);
    }

    #[test]
    fn model_choice_and_layer_bounds() {
        let (state, notices) = AppState::from_query("model=mistral-7b&layer=31&ctx=32768&dtype=fp8");
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(state.resolved_model().n_layers(), 32);
        assert_eq!((state.model.layer, state.kv.ctx_tokens, state.kv.dtype), (31, 32768, DType::Fp8));
        let (state, notices) = AppState::from_query("model=mistral-7b&layer=32");
        assert_eq!(state.model.layer, 0);
        assert_eq!(notices.len(), 1);
        // A custom model travels in `cfg` and wins over the preset.
        let cfg = crate::model::encoding::encode_model(&Model::simple(6, 512, 8));
        let (state, notices) = AppState::from_query(&format!("cfg={}", encode_component(&cfg)));
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(state.resolved_model().n_layers(), 6);
        assert_eq!(AppState::from_query(&state.to_query()).0, state);
    }

    #[test]
    fn unknown_keys_and_lesson_keys_outside_the_lessons() {
        let (state, notices) = AppState::from_query("step=2&lesson=kv&debug=panic&debug=x&debug=hooks");
        assert_eq!(state.lesson, LessonParams { lesson: Some("kv".into()), step: Some(2) });
        // `debug` switches nothing in a link (the browser tests set their switches another way).
        assert_eq!(notices, vec![Notice("Ignored unknown parameter \"debug\".".into())]);
        assert_eq!(state.to_query(), "lesson=kv&step=2");
    }

    #[test]
    fn a_lesson_step_opens_as_written_and_the_readers_changes_travel_whole() {
        let (state, notices) = AppState::from_query("view=lesson&lesson=kv-cache&step=2");
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(state, AppState::at_step("kv-cache", 2));
        assert_eq!((state.model.preset.as_str(), state.kv.ctx_tokens), ("llama-3-8b", 131_072));
        assert_eq!(state.to_query(), "view=lesson&lesson=kv-cache&step=2");
        // A key on top of the step, as a hand-written link may say.
        let (tweaked, _) = AppState::from_query("view=lesson&lesson=kv-cache&step=2&dtype=fp8");
        assert_eq!((tweaked.kv.ctx_tokens, tweaked.kv.dtype), (131_072, DType::Fp8));
        // The reader sets the step's context back to the default: the link says so, whole.
        let mut changed = state.clone();
        changed.settings.kv.ctx_tokens = KvParams::default().ctx_tokens;
        let query = changed.to_query();
        assert!(query.contains("edited=on"), "{query}");
        assert_eq!(AppState::from_query(&query).0, changed);
    }

    #[test]
    fn a_debug_key_in_a_lesson_link_is_unknown_and_the_step_is_written_as_it_is() {
        // Test switches never travel in a link: `debug=panic` is an unknown key with the usual notice,
        // and the step's link is the step's, not `edited=on` with the whole state.
        let (state, notices) = AppState::from_query("view=lesson&lesson=kv-cache&step=2&debug=panic");
        assert_eq!(notices, vec![Notice("Ignored unknown parameter \"debug\".".into())]);
        assert_eq!(state, AppState::at_step("kv-cache", 2));
        let written = state.to_query();
        assert_eq!(written, "view=lesson&lesson=kv-cache&step=2");
        assert_eq!(AppState::from_query(&written).0.to_query(), written);
    }

    #[test]
    fn only_the_first_pairs_of_a_long_link_are_read_and_the_page_says_so() {
        let link = format!("{}&text=late", vec!["focus=1"; MAX_LINK_PAIRS].join("&"));
        let (state, notices) = AppState::from_query(&link);
        assert_eq!(state.input.text, AppState::default().input.text);
        assert_eq!(state.explorer.focus, Some(1));
        assert_eq!(notices, vec![Notice("The link has 101 parameters; only the first 100 are read.".into())]);
        // Pairs past the limit are counted, not decoded or stored.
        // The count is said, and the unknown key once, however often it repeats.
        let (_, notices) = AppState::from_query(&"zzz=1&".repeat(1_000_000));
        assert_eq!(notices.len(), 2, "{notices:?}");
        assert_eq!(notices[1], unknown_key_notice("zzz"));
        assert!(notices[0].0.contains("1,000,000 parameters"), "{notices:?}");
    }

    #[test]
    fn a_cut_cross_attention_source_says_so() {
        let (state, notices) = AppState::from_query(&format!("src={}", "é".repeat(MAX_TEXT_CHARS + 1)));
        assert_eq!(state.explorer.src.as_ref().map(|s| s.chars().count()), Some(MAX_TEXT_CHARS));
        assert_eq!(notices, vec![Notice("The source text had 2001 characters; only the first 2000 are used.".into())]);
    }

    #[test]
    fn unknown_lessons_show_the_index_and_steps_past_the_end_the_last() {
        let (state, notices) = AppState::from_query("view=lesson&lesson=nope&step=3");
        assert_eq!((state.view, state.lesson.clone()), (View::Lesson, LessonParams::default()));
        assert_eq!(notices.len(), 1);
        let (state, notices) = AppState::from_query("view=lesson&lesson=kv-cache&step=42");
        assert_eq!(state, AppState::at_step("kv-cache", 4));
        assert_eq!(notices.len(), 1);
    }

    #[test]
    fn choosing_a_smaller_model_drops_what_it_lacks() {
        let (mut state, _) = AppState::from_query("layer=31&heads=0-3,20&focus=20");
        assert_eq!(state.model.layer, 31);
        // Gemma 4 E4B: 42 layers of 8 query heads.
        state.choose_model("gemma-4-e4b".into(), None);
        assert_eq!((state.model.layer, &state.explorer.heads, state.explorer.focus), (31, &HeadSelection::All, None));
        // The 2017 Transformer base: 6 layers.
        state.choose_model("transformer-base".into(), None);
        assert_eq!(state.model.layer, 0);
        let cfg = crate::model::encoding::encode_model(&Model::simple(6, 512, 8));
        state.choose_model("mistral-7b".into(), Some(cfg));
        assert_eq!(state.resolved_model().n_layers(), 6);
    }

    #[test]
    fn choosing_the_trained_model_drops_the_settings_it_does_not_take() {
        let (mut state, _) = AppState::from_query("src=le%20chat&mask=full&tok=char&n=4096&seed=7");
        state.choose_model("attention-lab-tiny".into(), None);
        assert_eq!(
            (state.explorer.src.as_deref(), state.input.mask_given, state.input.seq_tokens),
            (None, false, None)
        );
        assert_eq!((state.explorer.tok, state.input.seed), (ExplorerParams::default().tok, 7));
        assert!(!state.to_query().contains("mask=") && !state.to_query().contains("src="), "{}", state.to_query());
        // A short generated input stays: the model reads it.
        let (mut short, _) = AppState::from_query("n=64");
        short.choose_model("attention-lab-tiny".into(), None);
        assert_eq!(short.input.seq_tokens, Some(64));
    }

    #[test]
    fn showing_a_dropped_checkpoint_shows_its_layout_without_synthetic_settings() {
        let (mut state, _) = AppState::from_query("model=mistral-7b&layer=5&src=le%20chat&mask=full&tok=char");
        let mut m = Model::simple(2, 64, 4);
        m.name = "qwen3".into();
        let cfg = crate::model::encoding::encode_model(&m);
        state.show_dropped_checkpoint(cfg.clone());
        assert_eq!((state.model.cfg.as_deref(), state.model.layer), (Some(cfg.as_str()), 0));
        assert_eq!((state.explorer.src.as_deref(), state.input.mask_given), (None, false));
        assert_eq!(state.explorer.tok, ExplorerParams::default().tok);
        let query = state.to_query();
        assert!(query.contains("cfg=") && !query.contains("mask=") && !query.contains("layer="), "{query}");
    }

    #[test]
    fn an_edit_is_all_or_nothing_and_clears_keys_to_what_a_link_without_them_reads() {
        let (mut state, _) = AppState::from_query("mask=sliding&window=8&focus=3&n=64");
        let before = state.clone();
        // The second change is refused: the first is not applied either.
        assert!(state.edit(&[("focus", None), ("window", Some("0"))]).is_err());
        assert_eq!(state, before);
        assert_eq!(state.edit(&[("mask", None), ("focus", None), ("text", Some(" spaced "))]), Ok(()));
        assert_eq!(state, AppState::from_query("window=8&n=64&text=%20spaced%20").0);
        assert_eq!(state.edit(&[("view", Some("kv"))]), Ok(()));
        assert_eq!(state.edit(&[("view", None)]).map(|()| state.view()), Ok(View::Heatmaps));
        for key in ["zzz", "model", "cfg", "backend"] {
            assert!(state.edit(&[(key, None)]).is_err(), "{key}");
        }
        for (key, value) in [("model", "mistral-7b"), ("backend", "cpu")] {
            assert!(state.edit(&[(key, Some(value))]).is_err(), "{key} goes through its transition");
        }
        // Heads and a focus the model lacks are refused as a link would drop them (Llama 3 8B: 32).
        assert!(state.set_from_control("focus", "32").is_err() && state.set_from_control("heads", "0-32").is_err());
        assert_eq!(state.set_from_control("focus", "31"), Ok(()));
    }

    #[test]
    fn clearing_the_model_choice_lands_where_a_link_without_it_opens() {
        // A hybrid whose first attention layer is 4: without `layer` a link opens there.
        let (mut state, _) = AppState::from_query(&format!("cfg={JAMBA_CFG}&layer=31"));
        assert_eq!(state.edit(&[("layer", None)]), Ok(()));
        assert_eq!(state.model.layer, 4);
        assert_eq!(state.to_query(), format!("cfg={JAMBA_CFG}"));
    }

    #[test]
    fn controls_set_values_as_links_do_and_refuse_what_links_refuse() {
        let mut state = AppState::default();
        assert_eq!(state.set_from_control("window", " 64 "), Ok(()));
        assert_eq!((state.input.window_tokens(), state.input.window_given), (64, true));
        assert_eq!(state.set_from_control("ctx", "32768"), Ok(()));
        assert_eq!(state.kv.ctx_tokens, 32_768);
        assert_eq!(state.set_from_control("budget", "24"), Ok(()));
        assert_eq!(state.kv.budget_bytes, 24_000_000_000);
        let before = state.clone();
        // Refused by the link's parser, cut to a limit, past the model's layers, or no such key:
        // nothing changes and the reason comes back.
        for (key, value) in [("window", "0"), ("ctx", "x"), ("budget", "-1"), ("layer", "32"), ("zzz", "1")] {
            assert!(state.set_from_control(key, value).is_err(), "{key}={value}");
            assert_eq!(state, before, "{key}={value}");
        }
        let long_text = "a".repeat(MAX_TEXT_CHARS + 1);
        assert!(state.set_from_control("text", &long_text).is_err());
        assert_eq!(state.set_from_control("layer", "31"), Ok(()));
        assert_eq!(state.model.layer, 31);
    }

    #[test]
    fn the_backend_is_read_alone_as_the_whole_link_reads_it() {
        for query in [
            "",
            "?backend=cpu",
            "?view=lesson&lesson=masks&backend=cpu",
            "?backend=nonsense",
            "?backend=cpu&backend=auto",
        ] {
            assert_eq!(AppState::backend_in_query(query), AppState::from_query(query).0.backend(), "{query}");
        }
        assert_eq!(AppState::backend_in_query("?view=kv&backend=cpu"), BackendChoice::Cpu);
    }
}
