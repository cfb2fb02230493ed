//! One run of the animation, advanced one action of the script at a time: append a token to request
//! A or B (and run the paged decode kernel on every lane), or fork B off A's prompt (its pages
//! shared, nothing copied or computed); a request that reaches its length ends and frees its pages. The caller awaits each
//! [`DecodeRun::advance`] and decides when to draw; every decision about what to append, check and
//! show is here.

use super::check::{is_checked, reference_diff};
use super::lanes::{Lane, buffers_bytes, open_lanes};
use super::snapshot::{PagesView, PoolView, RunState, Snapshot};
use crate::engine::Engine;
use crate::model::decode_demo::{Action, next_action, run_tokens, shareable_on_arrival};
use crate::model::kv_cache::kv_bytes_per_token_of_kind;
use crate::model::limits::{self, JOB_MAX_BYTES};
use crate::model::{DType, Model, kv_total_bytes};

const REQUEST_A: u32 = 0;
const REQUEST_B: u32 = 1;

pub struct DecodeRun {
    model: Model,
    dtype: DType,
    lanes: Vec<Lane>,
    snap: Snapshot,
}

impl DecodeRun {
    /// A running animation with request A's buffers allocated; if they cannot be, a failed one that
    /// says why.
    pub fn start(engine: &Engine, model: &Model, dtype: DType) -> DecodeRun {
        let run = run_tokens(model);
        let capacity_tokens = u32::try_from(run).unwrap_or(u32::MAX);
        let mut snap = Snapshot::idle(run);
        snap.state = RunState::Running;
        if !super::text::can_run(model) {
            snap.state = RunState::Failed;
            snap.message = "Not started: the model has no attention layer, so there is no KV cache to page.".into();
            return DecodeRun { model: model.clone(), dtype, lanes: Vec::new(), snap };
        }
        if let Err(over) = limits::check_job_bytes(buffers_bytes(model, capacity_tokens), JOB_MAX_BYTES) {
            snap.state = RunState::Failed;
            snap.message = format!("Not started: The K/V buffers of this run {over}.");
            return DecodeRun { model: model.clone(), dtype, lanes: Vec::new(), snap };
        }
        let lanes = open_lanes(engine, model, capacity_tokens).unwrap_or_else(|e| {
            snap.state = RunState::Failed;
            snap.message = format!("Could not allocate the K/V pool: {e}");
            Vec::new()
        });
        DecodeRun { model: model.clone(), dtype, lanes, snap }
    }

