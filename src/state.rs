//! The app state and its URL encoding, in one place.
//!
//! Every visual choice lives in [`AppState`], parsed from the query string and written back to it, so a
//! copied link reopens the exact configuration. Parsing never fails: a missing parameter takes its
//! default, an invalid one takes its default *and* leaves a [`Notice`] the page shows.

use std::fmt;
use std::str::FromStr;

use crate::attention::mask::{Mask, MaskKind};
use crate::colormap::ColorScale;
use crate::engine::BackendChoice;
use crate::model::DType;
use crate::model::Model;
use crate::model::Variant;
use crate::model::budget::{DEFAULT_BUDGET_BYTES, format_gb, parse_gb};
use crate::model::encoding::decode_model;
use crate::model::plot::Axis;
use crate::model::presets::{PRESET_IDS, preset};
use crate::views::heatmaps::params::{ExplorerParams, MAX_TEXT_CHARS};

/// The top-level views (URL `view=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Heatmaps,
    Kv,
    Compare,
    Lesson,
    Bench,
}

impl View {
    pub const ALL: [View; 5] = [View::Heatmaps, View::Kv, View::Compare, View::Lesson, View::Bench];

    pub fn id(self) -> &'static str {
        match self {
            View::Heatmaps => "heatmaps",
            View::Kv => "kv",
            View::Compare => "compare",
            View::Lesson => "lesson",
            View::Bench => "bench",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            View::Heatmaps => "Heatmaps",
            View::Kv => "KV cache",
            View::Compare => "Compare variants",
            View::Lesson => "Lessons",
            View::Bench => "Benchmark",
        }
    }
}

impl FromStr for View {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        View::ALL
            .into_iter()
            .find(|v| v.id() == s)
            .ok_or_else(|| format!("unknown view \"{s}\" (expected heatmaps, kv, compare, lesson or bench)"))
    }
}

/// A message about the URL the page shows instead of failing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice(pub String);

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Largest window / chunk accepted from a URL.
pub const MAX_WINDOW_TOKENS: u32 = 1 << 20;

pub const DEFAULT_TEXT: &str = "The cat sat on the mat because the cat was tired.";

/// Everything a link can say. Parameters of views that have not landed yet (`model`, `ctx`, ...) are
/// kept verbatim so links made for them survive a round trip through this version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppState {
    pub view: View,
    pub text: String,
    pub mask: MaskKind,
    pub window: u32,
    pub chunk: u32,
    pub seed: u64,
    pub backend: BackendChoice,
    /// Heatmap colour scale (URL `scale=linear|log`).
    pub scale: ColorScale,
    /// Preset id (URL `model=`), one of [`PRESET_IDS`]. Ignored while `cfg` holds a custom model.
    pub model: String,
    /// A custom or imported model in the compact encoding of [`crate::model::encoding`] (URL `cfg=`).
    pub cfg: Option<String>,
    /// Context length in tokens (URL `ctx=`).
    pub ctx_tokens: u64,
    /// Element type of the KV cache (URL `dtype=`).
    pub dtype: DType,
    /// Layer index, 0-based (URL `layer=`), checked against the chosen model.
    pub layer: u32,
    /// Axes of the KV chart (URL `axis=linear|log`).
    pub axis: Axis,
    /// GPU memory budget in bytes (URL `budget=`, written in decimal GB: `budget=80` is 80 × 10^9 bytes).
    pub budget_bytes: u64,
    /// Element type of the weights when the budget counts them (URL `weights=off|fp16|...`); `None`: cache only.
    pub weights: Option<DType>,
    /// Variants the compare view shows (URL `variants=mha,gqa8,...`); `None`: the standard set for the model.
    pub variants: Option<Vec<Variant>>,
    /// Sequence length in tokens (URL `n=`): the benchmark's case filter (and a generated input's length).
    pub seq_tokens: Option<u32>,
    /// Head dimension (URL `d=`): the benchmark's case filter.
    pub head_dim: Option<u32>,
    /// Whether the link named `mask` / `window` itself (the benchmark then runs just those cases).
    pub mask_given: bool,
    pub window_given: bool,
    /// The heatmap explorer's parameters (`tok`, `src`, `heads`, `pool`, `focus`, `teach`, `tiles`, `steps`).
    pub explorer: ExplorerParams,
    /// Other known parameters (`lesson`, `step`), as given.
    pub passthrough: Vec<(String, String)>,
    /// `debug=panic`: the page panics on purpose, to prove the error panel (never written back).
    pub panic_test: bool,
}

