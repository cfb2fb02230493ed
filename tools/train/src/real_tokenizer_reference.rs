//! What the `tokenizers` library makes of texts with real models' tokenizers (Mistral 7B's, Llama 3.1's,
//! Qwen3's, fetched by `scripts/real-tokenizers.sh` at the repository root), and with two variants of
//! Mistral's that read spaces with a Metaspace pre-tokenizer instead of a normalizer (as Mistral v0.3's
//! and newer Llama conversions do): the reference for the app's own encoder (`src/lm/bpe_tests.rs`).

use serde_json::{Value, json};
use tokenizers::Tokenizer;

use crate::bpe::Error;
use crate::tokenizer_reference::{CASES, checksum};

/// How many leading ids of the corpus file are written out (the rest is covered by the checksum).
const FIRST_IDS: usize = 300;

/// Texts that part the real pipelines from GPT-2's: digit runs (`\p{N}{1,3}` against `\p{N}`),
/// case-insensitive contractions (with the long s that folds to `s`), a leading non-letter joined to
/// the word after it, newlines kept with punctuation, Unicode compositions (Qwen's NFC), characters a
/// SentencePiece vocabulary lacks (byte fallback), spaces and `▁` in the text, special tokens.
pub const REAL_CASES: &[&str] = &[
    "1 12 123 1234 12345 1234567890123 x2024y 3.14159 ١٢٣٤٥ ⅷ²",
    "IT'S We'LL they'Re I'D 'ſ x'ſt 'T 'M 'VE don’t",
    "(hello) [world] {x} \"quoted\" $var @user #tag _under __dunder",
    "end.\n\nNext,\r\n\r\n  indented:\n\t- item\n\n\n",
    "a  b   c    d\t\te \u{a0}f \u{3000}g",
    "  \n\n  x  \n",
    "Å Å e\u{301} \u{1e0b}\u{323} \u{fb01} ｆｕｌｌ ①",
    "🦀 🤗 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u{10ffff} \u{e000} \u{7f}\u{1} ঌ",
    "▁already▁spaced ▁ ▁▁x",
    "<s>Hello</s> world <unk>",
    "<|begin_of_text|>Hi there<|eot_id|><|start_header_id|>user<|end_header_id|>",
    "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>",
    "Das Straßenbahn-Netz ist 123km lang; 東京は大きい。 Привет, мир! مرحبا",
    // Words that Llama 3's vocabulary holds whole but its merges would not reach (`ignore_merges`).
    "Tôi làm việc ở Việt Nam",
    "a<s>b Hi <s>there",
];

/// A sentence short enough for the page to label every token of its heatmaps.
pub const SHORT_CASE: &str = "Don't (sit) 1234!";

/// A variant of a real tokenizer: its file with the fields of `patch` replaced (a key `a.b` names
/// field `b` of field `a`).
pub struct Variant {
    pub name: &'static str,
    pub file: &'static str,
    pub patch: fn() -> Value,
}

fn no_patch() -> Value {
    json!({})
}

/// Mistral 7B's tokenizer (Llama 2's pipeline) with the Metaspace pre-tokenizer of Mistral v0.3's (`prepend_scheme: first`,
/// no split) in place of the Prepend + Replace normalizer.
fn metaspace_first() -> Value {
    json!({"normalizer": null, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}})
}

/// Mistral 7B's tokenizer with a Metaspace pre-tokenizer that prepends to every piece and splits words.
fn metaspace_split() -> Value {
    json!({"normalizer": null, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}})
}

/// Mistral 7B's tokenizer with `<s>` matched after the normalizer (as older conversions mark their
/// special tokens): its content is normalized too, so it no longer matches a bare `<s>`.
fn normalized_specials() -> Value {
    json!({"added_tokens": [
        {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true},
        {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}]})
}

/// Mistral 7B's tokenizer without byte fallback: characters it lacks become the unknown token, one
/// each (`fuse_unk` left to the library's default).
fn unknown_characters() -> Value {
    json!({"model.byte_fallback": false, "model.fuse_unk": null})
}

pub const VARIANTS: &[Variant] = &[
    Variant { name: "mistral", file: "mistral/tokenizer.json", patch: no_patch },
    Variant { name: "mistral-metaspace-first", file: "mistral/tokenizer.json", patch: metaspace_first },
    Variant { name: "mistral-metaspace-split", file: "mistral/tokenizer.json", patch: metaspace_split },
    Variant { name: "mistral-normalized-specials", file: "mistral/tokenizer.json", patch: normalized_specials },
    Variant { name: "mistral-unknown-characters", file: "mistral/tokenizer.json", patch: unknown_characters },
    Variant { name: "llama3_1", file: "llama3_1/tokenizer.json", patch: no_patch },
    Variant { name: "qwen3", file: "qwen3/tokenizer.json", patch: no_patch },
    Variant { name: "gemma", file: "gemma/tokenizer.json", patch: no_patch },
    Variant { name: "gemma3", file: "gemma3/tokenizer.json", patch: no_patch },
];

/// The file's JSON with the variant's patch applied.
pub fn patched(json: &str, variant: &Variant) -> Result<String, Error> {
    let mut file: Value = serde_json::from_str(json)?;
    if let Value::Object(patch) = (variant.patch)() {
        for (key, value) in patch {
            let pointer = format!("/{}", key.replace('.', "/"));
            *file.pointer_mut(&pointer).ok_or_else(|| format!("{}: no field {key}", variant.name))? = value;
        }
    }
    Ok(serde_json::to_string(&file)?)
}

/// One variant's reference: `encode(text, false)` of every case (and `encode(text, true)`, with the
/// template's special tokens, of a short sentence and the first few), and of the corpus file as one text.
pub fn reference(tok: &Tokenizer, variant: &Variant, sha256: &str, corpus: (&str, &str)) -> Result<Value, Error> {
    let encode =
        |text: &str, special: bool| -> Result<Vec<u32>, Error> { Ok(tok.encode(text, special)?.get_ids().to_vec()) };
    let cases = CASES
        .iter()
        .chain(REAL_CASES)
        .map(|text| Ok(json!({"text": text, "ids": encode(text, false)?})))
        .collect::<Result<Vec<_>, Error>>()?;
    let with_special = [SHORT_CASE]
        .iter()
        .chain(&REAL_CASES[..3])
        .map(|text| Ok(json!({"text": text, "ids": encode(text, true)?})))
        .collect::<Result<Vec<_>, Error>>()?;
    let (file, text) = corpus;
    let ids = encode(text, false)?;
    Ok(json!({
        "name": variant.name,
        "file": variant.file,
        "sha256": sha256,
        "patch": (variant.patch)(),
        "cases": cases,
        "with_special_tokens": with_special,
        "corpus": {
            "file": file,
            "tokens": ids.len(),
            "first_ids": &ids[..ids.len().min(FIRST_IDS)],
            "checksum": checksum(&ids).to_string(),
        },
    }))
}
