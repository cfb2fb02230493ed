//! The decode animation's model: the lanes (one per layer kind) and what each token appends and asks,
//! the script run step by step against the engine, the check against the f64 reference, and every
//! text and cell the panel shows. The component in `ui/decode_demo.rs` only drives the loop (timers,
//! Stop) and binds the [`snapshot::Snapshot`] to the page.

pub mod check;
pub mod lanes;
pub mod pace;
pub mod run;
pub mod snapshot;
pub mod text;
