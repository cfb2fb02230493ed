//! Generate's f32 KV cache as pages of one pool (the vLLM idea): every layer's K and V rows live in
//! pages of [`PAGE_TOKENS`] tokens of one [`KvPool`], and each layer's attention reads them through
//! its page table with `paged_attention` (the KV view's demo kernel). The books are
//! `model::paging`'s [`PagedCache`], one per layer over its own share of the pool's pages (as many
//! as the layer ever holds at once, [`pages_to_hold`]): a page is taken as the text reaches it; a
//! sliding layer drops the pages its window has left behind and takes them again for new tokens (a
//! ring of its window's pages and one more); [`LmPagedCache::release`] gives every page back.
//!
//! A pass into an empty cache (the prompt's prefill) attends over its own K and V, as a prefill
//! does, and copies the rows the windows still hold into their pages; every later pass reads K and V
//! through the page tables.

use super::{CacheView, LmRequest, LmWeights, Passing, PreparedLm, prepare_pass, room_for};
use crate::attention::AttentionShape;
use crate::cpu::kv_pool::{floats_per_page, row_index};
use crate::gpu::flash_io::FlashBuffers;
use crate::gpu::launch::Dispatch;
use crate::gpu::lm_weights::check_sizes;
use crate::gpu::paged_attention::PagedLaunch;
use crate::gpu::{GpuContext, GpuError, Kernels, KvPool};
use crate::model::Mask;
use crate::model::kv_quant::KvScheme;
use crate::model::paging::{PAGE_TOKENS, PagedCache, PoolUse, pages_to_hold};
use crate::model::schedule::LayerKind;

/// A KV cache for decoding whose rows sit in pages of one pool, found through each layer's page table.
pub struct LmPagedCache {
    pool: KvPool,
    /// Per layer: its books (one request, the text) and its first page in the pool.
    layers: Vec<LayerPages>,
    /// Per layer, its page table as the kernel reads it: made once, for the longest table the
    /// capacity allows, and rewritten before each pass that reads it.
    tables: Vec<wgpu::Buffer>,
    capacity: u32,
    len: u32,
}

#[derive(Clone)]
struct LayerPages {
    books: PagedCache,
    first_page: u32,
}

/// What one pass writes into the pool and how its attention reads it.
pub(super) struct PagedView {
    /// Per layer: the page table as the kernel reads it (pool pages), and the runs of new rows to copy.
    tables: Vec<(wgpu::Buffer, u32)>,
    runs: Vec<Vec<RowRun>>,
    pool_pages: u32,
    /// The first pass into an empty cache attends over its own K and V.
    pub(super) own_rows: bool,
}

/// New tokens `first..first + tokens` of a pass, in consecutive slots of one pool page from `slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RowRun {
    first: u32,
    tokens: u32,
    page: u32,
    slot: u32,
}

impl LmPagedCache {
    /// An empty cache for `capacity` tokens of `weights`' model: one pool of every layer's pages,
    /// its bytes checked against the job and binding limits before it is made.
    pub fn new(ctx: &GpuContext, weights: &LmWeights, capacity: u32) -> Result<Self, GpuError> {
        let g = weights.geometry;
        let kinds: Vec<LayerKind> = weights.masks().into_iter().map(layer_kind).collect();
        let shares: Vec<u64> = kinds.iter().map(|&kind| pages_to_hold(kind, capacity.into())).collect();
        let pages = shares.iter().fold(0u64, |sum, &p| sum.saturating_add(p));
        let per_page = floats_per_page(g.h_kv, g.head_dim) as u64;
        let floats = per_page.saturating_mul(pages);
        let buffers = [("KV pool K", floats), ("KV pool V", floats), ("KV pool page copy", 2 * per_page)];
        check_sizes(ctx, &format!("A paged KV cache of {capacity} tokens"), &buffers)?;
        let pages = u32::try_from(pages).map_err(|_| GpuError::LimitExceeded(format!("{pages} pages")))?;
        let pool = KvPool::new(ctx, g.h_kv, g.head_dim, pages)?;
        let mut first_page = 0;
        let mut layers = Vec::with_capacity(kinds.len());
        for (kind, share) in kinds.into_iter().zip(shares) {
            layers.push(LayerPages { books: fresh_books(kind, share as usize), first_page });
            first_page += share as u32;
        }
        let table_bytes = u64::from(capacity).div_ceil(PAGE_TOKENS).max(1) * 4;
        let tables =
            (0..layers.len()).map(|_| ctx.storage_output("page table", table_bytes)).collect::<Result<_, _>>()?;
        Ok(Self { pool, layers, tables, capacity, len: 0 })
    }

