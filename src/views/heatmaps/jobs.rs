//! What an export of the explorer can recompute; how a job is cut up for the GPU is the live-attention
//! service's ([`crate::live_attention::plan`]), re-exported here for the explorer's code and tests.

pub use crate::live_attention::plan::*;

/// Largest head an export writes with every probability (64 MiB of f32).
pub const EXACT_EXPORT_MAX_CELLS: u64 = 1 << 24;

/// Why the export of a pooled head (`n` = (n_q, n_kv), shown as `cells` = (rows, cols)) holds its
/// pooled blocks instead of every probability; `None` when every probability can be recomputed for
/// it (it fits [`EXACT_EXPORT_MAX_CELLS`] and the GPU takes its head width).
pub fn pooled_export_notice(head: u32, n: (u32, u32), cells: (u32, u32), gpu: bool) -> Option<String> {
    let all = u64::from(n.0) * u64::from(n.1);
    let reason = if all > EXACT_EXPORT_MAX_CELLS {
        format!("its {} x {} = {all} probabilities are more than an export holds ({EXACT_EXPORT_MAX_CELLS})", n.0, n.1)
    } else if !gpu {
        "without the GPU only the pooled blocks are computed".to_owned()
    } else {
        return None;
    };
    Some(format!("Head {head}: {reason}, so the file holds its {} x {} pooled blocks.", cells.0, cells.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::attention::layer_inputs::LayerLayout;
    use crate::attention::pooled::PooledMap;
    use crate::engine::MapOutput;
    use crate::model::Mask;
    use crate::model::Model;
    use crate::model::presets::preset;
    use crate::views::attention_input::AttentionInput;
    use crate::views::heatmaps::params::ExplorerParams;
    use crate::views::heatmaps::request::Request;
    use crate::views::heatmaps::request::{Screen, build_request};
    use crate::views::link::LinkParams;

    const WIDE: Screen = Screen { width_css_px: 1280.0, device_pixel_ratio: 2.0 };

    fn request(model: &Model, link: &[(&str, &str)]) -> Request {
        let (mut input, mut explorer) = (AttentionInput::default(), ExplorerParams::default());
        for &(key, value) in link {
            if AttentionInput::KEYS.contains(&key) {
                input.set(key, value).unwrap();
            } else {
                explorer.set(key, value).unwrap();
            }
        }
        build_request(&input, &explorer, LayerLayout::of(model, 0), WIDE).unwrap()
    }

    fn llama() -> &'static Model {
        preset("llama-3-8b").unwrap()
    }

    #[test]
    fn a_short_sentence_is_one_launch_of_every_head_on_the_gpu() {
        let plan = JobPlan::new(&request(llama(), &[]), true, true);
        assert_eq!(plan.batches, vec![(0..32).collect::<Vec<_>>()]);
        assert_eq!((plan.on_gpu, plan.note.clone()), (true, None));
        assert_eq!((plan.thumb_output, plan.large_output), (MapOutput::Exact, MapOutput::Exact));
    }

    #[test]
    fn the_cpu_reference_runs_one_kv_group_at_a_time() {
        // 12 tokens, causal: 78 pairs x 128 dims = 9,984 multiply-adds a head; a group of 4 is 39,936,
        // under the CPU's 2^21 but the one-launch shortcut is the GPU's.
        let plan = JobPlan::new(&request(llama(), &[]), false, false);
        assert_eq!(plan.batches.len(), 8);
        assert_eq!(plan.batches[1], vec![4, 5, 6, 7]);
        assert!(!plan.on_gpu && plan.note.is_none());
    }

    #[test]
    fn long_heads_go_one_at_a_time_pooled_to_the_screen() {
        // n = 8192, causal: 8192 x 8193 / 2 = 33,558,528 pairs x 128 = 4,295,491,584 multiply-adds a
        // head, more than 2^28: each head is its own batch.
        let plan = JobPlan::new(&request(llama(), &[("n", "8192"), ("heads", "0-3")]), true, true);
        assert_eq!(plan.batches, vec![vec![0], vec![1], vec![2], vec![3]]);
        // 160 CSS px x 2 = 320 cells a side for thumbnails; 640 x 2 = 1280 for the enlarged head.
        let MapOutput::Pooled(thumb) = plan.thumb_output else { panic!("{:?}", plan.thumb_output) };
        let MapOutput::Pooled(large) = plan.large_output else { panic!("{:?}", plan.large_output) };
        assert_eq!((thumb.rows, thumb.cols, large.rows, large.cols), (320, 320, 1280, 1280));
    }

    #[test]
    fn heads_wider_than_the_kernels_say_so() {
        let wide = Model::simple(2, 8192, 4); // 2,048 dims a head
        let plan = JobPlan::new(&request(&wide, &[]), true, false);
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
        let map = PooledMap::whole(8192, 320, 320, crate::attention::pooled::Pool::Max);
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
        let req = request(llama(), &[("heads", "1,3,6"), ("n", "512")]);
        assert_eq!(JobPlan::new(&req, true, true).batches, vec![vec![1, 3], vec![6]]);
    }

    #[test]
    fn pooled_exports_hold_every_probability_up_to_64_mib() {
        // 4096 x 4096 = 2^24 cells: exactly at the limit.
        assert_eq!(pooled_export_notice(3, (4096, 4096), (160, 160), true), None);
        assert_eq!(
            pooled_export_notice(3, (4097, 4096), (160, 160), true).as_deref(),
            Some(
                "Head 3: its 4097 x 4096 = 16781312 probabilities are more than an export holds (16777216), so the file holds its 160 x 160 pooled blocks."
            )
        );
        assert!(pooled_export_notice(0, (512, 512), (160, 160), false).is_some_and(|n| n.contains("without the GPU")));
    }

    #[test]
    fn batches_follow_groups_and_budgets() {
        let heads: Vec<u32> = (0..8).collect();
        // Group of 4, room for everything: one batch per KV group.
        assert_eq!(batches(&heads, 4, 10, 10, 1000, 1000), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        // Work for two heads per batch.
        assert_eq!(batches(&heads, 4, 10, 10, 20, 1000), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        // A head bigger than the budget still runs, alone.
        assert_eq!(batches(&[0, 1], 2, 50, 10, 20, 1000), vec![vec![0], vec![1]]);
        // Non-contiguous selections across groups.
        assert_eq!(batches(&[1, 3, 6], 4, 1, 1, 100, 100), vec![vec![1, 3], vec![6]]);
    }

    #[test]
    fn cross_attention_queries_come_in_chunks_of_the_keys() {
        assert_eq!(query_chunks(5, 2), vec![(0, 2), (2, 2), (4, 1)]);
        assert_eq!(query_chunks(3, 7), vec![(0, 3)]);
    }
}
