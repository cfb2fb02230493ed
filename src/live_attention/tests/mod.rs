//! The service on the CPU tier, through a sink that records what it is handed; how jobs are cut up
//! ([`plans`]) and batches run ([`batches`]).

mod batches;
mod plans;
mod text_grads;

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use super::*;
use crate::attention::AttentionProblem;
use crate::attention::layer_inputs::{LayerInputs, LayerLayout};
use crate::attention::pooled::{Pool, block_range};
use crate::attention::tokens::generated_tokens;
use crate::catalog::presets::preset;
use crate::engine::MapOutput;
use crate::lm::checkpoint::Checkpoint;
use crate::lm::forward::CpuPass;
use crate::lm::kv_quality::quality;
use crate::lm::shipped_model::{shipped, shipped_tokenizer};
use crate::model::Mask;
use crate::model::kv_evict::EvictPolicy;
use crate::model::kv_quant::{Fp8, KvScheme, ScaleScope};

/// What a loaded model's job said after the text: the ids and how many logits, or why it failed.
type NextToken = Result<(Vec<u32>, usize), String>;

/// Records every call; stops wanting the job once `stop_after` heads have arrived (a newer request).
#[derive(Default)]
struct Recorder {
    stop_after: Option<usize>,
    progress: RefCell<Progress>,
    /// Every `done` the progress went through, in order.
    done_seen: RefCell<Vec<usize>>,
    heads: RefCell<Vec<(usize, Arc<HeadMap>)>>,
    focused: RefCell<Vec<Option<Arc<HeadMap>>>>,
    inputs: RefCell<Vec<bool>>,
    next_token: RefCell<Vec<NextToken>>,
    asked: Cell<usize>,
}

impl LiveSink for Recorder {
    fn wanted(&self) -> bool {
        self.asked.set(self.asked.get() + 1);
        self.stop_after.is_none_or(|n| self.heads.borrow().len() < n)
    }
    fn progress(&self, change: &dyn Fn(&mut Progress)) {
        let mut p = self.progress.borrow_mut();
        change(&mut p);
        let mut seen = self.done_seen.borrow_mut();
        if seen.last() != Some(&p.done) {
            seen.push(p.done);
        }
    }
    fn inputs(&self, inputs: Option<Arc<LayerInputs>>) {
        self.inputs.borrow_mut().push(inputs.is_some());
    }
    fn head_ready(&self, slot: usize, map: Arc<HeadMap>) {
        self.heads.borrow_mut().push((slot, map));
    }
    fn focused(&self, map: Option<Arc<HeadMap>>) {
        self.focused.borrow_mut().push(map);
    }
    fn next_token(&self, ids: &[u32], logits: Result<&[f32], &str>) {
        self.next_token.borrow_mut().push(logits.map(|l| (ids.to_vec(), l.len())).map_err(str::to_owned));
    }
}

fn cpu() -> Rc<Engine> {
    Rc::new(Engine::Cpu { reason: "a test".into() })
}

/// `n` generated tokens through Llama 3 8B's layer 0 (32 query heads over 8 KV heads, 128 wide),
/// causal, with synthetic weights.
fn llama_request(n: usize, heads: Vec<u32>, cells: (u32, u32)) -> Request {
    Request {
        layout: LayerLayout::of(preset("llama-3-8b").unwrap(), 0),
        tokens: Arc::new(generated_tokens(n, 7)),
        kv_tokens: None,
        seed: 7,
        teach: false,
        mask: Mask::Causal,
        heads,
        pool: Pool::Max,
        map_cells: cells.0,
        focus_cells: cells.1,
        focus: None,
        ids: None,
    }
}

fn run_on_cpu(engine: &Rc<Engine>, weights: &Weights, req: &Request, sink: &Recorder) {
    pollster::block_on(run(engine, weights, req, 1, 0.0, sink));
}

