//! Attention Lab's training tools: extract the corpus, train the tokenizer, train and export the model,
//! then measure it and write the references the app's forward pass is tested against.

pub mod adamw;
pub mod bpe;
pub mod checkpoint;
pub mod control;
pub mod corpus;
pub mod export;
pub mod fixtures;
pub mod mla;
pub mod model;
pub mod quality;
pub mod real_tokenizer_reference;
pub mod reference;
pub mod rng;
pub mod softmax;
pub mod tokenizer_reference;
pub mod train;
pub mod variants;
