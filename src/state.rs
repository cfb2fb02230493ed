//! The app state and its URL encoding, in one place.
//!
//! Every visual choice lives in [`AppState`], parsed from the query string and written back to it, so a
//! copied link reopens the exact configuration. Parsing never fails: a missing parameter takes its
//! default, an invalid one takes its default *and* leaves a [`Notice`] the page shows.

use std::fmt;
use std::str::FromStr;

use crate::attention::mask::{Mask, MaskKind};
use crate::colormap::ColorScale;

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

/// Where attention is computed (URL `backend=`): decided once per page load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// WebGPU when the browser has it, else the CPU reference.
    Auto,
    /// Always the CPU reference (what a browser without WebGPU gets).
    Cpu,
}

impl BackendChoice {
    pub fn id(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Cpu => "cpu",
        }
    }
}

impl FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" | "webgpu" | "gpu" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            _ => Err(format!("unknown backend \"{s}\" (expected auto or cpu)")),
        }
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

/// Longest text (in characters) the heatmap view accepts; longer text is cut with a notice.
pub const MAX_TEXT_CHARS: usize = 2000;
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
    /// Other known parameters (`model`, `ctx`, `dtype`, `layer`, `lesson`, `step`, `n`, `d`), as given.
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
            passthrough: Vec::new(),
            panic_test: false,
        }
    }
}

/// Parameters later views own; kept as given so their links round-trip.
const PASSTHROUGH_KEYS: [&str; 8] = ["model", "ctx", "dtype", "layer", "lesson", "step", "n", "d"];

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
                "mask" => value.parse().map(|m| state.mask = m).unwrap_or_else(&mut invalid),
                "backend" => value.parse().map(|b| state.backend = b).unwrap_or_else(&mut invalid),
                "scale" => value.parse().map(|c| state.scale = c).unwrap_or_else(&mut invalid),
                "window" => parse_bounded(&value, 1, MAX_WINDOW_TOKENS).map(|w| state.window = w).unwrap_or_else(&mut invalid),
                "chunk" => parse_bounded(&value, 1, MAX_WINDOW_TOKENS).map(|c| state.chunk = c).unwrap_or_else(&mut invalid),
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
                "debug" if value == "panic" => state.panic_test = true,
                k if PASSTHROUGH_KEYS.contains(&k) => state.passthrough.push((key.clone(), value)),
                _ => notices.push(Notice(format!("Ignored unknown parameter \"{key}\"."))),
            }
        }
        (state, notices)
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
        if self.mask != default.mask {
            pairs.push(("mask", self.mask.name().into()));
        }
        if self.window != default.window {
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
        for (k, v) in &self.passthrough {
            pairs.push((k, v.clone()));
        }
        pairs.iter().map(|(k, v)| format!("{k}={}", encode_component(v))).collect::<Vec<_>>().join("&")
    }
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
            passthrough: vec![("model".into(), "llama-3-8b".into()), ("ctx".into(), "8192".into())],
            panic_test: false,
        };
        let query = state.to_query();
        assert!(!query.contains(' ') && !query.contains('<'));
        assert_eq!(AppState::from_query(&query), (state, vec![]));
    }

    #[test]
    fn invalid_values_fall_back_with_notices() {
        let (state, notices) = AppState::from_query("view=nope&mask=diag&window=0&seed=-3&backend=tpu&zzz=1&chunk=99999999999&scale=cubic");
        assert_eq!(state, AppState::default());
        assert_eq!(notices.len(), 8, "{notices:?}");
        assert!(notices[0].0.contains("view"));
        assert!(notices.iter().any(|n| n.0.contains("\"zzz\"")));
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
    fn mask_takes_its_size() {
        let (state, _) = AppState::from_query("mask=sliding&window=3");
        assert_eq!(state.mask(), Mask::Sliding { window: 3 });
        let (state, _) = AppState::from_query("mask=chunked&chunk=5");
        assert_eq!(state.mask(), Mask::Chunked { chunk: 5 });
    }
}