    /// Tokens cached so far.
    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pool's pages, those in use and what they hold (from the books and the pool itself).
    pub fn usage(&self) -> PoolUse {
        let books = || self.layers.iter().map(|l| &l.books);
        PoolUse {
            pages: u64::from(self.pool.pages()),
            live_pages: books().map(|b| b.live_pages() as u64).sum(),
            page_bytes: 2 * 4 * floats_per_page(self.pool.h_kv(), self.pool.d()) as u64,
            recycled_pages: books().map(|b| b.recycled_pages).sum(),
            tokens: u64::from(self.len),
        }
    }

    /// Every page back to the pool: each layer's books start again, every page free, and the pool
    /// can hold another text. (Generate makes one pool a run and drops it with its decoder; tests use
    /// this to check that freed pages are taken again.)
    pub fn release(&mut self) {
        for layer in &mut self.layers {
            layer.books = fresh_books(layer.books.kind, layer.books.capacity_pages());
        }
        self.len = 0;
    }

    /// Plans a pass of `tokens` more tokens: each layer's books after it (committed once the pass has
    /// run), and the view the pass reads. Refused, changing nothing, where a pass of several tokens
    /// into a cache that already holds some would drop a page its first queries still read.
    fn plan(
        &self,
        ctx: &GpuContext,
        weights: &LmWeights,
        tokens: u32,
    ) -> Result<(Vec<LayerPages>, CacheView), GpuError> {
        let g = weights.geometry;
        let fits = (self.pool.h_kv(), self.pool.d(), self.layers.len()) == (g.h_kv, g.head_dim, g.layers as usize);
        if !fits {
            return Err(GpuError::InvalidInput("this paged KV cache was made for another model".into()));
        }
        let (start, own_rows) = (u64::from(self.len), self.len == 0);
        let mut after = self.layers.clone();
        let mut runs = Vec::with_capacity(after.len());
        for layer in &mut after {
            runs.push(write_rows(layer, start, tokens).map_err(GpuError::LimitExceeded)?);
            if !own_rows {
                check_reads(&layer.books, start, tokens).map_err(GpuError::InvalidInput)?;
            }
        }
        // The first pass attends over its own rows and reads no table.
        let mut tables = Vec::with_capacity(if own_rows { 0 } else { after.len() });
        for (layer, buffer) in after.iter().zip(&self.tables).filter(|_| !own_rows) {
            let table: Vec<u32> = layer.books.kernel_table(0).iter().map(|p| p + layer.first_page).collect();
            if table.len() as u64 * 4 > buffer.size() {
                return Err(GpuError::LimitExceeded(format!("a page table of {} pages", table.len())));
            }
            ctx.queue.write_buffer(buffer, 0, bytemuck::cast_slice(&table));
            tables.push((buffer.clone(), table.len() as u32));
        }
        let layers = g.layers as usize;
        let paged = PagedView { tables, runs, pool_pages: self.pool.pages(), own_rows };
        let view = CacheView {
            k: vec![self.pool.k.clone(); layers],
            v: vec![self.pool.v.clone(); layers],
            capacity: self.capacity,
            start: self.len,
            rounding: KvScheme::Fp32,
            packed: None,
            paged: Some(paged),
        };
        Ok((after, view))
    }
}

/// Books of `pages` pages, all free, with one request (the text) started.
fn fresh_books(kind: LayerKind, pages: usize) -> PagedCache {
    let mut books = PagedCache::with_capacity(kind, pages);
    books.add_sequence();
    books
}

/// The kind of cache a layer with `mask` keeps (a decoder's layers are causal; a window or chunk of
/// 0 acts as 1 in the kernels, so the books keep that one token).
fn layer_kind(mask: Mask) -> LayerKind {
    match mask {
        Mask::Full | Mask::Causal => LayerKind::Global,
        Mask::Sliding { window_tokens } => LayerKind::Sliding { window_tokens: window_tokens.max(1) },
        Mask::Chunked { chunk_tokens } => LayerKind::Chunked { chunk_tokens: chunk_tokens.max(1) },
    }
}

