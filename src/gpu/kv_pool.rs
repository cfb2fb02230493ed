//! One pool of K/V pages on the GPU that requests share through page tables (the vLLM idea): K and
//! V each `[pages, h_kv, PAGE_TOKENS, d_pad]` f32, allocated once. A token's rows are written into a
//! page's slot with `queue.write_buffer`; a shared page a request must write into is copied first
//! (copy-on-write, a buffer-to-buffer copy on the GPU); `paged_attention.wgsl` reads through a table.
//! Which page holds what is kept by `model::paging` (pure, tested); this only holds the bytes.

use crate::cpu::kv_pool::{check_pages, check_write, floats_per_page, row_index};
use crate::gpu::launch;
use crate::gpu::{GpuContext, GpuError};
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, kernels_take_head_dim};

pub struct KvPool {
    pub(crate) k: wgpu::Buffer,
    pub(crate) v: wgpu::Buffer,
    /// One page of K and V on its way in a copy (WebGPU copies nothing within one buffer).
    page_scratch: wgpu::Buffer,
    h_kv: u32,
    d: u32,
    d_pad: u32,
    pages: u32,
}

impl KvPool {
    /// A pool of `pages` pages (the caller checks its bytes against the job limit first).
    pub fn new(ctx: &GpuContext, h_kv: u32, d: u32, pages: u32) -> Result<Self, GpuError> {
        if h_kv == 0 || d == 0 || !kernels_take_head_dim(d) || pages == 0 {
            return Err(GpuError::InvalidInput(format!(
                "a KV pool needs h_kv >= 1, 1 <= d <= {KERNEL_MAX_HEAD_DIM} and pages >= 1 (got {h_kv}, {d}, {pages})"
            )));
        }
        let d_pad = launch::padded_dim(d);
        let bytes = floats_per_page(h_kv, d_pad) as u64 * u64::from(pages) * 4;
        Ok(Self {
            k: ctx.storage_output("kv pool K", bytes)?,
            v: ctx.storage_output("kv pool V", bytes)?,
            page_scratch: ctx.storage_output("kv pool page copy", 2 * floats_per_page(h_kv, d_pad) as u64 * 4)?,
            h_kv,
            d,
            d_pad,
            pages,
        })
    }

    /// Writes one token's K and V rows (`[h_kv, d]` each) into slot `slot` of page `page`.
    pub fn write_token(
        &self,
        ctx: &GpuContext,
        page: u32,
        slot: u32,
        k_token: &[f32],
        v_token: &[f32],
    ) -> Result<(), GpuError> {
        check_write(self.h_kv, self.d, self.pages, page, slot, k_token.len(), v_token.len())
            .map_err(GpuError::InvalidInput)?;
        let (d, d_pad) = (self.d as usize, self.d_pad as usize);
        for h in 0..self.h_kv {
            let offset = (row_index(self.h_kv, page, h, slot) * d_pad * 4) as u64;
            let head = |x: &[f32]| launch::pad_rows(&x[h as usize * d..][..d], d, d_pad).into_owned();
            ctx.queue.write_buffer(&self.k, offset, bytemuck::cast_slice(&head(k_token)));
            ctx.queue.write_buffer(&self.v, offset, bytemuck::cast_slice(&head(v_token)));
        }
        Ok(())
    }

    /// Copies page `from` over page `to` on the GPU (copy-on-write of a shared page), through a
    /// scratch page: K and V out, then back in.
    pub fn copy_page(&self, ctx: &GpuContext, from: u32, to: u32) -> Result<(), GpuError> {
        check_pages(self.pages, &[from, to]).map_err(GpuError::InvalidInput)?;
        let bytes = floats_per_page(self.h_kv, self.d_pad) as u64 * 4;
        let mut encoder =
            ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("kv pool copy") });
        for (i, buffer) in [&self.k, &self.v].into_iter().enumerate() {
            encoder.copy_buffer_to_buffer(buffer, u64::from(from) * bytes, &self.page_scratch, i as u64 * bytes, bytes);
        }
        for (i, buffer) in [&self.k, &self.v].into_iter().enumerate() {
            encoder.copy_buffer_to_buffer(&self.page_scratch, i as u64 * bytes, buffer, u64::from(to) * bytes, bytes);
        }
        ctx.queue.submit([encoder.finish()]);
        Ok(())
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

    pub fn pages(&self) -> u32 {
        self.pages
    }
}
