//! The compute capability tier, decided once per page: WebGPU kernels, or the CPU reference.
//!
//! Views ask the engine for results and never see pipelines. The CPU tier is what a browser without
//! WebGPU gets (or `?backend=cpu`): the same numbers from the f64 reference, for small sizes only.

use crate::attention::reference::{self, Forward};
use crate::attention::{AttentionShape, Mask};
use crate::gpu::{GpuContext, Kernels, ProbRegion};
use crate::state::BackendChoice;

/// Largest number of (query, key) score pairs the CPU tier computes (it is a teaching fallback).
pub const CPU_MAX_SCORE_PAIRS: u64 = 4_000_000;

pub enum Engine {
    WebGpu { ctx: GpuContext, kernels: Kernels },
    Cpu { reason: String },
}

impl Engine {
    /// Opens the GPU unless the user asked for the CPU; a failure to find one is a reason, not an error.
    pub async fn start(choice: BackendChoice) -> Engine {
        if choice == BackendChoice::Cpu {
            return Engine::Cpu { reason: "CPU reference forced by the link (backend=cpu)".into() };
        }
        match GpuContext::new().await {
            Ok(ctx) => {
                let kernels = Kernels::new(&ctx);
                Engine::WebGpu { ctx, kernels }
            }
            Err(e) => Engine::Cpu { reason: format!("WebGPU is not available in this browser ({e})") },
        }
    }

    /// Whether results come from the GPU.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Engine::WebGpu { .. })
    }

    /// One line for the footer: which adapter computes, or why the CPU does.
    pub fn describe(&self) -> String {
        match self {
            Engine::WebGpu { ctx, .. } => format!("WebGPU: {}", ctx.adapter),
            Engine::Cpu { reason } => format!("CPU reference: {reason}"),
        }
    }

    /// Attention forward pass (O and log-sum-exp).
    pub async fn forward(&self, q: &[f32], k: &[f32], v: &[f32], shape: AttentionShape, mask: Mask, scale: f32) -> Result<Forward, String> {
        shape.validate()?;
        match self {
            Engine::WebGpu { ctx, kernels } => kernels.forward(ctx, q, k, v, shape, mask, scale).await.map_err(|e| e.to_string()),
            Engine::Cpu { .. } => {
                check_cpu_size(shape)?;
                Ok(reference::forward(q, k, v, &shape, mask, scale))
            }
        }
    }

    /// Every probability of every head, `[h_q, n_q, n_kv]` (for heads small enough to show whole).
    pub async fn probabilities(&self, q: &[f32], k: &[f32], v: &[f32], shape: AttentionShape, mask: Mask, scale: f32) -> Result<Vec<f32>, String> {
        shape.validate()?;
        match self {
            Engine::WebGpu { ctx, kernels } => {
                let forward = kernels.forward(ctx, q, k, v, shape, mask, scale).await.map_err(|e| e.to_string())?;
                let region = ProbRegion { row0: 0, rows: shape.n_q, col0: 0, cols: shape.n_kv };
                kernels.probabilities(ctx, q, k, &forward.lse, shape, mask, scale, region).await.map_err(|e| e.to_string())
            }
            Engine::Cpu { .. } => {
                check_cpu_size(shape)?;
                Ok(reference::probabilities(q, k, &shape, mask, scale))
            }
        }
    }
}

fn check_cpu_size(shape: AttentionShape) -> Result<(), String> {
    let pairs = u64::from(shape.h_q) * u64::from(shape.n_q) * u64::from(shape.n_kv);
    if pairs > CPU_MAX_SCORE_PAIRS {
        return Err(format!(
            "{pairs} query-key pairs is too much for the CPU fallback (at most {CPU_MAX_SCORE_PAIRS}); \
             a browser with WebGPU computes this on the GPU"
        ));
    }
    Ok(())
}
