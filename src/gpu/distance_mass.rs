//! Owner of `shaders/distance_mass.wgsl`: each head's attention mass by distance (query position −
//! key position) from Q, K and the forward pass's log-sum-exp, with no n × n matrix (the distance
//! view's curves).

use bytemuck::{Pod, Zeroable};

use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::distance_mass::distance_slots;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};
use crate::model::Mask;
use crate::model::limits::kernels_take_head_dim;

/// Keep in sync with `Params` in `shaders/distance_mass.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct DistanceMassParams {
    pub h_q: u32,
    pub group: u32,
    pub n_q: u32,
    pub n_kv: u32,
    pub d: u32,
    pub mask_kind: u32,
    pub mask_size: u32,
    pub scale: f32,
}

const WORKGROUP_SIZE: u32 = 64;

pub struct DistanceMass {
    launcher: Launcher<Self>,
}

impl Kernel for DistanceMass {
    const NAME: &'static str = "distance_mass";
    const SOURCE: &'static str = include_str!("../../shaders/distance_mass.wgsl");
    const BINDINGS: &'static [Binding] =
        &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = DistanceMassParams;

    /// One invocation per (query head, distance).
    fn workgroups(p: &DistanceMassParams) -> Option<u64> {
        let slots = distance_slots(p.n_kv) as u64;
        Some((u64::from(p.h_q) * slots).div_ceil(u64::from(WORKGROUP_SIZE)))
    }
}

/// Q `[h_q, n_q, d]`, K `[h_kv, n_kv, d]` and the log-sum-exp `[h_q, n_q]` in; the masses
/// `[h_q, 2 n_kv − 1]` out.
pub struct DistanceMassBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub lse: &'a wgpu::Buffer,
    pub mass: &'a wgpu::Buffer,
}

impl DistanceMass {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
    }

    /// One launch over `launch`'s heads, after checking its shape against the buffers.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        b: &DistanceMassBuffers<'_>,
        launch: DistanceLaunch,
    ) -> Result<Dispatch, GpuError> {
        let params = params(launch, [b.q, b.k, b.lse, b.mass].map(|x| x.size() / 4))?;
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP_SIZE)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[b.q, b.k, b.lse, b.mass])
    }

    /// The masses of `p`'s heads (its V is not read) given their rows' log-sum-exp: uploaded,
    /// computed, read back.
    pub async fn run(&self, ctx: &GpuContext, p: &AttentionProblem<'_>, lse: &[f32]) -> Result<Vec<f32>, GpuError> {
        let slots = p.shape.h_q as usize * distance_slots(p.shape.n_kv);
        let (q, k) = (ctx.storage_from("distance q", p.q)?, ctx.storage_from("distance k", p.k)?);
        let lse = ctx.storage_from("distance lse", lse)?;
        let mass = ctx.storage_output("distance mass", slots as u64 * 4)?;
        let buffers = DistanceMassBuffers { q: &q, k: &k, lse: &lse, mass: &mass };
        let dispatch = self.prepare(ctx, &buffers, DistanceLaunch::of(p))?;
        Dispatch::submit_all(ctx, &[&dispatch]);
        let mut out: Vec<f32> = ctx.read_back(&mass).await?;
        out.truncate(slots);
        Ok(out)
    }
}

/// What one launch computes: the heads' shape (`d` as the buffers hold it, padded or not: zero
/// columns add nothing to q·k), their mask and the scale of q·k.
#[derive(Clone, Copy, Debug)]
pub struct DistanceLaunch {
    pub shape: AttentionShape,
    pub mask: Mask,
    pub scale: f32,
}

impl DistanceLaunch {
    pub fn of(p: &AttentionProblem<'_>) -> Self {
        Self { shape: p.shape, mask: p.mask, scale: p.scale }
    }
}

/// The launch's params, after checking its shape against the buffers' lengths in 4-byte words
/// (q, k, lse, mass).
pub fn params(launch: DistanceLaunch, words: [u64; 4]) -> Result<DistanceMassParams, GpuError> {
    let s = launch.shape;
    let (kind, size) = launch.mask.to_gpu();
    let needs = [s.q_len() as u64, s.kv_len() as u64, u64::from(s.h_q) * u64::from(s.n_q), {
        u64::from(s.h_q) * distance_slots(s.n_kv) as u64
    }];
    let shaped = s.validate().is_ok() && s.n_q <= s.n_kv && kernels_take_head_dim(s.d);
    if !shaped || needs.iter().zip(words).any(|(&need, have)| need > have) {
        return Err(GpuError::InvalidInput(format!(
            "distance_mass: {} heads on {} x {} queries over {} keys x {} do not fit buffers of {words:?} words",
            s.h_q, s.h_kv, s.n_q, s.n_kv, s.d
        )));
    }
    let group = s.group_size();
    Ok(DistanceMassParams {
        h_q: s.h_q,
        group,
        n_q: s.n_q,
        n_kv: s.n_kv,
        d: s.d,
        mask_kind: kind,
        mask_size: size,
        scale: launch.scale,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_32_bytes_and_refuse_short_buffers() {
        assert_eq!(size_of::<DistanceMassParams>(), 32);
        // 4 query heads on 2, 3 queries over 5 keys, d = 2: Q 24, K 20, lse 12, masses 4 x 9.
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 3, n_kv: 5, d: 2 };
        let (q, k) = (vec![0.0; 24], vec![0.0; 20]);
        let p = AttentionProblem::scores(&q, &k, shape, Mask::Sliding { window_tokens: 2 }, 0.5);
        let params = params(DistanceLaunch::of(&p), [24, 20, 12, 36]).unwrap();
        assert_eq!((params.group, params.mask_kind, params.mask_size), (2, 2, 2));
        for short in [[23, 20, 12, 36], [24, 19, 12, 36], [24, 20, 11, 36], [24, 20, 12, 35]] {
            assert!(super::params(DistanceLaunch::of(&p), short).is_err(), "{short:?}");
        }
        let more_queries = AttentionShape { n_q: 6, ..shape };
        let p = AttentionProblem::scores(&q, &k, more_queries, Mask::Full, 0.5);
        assert!(super::params(DistanceLaunch::of(&p), [99; 4]).is_err());
    }
}
