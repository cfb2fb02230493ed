//! Byte-level BPE (GPT-2's scheme) read from a `tokenizer.json`, giving exactly the ids of the
//! `tokenizers` library the model was trained with (`tokenizer.encode(text, false)`), without that
//! library: it would add 0.64 MB gzipped to the wasm module (tools/train/README.md).
//!
//! Encoding, step by step as the library does it:
//! 1. The added tokens (`<|endoftext|>`) are cut out first, wherever they occur, leftmost-longest.
//! 2. Each piece between them is cut into words by GPT-2's pattern
//!    `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, written out by
//!    hand over the two Unicode classes in `unicode_classes.rs`: the `regex` crate would add 0.8 MB
//!    to the wasm module (0.28 MB gzipped), and has no look-ahead for `(?!\S)` anyway.
//! 3. A word's UTF-8 bytes are its first symbols; merges join neighbours, lowest rank first.
//!
//! The library spells bytes as GPT-2's printable alphabet (`Ġ` for a space) before merging; here the
//! vocabulary is spelt back into bytes once, when it is read, and merging works on ids. Both give the
//! same ids. Settings this encoder does not implement (dropout, byte fallback, a normaliser, a prefix
//! space...) make [`Tokenizer::from_json`] fail instead of being ignored, so a tokenizer that loads
//! encodes as the library does. Tested against the library's ids on the whole training corpus
//! (`bpe_tests.rs`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt::{self, Write as _};

use serde::Deserialize;
use serde_json::Value;

use super::unicode_classes::{LETTER, NUMBER};

/// Most vocabulary entries (and merges) accepted: four times the largest published vocabularies.
pub const MAX_VOCAB: usize = 1 << 20;

/// The pattern's first alternatives, tried before anything else at the start of a word.
const CONTRACTIONS: [&str; 7] = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];

/// Why a `tokenizer.json` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BpeError {
    /// Not JSON, or a field of the wrong type; serde_json's message says which.
    Json(String),
    /// A setting of the library that this encoder does not implement.
    Unsupported(String),
    /// Parts that contradict each other (a merge of unknown tokens), or sizes past the limits.
    Invalid(String),
}

impl fmt::Display for BpeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BpeError::Json(e) => write!(f, "tokenizer.json cannot be read: {e}"),
            BpeError::Unsupported(what) => write!(f, "tokenizer.json uses {what}, which this encoder does not do"),
            BpeError::Invalid(why) => write!(f, "tokenizer.json is invalid: {why}"),
        }
    }
}

impl std::error::Error for BpeError {}

/// A byte-level BPE tokenizer: [`encode`](Self::encode), [`decode`](Self::decode), and each token's
/// text for display, [`piece`](Self::piece).
#[derive(Debug, Clone)]
pub struct Tokenizer {
    /// What each id stands for, as bytes (index = id).
    token_bytes: Vec<Box<[u8]>>,
    /// The id of each byte's own token: a word's symbols before any merge.
    byte_ids: [u32; 256],
    /// Two neighbouring ids -> the merge that joins them.
    merges: HashMap<(u32, u32), Merge>,
    /// Added tokens, one matcher per pass (see [`AddedTokens`]).
    added: Vec<AddedTokens>,
    /// A `Digits` pre-tokenizer before the ByteLevel one (StarCoder's and SmolLM's tokenizers).
    digits: DigitSplit,
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

#[derive(Debug, Clone, Copy)]
struct Merge {
    rank: u32,
    id: u32,
}

/// Added tokens matched in one pass: (content, id). The library cuts the raw text on the tokens
/// marked `normalized: false`, then the pieces left on the others (after the normaliser, of which
/// this encoder has none): two passes, kept in that order.
#[derive(Debug, Clone)]
struct AddedTokens(Vec<(String, u32)>);

/// A stretch of the text: ordinary text still to be cut into words, or an added token's id.
enum Piece<'t> {
    Text(&'t str),
    Added(u32),
}

impl Tokenizer {
    /// Reads a `tokenizer.json` as the `tokenizers` library writes it.
    pub fn from_json(json: &str) -> Result<Tokenizer, BpeError> {
        let file: TokenizerFile = serde_json::from_str(json).map_err(|e| BpeError::Json(e.to_string()))?;
        let digits = file.check_pipeline()?;
        file.model.check_settings()?;
        let vocab = &file.model.vocab;
        let alphabet = byte_alphabet();
        let token_bytes = ordered_token_bytes(vocab, &alphabet_bytes(&alphabet))?;
        let byte_ids = byte_ids(vocab, &alphabet)?;
        let merges = read_merges(&file.model.merges, vocab)?;
        let added = added_token_passes(&file.added_tokens, vocab)?;
        Ok(Tokenizer { token_bytes, byte_ids, merges, added, digits })
    }

