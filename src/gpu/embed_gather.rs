//! Owner of `shaders/embed_gather.wgsl`: the embedding rows of a list of token ids.

use bytemuck::{Pod, Zeroable};

use crate::gpu::launch::{self, Binding, Dispatch, PerWeightFormat, PipelineCache};
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
    layout: wgpu::BindGroupLayout,
    pipelines: PerWeightFormat<PipelineCache>,
    max_per_dim: u32,
}

impl EmbedGather {
    pub fn new(ctx: &GpuContext) -> Self {
        let layout = launch::bind_group_layout(
            &ctx.device,
            "embed_gather",
            &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite],
        );
        let pipelines = PerWeightFormat::new(Self::pipelines(ctx, &layout, WeightFormat::F32));
        Self { layout, pipelines, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension }
    }

    fn pipelines(ctx: &GpuContext, layout: &wgpu::BindGroupLayout, format: WeightFormat) -> PipelineCache {
        let source = shader_text::with_weights(include_str!("../../shaders/embed_gather.wgsl"), format);
        PipelineCache::new(&ctx.device, "embed_gather", &source, "main", layout)
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
        let params = ctx.uniform_from("embed_gather params", &params);
        let pipelines = self.pipelines.get(buffers.format, || Self::pipelines(ctx, &self.layout, buffers.format));
        let pipeline = pipelines.get(&ctx.device, &[("WG", WORKGROUP)]);
        let bind_group = launch::bind_buffers(
            &ctx.device,
            &self.layout,
            "embed_gather",
            &[&params, buffers.ids, buffers.embed, buffers.out],
        );
        let workgroups = launch::workgroups_for(u64::from(tokens) * u64::from(width / 4), WORKGROUP)?;
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_16_bytes() {
        assert_eq!(size_of::<super::EmbedParams>(), 16);
    }
}
