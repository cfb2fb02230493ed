//! The GPU side: one device per page (or process), and one module per WGSL shader, same name (and per
//! shared piece of `shaders/include/` that has a Rust side: its params struct or bindings).
//!
//! Every kernel module implements [`kernel::Kernel`] (its name, WGSL text, bindings, `#[repr(C)]` params
//! struct, grid and CPU twin in `crate::cpu`) and launches through a [`kernel::Launcher`], which owns the
//! bind-group layout and pipelines. Pipelines are built once in [`Kernels::new`] and reused; the UI only
//! calls the async `run` functions.
//!
//! A new kernel is its `pub mod` line and one line in `every_kernel!` below (with its shader and its
//! CPU twin: CONTRIBUTING.md, "Adding a kernel").

/// Every kernel once (every entry point with bindings of its own): `kernels.rs` makes from this list
/// [`kernels::KERNELS`] (what `tests/kernel_names.rs` checks against the files) and [`Kernels`] (the
/// pipelines of one device). `held` kernels are built with the device, `lazy` ones on first use
/// (`kernels.name(ctx)`); `forms` are reached through another kernel's owner (a faster form, a second
/// entry point), so they are listed but not held; `builds` are other builds of listed kernels (the
/// traced forward), held and built on first use but not listed again.
macro_rules! every_kernel {
    ($make:ident) => {
        $make! {
            held {
                flash: crate::gpu::flash_attention::FlashAttention,
                probs: crate::gpu::attention_probs::AttentionProbs,
                rows: crate::gpu::row_softmax::RowSoftmax,
                pool_rows: crate::gpu::pool_rows::PoolRows,
                naive: crate::gpu::naive_attention::NaiveAttention,
                /// Decode over a paged K/V pool, through a page table.
                paged: crate::gpu::paged_attention::PagedAttention,
                /// Attention over an evicting cache's kept keys (the memory view's policies).
                kept: crate::gpu::kept_attention::KeptAttention,
                fma_peak: crate::gpu::fma_peak::FmaPeak,
                /// The language model's steps besides attention (`lm_forward` composes them with the above).
                embed_gather: crate::gpu::embed_gather::EmbedGather,
                rms_norm: crate::gpu::rms_norm::RmsNorm,
                qk_norm: crate::gpu::qk_norm::QkNorm,
                matmul: crate::gpu::matmul::Matmul,
                rope: crate::gpu::rope::Rope,
                swiglu: crate::gpu::swiglu::Swiglu,
                /// f16 / bf16 weights to f32 while a user's checkpoint streams in.
                widen: crate::gpu::widen::Widen,
                /// K and V rounded to a quantised cache's values (the memory view's schemes).
                kv_quant: crate::gpu::kv_quant::KvQuant,
                /// K and V quantised into a packed cache (Generate's quantised decode cache).
                kv_pack: crate::gpu::kv_pack::KvPack,
                /// Attention over a packed cache, dequantising as it reads.
                packed: crate::gpu::packed_attention::PackedAttention,
            }
            lazy {
                /// Each head's attention mass by distance (the distance view), from Q, K and the log-sum-exp.
                distance_mass: crate::gpu::distance_mass::DistanceMass,
                /// The backward pass (dQ, dK, dV from dO): a page that never asks for gradients compiles none
                /// of its shaders.
                backward: crate::gpu::flash_backward::FlashBackward,
            }
            forms {
                crate::gpu::flash_attention_subgroup::FlashSubgroup,
                crate::gpu::flash_attention_coop::FlashAttentionCoop,
                crate::gpu::paged_attention_subgroup::PagedSubgroup,
                crate::gpu::flash_backward::FlashBackwardKeys,
                crate::gpu::flash_backward_subgroup::FlashBackwardSubgroup,
                crate::gpu::flash_backward_subgroup::FlashBackwardSubgroupKeys,
                crate::gpu::matmul_subgroup::MatmulSubgroup,
                crate::gpu::rope::MergeHeads,
                crate::gpu::packed_attention::PackedCombine,
                crate::gpu::row_softmax_subgroup::RowSoftmaxSubgroup,
            }
            builds {
                /// The forward kernels' traced build (lesson 11's online softmax), for a page that asks.
                tracer: crate::gpu::flash_trace::FlashTracer,
            }
        }
    };
}

pub mod attention_io;
pub mod attention_probs;
pub mod bench;
pub mod bench_lm;
pub mod bench_packed;
pub mod bench_paged;
pub mod context;
pub mod distance_mass;
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