/// Appends `tokens` tokens after `start` to `layer`'s books and returns where their rows go: runs of
/// consecutive tokens in one page, leaving out tokens whose page the window dropped within the pass.
fn write_rows(layer: &mut LayerPages, start: u64, tokens: u32) -> Result<Vec<RowRun>, String> {
    let mut writes = Vec::with_capacity(tokens as usize);
    for i in 0..tokens {
        writes.push((i, layer.books.write(0)?));
    }
    let table = &layer.books.sequences[0].table;
    let held = |i: u32, page: usize| table.get(((start + u64::from(i)) / PAGE_TOKENS) as usize) == Some(&Some(page));
    let mut runs: Vec<RowRun> = Vec::new();
    for (i, w) in writes.into_iter().filter(|&(i, w)| held(i, w.page)) {
        let (page, slot) = (layer.first_page + w.page as u32, w.slot as u32);
        match runs.last_mut() {
            Some(run) if run.page == page && run.slot + run.tokens == slot && run.first + run.tokens == i => {
                run.tokens += 1;
            }
            _ => runs.push(RowRun { first: i, tokens: 1, page, slot }),
        }
    }
    Ok(runs)
}

/// Why a pass of `tokens` tokens after `start` cannot read its keys through `books` (as they are
/// after the pass), if it cannot: its first query sees keys from its window's start, and each of
/// their pages must still be held.
fn check_reads(books: &PagedCache, start: u64, tokens: u32) -> Result<(), String> {
    let first_key = start + 1 - books.kind.live_tokens(start + 1);
    let end = start + u64::from(tokens);
    let table = &books.sequences[0].table;
    let from_page = (first_key / PAGE_TOKENS) as usize;
    if table.iter().skip(from_page).take((end - 1) as usize / PAGE_TOKENS as usize + 1 - from_page).all(Option::is_some)
    {
        return Ok(());
    }
    Err(format!(
        "{tokens} tokens at once after {start} would drop pages of a {} layer that their first tokens read: \
         decode them a few at a time",
        books.kind.noun()
    ))
}

impl PagedView {
    /// Copies layer `l`'s new K and V rows (`[h_kv, tokens, d]` in `k` and `v`) into their pages.
    pub(super) fn copy_rows(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        [k, v]: [&wgpu::Buffer; 2],
        [pool_k, pool_v]: [&wgpu::Buffer; 2],
        (h_kv, tokens, d): (u32, u32, u32),
        l: usize,
    ) {
        let row_bytes = u64::from(d) * 4;
        for run in &self.runs[l] {
            let bytes = u64::from(run.tokens) * row_bytes;
            for h in 0..h_kv {
                let from = u64::from(h * tokens + run.first) * row_bytes;
                let to = row_index(h_kv, run.page, h, run.slot) as u64 * row_bytes;
                encoder.copy_buffer_to_buffer(k, from, pool_k, to, bytes);
                encoder.copy_buffer_to_buffer(v, from, pool_v, to, bytes);
            }
        }
    }

    /// Layer `l`'s attention through its page table (`buffers`' K and V the pool's).
    pub(super) fn attention(
        &self,
        ctx: &GpuContext,
        kernels: &Kernels,
        buffers: &FlashBuffers<'_>,
        (l, shape, mask, scale): (usize, AttentionShape, Mask, f32),
    ) -> Result<Dispatch, GpuError> {
        let (table, table_pages) = &self.tables[l];
        let launch = PagedLaunch { shape, table_pages: *table_pages, pool_pages: self.pool_pages, mask, scale };
        kernels.paged.prepare(ctx, buffers, table, launch)
    }
}

/// Runs `ids`, the tokens after those already in `cache`, against it (the first call prefills it with
/// the prompt, each later one adds a generated token) and returns the logits after the last of them;
/// their K and V join the pool's pages. Refused, changing nothing, past the cache's capacity.
pub async fn decode_paged(
    ctx: &GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    cache: &mut LmPagedCache,
    ids: &[u32],
) -> Result<Vec<f32>, GpuError> {
    let (prepared, after) = prepare(ctx, kernels, weights, cache, ids).await?;
    prepared.submit(ctx);
    let out = prepared.read(ctx).await?;
    cache.len += ids.len() as u32;
    cache.layers = after;
    Ok(out.logits)
}

