//! How a job is cut up: batches by KV group and work limit, slices of long pooled heads, chunks of
//! cross-attention queries, the tier and its note.

use super::*;
use crate::attention::AttentionShape;
use crate::attention::pooled::PooledMap;
use crate::live_attention::plan::{JobPlan, batches, pieces, query_chunks};
use crate::model::Model;

/// Llama 3 8B's layer 0 over `n` tokens, these heads, exact when short, else pooled to 320 cells a
/// thumbnail and 1,280 the enlarged head (a 1,280 CSS px screen at 2x).
fn llama(n: usize, heads: Vec<u32>) -> Request {
    llama_request(n, heads, (320, 1280))
}

#[test]
fn a_short_sentence_is_one_launch_of_every_head_on_the_gpu() {
    let plan = JobPlan::new(&llama(12, (0..32).collect()), true, true);
    assert_eq!(plan.batches, vec![(0..32).collect::<Vec<_>>()]);
    assert_eq!((plan.on_gpu, plan.note.clone()), (true, None));
    assert_eq!((plan.map_output, plan.focus_output), (MapOutput::Exact, MapOutput::Exact));
}

#[test]
fn the_cpu_reference_runs_one_kv_group_at_a_time() {
    // 12 tokens, causal: 78 pairs x 128 dims = 9,984 multiply-adds a head; a group of 4 is 39,936,
    // under the CPU's 2^21 but the one-launch shortcut is the GPU's.
    let plan = JobPlan::new(&llama(12, (0..32).collect()), false, false);
    assert_eq!(plan.batches.len(), 8);
    assert_eq!(plan.batches[1], vec![4, 5, 6, 7]);
    assert!(!plan.on_gpu && plan.note.is_none());
}

#[test]
fn long_heads_go_one_at_a_time_pooled_to_the_screen() {
    // n = 8192, causal: 8192 x 8193 / 2 = 33,558,528 pairs x 128 = 4,295,491,584 multiply-adds a
    // head, more than 2^28: each head is its own batch.
    let plan = JobPlan::new(&llama(8192, vec![0, 1, 2, 3]), true, true);
    assert_eq!(plan.batches, vec![vec![0], vec![1], vec![2], vec![3]]);
    let MapOutput::Pooled(thumb) = plan.map_output else { panic!("{:?}", plan.map_output) };
    let MapOutput::Pooled(large) = plan.focus_output else { panic!("{:?}", plan.focus_output) };
    assert_eq!((thumb.rows, thumb.cols, large.rows, large.cols), (320, 320, 1280, 1280));
}

#[test]
fn heads_wider_than_the_kernels_say_so() {
    let wide = Model::simple(2, 8192, 4); // 2,048 dims a head
    let req = Request { layout: LayerLayout::of(&wide, 0), ..llama(12, vec![0, 1]) };
    let plan = JobPlan::new(&req, true, false);
    assert!(!plan.on_gpu);
    assert_eq!(
        plan.note.as_deref(),
        Some(
            "This layer's heads are 2048 wide, more than the GPU kernels' 1024: computed with the CPU reference instead."
        )
    );
}

#[test]
fn a_long_pooled_head_comes_in_slices_that_cover_it_once() {
    let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 8192, n_kv: 8192, d: 128 };
    let map = PooledMap::whole(8192, 320, 320, Pool::Max);
    // 4,295,491,584 multiply-adds / 2^28 = 16.002: 17 slices on the GPU, one call on the CPU.
    let on_gpu = pieces(shape, Mask::Causal, MapOutput::Pooled(map), false, true);
    assert_eq!(on_gpu.len(), 17);
    assert_eq!(on_gpu.first().unwrap().rows.0, 0);
    assert_eq!(on_gpu.last().unwrap().rows.1, 8192);
    assert!(on_gpu.windows(2).all(|w| w[0].rows.1 == w[1].rows.0 && w[0].done_after < w[1].done_after));
    assert_eq!(on_gpu.last().unwrap().done_after, 1.0);
    assert_eq!(pieces(shape, Mask::Causal, MapOutput::Pooled(map), false, false).len(), 1);
}

#[test]
fn cross_attention_with_more_queries_than_keys_runs_in_chunks() {
    let shape = AttentionShape { h_q: 2, h_kv: 1, n_q: 5, n_kv: 2, d: 64 };
    let got: Vec<(u32, (u32, u32), f64)> = pieces(shape, Mask::Full, MapOutput::Exact, true, true)
        .iter()
        .map(|p| (p.row0, p.rows, p.done_after))
        .collect();
    assert_eq!(got, vec![(0, (0, 2), 1.0 / 3.0), (2, (0, 2), 2.0 / 3.0), (4, (0, 1), 1.0)]);
}

#[test]
fn a_newer_job_supersedes_every_older_one() {
    let mut clock = JobClock::default();
    let first = clock.start();
    assert!(clock.is_current(first));
    let second = clock.start();
    assert!(!clock.is_current(first) && clock.is_current(second));
}

#[test]
fn a_selection_batches_by_its_own_kv_groups() {
    // n = 512: 131,328 pairs x 128 = 16.8 M multiply-adds a head, so groups fit whole; heads 1 and
    // 3 read KV head 0, head 6 reads KV head 1.
    assert_eq!(JobPlan::new(&llama(512, vec![1, 3, 6]), true, true).batches, vec![vec![1, 3], vec![6]]);
}

#[test]
fn batches_follow_groups_and_work_limits() {
    let heads: Vec<u32> = (0..8).collect();
    // Group of 4, room for everything: one batch per KV group.
    assert_eq!(batches(&heads, 4, 10, 10, 1000, 1000), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    // Work for two heads per batch.
    assert_eq!(batches(&heads, 4, 10, 10, 20, 1000), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    // A head bigger than the limit still runs, alone.
    assert_eq!(batches(&[0, 1], 2, 50, 10, 20, 1000), vec![vec![0], vec![1]]);
    // Non-contiguous selections across groups.
    assert_eq!(batches(&[1, 3, 6], 4, 1, 1, 100, 100), vec![vec![1, 3], vec![6]]);
}

#[test]
fn cross_attention_queries_come_in_chunks_of_the_keys() {
    assert_eq!(query_chunks(5, 2), vec![(0, 2), (2, 2), (4, 1)]);
    assert_eq!(query_chunks(3, 7), vec![(0, 3)]);
}
