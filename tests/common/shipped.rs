//! The shipped model and token ids for the language-model tests on the GPU (`tests/gpu_lm.rs`,
//! `tests/gpu_lm_paged.rs`), included by path where used (not through `common`, whose other users
//! do not need them).

use attention_lab::attention::inputs::SplitMix64;
use attention_lab::lm::checkpoint::Checkpoint;

pub fn shipped() -> Checkpoint {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/www/models/attention-lab-tiny");
    let config = std::fs::read_to_string(format!("{dir}/config.json")).expect("the shipped config");
    let weights = std::fs::read(format!("{dir}/model.safetensors")).expect("the shipped weights");
    Checkpoint::load(&config, &weights).expect("the shipped checkpoint loads")
}

/// Token ids spread over the vocabulary, the same for every run.
pub fn token_ids(tokens: usize, vocab: u32, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    (0..tokens).map(|_| (rng.next_signed_unit().abs() * vocab as f32) as u32 % vocab).collect()
}
