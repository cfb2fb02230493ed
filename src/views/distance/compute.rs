//! The view's work: the explorer's layer and heads for these settings ([`plan`]), then for each of the
//! live-attention service's batches of them, the rows' log-sum-exp and the masses by distance from
//! the `distance_mass` kernel (one GPU submission), or from their CPU twins a slice of rows at a
//! time, through one [`Job`] that the engine places ([`run`]).

use crate::attention::AttentionProblem;
use crate::attention::layer_inputs::LayerLayout;
use crate::attention::teaching_heads::TeachingHead;
use crate::cpu::distance_mass::{add_rows, distance_slots, means};
use crate::cpu::row_softmax::row_log_sum_exp;
use crate::engine::{Engine, Job, check_cpu_size};
use crate::event_loop::breathe;
use crate::gpu::{GpuContext, Kernels};
use crate::live_attention::Request;
use crate::live_attention::kv_groups::{STOPPED, over_kv_group_batches};
use crate::model::Model;
use crate::model::limits::{CPU_SLICE_MULTIPLY_ADDS, kernels_take_head_dim};
use crate::model::units::format_thousands;
use crate::views::heatmaps::request::{Screen, build_request};
use crate::views::registry::Settings;

/// Longest text (or `n`) the view computes.
pub const MAX_TOKENS: u32 = 2048;

/// Most multiply-adds of one head's `Q·Kᵀ` the view runs in one dispatch (about 1,448 tokens of a
/// 1,024-wide head, every one of 2,048 up to 512 wide): a longer dispatch could trip a slow GPU's
/// watchdog, and a submitted dispatch cannot be stopped.
pub const MAX_HEAD_MULTIPLY_ADDS: u64 = 1 << 31;

/// The explorer's request for these settings: its layer, heads, tokens and mask, or why there is
/// nothing to compute (no attention in the layer, cross-attention, too long a text).
pub fn plan(settings: &Settings, model: &Model) -> Result<Request, String> {
    let layout = LayerLayout::of(model, settings.model.layer);
    // The maps' sizes do not matter here: nothing is drawn cell by cell.
    let screen = Screen { width_css_px: 1024.0, device_pixel_ratio: 1.0 };
    let request = build_request(&settings.input, &settings.explorer, layout, screen)?;
    if request.kv_tokens.is_some() {
        return Err("Distances between a query and a key mean nothing across two texts: clear the key text.".into());
    }
    let n = request.n_q();
    if n > MAX_TOKENS {
        return Err(format!(
            "The view computes texts of at most {MAX_TOKENS} tokens, and this one has more: shorten the text or lower n."
        ));
    }
    let work = u64::from(n) * u64::from(n) * u64::from(request.layout.head_dim);
    if work > MAX_HEAD_MULTIPLY_ADDS {
        return Err(format!(
            "{} tokens of {}-wide heads take {} multiply-adds a head, more than the view runs at once ({}): \
             shorten the text.",
            format_thousands(n.into()),
            request.layout.head_dim,
            format_thousands(work.into()),
            format_thousands(MAX_HEAD_MULTIPLY_ADDS.into())
        ));
    }
    if request.heads.is_empty() {
        return Err("No head of this layer is chosen.".into());
    }
    Ok(request)
}

/// Every chosen head's masses by distance, and where they were computed.
#[derive(Clone, Debug, PartialEq)]
pub struct DistanceRun {
    pub heads: Vec<u32>,
    /// Each head's designed pattern, where `teach=on` made it one.
    pub designed: Vec<Option<TeachingHead>>,
    pub n: u32,
    /// `[heads, 2 n − 1]`, slot δ + n − 1 for distance δ (as [`distance_slots`] counts them).
    pub mass: Vec<f32>,
    /// Whether the GPU computed every head's masses (else the CPU twin computed some or all).
    pub on_gpu: bool,
}

impl DistanceRun {
    /// Head `i`'s (in the order computed) masses, distance −(n − 1) first.
    pub fn head(&self, i: usize) -> &[f32] {
        let slots = distance_slots(self.n);
        self.mass.get(i * slots..(i + 1) * slots).unwrap_or(&[])
    }
}

/// The masses of the request's heads: the heatmaps' batches from the live-attention service, each
/// through [`MassByDistance`] on the tier the engine picks; only the masses are kept between batches.
pub async fn run(engine: &Engine, request: &Request, keep_going: &dyn Fn() -> bool) -> Result<DistanceRun, String> {
    let per_batch = over_kv_group_batches(request, keep_going, async |problem: &AttentionProblem<'_>| {
        engine.run(&MassByDistance { problem, keep_going }).await
    })
    .await?;
    let on_gpu = per_batch.iter().all(|(_, on_gpu)| *on_gpu);
    let mass = per_batch.into_iter().flat_map(|(mass, _)| mass).collect();
    let inputs = request.inputs();
    let designed = request.heads.iter().map(|&h| inputs.teaching_head(h)).collect();
    Ok(DistanceRun { heads: request.heads.clone(), designed, n: request.n_q(), mass, on_gpu })
}

