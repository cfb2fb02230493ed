//! The CPU twin of every kernel, one file each, named after it (as vello's `cpu/<stage>.rs`):
//! `shaders/<name>.wgsl`, its owner `src/gpu/<name>.rs` and `src/cpu/<name>.rs` with `pub fn <name>`.
//! f64 where it sums, slow, obvious: the yardstick every kernel is tested against, the CPU tier's
//! attention when the browser has no WebGPU (small sizes only), and the steps of the language model's
//! CPU forward pass (`lm::forward`). Platform-free: no wgpu, no web-sys.
//!
//! Each kernel's `Kernel::CPU_TWIN` says which twin it has; kernels that compute the same thing by
//! another route share one:
//!
//! | kernel (`shaders/*.wgsl`)                                          | CPU twin            |
//! |-------------------------------------------------------------------|---------------------|
//! | `flash_attention`, `flash_attention_subgroup`, `naive_attention`  | [`flash_attention`] |
//! | `flash_attention_coop` (matrix units: f16 inputs, f32 sums)        | [`flash_attention_coop`] |
//! | `row_softmax`, `row_softmax_subgroup`, `attention_probs` (region) | [`row_softmax`]     |
//! | `pool_rows`, `attention_probs` (pooled)                           | [`pool_rows`]       |
//! | `flash_backward` (`main`: D, dQ; `key_grads`: dK, dV)             | [`flash_backward`]  |
//! | `flash_backward_subgroup` (the same passes, loads shuffled)       | [`flash_backward`]  |
//! | `paged_attention` (K/V read through a page table from one pool)    | [`paged_attention`] |
//! | `paged_attention_subgroup` (the same, loads shuffled)              | [`paged_attention`] |
//! | `distance_mass` (each head's attention mass by distance, from lse) | [`distance_mass`]   |
//! | `fma_peak` (a throughput probe: nothing to mirror)                | none                |
//!
//! The language model's other steps (`src/gpu/lm_forward.rs`):
//!
//! | kernel (`shaders/*.wgsl`)                                            | CPU twin                 |
//! |----------------------------------------------------------------------|--------------------------|
//! | `embed_gather`                                                       | [`embed_gather`]         |
//! | `rms_norm`                                                           | [`rms_norm`]             |
//! | `qk_norm` (in place, each query and key head of the fused Q/K/V)     | [`qk_norm`]              |
//! | `matmul` (`tiled`, `direct`), `matmul_subgroup` (`accumulate`: Y +=) | [`matmul`]               |
//! | `rope` (`split_heads` rotates and moves heads, `merge_heads`)        | [`rope`] (the rotation)  |
//! | `swiglu`                                                             | [`swiglu`]               |
//! | `widen` (f16 / bf16 weights to f32 while a checkpoint streams in)    | [`widen`]                |
//! | `kv_quant` (K and V rounded in place to a quantised cache's values)  | [`kv_quant`]             |
//! | `kept_attention` (each query over its evicting cache's kept keys)    | [`kept_attention`]       |
//! | `kv_pack` (K and V quantised into a packed cache, the scheme's bits) | [`kv_pack`]              |
//! | `packed_attention` (attention dequantising the packed cache it reads) | [`packed_attention`]     |
//!
//! Besides the kernels, [`kv_cache`] is the twin of `gpu/kv_cache.rs` (the decode cache in plain memory),
//! [`kv_pool`] that of `gpu/kv_pool.rs` (the paged pool, laid out as `paged_attention` reads it),
//! [`flash_trace`] that of the forward kernels' traced build (`gpu/flash_trace.rs`: every row's online
//! softmax, step by step), and [`reference`] names the attention twins as the engine and the views call them.

pub mod distance_mass;
pub mod embed_gather;
pub mod flash_attention;
pub mod flash_attention_coop;
pub mod flash_backward;
pub mod flash_trace;
pub mod kept_attention;
pub mod kv_cache;
pub mod kv_pack;
pub mod kv_pool;
pub mod kv_quant;
pub mod matmul;
pub mod packed_attention;
pub mod paged_attention;
pub mod pool_rows;
pub mod qk_norm;
pub mod reference;
pub mod rms_norm;
pub mod rope;
pub mod row_softmax;
mod scores;
pub mod swiglu;
pub mod widen;

#[cfg(test)]
mod tests {
    #[test]
    fn every_kernel_is_in_the_twin_table() {
        let table = include_str!("mod.rs");
        let shaders = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders")).unwrap();
        for entry in shaders {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "wgsl") {
                let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
                assert!(table.contains(&format!("`{name}`")), "{name}.wgsl has no row in the CPU twin table");
            }
        }
    }
}
