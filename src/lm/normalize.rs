//! The normalizers this encoder reads, as the `tokenizers` library applies them to each stretch of
//! text between added tokens: Unicode NFC (Qwen's), `Prepend` and `Replace` of a plain string
//! (Llama 2's and Mistral's `▁`), alone or in a `Sequence`.

use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Normalize {
    /// Canonical composition (`e` + U+0301 becomes `é`).
    Nfc,
    /// Puts the string in front of a non-empty stretch.
    Prepend(String),
    /// Replaces every occurrence of `pattern` (not a regex) by `content`.
    Replace { pattern: String, content: String },
}

/// The stretch of text after every step, in order.
pub fn normalized<'t>(steps: &[Normalize], text: &'t str) -> Cow<'t, str> {
    steps.iter().fold(Cow::Borrowed(text), |text, step| match step {
        // ASCII is composed already (most typed text): left as it is, without a copy.
        Normalize::Nfc if text.is_ascii() => text,
        Normalize::Nfc => nfc(&text).into(),
        Normalize::Prepend(prefix) if !text.is_empty() => format!("{prefix}{text}").into(),
        Normalize::Prepend(_) => text,
        Normalize::Replace { pattern, content } if !pattern.is_empty() && text.contains(pattern.as_str()) => {
            text.replace(pattern.as_str(), content).into()
        }
        Normalize::Replace { .. } => text,
    })
}

/// In the page, the browser's own `String.prototype.normalize`: the `unicode-normalization` crate's
/// tables would add 117 KB to the wasm module (57 KB gzipped). Both follow the Unicode standard; they
/// differ from each other and from the library only on characters of newer Unicode versions.
#[cfg(target_arch = "wasm32")]
fn nfc(text: &str) -> String {
    js_sys::JsString::from(text).normalize("NFC").into()
}

#[cfg(not(target_arch = "wasm32"))]
fn nfc(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.nfc().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_apply_in_order() {
        let sentencepiece = [
            Normalize::Prepend("\u{2581}".into()),
            Normalize::Replace { pattern: " ".into(), content: "\u{2581}".into() },
        ];
        assert_eq!(normalized(&sentencepiece, "Hi there"), "\u{2581}Hi\u{2581}there");
        assert_eq!(normalized(&sentencepiece, " x"), "\u{2581}\u{2581}x");
        assert_eq!(normalized(&sentencepiece, ""), "");
        assert_eq!(normalized(&[Normalize::Nfc], "cafe\u{301} \u{212b}"), "caf\u{e9} \u{c5}");
        assert!(matches!(normalized(&[Normalize::Nfc], "plain"), Cow::Borrowed(_)));
        assert_eq!(normalized(&[], "as is"), "as is");
    }
}
