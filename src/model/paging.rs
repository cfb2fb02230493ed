//! Page accounting of a paged KV cache (the vLLM idea), for the decode animation: the cache of one
//! layer kind is a pool of fixed pages of [`PAGE_TOKENS`] tokens; each request (sequence) has a page
//! table from its logical pages to physical ones.
//!
//! - A windowed (sliding or chunked) layer drops a page once none of its tokens can be attended to
//!   again, and the freed page is *recycled* for the next token that needs one.
//! - A request that shares another's prompt (prefix caching) maps its first pages onto the other's
//!   full pages instead of computing them again; a page is freed when no request refers to it.
//!   [`PagedCache::fork_prefix`] shares *full* pages only (the prompt's tail in a partly filled page
//!   is recomputed); [`PagedCache::fork_shared`] shares the partly filled page too, and the first
//!   request to write into a page another still reads gets a copy of it first (copy-on-write).
//! - A pool made [`PagedCache::with_capacity`] refuses a page past its capacity with a message, and
//!   [`PagedCache::release`] frees a finished request's pages. These books drive the real pool on
//!   the GPU (`gpu::KvPool`): [`PagedCache::write`] says where each token goes.

use super::schedule::LayerKind;

/// Tokens per page (vLLM's default block size). Keep in sync with `PAGE_TOKENS` in
/// shaders/include/paged_rows.wgsl.
pub const PAGE_TOKENS: u64 = 16;

/// Pages holding `tokens` tokens, the last one maybe partly filled.
pub fn pages_for(tokens: u64) -> u64 {
    tokens.div_ceil(PAGE_TOKENS)
}

/// The most pages one request ever holds in a sliding layer: its window's tokens rarely start on a
/// page boundary, so they can touch `ceil((W + 15) / 16)` pages (one more than `W / 16` when the
/// window is a whole number of pages). `None` for other kinds (a global layer keeps growing).
pub fn most_live_pages(kind: LayerKind) -> Option<u64> {
    match kind {
        LayerKind::Sliding { window_tokens } => Some(pages_for(window_tokens.saturating_add(PAGE_TOKENS - 1))),
        _ => None,
    }
}

/// The pages a bounded pool must give one request of `kind` so that appending `tokens` tokens one at
/// a time is never refused: the books take a page for a token before they drop the pages its window
/// left behind, so a sliding layer holds its window's `pages_for(W)` pages and the new one at that
/// moment (one more than [`most_live_pages`], which counts after the drop, where `W` is one past a
/// whole number of pages). A global layer grows to `pages_for(tokens)`; a chunked one is given as
/// many (an upper bound: no request takes more pages than it has pages of tokens).
pub fn pages_to_hold(kind: LayerKind, tokens: u64) -> u64 {
    match kind {
        LayerKind::Sliding { window_tokens } => pages_for(tokens).min(pages_for(window_tokens).saturating_add(1)),
        _ => pages_for(tokens),
    }
}

/// What a paged cache's pool holds now: its pages, those some table refers to, and the bytes of one
/// page (K and V of every KV head for [`PAGE_TOKENS`] tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    pub pages: u64,
    pub live_pages: u64,
    pub page_bytes: u64,
    /// Pages handed out again after a window dropped them.
    pub recycled_pages: u64,
    /// Tokens the cache holds (its text so far).
    pub tokens: u64,
}

impl PoolUse {
    /// Bytes of the whole pool, allocated when it was made.
    pub fn bytes(&self) -> u64 {
        self.pages.saturating_mul(self.page_bytes)
    }

    /// Bytes of the pages in use.
    pub fn live_bytes(&self) -> u64 {
        self.live_pages.saturating_mul(self.page_bytes)
    }
}

/// One physical page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Bit `i` set: request `i` refers to this page. 0: free.
    pub owners: u32,
    /// Tokens written into it (up to [`PAGE_TOKENS`]).
    pub filled_tokens: u64,
    /// Times this page was freed and handed out again.
    pub reuses: u32,
}

/// One request's view of the cache.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sequence {
    /// Logical page -> physical page; `None` once dropped (outside the window).
    pub table: Vec<Option<usize>>,
    pub len_tokens: u64,
    /// Tokens taken over from another request instead of being computed.
    pub shared_tokens: u64,
}

