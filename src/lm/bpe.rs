//! BPE tokenizers read from a `tokenizer.json`, giving exactly the ids of the `tokenizers` library
//! (`tokenizer.encode(text, false)`) without that library: it would add 0.64 MB gzipped to the wasm
//! module (tools/train/README.md). Byte-level BPE (GPT-2, Llama 3, Qwen2/3, SmolLM, the project's
//! model) and SentencePiece-style BPE with byte fallback (Llama 2, Mistral).
//!
//! Encoding, step by step as the library does it:
//! 1. The added tokens (`<|endoftext|>`, `<s>`) are cut out first, wherever they occur,
//!    leftmost-longest: those marked `normalized: false` from the raw text, then the others (their
//!    content normalized too) from what the normalizer made of each stretch between them.
//! 2. Each stretch is normalized (`normalize.rs`: NFC, SentencePiece's `▁`) and cut into words by
//!    the pre-tokenizer (`pre_tokenize.rs`: GPT-2's, Llama 3's or Qwen's pattern, Metaspace).
//! 3. A word's first symbols are its bytes' tokens (byte-level) or its characters' tokens, with
//!    bytes or the unknown token for characters the vocabulary lacks (`spelling.rs`); merges join
//!    neighbours, lowest rank first. With `ignore_merges` (Llama 3), a word that is a token is that token.
//!
//! Settings this encoder does not implement make [`Tokenizer::from_json`] (`bpe_reader.rs`, which reads
//! the file a step at a time; `bpe_file.rs` checks each stage) fail instead of being ignored, so a tokenizer that loads encodes as the library does. Tested against the
//! library's ids on the whole training corpus (`bpe_tests.rs`) and with real models' tokenizers
//! (`bpe_real_tests.rs`).

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

// foldhash: a seeded hash several times faster than std's SipHash on the 100k-entry vocabularies
// and merge tables (reading Llama 3's tokenizer.json spent most of its time hashing).
use foldhash::{HashMap, HashMapExt};
use std::fmt::{self, Write as _};

pub use super::pre_tokenize::{DigitSplit, WordPattern, digit_pieces};

use super::normalize::{Normalize, normalized};
use super::pre_tokenize::PreTokenizer;
use super::spelling::Spelling;

/// Most vocabulary entries (and merges) accepted: four times the largest published vocabularies.
pub const MAX_VOCAB: usize = 1 << 20;

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

/// A BPE tokenizer: [`encode`](Self::encode), [`decode`](Self::decode), and each token's text for
/// display, [`piece`](Self::piece).
#[derive(Debug, Clone)]
pub struct Tokenizer {
    /// What each id stands for, as bytes (index = id): the vocabulary, then added tokens beyond it.
    pub(super) token_bytes: Vec<Box<[u8]>>,
    /// How a word becomes its first symbols.
    pub(super) spelling: Spelling,
    /// Two neighbouring ids -> the merge that joins them.
    pub(super) merges: HashMap<(u32, u32), Merge>,
    /// `ignore_merges`: the vocabulary, for words that are tokens whole.
    pub(super) whole_words: Option<HashMap<String, u32>>,
    /// Added tokens matched in the raw text (`normalized: false`), then in the normalized text.
    pub(super) raw_added: AddedTokens,
    pub(super) normalized_added: AddedTokens,
    pub(super) normalizer: Vec<Normalize>,
    pub(super) pre_tokenizer: PreTokenizer,
    /// The special tokens the post-processor puts around a text (Llama's `<s>` or
    /// `<|begin_of_text|>` before it).
    pub(super) template: Template,
    /// The model's vocabulary's entries: ids from here on are added tokens beyond it.
    pub(super) model_vocab: usize,
}

/// Ids before and after a text, from a `TemplateProcessing` post-processor's single-text form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Template {
    pub before: Vec<u32>,
    pub after: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Merge {
    pub rank: u32,
    pub id: u32,
}

