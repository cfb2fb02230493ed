//! The encoder against the `tokenizers` library's own ids for the project's tokenizer:
//! `tests/data/tiny-model/tokenizer-reference.json`, written by `cargo run -- tokenizer-reference` in
//! tools/train (edge-case texts, and each corpus file encoded whole); and the hand-written word
//! pattern against GPT-2's, run by the library's regex engine (fancy-regex).

use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

use super::bpe::{BpeError, Tokenizer, WordPattern};
use super::pre_tokenize::{Class, class};

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
    corpus: Vec<CorpusFile>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

#[derive(Deserialize)]
struct CorpusFile {
    file: String,
    tokens: usize,
    first_ids: Vec<u32>,
    checksum: String,
    segment_checksums: Vec<String>,
}

fn repo_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn tokenizer_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| repo_file("tools/train/data/tokenizer.json"))
}

fn tokenizer() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| Tokenizer::from_json(tokenizer_json()).unwrap())
}

/// An id straight from the file's vocabulary (GPT-2's spelling: `Ġ` for a space).
fn vocab_id(token: &str) -> u32 {
    let json: Value = serde_json::from_str(tokenizer_json()).unwrap();
    json["model"]["vocab"][token].as_u64().and_then(|id| u32::try_from(id).ok()).unwrap()
}

fn reference() -> Reference {
    serde_json::from_str(&repo_file("tests/data/tiny-model/tokenizer-reference.json")).unwrap()
}

/// The reference's checksum: `h = h * 1_000_003 + (id + 1)`, wrapping.
pub(super) fn checksum(ids: &[u32]) -> u64 {
    ids.iter().fold(0u64, |h, &id| h.wrapping_mul(1_000_003).wrapping_add(u64::from(id) + 1))
}

/// Ids with their pieces, `12:"fn"`, for failure messages.
pub(super) fn shown(tok: &Tokenizer, ids: &[u32]) -> String {
    ids.iter().map(|&id| format!("{id}:{:?}", tok.piece(id))).collect::<Vec<_>>().join(" ")
}

