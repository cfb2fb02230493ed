//! How a tokenizer cuts text into words before merging, as the `tokenizers` library's pre-tokenizers
//! do: GPT-2's pattern (ByteLevel's own regex, after an optional `Digits` split), the patterns of
//! Llama 3's and Qwen2's `Split` stages, and SentencePiece's Metaspace. The regexes are written out
//! by hand over the Unicode classes in `unicode_classes.rs`: the `regex` crate would add 0.8 MB to the
//! wasm module (0.28 MB gzipped), and has no look-ahead for `(?!\S)` anyway. `bpe_tests.rs` and
//! `bpe_real_tests.rs` check each against fancy-regex, the regex engine of the library's wasm build,
//! with which tools/train makes the reference ids (its default build uses Oniguruma).

use super::unicode_classes::{LETTER, NUMBER};

/// SentencePiece's space, `▁` (U+2581).
pub const METASPACE: char = '\u{2581}';

/// GPT-2's pattern: the ByteLevel pre-tokenizer's regex, and StarCoder's and SmolLM's after `Digits`.
pub const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Llama 3's `Split` pattern: contractions in any case, a letter run with one leading non-newline,
/// numbers by at most three digits, newlines kept with the punctuation or spaces before them.
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's and Qwen3's: Llama 3's with every digit on its own.
pub const QWEN2_PATTERN: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The pre-tokenizers this encoder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// ByteLevel with GPT-2's regex, after a `Digits` split or none.
    Gpt2(DigitSplit),
    /// `Split` on a known pattern (behaviour `Isolated`), then ByteLevel without its regex.
    Pattern(WordPattern),
    /// No split: each stretch of text between added tokens is one word (ByteLevel without its regex,
    /// or no pre-tokenizer, as Llama 2's and Mistral's tokenizers).
    Whole,
    /// SentencePiece's spaces: each space becomes `▁`, one may be put in front, words may be cut
    /// before each `▁`.
    Metaspace(Metaspace),
}

/// How a `Digits` pre-tokenizer cuts the text before GPT-2's pattern does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigitSplit {
    None,
    /// `individual_digits: true`: every digit on its own.
    Each,
    /// `individual_digits: false`: each run of digits on its own.
    Runs,
}

/// The `Split` patterns read, each recognised by its exact text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordPattern {
    Gpt2,
    Llama3,
    Qwen2,
}

/// A Metaspace pre-tokenizer's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metaspace {
    pub prepend: Prepend,
    /// Whether words are cut before each `▁`.
    pub split: bool,
}

/// When Metaspace puts a `▁` in front of a stretch of text that does not start with one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepend {
    Always,
    /// Only at the very start of the text (not after an added token).
    First,
    Never,
}

impl PreTokenizer {
    /// The stretch of text as the words are cut from it: Metaspace's spaces written `▁` (`at_start`:
    /// the stretch begins the text), the text itself otherwise.
    pub fn prepare<'t>(&self, text: &'t str, at_start: bool) -> std::borrow::Cow<'t, str> {
        let PreTokenizer::Metaspace(m) = self else { return text.into() };
        let mut spaced = text.replace(' ', "\u{2581}");
        let prepend = match m.prepend {
            Prepend::Always => true,
            Prepend::First => at_start,
            Prepend::Never => false,
        };
        if prepend && !spaced.starts_with(METASPACE) {
            spaced.insert(0, METASPACE);
        }
        spaced.into()
    }

    /// The words of a prepared stretch of text, in order; together they are the whole text.
    pub fn words<'t>(&self, text: &'t str) -> Vec<&'t str> {
        match *self {
            PreTokenizer::Gpt2(digits) => digit_pieces(text, digits).flat_map(|p| WordPattern::Gpt2.words(p)).collect(),
            PreTokenizer::Pattern(pattern) => pattern.words(text).collect(),
            PreTokenizer::Metaspace(Metaspace { split: true, .. }) => before_each_metaspace(text).collect(),
            PreTokenizer::Whole | PreTokenizer::Metaspace(_) => [text].into_iter().filter(|t| !t.is_empty()).collect(),
        }
    }
}

