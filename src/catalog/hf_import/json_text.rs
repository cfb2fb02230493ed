//! Python's `json` writes the non-finite floats as the bare words `Infinity`, `-Infinity` and `NaN`
//! (Mamba-2, Bamba, Granite 4, Nemotron-H and Falcon-H1 files hold `"time_step_limit": [0.0, Infinity]`).
//! That is not JSON, and serde_json refuses it; these words, outside strings, are read as `null`.

use std::borrow::Cow;

const WORDS: [&str; 3] = ["-Infinity", "Infinity", "NaN"];

/// `text` with every bare `Infinity`, `-Infinity` and `NaN` token outside a string replaced by
/// `null`. One pass, no allocation when there is none; words inside strings and longer names
/// (`NaNa`, `Infinity2`) are left alone, so a malformed file stays malformed.
pub(super) fn non_finite_as_null(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut copied, mut i, mut in_string, mut escaped) = (0, 0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        let starts_token = i == 0 || !is_word_byte(bytes[i - 1]);
        let word = WORDS.iter().find(|w| starts_token && bytes[i..].starts_with(w.as_bytes()));
        match word {
            Some(w) if !bytes.get(i + w.len()).is_some_and(|&next| is_word_byte(next)) => {
                let s = out.get_or_insert_with(|| String::with_capacity(text.len()));
                s.push_str(&text[copied..i]);
                s.push_str("null");
                i += w.len();
                copied = i;
            }
            _ => i += 1,
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut s) => {
            s.push_str(&text[copied..]);
            Cow::Owned(s)
        }
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-' || b == b'+'
}

#[cfg(test)]
mod tests {
    use super::non_finite_as_null;

    #[test]
    fn bare_non_finite_words_become_null_and_strings_stay() {
        let cases = [
            (r#"{"time_step_limit": [0.0, Infinity]}"#, r#"{"time_step_limit": [0.0, null]}"#),
            (r#"[-Infinity,NaN, Infinity ]"#, r#"[null,null, null ]"#),
            (r#"{"a": "Infinity", "b": "x NaN \" -Infinity"}"#, r#"{"a": "Infinity", "b": "x NaN \" -Infinity"}"#),
            (r#"{"NaN": NaN}"#, r#"{"NaN": null}"#),
            (r#"{"a": "\\", "b": NaN}"#, r#"{"a": "\\", "b": null}"#),
            (r#"[NaNa, Infinity2, xNaN, 1NaN]"#, r#"[NaNa, Infinity2, xNaN, 1NaN]"#),
            ("Infinity", "null"),
            ("", ""),
            (r#""unterminated NaN"#, r#""unterminated NaN"#),
            ("ü NaN é", "ü null é"),
        ];
        for (text, want) in cases {
            assert_eq!(non_finite_as_null(text), want, "{text}");
        }
        let parsed: serde_json::Value =
            serde_json::from_str(&non_finite_as_null(r#"{"l": [0.0, Infinity], "s": "NaN"}"#)).unwrap();
        assert_eq!(parsed, serde_json::json!({"l": [0.0, null], "s": "NaN"}));
    }
}