    /// Number of ids, `0..vocab_size()`.
    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// The library's `tokenizer.encode(text, false).get_ids()`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        // Words repeat (" the", "\n    "): each distinct one is merged once per call. The cache lives
        // for one call, so the tokenizer stays immutable and shareable and its memory is returned.
        let mut cache: HashMap<&str, Vec<u32>> = HashMap::new();
        let mut ids = Vec::with_capacity(text.len() / 3);
        for piece in self.split_added(text) {
            match piece {
                Piece::Added(id) => ids.push(id),
                Piece::Text(text) => {
                    for word in digit_pieces(text, self.digits).flat_map(words) {
                        ids.extend_from_slice(cache.entry(word).or_insert_with(|| self.merge_word(word.as_bytes())));
                    }
                }
            }
        }
        ids
    }

    /// The text of `ids`, as the library's `decode(ids, false)`: the tokens' bytes joined, invalid
    /// UTF-8 replaced by U+FFFD. Ids outside the vocabulary are skipped, as the library skips them.
    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// The tokens' bytes joined (a character may be split across two tokens).
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        ids.iter().filter_map(|&id| self.bytes_of(id)).flatten().copied().collect()
    }

    /// The token's text for display: a space is a space and a newline a newline (not GPT-2's `Ġ`
    /// and `Ċ`); bytes that are not UTF-8 on their own (part of a character split across tokens) are
    /// written `\xNN`. An id outside the vocabulary shows as `<unknown id N>`.
    pub fn piece(&self, id: u32) -> String {
        let Some(bytes) = self.bytes_of(id) else { return format!("<unknown id {id}>") };
        let mut text = String::with_capacity(bytes.len());
        for chunk in bytes.utf8_chunks() {
            text.push_str(chunk.valid());
            for b in chunk.invalid() {
                write!(text, "\\x{b:02x}").ok();
            }
        }
        text
    }

    fn bytes_of(&self, id: u32) -> Option<&[u8]> {
        self.token_bytes.get(usize::try_from(id).ok()?).map(|b| &b[..])
    }

    /// Step 1: the text cut on the added tokens, in order.
    fn split_added<'t>(&self, text: &'t str) -> Vec<Piece<'t>> {
        let mut pieces = vec![Piece::Text(text)];
        for pass in &self.added {
            pieces = pieces
                .into_iter()
                .flat_map(|piece| match piece {
                    Piece::Text(text) => pass.split(text),
                    added => vec![added],
                })
                .collect();
        }
        pieces
    }

    /// Step 3: a word's ids, merging as the library's `Word::merge_all` (without dropout) does: a
    /// queue of candidate pairs, lowest rank first and leftmost among equals; a candidate whose pair
    /// has since changed is dropped when it comes up. The queue, rather than "rescan for the best
    /// pair", keeps the library's choice even where two pairs merge into the same token.
    fn merge_word(&self, word: &[u8]) -> Vec<u32> {
        let mut symbols: Vec<Symbol> = (0..word.len())
            .map(|i| Symbol {
                id: self.byte_ids[usize::from(word[i])],
                prev: i.checked_sub(1),
                next: Some(i + 1).filter(|&n| n < word.len()),
                merged_away: false,
            })
            .collect();
        let mut queue: BinaryHeap<Reverse<Candidate>> =
            (1..symbols.len()).filter_map(|i| self.candidate(i - 1, symbols[i - 1].id, symbols[i].id)).collect();
        while let Some(Reverse(top)) = queue.pop() {
            let left = top.pos;
            let Some(right) = symbols[left].next.filter(|_| !symbols[left].merged_away) else { continue };
            if self.merges.get(&(symbols[left].id, symbols[right].id)).map(|m| m.id) != Some(top.id) {
                continue;
            }
            symbols[left].id = top.id;
            symbols[left].next = symbols[right].next;
            symbols[right].merged_away = true;
            if let Some(after) = symbols[left].next {
                symbols[after].prev = Some(left);
                queue.extend(self.candidate(left, top.id, symbols[after].id));
            }
            if let Some(before) = symbols[left].prev {
                queue.extend(self.candidate(before, symbols[before].id, top.id));
            }
        }
        symbols.iter().filter(|s| !s.merged_away).map(|s| s.id).collect()
    }

    fn candidate(&self, pos: usize, left: u32, right: u32) -> Option<Reverse<Candidate>> {
        let merge = self.merges.get(&(left, right))?;
        Some(Reverse(Candidate { rank: merge.rank, pos, id: merge.id }))
    }
}