/// The pages of one layer kind, shared by up to 32 requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagedCache {
    pub kind: LayerKind,
    pub pages: Vec<Page>,
    free: Vec<usize>,
    pub sequences: Vec<Sequence>,
    /// Pages handed out again after being freed.
    pub recycled_pages: u64,
    /// Pages copied because a request wrote into a page another still read.
    pub copied_pages: u64,
    /// The most physical pages this pool may hold.
    capacity_pages: usize,
}

/// Where one appended token goes in the pool: slot `slot` of physical page `page`, after copying page
/// `copy_from` over it when the request was sharing that page (copy-on-write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageWrite {
    pub page: usize,
    pub slot: u64,
    pub copy_from: Option<usize>,
}

impl PagedCache {
    pub fn new(kind: LayerKind) -> Self {
        Self::with_capacity(kind, usize::MAX)
    }

    /// A pool of at most `capacity_pages` physical pages: [`PagedCache::write`] refuses past them.
    pub fn with_capacity(kind: LayerKind, capacity_pages: usize) -> Self {
        let (pages, free, sequences) = (Vec::new(), Vec::new(), Vec::new());
        Self { kind, pages, free, sequences, recycled_pages: 0, copied_pages: 0, capacity_pages }
    }

    pub fn capacity_pages(&self) -> usize {
        self.capacity_pages
    }

    /// Starts an empty request; returns its index.
    pub fn add_sequence(&mut self) -> usize {
        self.sequences.push(Sequence::default());
        self.sequences.len() - 1
    }

    /// Starts a request whose first `prompt_tokens` tokens equal those of request `from`: it refers
    /// to `from`'s *full* pages covering them (still held), and returns `(index, shared tokens)`. The
    /// caller appends the rest of the prompt as new tokens.
    pub fn fork_prefix(&mut self, from: usize, prompt_tokens: u64) -> (usize, u64) {
        let id = self.add_sequence();
        let Some(src) = self.sequences.get(from).cloned() else { return (id, 0) };
        let full_pages = (prompt_tokens.min(src.len_tokens) / PAGE_TOKENS) as usize;
        let mut table = Vec::with_capacity(full_pages);
        for logical in 0..full_pages {
            // Sharing stops at the first page `from` no longer holds (dropped by its window).
            let Some(Some(phys)) = src.table.get(logical).copied() else { break };
            if self.pages[phys].filled_tokens < PAGE_TOKENS {
                break;
            }
            self.pages[phys].owners |= 1 << id;
            table.push(Some(phys));
        }
        let shared = table.len() as u64 * PAGE_TOKENS;
        self.sequences[id] = Sequence { table, len_tokens: shared, shared_tokens: shared };
        self.drop_outside_window(id);
        (id, shared)
    }

    /// Tokens [`PagedCache::fork_prefix`] would share: `from`'s full pages over the prompt, up to the
    /// first page it no longer holds.
    pub fn shareable_tokens(&self, from: usize, prompt_tokens: u64) -> u64 {
        let Some(src) = self.sequences.get(from) else { return 0 };
        let full_pages = (prompt_tokens.min(src.len_tokens) / PAGE_TOKENS) as usize;
        let held = src
            .table
            .iter()
            .take(full_pages)
            .take_while(|p| p.is_some_and(|phys| self.pages[phys].filled_tokens == PAGE_TOKENS))
            .count();
        held as u64 * PAGE_TOKENS
    }

    /// Starts a request whose first `prompt_tokens` tokens equal those of request `from`, referring to
    /// every page of `from` that holds them, the partly filled last one included (it is copied when
    /// either request first writes into it). Sharing stops at the first page `from` no longer holds;
    /// past such a gap only whole pages count. Returns `(index, shared tokens)`.
    pub fn fork_shared(&mut self, from: usize, prompt_tokens: u64) -> (usize, u64) {
        let id = self.add_sequence();
        let Some(src) = self.sequences.get(from).cloned() else { return (id, 0) };
        let tokens = prompt_tokens.min(src.len_tokens);
        let mut table = Vec::new();
        for logical in 0..pages_for(tokens) as usize {
            let Some(Some(phys)) = src.table.get(logical).copied() else { break };
            self.pages[phys].owners |= 1 << id;
            table.push(Some(phys));
        }
        let shared = if table.len() as u64 == pages_for(tokens) { tokens } else { table.len() as u64 * PAGE_TOKENS };
        self.sequences[id] = Sequence { table, len_tokens: shared, shared_tokens: shared };
        self.drop_outside_window(id);
        (id, shared)
    }