/// `text` cut before each `▁` (the library's `MergedWithNext` split on it).
fn before_each_metaspace(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let skip = rest.chars().next()?.len_utf8();
        let end = rest[skip..].find(METASPACE).map_or(rest.len(), |i| i + skip);
        let (word, after) = rest.split_at(end);
        rest = after;
        Some(word)
    })
}

/// The character classes of the patterns: `\s`, `\p{L}`, `\p{N}` and none of them. `\s` is Unicode
/// White_Space, which `char::is_whitespace` tests; the other two come from the tables.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    Space,
    Letter,
    Number,
    Other,
}

pub fn class(c: char) -> Class {
    if c.is_whitespace() {
        Class::Space
    } else if c.is_ascii() {
        // Most text: ASCII letters and digits are the only ones below 0x80.
        match c {
            'a'..='z' | 'A'..='Z' => Class::Letter,
            '0'..='9' => Class::Number,
            _ => Class::Other,
        }
    } else if in_ranges(LETTER, c) {
        Class::Letter
    } else if in_ranges(NUMBER, c) {
        Class::Number
    } else {
        Class::Other
    }
}

/// Whether `c` is in one of the sorted, disjoint ranges.
fn in_ranges(ranges: &[(u32, u32)], c: char) -> bool {
    let c = u32::from(c);
    let i = ranges.partition_point(|&(_, hi)| hi < c);
    ranges.get(i).is_some_and(|&(lo, _)| lo <= c)
}

/// A `Digits` pre-tokenizer's pieces of `text` (the library's `char::is_numeric`, isolated one by
/// one or in runs); the whole text when there is none.
pub fn digit_pieces(text: &str, split: DigitSplit) -> impl Iterator<Item = &str> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let rest = text.get(start..).filter(|r| !r.is_empty())?;
        let mut chars = rest.char_indices();
        let (_, first) = chars.next()?;
        let end = match (split, first.is_numeric()) {
            (DigitSplit::None, _) => rest.len(),
            (DigitSplit::Each, true) => first.len_utf8(),
            (DigitSplit::Runs, true) => chars.find(|(_, c)| !c.is_numeric()).map_or(rest.len(), |(i, _)| i),
            (_, false) => chars.find(|(_, c)| c.is_numeric()).map_or(rest.len(), |(i, _)| i),
        };
        start += end;
        Some(&rest[..end])
    })
}

impl WordPattern {
    /// The pattern whose regex is exactly `regex`, as `tokenizer.json` writes it.
    pub fn from_regex(regex: &str) -> Option<WordPattern> {
        [WordPattern::Gpt2, WordPattern::Llama3, WordPattern::Qwen2].into_iter().find(|p| p.regex() == regex)
    }

    pub fn regex(self) -> &'static str {
        match self {
            WordPattern::Gpt2 => GPT2_PATTERN,
            WordPattern::Llama3 => LLAMA3_PATTERN,
            WordPattern::Qwen2 => QWEN2_PATTERN,
        }
    }

    /// The matches of the pattern in `text`, in order; every character matches one of its
    /// alternatives, so together they are the whole text.
    pub fn words(self, text: &str) -> impl Iterator<Item = &str> {
        let mut start = 0;
        std::iter::from_fn(move || {
            (start < text.len()).then(|| {
                let end = match self {
                    WordPattern::Gpt2 => gpt2_word_end(text, start),
                    WordPattern::Llama3 => llama3_word_end(text, start, 3),
                    WordPattern::Qwen2 => llama3_word_end(text, start, 1),
                };
                let word = &text[start..end];
                start = end;
                word
            })
        })
    }
}

/// Bytes of the run of `class` characters at the start of `text`, at most `limit` characters.
fn run(text: &str, of: Class, limit: usize) -> usize {
    text.chars().take_while(|&c| class(c) == of).take(limit).map(char::len_utf8).sum()
}

