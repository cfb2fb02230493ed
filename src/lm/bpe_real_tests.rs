//! The encoder against the `tokenizers` library's ids for real models' tokenizers: Mistral 7B's
//! (SentencePiece-style BPE with byte fallback, Llama 2's pipeline; and two Metaspace variants of it),
//! Llama 3.1's (regex split, `ignore_merges`, specials beyond the vocabulary) and Qwen3's (NFC, one
//! digit at a time). The files come from `scripts/real-tokenizers.sh`, the ids from
//! `cargo run -- real-tokenizer-reference` in tools/train. And the hand-written patterns against
//! the library's regex engine on generated text.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use proptest::prelude::*;
use serde::Deserialize;
use serde_json::Value;

use super::bpe::Tokenizer;
use super::bpe_tests::{checksum, difference};
use super::pre_tokenize::WordPattern;

#[derive(Deserialize)]
struct Reference {
    variants: Vec<Variant>,
}

#[derive(Deserialize)]
struct Variant {
    name: String,
    file: String,
    patch: serde_json::Map<String, Value>,
    cases: Vec<Case>,
    with_special_tokens: Vec<Case>,
    corpus: Corpus,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

#[derive(Deserialize)]
struct Corpus {
    file: String,
    tokens: usize,
    first_ids: Vec<u32>,
    checksum: String,
}

fn repo_path(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn reference() -> &'static Reference {
    static REFERENCE: OnceLock<Reference> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let json = std::fs::read_to_string(repo_path("tests/data/real-tokenizer-reference.json")).unwrap();
        serde_json::from_str(&json).unwrap()
    })
}

/// The variant's tokenizer.json: the real file with the variant's fields replaced (`a.b`: field `b`
/// of field `a`).
fn variant_json(variant: &Variant) -> String {
    let path = repo_path("tests/data/real-tokenizers").join(&variant.file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e}: run scripts/real-tokenizers.sh (scripts/setup-test.sh does)", path.display())
    });
    let mut file: Value = serde_json::from_str(&text).unwrap();
    for (key, value) in &variant.patch {
        *file.pointer_mut(&format!("/{}", key.replace('.', "/"))).unwrap() = value.clone();
    }
    file.to_string()
}

