//! The CPU twin of `gpu::KvPool` (`src/gpu/kv_pool.rs`): one pool of K/V pages in plain memory, laid
//! out as the paged kernel reads it, `[page, h_kv, PAGE_TOKENS, d]` for K and for V.

use crate::model::paging::PAGE_TOKENS;

pub struct CpuKvPool {
    k: Vec<f32>,
    v: Vec<f32>,
    h_kv: u32,
    d: u32,
    pages: u32,
}

impl CpuKvPool {
    /// A pool of `pages` pages of zeros (the caller checks the bytes against the job limit first).
    pub fn new(h_kv: u32, d: u32, pages: u32) -> Result<Self, String> {
        if h_kv == 0 || d == 0 || pages == 0 {
            return Err(format!("a KV pool needs h_kv, d and pages >= 1 (got {h_kv}, {d}, {pages})"));
        }
        let floats = floats_per_page(h_kv, d).checked_mul(pages as usize).ok_or("the KV pool is too large")?;
        Ok(Self { k: vec![0.0; floats], v: vec![0.0; floats], h_kv, d, pages })
    }

    /// Writes one token's K and V rows (`[h_kv, d]` each) into slot `slot` of page `page`.
    pub fn write_token(&mut self, page: u32, slot: u32, k_token: &[f32], v_token: &[f32]) -> Result<(), String> {
        check_write(self.h_kv, self.d, self.pages, page, slot, k_token.len(), v_token.len())?;
        let d = self.d as usize;
        for h in 0..self.h_kv as usize {
            let at = row_index(self.h_kv, page, h as u32, slot) * d;
            self.k[at..at + d].copy_from_slice(&k_token[h * d..][..d]);
            self.v[at..at + d].copy_from_slice(&v_token[h * d..][..d]);
        }
        Ok(())
    }

    /// Copies page `from` over page `to` (copy-on-write of a shared page).
    pub fn copy_page(&mut self, from: u32, to: u32) -> Result<(), String> {
        check_pages(self.pages, &[from, to])?;
        let n = floats_per_page(self.h_kv, self.d);
        let (src, dst) = (from as usize * n, to as usize * n);
        self.k.copy_within(src..src + n, dst);
        self.v.copy_within(src..src + n, dst);
        Ok(())
    }

    pub fn keys(&self) -> &[f32] {
        &self.k
    }

    pub fn values(&self) -> &[f32] {
        &self.v
    }

    pub fn h_kv(&self) -> u32 {
        self.h_kv
    }

    pub fn d(&self) -> u32 {
        self.d
    }

    pub fn pages(&self) -> u32 {
        self.pages
    }
}

/// Floats of one page of K (or V): every KV head's [`PAGE_TOKENS`] rows of `d`.
pub fn floats_per_page(h_kv: u32, d: u32) -> usize {
    h_kv as usize * PAGE_TOKENS as usize * d as usize
}

/// The row of slot `slot` of KV head `h` in page `page`, in rows of `d` (the paged kernel's `kv_row`).
pub fn row_index(h_kv: u32, page: u32, h: u32, slot: u32) -> usize {
    (page as usize * h_kv as usize + h as usize) * PAGE_TOKENS as usize + slot as usize
}

/// Why a write of one token (`k_len`, `v_len` values) into `page`, `slot` is refused, if it is: shared
/// by both pools, so the GPU and the CPU refuse alike.
pub fn check_write(
    h_kv: u32,
    d: u32,
    pages: u32,
    page: u32,
    slot: u32,
    k_len: usize,
    v_len: usize,
) -> Result<(), String> {
    let want = h_kv as usize * d as usize;
    if k_len != want || v_len != want {
        return Err(format!("one token's K and V must hold h_kv * d = {want} values"));
    }
    if u64::from(slot) >= PAGE_TOKENS {
        return Err(format!("slot {slot} is past a page of {PAGE_TOKENS} tokens"));
    }
    check_pages(pages, &[page])
}

/// Why one of `asked` is not a page of a pool of `pages`, if one is not.
pub fn check_pages(pages: u32, asked: &[u32]) -> Result<(), String> {
    match asked.iter().find(|&&p| p >= pages) {
        Some(p) => Err(format!("page {p} is outside the pool's {pages} pages")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_land_in_their_page_and_slot_per_head_and_pages_copy_whole() {
        let mut pool = CpuKvPool::new(2, 2, 3).unwrap();
        // Page 1, slot 3: head 0 gets [1, 2] at row (1 * 2 + 0) * 16 + 3 = 35, head 1 [3, 4] at row 51.
        pool.write_token(1, 3, &[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        assert_eq!((row_index(2, 1, 0, 3), row_index(2, 1, 1, 3)), (35, 51));
        assert_eq!(&pool.keys()[70..72], [1.0, 2.0]);
        assert_eq!(&pool.values()[102..104], [7.0, 8.0]);
        pool.copy_page(1, 2).unwrap();
        // Page 2 starts at float 2 heads x 16 rows x 2 = 64 per page: 128 + 6 = 134.
        assert_eq!(&pool.keys()[134..136], [1.0, 2.0]);
        assert_eq!(pool.write_token(3, 0, &[0.0; 4], &[0.0; 4]), Err("page 3 is outside the pool's 3 pages".into()));
        assert!(pool.write_token(0, 16, &[0.0; 4], &[0.0; 4]).unwrap_err().contains("slot 16"));
        assert!(pool.write_token(0, 0, &[0.0; 3], &[0.0; 4]).unwrap_err().contains("h_kv * d = 4"));
        assert!(pool.copy_page(0, 9).is_err());
        assert!(CpuKvPool::new(1, 1, 0).is_err());
    }
}
