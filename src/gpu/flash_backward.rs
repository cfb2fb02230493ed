//! Owner of `shaders/flash_backward.wgsl`: attention's backward pass the FlashAttention-2 way (dQ, dK,
//! dV from dO, recomputing P from the forward's log-sum-exp). Two entry points with bindings of their
//! own, so two [`Kernel`]s: [`FlashBackward`] (`main`: D and dQ, binds all) and [`FlashBackwardKeys`]
//! (`key_grads`: dK and dV, binds all but O), launched in that order (`key_grads` twice, dK then dV,
//! for heads over 768 wide).

use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::flash_attention::Forward;
use crate::cpu::flash_backward::{Backward, Gradients};
use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_attention::FlashAttention;
use crate::gpu::flash_backward_io::{
    BACKWARD_BINDINGS, BACKWARD_MAX_HEAD_DIM, BackwardBuffers, BackwardHolds, backward_takes_head_dim, grads_len,
};
use crate::gpu::flash_backward_subgroup::FlashBackwardSubgroup;
use crate::gpu::flash_io::{FlashBuffers, FlashLaunch};
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{self, Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};
use crate::model::limits::{self, NARROW_HEAD_DIM};

/// `main`: params, Q, K (`attention_io.wgsl`), V, dO, lse, D (written), grads (dQ, dK, dV), O.
pub struct FlashBackward {
    launcher: Launcher<Self>,
    keys: Launcher<FlashBackwardKeys>,
    /// Heads over 256 wide: the same entry points with their loops kept, never unrolled. Written out
    /// in full, `main` at d = 768 held lavapipe's compiler for over five minutes (at 512 it took
    /// seconds); in the browser no loop is unrolled anyway.
    wide: Launcher<Self>,
    wide_keys: Launcher<FlashBackwardKeys>,
    is_cpu: bool,
    /// The subgroup-sharing form, used instead on CPU adapters that have subgroups, when unrolled.
    subgroup: Option<FlashBackwardSubgroup>,
    /// Whether [`FlashBackward::prepare`] may choose the subgroup form (tests turn it off to check
    /// this form on the same adapter).
    use_subgroup: std::cell::Cell<bool>,
}

impl Kernel for FlashBackward {
    const NAME: &'static str = "flash_backward";
    const SOURCE: &'static str = include_str!("../../shaders/flash_backward.wgsl");
    const BINDINGS: &'static [Binding] = &BACKWARD_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = AttentionParams;

    /// One workgroup per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

/// `key_grads`: the first eight of `main`'s bindings (no O).
pub struct FlashBackwardKeys;

impl Kernel for FlashBackwardKeys {
    const NAME: &'static str = "flash_backward";
    const SOURCE: &'static str = FlashBackward::SOURCE;
    const ENTRY_POINT: &'static str = "key_grads";
    const BINDINGS: &'static [Binding] = BACKWARD_BINDINGS.split_at(8).0;
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = AttentionParams;

    /// One workgroup per tile of a KV head's keys.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

/// Tile sizes: (invocations per workgroup, keys or rows per step, rows or keys per invocation).
/// GPUs: 64 invocations, one row each. CPU adapters (lavapipe) run invocations as SIMD lanes, where
/// each buffer read costs a load per lane: a narrow workgroup, and several rows (keys) per invocation
/// so each read serves them all; `key_grads` holds four head-wide vectors per key, so fewer than the
/// forward's R.
pub fn backward_tiles(is_cpu: bool, d_pad: u32) -> (u32, u32, u32) {
    if !is_cpu {
        return (64, 16, 1);
    }
    let rows = if d_pad <= 64 {
        4
    } else if d_pad <= 128 {
        2
    } else {
        1
    };
    (8, if d_pad <= 128 { 8 } else { 4 }, rows)
}

impl FlashBackward {
    pub fn new(ctx: &GpuContext) -> Self {
        let launcher = Launcher::new(ctx);
        let keys = Launcher::new(ctx);
        // Unrolled natively (as the forward: many times faster on lavapipe and on an H100); in the
        // browser the loops stay (the unrolled text's compile time there is unmeasured).
        let unroll = !cfg!(target_arch = "wasm32");
        launcher.pipelines().set_unrolled(unroll);
        keys.pipelines().set_unrolled(unroll);
        let (wide, wide_keys) = (Launcher::new(ctx), Launcher::new(ctx));
        wide.pipelines().set_unrolled(false);
        wide_keys.pipelines().set_unrolled(false);
        let subgroup = if ctx.adapter.is_cpu { FlashBackwardSubgroup::new(ctx) } else { None };
        let is_cpu = ctx.adapter.is_cpu;
        Self { launcher, keys, wide, wide_keys, is_cpu, subgroup, use_subgroup: std::cell::Cell::new(true) }
    }

    /// Whether launches from now on may use the subgroup form where the adapter has one.
    pub fn allow_subgroup(&self, allow: bool) {
        self.use_subgroup.set(allow);
    }