impl Default for AppState {
    fn default() -> Self {
        Self {
            view: View::Heatmaps,
            text: DEFAULT_TEXT.to_string(),
            mask: MaskKind::Causal,
            window: 4,
            chunk: 4,
            seed: 1,
            backend: BackendChoice::Auto,
            scale: ColorScale::Linear,
            model: DEFAULT_MODEL.to_string(),
            cfg: None,
            ctx_tokens: DEFAULT_CTX_TOKENS,
            dtype: DType::Fp16,
            layer: 0,
            axis: Axis::Linear,
            budget_bytes: DEFAULT_BUDGET_BYTES,
            weights: None,
            variants: None,
            seq_tokens: None,
            head_dim: None,
            mask_given: false,
            window_given: false,
            explorer: ExplorerParams::default(),
            passthrough: Vec::new(),
            panic_test: false,
        }
    }
}

/// Parameters later views own; kept as given so their links round-trip.
const PASSTHROUGH_KEYS: [&str; 2] = ["lesson", "step"];
/// Longest sequence a link may ask for (the kernels handle it; the naive baseline reports "does not fit").
pub const MAX_SEQ_TOKENS: u32 = 1 << 17;
/// Head dimensions the kernels support.
pub const HEAD_DIMS: [u32; 4] = [32, 64, 128, 256];

pub const DEFAULT_MODEL: &str = "llama-3-8b";
pub const DEFAULT_CTX_TOKENS: u64 = 8192;
/// Longest context a link may ask for (100 M tokens: beyond any model, still exact arithmetic).
pub const MAX_CTX_TOKENS: u64 = 100_000_000;

impl AppState {
    /// The mask with its size parameter.
    pub fn mask(&self) -> Mask {
        self.mask.with_sizes(self.window, self.chunk)
    }

