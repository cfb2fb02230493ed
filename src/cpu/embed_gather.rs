//! Twin of `shaders/embed_gather.wgsl`: the embedding rows of a list of token ids.

/// Twin of `embed_gather.wgsl`: the rows of `embed` (each `d` wide) of the tokens `ids` (each below
/// the vocabulary) times `scale`, `[tokens, d]`.
pub fn embed_gather(embed: &[f32], ids: &[u32], d: usize, scale: f32) -> Vec<f32> {
    ids.iter().flat_map(|&id| embed[id as usize * d..][..d].iter().map(move |&v| v * scale)).collect()
}
