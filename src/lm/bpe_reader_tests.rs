//! The step-by-step reader: reading in steps gives the tokenizer the whole file gives, in any layout;
//! broken entries are errors that name where; a token listed twice keeps its later id, as in the
//! library. (The real tokenizers' tests, `bpe_real_tests`, read five real files through it.)

use proptest::prelude::*;
use serde_json::{Value, json};

use super::TokenizerReader;
use crate::lm::bpe::{BpeError, Tokenizer};
use crate::lm::bpe_scan::tests::scan;

fn shipped_json() -> String {
    let path = format!("{}/www/models/attention-lab-tiny/tokenizer.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

/// The shipped tokenizer.json re-written with `model`'s fields in `order` (the rest as they were).
fn with_model_order(order: &[&str], pretty: bool) -> String {
    let file: Value = serde_json::from_str(&shipped_json()).unwrap();
    let write = |v: &Value| if pretty { serde_json::to_string_pretty(v) } else { serde_json::to_string(v) }.unwrap();
    let model = file["model"].as_object().unwrap();
    let fields: Vec<String> = order.iter().map(|k| format!("{}: {}", write(&json!(k)), write(&model[*k]))).collect();
    let mut rest = file.as_object().unwrap().clone();
    rest.remove("model");
    let rest = write(&Value::Object(rest));
    format!("{}, \"model\": {{{}}}\n}}", rest.trim_end().trim_end_matches('}').trim_end(), fields.join(",\n"))
}

#[test]
fn reading_in_steps_gives_the_whole_files_tokenizer_in_any_layout() {
    let texts = ["fn main() {\n    println!(\"it's 3.14\");\n}", "Don't (sit) ünïcödé 🦀 x12 34", ""];
    let want: Vec<Vec<u32>> = {
        let tok = Tokenizer::from_json(&shipped_json()).unwrap();
        texts.iter().map(|t| tok.encode(t)).collect()
    };
    let keys = [
        "type",
        "dropout",
        "unk_token",
        "continuing_subword_prefix",
        "end_of_word_suffix",
        "fuse_unk",
        "byte_fallback",
        "ignore_merges",
        "vocab",
        "merges",
    ];
    let mut merges_first = keys.to_vec();
    merges_first.sort_by_key(|k| *k != "merges");
    for (order, pretty) in [(&keys[..], true), (&keys[..], false), (&merges_first[..], true)] {
        let json = with_model_order(order, pretty);
        let tok = Tokenizer::from_json(&json).unwrap_or_else(|e| panic!("{e}\n{}", &json[..300]));
        let got: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode(t)).collect();
        assert_eq!(got, want, "model fields {order:?}, pretty {pretty}");
    }
}

fn error_of(json: &str) -> BpeError {
    Tokenizer::from_json(json).expect_err("refused")
}

#[test]
fn broken_entries_are_errors_that_say_where() {
    let json = shipped_json();
    let vocab_at = json.find("\"vocab\"").unwrap();
    // A trailing comma, a missing colon, an id that is not a number: each in the vocabulary.
    for (from, to, says) in [
        ("\"!\":1,", "\"!\":1,,", "model.vocab, the entry at byte "),
        ("\"!\":1", "\"!\" 1", "expected ':'"),
        ("\"!\":1", "\"!\":\"1\"", "invalid type: string"),
    ] {
        let at = vocab_at + json[vocab_at..].find(from).unwrap();
        let broken = format!("{}{to}{}", &json[..at], &json[at + from.len()..]);
        let err = error_of(&broken);
        assert!(matches!(err, BpeError::Json(_)) && err.to_string().contains(says), "{from} -> {to}: {err}");
    }
    // A trailing comma closing the vocabulary.
    let end = scan(&json, usize::MAX).unwrap().vocab.end - 1;
    let trailing = format!("{},{}", &json[..end], &json[end..]);
    assert!(error_of(&trailing).to_string().contains("model.vocab, the entry at byte"), "{}", error_of(&trailing));
    // The file cut short: serde_json says where.
    assert!(matches!(error_of(&json[..json.len() / 2]), BpeError::Json(_)));
    // An error after the vocabulary and merges is placed in the whole file, not in the text parsed
    // without them.
    let merges_end = json.rfind(']').unwrap() + 1;
    let broken = format!("{}, \"x\": nope{}", &json[..merges_end], &json[merges_end..]);
    let err = error_of(&broken).to_string();
    let at: usize = err.rsplit_once("at byte ").and_then(|(_, n)| n.parse().ok()).expect("a byte");
    let nope = broken.find("nope").unwrap();
    assert!((nope..nope + 4).contains(&at), "{err}: \"nope\" is at byte {nope}");
    // Nesting deeper than serde_json reads is refused at once, not followed bracket by bracket.
    let deep = format!("{{\"normalizer\": {}", "[".repeat(100_000));
    assert!(error_of(&deep).to_string().contains("recursion limit"), "{}", error_of(&deep));
    // Keys written with escapes are read by serde but not found by the scan: refused, not misread.
    let escaped = json.replacen("\"vocab\"", "\"voc\\u0061b\"", 1);
    assert!(error_of(&escaped).to_string().contains("written with escapes"));
}

/// A SentencePiece-style tokenizer of `vocab` (a JSON object's text) and `merges`.
fn text_tokenizer(vocab: &str, merges: &str) -> String {
    format!(
        r#"{{"version": "1.0", "added_tokens": [], "normalizer": {{"type": "Replace", "pattern": {{"String": " "}}, "content": "▁"}},
        "pre_tokenizer": null, "post_processor": null,
        "decoder": {{"type": "Sequence", "decoders": [{{"type": "Replace", "pattern": {{"String": "▁"}}, "content": " "}}, {{"type": "Fuse"}}]}},
        "model": {{"type": "BPE", "vocab": {vocab}, "merges": {merges}}}}}"#
    )
}

#[test]
fn a_token_listed_twice_keeps_its_later_id_as_in_the_library() {
    let tok = Tokenizer::from_json(&text_tokenizer(r#"{"a": 5, "b": 1, "ab": 2, "a": 0}"#, r#"["a b"]"#)).unwrap();
    assert_eq!((tok.encode("a"), tok.encode("ab"), tok.encode("ba")), (vec![0], vec![2], vec![1, 0]));
    // Here the later ids leave a gap (0 is nobody's): refused as the library's numbering would be.
    let gap = error_of(&text_tokenizer(r#"{"x": 0, "a": 1, "b": 2, "ab": 3, "x": 4}"#, r#"["a b"]"#));
    assert!(gap.to_string().contains("ids must run 0..4"), "{gap}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Text made of JSON's pieces never panics the reader, and a scan in small steps finds what a
    /// scan in one finds.
    #[test]
    fn any_text_is_read_or_refused(pieces in proptest::collection::vec(proptest::sample::select(vec![
        "{", "}", "[", "]", "\"", "\\", ",", ":", " ", "\"model\"", "\"vocab\"", "\"merges\"", "\"a\"", "0", "1",
        "\"a b\"", "null", "é",
    ]), 0..60), budget in 1usize..8) {
        let text: String = pieces.concat();
        prop_assert_eq!(scan(&text, budget), scan(&text, usize::MAX));
        let mut reader = TokenizerReader::new(&text);
        let mut steps = 0;
        while let Ok(true) = reader.step() {
            steps += 1;
            prop_assert!(steps < 10_000, "the reader does not end");
        }
    }
}
