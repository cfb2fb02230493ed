//! The pool's books ([`PagedCache`] with a capacity, shared prompts, copy-on-write, release) under
//! random operations: what every request reads through its table is what it wrote or inherited, and
//! the page counts agree with the tables.

use super::paging::{PAGE_TOKENS, PageWrite, PagedCache, pages_for};
use super::schedule::LayerKind;
use crate::attention::inputs::SplitMix64;

/// The pool's contents as the books direct them: each slot holds `(request, position)` of the token
/// written there, pages copied whole on copy-on-write.
struct Contents(Vec<[Option<(usize, u64)>; PAGE_TOKENS as usize]>);

impl Contents {
    fn apply(&mut self, w: PageWrite, token: (usize, u64)) {
        while self.0.len() <= w.page {
            self.0.push([None; PAGE_TOKENS as usize]);
        }
        if let Some(from) = w.copy_from {
            self.0[w.page] = self.0[from];
        }
        self.0[w.page][w.slot as usize] = Some(token);
    }
}

/// Every request's visible tokens, read through its table: request `r`'s position `p` holds the token
/// its own writes put there, or, below its shared prefix, its parent's.
fn check_reads(cache: &PagedCache, contents: &Contents, origin: &[(Option<usize>, u64)]) {
    for (r, s) in cache.sequences.iter().enumerate() {
        let keep_from = cache.retained_from(r);
        for p in keep_from..s.len_tokens {
            let phys = s.table[(p / PAGE_TOKENS) as usize].expect("a visible token's page is held");
            let want = match origin[r] {
                (Some(parent), shared) if p < shared => (parent, p),
                _ => (r, p),
            };
            assert_eq!(contents.0[phys][(p % PAGE_TOKENS) as usize], Some(want), "request {r} position {p}");
        }
    }
}

/// Owners agree with the tables, free pages have none, no page is past the capacity.
fn check_books(cache: &PagedCache) {
    assert!(cache.pages.len() <= cache.capacity_pages());
    for (phys, page) in cache.pages.iter().enumerate() {
        for (r, s) in cache.sequences.iter().enumerate() {
            let refers = s.table.contains(&Some(phys));
            assert_eq!(refers, page.owners & (1 << r) != 0, "page {phys}, request {r}");
        }
    }
    assert_eq!(cache.empty_slots(), cache.live_pages() as u64 * PAGE_TOKENS - cache.live_tokens());
}

#[test]
fn random_appends_forks_and_releases_keep_every_read_right() {
    for seed in 0..40u64 {
        let mut rng = SplitMix64::new(seed);
        let kind = match seed % 3 {
            0 => LayerKind::Global,
            1 => LayerKind::Sliding { window_tokens: 20 + seed },
            _ => LayerKind::Chunked { chunk_tokens: 32 },
        };
        let mut cache = PagedCache::with_capacity(kind, 12);
        let mut contents = Contents(Vec::new());
        let mut origin = vec![(None, 0)];
        cache.add_sequence();
        for _ in 0..400 {
            let live: Vec<usize> =
                (0..cache.sequences.len()).filter(|&r| cache.sequences[r].len_tokens > 0 || r == 0).collect();
            let r = live[(rng.next_u64() % live.len() as u64) as usize];
            match rng.next_u64() % 20 {
                0 if cache.sequences.len() < 6 => {
                    let tokens = rng.next_u64() % 50;
                    let (id, shared) = cache.fork_shared(r, tokens);
                    origin.push((Some(r), shared));
                    assert_eq!(id, origin.len() - 1);
                    // A child of a child reads its grandparent's tokens: only direct parents are tracked.
                    if origin[r].0.is_some() && shared > 0 {
                        cache.release(id);
                    }
                }
                1 => cache.release(r),
                _ => {
                    let position = cache.sequences[r].len_tokens;
                    let before = cache.clone();
                    match cache.write(r) {
                        Ok(w) => contents.apply(w, (r, position)),
                        Err(why) => {
                            assert!(why.starts_with("the pool's 12 pages of 16 tokens are all in use"), "{why}");
                            assert_eq!(cache, before, "a refused write changes nothing");
                        }
                    }
                }
            }
            check_books(&cache);
            check_reads(&cache, &contents, &origin);
        }
    }
}

#[test]
fn a_shared_partial_page_is_copied_by_the_first_request_that_writes_it() {
    let mut c = PagedCache::with_capacity(LayerKind::Global, 8);
    let a = c.add_sequence();
    for _ in 0..40 {
        c.write(a).unwrap();
    }
    // B shares all 40 prompt tokens: 2 full pages and the partial third (8 tokens).
    let (b, shared) = c.fork_shared(a, 40);
    assert_eq!((shared, c.shared_pages(), c.live_pages()), (40, 3, 3));
    // B writes position 40 into the shared page: it gets a copy (page 3) with the 8 tokens first.
    assert_eq!(c.write(b), Ok(PageWrite { page: 3, slot: 8, copy_from: Some(2) }));
    assert_eq!((c.shared_pages(), c.live_pages(), c.copied_pages), (2, 4, 1));
    // A now owns page 2 alone and writes in place.
    assert_eq!(c.write(a), Ok(PageWrite { page: 2, slot: 8, copy_from: None }));
    assert_eq!(c.kernel_table(a), [0, 1, 2]);
    assert_eq!(c.kernel_table(b), [0, 1, 3]);
    // 2 x 41 tokens in 4 pages of 16: 64 - 18 = 46 shared-prefix slots saved, 64 - 50 = 14 empty.
    assert_eq!((c.live_tokens(), c.empty_slots()), (50, 14));
    // A ends: its own page 2 is freed, the shared pages stay for B.
    c.release(a);
    assert_eq!((c.live_pages(), c.shared_pages()), (3, 0));
    assert_eq!(c.pages[0].owners, 1 << b);
    // The freed page is the next one handed out.
    for _ in 0..7 {
        c.write(b).unwrap();
    }
    assert_eq!(c.write(b).map(|w| w.page), Ok(2));
    assert_eq!(c.recycled_pages, 1);
}

#[test]
fn a_full_pool_refuses_with_a_message_and_changes_nothing() {
    let mut c = PagedCache::with_capacity(LayerKind::Global, 2);
    let a = c.add_sequence();
    for _ in 0..32 {
        c.write(a).unwrap();
    }
    let before = c.clone();
    assert_eq!(
        c.write(a),
        Err("the pool's 2 pages of 16 tokens are all in use: request 0 cannot grow past 32 tokens".into())
    );
    assert_eq!(c, before);
    assert_eq!(c.write(7), Err("request 7 does not exist".into()));
    assert_eq!((pages_for(32), c.live_pages()), (2, 2));
}