#[test]
fn progress_reaches_the_total_and_every_head_arrives_once() {
    let req = llama_request(12, (0..32).collect(), (12, 12));
    let sink = Recorder::default();
    run_on_cpu(&cpu(), &Weights::Synthetic, &req, &sink);
    let p = sink.progress.borrow().clone();
    assert_eq!((p.job, p.done, p.total, p.finished, p.on_gpu, p.error), (1, 32, 32, true, false, None));
    // Head by head: 0, 1, ..., 32, never back.
    assert_eq!(*sink.done_seen.borrow(), (0..=32).collect::<Vec<_>>());
    let heads = sink.heads.borrow();
    assert_eq!(
        heads.iter().map(|(slot, m)| (*slot, m.head)).collect::<Vec<_>>(),
        (0..32).map(|h| (h, h as u32)).collect::<Vec<_>>()
    );
    // Every cell, each query's row a softmax: it sums to 1 over the keys it sees.
    for (_, map) in heads.iter() {
        assert_eq!((map.rows, map.cols, map.pooled, map.kv_head), (12, 12, None, map.head / 4));
        for row in map.values.chunks(12) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
        }
        assert_eq!(map.values[1], 0.0, "query 0 never sees key 1");
    }
    assert_eq!((sink.inputs.borrow().clone(), sink.focused.borrow().len()), (vec![true], 1));
    assert!(sink.focused.borrow()[0].is_none() && sink.next_token.borrow().is_empty());
}

#[test]
fn a_superseded_job_stops_at_its_next_piece() {
    // On the CPU the heads go in batches of one KV group (4 heads): a newer request arriving with the
    // fifth head (the first of the second group) stops the job before the sixth.
    let req = llama_request(12, (0..32).collect(), (12, 12));
    let sink = Recorder { stop_after: Some(5), ..Default::default() };
    run_on_cpu(&cpu(), &Weights::Synthetic, &req, &sink);
    assert_eq!(sink.heads.borrow().len(), 5);
    let p = sink.progress.borrow().clone();
    assert_eq!((p.done, p.finished, p.error), (5, false, None));
    assert!(sink.focused.borrow().is_empty(), "a stopped job hands over no enlarged head");
    // A job nobody wants from the start builds its inputs and stops before its first batch.
    let none = Recorder { stop_after: Some(0), ..Default::default() };
    run_on_cpu(&cpu(), &Weights::Synthetic, &req, &none);
    assert!(none.heads.borrow().is_empty() && !none.progress.borrow().finished);
}

#[test]
fn pooled_maps_are_the_exact_probabilities_pooled_by_block() {
    // 300 tokens, more than EXACT_MAX_N: pooled to 10 x 10 cells, the focused head to 20 x 20.
    let n = 300u32;
    let mut req = llama_request(n as usize, vec![0, 5], (10, 20));
    req.focus = Some(5);
    let sink = Recorder::default();
    run_on_cpu(&cpu(), &Weights::Synthetic, &req, &sink);
    let inputs = req.inputs();
    let exact = |h: u32| {
        let batch =
            pollster::block_on(batch::batch_inputs(&inputs, &[h], &mut batch::KCache::new(), &|| true)).unwrap();
        let steer = batch::Steering { keep_going: &|| true, progress: &|_| {}, now_ms: &|| 0.0 };
        let (engine, mut kernel_ms) = (cpu(), 0.0);
        let values =
            batch::head_values(&engine, &inputs, &batch, Mask::Causal, MapOutput::Exact, &mut kernel_ms, &steer);
        pollster::block_on(values).unwrap().remove(0)
    };
    // Cell (r, c) is the largest probability of its block of queries and keys.
    let pooled_by_hand = |values: &[f32], cells: u32| -> Vec<f32> {
        let mut out = Vec::new();
        for r in 0..cells {
            for c in 0..cells {
                let ((q0, q1), (k0, k1)) = (block_range(r, cells, n), block_range(c, cells, n));
                let block = (q0..q1).flat_map(|q| (k0..k1).map(move |k| values[(q * n + k) as usize]));
                out.push(block.fold(0.0f32, f32::max));
            }
        }
        out
    };
    let heads = sink.heads.borrow();
    assert_eq!(heads.len(), 2);
    for (slot, map) in heads.iter() {
        assert_eq!((map.rows, map.cols, map.pooled, map.n_q), (10, 10, Some(Pool::Max), n));
        let want = pooled_by_hand(&exact(map.head), 10);
        for (got, want) in map.values.iter().zip(&want) {
            assert!((got - want).abs() < 1e-6, "slot {slot}: {got} vs {want}");
        }
    }
    let focused = sink.focused.borrow()[0].clone().expect("the focused head at its own size");
    assert_eq!((focused.head, focused.rows, focused.cols), (5, 20, 20));
    let want = pooled_by_hand(&exact(5), 20);
    assert!(focused.values.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-6));
}

