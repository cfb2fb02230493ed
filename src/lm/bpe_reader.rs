//! Reading a `tokenizer.json` a step at a time ([`TokenizerReader`]): real files run to 33 MB
//! (Gemma 3's: 262,144 tokens and 514,906 merges), most of a second's work in one piece, which would
//! freeze the page. The model's `vocab` and `merges`, nearly all of the file, are found by a scan of the
//! text and read a block of entries per step (`bpe_scan`); the rest is parsed whole with those two left empty, and
//! checked stage by stage (`bpe_file`). [`Tokenizer::from_json`] runs every step at once.

use std::ops::Range;

use foldhash::{HashMap, HashMapExt};
use serde_json::Value;

use super::bpe::{BpeError, MAX_VOCAB, Merge, Tokenizer};
use super::bpe_file::{Pipeline, TokenizerFile, added_tokens, byte_level_spelling};
use super::bpe_scan::{Cursor, Scanner, Spans, without_position};
use super::spelling::Spelling;

/// Bytes of the file the scan for `vocab` and `merges` covers per step (a few ms of wasm).
const SCAN_BYTES: usize = 1 << 20;

/// Vocabulary entries or merges read per step (a few ms of wasm).
const ENTRIES: usize = 4096;

impl Tokenizer {
    /// Reads a `tokenizer.json` as the `tokenizers` library writes it, in one go.
    pub fn from_json(json: &str) -> Result<Tokenizer, BpeError> {
        let mut reader = TokenizerReader::new(json);
        while reader.step()? {}
        Ok(reader.finish())
    }
}

/// A `tokenizer.json` being read: [`TokenizerReader::step`] until it says done, then
/// [`TokenizerReader::finish`]. The result, and the first error met, are [`Tokenizer::from_json`]'s.
pub struct TokenizerReader<'j> {
    json: &'j str,
    phase: Phase,
    scan: Scanner,
    /// The file less its vocab and merges, checked (after the scan).
    head: Option<Head>,
    /// Where the next vocab or merges entry starts.
    cursor: Cursor,
    vocab: HashMap<String, u32>,
    /// Each entry's id and bytes, in file order, and whether a token was listed twice (the later id
    /// wins, as in the library, and the bytes are worked out again from the map).
    entries: Vec<(u32, Box<[u8]>)>,
    listed_twice: bool,
    /// Single characters' ids (a text vocabulary's spelling).
    char_ids: HashMap<char, u32>,
    /// Each id's bytes and how a word is spelt, once the vocabulary is read.
    spelt: Option<(Vec<Box<[u8]>>, Spelling)>,
    merges: MergeTable,
    tokenizer: Option<Tokenizer>,
    /// The vocabulary's map once the tokenizer no longer needs it, freed a block at a time (Gemma 3's
    /// 262,144 strings take tens of ms to free).
    release: Option<std::collections::hash_map::IntoIter<String, u32>>,
}

/// What the reader does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Scan,
    Head,
    Vocab,
    Merges,
    /// The added tokens, and the tokenizer put together.
    Assemble,
    Release,
    Done,
}

/// The parsed rest of the file: its pipeline, and the model's settings.
struct Head {
    file: TokenizerFile,
    pipeline: Pipeline,
    spans: Spans,
}

impl<'j> TokenizerReader<'j> {
    pub fn new(json: &'j str) -> Self {
        Self {
            json,
            phase: Phase::Scan,
            scan: Scanner::default(),
            head: None,
            cursor: Cursor { at: 0, first: true },
            vocab: HashMap::new(),
            entries: Vec::new(),
            listed_twice: false,
            char_ids: HashMap::new(),
            spelt: None,
            merges: MergeTable::default(),
            tokenizer: None,
            release: None,
        }
    }

    /// Reads a few ms' worth; false once everything is read.
    pub fn step(&mut self) -> Result<bool, BpeError> {
        match self.phase {
            Phase::Scan => {
                if self.scan.advance(self.json, SCAN_BYTES) {
                    self.phase = Phase::Head;
                }
            }
            Phase::Head => self.read_head()?,
            Phase::Vocab => {
                if self.read_vocab()? {
                    self.spell()?;
                    self.phase = Phase::Merges;
                    self.cursor = Cursor { at: self.spans().merges.start + 1, first: true };
                }
            }
            Phase::Merges => {
                if self.read_merges()? {
                    self.phase = Phase::Assemble;
                }
            }
            Phase::Assemble => {
                self.assemble()?;
                self.phase = Phase::Release;
            }
            Phase::Release => {
                let rest = self.release.as_mut().map_or(0, |entries| entries.by_ref().take(4 * ENTRIES).count());
                if rest == 0 {
                    self.phase = Phase::Done;
                }
            }
            Phase::Done => {}
        }
        Ok(self.phase != Phase::Done)
    }

