//! One run of the animation, advanced one action of the script at a time: append a token to request
//! A or B (and run the decode kernel on every lane), or fork B off A's prompt. The caller awaits each
//! [`DecodeRun::advance`] and decides when to draw; every decision about what to append, check and
//! show is here.

use super::check::{is_checked, reference_diff};
use super::lanes::{Lane, buffers_bytes, kv_rows, layer_mask, open_lanes, query};
use super::snapshot::{PagesView, RunState, Snapshot};
use crate::engine::{DecodeCache, Engine};
use crate::model::decode_demo::{Action, PROMPT_TOKENS, next_action, run_tokens};
use crate::model::kv_cache::kv_bytes_per_token_per_layer;
use crate::model::limits::{self, JOB_MAX_BYTES};
use crate::model::{DType, Model, kv_total_bytes};

const REQUEST_A: u32 = 0;
const REQUEST_B: u32 = 1;

pub struct DecodeRun {
    model: Model,
    dtype: DType,
    lanes: Vec<Lane>,
    /// Tokens each buffer is allocated for: the whole run.
    capacity_tokens: u32,
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
            return DecodeRun { model: model.clone(), dtype, lanes: Vec::new(), capacity_tokens, snap };
        }
        if let Err(over) = limits::check_job_bytes(buffers_bytes(model, capacity_tokens), JOB_MAX_BYTES) {
            snap.state = RunState::Failed;
            snap.message = format!("Not started: the K/V buffers of this run {over}.");
            return DecodeRun { model: model.clone(), dtype, lanes: Vec::new(), capacity_tokens, snap };
        }
        let lanes = open_lanes(engine, model, capacity_tokens).unwrap_or_else(|e| {
            snap.state = RunState::Failed;
            snap.message = format!("Could not allocate the K/V buffer: {e}");
            Vec::new()
        });
        DecodeRun { model: model.clone(), dtype, lanes, capacity_tokens, snap }
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
                outcome
            }
            Action::ForkB => self.fork_b(engine),
            Action::AppendB => {
                let b = self.snap.b_tokens.unwrap_or(0);
                let outcome = self.step(engine, REQUEST_B, b, now_ms).await;
                self.snap.b_tokens = Some(b + 1);
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

    /// Appends `request`'s token at `position` to every lane and runs the decode kernel on each,
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
            let layer = lane.layer;
            let cache = lane.append(engine, slot, request, position)?;
            let q = query(&layer, slot, request, position);
            let started = now_ms();
            let out = engine.decode(cache, &q, layer.h_q, layer_mask(&layer)?, layer.scale()).await?;
            self.snap.kernel_ms_total += now_ms() - started;
            self.snap.kernel_steps += 1;
            if is_checked(position) {
                self.snap.record_diff(reference_diff(&layer, slot, request, position + 1, &q, &out.o)?);
            }
        }
        Ok(())
    }

    /// Request B arrives: it takes A's full prompt pages and copies their K/V rows into its own buffer
    /// (a reuse, not a recomputation: no kernel runs for them).
    fn fork_b(&mut self, engine: &Engine) -> Result<(), String> {
        // Every layer kind shares the same prefix: the shortest any of them still holds whole.
        let shareable =
            self.lanes.iter().map(|l| l.paged.shareable_tokens(REQUEST_A as usize, PROMPT_TOKENS)).min().unwrap_or(0);
        for (slot, lane) in self.lanes.iter_mut().enumerate() {
            let (_, shared) = lane.paged.fork_prefix(REQUEST_A as usize, shareable);
            let mut cache = engine.decode_cache(lane.layer.h_kv, lane.layer.run_dim, self.capacity_tokens)?;
            for position in 0..shared {
                let (k, v) = kv_rows(&lane.layer, slot as u32, REQUEST_B, position);
                engine.append_kv(&mut cache, &k, &v)?;
            }
            lane.caches[REQUEST_B as usize] = Some(cache);
        }
        self.snap.shared_tokens = shareable;
        self.snap.b_tokens = Some(shareable);
        Ok(())
    }

    /// The snapshot with the pages and the real model's bytes filled in from the lanes: what a redraw shows.
    pub fn refreshed(&mut self) -> &Snapshot {
        let (model, dtype) = (&self.model, self.dtype);
        self.snap.a_model_bytes = kv_total_bytes(model, self.snap.a_tokens, dtype).unwrap_or(0);
        self.snap.saved_bytes = self
            .lanes
            .iter()
            .map(|l| {
                u128::from(l.paged.deduplicated_tokens())
                    * kv_bytes_per_token_per_layer(model, l.layer.kind, dtype)
                    * u128::from(l.storing_layers)
            })
            .sum();
        self.snap.demo_buffer_bytes =
            self.lanes.iter().flat_map(|l| l.caches.iter().flatten()).map(DecodeCache::used_bytes).sum();
        self.snap.layers = self.lanes.iter().map(PagesView::of).collect();
        &self.snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::encoding::decode_model;
    use crate::model::presets::preset;

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
    fn llama_3_8b_shares_two_prompt_pages_and_matches_the_reference() {
        let snap = run_to_the_end(preset("llama-3-8b").unwrap());
        assert_eq!((snap.state, snap.message.as_str()), (RunState::Done, ""));
        // Each request runs 256 tokens; B shares A's 40-token prompt as 2 full pages of 16 = 32 tokens.
        assert_eq!((snap.a_tokens, snap.b_tokens, snap.shared_tokens), (256, Some(256), 32));
        // 256 tokens * 131,072 B; stored once: 32 shared tokens * 131,072 B.
        assert_eq!((snap.a_model_bytes, snap.saved_bytes), (256 * 131_072, 32 * 131_072));
        // Global layers: 16 pages per request minus the 2 shared; nothing recycled.
        let global = &snap.layers[0];
        assert_eq!((global.live_pages, global.shared_pages, global.recycled_pages), (30, 2, 0));
        // One launch per token of either request but B's 32 shared ones; the CPU tier is the reference.
        assert_eq!(snap.kernel_steps, 256 + 256 - 32);
        assert_eq!(snap.max_diff, Some(0.0));
        // 8 KV heads * 128 dims * 2 (K, V) * 4 B * 512 tokens.
        assert_eq!(snap.demo_buffer_bytes, 8 * 128 * 2 * 4 * 512);
    }

    #[test]
    fn a_run_whose_buffers_pass_the_job_limit_is_refused_before_allocating() {
        // Llama 3 8B: 2 requests x (K, V) x 8 KV heads x 128 dims x 256 tokens x 4 B = 4 MiB.
        assert_eq!(buffers_bytes(preset("llama-3-8b").unwrap(), 256), 2 * 2 * 8 * 128 * 256 * 4);
        // 4,096 KV heads of 256 over 256 tokens: 2 x 2 x 4,096 x 256 x 256 x 4 = 4 GiB, over 1 GiB.
        let mut wide = preset("llama-3-8b").unwrap().clone();
        (wide.n_q_heads, wide.attn.n_kv_heads, wide.attn.head_dim) = (4096, 4096, 256);
        let engine = Engine::Cpu { reason: "native test".into() };
        let run = DecodeRun::start(&engine, &wide, DType::Fp16);
        assert_eq!(run.snapshot().state, RunState::Failed);
        assert!(
            run.snapshot().message.starts_with("Not started: the K/V buffers of this run would need 4.29 GB"),
            "{}",
            run.snapshot().message
        );
    }

    #[test]
    fn what_b_shares_when_it_arrives_is_what_the_lessons_compute() {
        use crate::model::decode_demo::shared_prompt_tokens;
        use crate::model::kv_bytes_per_token;
        let engine = Engine::Cpu { reason: "native test".into() };
        for id in ["llama-3-8b", "gemma-3-27b"] {
            let model = preset(id).unwrap();
            let mut run = DecodeRun::start(&engine, model, DType::Fp16);
            while run.snapshot().b_tokens.is_none() {
                ready(run.advance(&engine, || 0.0));
            }
            let snap = run.refreshed();
            // Llama 3 8B: 32 tokens x 131,072 B; the same arithmetic for Gemma's two layer kinds.
            let shared = shared_prompt_tokens(model);
            assert_eq!(snap.shared_tokens, shared, "{id}");
            assert_eq!(snap.saved_bytes, u128::from(shared) * kv_bytes_per_token(model, DType::Fp16).unwrap(), "{id}");
        }
    }

    #[test]
    fn windowed_layers_recycle_their_pages() {
        let model = decode_model("L4.d256.h4.kv2.pat1w64-1g").unwrap();
        let snap = run_to_the_end(&model);
        assert_eq!(snap.state, RunState::Done);
        let sliding = snap.layers.iter().find(|l| l.kind.noun() == "sliding").unwrap();
        let global = snap.layers.iter().find(|l| l.kind.noun() == "global").unwrap();
        // A 64-token window keeps at most 64 / 16 + 1 = 5 pages per request.
        assert!(sliding.live_pages <= 10 && sliding.recycled_pages > 0);
        assert_eq!(global.recycled_pages, 0);
        assert_eq!(snap.a_model_bytes, 2 * 512 * 64 + 2 * 512 * 256);
    }

    #[test]
    fn a_buffer_that_cannot_be_allocated_fails_the_run_with_its_reason() {
        let mut model = preset("llama-3-8b").unwrap().clone();
        model.attn.n_kv_heads = 0;
        let run = DecodeRun::start(&Engine::Cpu { reason: "native test".into() }, &model, DType::Fp16);
        assert!(run.is_finished());
        assert_eq!(run.snapshot().state, RunState::Failed);
        assert!(run.snapshot().message.starts_with("Could not allocate the K/V buffer: "));
    }
}
