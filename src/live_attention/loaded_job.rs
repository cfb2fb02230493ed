//! A job over a loaded model's weights (the trained model, or a dropped checkpoint): its whole
//! forward pass (kept from the last job when the tokens are the same), then the layer's heads handed
//! to the sink one at a time, the logits after the last token beside them.

use super::head_map::HeadMap;
use super::loaded::LoadedLm;
use super::plan::Progress;
use super::request::Request;
use super::sink::LiveSink;
use crate::engine::Engine;
use crate::event_loop::{breathe, micro_yield, now_ms};
use crate::lm::head_scores::HeadScores;
use std::rc::Rc;
use std::sync::Arc;

/// Runs `lm`'s pass for `req` as job `job` and hands each head's map to the sink; stops early when
/// the sink no longer wants the job.
pub(super) async fn run(
    engine: &Rc<Engine>,
    lm: &LoadedLm,
    req: &Request,
    job: u64,
    started_ms: f64,
    sink: &dyn LiveSink,
) {
    let ids = req.ids.as_deref().cloned().unwrap_or_default();
    let on_gpu = engine.is_gpu();
    sink.progress(&|p| *p = Progress { job, total: req.heads.len(), on_gpu, ..Default::default() });
    sink.inputs(None);
    let (pass, reused) = match lm.pass(engine, &ids, &|| sink.wanted()).await {
        Ok(found) => found,
        Err(e) => {
            if sink.wanted() {
                let error = format!("The model's forward pass failed: {e}");
                sink.next_token(&ids, Err(&error));
                sink.progress(&|p| (p.error, p.finished) = (Some(error.clone()), true));
            }
            return;
        }
    };
    if !sink.wanted() {
        return;
    }
    sink.next_token(&ids, Ok(&pass.last_logits));
    let layer = req.layout.layer as usize;
    let maps = pass.probs.get(layer).map(|probs| head_maps(probs, &ids, req)).unwrap_or_default();
    let draw_started = now_ms();
    for (i, map) in maps.into_iter().enumerate() {
        sink.head_ready(i, Arc::new(map));
        sink.progress(&|p| p.done = i + 1);
        micro_yield().await;
        breathe().await;
        if !sink.wanted() {
            return;
        }
    }
    let note = pass_note(lm.layers(), ids.len(), pass.on_gpu, pass.ms, layer, (reused, pass.first_on_device));
    let total_ms = now_ms() - started_ms;
    sink.progress(&|p| {
        p.finished = true;
        p.on_gpu = pass.on_gpu;
        p.total_ms = total_ms;
        p.kernel_ms = if reused { 0.0 } else { pass.ms };
        p.draw_ms = now_ms() - draw_started;
        p.note = Some(note.clone());
    });
}

/// The status line's note on a loaded model's pass: where and how long it ran, and whether it was
/// kept from before (`reused`) or paid for the first upload (`first_on_device`).
pub fn pass_note(
    layers: usize,
    tokens: usize,
    on_gpu: bool,
    ms: f64,
    layer: usize,
    (reused, first_on_device): (bool, bool),
) -> String {
    let where_ = if on_gpu { "GPU" } else { "CPU" };
    format!(
        "The model's whole forward pass ({layers} layers over {tokens} tokens, every head's probabilities) ran on the \
         {where_} in {ms:.0} ms{}; these are layer {layer}'s heads.",
        match (reused, first_on_device) {
            (true, _) => " (kept from when this text was last computed)",
            (false, true) => " (the first pass: uploading the weights and compiling the kernels included)",
            (false, false) => "",
        }
    )
}

/// Each of `heads`' maps from one layer's probabilities (`[h_q, t, t]`), with what each measures.
pub fn head_maps(probs: &[f32], ids: &[u32], req: &Request) -> Vec<HeadMap> {
    let t = ids.len();
    req.heads
        .iter()
        .filter_map(|&h| {
            let values = probs.get(h as usize * t * t..)?.get(..t * t)?.to_vec();
            let scores = HeadScores::measure(&values, ids, req.mask);
            Some(HeadMap {
                head: h,
                kv_head: req.layout.kv_head(h),
                teaching: None,
                rows: t as u32,
                cols: t as u32,
                values,
                pooled: None,
                n_q: t as u32,
                n_kv: t as u32,
                row_tokens: req.tokens.clone(),
                col_tokens: req.tokens.clone(),
                mask: req.mask,
                q_offset: 0,
                scores: Some(scores),
            })
        })
        .collect()
}
