//! The Rust side of `shaders/include/flash_backward_io.wgsl` (with `attention_io.wgsl` before it): the
//! bindings and buffers of both backward kernels, `flash_backward` and `flash_backward_subgroup`.

use crate::attention::AttentionShape;
use crate::gpu::flash_tiles::ROWS_MAX_BYTES;
use crate::gpu::launch::Binding;
use crate::model::limits::KERNEL_MAX_HEAD_DIM;

/// The widest head the backward takes: the forward's widest. Past 256 only the plain form runs,
/// holding in registers what fits (see [`BackwardHolds`]).
pub const BACKWARD_MAX_HEAD_DIM: u32 = KERNEL_MAX_HEAD_DIM;

/// Whether the backward kernels take heads `d` wide.
pub fn backward_takes_head_dim(d: u32) -> bool {
    (1..=BACKWARD_MAX_HEAD_DIM).contains(&d)
}

/// What an invocation of the plain form keeps in registers, within the forward's budget for them
/// ([`ROWS_MAX_BYTES`]; WGSL allows 8 KiB of variables per function): the shader's `ROW_REGS`,
/// `KEY_REGS`, and whether `key_grads` runs once for dK and dV or once for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackwardHolds {
    /// `main` keeps Q and dO of its rows (else it re-reads them at every key).
    pub row_vectors: bool,
    /// `key_grads` keeps K and V of its keys (else it re-reads them at every row).
    pub key_vectors: bool,
    /// `key_grads` keeps dK and dV together; if not, one launch computes dK and another dV.
    pub both_key_grads: bool,
}

impl BackwardHolds {
    /// For heads `d_pad` wide and `per` rows (keys) per invocation. Every head up to 384 wide keeps
    /// everything (dQ, Q, dO: three vectors a row; K, V, dK, dV: four a key).
    pub fn choose(d_pad: u32, per: u32) -> Self {
        let fits = |vectors: u32| vectors * per * d_pad * 4 <= ROWS_MAX_BYTES;
        let key_vectors = fits(4);
        Self { row_vectors: fits(3), key_vectors, both_key_grads: key_vectors || fits(2) }
    }

    /// The shader constants, for `key_grads` launch `part` (0: the only one, or dK; 1: dV).
    pub fn constants(self, part: u32) -> [(&'static str, u32); 4] {
        let (dk, dv) = if self.both_key_grads { (true, true) } else { (part == 0, part == 1) };
        [
            ("ROW_REGS", u32::from(self.row_vectors)),
            ("KEY_REGS", u32::from(self.key_vectors)),
            ("KEEP_DK", u32::from(dk)),
            ("KEEP_DV", u32::from(dv)),
        ]
    }

    /// Launches of `key_grads`.
    pub fn key_launches(self) -> u32 {
        if self.both_key_grads { 1 } else { 2 }
    }
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
