//! Twin of `shaders/paged_attention.wgsl`: attention over a paged K/V pool. It reads each key's K and
//! V rows through the request's page table, as the shader's `kv_row` does, then computes what
//! [`flash_attention`] computes over those rows (f64 sums).

use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::flash_attention::{Forward, flash_attention};
use crate::cpu::kv_pool::{check_pages, floats_per_page, row_index};
use crate::model::Mask;
use crate::model::paging::PAGE_TOKENS;

/// One paged attention problem: `q` is `[h_q, n_q, d]`; `k_pool` and `v_pool` are
/// `[pages, h_kv, PAGE_TOKENS, d]`; `table` maps logical page `key / PAGE_TOKENS` to a pool page.
pub struct PagedProblem<'a> {
    pub q: &'a [f32],
    pub k_pool: &'a [f32],
    pub v_pool: &'a [f32],
    pub table: &'a [u32],
    pub shape: AttentionShape,
    pub mask: Mask,
    pub scale: f32,
}

/// O `[h_q, n_q, d]` and lse `[h_q, n_q]` of `p`, or why its sizes or table do not fit.
pub fn paged_attention(p: &PagedProblem) -> Result<Forward, String> {
    let s = p.shape;
    s.validate()?;
    let per_page = floats_per_page(s.h_kv, s.d);
    let pages = (p.k_pool.len() / per_page.max(1)) as u32;
    if p.k_pool.len() != p.v_pool.len() || p.k_pool.len() != pages as usize * per_page || pages == 0 {
        return Err(format!("K and V pools must hold whole pages of {per_page} floats each"));
    }
    let needed = u64::from(s.n_kv).div_ceil(PAGE_TOKENS) as usize;
    if p.table.len() < needed {
        return Err(format!("{} keys need {needed} pages, the page table has {}", s.n_kv, p.table.len()));
    }
    check_pages(pages, &p.table[..needed])?;
    let (k, v) = (gather(p, p.k_pool), gather(p, p.v_pool));
    let problem = AttentionProblem::new(p.q, &k, &v, s, p.mask, p.scale);
    problem.validate(true)?;
    Ok(flash_attention(&problem))
}

/// The request's rows of `pool` as `[h_kv, n_kv, d]`, each found through the table.
fn gather(p: &PagedProblem, pool: &[f32]) -> Vec<f32> {
    let (s, d) = (p.shape, p.shape.d as usize);
    let mut out = Vec::with_capacity(s.h_kv as usize * s.n_kv as usize * d);
    for h in 0..s.h_kv {
        for key in 0..s.n_kv {
            let page = p.table[(u64::from(key) / PAGE_TOKENS) as usize];
            let row = row_index(s.h_kv, page, h, (u64::from(key) % PAGE_TOKENS) as u32);
            out.extend_from_slice(&pool[row * d..][..d]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kv_pool::CpuKvPool;

    fn values(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|x| (x as f32 * seed).sin() * 0.5).collect()
    }

    #[test]
    fn scattered_pages_give_what_contiguous_rows_give() {
        // 2 KV heads of 8, 3 query heads each, 37 tokens: pages 0..3 of the request sit at 4, 0, 2 of
        // a 5-page pool.
        let (h_kv, d, n) = (2u32, 8u32, 37u32);
        let shape = AttentionShape { h_q: 6, h_kv, n_q: 1, n_kv: n, d };
        let (k, v) = (values((h_kv * n * d) as usize, 0.37), values((h_kv * n * d) as usize, 0.11));
        let q = values(shape.q_len(), 0.23);
        let table = [4, 0, 2];
        let mut pool = CpuKvPool::new(h_kv, d, 5).unwrap();
        for key in 0..n {
            let row = |x: &[f32]| {
                (0..h_kv).flat_map(|h| x[((h * n + key) * d) as usize..][..d as usize].to_vec()).collect::<Vec<f32>>()
            };
            pool.write_token(table[(key / 16) as usize], key % 16, &row(&k), &row(&v)).unwrap();
        }
        for mask in [Mask::Causal, Mask::Sliding { window_tokens: 20 }] {
            let paged = PagedProblem {
                q: &q,
                k_pool: pool.keys(),
                v_pool: pool.values(),
                table: &table,
                shape,
                mask,
                scale: 0.3,
            };
            let want = flash_attention(&AttentionProblem::new(&q, &k, &v, shape, mask, 0.3));
            assert_eq!(paged_attention(&paged), Ok(want), "{mask:?}");
        }
        let short = PagedProblem {
            q: &q,
            k_pool: pool.keys(),
            v_pool: pool.values(),
            table: &table[..2],
            shape,
            mask: Mask::Causal,
            scale: 0.3,
        };
        assert_eq!(paged_attention(&short).unwrap_err(), "37 keys need 3 pages, the page table has 2");
        let outside = PagedProblem { table: &[4, 0, 5], ..short };
        assert_eq!(paged_attention(&outside).unwrap_err(), "page 5 is outside the pool's 5 pages");
    }
}
