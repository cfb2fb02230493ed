//! The shipped model's files (`www/models/attention-lab-tiny/`) for the tests that measure it.

use super::bpe::Tokenizer;
use super::checkpoint::Checkpoint;

/// One file of the shipped model, as bytes.
pub(crate) fn shipped_file(name: &str) -> Vec<u8> {
    let path = format!("{}/www/models/attention-lab-tiny/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Its `config.json`.
pub(crate) fn shipped_config() -> String {
    String::from_utf8(shipped_file("config.json")).unwrap()
}

/// The model, loaded as the page loads it.
pub(crate) fn shipped() -> Checkpoint {
    Checkpoint::load(&shipped_config(), &shipped_file("model.safetensors")).unwrap()
}

/// Its tokenizer.
pub(crate) fn shipped_tokenizer() -> Tokenizer {
    Tokenizer::from_json(&String::from_utf8(shipped_file("tokenizer.json")).unwrap()).unwrap()
}
