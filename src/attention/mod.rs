//! Attention on the CPU: masks, inputs, and the f64 reference every GPU kernel is checked against.

pub mod inputs;
pub mod mask;
pub mod reference;
pub mod shape;

pub use mask::Mask;
pub use shape::AttentionShape;
