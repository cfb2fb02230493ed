//! The language model's rows of the benchmark: `matmul` at the model's shapes and the whole forward
//! pass, timed as the attention cases are ([`bench`]: GPU timestamps where granted, median of
//! repetitions) and given as a fraction of the measured FMA peak.

use crate::attention::AttentionShape;
use crate::attention::inputs::SplitMix64;
use crate::gpu::bench::{self, Repetitions};
use crate::gpu::launch::Dispatch;
use crate::gpu::lm_forward::{self, LmRequest, LmWeights};
use crate::gpu::lm_weights::LmGeometry;
use crate::gpu::matmul::{MatmulBuffers, MatmulForm, MatmulLaunch};
use crate::gpu::{GpuContext, GpuError, Kernels};
use crate::lm::forward::max_tokens_of;
use crate::lm::weight_plan::WeightFormat;
use crate::model::Model;
use crate::model::mask::Mask;

/// X rows of the matmul rows: a 256-token prefill.
pub const MATMUL_ROWS: u32 = 256;

/// (inputs, outputs) of the launches the shipped model's forward pass makes (`lm_forward`): Q/K/V
/// fused, O, gate/up fused, down, the output head (over every row, as the benchmark's pass asks).
pub const MATMUL_SHAPES: [(u32, u32); 5] = [(192, 384), (256, 192), (192, 1024), (512, 192), (192, 4096)];

/// Work one submission of a matmul row should hold at least: a single small launch (O is 25 MFLOP)
/// is timed mostly as submission and read-back overhead, while the forward pass records
/// all its launches in one submission. Smaller shapes are launched several times back to back.
pub const MIN_SUBMISSION_FLOPS: u64 = 32_000_000;

/// Back-to-back launches of a `flops` matmul per timed submission (1 to 16).
pub fn launches_per_submission(flops: u64) -> u32 {
    MIN_SUBMISSION_FLOPS.div_ceil(flops.max(1)).clamp(1, 16) as u32
}

/// One timed row.
#[derive(Clone, Debug, PartialEq)]
pub struct OpResult {
    /// What ran, e.g. "matmul direct 4x4x8".
    pub name: String,
    /// Its size, e.g. "256 x 192 -> 1024".
    pub shape: String,
    /// Launches per timed submission; the times are per launch.
    pub launches: u32,
    pub ms_median: f64,
    pub ms_min: f64,
    pub gflops: f64,
    pub fma_gflops: f64,
}

impl OpResult {
    pub fn fraction_of_peak(&self) -> f64 {
        self.gflops / self.fma_gflops
    }
}

/// The name of the matmul form a launch uses now.
pub fn matmul_name(kernels: &Kernels) -> String {
    match kernels.matmul.form() {
        MatmulForm::Tiled => "matmul tiled 64x64".into(),
        form => {
            let b = kernels.matmul.block();
            let name = if form == MatmulForm::Direct { "direct" } else { "subgroup" };
            format!("matmul {name} {}x{}x{}", b.rows, b.cols, b.lanes)
        }
    }
}