    /// The tokenizer, once [`TokenizerReader::step`] has said done.
    pub fn finish(self) -> Tokenizer {
        assert_eq!(self.phase, Phase::Done, "finish after the last step");
        self.tokenizer.expect("assembled before the release")
    }

    /// The added tokens and the template checked, and the tokenizer made.
    fn assemble(&mut self) -> Result<(), BpeError> {
        let Head { file, pipeline, .. } = self.head.take().expect("read before the vocabulary");
        let Pipeline { normalizer, pre_tokenizer, template, .. } = pipeline;
        let (mut token_bytes, spelling) = self.spelt.take().expect("spelt before the merges");
        let model_vocab = token_bytes.len();
        let (raw_added, normalized_added) =
            added_tokens(&file.added_tokens, &self.vocab, &normalizer, &mut token_bytes)?;
        if let Some(&id) = template.before.iter().chain(&template.after).find(|&&id| id as usize >= token_bytes.len()) {
            return Err(BpeError::Invalid(format!("the post-processor's template adds id {id}, past the vocabulary")));
        }
        let vocab = std::mem::take(&mut self.vocab);
        let whole_words = match file.model.ignore_merges == Some(true) {
            true => Some(vocab),
            false => {
                self.release = Some(vocab.into_iter());
                None
            }
        };
        self.tokenizer = Some(Tokenizer {
            token_bytes,
            spelling,
            merges: std::mem::take(&mut self.merges.merges),
            whole_words,
            raw_added,
            normalized_added,
            normalizer,
            pre_tokenizer,
            template,
            model_vocab,
        });
        Ok(())
    }

    /// Checks the model's settings against the whole vocabulary, and orders its bytes by id.
    fn spell(&mut self) -> Result<(), BpeError> {
        let Head { file, pipeline, .. } = self.head.as_ref().expect("read before the vocabulary");
        let (model, bytes, vocab) = (&file.model, &pipeline.bytes, &self.vocab);
        model.check_unknown_token(vocab)?;
        let (token_bytes, char_ids) = match self.listed_twice {
            false => (ordered(std::mem::take(&mut self.entries), vocab.len())?, std::mem::take(&mut self.char_ids)),
            // Rare: the map holds the later id of each token; work everything out from it.
            true => {
                let entries: Vec<(u32, Box<[u8]>)> = vocab.iter().map(|(t, &id)| (id, bytes.of(t))).collect();
                (ordered(entries, vocab.len())?, single_chars(vocab))
            }
        };
        let spelling = match bytes.byte_level() {
            true => byte_level_spelling(vocab)?,
            false => model.text_spelling(vocab, char_ids),
        };
        self.spelt = Some((token_bytes, spelling));
        Ok(())
    }

    fn spans(&self) -> &Spans {
        &self.head.as_ref().expect("read after the scan").spans
    }

    /// Parses the file with its vocab and merges emptied, and checks its pipeline.
    fn read_head(&mut self) -> Result<(), BpeError> {
        let json = self.json;
        let found = self.scan.spans();
        // (Where the rest's bytes come from: each emptied span's two brackets stand for all of it.)
        let (rest, cuts) = match &found {
            Some(s) => {
                let (first, second, empty) = match s.vocab.start < s.merges.start {
                    true => (&s.vocab, &s.merges, ["{}", "[]"]),
                    false => (&s.merges, &s.vocab, ["[]", "{}"]),
                };
                let rest =
                    [&json[..first.start], empty[0], &json[first.end..second.start], empty[1], &json[second.end..]];
                (rest.concat(), vec![first.clone(), second.clone()])
            }
            None => (json.to_string(), Vec::new()),
        };
        let file: TokenizerFile = serde_json::from_str(&rest).map_err(|e| json_error(&e, &rest, &cuts))?;
        // The scan finds both wherever serde does, unless their keys are written with escapes.
        let spans = found.ok_or_else(|| {
            BpeError::Unsupported("a model whose vocab and merges keys are written with escapes".into())
        })?;
        let pipeline = file.pipeline()?;
        file.model.check_settings()?;
        for (what, n) in [("vocabulary entries", spans.vocab_entries), ("merges", spans.merge_entries)] {
            if n > MAX_VOCAB {
                return Err(BpeError::Invalid(format!("{n} {what} (at most {MAX_VOCAB})")));
            }
        }
        // Sized once: growing them would move every entry, tens of ms at a time.
        self.vocab.reserve(spans.vocab_entries);
        self.entries.reserve(spans.vocab_entries);
        self.merges.merges.reserve(spans.merge_entries);
        self.cursor = Cursor { at: spans.vocab.start + 1, first: true };
        self.head = Some(Head { file, pipeline, spans });
        self.phase = Phase::Vocab;
        Ok(())
    }

