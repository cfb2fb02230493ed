//! The paged K/V pool where the engine keeps it (beside `engine.rs`, whose jobs it adds to): [`KvPool`] on the GPU, or its twin [`CpuKvPool`]
//! on the CPU tier, and the one entry point a decode step goes through: write the token's K and V
//! rows where the pool's books say (copying a shared page first), then attend through the request's
//! page table. Which page is which is planned by the caller with `model::paging::PagedCache`.

use crate::attention::AttentionShape;
use crate::cpu::kv_pool::{CpuKvPool, floats_per_page};
use crate::cpu::paged_attention::{PagedProblem, paged_attention};
use crate::cpu::reference::Forward;
use crate::engine::{Engine, GPU_CACHE_ON_CPU, Job, check_cpu_size};
use crate::gpu::kernels::PagedStep;
use crate::gpu::{GpuContext, Kernels, KvPool};
use crate::model::Mask;
use crate::model::limits::{JOB_MAX_BYTES, check_job_bytes};
use crate::model::paging::PageWrite;
use std::cell::RefCell;

/// The CPU pool sits in a `RefCell` so a step can write into it through the shared reference a
/// job runs by (the CPU tier never awaits while it is borrowed).
pub enum DecodePool {
    Gpu(KvPool),
    Cpu(RefCell<CpuKvPool>),
}

impl DecodePool {
    pub fn pages(&self) -> u32 {
        match self {
            DecodePool::Gpu(p) => p.pages(),
            DecodePool::Cpu(p) => p.borrow().pages(),
        }
    }

    /// Bytes of K and V one page holds (f32, unpadded): what a live page costs.
    pub fn page_bytes(&self) -> u64 {
        let (h_kv, d) = match self {
            DecodePool::Gpu(p) => (p.h_kv(), p.d()),
            DecodePool::Cpu(p) => (p.borrow().h_kv(), p.borrow().d()),
        };
        pool_bytes(h_kv, d, 1)
    }
}

/// Bytes of K and V in a pool of `pages` pages of `h_kv` heads of `d` (f32).
pub fn pool_bytes(h_kv: u32, d: u32, pages: u32) -> u64 {
    2 * 4 * (floats_per_page(h_kv, d) as u64).saturating_mul(u64::from(pages))
}

/// One token of one request: where its K and V rows go, and the query it attends with over the
/// request's `n_kv` tokens (the new one included) through `table`.
pub struct PoolStep<'a> {
    pub write: PageWrite,
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub table: &'a [u32],
    pub n_kv: u32,
    pub q: &'a [f32],
    pub h_q: u32,
    pub mask: Mask,
    pub scale: f32,
}

impl Engine {
    /// An empty pool of `pages` pages, its bytes checked against the job limit before it is made.
    pub fn kv_pool(&self, h_kv: u32, d: u32, pages: u32) -> Result<DecodePool, String> {
        check_job_bytes(pool_bytes(h_kv, d, pages), JOB_MAX_BYTES).map_err(|e| format!("The K/V pool {e}"))?;
        self.run_now(&NewPool { h_kv, d, pages })
    }

    /// One decode step over the pool: the token's rows written as planned, then the paged kernel.
    pub async fn paged_decode_step(&self, pool: &DecodePool, step: &PoolStep<'_>) -> Result<Forward, String> {
        self.run(&PagedDecode { pool, step }).await
    }
}

struct NewPool {
    h_kv: u32,
    d: u32,
    pages: u32,
}

impl Job for NewPool {
    type Output = DecodePool;

    fn fits_gpu(&self) -> bool {
        true
    }

    async fn on_gpu(&self, ctx: &GpuContext, _: &Kernels) -> Result<DecodePool, String> {
        KvPool::new(ctx, self.h_kv, self.d, self.pages).map(DecodePool::Gpu).map_err(|e| e.to_string())
    }

    async fn on_cpu(&self, _: bool) -> Result<DecodePool, String> {
        CpuKvPool::new(self.h_kv, self.d, self.pages).map(|p| DecodePool::Cpu(RefCell::new(p)))
    }
}

/// [`Engine::paged_decode_step`].
struct PagedDecode<'a> {
    pool: &'a DecodePool,
    step: &'a PoolStep<'a>,
}

fn page_index(page: usize) -> Result<u32, String> {
    u32::try_from(page).map_err(|_| format!("page {page} is past any pool"))
}

impl Job for PagedDecode<'_> {
    type Output = Forward;

    fn fits_gpu(&self) -> bool {
        matches!(self.pool, DecodePool::Gpu(_))
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Forward, String> {
        let s = self.step;
        let DecodePool::Gpu(pool) = self.pool else { return Err("the pool is not on the GPU".into()) };
        let (page, slot) = (page_index(s.write.page)?, s.write.slot as u32);
        if let Some(from) = s.write.copy_from {
            pool.copy_page(ctx, page_index(from)?, page).map_err(|e| e.to_string())?;
        }
        pool.write_token(ctx, page, slot, s.k, s.v).map_err(|e| e.to_string())?;
        let step = PagedStep { pool, table: s.table, n_kv: s.n_kv, q: s.q, h_q: s.h_q, mask: s.mask, scale: s.scale };
        kernels.paged_decode(ctx, &step).await.map_err(|e| e.to_string())
    }

    async fn on_cpu(&self, _: bool) -> Result<Forward, String> {
        let s = self.step;
        let DecodePool::Cpu(pool) = self.pool else { return Err(GPU_CACHE_ON_CPU.into()) };
        let mut pool = pool.borrow_mut();
        let shape = AttentionShape { h_q: s.h_q, h_kv: pool.h_kv(), n_q: 1, n_kv: s.n_kv, d: pool.d() };
        check_cpu_size(shape)?;
        let (page, slot) = (page_index(s.write.page)?, s.write.slot as u32);
        if let Some(from) = s.write.copy_from {
            pool.copy_page(page_index(from)?, page)?;
        }
        pool.write_token(page, slot, s.k, s.v)?;
        let problem = PagedProblem {
            q: s.q,
            k_pool: pool.keys(),
            v_pool: pool.values(),
            table: s.table,
            shape,
            mask: s.mask,
            scale: s.scale,
        };
        paged_attention(&problem)
    }
}
