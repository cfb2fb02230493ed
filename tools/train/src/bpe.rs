//! The tokenizer: byte-level BPE (GPT-2's byte alphabet and pre-tokenising regex) trained with the
//! `tokenizers` crate on the training split, saved as a standard `tokenizer.json`.
//!
//! The crate is built with `default-features = false, features = ["unstable_wasm"]`: fancy-regex
//! instead of the Oniguruma C library, the same features the wasm32 build of the app would use, so
//! the browser tokenises exactly as training did.

use std::path::Path;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use crate::corpus::END_OF_TEXT;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Trains a byte-level BPE of `vocab_size` entries (256 bytes, merges, and `<|endoftext|>`) on `texts`.
pub fn train<'a>(texts: impl Iterator<Item = &'a str> + Send, vocab_size: usize) -> Result<Tokenizer, Error> {
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false)));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    tokenizer.add_special_tokens(&[AddedToken::from(END_OF_TEXT, true)]);
    let trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(vec![AddedToken::from(END_OF_TEXT, true)])
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut trainer = TrainerWrapper::from(trainer);
    tokenizer.train(&mut trainer, texts)?;
    Ok(tokenizer)
}

pub fn load(path: &Path) -> Result<Tokenizer, Error> {
    Tokenizer::from_file(path)
}

/// Token ids of `text`, without special-token processing beyond the added `<|endoftext|>`.
pub fn encode(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>, Error> {
    Ok(tokenizer.encode(text, false)?.get_ids().to_vec())
}

pub fn decode(tokenizer: &Tokenizer, ids: &[u32]) -> Result<String, Error> {
    tokenizer.decode(ids, false)
}

pub fn end_of_text_id(tokenizer: &Tokenizer) -> Result<u32, Error> {
    tokenizer.token_to_id(END_OF_TEXT).ok_or_else(|| "tokenizer has no <|endoftext|>".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_text_code_and_unicode() {
        let corpus = "fn main() {\n    let s = String::from(\"hello\");\n}\nOwnership is Rust's most unique feature. ";
        let texts: Vec<String> = (0..20).map(|i| format!("{corpus}{i}")).collect();
        let tok = train(texts.iter().map(String::as_str), 300).unwrap();
        assert!(tok.get_vocab_size(true) <= 300);
        for text in ["fn main() {\n    println!(\"{}\", 1);\n}", "Ünïcödé → 🦀 and\ttabs  ", ""] {
            let ids = encode(&tok, text).unwrap();
            assert_eq!(decode(&tok, &ids).unwrap(), text);
        }
        let eot = end_of_text_id(&tok).unwrap();
        let ids = encode(&tok, &format!("a{END_OF_TEXT}b")).unwrap();
        assert!(ids.contains(&eot), "{ids:?}");
    }
}