/// One symbol of a word being merged, linked to its live neighbours.
struct Symbol {
    id: u32,
    prev: Option<usize>,
    next: Option<usize>,
    merged_away: bool,
}

/// A pair that may be merged: the left symbol's position and the merge; ordered by rank, then
/// position, as the library's queue.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    rank: u32,
    pos: usize,
    id: u32,
}

/// The character classes of GPT-2's pattern: `\s`, `\p{L}`, `\p{N}` and none of them. `\s` is
/// Unicode White_Space, which `char::is_whitespace` tests; the other two come from the tables.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Class {
    Space,
    Letter,
    Number,
    Other,
}

pub(super) fn class(c: char) -> Class {
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

/// Step 2, GPT-2's pre-tokenizer: the words of a text that holds no added token, each merged on its
/// own.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    std::iter::from_fn(move || {
        (start < text.len()).then(|| {
            let end = word_end(text, start);
            let word = &text[start..end];
            start = end;
            word
        })
    })
}

/// Where the word starting at `start` ends: GPT-2's pattern, alternative by alternative, the first
/// that matches winning (a regex engine's leftmost-first order).
fn word_end(text: &str, start: usize) -> usize {
    let rest = &text[start..];
    if let Some(c) = CONTRACTIONS.iter().find(|c| rest.starts_with(*c)) {
        return start + c.len();
    }
    let mut chars = rest.chars();
    let (Some(first), second) = (chars.next(), chars.next()) else { return text.len() };
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: one plain space may lead a run of the class
    // after it.
    let (lead, run_class) = match second {
        Some(next) if first == ' ' && class(next) != Class::Space => (1, class(next)),
        _ => (0, class(first)),
    };
    let run_start = start + lead;
    let run_len: usize = text[run_start..].chars().take_while(|&c| class(c) == run_class).map(char::len_utf8).sum();
    let end = run_start + run_len;
    if run_class != Class::Space {
        return end;
    }
    // `\s+(?!\S)` before `\s+`: a run followed by a non-space leaves its last char to the next word
    // (" " then joins " word"); a single char is then `\s+`'s, whole; a run that ends the text is whole.
    match text[start..end].char_indices().next_back() {
        Some((last, _)) if last > 0 && end < text.len() => start + last,
        _ => end,
    }
}

