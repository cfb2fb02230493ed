//! Owner of `shaders/rope.wgsl`: rotary positions on Q and K and the head layouts around attention,
//! both directions (`split_heads` from the fused Q/K/V projection to the attention kernels' layouts,
//! `merge_heads` from attention's O back to token rows).

use bytemuck::{Pod, Zeroable};

use crate::attention::rope::RopeTable;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
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

/// `split_heads` (this kernel's main entry point) and `merge_heads`.
pub struct Rope {
    split: Launcher<Self>,
    merge: Launcher<MergeHeads>,
}

impl Kernel for Rope {
    const NAME: &'static str = "rope";
    const SOURCE: &'static str = include_str!("../../shaders/rope.wgsl");
    const ENTRY_POINT: &'static str = "split_heads";
    const BINDINGS: &'static [Binding] = {
        use Binding::{ReadOnly, ReadWrite, Uniform};
        &[Uniform, ReadOnly, ReadWrite, ReadOnly, ReadWrite, ReadWrite]
    };
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = RopeParams;

    /// One invocation per vec4 of the query, key and value heads.
    fn workgroups(p: &RopeParams) -> Option<u64> {
        let heads = u64::from(p.h_q) + 2 * u64::from(p.h_kv);
        Some((u64::from(p.tokens) * heads * u64::from(p.d4)).div_ceil(u64::from(WORKGROUP)))
    }
}

/// `rope.wgsl`'s `merge_heads`: binds the first three of `split_heads`' bindings (see the shader).
pub struct MergeHeads;

impl Kernel for MergeHeads {
    const NAME: &'static str = "rope";
    const SOURCE: &'static str = Rope::SOURCE;
    const ENTRY_POINT: &'static str = "merge_heads";
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Skipped("a copy between layouts: tests compare the layer it serves");
    type Params = RopeParams;

    /// One invocation per vec4 of the query heads.
    fn workgroups(p: &RopeParams) -> Option<u64> {
        Some((u64::from(p.tokens) * u64::from(p.h_q) * u64::from(p.d4)).div_ceil(u64::from(WORKGROUP)))
    }
}

impl Rope {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { split: Launcher::new(ctx), merge: Launcher::new(ctx) }
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
        let pipeline = self.split.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        let buffers = [buffers.qkv, buffers.q, buffers.angles, buffers.k, buffers.v];
        self.split.dispatch(ctx, pipeline, &heads.params(pairs, offset), &buffers)
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
        let pipeline = self.merge.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.merge.dispatch(ctx, pipeline, &heads.params(0, 0), &[o, out])
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
