//! Attention on the CPU: masks, inputs, and the f64 reference every GPU kernel is checked against.
//!
//! The heatmap explorer's pure parts live here too: [`tokens`] (word, character and generated tokens),
//! [`rope`], [`teaching_heads`] (designed heads with known patterns), [`layer_inputs`] (every head of a
//! real model's layer, seeded), [`tiles`] (which tiles the kernel visits or skips), [`step_through`]
//! (one head's arithmetic step by step), [`head_map`] (one head's picture and read-out), [`npy`] (NumPy export) and [`explore`] (link parameters, batches).

pub mod inputs;
pub mod layer_inputs;
pub mod mask;
pub mod pooled;
pub mod reference;
pub mod rope;
pub mod shape;
pub mod teaching_heads;
pub mod tiles;
pub mod tokens;

pub use mask::Mask;
pub use shape::AttentionShape;