fn trained_model() -> (Rc<LoadedLm>, Checkpoint) {
    (Rc::new(LoadedLm::from_checkpoint(shipped(), shipped_tokenizer())), shipped())
}

#[test]
fn the_trained_model_runs_through_the_service_and_keeps_its_pass() {
    let (lm, checkpoint) = trained_model();
    let ids = lm.tokenizer.encode("The compiler checks the borrow, and the compiler checks the borrow");
    let t = ids.len();
    // Layer 3 is global (causal); every head, every cell.
    let req = Request {
        layout: LayerLayout::of(&lm.model, 3),
        tokens: Arc::new(vec!["·".into(); t]),
        map_cells: t as u32,
        focus_cells: t as u32,
        heads: (0..8).collect(),
        ids: Some(Arc::new(ids.clone())),
        ..llama_request(t, vec![], (0, 0))
    };
    let engine = cpu();
    let weights = Weights::Loaded(lm.clone());
    let sink = Recorder::default();
    run_on_cpu(&engine, &weights, &req, &sink);
    // The layer's probabilities are the CPU forward pass's, head by head.
    let mut pass = CpuPass::new(&checkpoint, &ids, 1).unwrap();
    while pass.step() {}
    let probs = &pass.finish().probs[3];
    let heads = sink.heads.borrow();
    assert_eq!(heads.len(), 8);
    for (slot, map) in heads.iter() {
        assert_eq!((map.head as usize, map.rows as usize, map.pooled), (*slot, t, None));
        assert_eq!(map.values, probs[*slot * t * t..][..t * t]);
        assert!(map.scores.is_some(), "a trained head's scores are measured");
    }
    assert_eq!(*sink.next_token.borrow(), vec![Ok((ids.clone(), lm.model.vocab_size as usize))]);
    assert_eq!(*sink.inputs.borrow(), vec![false]);
    let p = sink.progress.borrow().clone();
    assert_eq!((p.done, p.total, p.finished, p.on_gpu), (8, 8, true, false));
    let note = p.note.unwrap();
    assert!(note.starts_with(&format!("The model's whole forward pass (4 layers over {t} tokens")), "{note}");
    assert!(note.contains("ran on the CPU in") && note.ends_with("these are layer 3's heads."), "{note}");
    // Another layer over the same text reuses the pass: no kernel time, and the note says so.
    let again = Recorder::default();
    run_on_cpu(&engine, &weights, &Request { layout: LayerLayout::of(&lm.model, 0), ..req }, &again);
    let p = again.progress.borrow().clone();
    assert_eq!((p.finished, p.kernel_ms), (true, 0.0));
    assert!(p.note.unwrap().contains("(kept from when this text was last computed); these are layer 0's heads."));
}

#[test]
fn the_pass_note_says_where_it_ran_and_what_it_reused() {
    assert_eq!(
        loaded_job::pass_note(4, 12, true, 31.6, 2, (false, true)),
        "The model's whole forward pass (4 layers over 12 tokens, every head's probabilities) ran on the GPU in 32 ms \
         (the first pass: uploading the weights and compiling the kernels included); these are layer 2's heads."
    );
    assert!(loaded_job::pass_note(4, 12, false, 5.0, 0, (false, false)).contains("on the CPU in 5 ms; these"));
}