/// Added tokens matched in one pass: (content, id), and for each first byte the tokens starting with
/// it, longest first, so a text is read once whatever the number of tokens.
#[derive(Debug, Clone, Default)]
pub(super) struct AddedTokens {
    tokens: Vec<(String, u32)>,
    by_first_byte: HashMap<u8, Vec<usize>>,
}

/// A stretch of the text: ordinary text still to be cut into words, or an added token's id.
enum Stretch<'t> {
    Text { text: &'t str, at_start: bool },
    Added(u32),
}

impl Tokenizer {
    /// Number of ids, `0..vocab_size()`: the vocabulary and the added tokens beyond it.
    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// Ids below this are the model vocabulary's; those from it on are added tokens beyond it, which a
    /// text gives only by spelling them out (Gemma 3's `<image_soft_token>`).
    pub fn model_vocab_size(&self) -> usize {
        self.model_vocab
    }

    /// The ids the template puts around every text.
    pub fn template_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.template.before.iter().chain(&self.template.after).copied()
    }

    /// The library's `tokenizer.encode(text, false).get_ids()`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        // Words repeat (" the", "\n    "): each distinct one is merged once per call. The cache lives
        // for one call, so the tokenizer stays immutable and shareable and its memory is returned.
        let mut cache: HashMap<String, Vec<u32>> = HashMap::new();
        let mut ids = Vec::with_capacity(text.len() / 3);
        for piece in self.raw_added.split(text, true) {
            let (raw, at_start) = match piece {
                Stretch::Added(id) => {
                    ids.push(id);
                    continue;
                }
                Stretch::Text { text, at_start } => (text, at_start),
            };
            let normal = normalized(&self.normalizer, raw);
            for piece in self.normalized_added.split(&normal, at_start) {
                match piece {
                    Stretch::Added(id) => ids.push(id),
                    Stretch::Text { text, at_start } => self.encode_words(text, at_start, &mut cache, &mut ids),
                }
            }
        }
        ids
    }

    /// The library's `tokenizer.encode(text, true)`: [`encode`](Self::encode) with the template's
    /// special tokens around the ids (the beginning-of-text token most models were trained with).
    pub fn encode_with_special_tokens(&self, text: &str) -> Vec<u32> {
        self.with_special_tokens(self.encode(text))
    }

    /// `ids` (a text's own) with the template's special tokens around them.
    fn with_special_tokens(&self, ids: Vec<u32>) -> Vec<u32> {
        let Template { before, after } = &self.template;
        if before.is_empty() && after.is_empty() {
            return ids;
        }
        [&before[..], &ids, &after[..]].concat()
    }

    /// `ids` (a text's own) after the template's special tokens that come before a text (Llama's
    /// `<s>`): what a language model reads. Tokens the template puts after a text (an end-of-text
    /// token) are left out: the model predicts what follows the text, not what follows its end.
    pub fn with_start_tokens(&self, ids: Vec<u32>) -> Vec<u32> {
        if self.template.before.is_empty() {
            return ids;
        }
        [&self.template.before[..], &ids].concat()
    }

    /// Step 2 and 3 for a stretch of normalized text.
    fn encode_words(&self, text: &str, at_start: bool, cache: &mut HashMap<String, Vec<u32>>, ids: &mut Vec<u32>) {
        let prepared: Cow<str> = self.pre_tokenizer.prepare(text, at_start);
        for word in self.pre_tokenizer.words(&prepared) {
            if let Some(known) = cache.get(word) {
                ids.extend_from_slice(known);
            } else {
                let merged = self.word_ids(word);
                ids.extend_from_slice(&merged);
                cache.insert(word.to_string(), merged);
            }
        }
    }

    /// The text of `ids`: the tokens' bytes joined, invalid UTF-8 replaced by U+FFFD; ids outside the
    /// vocabulary are skipped, as the library skips them. This is the text the tokens add after what
    /// came before: the library's SentencePiece decoders also strip the one space the normalizer put
    /// at the start of the whole text, which does not belong to a continuation.
    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// The tokens' bytes joined (a character may be split across two tokens).
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        ids.iter().filter_map(|&id| self.bytes_of(id)).flatten().copied().collect()
    }

    /// The token's text for display: a space is a space and a newline a newline (not GPT-2's `Ġ`
    /// and `Ċ`, nor SentencePiece's `▁` and `<0x0A>`); bytes that are not UTF-8 on their own (part of
    /// a character split across tokens) are written `\xNN`. An id outside the vocabulary shows as
    /// `<unknown id N>`.
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

    /// Step 3: a word's ids.
    fn word_ids(&self, word: &str) -> Vec<u32> {
        if let Some(&id) = self.whole_words.as_ref().and_then(|vocab| vocab.get(&self.spelling.spelt(word))) {
            return vec![id];
        }
        self.merged(self.spelling.first_symbols(word))
    }

    /// The symbols merged as the library's `Word::merge_all` (without dropout) does: a queue of
    /// candidate pairs, lowest rank first and leftmost among equals; a candidate whose pair has since
    /// changed is dropped when it comes up. The queue, rather than "rescan for the best pair", keeps
    /// the library's choice even where two pairs merge into the same token.
    fn merged(&self, first: Vec<u32>) -> Vec<u32> {
        let len = first.len();
        let mut symbols: Vec<Symbol> = first
            .into_iter()
            .enumerate()
            .map(|(i, id)| Symbol {
                id,
                prev: i.checked_sub(1),
                next: Some(i + 1).filter(|&n| n < len),
                merged_away: false,
            })
            .collect();
        let mut queue: BinaryHeap<Reverse<Candidate>> =
            (1..len).filter_map(|i| self.candidate(i - 1, symbols[i - 1].id, symbols[i].id)).collect();
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

impl AddedTokens {
    pub(super) fn new(tokens: Vec<(String, u32)>) -> Self {
        let mut by_first_byte: HashMap<u8, Vec<usize>> = HashMap::new();
        for (i, (content, _)) in tokens.iter().enumerate() {
            if let Some(&first) = content.as_bytes().first() {
                by_first_byte.entry(first).or_default().push(i);
            }
        }
        for list in by_first_byte.values_mut() {
            // Longest first; among equals the first listed.
            list.sort_by_key(|&i| (Reverse(tokens[i].0.len()), i));
        }
        Self { tokens, by_first_byte }
    }

    /// The text cut on the tokens, leftmost first and the longest of those starting there, as the
    /// library's Aho-Corasick matcher does. `at_start`: the text begins the whole text, so its first
    /// piece does too if it is text.
    fn split<'t>(&self, text: &'t str, at_start: bool) -> Vec<Stretch<'t>> {
        let mut pieces = Vec::new();
        if self.tokens.is_empty() {
            pieces.extend((!text.is_empty()).then_some(Stretch::Text { text, at_start }));
            return pieces;
        }
        let (mut start, mut at) = (0, 0);
        while at < text.len() {
            let Some((len, id)) = self.longest_at(text, at) else {
                at += text[at..].chars().next().map_or(1, char::len_utf8);
                continue;
            };
            if at > start {
                pieces.push(Stretch::Text { text: &text[start..at], at_start: at_start && start == 0 });
            }
            pieces.push(Stretch::Added(id));
            at += len;
            start = at;
        }
        if start < text.len() {
            pieces.push(Stretch::Text { text: &text[start..], at_start: at_start && start == 0 });
        }
        pieces
    }

    /// The longest token at byte `at` of `text` (a char boundary): its length and id.
    fn longest_at(&self, text: &str, at: usize) -> Option<(usize, u32)> {
        let rest = &text[at..];
        let candidates = self.by_first_byte.get(rest.as_bytes().first()?)?;
        let (content, id) =
            candidates.iter().map(|&i| &self.tokens[i]).find(|(content, _)| rest.starts_with(content.as_str()))?;
        Some((content.len(), *id))
    }
}