/// Where two id lists part, with the ids around that point and the text they cover; None if equal.
pub(super) fn difference(tok: &Tokenizer, ours: &[u32], theirs: &[u32]) -> Option<String> {
    let at = ours.iter().zip(theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
    if ours == theirs {
        return None;
    }
    let window = |ids: &[u32]| shown(tok, &ids[at.saturating_sub(5)..(at + 5).min(ids.len())]);
    Some(format!(
        "first difference at id {at} (ours {} ids, library {}), after the text {:?}\n  ours:    {}\n  library: {}",
        ours.len(),
        theirs.len(),
        tok.decode(&ours[at.saturating_sub(20)..at]),
        window(ours),
        window(theirs)
    ))
}

#[test]
fn edge_cases_give_the_library_ids() {
    let tok = tokenizer();
    let failures: Vec<String> = reference()
        .cases
        .iter()
        .filter_map(|case| difference(tok, &tok.encode(&case.text), &case.ids).map(|d| format!("{:?}: {d}", case.text)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn edge_cases_round_trip() {
    let tok = tokenizer();
    for case in reference().cases {
        assert_eq!(tok.decode(&tok.encode(&case.text)), case.text);
    }
}

#[test]
fn whole_corpus_gives_the_library_ids() {
    let tok = tokenizer();
    for file in reference().corpus {
        let text = repo_file(&file.file);
        let start = Instant::now();
        let ids = tok.encode(&text);
        let secs = start.elapsed().as_secs_f64();
        println!("{}: {} bytes -> {} tokens in {secs:.3} s", file.file, text.len(), ids.len());
        let head = &ids[..ids.len().min(file.first_ids.len())];
        if let Some(d) = difference(tok, head, &file.first_ids) {
            panic!("{}: {d}", file.file);
        }
        if checksum(&ids).to_string() != file.checksum || ids.len() != file.tokens {
            panic!(
                "{}: {} tokens (library {}); {}",
                file.file,
                ids.len(),
                file.tokens,
                differing_segment(tok, &ids, &file)
            );
        }
        assert_eq!(tok.decode(&ids), text, "{} does not round-trip", file.file);
    }
}

/// The first run of ids between `<|endoftext|>` (a document) whose checksum is not the library's.
fn differing_segment(tok: &Tokenizer, ids: &[u32], file: &CorpusFile) -> String {
    let eot = tok.encode("<|endoftext|>")[0];
    let segments: Vec<&[u32]> = ids.split(|&id| id == eot).collect();
    if segments.len() != file.segment_checksums.len() {
        return format!("{} segments, library {}", segments.len(), file.segment_checksums.len());
    }
    match segments.iter().zip(&file.segment_checksums).position(|(s, c)| checksum(s).to_string() != *c) {
        Some(i) => {
            let text = tok.decode(segments[i]);
            let head: String = text.chars().take(300).collect();
            format!("segment {i} differs ({} ids); its text begins {head:?}", segments[i].len())
        }
        None => "every segment matches, yet the whole does not".to_string(),
    }
}

#[test]
fn pieces_are_readable() {
    let tok = tokenizer();
    let one = |text: &str| {
        let ids = tok.encode(text);
        assert_eq!(ids.len(), 1, "{text:?} is {}", shown(tok, &ids));
        ids[0]
    };
    assert_eq!(tok.piece(one(" the")), " the");
    assert_eq!(tok.piece(one("\n")), "\n");
    assert_eq!(tok.piece(one("\t")), "\t");
    assert_eq!(tok.piece(one("   ")), "   ");
    assert_eq!(tok.piece(one("<|endoftext|>")), "<|endoftext|>");
    // Byte E2 alone (GPT-2 spells it "â") is the start of a three-byte character, not UTF-8.
    assert_eq!(tok.piece(vocab_id("â")), "\\xe2");
    // " 🦀" starts with a token holding the space and the emoji's first two bytes.
    assert_eq!(tok.piece(tok.encode(" 🦀")[0]), " \\xf0\\x9f");
    assert_eq!(tok.piece(u32::MAX), format!("<unknown id {}>", u32::MAX));
    assert_eq!(tok.vocab_size(), 4096);
}

#[test]
fn decode_skips_unknown_ids_and_replaces_broken_utf8() {
    let tok = tokenizer();
    let [a, b, e2] = [vocab_id("a"), vocab_id("b"), vocab_id("â")];
    assert_eq!(tok.decode(&[a, 9999, e2, b, u32::MAX]), "a\u{fffd}b");
}

/// The project's tokenizer.json with one change applied to its JSON.
fn altered(change: impl FnOnce(&mut Value)) -> Result<Tokenizer, BpeError> {
    let mut json: Value = serde_json::from_str(tokenizer_json()).unwrap();
    change(&mut json);
    Tokenizer::from_json(&json.to_string())
}

fn is_err<T>(r: Result<T, BpeError>, kind: fn(&BpeError) -> bool, says: &str) {
    match r {
        Ok(_) => panic!("accepted; expected an error saying {says:?}"),
        Err(e) => assert!(kind(&e) && e.to_string().contains(says), "{e} (expected {says:?})"),
    }
}

#[test]
fn malformed_files_are_errors() {
    let json = |e: &BpeError| matches!(e, BpeError::Json(_));
    let invalid = |e: &BpeError| matches!(e, BpeError::Invalid(_));
    is_err(Tokenizer::from_json("{"), json, "EOF");
    is_err(Tokenizer::from_json("\"text\""), json, "expected struct");
    is_err(altered(|j| j["model"]["vocab"] = json!(["a", "b"])), json, "expected a map");
    is_err(altered(|j| j["model"]["vocab"]["Ġthe"] = json!(-1)), json, "-1");
    let no_merges = |j: &mut Value| {
        j["model"].as_object_mut().unwrap().remove("merges");
    };
    is_err(altered(no_merges), json, "missing field `merges`");
    is_err(altered(|j| j["model"]["merges"][0] = json!(["Ġ", "nope"])), invalid, "\"nope\" is not in the vocabulary");
    is_err(altered(|j| j["model"]["merges"][0] = json!(["Ġ", "Ġ", "Ġ"])), invalid, "merge 0");
    is_err(altered(|j| j["model"]["merges"][0] = json!("Ġ t h")), invalid, "merge 0");
    is_err(altered(|j| j["model"]["merges"][0] = json!(7)), invalid, "merge 0");
    is_err(altered(|j| j["model"]["vocab"]["Ġthe"] = json!(5000)), invalid, "ids must run 0..4096");
    is_err(altered(|j| j["model"]["vocab"]["Ġthe"] = json!(1)), invalid, "id 1 is given to two tokens");
    is_err(altered(|j| j["added_tokens"][0]["id"] = json!(7)), invalid, "has id 7, but 0");
    let dropped_byte = |j: &mut Value| {
        let vocab = j["model"]["vocab"].as_object_mut().unwrap();
        let id = vocab.remove("Ġ").unwrap();
        vocab.insert("not a byte".into(), id);
    };
    is_err(altered(dropped_byte), invalid, "no token for byte 0x20");
}

#[test]
fn unsupported_settings_are_errors() {
    let unsupported = |e: &BpeError| matches!(e, BpeError::Unsupported(_));
    let invalid = |e: &BpeError| matches!(e, BpeError::Invalid(_));
    is_err(altered(|j| j["model"]["dropout"] = json!(0.1)), unsupported, "dropout");
    is_err(altered(|j| j["model"]["unk_token"] = json!("<unk>")), unsupported, "unknown token");
    // An unknown token the vocabulary holds is never produced: every byte has its own token.
    let with_unk = altered(|j| j["model"]["unk_token"] = json!("<|endoftext|>")).unwrap();
    assert_eq!(with_unk.encode("fn main() {}"), tokenizer().encode("fn main() {}"));
    is_err(altered(|j| j["model"]["type"] = json!("WordPiece")), unsupported, "WordPiece");
    is_err(altered(|j| j["model"]["continuing_subword_prefix"] = json!("##")), unsupported, "prefix");
    is_err(altered(|j| j["normalizer"] = json!({"type": "NFKC"})), unsupported, "normalizer NFKC");
    let regex_replace = json!({"type": "Replace", "pattern": {"Regex": " +"}, "content": " "});
    is_err(altered(|j| j["normalizer"] = regex_replace.clone()), unsupported, "regex pattern");
    is_err(altered(|j| j["pre_tokenizer"]["add_prefix_space"] = json!(true)), unsupported, "add_prefix_space");
    is_err(altered(|j| j["pre_tokenizer"] = json!({"type": "Whitespace"})), unsupported, "Whitespace");
    is_err(altered(|j| j["decoder"] = Value::Null), unsupported, "decoder null");
    is_err(altered(|j| j["decoder"] = json!({"type": "Metaspace"})), unsupported, "decoder Metaspace with a ByteLevel");
    is_err(altered(|j| j["added_tokens"][0]["lstrip"] = json!(true)), unsupported, "lstrip");
    is_err(altered(|j| j["post_processor"] = json!({"type": "RobertaProcessing"})), unsupported, "RobertaProcessing");
    // A token outside the vocabulary takes the next id; one past it leaves a gap.
    is_err(
        altered(|j| j["added_tokens"][0]["content"] = json!("<|eos|>")),
        invalid,
        "has id 0, but as listed it takes id 4096",
    );
    // The library numbers them in the order listed, whatever ids the file gives.
    let swapped = |j: &mut Value| {
        let added = j["added_tokens"].as_array_mut().unwrap();
        added.push(json!({"id": 4097, "content": "<|a|>", "normalized": false}));
        added.push(json!({"id": 4096, "content": "<|b|>", "normalized": false}));
    };
    is_err(altered(swapped), invalid, "\"<|a|>\" has id 4097, but as listed it takes id 4096");
    let extra = altered(|j| {
        j["added_tokens"].as_array_mut().unwrap().push(json!({"id": 4096, "content": "<|eos|>", "normalized": false}))
    })
    .unwrap();
    assert_eq!(extra.vocab_size(), 4097);
    assert_eq!(extra.encode("a<|eos|>"), [vocab_id("a"), 4096]);
    assert_eq!(extra.piece(4096), "<|eos|>");
    // Normalizers that could blow a typed text up are refused: too many steps, a Replace that grows
    // the text more than 4 times or inserts everywhere (an empty pattern).
    let replace =
        |pattern: &str, content: &str| json!({"type": "Replace", "pattern": {"String": pattern}, "content": content});
    let steps = |n: usize| json!({"type": "Sequence", "normalizers": vec![replace("a", "aa"); n]});
    assert!(altered(|j| j["normalizer"] = steps(4)).is_ok());
    is_err(altered(|j| j["normalizer"] = steps(5)), unsupported, "5 steps");
    is_err(altered(|j| j["normalizer"] = replace("a", "aaaaa")), unsupported, "4 times its pattern");
    is_err(altered(|j| j["normalizer"] = replace("", "x")), unsupported, "the empty string");
    let many: Vec<Value> =
        (0..=super::bpe_file::MAX_ADDED_TOKENS).map(|i| json!({"id": 4096 + i, "content": format!("<{i}>")})).collect();
    is_err(altered(|j| j["added_tokens"] = json!(many)), invalid, "65537 added tokens");
    let metaspace = |j: &mut Value| {
        j["pre_tokenizer"] = json!({"type": "Metaspace", "replacement": "\u{2581}", "add_prefix_space": false});
        j["decoder"] = json!({"type": "Metaspace", "replacement": "\u{2581}"});
    };
    is_err(altered(metaspace), invalid, "contradicts its prepend_scheme");
    let template = json!({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}});
    let two = json!({"type": "Sequence", "processors": [template.clone(), template.clone()]});
    is_err(altered(|j| j["post_processor"] = two.clone()), unsupported, "two TemplateProcessing");
    // A dropout of 0 is none, as in the library.
    assert!(altered(|j| j["model"]["dropout"] = json!(0.0)).is_ok());
    // A Split on a pattern this encoder does not know is refused, and the pattern named.
    let split = json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]});
    let err = altered(|j| j["pre_tokenizer"] = split.clone()).unwrap_err().to_string();
    assert!(err.contains("a Split pre-tokenizer on \"\\\\p{N}{1,3}\""), "{err}");
    // A Split on a plain string reads only where the normalizer has replaced that string everywhere
    // (Gemma 3's: " " after every space became `▁`), so it cuts nothing; not where a step writes it back.
    let space_split =
        json!({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false});
    is_err(altered(|j| j["pre_tokenizer"] = space_split.clone()), unsupported, "pre-tokenizer Split");
    let back = json!({"type": "Sequence", "normalizers": [replace(" ", "\u{2581}"), replace("\u{2581}", " ")]});
    let split_after = |j: &mut Value| {
        j["pre_tokenizer"] = space_split.clone();
        j["normalizer"] = back.clone();
    };
    is_err(altered(split_after), unsupported, "pre-tokenizer Split");
    // Digits then ByteLevel reads; a template post-processor adds nothing without special tokens.
    let digits = json!({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]});
    let runs = altered(|j| {
        j["pre_tokenizer"] = digits.clone();
        j["post_processor"] = json!({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}});
    })
    .unwrap();
    // Runs of digits stay together, away from the letters and the space before them.
    assert_eq!(
        shown(&runs, &runs.encode("x12 34")),
        shown(tokenizer(), &[vocab_id("x"), vocab_id("12"), vocab_id("Ġ"), vocab_id("34")])
    );
}