impl AddedTokens {
    /// The text cut on the tokens, leftmost first and the longest of those starting there, as the
    /// library's Aho-Corasick matcher does.
    fn split<'t>(&self, text: &'t str) -> Vec<Piece<'t>> {
        let tokens = &self.0;
        // Each token's next occurrence, searched again only once the cut has passed it, so the text is
        // read once per token however many matches it holds.
        let mut next: Vec<Option<usize>> = tokens.iter().map(|(content, _)| text.find(content.as_str())).collect();
        let mut pieces = Vec::new();
        let mut start = 0;
        while let Some((at, i)) = self.leftmost_longest(&next) {
            if at > start {
                pieces.push(Piece::Text(&text[start..at]));
            }
            pieces.push(Piece::Added(tokens[i].1));
            start = at + tokens[i].0.len();
            for (at, (content, _)) in next.iter_mut().zip(tokens) {
                if at.is_some_and(|a| a < start) {
                    *at = text[start..].find(content.as_str()).map(|a| a + start);
                }
            }
        }
        if start < text.len() {
            pieces.push(Piece::Text(&text[start..]));
        }
        pieces
    }

    /// (position, token index) of the next match, given each token's next occurrence.
    fn leftmost_longest(&self, next: &[Option<usize>]) -> Option<(usize, usize)> {
        let found = next.iter().enumerate().filter_map(|(i, at)| Some(((*at)?, i)));
        found.min_by_key(|&(at, i)| (at, Reverse(self.0[i].0.len())))
    }
}

/// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 (controls, the
/// space, 0x7F-0xA0, the soft hyphen) for U+0100 onwards in byte order: the space is `Ġ` (U+0120).
fn byte_alphabet() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut shifted = 0x100;
    std::array::from_fn(|b| {
        let b = b as u8;
        if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(shifted - 1).unwrap_or(char::REPLACEMENT_CHARACTER)
        }
    })
}

/// The alphabet's inverse: char -> the byte it stands for.
fn alphabet_bytes(alphabet: &[char; 256]) -> HashMap<char, u8> {
    (0..=u8::MAX).map(|b| (alphabet[usize::from(b)], b)).collect()
}

/// A vocabulary entry's bytes. As the library's decoder: a token with a char outside the alphabet is
/// taken as its own UTF-8 whole (added tokens such as `<|endoftext|>` are inside it anyway).
fn spelt_bytes(token: &str, bytes: &HashMap<char, u8>) -> Box<[u8]> {
    let spelt: Option<Vec<u8>> = token.chars().map(|c| bytes.get(&c).copied()).collect();
    spelt.unwrap_or_else(|| token.as_bytes().to_vec()).into()
}

/// Each id's bytes, index = id. Ids must be exactly `0..len`: an embedding has a row for each.
fn ordered_token_bytes(vocab: &HashMap<String, u32>, bytes: &HashMap<char, u8>) -> Result<Vec<Box<[u8]>>, BpeError> {
    if vocab.len() > MAX_VOCAB {
        return Err(BpeError::Invalid(format!("{} vocabulary entries (at most {MAX_VOCAB})", vocab.len())));
    }
    let mut slots: Vec<Option<Box<[u8]>>> = vec![None; vocab.len()];
    for (token, &id) in vocab {
        let slot = slots.get_mut(id as usize).ok_or_else(|| {
            BpeError::Invalid(format!("token {token:?} has id {id}; ids must run 0..{} with no gap", vocab.len()))
        })?;
        if slot.is_some() {
            return Err(BpeError::Invalid(format!("id {id} is given to two tokens, one of them {token:?}")));
        }
        *slot = Some(spelt_bytes(token, bytes));
    }
    // n distinct ids below n fill every slot.
    Ok(slots.into_iter().flatten().collect())
}

/// The id of each byte's token. All 256 must be there: the library would silently drop a byte
/// without one (there is no unknown token), and its text with it.
fn byte_ids(vocab: &HashMap<String, u32>, alphabet: &[char; 256]) -> Result<[u32; 256], BpeError> {
    let mut ids = [0; 256];
    for (b, c) in alphabet.iter().enumerate() {
        ids[b] = *vocab
            .get(c.to_string().as_str())
            .ok_or_else(|| BpeError::Invalid(format!("the vocabulary has no token for byte 0x{b:02x} ({c:?})")))?;
    }
    Ok(ids)
}

