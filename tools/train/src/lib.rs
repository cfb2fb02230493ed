//! Attention Lab's training tools: extract the corpus, train the tokenizer, train and export the model.

pub mod bpe;
pub mod corpus;
pub mod export;
pub mod model;
pub mod rng;
pub mod softmax;
pub mod tokenizer_reference;
pub mod train;