#[test]
fn templates_put_their_special_tokens_around_the_text() {
    let eot = |ids: Value| json!({"<|endoftext|>": {"id": "<|endoftext|>", "ids": ids, "tokens": ["<|endoftext|>"]}});
    let with = |single: Value, specials: Value| {
        altered(|j| {
            j["post_processor"] = json!({"type": "TemplateProcessing", "single": single, "special_tokens": specials})
        })
    };
    let special = json!({"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}});
    let text = json!({"Sequence": {"id": "A", "type_id": 0}});
    let around = with(json!([special, text, special]), eot(json!([0]))).unwrap();
    assert_eq!(around.encode_with_special_tokens("a"), [0, vocab_id("a"), 0]);
    assert_eq!(around.encode("a"), [vocab_id("a")]);
    // A model reads the tokens before the text, not the end-of-text one after it.
    assert_eq!(around.with_start_tokens(vec![vocab_id("a")]), [0, vocab_id("a")]);
    assert_eq!(tokenizer().encode_with_special_tokens("a"), [vocab_id("a")]);
    let invalid = |e: &BpeError| matches!(e, BpeError::Invalid(_));
    is_err(with(json!([special]), eot(json!([0]))), invalid, "must hold the text");
    is_err(with(json!([special, text]), json!({})), invalid, "without its ids");
    is_err(with(json!([special, text]), eot(json!([-1]))), invalid, "gives \"<|endoftext|>\" the id -1");
    is_err(with(json!([special, text]), eot(json!([4096]))), invalid, "adds id 4096, past the vocabulary");
}

#[test]
fn digit_pieces_by_hand() {
    use super::bpe::{DigitSplit, digit_pieces};
    let pieces = |text, split| digit_pieces(text, split).collect::<Vec<_>>();
    assert_eq!(pieces("ab12 c٣4", DigitSplit::Each), ["ab", "1", "2", " c", "٣", "4"]);
    assert_eq!(pieces("ab12 c٣4", DigitSplit::Runs), ["ab", "12", " c", "٣4"]);
    assert_eq!(pieces("ab12", DigitSplit::None), ["ab12"]);
    assert_eq!(pieces("", DigitSplit::Each), Vec::<&str>::new());
    assert_eq!(pieces("7", DigitSplit::Each), ["7"]);
}

#[test]
fn older_merge_strings_read_the_same() {
    let legacy = altered(|j| {
        let merges = j["model"]["merges"].as_array_mut().unwrap();
        for m in merges.iter_mut() {
            *m = json!(format!("{} {}", m[0].as_str().unwrap(), m[1].as_str().unwrap()));
        }
        merges.insert(0, json!("#version: 0.2"));
    })
    .unwrap();
    let text = "fn main() {\n    println!(\"it's 3.14\");\n}";
    assert_eq!(legacy.encode(text), tokenizer().encode(text));
}

#[test]
fn added_tokens_match_leftmost_longest_raw_ones_first() {
    // "in" and "ing" overlap: where both start, the longer wins; "the" is matched in the second pass,
    // on what the raw-text tokens (`normalized: false`) left.
    let tok = altered(|j| {
        let added = |content: &str, normalized: bool| {
            json!({"id": j["model"]["vocab"][content].clone(), "content": content, "normalized": normalized})
        };
        let extra = [added("in", false), added("ing", false), added("the", true)];
        j["added_tokens"].as_array_mut().unwrap().extend(extra);
    })
    .unwrap();
    let plain = |text: &str| tokenizer().encode(text);
    let expected: Vec<u32> =
        [plain("s"), vec![vocab_id("ing")], plain(" "), vec![vocab_id("the"), 0, vocab_id("in")], plain("side")]
            .concat();
    assert_eq!(tok.encode("sing the<|endoftext|>inside"), expected);
}

/// GPT-2's pattern as the library writes it, in the library's regex engine: the oracle for
/// [`WordPattern::Gpt2`].
fn gpt2_words(text: &str) -> Vec<&str> {
    static RE: OnceLock<fancy_regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        fancy_regex::Regex::new(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+").unwrap()
    });
    let found: Vec<&str> = re.find_iter(text).map(|m| m.unwrap().as_str()).collect();
    // The library keeps unmatched stretches as words too; every char matches some alternative.
    assert_eq!(found.concat(), text);
    found
}

fn words_differ(text: &str) -> Option<String> {
    let (ours, theirs): (Vec<&str>, Vec<&str>) = (WordPattern::Gpt2.words(text).collect(), gpt2_words(text));
    let at = ours.iter().zip(&theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
    (ours != theirs).then(|| {
        let around = |w: &[&str]| format!("{:?}", &w[at.saturating_sub(3)..(at + 3).min(w.len())]);
        format!("word {at}: ours {}, GPT-2's {}", around(&ours), around(&theirs))
    })
}

#[test]
fn words_are_gpt2_pattern_on_edge_cases_and_corpus() {
    let mut texts: Vec<String> = reference().cases.into_iter().map(|c| c.text).collect();
    for file in reference().corpus {
        texts.extend(repo_file(&file.file).split("<|endoftext|>").map(str::to_string));
    }
    let failures: Vec<String> = texts.iter().filter_map(|t| words_differ(t)).take(5).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn character_classes_are_the_regex_engines() {
    let re = |p: &str| fancy_regex::Regex::new(p).unwrap();
    let [space, letter, number] = [re(r"^\s$"), re(r"^\p{L}$"), re(r"^\p{N}$")];
    let mut buf = [0; 4];
    let mut wrong = Vec::new();
    for c in (0..=0x10FFFF).filter_map(char::from_u32) {
        let s = c.encode_utf8(&mut buf);
        let expected = match () {
            _ if space.is_match(s).unwrap() => Class::Space,
            _ if letter.is_match(s).unwrap() => Class::Letter,
            _ if number.is_match(s).unwrap() => Class::Number,
            _ => Class::Other,
        };
        if class(c) != expected {
            wrong.push(format!("U+{:04X} is {:?}, the regex says {expected:?}", u32::from(c), class(c)));
        }
    }
    assert!(wrong.is_empty(), "{} code points differ, first: {:?}", wrong.len(), &wrong[..wrong.len().min(10)]);
}
