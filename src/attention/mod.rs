//! The vocabulary of an attention problem and its CPU side, shared by the GPU kernels and the views:
//! [`shape`] (with the mask of `model::mask`: which keys a query sees) and [`pooled`] (how heatmap
//! cells pool), and the inputs (the kernels' f64 CPU twins sit one floor up, in `crate::cpu`):
//! [`tokens`] (word, character and generated tokens), [`inputs`] (seeded embeddings and projections),
//! [`rope`], [`teaching_heads`] (designed heads with known patterns), [`layer_inputs`] (every head of
//! a real model's layer) and [`tiles`] (which tiles the tiled kernel visits or skips).

pub mod inputs;
pub mod layer_inputs;
pub mod pooled;
pub mod problem;
pub mod rope;
pub mod shape;
pub mod teaching_heads;
pub mod tiles;
pub mod tokens;

pub use problem::AttentionProblem;
pub use shape::AttentionShape;