/// Merges in rank order, `["a", "b"]` or the older `"a b"`; as in the library, a pair listed twice
/// keeps its later rank, and `#version` lines are skipped.
fn read_merges(entries: &[Value], vocab: &HashMap<String, u32>) -> Result<HashMap<(u32, u32), Merge>, BpeError> {
    if entries.len() > MAX_VOCAB {
        return Err(BpeError::Invalid(format!("{} merges (at most {MAX_VOCAB})", entries.len())));
    }
    let lines = entries.iter().filter(|e| !e.as_str().is_some_and(|s| s.starts_with("#version")));
    let mut merges = HashMap::with_capacity(entries.len());
    for (rank, entry) in lines.enumerate() {
        let (left, right) = merge_parts(entry).ok_or_else(|| {
            BpeError::Invalid(format!("merge {rank} is {entry}, not [\"left\", \"right\"] or \"left right\""))
        })?;
        let id_of = |token: &str| {
            vocab.get(token).copied().ok_or_else(|| {
                BpeError::Invalid(format!("merge {rank} ({left:?} + {right:?}): {token:?} is not in the vocabulary"))
            })
        };
        let pair = (id_of(left)?, id_of(right)?);
        merges.insert(pair, Merge { rank: rank as u32, id: id_of(&format!("{left}{right}"))? });
    }
    Ok(merges)
}

fn merge_parts(entry: &Value) -> Option<(&str, &str)> {
    match entry {
        Value::Array(parts) => match parts.as_slice() {
            [Value::String(left), Value::String(right)] => Some((left, right)),
            _ => None,
        },
        // The library splits on every space and wants exactly two parts.
        Value::String(line) => line.split_once(' ').filter(|(_, right)| !right.contains(' ')),
        _ => None,
    }
}

/// The added tokens' passes: tokens with `normalized: false` first, then the others.
fn added_token_passes(tokens: &[AddedTokenFile], vocab: &HashMap<String, u32>) -> Result<Vec<AddedTokens>, BpeError> {
    let mut passes: [Vec<(String, u32)>; 2] = Default::default();
    for token in tokens {
        // The library ignores an empty added token.
        if token.content.is_empty() {
            continue;
        }
        token.check(vocab)?;
        passes[usize::from(token.normalized)].push((token.content.clone(), token.id));
    }
    Ok(passes.into_iter().filter(|pass| !pass.is_empty()).map(AddedTokens).collect())
}

/// The parts of `tokenizer.json` that change ids; other fields are ignored, as the library does.
#[derive(Deserialize)]
struct TokenizerFile {
    version: Option<String>,
    #[serde(default)]
    truncation: Value,
    #[serde(default)]
    padding: Value,
    #[serde(default)]
    added_tokens: Vec<AddedTokenFile>,
    #[serde(default)]
    normalizer: Value,
    #[serde(default)]
    pre_tokenizer: Value,
    #[serde(default)]
    post_processor: Value,
    #[serde(default)]
    decoder: Value,
    model: ModelFile,
}

#[derive(Deserialize)]
struct ModelFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    dropout: Option<f64>,
    unk_token: Option<String>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    byte_fallback: Option<bool>,
    ignore_merges: Option<bool>,
    vocab: HashMap<String, u32>,
    merges: Vec<Value>,
}

