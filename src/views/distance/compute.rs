//! The view's work: the explorer's layer and heads for these settings ([`plan`]), each head's
//! log-sum-exp from the tiled forward ([`Engine::attention`]), then the masses by distance from the
//! `distance_mass` kernel, or from its CPU twin a head at a time, through one [`Job`] that the
//! engine places ([`run`]).

use crate::attention::layer_inputs::LayerLayout;
use crate::attention::teaching_heads::TeachingHead;
use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::distance_mass::{distance_mass, distance_slots};
use crate::engine::{Engine, Job, check_cpu_size};
use crate::event_loop::breathe;
use crate::gpu::{GpuContext, Kernels};
use crate::live_attention::Request;
use crate::model::Model;
use crate::model::limits::kernels_take_head_dim;
use crate::views::heatmaps::request::{Screen, build_request};
use crate::views::registry::Settings;

/// Longest text (or `n`) the view computes: its Q and K copies of 32 heads of 128 stay under 64 MB.
pub const MAX_TOKENS: u32 = 2048;

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
    if request.n_q() > MAX_TOKENS {
        return Err(format!(
            "The view computes texts of at most {MAX_TOKENS} tokens ({} asked): shorten the text or lower n.",
            request.n_q()
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
    /// `[heads, 2 n − 1]`, slot δ + n − 1 for distance δ (as [`distance_mass`] lays it out).
    pub mass: Vec<f32>,
    pub on_gpu: bool,
}

impl DistanceRun {
    /// Head `i`'s (in the order computed) masses, distance −(n − 1) first.
    pub fn head(&self, i: usize) -> &[f32] {
        let slots = distance_slots(self.n);
        self.mass.get(i * slots..(i + 1) * slots).unwrap_or(&[])
    }
}

/// The masses of `request`'s heads: each query head with its own copy of its KV head's keys, so any
/// choice of heads is one launch. Stops with an error once `keep_going` says no.
pub async fn run(engine: &Engine, request: &Request, keep_going: &dyn Fn() -> bool) -> Result<DistanceRun, String> {
    let inputs = request.inputs();
    let (n, d) = (request.n_q(), request.layout.head_dim);
    let heads = request.heads.clone();
    let (mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for &h in &heads {
        q.extend(inputs.q_head(h));
        let (kh, vh) = inputs.kv_head(request.layout.kv_head(h));
        k.extend(kh);
        v.extend(vh);
    }
    let shape = AttentionShape::square(heads.len() as u32, n, d);
    let problem = AttentionProblem::new(&q, &k, &v, shape, request.mask, 1.0 / (d as f32).sqrt());
    let lse = engine.attention(&problem).await?.lse;
    if !keep_going() {
        return Err("stopped for a newer request".into());
    }
    let (mass, on_gpu) = engine.run(&MassByDistance { problem: &problem, lse: &lse, keep_going }).await?;
    let designed = heads.iter().map(|&h| inputs.teaching_head(h)).collect();
    Ok(DistanceRun { heads, designed, n, mass, on_gpu })
}

/// The masses of a problem's heads from their log-sum-exp: the kernel, or its twin head by head with
/// a pause for the page between heads.
struct MassByDistance<'a, 'p> {
    problem: &'a AttentionProblem<'p>,
    lse: &'a [f32],
    keep_going: &'a dyn Fn() -> bool,
}

impl Job for MassByDistance<'_, '_> {
    type Output = (Vec<f32>, bool);

    fn fits_gpu(&self) -> bool {
        kernels_take_head_dim(self.problem.shape.d)
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<(Vec<f32>, bool), String> {
        let mass = kernels.distance_mass(ctx).run(ctx, self.problem, self.lse).await.map_err(|e| e.to_string())?;
        Ok((mass, true))
    }

    async fn on_cpu(&self, _: bool) -> Result<(Vec<f32>, bool), String> {
        let p = self.problem;
        check_cpu_size(p.shape)?;
        let one = AttentionShape { h_q: 1, h_kv: 1, ..p.shape };
        let (q_len, kv_len, n_q) = (one.q_len(), one.kv_len(), p.shape.n_q as usize);
        let mut mass = Vec::with_capacity(p.shape.h_q as usize * distance_slots(p.shape.n_kv));
        for h in 0..p.shape.h_q as usize {
            if !(self.keep_going)() {
                return Err("stopped for a newer request".into());
            }
            let head = AttentionProblem::scores(
                &p.q[h * q_len..][..q_len],
                &p.k[h * kv_len..][..kv_len],
                one,
                p.mask,
                p.scale,
            );
            mass.extend(distance_mass(&head, &self.lse[h * n_q..][..n_q]));
            breathe().await;
        }
        Ok((mass, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::row_softmax::row_softmax;
    use crate::model::presets::preset;

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
        assert!(plan(&settings("n=2048"), model).is_ok());
        assert!(plan(&settings("src=another text"), model).unwrap_err().contains("key text"));
        assert!(plan(&settings("text="), model).is_err());
    }
}
