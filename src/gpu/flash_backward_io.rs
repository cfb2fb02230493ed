//! The Rust side of `shaders/include/flash_backward_io.wgsl` (with `attention_io.wgsl` before it): the
//! bindings and buffers of both backward kernels, `flash_backward` and `flash_backward_subgroup`.

use crate::attention::AttentionShape;
use crate::gpu::launch::Binding;

/// The widest head the backward takes: every invocation keeps four head-wide vectors per key (K, V,
/// dK, dV) in registers.
pub const BACKWARD_MAX_HEAD_DIM: u32 = 256;

/// Whether the backward kernels take heads `d` wide.
pub fn backward_takes_head_dim(d: u32) -> bool {
    (1..=BACKWARD_MAX_HEAD_DIM).contains(&d)
}

/// params, Q, K (`attention_io.wgsl`), V, dO, lse, D (written), grads (dQ, dK, dV), O: the bindings of
/// `main`; `key_grads` binds the first eight (no O).
pub const BACKWARD_BINDINGS: [Binding; 9] = {
    use Binding::{ReadOnly, ReadWrite, Uniform};
    [Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite, ReadOnly]
};

/// The buffers of one backward launch (rows padded to `d_pad`): Q, dO, O `[h_q, n_q, d_pad]`, K, V
/// `[h_kv, kv_stride, d_pad]`, lse and D `[h_q, n_q]`, and `grads` = dQ `[h_q, n_q, d_pad]` then dK and
/// dV `[h_kv, n_kv, d_pad]` each ([`grads_len`]).
pub struct BackwardBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub d_o: &'a wgpu::Buffer,
    pub lse: &'a wgpu::Buffer,
    pub delta: &'a wgpu::Buffer,
    pub grads: &'a wgpu::Buffer,
    pub o: &'a wgpu::Buffer,
}

/// Floats in the `grads` buffer of a launch of `shape` (its `d` padded).
pub fn grads_len(shape: &AttentionShape) -> u64 {
    (shape.q_len() + 2 * shape.kv_len()) as u64
}

impl<'a> BackwardBuffers<'a> {
    /// The buffers in [`BACKWARD_BINDINGS`]' order, after the params (`main`'s; `key_grads` takes the
    /// first seven).
    pub fn bound(&self) -> [&'a wgpu::Buffer; 8] {
        [self.q, self.k, self.v, self.d_o, self.lse, self.delta, self.grads, self.o]
    }
}