#[test]
fn head_outputs_are_the_probabilities_times_v() {
    // Each output row is Σ_j p_ij v_j, with p from the probabilities' own kernel (row softmax) and V
    // from the layer's inputs: two twins that must agree. Head 5 reads KV head 1.
    let req = llama_request(20, vec![0, 5], (20, 20));
    let inputs = req.inputs();
    let engine = cpu();
    let outputs = pollster::block_on(head_outputs(&engine, &inputs, &[0, 5], Mask::Causal, &|| true)).unwrap();
    let batch = pollster::block_on(batch::batch_inputs(&inputs, &[0, 5], &mut batch::KCache::new(), &|| true)).unwrap();
    let steer = batch::Steering { keep_going: &|| true, progress: &|_| {}, now_ms: &|| 0.0 };
    let probs = pollster::block_on(batch::head_values(
        &engine,
        &inputs,
        &batch,
        Mask::Causal,
        MapOutput::Exact,
        &mut 0.0,
        &steer,
    ))
    .unwrap();
    let (n, d) = (20usize, 128usize);
    for (i, &h) in [0u32, 5].iter().enumerate() {
        let (_, v) = inputs.kv_head(h / 4);
        assert_eq!(outputs[i].len(), n * d);
        for q in 0..n {
            for c in 0..d {
                let want: f64 = (0..n).map(|k| f64::from(probs[i][q * n + k]) * f64::from(v[k * d + c])).sum();
                let got = f64::from(outputs[i][q * d + c]);
                assert!((got - want).abs() < 1e-5, "head {h}, query {q}, dim {c}: {got} vs {want}");
            }
        }
    }
    // A newer request stops it; more queries than keys are refused by name.
    let stopped = pollster::block_on(head_outputs(&engine, &inputs, &[0], Mask::Causal, &|| false));
    assert_eq!(stopped.unwrap_err(), kv_groups::STOPPED);
    let cross = LayerInputs::new(req.layout.clone(), generated_tokens(3, 1), Some(generated_tokens(2, 2)), 7, false);
    let why = pollster::block_on(head_outputs(&engine, &cross, &[0], Mask::Full, &|| true)).unwrap_err();
    assert_eq!(why, "outputs are computed for at most as many queries as keys (3 queries, 2 keys)");
}

fn pass_with(
    lm: &LoadedLm,
    ids: &[u32],
    scheme: KvScheme,
    keep_going: &dyn Fn() -> bool,
) -> Result<ComparedPass, String> {
    pollster::block_on(lm.pass_with_kv_scheme(&cpu(), ids, scheme, keep_going))
}

#[test]
fn the_cpu_tier_measures_a_cache_scheme_against_full_precision() {
    let (lm, _) = trained_model();
    let ids = [3, 1, 4, 1, 5, 9, 2, 6];
    let full = pass_with(&lm, &ids, KvScheme::Fp32, &|| true).unwrap();
    assert!(!full.on_gpu);
    assert_eq!(full.logits.len(), ids.len() * lm.model.vocab_size as usize);
    assert_eq!(full.probs.len(), lm.layers());
    // The same pass again is the same numbers: KL 0, every top-1 kept.
    let again = pass_with(&lm, &ids, KvScheme::Fp32, &|| true).unwrap();
    let same = quality(&full.logits, &again.logits, &ids).unwrap();
    assert_eq!((same.kl, same.top1), (0.0, 1.0));
    // Two bits per value move the next-token distribution.
    let int2 = pass_with(&lm, &ids, KvScheme::IntGroup { bits: 2, group: 32 }, &|| true).unwrap();
    assert!(quality(&full.logits, &int2.logits, &ids).unwrap().kl > 0.0);
}

#[test]
fn a_superseded_cpu_pass_stops_with_a_reason() {
    let (lm, _) = trained_model();
    let out = pass_with(&lm, &[1, 2, 3], KvScheme::Fp32, &|| false);
    assert!(out.err().unwrap().contains("newer"));
}