#[test]
fn real_tokenizers_give_the_library_ids() {
    let mut failures = Vec::new();
    for variant in &reference().variants {
        let start = Instant::now();
        let tok = Tokenizer::from_json(&variant_json(variant)).unwrap_or_else(|e| panic!("{}: {e}", variant.name));
        let loaded = start.elapsed().as_secs_f64();
        for case in &variant.cases {
            if let Some(d) = difference(&tok, &tok.encode(&case.text), &case.ids) {
                failures.push(format!("{} on {:?}: {d}", variant.name, case.text));
            }
        }
        for case in &variant.with_special_tokens {
            if let Some(d) = difference(&tok, &tok.encode_with_special_tokens(&case.text), &case.ids) {
                failures.push(format!("{} on {:?} with special tokens: {d}", variant.name, case.text));
            }
        }
        let text = std::fs::read_to_string(repo_path(&variant.corpus.file)).unwrap();
        let start = Instant::now();
        let ids = tok.encode(&text);
        println!(
            "{}: read in {loaded:.2} s; {} bytes -> {} tokens in {:.2} s",
            variant.name,
            text.len(),
            ids.len(),
            start.elapsed().as_secs_f64()
        );
        let head = &ids[..ids.len().min(variant.corpus.first_ids.len())];
        if let Some(d) = difference(&tok, head, &variant.corpus.first_ids) {
            failures.push(format!("{} on {}: {d}", variant.name, variant.corpus.file));
        } else if checksum(&ids).to_string() != variant.corpus.checksum || ids.len() != variant.corpus.tokens {
            failures.push(format!(
                "{} on {}: {} ids (library {}), checksums differ",
                variant.name,
                variant.corpus.file,
                ids.len(),
                variant.corpus.tokens
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The text the tokens stand for comes back, but for what the pipeline changes on purpose: Qwen's NFC
/// composes, and SentencePiece's normalizer puts a space in front (which a continuation keeps).
#[test]
fn real_tokenizers_decode_to_the_text() {
    // Without byte fallback, characters outside the vocabulary read as <unk>: not this test's business.
    for variant in reference().variants.iter().filter(|v| !v.name.contains("unknown")) {
        let tok = Tokenizer::from_json(&variant_json(variant)).unwrap();
        let text = "Hello, world!\n  It's 2024: naïve café, 東京 🦀\tdone.";
        let decoded = tok.decode(&tok.encode(text));
        let expected = if variant.name.starts_with("mistral") { format!(" {text}") } else { text.to_string() };
        assert_eq!(decoded, expected, "{}", variant.name);
    }
}

#[test]
fn real_pieces_read_as_text() {
    let variant = |name: &str| reference().variants.iter().find(|v| v.name == name).unwrap();
    let mistral = Tokenizer::from_json(&variant_json(variant("mistral"))).unwrap();
    let ids = mistral.encode("Hi\n🦀");
    let pieces: Vec<String> = ids.iter().map(|&id| mistral.piece(id)).collect();
    // "▁Hi", then the newline's and the crab's bytes from byte fallback.
    assert_eq!(pieces, [" Hi", "\n", "\\xf0", "\\x9f", "\\xa6", "\\x80"]);
    let llama = Tokenizer::from_json(&variant_json(variant("llama3_1"))).unwrap();
    assert_eq!(llama.vocab_size(), 128_256);
    assert_eq!(llama.piece(128_000), "<|begin_of_text|>");
    assert_eq!(llama.encode("<|begin_of_text|>Hi")[0], 128_000);
    let qwen = Tokenizer::from_json(&variant_json(variant("qwen3"))).unwrap();
    assert_eq!(qwen.vocab_size(), 151_669);
}

fn regex_words(pattern: WordPattern, text: &str) -> Vec<&str> {
    static REGEXES: OnceLock<Vec<fancy_regex::Regex>> = OnceLock::new();
    let all = [WordPattern::Gpt2, WordPattern::Llama3, WordPattern::Qwen2];
    let regexes = REGEXES.get_or_init(|| all.iter().map(|p| fancy_regex::Regex::new(p.regex()).unwrap()).collect());
    let re = &regexes[all.iter().position(|&p| p == pattern).unwrap()];
    re.find_iter(text).map(|m| m.unwrap().as_str()).collect()
}

/// Characters where the patterns' alternatives part: every class, newlines against other spaces,
/// the contractions' letters in both cases and the long s, numbers of several scripts, marks.
const TRICKY: &[char] = &[
    ' ', ' ', '\t', '\n', '\r', '\u{a0}', '\u{3000}', '\u{2028}', 'a', 'Z', 'é', 'ſ', 's', 'S', 't', 'T', 'r', 'e',
    'R', 'E', 'v', 'V', 'm', 'M', 'l', 'L', 'd', 'D', 'k', '\'', '\'', '’', '1', '2', '٣', 'Ⅷ', '²', '(', '.', '!',
    '-', '_', '🦀', '中', '\u{301}', '\u{0}', '▁',
];

proptest! {
    // No regression files: the cases are cheap, and tests/fuzz.rs keeps none either.
    #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn hand_written_patterns_match_the_regex_engine(chars in proptest::collection::vec(proptest::sample::select(TRICKY), 0..24)) {
        let text: String = chars.into_iter().collect();
        for pattern in [WordPattern::Gpt2, WordPattern::Llama3, WordPattern::Qwen2] {
            let ours: Vec<&str> = pattern.words(&text).collect();
            prop_assert_eq!(&ours, &regex_words(pattern, &text), "{:?} on {:?}", pattern, text);
        }
    }
}

#[test]
fn patterns_match_the_regex_engine_on_the_corpus_and_cases() {
    let mut texts: Vec<String> = reference().variants[0].cases.iter().map(|c| c.text.clone()).collect();
    texts.push(std::fs::read_to_string(repo_path("tools/train/data/corpus/heldout.txt")).unwrap());
    for text in &texts {
        for pattern in [WordPattern::Llama3, WordPattern::Qwen2] {
            let ours: Vec<&str> = pattern.words(text).collect();
            let theirs = regex_words(pattern, text);
            let at = ours.iter().zip(&theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
            assert!(
                ours == theirs,
                "{pattern:?}, word {at}: ours {:?}, regex {:?}",
                &ours[at..(at + 3).min(ours.len())],
                &theirs[at..(at + 3).min(theirs.len())]
            );
        }
    }
}
