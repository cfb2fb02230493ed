//! The scan finds the model's vocab and merges wherever the text puts them and wherever a step ends,
//! and stops at serde_json's depth.

use super::{MAX_DEPTH, Scanner, Spans};

/// The spans of `json` scanned `budget` bytes at a time.
pub(crate) fn scan(json: &str, budget: usize) -> Option<Spans> {
    let mut scanner = Scanner::default();
    while !scanner.advance(json, budget) {}
    scanner.spans()
}

/// Braces, brackets, quotes and keys named vocab or merges in strings, escapes and other objects.
const TRICKY: &str = r#"{"added_tokens": [{"content": "}\"]{[\\"}], "pre_tokenizer": {"vocab": {"x": 1}, "merges": ["a b"]},
  "model": {"type": "BPE", "merges": [["a", "b"], "c d"], "note": "\"vocab\": {", "vocab": {"a": 0, "b": 1, "ab": 2},
  "extra": [1, {"vocab": {}}]}}"#;

#[test]
fn the_scan_finds_the_models_vocab_and_merges_wherever_a_step_ends() {
    let spans = scan(TRICKY, usize::MAX).expect("both found");
    assert_eq!(&TRICKY[spans.vocab.clone()], r#"{"a": 0, "b": 1, "ab": 2}"#);
    assert_eq!(&TRICKY[spans.merges.clone()], r#"[["a", "b"], "c d"]"#);
    assert_eq!((spans.vocab_entries, spans.merge_entries), (3, 2));
    for budget in [1, 2, 3, 7, 64] {
        assert_eq!(scan(TRICKY, budget), Some(spans.clone()), "{budget} bytes a step");
    }
    // Empty ones hold no entries; a missing one is not found.
    let empty = r#"{"model": {"vocab": { }, "merges": [ ]}}"#;
    let spans = scan(empty, usize::MAX).unwrap();
    assert_eq!((spans.vocab_entries, spans.merge_entries), (0, 0));
    assert_eq!(scan(r#"{"model": {"vocab": {"a": 0}}}"#, usize::MAX), None);
    assert_eq!(scan(r#"{"model": {"vocab": ["a"], "merges": []}}"#, usize::MAX), None);
    // A file of brackets: the scan stops at serde_json's depth instead of holding one entry each.
    let deep = format!("{{\"model\": {}", "[".repeat(1 << 20));
    let mut scanner = Scanner::default();
    assert!(scanner.advance(&deep, usize::MAX));
    assert_eq!((scanner.open.len(), scanner.spans()), (MAX_DEPTH, None));
}