    /// Reads the next block of vocab entries; true at the end of the object.
    fn read_vocab(&mut self) -> Result<bool, BpeError> {
        let bytes = &self.head.as_ref().expect("read before the vocabulary").pipeline.bytes;
        for _ in 0..ENTRIES {
            let at = self.cursor.at;
            let bad = |e: String| BpeError::Json(format!("model.vocab, the entry at byte {at}: {e}"));
            let Some(token) = self.cursor.next_entry::<String>(self.json, b'}').map_err(bad)? else { return Ok(true) };
            self.cursor.expect(self.json, b':').map_err(bad)?;
            let id: u32 = self.cursor.value(self.json).map_err(bad)?;
            if let Some(c) = single_char(&token) {
                self.char_ids.insert(c, id);
            }
            self.entries.push((id, bytes.of(&token)));
            self.listed_twice |= self.vocab.insert(token, id).is_some();
        }
        Ok(false)
    }

    /// Reads the next block of merges; true at the end of the array.
    fn read_merges(&mut self) -> Result<bool, BpeError> {
        for _ in 0..ENTRIES {
            let at = self.cursor.at;
            let bad = |e: String| BpeError::Json(format!("model.merges, the entry at byte {at}: {e}"));
            let Some(entry) = self.cursor.next_entry::<Value>(self.json, b']').map_err(bad)? else { return Ok(true) };
            self.merges.add(&entry, &self.vocab)?;
        }
        Ok(false)
    }
}

/// serde_json's error in the file with `cuts` emptied, placed in the whole file: its line and column
/// count in the emptied text, so the byte of the whole file is said instead.
fn json_error(e: &serde_json::Error, rest: &str, cuts: &[Range<usize>]) -> BpeError {
    if cuts.is_empty() || e.line() == 0 {
        return BpeError::Json(e.to_string());
    }
    let line_start: usize = rest.split_inclusive('\n').take(e.line() - 1).map(str::len).sum();
    let mut at = line_start + e.column().saturating_sub(1);
    // Past an emptied span's brackets, the span's own bytes come back in.
    for cut in cuts {
        if at >= cut.start + 2 {
            at += cut.len() - 2;
        }
    }
    BpeError::Json(format!("{} at byte {at}", without_position(e)))
}

/// Single characters' ids in `vocab`.
fn single_chars(vocab: &HashMap<String, u32>) -> HashMap<char, u32> {
    vocab.iter().filter_map(|(token, &id)| Some((single_char(token)?, id))).collect()
}

/// The token's character when it is one.
fn single_char(token: &str) -> Option<char> {
    let mut chars = token.chars();
    chars.next().filter(|_| chars.next().is_none())
}

/// Each id's bytes, index = id. Ids must be exactly `0..len`: an embedding has a row for each.
fn ordered(entries: Vec<(u32, Box<[u8]>)>, len: usize) -> Result<Vec<Box<[u8]>>, BpeError> {
    let mut slots: Vec<Option<Box<[u8]>>> = vec![None; len];
    for (id, bytes) in entries {
        let shown = || String::from_utf8_lossy(&bytes).into_owned();
        let slot = slots.get_mut(id as usize).ok_or_else(|| {
            BpeError::Invalid(format!("token {:?} has id {id}; ids must run 0..{len} with no gap", shown()))
        })?;
        if slot.is_some() {
            return Err(BpeError::Invalid(format!("id {id} is given to two tokens, one of them {:?}", shown())));
        }
        *slot = Some(bytes);
    }
    // n distinct ids below n fill every slot.
    Ok(slots.into_iter().flatten().collect())
}

/// Merges in rank order, `["a", "b"]` or the older `"a b"`; as in the library, a pair listed twice
/// keeps its later rank, and `#version` lines are skipped.
#[derive(Default)]
struct MergeTable {
    merges: HashMap<(u32, u32), Merge>,
    /// The next merge's rank.
    rank: u32,
    joined: String,
}

impl MergeTable {
    fn add(&mut self, entry: &Value, vocab: &HashMap<String, u32>) -> Result<(), BpeError> {
        if entry.as_str().is_some_and(|s| s.starts_with("#version")) {
            return Ok(());
        }
        let rank = self.rank;
        let (left, right) = merge_parts(entry).ok_or_else(|| {
            BpeError::Invalid(format!("merge {rank} is {entry}, not [\"left\", \"right\"] or \"left right\""))
        })?;
        let id_of = |token: &str| {
            vocab.get(token).copied().ok_or_else(|| {
                BpeError::Invalid(format!("merge {rank} ({left:?} + {right:?}): {token:?} is not in the vocabulary"))
            })
        };
        let pair = (id_of(left)?, id_of(right)?);
        self.joined.clear();
        self.joined.push_str(left);
        self.joined.push_str(right);
        let id = id_of(&self.joined)?;
        self.rank += 1;
        self.merges.insert(pair, Merge { rank, id });
        Ok(())
    }
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

#[cfg(test)]
#[path = "bpe_reader_tests.rs"]
mod tests;
