//! What the `tokenizers` library makes of fixed texts and of the whole corpus: the reference the app's
//! own byte-level BPE encoder (`src/lm/bpe.rs` at the repository root) is tested against.

use serde_json::{Value, json};
use tokenizers::Tokenizer;

use crate::bpe::{self, Error};

/// How many leading ids of each corpus file are written out (the rest is covered by the checksum).
pub const FIRST_IDS: usize = 500;

/// Texts where a hand-written pre-tokenizer is most likely to part ways with the library's regex
/// (`\s+(?!\S)`, ` ?\p{L}+`, contractions) or its special-token split.
pub const CASES: &[&str] = &[
    "",
    "  leading and trailing spaces  ",
    "   ",
    "word    spaced     out",
    "stop   .   and  !! then   (x)",
    "\ttab\t\tseparated\t",
    "\n\n\n",
    "line one\n\n\nline two\n",
    "windows\r\nline\r\nendings\r\n",
    " \n \t x mixed whitespace",
    "it's we'll I'd 'S they've you're I'm don't ''s",
    "12345 3.14 1,000,000 x2 v0.9",
    "?!... --> ::<> ((())) &&= #[derive]",
    "before<|endoftext|>after",
    "<|endoftext|>at the start and at the end<|endoftext|>",
    "a <|endoftext|> b <|endoftext|><|endoftext|> <|endoftext| <|",
    "Ünïcödé → 🦀 数字 ٣",
    "e\u{301} cafe\u{301} n\u{303}",
    "non\u{a0}breaking \u{a0}space \u{a0} x",
    "\u{3000}ideographic\u{2028}separators x\u{200b}y 👩\u{200d}💻",
    "fn main() {\n    let x = 1;\n    if x > 0 {\n        println!(\"{x}\");\n    }\n}\n",
];

/// `h = 0; for id in ids { h = h * 1_000_003 + (id + 1) }`, wrapping in u64: one number that
/// changes when any id, or the count, does.
pub fn checksum(ids: &[u32]) -> u64 {
    ids.iter().fold(0u64, |h, &id| h.wrapping_mul(1_000_003).wrapping_add(u64::from(id) + 1))
}

/// The reference as JSON:
///
/// ```text
/// {
///   "about": "...",                  what this is, in words
///   "checksum": "...",               the checksum's definition
///   "cases": [{"text": "...", "ids": [u32, ...]}, ...],
///   "corpus": [{"file": "tools/train/data/corpus/train.txt", "bytes": n, "tokens": n,
///               "first_ids": [the first FIRST_IDS ids], "checksum": "decimal u64",
///               "segment_checksums": ["decimal u64", ...]}, ...]
/// }
/// ```
///
/// Every id list is `tokenizer.encode(text, false).get_ids()`; each corpus file is encoded as one
/// string, `<|endoftext|>` separators included. `segment_checksums` are the checksums of the runs of
/// ids between `<|endoftext|>` ids (the documents, mostly): a test that finds a different checksum
/// can say which document differs. Checksums are strings: a u64 does not survive JavaScript's or most
/// JSON readers' doubles.
pub fn reference(tok: &Tokenizer, corpus: &[(&str, &str)]) -> Result<Value, Error> {
    let eot = bpe::end_of_text_id(tok)?;
    let cases = CASES
        .iter()
        .map(|text| Ok(json!({"text": text, "ids": bpe::encode(tok, text)?})))
        .collect::<Result<Vec<_>, Error>>()?;
    let corpus = corpus
        .iter()
        .map(|(file, text)| {
            let ids = bpe::encode(tok, text)?;
            Ok(json!({
                "file": file,
                "bytes": text.len(),
                "tokens": ids.len(),
                "first_ids": &ids[..ids.len().min(FIRST_IDS)],
                "checksum": checksum(&ids).to_string(),
                "segment_checksums": ids.split(|&id| id == eot).map(|run| checksum(run).to_string()).collect::<Vec<_>>(),
            }))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(json!({
        "about": "Token ids from the tokenizers library (tools/train, `cargo run -- tokenizer-reference`) for tools/train/data/tokenizer.json: tokenizer.encode(text, false).get_ids().",
        "checksum": "h = 0; for id in ids { h = h * 1000003 + (id + 1) } in wrapping u64 arithmetic, as a decimal string",
        "cases": cases,
        "corpus": corpus,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_counts_order_and_length() {
        assert_eq!(checksum(&[]), 0);
        assert_eq!(checksum(&[0]), 1);
        assert_eq!(checksum(&[1, 2]), 2 * 1_000_003 + 3);
        assert_ne!(checksum(&[1, 2]), checksum(&[2, 1]));
        assert_ne!(checksum(&[0]), checksum(&[0, 0]));
    }
}