/// Prepares the pass [`decode_paged`] runs for `ids` against `cache`, adding nothing to it (the
/// benchmark times it). The pass reads the cache's page-table buffers, which the next prepare
/// rewrites: only the newest pass prepared from a cache may be submitted (again).
pub async fn prepare_decode_paged<'a>(
    ctx: &'a GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    cache: &LmPagedCache,
    ids: &[u32],
) -> Result<PreparedLm<'a>, GpuError> {
    Ok(prepare(ctx, kernels, weights, cache, ids).await?.0)
}

/// The pass for `ids` and each layer's books after it (to commit once it has run).
async fn prepare<'a>(
    ctx: &'a GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    cache: &LmPagedCache,
    ids: &[u32],
) -> Result<(PreparedLm<'a>, Vec<LayerPages>), GpuError> {
    let end = room_for(cache.len, cache.capacity, ids.len())?;
    let (after, view) = cache.plan(ctx, weights, end - cache.len)?;
    let request = LmRequest { last_logits: Some(1), ..Default::default() };
    Ok((prepare_pass(ctx, kernels, weights, ids, request, Passing::Cached(view)).await?, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(kind: LayerKind, pages: u64, first_page: u32) -> LayerPages {
        LayerPages { books: fresh_books(kind, pages as usize), first_page }
    }

    #[test]
    fn new_rows_go_in_runs_within_a_page_and_dropped_ones_are_left_out() {
        // A global layer whose share starts at pool page 10: a 20-token prefill fills page 10's 16
        // slots (tokens 0..16) and slots 0..4 of page 11; the next token goes to page 11, slot 4.
        let mut global = layer(LayerKind::Global, 8, 10);
        let run = |first, tokens, page, slot| RowRun { first, tokens, page, slot };
        assert_eq!(write_rows(&mut global, 0, 20), Ok(vec![run(0, 16, 10, 0), run(16, 4, 11, 0)]));
        assert_eq!(write_rows(&mut global, 20, 1), Ok(vec![run(0, 1, 11, 4)]));
        // Window 17 (3 pages): a 50-token prefill leaves tokens 33..50 in view. Page 0 (tokens 0..16)
        // was dropped at token 32 and taken again for tokens 48..50, page 1 (16..32) dropped at 48:
        // neither's first tokens are copied at all.
        let kind = LayerKind::Sliding { window_tokens: 17 };
        let mut sliding = layer(kind, pages_to_hold(kind, 64), 0);
        assert_eq!(write_rows(&mut sliding, 0, 50), Ok(vec![run(32, 16, 2, 0), run(48, 2, 0, 0)]));
        assert_eq!(sliding.books.kernel_table(0), [0, 0, 2, 0]);
        assert_eq!(check_reads(&sliding.books, 49, 1), Ok(()));
    }

    #[test]
    fn a_long_step_that_would_drop_pages_its_first_tokens_read_is_refused() {
        // Window 64 after 60 tokens: 20 more at once drop page 0 (tokens 0..16), which the query at
        // position 60 reads (keys 0..=60).
        let kind = LayerKind::Sliding { window_tokens: 64 };
        let mut sliding = layer(kind, pages_to_hold(kind, 128), 0);
        write_rows(&mut sliding, 0, 60).unwrap();
        let mut once = sliding.clone();
        write_rows(&mut once, 60, 20).unwrap();
        let refused = check_reads(&once.books, 60, 20).unwrap_err();
        assert!(refused.starts_with("20 tokens at once after 60 would drop pages of a sliding layer"), "{refused}");
        // 4 at a time keeps every page the window reads.
        write_rows(&mut sliding, 60, 4).unwrap();
        assert_eq!(check_reads(&sliding.books, 60, 4), Ok(()));
        let mut global = layer(LayerKind::Global, 8, 0);
        write_rows(&mut global, 0, 60).unwrap();
        write_rows(&mut global, 60, 20).unwrap();
        assert_eq!(check_reads(&global.books, 60, 20), Ok(()));
        assert_eq!(layer_kind(Mask::Sliding { window_tokens: 64 }), kind);
        assert_eq!(layer_kind(Mask::Sliding { window_tokens: 0 }), LayerKind::Sliding { window_tokens: 1 });
    }
}
