//! What the heatmap explorer's page decides around its computation: the state it reports
//! (`data-status`), the status line, which line stays up while a quick job runs, how the grid groups
//! heads by the KV head they read, whether a new request keeps the grid's slots, and the page's text.

use super::request::{Request, format_n, layout_line};
use crate::attention::layer_inputs::LayerLayout;
use crate::live_attention::Progress;
use crate::model::Model;

/// The explorer's `data-status`: what the browser tests (and a reader of the DOM) wait for.
pub fn page_status(attends: bool, p: &Progress) -> &'static str {
    if !attends {
        "no-attention"
    } else if p.error.is_some() {
        "error"
    } else if p.finished {
        "ready"
    } else {
        "computing"
    }
}

/// The progress the status line shows: the last finished job's stays up while a newer one is quick
/// (not yet slow, no error), so a quick change does not flash "Computing…". `slow` is asked only when
/// the rest holds (the page reads a signal there, and tracks it only then).
pub fn shown_progress(previous: Option<&Progress>, p: Progress, slow: impl FnOnce() -> bool) -> Progress {
    match previous {
        Some(prev) if prev.finished && !p.finished && p.error.is_none() && !slow() && prev.job < p.job => prev.clone(),
        _ => p,
    }
}

/// Heads done, counting the finished part of the batch in flight.
pub fn heads_progressed(p: &Progress) -> f64 {
    p.done as f64 + p.partial * p.batch as f64
}

fn heads_word(n: usize) -> &'static str {
    if n == 1 { "head" } else { "heads" }
}

/// The status line's sentence for a job running or finished (notes and errors are shown as they are).
pub fn progress_text(p: &Progress) -> String {
    let where_ = if p.on_gpu { "on the GPU" } else { "on the CPU" };
    if p.finished {
        let waited_for = if p.on_gpu { "GPU" } else { "CPU reference" };
        format!(
            "{} {} computed {where_} in {:.0} ms ({:.0} ms waiting for the {waited_for}).",
            p.done,
            heads_word(p.done),
            p.total_ms,
            p.kernel_ms
        )
    } else {
        let percent = 100.0 * heads_progressed(p) / p.total.max(1) as f64;
        format!("Computing {where_}: {} of {} {} ({percent:.0}%)…", p.done, p.total, heads_word(p.total))
    }
}

/// The grid's heads grouped by the KV head they read, in order: `(kv head, [(query head, slot)])`.
pub fn group_by_kv_head<S: Copy>(heads: &[u32], slots: &[S], layout: &LayerLayout) -> Vec<(u32, Vec<(u32, S)>)> {
    let mut out: Vec<(u32, Vec<(u32, S)>)> = Vec::new();
    for (&h, &slot) in heads.iter().zip(slots) {
        let g = layout.kv_head(h);
        match out.last_mut() {
            Some((last, list)) if *last == g => list.push((h, slot)),
            _ => out.push((g, vec![(h, slot)])),
        }
    }
    out
}

/// Whether a request keeps the grid's slots (and so its old pixels, dimmed, until new ones come):
/// the same heads of a layout with the same head counts.
pub fn keeps_slots(shown_heads: &[u32], shown_layout: Option<&LayerLayout>, req: &Request) -> bool {
    shown_heads == req.heads.as_slice()
        && shown_layout.map(|l| (l.n_kv_heads, l.n_q_heads)) == Some((req.layout.n_kv_heads, req.layout.n_q_heads))
}

/// The line under the controls: the layer's layout and the sequence.
pub fn headline(model: &Model, r: &Request) -> String {
    format!("{} · {}", layout_line(model, &r.layout, r.mask), format_n(r))
}

/// The title written into an exported PNG.
pub fn export_title(model: &Model, request: &Result<Request, String>) -> String {
    match request {
        Ok(r) => format!("{} — {}", layout_line(model, &r.layout, r.mask), format_n(r)),
        Err(_) => "Attention Lab".into(),
    }
}

/// What the synthetic-weights note adds when the designed teaching heads are on.
pub const TEACHING_HEADS_NOTE: &str = "Heads 0–5 are designed teaching heads whose patterns are known: previous \
                                       token, first-token sink, same token, induction-like, local and diffuse.";

