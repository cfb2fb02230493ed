//! Generate's f32 KV cache in pages of one pool (`lm_forward::LmPagedCache`: every layer's K and V
//! rows in pages of 16 tokens, read through the layer's page table by `paged_attention`) on a real
//! wgpu device (lavapipe in CI), against the contiguous cache's decoding and the CPU pass.
//!
//! Tolerances: logits within 1e-4 of the CPU pass (as the contiguous cache's, tests/gpu_lm.rs;
//! measured 1.1e-5 with the first shipped model), and within 1e-5 of decoding against the contiguous cache (the same rows, read
//! through a table by the same loop: measured bit for bit on lavapipe).
//!
//! Under `CI=true` a missing adapter fails; otherwise the tests print `SKIP: no adapter` and pass.

use attention_lab::gpu::Kernels;
use attention_lab::gpu::lm_forward::{self, LmCache, LmPagedCache, LmWeights};
use attention_lab::lm::forward;
use attention_lab::model::paging::PoolUse;

#[expect(dead_code, reason = "the shared helpers' random inputs are not needed here")]
mod common;
use common::gpu::{close, device};
#[path = "common/shipped.rs"]
mod shipped;
use shipped::{shipped, token_ids};

const LOGIT_ABS: f32 = 1e-4;
const SAME_ROWS_ABS: f32 = 1e-5;

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    assert!(a.iter().all(|x| x.is_finite()), "finite logits");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The shipped model (4 layers: three sliding with a window of 64, one global; 2 KV heads of 32) in a
/// pool for 128 tokens: the global layer's 8 pages, each sliding layer's window of 4 pages and the
/// one it takes before dropping the oldest: 3 x 5 + 8 = 23 pages of 2 x 16 x 32 x 4 B x (K, V) =
/// 8,192 B, 188,416 B (the contiguous cache: 128 tokens x 2,048 B a token, every layer: 262,144 B).
#[test]
fn paged_decoding_gives_the_contiguous_cache_s_logits_and_frees_its_pages_on_restart() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let ck = shipped();
    let weights = LmWeights::upload(&ctx, &ck).expect("upload");
    let vocab = weights.geometry.vocab;
    let ids = token_ids(100, vocab, 9);
    let want = forward::forward(&ck, &ids).expect("CPU forward");
    let mut contiguous = LmCache::new(&ctx, &weights, 128).expect("contiguous cache");
    let mut paged = LmPagedCache::new(&ctx, &weights, 128).expect("paged cache");
    let empty = PoolUse { pages: 23, live_pages: 0, page_bytes: 8192, recycled_pages: 0, tokens: 0 };
    assert_eq!(paged.usage(), empty);
    assert_eq!(paged.usage().bytes(), 188_416);
    // A 60-token prompt, then 40 tokens one at a time: past the window of 64 (token 80 takes back
    // the page tokens 0..16 sat in, token 96 the next).
    let (mut against_cpu, mut against_contiguous) = (0.0f32, 0.0f32);
    for (from, to) in std::iter::once((0, 60)).chain((60..100).map(|i| (i, i + 1))) {
        let step = &ids[from..to];
        let got = pollster::block_on(lm_forward::decode_paged(&ctx, &kernels, &weights, &mut paged, step));
        let got = got.expect("paged decode step");
        let flat = pollster::block_on(lm_forward::decode(&ctx, &kernels, &weights, &mut contiguous, step));
        let flat = flat.expect("contiguous decode step");
        let (cpu, same) = (max_abs_diff(&got, want.logits_at(to - 1)), max_abs_diff(&got, &flat));
        assert!(cpu <= LOGIT_ABS, "logits after token {} differ from the CPU pass by {cpu}", to - 1);
        assert!(same <= SAME_ROWS_ABS, "logits after token {} differ from the contiguous cache by {same}", to - 1);
        (against_cpu, against_contiguous) = (against_cpu.max(cpu), against_contiguous.max(same));
        if to == 60 {
            // Every layer holds tokens 0..60 on 4 pages.
            assert_eq!(paged.usage(), PoolUse { live_pages: 16, tokens: 60, ..empty });
        }
    }
    println!(
        "paged decode: logits max |diff| {against_cpu:e} from the CPU pass, {against_contiguous:e} from contiguous"
    );
    // 100 tokens: the global layer's 7 pages; each sliding layer tokens 36..100 on pages 2..6 (5), having
    // taken two dropped pages back.
    let after = PoolUse { live_pages: 22, recycled_pages: 6, tokens: 100, ..empty };
    assert_eq!((paged.len(), paged.usage()), (100, after));
    assert_eq!(after.live_bytes(), 180_224);
    // 20 tokens at once would drop the page of key 37 the first of them reads; 29 pass the capacity.
    // Both refused, the cache left as it was.
    let long = token_ids(29, vocab, 10);
    let refused = pollster::block_on(lm_forward::decode_paged(&ctx, &kernels, &weights, &mut paged, &long[..20]));
    let refused = refused.expect_err("refused").to_string();
    assert!(refused.contains("20 tokens at once after 100 would drop pages of a sliding layer"), "{refused}");
    let refused = pollster::block_on(lm_forward::decode_paged(&ctx, &kernels, &weights, &mut paged, &long));
    let refused = refused.expect_err("refused").to_string();
    assert!(refused.contains("29 more tokens after 100 do not fit a KV cache of 128"), "{refused}");
    assert_eq!((paged.len(), paged.usage()), (100, after));
    // A restart: every page back to the pool, then another text decoded in the same pool.
    paged.release();
    assert_eq!((paged.is_empty(), paged.usage()), (true, empty));
    let other = token_ids(75, vocab, 11);
    let want = forward::forward(&ck, &other).expect("CPU forward");
    for (from, to) in std::iter::once((0, 70)).chain((70..75).map(|i| (i, i + 1))) {
        let got = pollster::block_on(lm_forward::decode_paged(&ctx, &kernels, &weights, &mut paged, &other[from..to]));
        let diff = max_abs_diff(&got.expect("decode after the restart"), want.logits_at(to - 1));
        assert!(diff <= LOGIT_ABS, "after the restart, logits after token {} differ by {diff}", to - 1);
    }
    // 75 tokens: the global layer's 5 pages, each sliding layer tokens 11..75 on 5.
    assert_eq!(paged.usage(), PoolUse { live_pages: 20, tokens: 75, ..empty });
    // A pool for 2^32 - 1 tokens (a terabyte) is refused before anything is allocated.
    let err = LmPagedCache::new(&ctx, &weights, u32::MAX).err().expect("refused").to_string();
    assert!(err.contains("A paged KV cache of 4294967295 tokens"), "{err}");
    close(ctx);
}
