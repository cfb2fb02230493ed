//! A K/V cache that lives on the GPU and grows in place, one token per decode step.
//!
//! The buffers are allocated once for `capacity_tokens`; each step writes one token's K and V rows with
//! `queue.write_buffer` (no re-upload of the past) and runs attention of one query per head over the
//! current length (see [`crate::gpu::Kernels::decode`]). A UI keeps the cache across steps.

use crate::gpu::launch;
use crate::gpu::{GpuContext, GpuError};
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, kernels_take_head_dim};

/// K and V as `[h_kv, capacity_tokens, d_pad]` f32 buffers, the first `len_tokens` rows of each head valid.
pub struct KvCache {
    pub(crate) k: wgpu::Buffer,
    pub(crate) v: wgpu::Buffer,
    h_kv: u32,
    d: u32,
    d_pad: u32,
    capacity_tokens: u32,
    len_tokens: u32,
}

impl KvCache {
    pub fn new(ctx: &GpuContext, h_kv: u32, d: u32, capacity_tokens: u32) -> Result<Self, GpuError> {
        if h_kv == 0 || d == 0 || !kernels_take_head_dim(d) || capacity_tokens == 0 {
            return Err(GpuError::InvalidInput(format!(
                "a KV cache needs h_kv >= 1, 1 <= d <= {KERNEL_MAX_HEAD_DIM} and capacity >= 1 (got {h_kv}, {d}, {capacity_tokens})"
            )));
        }
        let d_pad = launch::padded_dim(d);
        let bytes = u64::from(h_kv) * u64::from(capacity_tokens) * u64::from(d_pad) * 4;
        Ok(Self {
            k: ctx.storage_output("kv cache K", bytes)?,
            v: ctx.storage_output("kv cache V", bytes)?,
            h_kv,
            d,
            d_pad,
            capacity_tokens,
            len_tokens: 0,
        })
    }

    /// Appends one token: `k_token` and `v_token` are `[h_kv, d]`.
    pub fn append(&mut self, ctx: &GpuContext, k_token: &[f32], v_token: &[f32]) -> Result<(), GpuError> {
        let want = (self.h_kv * self.d) as usize;
        if k_token.len() != want || v_token.len() != want {
            return Err(GpuError::InvalidInput(format!("one token's K and V must hold h_kv * d = {want} values")));
        }
        if self.len_tokens >= self.capacity_tokens {
            return Err(GpuError::LimitExceeded(format!("the KV cache is full ({} tokens)", self.capacity_tokens)));
        }
        let (d, d_pad) = (self.d as usize, self.d_pad as usize);
        for h in 0..self.h_kv {
            let row = u64::from(h) * u64::from(self.capacity_tokens) + u64::from(self.len_tokens);
            let offset = row * u64::from(self.d_pad) * 4;
            let head = |x: &[f32]| launch::pad_rows(&x[h as usize * d..][..d], d, d_pad).into_owned();
            ctx.queue.write_buffer(&self.k, offset, bytemuck::cast_slice(&head(k_token)));
            ctx.queue.write_buffer(&self.v, offset, bytemuck::cast_slice(&head(v_token)));
        }
        self.len_tokens += 1;
        Ok(())
    }

    /// Forgets every token (the buffers stay allocated).
    pub fn clear(&mut self) {
        self.len_tokens = 0;
    }

    pub fn len_tokens(&self) -> u32 {
        self.len_tokens
    }

    pub fn is_empty(&self) -> bool {
        self.len_tokens == 0
    }

    pub fn capacity_tokens(&self) -> u32 {
        self.capacity_tokens
    }

    pub fn h_kv(&self) -> u32 {
        self.h_kv
    }

    pub fn d(&self) -> u32 {
        self.d
    }

    pub(crate) fn d_pad(&self) -> u32 {
        self.d_pad
    }
}
