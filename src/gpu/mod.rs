//! The GPU side: one device per page (or process), and one module per WGSL shader, same name.
//!
//! Every kernel module owns its pipeline, bind-group layout and `#[repr(C)]` params struct. Pipelines are
//! built once in [`Kernels::new`] and reused; the UI only calls the async `run` functions.

pub mod context;

pub use context::{AdapterSummary, GpuContext, GpuError};
