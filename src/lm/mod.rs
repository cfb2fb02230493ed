//! A real language model's pieces: tokenizer, checkpoint, forward pass.

pub mod bpe;

#[cfg(test)]
mod bpe_tests;
