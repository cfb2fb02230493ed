//! What the panel shows after a step: the run's counters, the real model's bytes, and each lane's pages.

use super::lanes::Lane;
use crate::model::LayerKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Idle,
    Running,
    Stopped,
    Done,
    Failed,
}

impl RunState {
    pub fn name(self) -> &'static str {
        match self {
            RunState::Idle => "idle",
            RunState::Running => "running",
            RunState::Stopped => "stopped",
            RunState::Done => "done",
            RunState::Failed => "failed",
        }
    }
}

/// One physical page as drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageView {
    /// Bit `i` set: request `i` refers to it; 0: free.
    pub owners: u32,
    pub filled_tokens: u64,
    /// Times it was freed and handed out again.
    pub reuses: u32,
}

/// The pages of one layer kind as drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct PagesView {
    pub kind: LayerKind,
    pub storing_layers: u32,
    pub pages: Vec<PageView>,
    pub live_pages: usize,
    pub shared_pages: usize,
    pub recycled_pages: u64,
    /// `(model_dim, run_dim)` when the kernel runs narrower heads than the model has.
    pub narrowed: Option<(u32, u32)>,
}

impl PagesView {
    pub fn of(lane: &Lane) -> Self {
        let paged = &lane.paged;
        PagesView {
            kind: lane.layer.kind,
            storing_layers: lane.storing_layers,
            pages: paged
                .pages
                .iter()
                .map(|p| PageView { owners: p.owners, filled_tokens: p.filled_tokens, reuses: p.reuses })
                .collect(),
            live_pages: paged.live_pages(),
            shared_pages: paged.shared_pages(),
            recycled_pages: paged.recycled_pages,
            narrowed: lane.layer.is_narrowed().then_some((lane.layer.model_dim, lane.layer.run_dim)),
        }
    }
}

/// Every lane's pool together, as the page shows it (`page-pool`): counted from the books that
/// place every token in the real pool, at the real pool's page size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolView {
    /// Bytes of the pages some request holds (K and V, f32).
    pub used_bytes: u64,
    pub live_pages: u64,
    /// Pages more than one request reads.
    pub shared_pages: u64,
    pub capacity_pages: u64,
    /// Slots of live pages that hold no token: the pool's fragmentation, in tokens.
    pub empty_slots: u64,
    /// Pages copied because a request wrote into a page another still read.
    pub copied_pages: u64,
}

impl PoolView {
    pub fn of(lanes: &[Lane]) -> Self {
        let mut view = PoolView::default();
        for lane in lanes {
            let paged = &lane.paged;
            view.used_bytes += lane.used_bytes();
            view.live_pages += paged.live_pages() as u64;
            view.shared_pages += paged.shared_pages() as u64;
            view.capacity_pages += u64::from(lane.pool.pages());
            view.empty_slots += paged.empty_slots();
            view.copied_pages += paged.copied_pages;
        }
        view
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub state: RunState,
    pub a_tokens: u64,
    /// `None` until request B arrives.
    pub b_tokens: Option<u64>,
    /// Tokens B took over from A instead of computing them.
    pub shared_tokens: u64,
    /// Tokens each request runs to.
    pub run_tokens: u64,
    pub layers: Vec<PagesView>,
    /// Bytes of the real model's cache for request A (all layers, the chosen dtype).
    pub a_model_bytes: u128,
    /// Bytes not stored twice thanks to the shared prompt pages (real model, all layers), as they
    /// stood while both requests ran (kept once the first ends and frees its pages).
    pub saved_bytes: u128,
    /// A request has all its tokens and its pages went back to the pool.
    pub first_ended: bool,
    /// Bytes of this demo's K/V pools (f32, one layer per type, room for both requests).
    pub demo_buffer_bytes: u64,
    pub pool: PoolView,
    pub kernel_steps: u64,
    pub kernel_ms_total: f64,
    /// Largest |kernel − reference| over the checked steps.
    pub max_diff: Option<f32>,
    pub message: String,
}

impl Snapshot {
    pub fn idle(run_tokens: u64) -> Self {
        Snapshot {
            state: RunState::Idle,
            a_tokens: 0,
            b_tokens: None,
            shared_tokens: 0,
            run_tokens,
            layers: Vec::new(),
            a_model_bytes: 0,
            saved_bytes: 0,
            first_ended: false,
            demo_buffer_bytes: 0,
            pool: PoolView::default(),
            kernel_steps: 0,
            kernel_ms_total: 0.0,
            max_diff: None,
            message: String::new(),
        }
    }

    /// The KV chart's marker: (tokens of request A, the real model's cache bytes at that length).
    pub fn chart_marker(&self) -> (u64, u128) {
        (self.a_tokens, self.a_model_bytes)
    }

    /// Stop pressed: a running animation says it stopped; a finished one keeps its state.
    pub fn stop(&mut self) {
        if self.state == RunState::Running {
            self.state = RunState::Stopped;
        }
    }

    pub fn average_kernel_ms(&self) -> f64 {
        if self.kernel_steps > 0 { self.kernel_ms_total / self.kernel_steps as f64 } else { 0.0 }
    }

    /// Folds one checked step's difference into the largest so far.
    pub fn record_diff(&mut self, diff: f32) {
        self.max_diff = Some(self.max_diff.map_or(diff, |d| d.max(diff)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_only_stops_a_running_animation() {
        let mut snap = Snapshot::idle(256);
        snap.stop();
        assert_eq!(snap.state, RunState::Idle);
        snap.state = RunState::Running;
        snap.stop();
        assert_eq!(snap.state.name(), "stopped");
    }

    #[test]
    fn kernel_time_averages_and_diffs_keep_the_largest() {
        let mut snap = Snapshot::idle(256);
        assert_eq!(snap.average_kernel_ms(), 0.0);
        (snap.kernel_steps, snap.kernel_ms_total) = (4, 2.0);
        assert_eq!(snap.average_kernel_ms(), 0.5);
        for diff in [1e-7, 3e-7, 2e-7] {
            snap.record_diff(diff);
        }
        assert_eq!(snap.max_diff, Some(3e-7));
    }
}