    /// The subgroup form, where this adapter has one, it is allowed, loops are unrolled (it only pays
    /// unrolled, as the forward's) and the heads are at most 256 wide (it keeps every vector in
    /// registers).
    fn subgroup_form(&self, d_pad: u32) -> Option<&FlashBackwardSubgroup> {
        let unrolled = self.launcher.pipelines().is_unrolled();
        self.subgroup.as_ref().filter(|_| self.use_subgroup.get() && unrolled && d_pad <= NARROW_HEAD_DIM)
    }

    /// Prepares the launches, D and dQ first, then dK and dV (one launch, or one each for heads over
    /// 768 wide): `launch.shape.d` is padded to a multiple of 4 and `launch.kv_stride` must be `n_kv`
    /// (dK and dV are written `[h_kv, n_kv, d_pad]`).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &BackwardBuffers<'_>,
        launch: FlashLaunch,
    ) -> Result<Vec<Dispatch>, GpuError> {
        let FlashLaunch { shape, kv_stride, mask, scale } = launch;
        let d_pad = shape.d;
        if !d_pad.is_multiple_of(4) || !backward_takes_head_dim(d_pad) || kv_stride != shape.n_kv {
            return Err(GpuError::LimitExceeded(format!(
                "the backward needs d a multiple of 4 up to {BACKWARD_MAX_HEAD_DIM} (got {d_pad}) and kv_stride = n_kv"
            )));
        }
        shape.validate().map_err(GpuError::InvalidInput)?;
        let rows_total = shape.n_q * shape.group_size();
        let main_buffers = buffers.bound();
        if let Some(subgroup) = self.subgroup_form(d_pad) {
            let (row_tile, key_tile) = subgroup.tiles(d_pad);
            let [rows_pipeline, keys_pipeline] = subgroup.pipelines(&ctx.device, d_pad);
            let (rows, keys) = subgroup.launchers();
            let rows_params = AttentionParams::new(shape, kv_stride, mask, scale, rows_total.div_ceil(row_tile));
            let keys_params = AttentionParams::new(shape, kv_stride, mask, scale, shape.n_kv.div_ceil(key_tile));
            return Ok(vec![
                rows.dispatch(ctx, rows_pipeline, &rows_params, &main_buffers)?,
                keys.dispatch(ctx, keys_pipeline, &keys_params, &main_buffers[..7])?,
            ]);
        }
        let (wg, step, per) = backward_tiles(self.is_cpu, d_pad);
        let holds = BackwardHolds::choose(d_pad, per);
        let tiling = [("D", d_pad), ("D4", d_pad / 4), ("BC", step), ("R", per), ("RK", per)];
        let constants = |part: u32| [tiling.as_slice(), holds.constants(part).as_slice()].concat();
        let overrides = [("BR", wg)];
        let row_tiles = rows_total.div_ceil(wg * per);
        let key_tiles = shape.n_kv.div_ceil(wg * per);
        let (rows, keys) =
            if d_pad <= NARROW_HEAD_DIM { (&self.launcher, &self.keys) } else { (&self.wide, &self.wide_keys) };
        let mut passes = vec![rows.dispatch(
            ctx,
            rows.pipelines().get_specialised(&ctx.device, &constants(0), &overrides),
            &AttentionParams::new(shape, kv_stride, mask, scale, row_tiles),
            &main_buffers,
        )?];
        for part in 0..holds.key_launches() {
            passes.push(keys.dispatch(
                ctx,
                keys.pipelines().get_specialised(&ctx.device, &constants(part), &overrides),
                &AttentionParams::new(shape, kv_stride, mask, scale, key_tiles),
                &main_buffers[..7],
            )?);
        }
        Ok(passes)
    }
}

/// Bytes of GPU memory [`FlashBackward::gradients`] allocates for `shape` (rows padded): Q, O, dO and
/// dQ; K, V, dK and dV; lse and D.
pub fn backward_bytes(shape: &AttentionShape) -> u64 {
    let d = u64::from(launch::padded_dim(shape.d));
    let rows = u64::from(shape.h_q) * u64::from(shape.n_q);
    let keys = u64::from(shape.h_kv) * u64::from(shape.n_kv);
    limits::product(&[4, 4, rows, d]).saturating_add(limits::product(&[4, 4, keys, d])).saturating_add(8 * rows)
}

impl FlashBackward {
    /// The tiled forward, then the backward's launches, in one submission (O and lse stay on the GPU),
    /// for `p` and the loss's gradient `d_o` (`[h_q, n_q, d]`); reads O, lse, dQ, dK and dV back.
    pub async fn gradients(
        &self,
        ctx: &GpuContext,
        flash: &FlashAttention,
        p: &AttentionProblem<'_>,
        d_o: &[f32],
    ) -> Result<Backward, GpuError> {
        p.validate(true).map_err(GpuError::InvalidInput)?;
        let shape = p.shape;
        if d_o.len() != shape.q_len() || !backward_takes_head_dim(shape.d) {
            return Err(GpuError::InvalidInput(format!(
                "dO needs {} values (got {}) and heads at most {BACKWARD_MAX_HEAD_DIM} wide (got {})",
                shape.q_len(),
                d_o.len(),
                shape.d
            )));
        }
        let limit = limits::job_limit(Some(ctx.limits.max_buffer_size));
        limits::check_job_bytes(backward_bytes(&shape), limit)
            .map_err(|over| GpuError::LimitExceeded(format!("this backward pass {over}")))?;
        let (d, d_pad) = (shape.d as usize, launch::padded_dim(shape.d));
        let padded = AttentionShape { d: d_pad, ..shape };
        let upload = |label: &str, x: &[f32]| ctx.storage_from(label, &launch::pad_rows(x, d, d_pad as usize));
        let (q, k, v, d_o) = (upload("q", p.q)?, upload("k", p.k)?, upload("v", p.v)?, upload("dO", d_o)?);
        let rows = u64::from(shape.h_q) * u64::from(shape.n_q);
        let o = ctx.storage_output("o", padded.q_len() as u64 * 4)?;
        let lse = ctx.storage_output("lse", rows * 4)?;
        let delta = ctx.storage_output("D", rows * 4)?;
        let grads = ctx.storage_output("grads", grads_len(&padded) * 4)?;
        let launch = FlashLaunch { shape: padded, kv_stride: shape.n_kv, mask: p.mask, scale: p.scale };
        let forward = flash.prepare(ctx, &FlashBuffers { q: &q, k: &k, v: &v, o: &o, lse: &lse }, launch)?;
        let buffers =
            BackwardBuffers { q: &q, k: &k, v: &v, d_o: &d_o, lse: &lse, delta: &delta, grads: &grads, o: &o };
        let backward = self.prepare(ctx, &buffers, launch)?;
        let passes: Vec<&Dispatch> = std::iter::once(&forward).chain(&backward).collect();
        Dispatch::submit_all(ctx, &passes);
        let [o_values, mut lse_values, all]: [Vec<f32>; 3] = ctx
            .read_back_all(&[&o, &lse, &grads])
            .await?
            .try_into()
            .map_err(|_| crate::gpu::kernels::readback_count())?;
        lse_values.truncate(rows as usize);
        let (q_len, kv_len) = (padded.q_len(), padded.kv_len());
        let unpad = |x: &[f32]| launch::unpad_rows(x, d, d_pad as usize);
        Ok(Backward {
            forward: Forward { o: unpad(&o_values[..q_len]), lse: lse_values },
            grads: Gradients {
                dq: unpad(&all[..q_len]),
                dk: unpad(&all[q_len..q_len + kv_len]),
                dv: unpad(&all[q_len + kv_len..q_len + 2 * kv_len]),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_by_adapter_and_width() {
        assert_eq!(backward_tiles(false, 64), (64, 16, 1));
        // lavapipe at d = 64: 8 invocations x 4 keys = 32 keys (rows) per workgroup.
        assert_eq!(backward_tiles(true, 64), (8, 8, 4));
        assert_eq!(backward_tiles(true, 128), (8, 8, 2));
        assert_eq!(backward_tiles(true, 256), (8, 4, 1));
        assert!(backward_takes_head_dim(1024) && !backward_takes_head_dim(1025) && !backward_takes_head_dim(0));
        // 2 heads of 3 queries and 1 KV head of 5 keys, d 4: 24 + 2 x 20 floats.
        let shape = AttentionShape { h_q: 2, h_kv: 1, n_q: 3, n_kv: 5, d: 4 };
        assert_eq!(grads_len(&shape), 64);
    }

    #[test]
    fn wide_heads_keep_in_registers_what_fits_in_6_kib() {
        let holds = |d, per| {
            let h = BackwardHolds::choose(d, per);
            (h.row_vectors, h.key_vectors, h.both_key_grads, h.key_launches())
        };
        // Three vectors a row (Q, dO, dQ) and four a key (K, V, dK, dV), 4 bytes a value: at 384, 4 x
        // 384 x 4 = 6,144 bytes, the budget exactly.
        assert_eq!(holds(256, 1), (true, true, true, 1));
        assert_eq!(holds(128, 2), (true, true, true, 1), "two rows of 128: 4 KiB a key pair");
        assert_eq!(holds(384, 1), (true, true, true, 1));
        // 512: rows 6,144 bytes (kept); keys 8,192 (re-read), dK and dV 4,096 together.
        assert_eq!(holds(512, 1), (true, false, true, 1));
        // 768: rows 9,216 bytes (re-read); dK and dV 6,144 together. 1,024: 8,192, so one launch each.
        assert_eq!(holds(768, 1), (false, false, true, 1));
        assert_eq!(holds(1024, 1), (false, false, false, 2));
        let split = BackwardHolds::choose(1024, 1);
        assert_eq!(split.constants(0), [("ROW_REGS", 0), ("KEY_REGS", 0), ("KEEP_DK", 1), ("KEEP_DV", 0)]);
        assert_eq!(split.constants(1), [("ROW_REGS", 0), ("KEY_REGS", 0), ("KEEP_DK", 0), ("KEEP_DV", 1)]);
        let both = BackwardHolds::choose(64, 4);
        assert_eq!(both.constants(0), [("ROW_REGS", 1), ("KEY_REGS", 1), ("KEEP_DK", 1), ("KEEP_DV", 1)]);
    }
}
