//! Owner of `shaders/packed_attention.wgsl`: attention of a decode step's queries (or a prefill's)
//! over a packed quantised KV cache, each K and V value dequantised as the kernel reads it, so the
//! bytes read are the scheme's ([`PackedLayout`]).

use bytemuck::{Pod, Zeroable};

use crate::attention::AttentionShape;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};
use crate::model::Mask;
use crate::model::kv_packed::PackedLayout;
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, kernels_take_head_dim};

/// Keep in sync with `Params` in `shaders/packed_attention.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct PackedAttentionParams {
    pub n_q: u32,
    pub n_kv: u32,
    pub h_q: u32,
    pub group: u32,
    pub kv_stride: u32,
    pub d: u32,
    pub mask_kind: u32,
    pub mask_size: u32,
    pub scale: f32,
    pub q_offset: u32,
    /// 0: fp16; 1: int8; 2: grouped (`kv_pack`'s kinds).
    pub kind: u32,
    pub bits: u32,
    pub scale_group: u32,
    pub code_words: u32,
    pub words: u32,
    pub _pad: u32,
}

/// Invocations per workgroup (the shader's `WG`, the size of its score array, and with its 16 owned
/// channels an invocation, the widest head: 64 x 16 = 1024).
const WORKGROUP: u32 = 64;

/// The buffers of one launch: Q and O `[h_q, n_q, d]` f32, K and V packed `[h_kv, kv_stride, words]`.
pub struct PackedBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub o: &'a wgpu::Buffer,
}

/// One launch: the queries are the last `shape.n_q` of `shape.n_kv` positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PackedLaunch {
    pub shape: AttentionShape,
    pub kv_stride: u32,
    pub layout: PackedLayout,
    pub mask: Mask,
    pub scale: f32,
}

pub struct PackedAttention {
    launcher: Launcher<Self>,
}

impl Kernel for PackedAttention {
    const NAME: &'static str = "packed_attention";
    const SOURCE: &'static str = include_str!("../../shaders/packed_attention.wgsl");
    const BINDINGS: &'static [Binding] =
        &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = PackedAttentionParams;

    /// One workgroup per (query head, query).
    fn workgroups(p: &PackedAttentionParams) -> Option<u64> {
        Some(u64::from(p.h_q) * u64::from(p.n_q))
    }
}

impl PackedAttention {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
    }

    /// Prepares one launch, after checking the shape and that every buffer holds what it covers.
    pub fn prepare(&self, ctx: &GpuContext, b: &PackedBuffers<'_>, launch: PackedLaunch) -> Result<Dispatch, GpuError> {
        let params = params(launch, [b.q, b.k, b.v, b.o].map(|x| x.size() / 4))?;
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[b.q, b.k, b.v, b.o])
    }
}

/// The launch's params, after checking it against the buffers' lengths in 4-byte words (q, k, v, o).
pub fn params(launch: PackedLaunch, words: [u64; 4]) -> Result<PackedAttentionParams, GpuError> {
    let PackedLaunch { shape, kv_stride, layout, mask, scale } = launch;
    let AttentionShape { h_q, h_kv, n_q, n_kv, d } = shape;
    let rows = u64::from(h_q) * u64::from(n_q) * u64::from(d);
    let cache = u64::from(h_kv) * u64::from(kv_stride) * u64::from(layout.words());
    let needs = [rows, cache, cache, rows];
    let fits = needs.iter().zip(words).all(|(&need, have)| need <= have) && rows.max(cache) <= u64::from(u32::MAX);
    if shape.validate().is_err() || !kernels_take_head_dim(d) || layout.d != d || kv_stride < n_kv || !fits {
        return Err(GpuError::InvalidInput(format!(
            "packed_attention: {h_q} heads on {h_kv} x {n_q} queries x {n_kv} keys (stride {kv_stride}) x {d} \
             (at most {KERNEL_MAX_HEAD_DIM}; packed for d = {}) do not fit buffers of {words:?} words",
            layout.d
        )));
    }
    let (mask_kind, mask_size) = mask.to_gpu();
    Ok(PackedAttentionParams {
        n_q,
        n_kv,
        h_q,
        group: shape.group_size(),
        kv_stride,
        d,
        mask_kind,
        mask_size,
        scale,
        q_offset: shape.q_offset(),
        kind: layout.shader_kind(),
        bits: layout.bits(),
        scale_group: layout.group(),
        code_words: layout.code_words(),
        words: layout.words(),
        _pad: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv_quant::KvScheme;

    #[test]
    fn params_are_64_bytes() {
        assert_eq!(size_of::<PackedAttentionParams>(), 64);
    }

    #[test]
    fn params_refuse_short_buffers_and_a_layout_of_another_width() {
        // 4 query heads on 2 KV heads, 3 queries of 10 keys, stride 16, d = 32, int2-g32 (3 words):
        // Q/O 4 x 3 x 32 = 384 floats, each cache 2 x 16 x 3 = 96 words.
        let layout = PackedLayout::of(KvScheme::IntGroup { bits: 2, group: 32 }, 32).unwrap();
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 3, n_kv: 10, d: 32 };
        let launch = PackedLaunch { shape, kv_stride: 16, layout, mask: Mask::Causal, scale: 0.5 };
        let p = params(launch, [384, 96, 96, 384]).unwrap();
        assert_eq!((p.group, p.q_offset, p.kind, p.bits, p.code_words, p.words), (2, 7, 2, 2, 2, 3));
        assert!(params(launch, [384, 95, 96, 384]).is_err());
        assert!(params(launch, [384, 96, 96, 383]).is_err());
        assert!(params(PackedLaunch { kv_stride: 9, ..launch }, [999; 4]).is_err());
        let other = PackedLayout::of(KvScheme::Fp16, 64).unwrap();
        assert!(params(PackedLaunch { layout: other, ..launch }, [9999; 4]).is_err());
    }
}