#[test]
fn an_evicting_pass_keeps_everything_exactly_and_records_what_it_read() {
    let (lm, _) = trained_model();
    let ids = [3, 1, 4, 1, 5, 9, 2, 6];
    let full = pass_with(&lm, &ids, KvScheme::Fp32, &|| true).unwrap();
    let all = pollster::block_on(lm.pass_with_eviction(&cpu(), &ids, EvictPolicy::Full, ids.len(), &|| true)).unwrap();
    assert_eq!(all.0.logits, full.logits);
    // A window of 2: the last query of every layer reads its two latest keys, no more.
    let (_, record) =
        pollster::block_on(lm.pass_with_eviction(&cpu(), &ids, EvictPolicy::Window, 2, &|| true)).unwrap();
    assert_eq!(record.kept.len(), lm.layers());
    assert!(record.kept.iter().all(|layer| layer[7] == vec![6, 7]));
    assert_eq!(lm.layer_masks().unwrap().len(), lm.layers());
    assert!(pollster::block_on(lm.pass_with_eviction(&cpu(), &ids, EvictPolicy::Window, 2, &|| false)).is_err());
}

#[test]
fn a_kv_groups_gradients_check_against_the_twin_and_sum_over_its_heads() {
    // Llama 3 8B's layer 0 over 12 tokens: head 5 shares KV head 1 with heads 4-7.
    let req = llama_request(12, vec![5], (12, 12));
    let check = pollster::block_on(gradient_check(&cpu(), &req, 5)).unwrap();
    assert_eq!((check.kv_head, check.heads.clone(), check.on_gpu), (1, vec![4, 5, 6, 7], false));
    let names: Vec<&str> = check.tensors.iter().map(|t| t.tensor).collect();
    assert_eq!(names, ["dq", "dk", "dv"]);
    // The CPU tier runs the twin itself: nothing to differ.
    assert!(check.tensors.iter().all(|t| t.rel_error == 0.0 && t.largest > 0.0));
    assert!(check.group_sum_error < 1e-6, "{}", check.group_sum_error);
}

#[test]
fn relative_error_by_hand() {
    // (3, 4) against (3, 5): |(0, -1)| / |(3, 5)| = 1 / sqrt(34).
    let e = gradients::relative_error(&[3.0, 4.0], &[3.0, 5.0]);
    assert!((e - 1.0 / 34f64.sqrt()).abs() < 1e-12);
    assert_eq!(gradients::relative_error(&[0.0], &[0.0]), 0.0);
}

#[test]
fn the_gradient_check_takes_the_prefix_the_pages_thread_computes_quickly() {
    use super::gradients::{CHECK_MAX_MULTIPLY_ADDS, checked_tokens};
    // 4 heads of 128: 3 x 7 x 128 x 4 = 10,752 multiply-adds a pair; 48,000,000 / 10,752 = 4,464.3
    // pairs: 66 x 66 = 4,356 fit, 67 x 67 = 4,489 do not.
    assert_eq!(CHECK_MAX_MULTIPLY_ADDS, 48_000_000);
    assert_eq!(checked_tokens(256, 256, 128, 4, false), (66, 66));
    assert_eq!(checked_tokens(12, 12, 128, 4, false), (12, 12));
    // Cross-attention keeps its 200 keys: 22 x 200 = 4,400 fit, 23 x 200 = 4,600 do not.
    assert_eq!(checked_tokens(256, 200, 128, 4, true), (22, 200));
    // Absurd widths still check one query.
    assert_eq!(checked_tokens(256, 256, 1_000_000, 64, false).0, 1);
}