    /// Parses a query string (with or without the leading `?`). Never fails.
    pub fn from_query(query: &str) -> (Self, Vec<Notice>) {
        let mut state = Self::default();
        let mut notices = Vec::new();
        for (key, value) in parse_query(query) {
            let mut invalid = |why: String| notices.push(Notice(format!("Ignored {key}: {why}; using the default.")));
            match key.as_str() {
                "view" => value.parse().map(|v| state.view = v).unwrap_or_else(&mut invalid),
                "mask" => value
                    .parse()
                    .map(|m| {
                        state.mask = m;
                        state.mask_given = true;
                    })
                    .unwrap_or_else(&mut invalid),
                "backend" => value.parse().map(|b| state.backend = b).unwrap_or_else(&mut invalid),
                "scale" => value.parse().map(|c| state.scale = c).unwrap_or_else(&mut invalid),
                "window" => parse_bounded(&value, 1, MAX_WINDOW_TOKENS)
                    .map(|w| {
                        state.window = w;
                        state.window_given = true;
                    })
                    .unwrap_or_else(&mut invalid),
                "n" => parse_bounded(&value, 1, MAX_SEQ_TOKENS)
                    .map(|n| state.seq_tokens = Some(n))
                    .unwrap_or_else(&mut invalid),
                "d" => match value.parse::<u32>() {
                    Ok(d) if HEAD_DIMS.contains(&d) => state.head_dim = Some(d),
                    _ => invalid(format!("\"{value}\" is not a supported head dimension (32, 64, 128 or 256)")),
                },
                "chunk" => {
                    parse_bounded(&value, 1, MAX_WINDOW_TOKENS).map(|c| state.chunk = c).unwrap_or_else(&mut invalid)
                }
                "seed" => value
                    .parse::<u64>()
                    .map(|s| state.seed = s)
                    .unwrap_or_else(|_| invalid(format!("\"{value}\" is not a whole number"))),
                "text" => {
                    let chars = value.chars().count();
                    if chars > MAX_TEXT_CHARS {
                        notices.push(Notice(format!(
                            "The text had {chars} characters; only the first {MAX_TEXT_CHARS} are used."
                        )));
                    }
                    state.text = value.chars().take(MAX_TEXT_CHARS).collect();
                }
                "model" if PRESET_IDS.contains(&value.as_str()) => state.model = value,
                "model" => invalid(format!(
                    "\"{value}\" is not a known model (try llama-3-8b, mistral-7b, gemma-3-27b, deepseek-v3...)"
                )),
                "cfg" => match decode_model(&value) {
                    Ok(_) => state.cfg = Some(value),
                    Err(e) => invalid(format!("the model description could not be read ({e})")),
                },
                "ctx" => match value.parse::<u64>() {
                    Ok(n) if (1..=MAX_CTX_TOKENS).contains(&n) => state.ctx_tokens = n,
                    _ => invalid(format!("\"{value}\" is not a context length between 1 and {MAX_CTX_TOKENS} tokens")),
                },
                "dtype" => value.parse::<DType>().map(|d| state.dtype = d).unwrap_or_else(|e| invalid(e.to_string())),
                "layer" => value
                    .parse::<u32>()
                    .map(|l| state.layer = l)
                    .unwrap_or_else(|_| invalid(format!("\"{value}\" is not a layer number"))),
                "axis" => value.parse().map(|a| state.axis = a).unwrap_or_else(&mut invalid),
                "budget" => parse_gb(&value).map(|b| state.budget_bytes = b).unwrap_or_else(&mut invalid),
                "weights" if value == "off" => state.weights = None,
                "weights" => value
                    .parse::<DType>()
                    .map(|d| state.weights = Some(d))
                    .unwrap_or_else(|e| invalid(format!("{e}, or off"))),
                "variants" => match parse_variants(&value) {
                    Ok(list) => state.variants = Some(list),
                    Err(e) => invalid(e),
                },
                "debug" if value == "panic" => state.panic_test = true,
                k if ExplorerParams::KEYS.contains(&k) => state.explorer.set(k, &value).unwrap_or_else(&mut invalid),
                k if PASSTHROUGH_KEYS.contains(&k) => state.passthrough.push((key.clone(), value)),
                _ => notices.push(Notice(format!("Ignored unknown parameter \"{key}\"."))),
            }
        }
        let layers = state.resolved_model().n_layers();
        if state.layer >= layers {
            notices.push(Notice(format!(
                "Ignored layer: {} is past the model's last layer ({}); using layer 0.",
                state.layer,
                layers.saturating_sub(1)
            )));
            state.layer = 0;
        }
        let heads = state.resolved_model().n_q_heads;
        if state.explorer.heads.max_head().is_some_and(|h| h >= heads) {
            notices.push(Notice(format!(
                "Ignored heads: the model has query heads 0 to {}; showing all.",
                heads.saturating_sub(1)
            )));
            state.explorer.heads = Default::default();
        }
        if state.explorer.focus.is_some_and(|h| h >= heads) {
            notices.push(Notice(format!("Ignored focus: the model has query heads 0 to {}.", heads.saturating_sub(1))));
            state.explorer.focus = None;
        }
        (state, notices)
    }

