//! The benchmark view's rows for the trained model: the matrix multiply at each of its projection
//! shapes, its whole forward pass over 256 tokens, and one decode step against the contiguous f32
//! cache and against Generate's pages, timed on this GPU (pipelines compiled in a warm-up first) as
//! fractions of the adapter's FMA peak. Its files are fetched when it is started.

use std::rc::Rc;

use leptos::prelude::*;

use super::bench_ops::{OpPanel, fma_peak};
use super::browser;
use super::trained_compute;
use crate::catalog::presets::TRAINED_FILES;
use crate::engine::Engine;
use crate::gpu::bench::Repetitions;
use crate::gpu::bench_lm::{self, MATMUL_SHAPES, OpResult};
use crate::model::units::format_thousands;

/// Repetitions per row: as few as the attention cases take in the browser.
const REPS: Repetitions = Repetitions { max: 5, budget_ms: 2000.0, max_run_ms: None };
/// Tokens of the timed forward pass (twice the model's trained length: a benchmark, not a prediction).
const FORWARD_TOKENS: u32 = 256;

#[component]
pub fn BenchLmPanel(engine: Rc<Engine>, fma_gflops: RwSignal<Option<f64>>) -> impl IntoView {
    let explain = format!(
        "The matrix multiply at each projection shape of Attention Lab tiny ({} rows), and its whole forward pass \
        over {FORWARD_TOKENS} tokens with every head's probabilities (its attention and probability rows in the kernels' \
        forms the page's passes of the model take after their first), each after a warm-up that compiles its pipelines. \
        Times are per launch: a shape under {} MFLOP is launched several times in each timed submission, as the forward pass \
        records all its launches in one. Then one decode step after the longest text the model reads, against the contiguous f32 \
        KV cache and against Generate's cache in pages of one pool read through page tables, the two alternating (the new \
        rows' copies not timed). Fetches the model's files ({} bytes) the first time.",
        bench_lm::MATMUL_ROWS,
        bench_lm::MIN_SUBMISSION_FLOPS / 1_000_000,
        format_thousands(TRAINED_FILES.iter().map(|(_, b)| u128::from(*b)).sum())
    );
    let time = move |rows, status| {
        let engine = engine.clone();
        async move { time_model(&engine, fma_gflops, rows, status).await }
    };
    view! { <OpPanel id="bench-lm" title="The trained model's kernels" explain button="Time the trained model" time/> }
}

/// Measures the peak (once per page), then each matmul shape and the forward pass, adding each row
/// as it finishes; what to say after them.
async fn time_model(
    engine: &Rc<Engine>,
    fma_gflops: RwSignal<Option<f64>>,
    rows: RwSignal<Vec<OpResult>>,
    status: RwSignal<String>,
) -> Result<String, String> {
    let Some((ctx, kernels)) = engine.gpu() else { return Err("no WebGPU".into()) };
    let peak = fma_peak(ctx, kernels, fma_gflops, status).await?;
    for (i, shape) in MATMUL_SHAPES.into_iter().enumerate() {
        status.try_set(format!("Matrix multiply {} of {}…", i + 1, MATMUL_SHAPES.len()));
        let row =
            bench_lm::run_matmul(ctx, kernels, shape, peak, REPS, browser::now_ms).await.map_err(|e| e.to_string())?;
        rows.try_update(|r| r.push(row));
    }
    status.try_set("Fetching the model…".into());
    let lm = trained_compute::load().await?;
    let weights = lm.gpu_weights(engine)?;
    status.try_set(format!("The forward pass over {FORWARD_TOKENS} tokens…"));
    let row = bench_lm::run_lm_forward(ctx, kernels, &weights, FORWARD_TOKENS, peak, REPS, browser::now_ms)
        .await
        .map_err(|e| e.to_string())?;
    rows.try_update(|r| r.push(row));
    let cached = bench_lm::decode_cached_tokens(&lm.model);
    status.try_set(format!("A decode step after {cached} tokens, contiguous and paged…"));
    let decode = bench_lm::run_lm_decode(ctx, kernels, &weights, cached, peak, REPS, browser::now_ms)
        .await
        .map_err(|e| e.to_string())?;
    rows.try_update(|r| r.extend(decode));
    Ok(format!("Done: {} rows.", MATMUL_SHAPES.len() + 3))
}