/// One batch's masses and whether the GPU computed them: the log-sum-exp pass and `distance_mass` in
/// one submission ([`Kernels::masses_by_distance`]), or their CPU twins a slice of rows at a time.
struct MassByDistance<'a, 'p> {
    problem: &'a AttentionProblem<'p>,
    keep_going: &'a dyn Fn() -> bool,
}

impl Job for MassByDistance<'_, '_> {
    type Output = (Vec<f32>, bool);

    fn fits_gpu(&self) -> bool {
        kernels_take_head_dim(self.problem.shape.d)
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<(Vec<f32>, bool), String> {
        let mass = kernels.masses_by_distance(ctx, self.problem).await.map_err(|e| e.to_string())?;
        Ok((mass, true))
    }

    async fn on_cpu(&self, _: bool) -> Result<(Vec<f32>, bool), String> {
        let p = self.problem;
        check_cpu_size(p.shape)?;
        let (n_q, slots) = (p.shape.n_q, distance_slots(p.shape.n_kv));
        // A row's log-sum-exp and its masses each take a pass over its scores.
        let row_work = 2 * u64::from(p.shape.n_kv) * u64::from(p.shape.d);
        let rows_per_slice = (CPU_SLICE_MULTIPLY_ADDS / row_work.max(1)).clamp(1, u64::from(n_q)) as u32;
        let mut lse = vec![0.0f32; p.shape.h_q as usize * n_q as usize];
        let mut sums = vec![0.0f64; p.shape.h_q as usize * slots];
        for (h, head) in (0..p.shape.h_q).zip(sums.chunks_mut(slots)) {
            for first in (0..n_q).step_by(rows_per_slice as usize) {
                if !(self.keep_going)() {
                    return Err(STOPPED.into());
                }
                let rows = first..(first + rows_per_slice).min(n_q);
                for i in rows.clone() {
                    lse[(h * n_q + i) as usize] = row_log_sum_exp(p, h, i);
                }
                add_rows(p, &lse, h, rows, head);
                breathe().await;
            }
        }
        Ok((means(&sums, n_q), false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::catalog::presets::preset;
    use crate::cpu::row_softmax::row_softmax;

    fn settings(query: &str) -> Settings {
        Settings::from_query(query).0
    }

    #[test]
    fn the_cpu_tier_gives_the_probabilities_diagonals() {
        // GQA preset, the designed heads, a sliding window: the run against the heatmaps' own twin.
        let model = preset("llama-3-8b").unwrap();
        let s = settings(
            "model=llama-3-8b&text=one two three four five six seven&teach=on&heads=0,1,4,5&mask=sliding&window=3",
        );
        let request = plan(&s, model).unwrap();
        let engine = Engine::Cpu { reason: "a test".into() };
        let run = pollster::block_on(run(&engine, &request, &|| true)).unwrap();
        assert!(!run.on_gpu);
        assert_eq!(run.heads, [0, 1, 4, 5]);
        let inputs = request.inputs();
        let n = request.n_q();
        let d = request.layout.head_dim;
        for (i, &h) in run.heads.iter().enumerate() {
            let q = inputs.q_head(h);
            let (k, _) = inputs.kv_head(request.layout.kv_head(h));
            let shape = AttentionShape::square(1, n, d);
            let probs = row_softmax(&AttentionProblem::scores(&q, &k, shape, request.mask, 1.0 / (d as f32).sqrt()));
            let head = run.head(i);
            assert_eq!(head.len(), 2 * n as usize - 1);
            for delta in 0..n as usize {
                let diagonal: f64 =
                    (delta..n as usize).map(|row| f64::from(probs[row * n as usize + row - delta])).sum();
                let got = f64::from(head[n as usize - 1 + delta]);
                assert!((got - diagonal / f64::from(n)).abs() < 1e-6, "head {h} δ {delta}: {got} against {diagonal}");
            }
            // A window of 3 sees nothing ahead and nothing 3 or more back.
            assert!(head[..n as usize - 1].iter().chain(&head[n as usize + 2..]).all(|&x| x == 0.0), "head {h}");
        }
    }

    #[test]
    fn texts_past_the_view_s_length_cross_attention_and_empty_layers_are_refused() {
        let model = preset("gpt2-small").unwrap();
        assert!(plan(&settings("n=2049"), model).unwrap_err().contains("at most 2048 tokens"));
        assert!(plan(&settings("n=100000"), model).unwrap_err().contains("at most 2048 tokens"));
        // 2,048 tokens of a 1,024-wide head: 2,048² × 1,024 = 4,294,967,296 multiply-adds, past 2³¹.
        let wide = Settings::from_query("cfg=L2.d4096.h4.kv1.hd1024&n=2048").0;
        let model = wide.model.resolve();
        assert!(
            plan(&wide, &model).unwrap_err().contains("4,294,967,296 multiply-adds a head"),
            "{:?}",
            plan(&wide, &model)
        );
        let model = preset("gpt2-small").unwrap();
        assert!(plan(&settings("n=2048"), model).is_ok());
        assert!(plan(&settings("src=another text"), model).unwrap_err().contains("key text"));
        assert!(plan(&settings("text="), model).is_err());
    }
}