    /// The counters as they stand (the pages and bytes as of the last [`DecodeRun::refreshed`]).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    pub fn is_finished(&self) -> bool {
        self.snap.state != RunState::Running
    }

    /// Does the script's next action; a failure ends the run with its reason.
    pub async fn advance(&mut self, engine: &Engine, now_ms: impl Fn() -> f64) {
        let outcome = match next_action(self.snap.a_tokens, self.snap.b_tokens, self.snap.run_tokens) {
            Action::AppendA => {
                let outcome = self.step(engine, REQUEST_A, self.snap.a_tokens, now_ms).await;
                self.snap.a_tokens += 1;
                self.end_if_done(REQUEST_A, self.snap.a_tokens);
                outcome
            }
            Action::ForkB => self.fork_b(),
            Action::AppendB => {
                let b = self.snap.b_tokens.unwrap_or(0);
                let outcome = self.step(engine, REQUEST_B, b, now_ms).await;
                self.snap.b_tokens = Some(b + 1);
                self.end_if_done(REQUEST_B, b + 1);
                outcome
            }
            Action::Done => {
                self.snap.state = RunState::Done;
                Ok(())
            }
        };
        if let Err(e) = outcome {
            self.snap.state = RunState::Failed;
            self.snap.message = format!("The decode step failed: {e}");
        }
    }

    /// Appends `request`'s token at `position` to every lane and runs the paged decode kernel on each,
    /// timing it with `now_ms` and checking it against the reference every so many tokens.
    async fn step(
        &mut self,
        engine: &Engine,
        request: u32,
        position: u64,
        now_ms: impl Fn() -> f64,
    ) -> Result<(), String> {
        for (slot, lane) in self.lanes.iter_mut().enumerate() {
            let slot = slot as u32;
            let started = now_ms();
            let (q, out) = lane.step(engine, slot, request, position).await?;
            self.snap.kernel_ms_total += now_ms() - started;
            self.snap.kernel_steps += 1;
            if is_checked(position) {
                self.snap.record_diff(reference_diff(&lane.layer, slot, request, position + 1, &q, &out.o)?);
            }
        }
        Ok(())
    }

    /// A request that has all its tokens ends: its pages go back to every lane's pool.
    /// The bytes the sharing saved are kept as they stood while both requests ran.
    fn end_if_done(&mut self, request: u32, tokens: u64) {
        if tokens >= self.snap.run_tokens {
            if !self.snap.first_ended {
                self.snap.saved_bytes = self.saved_bytes();
                self.snap.first_ended = true;
            }
            for lane in &mut self.lanes {
                lane.paged.release(request as usize);
            }
        }
    }

    /// Request B arrives: its page tables point at A's pages holding the prompt, the partly filled
    /// last one included (copied when B first writes into it). No row is copied or computed for them.
    fn fork_b(&mut self) -> Result<(), String> {
        let shareable = shareable_on_arrival(self.lanes.iter().map(|l| &l.paged), REQUEST_A as usize);
        for lane in &mut self.lanes {
            lane.paged.fork_shared(REQUEST_A as usize, shareable);
        }
        self.snap.shared_tokens = shareable;
        self.snap.b_tokens = Some(shareable);
        Ok(())
    }

    /// The snapshot with the pages and the real model's bytes filled in from the lanes: what a redraw shows.
    pub fn refreshed(&mut self) -> &Snapshot {
        self.snap.a_model_bytes = kv_total_bytes(&self.model, self.snap.a_tokens, self.dtype).unwrap_or(0);
        if !self.snap.first_ended {
            self.snap.saved_bytes = self.saved_bytes();
        }
        self.snap.demo_buffer_bytes = self.lanes.iter().map(|l| u64::from(l.pool.pages()) * l.pool.page_bytes()).sum();
        self.snap.pool = PoolView::of(&self.lanes);
        self.snap.layers = self.lanes.iter().map(PagesView::of).collect();
        &self.snap
    }

    /// The real model's bytes the shared pages store once instead of twice, as the lanes stand.
    fn saved_bytes(&self) -> u128 {
        let (model, dtype) = (&self.model, self.dtype);
        self.lanes
            .iter()
            .map(|l| u128::from(l.paged.deduplicated_tokens()) * kv_bytes_per_token_of_kind(model, l.layer.kind, dtype))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::model::encoding::decode_model;

    /// Runs a future the CPU tier completes without waiting (it never awaits anything that can pend).
    fn ready<F: Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        match future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => panic!("the CPU tier never waits"),
        }
    }

    fn run_to_the_end(model: &Model) -> Snapshot {
        let engine = Engine::Cpu { reason: "native test".into() };
        let mut run = DecodeRun::start(&engine, model, DType::Fp16);
        let mut actions = 0;
        while !run.is_finished() {
            ready(run.advance(&engine, || 0.0));
            actions += 1;
            assert!(actions < 10_000, "the script ends");
        }
        run.refreshed().clone()
    }

    #[test]
    fn llama_3_8b_shares_the_prompt_pages_and_matches_the_reference() {
        let snap = run_to_the_end(preset("llama-3-8b").unwrap());
        assert_eq!((snap.state, snap.message.as_str()), (RunState::Done, ""));
        // Each request runs 256 tokens; B shares A's whole 40-token prompt: 2 full pages of 16 and the
        // partly filled third, which B copies when it writes its first token.
        assert_eq!((snap.a_tokens, snap.b_tokens, snap.shared_tokens), (256, Some(256), 40));
        // While both ran, the 2 full pages stayed shared: 32 tokens * 131,072 B stored once.
        assert_eq!((snap.a_model_bytes, snap.saved_bytes), (256 * 131_072, 32 * 131_072));
        // Both requests ended: every page is back in the pool. A ended first (at 256, B at 208): B's last
        // 48 tokens went into 3 of A's freed pages. One page was copied.
        let global = &snap.layers[0];
        assert_eq!((global.live_pages, global.shared_pages, global.recycled_pages), (0, 0, 3));
        assert_eq!((snap.pool.used_bytes, snap.pool.live_pages, snap.pool.copied_pages), (0, 0, 1));
        // One launch per token of either request but B's 40 shared ones; the CPU tier is the reference.
        assert_eq!(snap.kernel_steps, 256 + 256 - 40);
        assert_eq!(snap.max_diff, Some(0.0));
        // The pool: 2 x 16 pages of 8 KV heads * 16 tokens * 128 dims * 4 B * 2 (K, V).
        assert_eq!(snap.demo_buffer_bytes, 32 * 8 * 16 * 128 * 4 * 2);
        assert_eq!(snap.pool.capacity_pages, 32);
    }

    /// The pool's bytes as it stands mid-run (from the books that place every token, at the real
    /// pool's page size) against model/paging.rs's arithmetic: each request's pages, less the shared.
    #[test]
    fn the_pool_in_use_is_the_page_arithmetic() {
        use crate::model::paging::pages_for;
        let engine = Engine::Cpu { reason: "native test".into() };
        let mut run = DecodeRun::start(&engine, preset("llama-3-8b").unwrap(), DType::Fp16);
        let page_bytes = 8 * 16 * 128 * 4 * 2;
        let mut checked = 0;
        while !run.is_finished() {
            ready(run.advance(&engine, || 0.0));
            let snap = run.refreshed().clone();
            let (a, b) = (snap.a_tokens, snap.b_tokens);
            if snap.first_ended {
                break;
            }
            // Before B writes, it shares all 3 prompt pages; after, the 2 full ones.
            let shared = match b {
                None => 0,
                Some(40) => 3,
                Some(_) => 2,
            };
            let pages = pages_for(a) + b.map_or(0, pages_for) - shared;
            assert_eq!((snap.pool.live_pages, snap.pool.shared_pages), (pages, shared), "a {a}, b {b:?}");
            assert_eq!(snap.pool.used_bytes, pages * page_bytes, "a {a}, b {b:?}");
            // The empty slots: every live page's 16 less the tokens stored once.
            let stored = a + b.map_or(0, |b| b.saturating_sub(40) + 8 * u64::from(b > 40));
            assert_eq!(snap.pool.empty_slots, pages * 16 - stored, "a {a}, b {b:?}");
            checked += 1;
        }
        assert!(checked > 300, "{checked} steps checked");
    }

    #[test]
    fn a_run_whose_buffers_pass_the_job_limit_is_refused_before_allocating() {
        // Llama 3 8B: 2 x 16 pages x (K, V) x 8 KV heads x 16 tokens x 128 dims x 4 B = 4 MiB.
        assert_eq!(buffers_bytes(preset("llama-3-8b").unwrap(), 256), 2 * 16 * 2 * 8 * 16 * 128 * 4);
        // 4,096 KV heads of 256 over 256 tokens: 2 x 2 x 4,096 x 256 x 256 x 4 = 4 GiB, over 1 GiB.
        let mut wide = preset("llama-3-8b").unwrap().clone();
        (wide.n_q_heads, wide.attn.n_kv_heads, wide.attn.head_dim) = (4096, 4096, 256);
        let engine = Engine::Cpu { reason: "native test".into() };
        let run = DecodeRun::start(&engine, &wide, DType::Fp16);
        assert_eq!(run.snapshot().state, RunState::Failed);
        assert!(
            run.snapshot().message.starts_with("Not started: The K/V buffers of this run would need 4.29 GB"),
            "{}",
            run.snapshot().message
        );
    }

    #[test]
    fn what_b_shares_when_it_arrives_is_what_the_lessons_compute() {
        use crate::model::decode_demo::{prompt_sharing, shared_prompt_tokens};
        use crate::model::kv_bytes_per_token;
        let engine = Engine::Cpu { reason: "native test".into() };
        for id in ["llama-3-8b", "gemma-3-27b"] {
            let model = preset(id).unwrap();
            let bytes_per_token = kv_bytes_per_token(model, DType::Fp16).unwrap();
            let mut run = DecodeRun::start(&engine, model, DType::Fp16);
            while run.snapshot().b_tokens.is_none() {
                ready(run.advance(&engine, || 0.0));
            }
            // On arrival B reads the whole 40-token prompt from A's pages, stored once.
            let snap = run.refreshed().clone();
            assert_eq!((snap.shared_tokens, snap.saved_bytes), (40, 40 * bytes_per_token), "{id}");
            // Once B writes into the partly filled page it has its own copy: the full pages stay
            // shared, as the lessons compute (Llama 3 8B: 32 tokens x 131,072 B).
            while run.snapshot().b_tokens == Some(40) {
                ready(run.advance(&engine, || 0.0));
            }
            let shared = shared_prompt_tokens(model);
            assert_eq!(run.refreshed().saved_bytes, u128::from(shared) * bytes_per_token, "{id}");
            let sharing = prompt_sharing(model);
            // One page copied per lane: the partly filled prompt page, by B.
            let snap = run.snapshot();
            assert_eq!((sharing.on_arrival, sharing.kept_shared), (40, shared), "{id}");
            assert_eq!(snap.pool.copied_pages, snap.layers.len() as u64, "{id}");
        }
    }

    #[test]
    fn windowed_layers_recycle_their_pages() {
        let model = decode_model("L4.d256.h4.kv2.pat1w64-1g").unwrap();
        let snap = run_to_the_end(&model);
        assert_eq!(snap.state, RunState::Done);
        let sliding = snap.layers.iter().find(|l| l.kind.noun() == "sliding").unwrap();
        let global = snap.layers.iter().find(|l| l.kind.noun() == "global").unwrap();
        // A 64-token window keeps at most 64 / 16 + 1 = 5 pages per request; freed pages were handed
        // out again, and every page is free once both requests ended.
        assert!(sliding.live_pages == 0 && sliding.recycled_pages > 0);
        // Global pages are freed only when A ends: B's last 3 pages are A's.
        assert_eq!((global.live_pages, global.recycled_pages), (0, 3));
        assert_eq!(snap.a_model_bytes, 2 * 512 * 64 + 2 * 512 * 256);
    }

    #[test]
    fn a_buffer_that_cannot_be_allocated_fails_the_run_with_its_reason() {
        let mut model = preset("llama-3-8b").unwrap().clone();
        model.attn.n_kv_heads = 0;
        let run = DecodeRun::start(&Engine::Cpu { reason: "native test".into() }, &model, DType::Fp16);
        assert!(run.is_finished());
        assert_eq!(run.snapshot().state, RunState::Failed);
        assert!(run.snapshot().message.starts_with("Could not allocate the K/V pool: "));
    }
}
