//! Owner of `shaders/rope.wgsl`: rotary positions on Q and K and the head layouts around attention,
//! both directions (`split_heads` from the fused Q/K/V projection to the attention kernels' layouts,
//! `merge_heads` from attention's O back to token rows).

use bytemuck::{Pod, Zeroable};

use crate::attention::rope::RopeTable;
use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};

/// Keep in sync with `Params` in `shaders/rope.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct RopeParams {
    pub tokens: u32,
    pub h_q: u32,
    pub h_kv: u32,
    pub d4: u32,
    pub pairs: u32,
    pub offset: u32,
    pub _pad: [u32; 2],
}

/// Invocations per workgroup (the shader's `WG`).
const WORKGROUP: u32 = 64;

/// The heads of one layer over `tokens` tokens; `d` (the head width) a multiple of 4, so the attention
/// kernels take these rows unpadded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heads {
    pub tokens: u32,
    pub h_q: u32,
    pub h_kv: u32,
    pub d: u32,
}

impl Heads {
    /// Refuses empty heads and widths that are not a multiple of 4 (rope and qk_norm read vec4s).
    pub(crate) fn check(self) -> Result<(), GpuError> {
        let Heads { tokens, h_q, h_kv, d } = self;
        if tokens == 0 || h_q == 0 || h_kv == 0 || d == 0 || !d.is_multiple_of(4) {
            return Err(GpuError::InvalidInput(format!(
                "rope and qk_norm need heads of a width that is a multiple of 4 ({self:?})"
            )));
        }
        Ok(())
    }

    fn params(self, pairs: u32, offset: u32) -> RopeParams {
        let Heads { tokens, h_q, h_kv, d } = self;
        RopeParams { tokens, h_q, h_kv, d4: d / 4, pairs, offset, _pad: [0; 2] }
    }
}

/// Refuses a rotation the shader cannot take a vec4 at a time: its pairs and their offset must be
/// multiples of 4 (every full rotation of a head of a multiple of 8 does; the CPU pass takes the rest).
pub fn check_rotation(pairs: u32, offset: u32) -> Result<(), GpuError> {
    if !pairs.is_multiple_of(4) || !offset.is_multiple_of(4) {
        return Err(GpuError::InvalidInput(format!(
            "the GPU rotates 4 dimensions at a time: {pairs} rotating pairs {offset} apart are not multiples of 4"
        )));
    }
    Ok(())
}

/// The rotation's angles as the shader reads them, (cos, sin) of each pair at each position,
/// `[positions, pairs]`: the CPU's own table, so both sides turn by the same numbers.
pub fn angles(table: &RopeTable) -> Vec<[f32; 2]> {
    table.cos_sin().collect()
}

/// `split_heads`' inputs and outputs: the fused projection `[tokens, (h_q + 2 h_kv) d]`, the angles
/// ([`angles`]; any 16 bytes when nothing rotates), Q `[h_q, tokens, d]`, K and V `[h_kv, tokens, d]`.
pub struct SplitBuffers<'a> {
    pub qkv: &'a wgpu::Buffer,
    pub angles: &'a wgpu::Buffer,
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
}

pub struct Rope {
    split_layout: wgpu::BindGroupLayout,
    merge_layout: wgpu::BindGroupLayout,
    split: PipelineCache,
    merge: PipelineCache,
    max_per_dim: u32,
}

impl Rope {
    pub fn new(ctx: &GpuContext) -> Self {
        use Binding::{ReadOnly, ReadWrite, Uniform};
        // merge_heads binds the first three of split_heads' bindings (see the shader).
        let split_layout = launch::bind_group_layout(
            &ctx.device,
            "rope split_heads",
            &[Uniform, ReadOnly, ReadWrite, ReadOnly, ReadWrite, ReadWrite],
        );
        let merge_layout = launch::bind_group_layout(&ctx.device, "rope merge_heads", &[Uniform, ReadOnly, ReadWrite]);
        let source = include_str!("../../shaders/rope.wgsl");
        let split = PipelineCache::new(&ctx.device, "rope split_heads", source, "split_heads", &split_layout);
        let merge = PipelineCache::new(&ctx.device, "rope merge_heads", source, "merge_heads", &merge_layout);
        Self { split_layout, merge_layout, split, merge, max_per_dim: ctx.limits.max_compute_workgroups_per_dimension }
    }

    /// Prepares `split_heads`, rotating with `table` (positions `0..tokens`, heads of width `d`).
    pub fn prepare_split(
        &self,
        ctx: &GpuContext,
        buffers: &SplitBuffers<'_>,
        heads: Heads,
        table: &RopeTable,
    ) -> Result<Dispatch, GpuError> {
        heads.check()?;
        let pairs = (table.rotary_dims / 2) as u32;
        let offset = table.offset() as u32;
        let covered = pairs == 0 || table.len() >= heads.tokens as usize;
        if !covered || offset + pairs > heads.d || (pairs > 0 && pairs > offset) {
            return Err(GpuError::InvalidInput(format!(
                "a rotation of {pairs} pairs {offset} apart over {} positions does not fit {heads:?}",
                table.len()
            )));
        }
        check_rotation(pairs, offset)?;
        let params = ctx.uniform_from("rope params", &heads.params(pairs, offset));
        let pipeline = self.split.get(&ctx.device, &[("WG", WORKGROUP)]);
        let bind_group = launch::bind_buffers(
            &ctx.device,
            &self.split_layout,
            "rope split_heads",
            &[&params, buffers.qkv, buffers.q, buffers.angles, buffers.k, buffers.v],
        );
        let heads_total = u64::from(heads.h_q) + 2 * u64::from(heads.h_kv);
        let vec4s = u64::from(heads.tokens) * heads_total * u64::from(heads.d / 4);
        self.dispatch(pipeline, bind_group, vec4s)
    }

    /// Prepares `merge_heads`: `o [h_q, tokens, d]` to `out [tokens, h_q d]`.
    pub fn prepare_merge(
        &self,
        ctx: &GpuContext,
        o: &wgpu::Buffer,
        out: &wgpu::Buffer,
        heads: Heads,
    ) -> Result<Dispatch, GpuError> {
        heads.check()?;
        let params = ctx.uniform_from("rope params", &heads.params(0, 0));
        let pipeline = self.merge.get(&ctx.device, &[("WG", WORKGROUP)]);
        let bind_group = launch::bind_buffers(&ctx.device, &self.merge_layout, "rope merge_heads", &[&params, o, out]);
        let vec4s = u64::from(heads.tokens) * u64::from(heads.h_q) * u64::from(heads.d / 4);
        self.dispatch(pipeline, bind_group, vec4s)
    }

    fn dispatch(
        &self,
        pipeline: wgpu::ComputePipeline,
        bind_group: wgpu::BindGroup,
        invocations: u64,
    ) -> Result<Dispatch, GpuError> {
        let workgroups = launch::workgroups_for(invocations, WORKGROUP)?;
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.max_per_dim) })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_a_multiple_of_16_bytes() {
        assert_eq!(size_of::<super::RopeParams>(), 32);
    }

    #[test]
    fn rotations_go_4_dimensions_at_a_time() {
        // d = 32, full rotation: 16 pairs 16 apart. d = 4: 2 pairs, left to the CPU.
        assert!(super::check_rotation(16, 16).is_ok() && super::check_rotation(0, 0).is_ok());
        assert!(super::check_rotation(2, 2).is_err());
    }
}
