//! Owner of `shaders/kept_attention.wgsl`: attention over an evicting KV cache, each query reading
//! only the positions its cache kept (a list per layer, [`crate::model::kv_evict::kept_list`]), so
//! the bytes read are the kept entries'. Writes O and every head's probabilities (0 where not kept).

use bytemuck::{Pod, Zeroable};

use crate::cpu::kept_attention::KeptShape;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};

/// Keep in sync with `Params` in `shaders/kept_attention.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct KeptAttentionParams {
    pub n_q: u32,
    pub n_kv: u32,
    pub h_q: u32,
    pub group: u32,
    pub kv_stride: u32,
    pub d: u32,
    pub scale: f32,
    pub _pad: u32,
}

/// Invocations per workgroup (the shader's `WG`; a power of two for its reductions, and the size of
/// its workgroup array).
const WORKGROUP: u32 = 64;

/// The buffers of one launch (see [`KeptShape`] for their layouts); `kept` as
/// [`crate::model::kv_evict::kept_list`] lays it out.
pub struct KeptBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub kept: &'a wgpu::Buffer,
    pub o: &'a wgpu::Buffer,
    pub probs: &'a wgpu::Buffer,
}

pub struct KeptAttention {
    launcher: Launcher<Self>,
}

impl Kernel for KeptAttention {
    const NAME: &'static str = "kept_attention";
    const SOURCE: &'static str = include_str!("../../shaders/kept_attention.wgsl");
    const BINDINGS: &'static [Binding] = &[
        Binding::Uniform,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadWrite,
        Binding::ReadWrite,
    ];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = KeptAttentionParams;

    /// One workgroup per (query head, query).
    fn workgroups(p: &KeptAttentionParams) -> Option<u64> {
        Some(u64::from(p.h_q) * u64::from(p.n_q))
    }
}

impl KeptAttention {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
    }

    /// Prepares one launch, after checking the shape and that every buffer holds what it covers.
    pub fn prepare(&self, ctx: &GpuContext, b: &KeptBuffers<'_>, s: KeptShape) -> Result<Dispatch, GpuError> {
        let params = params(s, [b.q, b.k, b.v, b.kept, b.o, b.probs].map(|x| x.size() / 4))?;
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[b.q, b.k, b.v, b.kept, b.o, b.probs])
    }
}

/// The launch's params, after checking the shape against the buffers' lengths in 4-byte words
/// (q, k, v, kept, o, probs).
pub fn params(s: KeptShape, words: [u64; 6]) -> Result<KeptAttentionParams, GpuError> {
    let KeptShape { h_q, group, n_q, n_kv, kv_stride, d, scale } = s;
    let (h, n, t, d64) = (u64::from(h_q), u64::from(n_q), u64::from(n_kv), u64::from(d));
    let kv = u64::from(h_q / group.max(1)) * u64::from(kv_stride) * d64;
    let needs = [h * n * d64, kv, kv, n + 1, h * n * d64, h * n * t];
    let shaped = h_q > 0 && n_q > 0 && d > 0 && group > 0 && h_q.is_multiple_of(group) && kv_stride >= n_kv;
    if !shaped || needs.iter().zip(words).any(|(&need, have)| need > have) || h * n * t > u64::from(u32::MAX) {
        return Err(GpuError::InvalidInput(format!(
            "kept_attention: {h_q} heads (group {group}) x {n_q} queries x {n_kv} keys (stride {kv_stride}) x {d} \
             do not fit buffers of {words:?} words"
        )));
    }
    Ok(KeptAttentionParams { n_q, n_kv, h_q, group, kv_stride, d, scale, _pad: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_32_bytes() {
        assert_eq!(size_of::<KeptAttentionParams>(), 32);
    }

    #[test]
    fn params_refuse_short_buffers_and_odd_groups() {
        // 4 query heads on 2 KV heads, 3 queries, 5 keys, d = 2: Q/O 24, K/V 20, list 4, probs 60.
        let s = KeptShape { h_q: 4, group: 2, n_q: 3, n_kv: 5, kv_stride: 5, d: 2, scale: 1.0 };
        assert!(params(s, [24, 20, 20, 4, 24, 60]).is_ok());
        assert!(params(s, [24, 20, 20, 4, 24, 59]).is_err());
        assert!(params(s, [24, 19, 20, 4, 24, 60]).is_err());
        assert!(params(KeptShape { group: 3, ..s }, [99; 6]).is_err());
        assert!(params(KeptShape { kv_stride: 4, ..s }, [99; 6]).is_err());
    }
}
