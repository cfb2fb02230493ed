//! The hand-read parts of a `tokenizer.json` (`bpe_reader` reads the rest with serde_json): a scan,
//! resumable at any byte, for where the model's `vocab` and `merges` lie ([`Scanner`]), and a cursor
//! over their entries that parses each where it starts ([`Cursor`]).

use std::ops::Range;

use serde::de::DeserializeOwned;

/// Deepest nesting the scan follows: serde_json's own limit, which then refuses the file.
const MAX_DEPTH: usize = 128;

/// Where the model's `vocab` object and `merges` array lie in the text (brackets included), and
/// how many entries each holds (commas + 1, or 0 when empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Spans {
    pub vocab: Range<usize>,
    pub merges: Range<usize>,
    pub vocab_entries: usize,
    pub merge_entries: usize,
}

/// A position inside the vocab object or the merges array, between entries.
pub(super) struct Cursor {
    pub at: usize,
    /// No entry read yet: the container may close at once.
    pub first: bool,
}

impl Cursor {
    /// The next entry's first value, or None where the container closes with `close`.
    pub fn next_entry<T: DeserializeOwned>(&mut self, json: &str, close: u8) -> Result<Option<T>, String> {
        self.skip_space(json);
        let byte = json.as_bytes().get(self.at).copied();
        if !self.first {
            match byte {
                Some(b) if b == close => return Ok(None),
                Some(b',') => {
                    self.at += 1;
                    self.skip_space(json);
                }
                _ => return Err(format!("expected ',' or '{}' at byte {}", close as char, self.at)),
            }
        } else if byte == Some(close) {
            return Ok(None);
        }
        self.first = false;
        self.value(json).map(Some)
    }

    /// The value at the cursor (after spaces), parsed by serde_json, and the cursor moved past it.
    pub fn value<T: DeserializeOwned>(&mut self, json: &str) -> Result<T, String> {
        self.skip_space(json);
        let mut values = serde_json::Deserializer::from_str(&json[self.at..]).into_iter::<T>();
        let value = values.next().ok_or_else(|| format!("a value is missing at byte {}", self.at))?;
        let value = value.map_err(|e| without_position(&e))?;
        self.at += values.byte_offset();
        Ok(value)
    }

    pub fn expect(&mut self, json: &str, byte: u8) -> Result<(), String> {
        self.skip_space(json);
        if json.as_bytes().get(self.at) != Some(&byte) {
            return Err(format!("expected '{}' at byte {}", byte as char, self.at));
        }
        self.at += 1;
        Ok(())
    }

    fn skip_space(&mut self, json: &str) {
        let rest = &json.as_bytes()[self.at.min(json.len())..];
        self.at += rest.iter().take_while(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t')).count();
    }
}

/// A scan of the file's structure (strings, brackets, object keys), resumable at any byte, that
/// notes where `model.vocab` (an object) and `model.merges` (an array) lie. It does not check the
/// rest of the JSON: serde_json parses that.
#[derive(Default)]
pub(super) struct Scanner {
    at: usize,
    /// The open objects and arrays, outermost first.
    open: Vec<Open>,
    in_string: bool,
    escaped: bool,
    string_start: usize,
    /// Each span found, with its entries.
    vocab: Option<(Range<usize>, usize)>,
    merges: Option<(Range<usize>, usize)>,
    done: bool,
}

/// An open object or array.
struct Open {
    object: bool,
    /// In an object: the last key read, and whether the next string is a key.
    key: Range<usize>,
    expect_key: bool,
    /// Which span this container is, with its first byte.
    span: Option<(Which, usize)>,
    /// Commas directly inside it, and whether anything is (so entries = commas + 1, or 0).
    commas: usize,
    filled: bool,
}

#[derive(Clone, Copy)]
enum Which {
    Vocab,
    Merges,
}

impl Scanner {
    /// Scans up to `budget` more bytes; true when the whole text is scanned (or its outermost
    /// value has closed).
    pub fn advance(&mut self, json: &str, budget: usize) -> bool {
        let bytes = json.as_bytes();
        let end = self.at.saturating_add(budget).min(bytes.len());
        while self.at < end && !self.done {
            let b = bytes[self.at];
            if self.in_string {
                self.string_byte(b);
            } else {
                self.structure_byte(json, b);
            }
            self.at += 1;
        }
        self.done |= self.at >= bytes.len();
        self.done
    }

    fn string_byte(&mut self, b: u8) {
        if self.escaped {
            self.escaped = false;
        } else if b == b'\\' {
            self.escaped = true;
        } else if b == b'"' {
            self.in_string = false;
            if let Some(open) = self.open.last_mut() {
                open.filled = true;
            }
            if let Some(open) = self.open.last_mut().filter(|o| o.object && o.expect_key) {
                open.key = self.string_start + 1..self.at;
                open.expect_key = false;
            }
        }
    }

    fn structure_byte(&mut self, json: &str, b: u8) {
        match b {
            b'"' => {
                self.in_string = true;
                self.string_start = self.at;
            }
            b' ' | b'\n' | b'\r' | b'\t' | b':' => {}
            b'{' | b'[' => {
                let key = |o: &Open| &json[o.key.clone()];
                let span = match self.open.as_slice() {
                    [root, model] if root.object && model.object && key(root) == "model" => match (key(model), b) {
                        ("vocab", b'{') => Some((Which::Vocab, self.at)),
                        ("merges", b'[') => Some((Which::Merges, self.at)),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(outer) = self.open.last_mut() {
                    outer.filled = true;
                }
                // Deeper than serde_json reads: stop (no spans), and let it say so, before a file of
                // brackets grows the list by gigabytes.
                if self.open.len() >= MAX_DEPTH {
                    self.done = true;
                    return;
                }
                self.open.push(Open {
                    object: b == b'{',
                    key: 0..0,
                    expect_key: b == b'{',
                    span,
                    commas: 0,
                    filled: false,
                });
            }
            b'}' | b']' => match self.open.pop() {
                Some(open) => {
                    let span = |start: usize| (start..self.at + 1, if open.filled { open.commas + 1 } else { 0 });
                    match open.span {
                        Some((Which::Vocab, start)) => self.vocab = Some(span(start)),
                        Some((Which::Merges, start)) => self.merges = Some(span(start)),
                        None => {}
                    }
                    self.done = self.open.is_empty();
                }
                // Unbalanced: serde_json says how.
                None => self.done = true,
            },
            b',' => {
                if let Some(open) = self.open.last_mut() {
                    open.commas += 1;
                    open.expect_key = open.object;
                }
            }
            // A number, true, false or null.
            _ => {
                if let Some(open) = self.open.last_mut() {
                    open.filled = true;
                }
            }
        }
    }

    /// Both spans, when the scan found them.
    pub fn spans(&self) -> Option<Spans> {
        let ((vocab, vocab_entries), (merges, merge_entries)) = (self.vocab.clone()?, self.merges.clone()?);
        Some(Spans { vocab, merges, vocab_entries, merge_entries })
    }
}

/// serde_json's message without its line and column.
pub(super) fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    text.rsplit_once(" at line ").map_or(text.clone(), |(message, _)| message.to_string())
}

#[cfg(test)]
#[path = "bpe_scan_tests.rs"]
pub(crate) mod tests;
