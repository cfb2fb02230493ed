//! A real language model's pieces, platform-free: its tokenizer (BPE read from `tokenizer.json`),
//! its checkpoint read from the files a Hugging Face model ships (`config.json`, `model.safetensors`), its CPU forward pass (logits and every head's attention), the reference for
//! the GPU, and what each head's attention measures on a text.

pub mod backward;
mod backward_ops;
pub mod bpe;
mod bpe_file;
pub mod bpe_reader;
mod bpe_scan;
pub mod checkpoint;
pub mod forward;
pub mod grad_step;
pub mod head_scores;
pub mod kv_quality;
pub mod model_config;
pub mod next_token;
mod normalize;
pub mod pre_tokenize;
pub mod safetensors;
mod spelling;
mod unicode_classes;
pub mod weight_plan;

#[cfg(test)]
mod backward_tests;
#[cfg(test)]
mod bpe_real_tests;
#[cfg(test)]
mod bpe_tests;
#[cfg(test)]
mod forward_tests;
#[cfg(test)]
mod model_config_tests;
#[cfg(test)]
pub(crate) mod shipped_model;

/// Why a checkpoint or an input cannot be used, in words for the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LmError(pub String);

impl std::fmt::Display for LmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LmError {}