#[test]
fn generation_without_a_gpu_runs_whole_cpu_passes_with_the_scheme_applied() {
    use crate::live_attention::generate::Generator;
    let (lm, _) = trained_model();
    let ids = [3, 1, 4, 1, 5, 9, 2, 6];
    let vocab = lm.model.vocab_size as usize;
    let (mut generator, first) = pollster::block_on(Generator::start(&lm, cpu(), &ids[..7], KvScheme::Fp32)).unwrap();
    assert!(!generator.on_gpu());
    let whole = pass_with(&lm, &ids, KvScheme::Fp32, &|| true).unwrap();
    assert_close(&first, &whole.logits[6 * vocab..7 * vocab]);
    // The next token's logits are the last row of a pass over the whole sequence.
    let next = pollster::block_on(generator.next(&lm, &ids, KvScheme::Fp32)).unwrap();
    assert_close(&next, &whole.logits[7 * vocab..]);
    // With a scheme, each token's K and V are rounded: the rounded pass's last row.
    let int4 = KvScheme::IntGroup { bits: 4, group: 32 };
    let rounded = pass_with(&lm, &ids, int4, &|| true).unwrap();
    let next = pollster::block_on(generator.next(&lm, &ids, int4)).unwrap();
    assert_close(&next, &rounded.logits[7 * vocab..]);
    assert!(next.iter().zip(&whole.logits[7 * vocab..]).any(|(a, b)| (a - b).abs() > 1e-4));
    // fp8: the scale is the prompt's, set when the generator started over 7 tokens, as a packed cache
    // sets it at prefill: the pass whose fp8 scales the first 7 tokens alone set.
    let e4m3 = KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor };
    let (mut fp8, first) = pollster::block_on(Generator::start(&lm, cpu(), &ids[..7], e4m3)).unwrap();
    let calibrated = |n: usize| {
        let mut pass = CpuPass::new(lm.host().unwrap(), &ids[..n], 1).unwrap().with_kv_scheme_decoded(e4m3, 7);
        while pass.step() {}
        pass.finish().logits
    };
    assert_eq!(first, calibrated(7));
    assert_eq!(pollster::block_on(fp8.next(&lm, &ids, e4m3)).unwrap(), calibrated(8));
}

/// Logits of the same sequence computed by passes of different lengths: equal up to float rounding.
fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-4, "largest difference {worst}");
}

#[test]
fn kv_group_batches_hand_each_group_its_heads_and_stop_for_a_newer_request() {
    // Llama 3 8B's layer 0: four query heads a KV head, so heads 0, 1 share one and 4, 5, 6 the next.
    let req = llama_request(9, vec![0, 1, 4, 5, 6], (64, 64));
    let inputs = req.inputs();
    let seen = RefCell::new(Vec::new());
    let got = pollster::block_on(kv_groups::over_kv_group_batches(&req, &|| true, async |p: &AttentionProblem<'_>| {
        seen.borrow_mut().push((p.shape, p.q.to_vec(), p.k.to_vec()));
        Ok(p.shape.h_q)
    }))
    .unwrap();
    assert_eq!(got, [2, 3]);
    let seen = seen.into_inner();
    for ((shape, q, k), heads) in seen.iter().zip([[0u32, 1].as_slice(), &[4, 5, 6]]) {
        assert_eq!((shape.h_kv, shape.n_q, shape.n_kv, shape.d), (1, 9, 9, 128));
        let want_q: Vec<f32> = heads.iter().flat_map(|&h| inputs.q_head(h)).collect();
        assert_eq!(q, &want_q);
        assert_eq!(k, &inputs.kv_head(req.layout.kv_head(heads[0])).0);
    }
    // A newer request before the first piece, or after the first batch, stops the walk.
    let never =
        pollster::block_on(kv_groups::over_kv_group_batches(&req, &|| false, async |_: &AttentionProblem<'_>| Ok(())));
    assert_eq!(never.unwrap_err(), kv_groups::STOPPED);
    let calls = Cell::new(0);
    let once = pollster::block_on(kv_groups::over_kv_group_batches(
        &req,
        &|| calls.get() == 0,
        async |_: &AttentionProblem<'_>| {
            calls.set(calls.get() + 1);
            Ok(())
        },
    ));
    assert_eq!((once.unwrap_err().as_str(), calls.get()), (kv_groups::STOPPED, 1));
    // More queries than keys: refused before any work.
    let cross = Request { kv_tokens: Some(Arc::new(generated_tokens(4, 3))), ..req };
    let refused =
        pollster::block_on(kv_groups::over_kv_group_batches(&cross, &|| true, async |_: &AttentionProblem<'_>| Ok(())));
    assert!(refused.unwrap_err().contains("9 queries, 4 keys"));
}