#[derive(Deserialize)]
struct AddedTokenFile {
    id: u32,
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    normalized: bool,
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, BpeError> {
    Err(BpeError::Unsupported(what.into()))
}

/// The `type` of a pipeline stage, "null" when there is none.
fn stage_type(stage: &Value) -> &str {
    match stage {
        Value::Null => "null",
        _ => stage.get("type").and_then(Value::as_str).unwrap_or("an untyped stage"),
    }
}

impl TokenizerFile {
    /// Everything around the model: a ByteLevel pre-tokenizer (after a `Digits` one, or alone) and
    /// decoder, nothing else that changes ids; the digit split it asks for.
    fn check_pipeline(&self) -> Result<DigitSplit, BpeError> {
        if let Some(v) = self.version.as_deref().filter(|&v| v != "1.0") {
            return unsupported(format!("format version {v:?} (the library reads \"1.0\")"));
        }
        for (name, stage) in
            [("truncation", &self.truncation), ("padding", &self.padding), ("a normalizer", &self.normalizer)]
        {
            if !stage.is_null() {
                return unsupported(name);
            }
        }
        let (digits, pre) = digits_then_byte_level(&self.pre_tokenizer)?;
        if stage_type(pre) != "ByteLevel" {
            return unsupported(format!(
                "pre-tokenizer {} (this encoder reads ByteLevel, alone or after Digits)",
                stage_type(pre)
            ));
        }
        if pre.get("add_prefix_space").and_then(Value::as_bool) != Some(false) {
            return unsupported("a ByteLevel pre-tokenizer without add_prefix_space: false");
        }
        if pre.get("use_regex").is_some_and(|r| r.as_bool() != Some(true)) {
            return unsupported("a ByteLevel pre-tokenizer without GPT-2's regex (use_regex)");
        }
        // A ByteLevel post-processor only trims offsets, and a template adds its special tokens only when
        // asked (the app encodes with add_special_tokens = false); others are refused.
        if !matches!(stage_type(&self.post_processor), "null" | "ByteLevel" | "TemplateProcessing") {
            return unsupported(format!("post-processor {}", stage_type(&self.post_processor)));
        }
        if stage_type(&self.decoder) != "ByteLevel" {
            return unsupported(format!("decoder {} (decode assumes ByteLevel)", stage_type(&self.decoder)));
        }
        Ok(digits)
    }
}

/// `Sequence[Digits, ByteLevel]` as (the digit split, the ByteLevel stage); any other stage as
/// (no split, itself).
fn digits_then_byte_level(pre: &Value) -> Result<(DigitSplit, &Value), BpeError> {
    let Some(stages) = pre.get("pretokenizers").and_then(Value::as_array).filter(|_| stage_type(pre) == "Sequence")
    else {
        return Ok((DigitSplit::None, pre));
    };
    let [digits, byte_level] = stages.as_slice() else {
        return unsupported(format!(
            "a pre-tokenizer Sequence of {} stages (Digits then ByteLevel is read)",
            stages.len()
        ));
    };
    if stage_type(digits) != "Digits" {
        return unsupported(format!("a pre-tokenizer Sequence starting with {}", stage_type(digits)));
    }
    let split = match digits.get("individual_digits").and_then(Value::as_bool) {
        Some(true) => DigitSplit::Each,
        _ => DigitSplit::Runs,
    };
    Ok((split, byte_level))
}

impl ModelFile {
    fn check_settings(&self) -> Result<(), BpeError> {
        if let Some(kind) = self.kind.as_deref().filter(|&k| k != "BPE") {
            return unsupported(format!("model type {kind:?} (BPE only)"));
        }
        // The library treats a dropout of 0 as none.
        if self.dropout.is_some_and(|p| p != 0.0) {
            return unsupported("BPE dropout (random merges)");
        }
        // Every byte has its own token (`byte_ids` checks), so a byte-level BPE never falls back to
        // an unknown token: one named in the vocabulary is harmless (SmolLM's is `<|endoftext|>`).
        if let Some(unk) = self.unk_token.as_ref().filter(|unk| !self.vocab.contains_key(unk.as_str())) {
            return unsupported(format!("an unknown token ({unk:?}) outside the vocabulary"));
        }
        if self.continuing_subword_prefix.is_some() || self.end_of_word_suffix.is_some() {
            return unsupported("a continuing-subword prefix or end-of-word suffix");
        }
        if self.byte_fallback == Some(true) {
            return unsupported("byte_fallback");
        }
        if self.ignore_merges == Some(true) {
            return unsupported("ignore_merges");
        }
        Ok(())
    }
}

impl AddedTokenFile {
    fn check(&self, vocab: &HashMap<String, u32>) -> Result<(), BpeError> {
        let content = &self.content;
        if self.single_word || self.lstrip || self.rstrip {
            return unsupported(format!("added token {content:?} with single_word, lstrip or rstrip"));
        }
        // The library numbers an added token after the vocabulary unless the vocabulary has it.
        match vocab.get(content) {
            Some(&id) if id == self.id => Ok(()),
            Some(&id) => Err(BpeError::Invalid(format!(
                "added token {content:?} has id {}, but {id} in the vocabulary",
                self.id
            ))),
            None => unsupported(format!("added token {content:?} outside the model's vocabulary")),
        }
    }
}