    /// The model the views show: the custom `cfg` if there is one, else the preset.
    pub fn resolved_model(&self) -> Model {
        self.cfg
            .as_deref()
            .and_then(|c| decode_model(c).ok())
            .or_else(|| preset(&self.model).cloned())
            .or_else(|| preset(DEFAULT_MODEL).cloned())
            .unwrap_or_else(|| Model::simple(32, 4096, 32))
    }

    /// The query string for this state (no leading `?`), listing only what differs from the defaults.
    pub fn to_query(&self) -> String {
        let default = Self::default();
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if self.view != default.view {
            pairs.push(("view", self.view.id().into()));
        }
        if self.text != default.text {
            pairs.push(("text", self.text.clone()));
        }
        if self.mask != default.mask || self.mask_given {
            pairs.push(("mask", self.mask.name().into()));
        }
        if self.window != default.window || self.window_given {
            pairs.push(("window", self.window.to_string()));
        }
        if self.chunk != default.chunk {
            pairs.push(("chunk", self.chunk.to_string()));
        }
        if self.seed != default.seed {
            pairs.push(("seed", self.seed.to_string()));
        }
        if self.backend != default.backend {
            pairs.push(("backend", self.backend.id().into()));
        }
        if self.scale != default.scale {
            pairs.push(("scale", self.scale.name().into()));
        }
        if self.model != default.model {
            pairs.push(("model", self.model.clone()));
        }
        if let Some(cfg) = &self.cfg {
            pairs.push(("cfg", cfg.clone()));
        }
        if self.ctx_tokens != default.ctx_tokens {
            pairs.push(("ctx", self.ctx_tokens.to_string()));
        }
        if self.dtype != default.dtype {
            pairs.push(("dtype", self.dtype.to_string()));
        }
        if self.layer != default.layer {
            pairs.push(("layer", self.layer.to_string()));
        }
        if self.axis != default.axis {
            pairs.push(("axis", self.axis.name().into()));
        }
        if self.budget_bytes != default.budget_bytes {
            pairs.push(("budget", format_gb(self.budget_bytes)));
        }
        if let Some(d) = self.weights {
            pairs.push(("weights", d.to_string()));
        }
        if let Some(list) = &self.variants {
            pairs.push(("variants", list.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")));
        }
        if let Some(n) = self.seq_tokens {
            pairs.push(("n", n.to_string()));
        }
        if let Some(d) = self.head_dim {
            pairs.push(("d", d.to_string()));
        }
        pairs.extend(self.explorer.pairs());
        for (k, v) in &self.passthrough {
            pairs.push((k, v.clone()));
        }
        pairs.iter().map(|(k, v)| format!("{k}={}", encode_component(v))).collect::<Vec<_>>().join("&")
    }
}

/// Most variants a link may list.
pub const MAX_VARIANTS: usize = 24;

/// Reads `mha,gqa8,sw4096` (names as [`Variant`] writes them); any bad name rejects the list.
fn parse_variants(value: &str) -> Result<Vec<Variant>, String> {
    let list: Vec<Variant> = value
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<Variant>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    if list.is_empty() || list.len() > MAX_VARIANTS {
        return Err(format!("a list of 1 to {MAX_VARIANTS} variants is expected"));
    }
    Ok(list)
}

fn parse_bounded(value: &str, min: u32, max: u32) -> Result<u32, String> {
    match value.parse::<u64>() {
        Ok(x) if (u64::from(min)..=u64::from(max)).contains(&x) => Ok(x as u32),
        Ok(x) => Err(format!("{x} is outside {min}..={max}")),
        Err(_) => Err(format!("\"{value}\" is not a whole number")),
    }
}

/// Splits `a=1&b=two%20words` into decoded pairs. Malformed escapes are kept literally.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .trim_start_matches('?')
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            (decode_component(k), decode_component(v))
        })
        .collect()
}