    /// Appends one token to request `seq` in a pool without a capacity (the lessons' arithmetic): as
    /// [`PagedCache::write`], which cannot fail there but for a request that does not exist.
    pub fn append(&mut self, seq: usize) {
        let _unbounded_never_refuses = self.write(seq);
    }

    /// Appends one token to request `seq` and says where it goes: a new page when the last one is
    /// full (a recycled one when any is free); a copy of the last page when another request still
    /// reads it; then drops pages the window no longer needs. Refused, changing nothing, when the
    /// pool has no page left.
    pub fn write(&mut self, seq: usize) -> Result<PageWrite, String> {
        let s = self.sequences.get(seq).ok_or_else(|| format!("request {seq} does not exist"))?;
        let (len, offset) = (s.len_tokens, s.len_tokens % PAGE_TOKENS);
        let logical = (len / PAGE_TOKENS) as usize;
        let last = s.table.get(logical).copied().flatten();
        let shared = last.is_some_and(|phys| self.pages[phys].owners & !(1u32 << seq) != 0);
        let write = match last {
            Some(phys) if offset != 0 && shared => {
                let copy = self.take_page(seq, len)?;
                self.pages[phys].owners &= !(1u32 << seq);
                self.pages[copy].filled_tokens = offset;
                self.sequences[seq].table[logical] = Some(copy);
                self.copied_pages += 1;
                PageWrite { page: copy, slot: offset, copy_from: Some(phys) }
            }
            Some(phys) if offset != 0 => PageWrite { page: phys, slot: offset, copy_from: None },
            _ => {
                let phys = self.take_page(seq, len)?;
                self.sequences[seq].table.push(Some(phys));
                PageWrite { page: phys, slot: 0, copy_from: None }
            }
        };
        let page = &mut self.pages[write.page];
        page.filled_tokens = page.filled_tokens.max(offset + 1);
        self.sequences[seq].len_tokens += 1;
        self.drop_outside_window(seq);
        Ok(write)
    }

    fn take_page(&mut self, seq: usize, len_tokens: u64) -> Result<usize, String> {
        let owner = 1u32 << seq;
        if let Some(phys) = self.free.pop() {
            let page = &mut self.pages[phys];
            *page = Page { owners: owner, filled_tokens: 0, reuses: page.reuses + 1 };
            self.recycled_pages += 1;
            return Ok(phys);
        }
        if self.pages.len() >= self.capacity_pages {
            return Err(format!(
                "the pool's {} pages of {PAGE_TOKENS} tokens are all in use: request {seq} cannot grow past {len_tokens} tokens",
                self.capacity_pages
            ));
        }
        self.pages.push(Page { owners: owner, filled_tokens: 0, reuses: 0 });
        Ok(self.pages.len() - 1)
    }

    /// Request `seq` has finished: its pages go back to the pool unless another request reads them.
    pub fn release(&mut self, seq: usize) {
        let Some(s) = self.sequences.get_mut(seq) else { return };
        let table = std::mem::take(&mut s.table);
        s.len_tokens = 0;
        for phys in table.into_iter().flatten() {
            self.unref(phys, seq);
        }
    }

    fn unref(&mut self, phys: usize, seq: usize) {
        let page = &mut self.pages[phys];
        page.owners &= !(1u32 << seq);
        if page.owners == 0 {
            self.free.push(phys);
        }
    }

    /// Request `seq`'s page table as the paged kernel reads it: one physical page per logical page;
    /// pages a window dropped read 0 (the kernel never visits their keys).
    pub fn kernel_table(&self, seq: usize) -> Vec<u32> {
        let table = self.sequences.get(seq).map_or(&[][..], |s| &s.table[..]);
        table.iter().map(|p| p.map_or(0, |phys| phys as u32)).collect()
    }

    /// Slots of live pages that hold no token: the pool's internal fragmentation, in tokens.
    pub fn empty_slots(&self) -> u64 {
        self.live_pages() as u64 * PAGE_TOKENS - self.live_tokens()
    }

    /// First token position request `seq` must still hold: 0 for global layers, `len - W` for a
    /// sliding window, the current chunk's start for chunked layers.
    pub fn retained_from(&self, seq: usize) -> u64 {
        let len = self.sequences.get(seq).map_or(0, |s| s.len_tokens);
        let live = self.kind.live_tokens(len);
        len - live.min(len)
    }

