//! The Rust side of `shaders/include/flash_io.wgsl` (with `attention_io.wgsl` before it): the bindings
//! and buffers of both forward kernels, `flash_attention` and `flash_attention_subgroup`.

use crate::attention::AttentionShape;
use crate::gpu::launch::Binding;
use crate::model::Mask;

/// params, Q, K (`attention_io.wgsl`), V, O, lse (`flash_io.wgsl`).
pub const FLASH_BINDINGS: [Binding; 6] =
    [Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite, Binding::ReadWrite];

/// The buffers of one launch. Q/O are `[h_q, n_q, d_pad]`, K/V `[h_kv, kv_stride, d_pad]`, lse `[h_q, n_q]`.
pub struct FlashBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub o: &'a wgpu::Buffer,
    pub lse: &'a wgpu::Buffer,
}

impl<'a> FlashBuffers<'a> {
    /// The buffers in [`FLASH_BINDINGS`]' order, after the params.
    pub fn bound(&self) -> [&'a wgpu::Buffer; 5] {
        [self.q, self.k, self.v, self.o, self.lse]
    }
}

/// One launch of either forward kernel. `shape.d` is padded to a multiple of 4; K/V rows of KV head
/// `h` start at `h * kv_stride` (`kv_stride >= n_kv`, so a cache can grow in place).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlashLaunch {
    pub shape: AttentionShape,
    pub kv_stride: u32,
    pub mask: Mask,
    pub scale: f32,
}