/// Percent-decodes a query component (`+` is a space). Invalid escapes and invalid UTF-8 never fail:
/// bad escapes stay as written and bad bytes become U+FFFD.
pub fn decode_component(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let escaped = bytes
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
                match escaped {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes everything but unreserved characters (RFC 3986), spaces as `%20`.
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_query_is_the_default_without_notices() {
        assert_eq!(AppState::from_query(""), (AppState::default(), vec![]));
        assert_eq!(AppState::from_query("?"), (AppState::default(), vec![]));
        assert_eq!(AppState::default().to_query(), "");
    }

    #[test]
    fn round_trip_of_every_field() {
        let state = AppState {
            view: View::Kv,
            text: "héllo & <b>world</b> 100% + more".into(),
            mask: MaskKind::Sliding,
            window: 3,
            chunk: 7,
            seed: 99,
            backend: BackendChoice::Cpu,
            scale: ColorScale::Log,
            model: "gemma-3-27b".into(),
            cfg: None,
            ctx_tokens: 131_072,
            dtype: DType::Int4,
            layer: 5,
            axis: Axis::Log,
            budget_bytes: 24_500_000_000,
            weights: Some(DType::Bf16),
            variants: Some(vec![
                Variant::Mha,
                Variant::Gqa { groups: 4 },
                Variant::Hybrid { local_per_global: 5, window_tokens: 1024 },
            ]),
            seq_tokens: Some(4096),
            head_dim: Some(128),
            mask_given: true,
            window_given: true,
            explorer: ExplorerParams {
                tok: crate::attention::tokens::TokenMode::Char,
                src: Some("le chat & <i>".into()),
                heads: crate::views::heatmaps::params::HeadSelection::List(vec![0, 1, 2, 9]),
                pool: crate::attention::pooled::Pool::Mean,
                focus: Some(9),
                teach: false,
                tiles: true,
                steps: true,
            },
            passthrough: vec![("lesson".into(), "kv-cache".into()), ("step".into(), "2".into())],
            panic_test: false,
        };
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

    #[test]
    fn long_text_is_cut_with_a_notice() {
        let long = "a".repeat(MAX_TEXT_CHARS + 5);
        let (state, notices) = AppState::from_query(&format!("text={long}"));
        assert_eq!(state.text.len(), MAX_TEXT_CHARS);
        assert_eq!(notices.len(), 1);
    }

    #[test]
    fn decoding_by_hand() {
        assert_eq!(decode_component("a%20b+c"), "a b c");
        assert_eq!(decode_component("%E2%9C%93"), "✓");
        assert_eq!(decode_component("100%"), "100%");
        assert_eq!(decode_component("%zz%4"), "%zz%4");
        assert_eq!(decode_component("%FF"), "\u{FFFD}");
        assert_eq!(encode_component("a b/✓"), "a%20b%2F%E2%9C%93");
    }

    #[test]
    fn model_choice_and_layer_bounds() {
        let (state, notices) = AppState::from_query("model=mistral-7b&layer=31&ctx=32768&dtype=fp8");
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(state.resolved_model().n_layers(), 32);
        assert_eq!((state.layer, state.ctx_tokens, state.dtype), (31, 32768, DType::Fp8));
        let (state, notices) = AppState::from_query("model=mistral-7b&layer=32");
        assert_eq!(state.layer, 0);
        assert_eq!(notices.len(), 1);
        // A custom model travels in `cfg` and wins over the preset.
        let cfg = crate::model::encoding::encode_model(&Model::simple(6, 512, 8));
        let (state, notices) = AppState::from_query(&format!("cfg={}", encode_component(&cfg)));
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(state.resolved_model().n_layers(), 6);
        assert_eq!(AppState::from_query(&state.to_query()).0, state);
    }

    #[test]
    fn mask_takes_its_size() {
        let (state, _) = AppState::from_query("mask=sliding&window=3");
        assert_eq!(state.mask(), Mask::Sliding { window: 3 });
        let (state, _) = AppState::from_query("mask=chunked&chunk=5");
        assert_eq!(state.mask(), Mask::Chunked { chunk: 5 });
    }
}