/// Times `Y = X Wᵀ + bias` for `MATMUL_ROWS` rows of seeded inputs (per launch: small shapes are
/// launched [`launches_per_submission`] times in each timed submission).
pub async fn run_matmul(
    ctx: &GpuContext,
    kernels: &Kernels,
    (inputs, outputs): (u32, u32),
    fma_gflops: f64,
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<OpResult, GpuError> {
    let launch = MatmulLaunch::new(MATMUL_ROWS, inputs, outputs);
    let mut rng = SplitMix64::new(0x5eed);
    let mut random = |len: u32| -> Vec<f32> { (0..len).map(|_| rng.next_signed_unit()).collect() };
    let x = ctx.storage_from("x", &random(MATMUL_ROWS * inputs))?;
    let w = ctx.storage_from("w", &random(outputs * inputs))?;
    let bias = ctx.storage_from("bias", &random(outputs))?;
    let y = ctx.storage_output("y", u64::from(MATMUL_ROWS * outputs) * 4)?;
    let dispatch = kernels.matmul.prepare(
        ctx,
        &MatmulBuffers { x: &x, w: &w, w_format: WeightFormat::F32, bias: Some(&bias), y: &y },
        launch,
    )?;
    let launches = launches_per_submission(launch.flops());
    let repeated = vec![&dispatch; launches as usize];
    let (ms_all, ms_min_all) = time(ctx, &repeated, reps, now_ms).await?;
    let (ms_median, ms_min) = (ms_all / f64::from(launches), ms_min_all / f64::from(launches));
    Ok(OpResult {
        name: matmul_name(kernels),
        shape: format!("{MATMUL_ROWS} x {inputs} -> {outputs}"),
        launches,
        ms_median,
        ms_min,
        gflops: bench::gflops(launch.flops(), ms_median),
        fma_gflops,
    })
}

/// Times the whole forward pass over `tokens` seeded token ids, every layer's probabilities included
/// (their flops counted: the row softmax's Q·Kᵀ), logits of every position.
pub async fn run_lm_forward(
    ctx: &GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    tokens: u32,
    fma_gflops: f64,
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<OpResult, GpuError> {
    let g = weights.geometry;
    let mut rng = SplitMix64::new(0x1d5);
    let ids: Vec<u32> = (0..tokens).map(|_| (rng.next_u64() % u64::from(g.vocab)) as u32).collect();
    let request = LmRequest { last_logits: None, probabilities: true, ..Default::default() };
    // The kernels' forms a page's passes of this model take after their first (compiled in the
    // warm-up, not timed), whatever ran before: this row and the decode rows after it time them.
    lm_forward::warm_up(ctx, kernels, weights, tokens);
    let prepared = lm_forward::prepare(ctx, kernels, weights, &ids, request).await?;
    let (ms_median, ms_min) = time(ctx, &prepared.dispatches(), reps, now_ms).await?;
    let flops = g.flops(&weights.masks(), tokens, tokens, true);
    Ok(OpResult {
        name: "lm forward".into(),
        shape: format!("{tokens} tokens, {} layers, all probabilities", g.layers),
        launches: 1,
        ms_median,
        ms_min,
        gflops: bench::gflops(flops, ms_median),
        fma_gflops,
    })
}

/// How many tokens the decode rows cache before the step they time: the longest text the page runs
/// the model on ([`max_tokens_of`]), less the token decoded (127 for the trained model). The native
/// bench and the bench view both ask here, so their rows time the same step.
pub fn decode_cached_tokens(model: &Model) -> u32 {
    u32::try_from(max_tokens_of(model)).unwrap_or(u32::MAX).saturating_sub(1).max(1)
}

/// The decode rows' names: Generate's f32 cache read contiguously, and in pages through tables.
pub const LM_DECODE_ROWS: [&str; 2] = ["lm decode contiguous", "lm decode paged"];

/// Times one decode step of the model (the pass that adds one token after `cached` ones) against
/// the contiguous f32 cache and against the same rows in pages of one pool (Generate's), alternating
/// the two (A B A B ...) so both run under the same load. The copies of the new K and V rows are
/// not timed (neither form's). Flops: the matmuls of one token, 4 d per attended (query, key) pair.
pub async fn run_lm_decode(
    ctx: &GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    cached: u32,
    fma_gflops: f64,
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<[OpResult; 2], GpuError> {
    let g = weights.geometry;
    let mut rng = SplitMix64::new(0xdec0);
    let ids: Vec<u32> = (0..=cached).map(|_| (rng.next_u64() % u64::from(g.vocab)) as u32).collect();
    let (prompt, next) = ids.split_at(cached as usize);
    let mut contiguous = lm_forward::LmCache::new(ctx, weights, cached + 1)?;
    let mut paged = lm_forward::LmPagedCache::new(ctx, weights, cached + 1)?;
    lm_forward::decode(ctx, kernels, weights, &mut contiguous, prompt).await?;
    lm_forward::decode_paged(ctx, kernels, weights, &mut paged, prompt).await?;
    let flat = lm_forward::prepare_decode(ctx, kernels, weights, &contiguous, next).await?;
    let pages = lm_forward::prepare_decode_paged(ctx, kernels, weights, &paged, next).await?;
    let forms = [flat.dispatches(), pages.dispatches()];
    let mut samples = [Vec::new(), Vec::new()];
    for round in 0..2 + reps.max.max(2) {
        for (dispatches, times) in forms.iter().zip(&mut samples) {
            let ms = bench::time_once(ctx, dispatches, now_ms).await?;
            if round >= 2 {
                times.push(ms);
            }
        }
    }
    let flops = decode_flops(weights.geometry, &weights.masks(), cached + 1);
    let shape = format!("1 token after {cached} cached, {} layers", g.layers);
    let row = |name: &str, times: &[f64]| -> Result<OpResult, GpuError> {
        let st = bench::stats(times).ok_or_else(|| GpuError::InvalidInput("no repetitions".into()))?;
        let (ms_median, ms_min) = (st.median_ms, st.min_ms);
        let gflops = bench::gflops(flops, ms_median);
        Ok(OpResult { name: name.into(), shape: shape.clone(), launches: 1, ms_median, ms_min, gflops, fma_gflops })
    };
    Ok([row(LM_DECODE_ROWS[0], &samples[0])?, row(LM_DECODE_ROWS[1], &samples[1])?])
}

/// Flops of one decoded token over `n_kv` keys (itself included): every matmul of one row, and 4 d
/// per (query head, key) pair each layer's mask lets it attend.
fn decode_flops(g: LmGeometry, masks: &[Mask], n_kv: u32) -> u64 {
    let shape = AttentionShape { h_q: g.h_q, h_kv: g.h_kv, n_q: 1, n_kv, d: g.head_dim };
    let pairs: u64 = masks.iter().map(|&m| shape.attended_pairs(m)).sum();
    g.flops(&[], 1, 1, false) + 4 * u64::from(g.head_dim) * pairs
}

/// (median, min) milliseconds of one submission of `dispatches`, after a warm-up.
async fn time(
    ctx: &GpuContext,
    dispatches: &[&Dispatch],
    reps: Repetitions,
    now_ms: fn() -> f64,
) -> Result<(f64, f64), GpuError> {
    let samples = bench::timed_samples(ctx, dispatches, reps, now_ms).await?;
    let st = bench::stats(&samples).ok_or_else(|| GpuError::InvalidInput("no repetitions".into()))?;
    Ok((st.median_ms, st.min_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trained model, one token after 127 (128 keys), by hand: per layer the matmuls of one row,
    /// 2 x (192 x 384 QKV + 256 x 192 O + 192 x 1,024 gate and up + 512 x 192 down) = 835,584, four
    /// layers 3,342,336; the logits 2 x 192 x 4,096 = 1,572,864; attention 4 x 32 per (head, key) pair,
    /// 8 heads over 128 keys in the global layer and 64 in each of the three sliding ones: 327,680.
    #[test]
    fn a_decoded_tokens_flops_by_hand() {
        let g = LmGeometry { d_model: 192, h_q: 8, h_kv: 2, head_dim: 32, ffn: 512, vocab: 4096, layers: 4 };
        let sliding = Mask::Sliding { window_tokens: 64 };
        let masks = [sliding, sliding, sliding, Mask::Causal];
        assert_eq!(decode_flops(g, &masks, 128), 3_342_336 + 1_572_864 + 327_680);
    }

    #[test]
    fn decode_rows_cache_the_longest_text_but_one() {
        // The trained model reads 128 tokens: 127 cached, the 128th decoded.
        let trained = crate::catalog::presets::preset(crate::catalog::presets::TRAINED_ID).unwrap();
        assert_eq!(decode_cached_tokens(trained), 127);
        let mut long = trained.clone();
        long.max_position_embeddings = 1 << 20;
        assert_eq!(decode_cached_tokens(&long), 1023, "the page's own cap of 1,024 tokens, less one");
    }

    #[test]
    fn small_shapes_share_a_submission() {
        let flops = |(inputs, outputs)| MatmulLaunch::new(MATMUL_ROWS, inputs, outputs).flops();
        // 2 x 256 x 192 x 64 = 6,291,456 flops: 32 M / 6.29 M = 5.09, so 6 launches.
        assert_eq!(launches_per_submission(flops((192, 64))), 6);
        // 2 x 256 x 192 x 256 = 25,165,824: 2 launches.
        assert_eq!(launches_per_submission(flops((192, 256))), 2);
        assert_eq!(launches_per_submission(flops((192, 384))), 1);
        assert_eq!(launches_per_submission(flops((192, 4096))), 1);
        assert_eq!(launches_per_submission(0), 16);
    }
}
