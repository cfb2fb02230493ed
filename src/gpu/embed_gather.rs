//! Owner of `shaders/embed_gather.wgsl`: the embedding rows of a list of token ids.

use bytemuck::{Pod, Zeroable};

use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch, PerWeightFormat};
use crate::gpu::{GpuContext, GpuError, shader_text};
use crate::lm::weight_plan::WeightFormat;

/// Keep in sync with `Params` in `shaders/embed_gather.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct EmbedParams {
    pub tokens: u32,
    pub width4: u32,
    /// Each row is multiplied by this (Gemma: sqrt(d_model)).
    pub scale: f32,
    pub _pad: u32,
}

/// Invocations per workgroup (the shader's `WG`).
const WORKGROUP: u32 = 64;

/// ids `[tokens]` (each checked below the vocabulary by the caller), the embedding `[vocab, width]`
/// held in `format`, out `[tokens, width]`.
pub struct EmbedBuffers<'a> {
    pub ids: &'a wgpu::Buffer,
    pub embed: &'a wgpu::Buffer,
    pub format: WeightFormat,
    pub out: &'a wgpu::Buffer,
}

pub struct EmbedGather {
    launchers: PerWeightFormat<Launcher<Self>>,
}

impl Kernel for EmbedGather {
    const NAME: &'static str = "embed_gather";
    const SOURCE: &'static str = include_str!("../../shaders/embed_gather.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = EmbedParams;

    /// One invocation per vec4 of the output.
    fn workgroups(p: &EmbedParams) -> Option<u64> {
        Some((u64::from(p.tokens) * u64::from(p.width4)).div_ceil(u64::from(WORKGROUP)))
    }
}

impl EmbedGather {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launchers: PerWeightFormat::new(Self::launcher(ctx, WeightFormat::F32)) }
    }

    fn launcher(ctx: &GpuContext, format: WeightFormat) -> Launcher<Self> {
        Launcher::from_source(ctx, &shader_text::with_weights(Self::SOURCE, format))
    }

    /// Prepares the gather of `tokens` rows of `width` floats (a multiple of 4), each times `scale`.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &EmbedBuffers<'_>,
        tokens: u32,
        width: u32,
        scale: f32,
    ) -> Result<Dispatch, GpuError> {
        if tokens == 0 || width == 0 || !width.is_multiple_of(4) {
            return Err(GpuError::InvalidInput(format!(
                "embed_gather needs tokens and a width that is a multiple of 4 (got {tokens} x {width})"
            )));
        }
        let params = EmbedParams { tokens, width4: width / 4, scale, _pad: 0 };
        let launcher = self.launchers.get(buffers.format, || Self::launcher(ctx, buffers.format));
        let pipeline = launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        launcher.dispatch(ctx, pipeline, &params, &[buffers.ids, buffers.embed, buffers.out])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_16_bytes() {
        assert_eq!(size_of::<super::EmbedParams>(), 16);
    }
}