    fn drop_outside_window(&mut self, seq: usize) {
        let keep_from = self.retained_from(seq);
        let whole_pages = (keep_from / PAGE_TOKENS) as usize;
        for logical in 0..whole_pages.min(self.sequences[seq].table.len()) {
            if let Some(phys) = self.sequences[seq].table[logical].take() {
                self.unref(phys, seq);
            }
        }
    }

    /// Pages some request refers to.
    pub fn live_pages(&self) -> usize {
        self.pages.iter().filter(|p| p.owners != 0).count()
    }

    /// Pages more than one request refers to.
    pub fn shared_pages(&self) -> usize {
        self.pages.iter().filter(|p| p.owners.count_ones() > 1).count()
    }

    /// Tokens held in live pages (each stored once, however many requests read it).
    pub fn live_tokens(&self) -> u64 {
        self.pages.iter().filter(|p| p.owners != 0).map(|p| p.filled_tokens).sum()
    }

    /// Tokens that would be stored again without sharing: of each page, the tokens every request
    /// reads from it, less the most any one reads (stored once). A partly shared page counts the
    /// tokens its readers have in common, not its whole fill.
    pub fn deduplicated_tokens(&self) -> u64 {
        let mut reads = vec![(0u64, 0u64); self.pages.len()];
        for s in &self.sequences {
            for (logical, phys) in s.table.iter().enumerate() {
                if let Some(phys) = *phys {
                    let read = s.len_tokens.saturating_sub(logical as u64 * PAGE_TOKENS).min(PAGE_TOKENS);
                    let (sum, most) = &mut reads[phys];
                    (*sum, *most) = (*sum + read, (*most).max(read));
                }
            }
        }
        reads.iter().map(|(sum, most)| sum - most).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_pages_grow_one_per_16_tokens() {
        let mut c = PagedCache::new(LayerKind::Global);
        let a = c.add_sequence();
        for _ in 0..33 {
            c.append(a);
        }
        // 33 tokens = 2 full pages + 1 token in a third.
        assert_eq!(c.live_pages(), 3);
        assert_eq!(c.live_tokens(), 33);
        assert_eq!(c.recycled_pages, 0);
        assert_eq!(c.retained_from(a), 0);
    }

    #[test]
    fn sliding_layers_recycle_pages() {
        let mut c = PagedCache::new(LayerKind::Sliding { window_tokens: 32 });
        let a = c.add_sequence();
        for _ in 0..48 {
            c.append(a);
        }
        // After 48 tokens the window keeps 16..48: page 0 is free, pages 1 and 2 live.
        assert_eq!(c.retained_from(a), 16);
        assert_eq!(c.live_pages(), 2);
        assert_eq!(c.pages.len(), 3);
        // Token 48 needs a fourth page: the freed page 0 is handed out again.
        c.append(a);
        assert_eq!(c.pages.len(), 3);
        assert_eq!(c.recycled_pages, 1);
        assert_eq!(c.pages[0].reuses, 1);
        // Steady state: never more than window / 16 + 1 pages.
        for _ in 0..1000 {
            c.append(a);
            assert!(c.live_pages() <= 3);
        }
        assert_eq!(c.pages.len(), 3);
    }

    #[test]
    fn the_most_pages_a_window_holds_as_pages_are_really_dropped() {
        // W = 32: tokens 1..=32 of a 48-token run span pages 0..=2, 3 pages = ceil((32 + 15) / 16).
        assert_eq!(most_live_pages(LayerKind::Sliding { window_tokens: 32 }), Some(3));
        assert_eq!(most_live_pages(LayerKind::Sliding { window_tokens: 1024 }), Some(65));
        assert_eq!(most_live_pages(LayerKind::Global), None);
        assert_eq!((pages_for(0), pages_for(16), pages_for(17), pages_for(1000)), (0, 1, 2, 63));
        for window_tokens in 1..=70u64 {
            let kind = LayerKind::Sliding { window_tokens };
            let mut c = PagedCache::new(kind);
            let a = c.add_sequence();
            let mut most = 0;
            for _ in 0..window_tokens + 40 {
                c.append(a);
                most = most.max(c.live_pages() as u64);
            }
            assert_eq!(Some(most), most_live_pages(kind), "window {window_tokens}");
        }
    }

    #[test]
    fn a_pool_of_pages_to_hold_never_refuses_and_is_the_books_own_peak() {
        // The trained model at 128 tokens: global 8 pages; window 64: 4 pages and the next one.
        assert_eq!(pages_to_hold(LayerKind::Global, 128), 8);
        assert_eq!(pages_to_hold(LayerKind::Sliding { window_tokens: 64 }, 128), 5);
        assert_eq!(pages_to_hold(LayerKind::Sliding { window_tokens: 64 }, 60), 4);
        // W = 17: tokens 15..32 on pages 0 and 1 when token 32 takes page 2, before page 0 is dropped.
        assert_eq!(pages_to_hold(LayerKind::Sliding { window_tokens: 17 }, 100), 3);
        assert_eq!(most_live_pages(LayerKind::Sliding { window_tokens: 17 }), Some(2));
        for kind in (1..=70).map(|w| LayerKind::Sliding { window_tokens: w }).chain([LayerKind::Global]) {
            for tokens in [1u64, 15, 16, 17, 40, 64, 65, 80, 81, 130] {
                let mut c = PagedCache::with_capacity(kind, pages_to_hold(kind, tokens) as usize);
                let a = c.add_sequence();
                for _ in 0..tokens {
                    assert!(c.write(a).is_ok(), "{kind:?}, {tokens} tokens");
                }
                assert_eq!(c.pages.len() as u64, pages_to_hold(kind, tokens), "{kind:?}, {tokens} tokens");
            }
        }
        let chunked = LayerKind::Chunked { chunk_tokens: 24 };
        let mut c = PagedCache::with_capacity(chunked, pages_to_hold(chunked, 100) as usize);
        let a = c.add_sequence();
        assert!((0..100).all(|_| c.write(a).is_ok()));
    }

    #[test]
    fn pool_use_counts_whole_pages() {
        // The trained model's page: 2 KV heads x 16 tokens x 32 dims x 4 B x (K, V) = 8,192 B.
        let used = PoolUse { pages: 23, live_pages: 22, page_bytes: 8192, recycled_pages: 6, tokens: 100 };
        assert_eq!((used.bytes(), used.live_bytes()), (188_416, 180_224));
    }

    #[test]
    fn chunked_layers_drop_the_previous_chunk() {
        let mut c = PagedCache::new(LayerKind::Chunked { chunk_tokens: 32 });
        let a = c.add_sequence();
        for _ in 0..33 {
            c.append(a);
        }
        // Token 32 starts chunk 1: chunk 0's two pages are free.
        assert_eq!(c.retained_from(a), 32);
        assert_eq!(c.live_pages(), 1);
        assert_eq!(c.live_tokens(), 1);
    }

    #[test]
    fn prefix_sharing_reuses_full_pages_only() {
        let mut c = PagedCache::new(LayerKind::Global);
        let a = c.add_sequence();
        for _ in 0..40 {
            c.append(a);
        }
        // A 40-token prompt: 2 full pages (32 tokens) are shared, the last 8 recomputed.
        assert_eq!(c.shareable_tokens(a, 40), 32);
        let (b, shared) = c.fork_prefix(a, 40);
        assert_eq!(shared, 32);
        assert_eq!(c.shared_pages(), 2);
        assert_eq!(c.sequences[b].len_tokens, 32);
        for _ in 0..8 {
            c.append(b);
        }
        assert_eq!(c.deduplicated_tokens(), 32);
        // a: 3 pages, b: 1 own page; the 2 shared pages are stored once.
        assert_eq!(c.live_pages(), 4);
        assert_eq!(c.live_tokens(), 40 + 8);
    }

    #[test]
    fn shared_pages_survive_until_both_drop_them() {
        let mut c = PagedCache::new(LayerKind::Sliding { window_tokens: 32 });
        let a = c.add_sequence();
        for _ in 0..32 {
            c.append(a);
        }
        let (b, shared) = c.fork_prefix(a, 32);
        assert_eq!(shared, 32);
        // A third request arriving once A's window has moved on finds nothing to share.
        for _ in 0..32 {
            c.append(a);
        }
        assert_eq!(c.shareable_tokens(a, 32), 0);
        // A has moved on (holds 32..64), B still reads pages 0 and 1.
        assert_eq!(c.sequences[a].table[0], None);
        assert_eq!(c.pages[0].owners, 1 << b);
        assert_eq!(c.shared_pages(), 0);
        for _ in 0..32 {
            c.append(b);
        }
        // B dropped page 0 at 48 tokens and took it back for token 48; page 1 is free again at 64.
        assert_eq!(c.recycled_pages, 1);
        assert_eq!(c.pages[0].owners, 1 << b);
        assert_eq!(c.pages[1].owners, 0);
    }
}
