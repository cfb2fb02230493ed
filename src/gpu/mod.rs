//! The GPU side: one device per page (or process), and one module per WGSL shader, same name (and per
//! shared piece of `shaders/include/` that has a Rust side: its params struct or bindings).
//!
//! Every kernel module implements [`kernel::Kernel`] (its name, WGSL text, bindings, `#[repr(C)]` params
//! struct, grid and CPU twin in `crate::cpu`) and launches through a [`kernel::Launcher`], which owns the
//! bind-group layout and pipelines. Pipelines are built once in [`Kernels::new`] and reused; the UI only
//! calls the async `run` functions.

pub mod attention_io;
pub mod attention_probs;
pub mod bench;
pub mod bench_lm;
pub mod bench_packed;
pub mod bench_paged;
pub mod context;
pub mod embed_gather;
pub mod flash_attention;
pub mod flash_attention_coop;
pub mod flash_attention_subgroup;
pub mod flash_backward;
pub mod flash_backward_io;
pub mod flash_backward_subgroup;
pub mod flash_io;
pub mod flash_tiles;
pub mod flash_trace;
pub mod fma_peak;
pub mod kept_attention;
pub mod kernel;
pub mod kernels;
pub mod kv_cache;
pub mod kv_pack;
pub mod kv_pool;
pub mod kv_quant;
pub mod launch;
pub mod lm_forward;
pub mod lm_stream;
pub mod lm_weights;
pub mod matmul;
pub mod matmul_io;
pub mod matmul_subgroup;
pub mod matrix_units;
pub mod naive_attention;
pub mod packed_attention;
pub mod paged_attention;
pub mod paged_attention_subgroup;
pub mod pool_rows;
pub mod qk_norm;
pub mod rms_norm;
pub mod rope;
pub mod row_softmax;
pub mod row_softmax_subgroup;
pub mod shader_text;
pub mod subgroup_form;
pub mod swiglu;
#[cfg(target_arch = "wasm32")]
pub mod web_subgroups;
pub mod widen;

pub use context::{AdapterSummary, GpuContext, GpuError};
pub use kernels::{Kernels, Pool, PooledMap, ProbRegion};
pub use kv_cache::KvCache;
pub use kv_pool::KvPool;
pub use lm_forward::{LmOutput, LmRequest, LmWeights};