/// The endings of the patterns' first alternatives, after an apostrophe, in their order.
const CONTRACTIONS: [&str; 7] = ["s", "t", "re", "ve", "m", "ll", "d"];

/// Where the word starting at `start` ends: GPT-2's pattern, alternative by alternative, the first
/// that matches winning (a regex engine's leftmost-first order).
fn gpt2_word_end(text: &str, start: usize) -> usize {
    let rest = &text[start..];
    let after = rest.strip_prefix('\'').unwrap_or_default();
    if let Some(c) = CONTRACTIONS.iter().find(|c| after.starts_with(*c)) {
        return start + 1 + c.len();
    }
    let mut chars = rest.chars();
    let (Some(first), second) = (chars.next(), chars.next()) else { return text.len() };
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: one plain space may lead a run of the class
    // after it.
    let (lead, run_class) = match second {
        Some(next) if first == ' ' && class(next) != Class::Space => (1, class(next)),
        _ => (0, class(first)),
    };
    let end = start + lead + run(&text[start + lead..], run_class, usize::MAX);
    if run_class != Class::Space {
        return end;
    }
    spaces_end(text, start, end)
}

/// `\s+(?!\S)` before `\s+`, for the spaces `start..end` (a whole run): a run followed by a non-space
/// leaves its last char to the next word (" " then joins " word"); a single char is then `\s+`'s,
/// whole; a run that ends the text is whole.
fn spaces_end(text: &str, start: usize, end: usize) -> usize {
    match text[start..end].char_indices().next_back() {
        Some((last, _)) if last > 0 && end < text.len() => start + last,
        _ => end,
    }
}

/// Where the word starting at `start` ends under Llama 3's pattern (`max_digits` 3) or Qwen2's (1),
/// alternative by alternative.
fn llama3_word_end(text: &str, start: usize, max_digits: usize) -> usize {
    let rest = &text[start..];
    if let Some(len) = contraction_any_case(rest) {
        return start + len;
    }
    let mut chars = rest.chars();
    let (Some(first), second) = (chars.next(), chars.next()) else { return text.len() };
    let second_class = second.map(class);
    match class(first) {
        // `[^\r\n\p{L}\p{N}]?\p{L}+` with nothing in front, and `\p{N}{1,3}`.
        Class::Letter => return start + run(rest, Class::Letter, usize::MAX),
        Class::Number => return start + run(rest, Class::Number, max_digits),
        _ => {}
    }
    // One character that is not a newline may lead a run of letters.
    if !matches!(first, '\r' | '\n') && second_class == Some(Class::Letter) {
        let lead = first.len_utf8();
        return start + lead + run(&rest[lead..], Class::Letter, usize::MAX);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`: punctuation, with one plain space before it and the newlines after.
    let lead = usize::from(first == ' ' && second_class == Some(Class::Other));
    if lead == 1 || class(first) == Class::Other {
        let end = start + lead + run(&rest[lead..], Class::Other, usize::MAX);
        return end + text[end..].bytes().take_while(|b| matches!(b, b'\r' | b'\n')).count();
    }
    // Spaces: `\s*[\r\n]+` takes them up to the last newline among them; else as GPT-2's.
    let end = start + run(rest, Class::Space, usize::MAX);
    match text[start..end].rfind(['\r', '\n']) {
        Some(newline) => start + newline + 1,
        None => spaces_end(text, start, end),
    }
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)`: the length of the contraction `text` starts with, in any case.
/// Unicode case folding makes the long s `ſ` an `s` too; no other character folds to these letters.
fn contraction_any_case(text: &str) -> Option<usize> {
    let after = text.strip_prefix('\'')?;
    let folds = |c: char, letter: char| c.to_ascii_lowercase() == letter || (letter == 's' && c == 'ſ');
    CONTRACTIONS.iter().find_map(|contraction| {
        let mut chars = after.char_indices();
        let mut len = 0;
        for letter in contraction.chars() {
            let (_, c) = chars.next().filter(|&(_, c)| folds(c, letter))?;
            len += c.len_utf8();
        }
        Some(1 + len)
    })
}