/// The line listing the link's settings a model with real weights leaves aside; none when it uses them all.
pub fn ignored_line(ignored: &[String]) -> Option<String> {
    (!ignored.is_empty()).then(|| format!("This model {}.", ignored.join("; it ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::attention_input::AttentionInput;
    use crate::views::heatmaps::params::ExplorerParams;
    use crate::views::heatmaps::request::{Screen, build_request};

    fn progress(job: u64, done: usize, total: usize, finished: bool) -> Progress {
        Progress { job, done, total, finished, on_gpu: true, ..Default::default() }
    }

    #[test]
    fn the_page_status_says_why_nothing_is_drawn_first() {
        let mut p = progress(1, 0, 4, false);
        assert_eq!(page_status(true, &p), "computing");
        p.error = Some("too long".into());
        assert_eq!(page_status(true, &p), "error");
        assert_eq!(page_status(false, &p), "no-attention");
        assert_eq!(page_status(true, &progress(1, 4, 4, true)), "ready");
    }

    #[test]
    fn a_quick_job_keeps_the_last_finished_line() {
        let done = progress(1, 4, 4, true);
        let next = progress(2, 0, 4, false);
        assert_eq!(shown_progress(Some(&done), next.clone(), || false), done);
        // Once slow, or failed, or without a finished line before it, the new job shows.
        assert_eq!(shown_progress(Some(&done), next.clone(), || true), next);
        let failed = Progress { error: Some("no".into()), ..next.clone() };
        assert_eq!(shown_progress(Some(&done), failed.clone(), || false), failed);
        assert_eq!(shown_progress(None, next.clone(), || false), next);
        // An older job's progress arriving late does not hold the line.
        assert_eq!(shown_progress(Some(&progress(3, 4, 4, true)), next.clone(), || false), next);
    }

    #[test]
    fn the_status_line_counts_heads_and_the_slice_in_flight() {
        assert_eq!(
            progress_text(&Progress { total_ms: 12.4, kernel_ms: 8.6, ..progress(1, 1, 1, true) }),
            "1 head computed on the GPU in 12 ms (9 ms waiting for the GPU)."
        );
        let cpu = Progress { on_gpu: false, total_ms: 30.0, ..progress(1, 8, 8, true) };
        assert_eq!(progress_text(&cpu), "8 heads computed on the CPU in 30 ms (0 ms waiting for the CPU reference).");
        // 2 heads done and half of a batch of 2: 3 of 8 = 38%.
        let running = Progress { batch: 2, partial: 0.5, ..progress(1, 2, 8, false) };
        assert_eq!(heads_progressed(&running), 3.0);
        assert_eq!(progress_text(&running), "Computing on the GPU: 2 of 8 heads (38%)…");
        assert_eq!(progress_text(&progress(1, 0, 0, false)), "Computing on the GPU: 0 of 0 heads (0%)…");
    }

    fn layout(preset_id: &str) -> LayerLayout {
        LayerLayout::of(crate::catalog::presets::preset(preset_id).unwrap(), 0)
    }

    #[test]
    fn heads_are_grouped_by_the_kv_head_they_read() {
        // Llama 3 8B: 32 query heads over 8 KV heads, 4 to a group.
        let l = layout("llama-3-8b");
        let groups = group_by_kv_head(&[0, 1, 4, 9, 10], &['a', 'b', 'c', 'd', 'e'], &l);
        assert_eq!(groups, vec![(0, vec![(0, 'a'), (1, 'b')]), (1, vec![(4, 'c')]), (2, vec![(9, 'd'), (10, 'e')])]);
        assert!(group_by_kv_head::<u8>(&[], &[], &l).is_empty());
    }

    #[test]
    fn the_grid_keeps_its_slots_for_the_same_heads_of_the_same_head_counts() {
        let screen = Screen { width_css_px: 1280.0, device_pixel_ratio: 2.0 };
        let l = layout("llama-3-8b");
        let req = build_request(&AttentionInput::default(), &ExplorerParams::default(), l.clone(), screen).unwrap();
        assert!(keeps_slots(&req.heads, Some(&l), &req));
        assert!(!keeps_slots(&req.heads, None, &req));
        assert!(!keeps_slots(&req.heads[1..], Some(&l), &req));
        let other = layout("gpt2-small");
        assert!(!keeps_slots(&req.heads, Some(&other), &req));
    }

    #[test]
    fn real_weights_list_the_settings_they_leave_aside() {
        assert_eq!(ignored_line(&[]), None);
        assert_eq!(
            ignored_line(&["reads its own tokens".into(), "ignores the seed".into()]).as_deref(),
            Some("This model reads its own tokens; it ignores the seed.")
        );
    }
}
