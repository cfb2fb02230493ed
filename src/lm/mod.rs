//! A real language model's pieces: tokenizer, checkpoint, forward pass.

pub mod bpe;
mod unicode_classes;

#[cfg(test)]
mod bpe_tests;
