//! The traced build of the tiled forward: `shaders/flash_attention.wgsl` or
//! `shaders/flash_attention_subgroup.wgsl`, whichever form [`FlashAttention::plan`] picks on this
//! adapter, with `shaders/include/flash_trace_io.wgsl` and `flash_trace_step.wgsl` pasted in at their
//! `// #trace` lines ([`shader_text::traced`]). It computes what the shipped kernel computes, the same
//! way, and also writes each row's running max m, running sum l, rescale exp(m_old − m_new) and
//! accumulator after every key step; its twin is [`crate::cpu::flash_trace`]. Only this build writes a
//! trace: the shipped kernels keep those lines as comments, so their code and speed do not change.
//!
//! Not listed in [`crate::gpu::kernels::KERNELS`]: no shader of its own, and one binding more than the
//! kernels it traces (`tests/kernel_names.rs` checks that binding against the traced text).

use crate::attention::AttentionShape;
use crate::cpu::flash_trace::{FlashTrace, TraceStep};
use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_attention::{FlashAttention, FlashForm, FlashPlan};
use crate::gpu::flash_attention_subgroup::FlashSubgroup;
use crate::gpu::flash_io::{FlashBuffers, FlashLaunch};
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError, shader_text};

/// The forward kernels' bindings (`FLASH_BINDINGS`) and the trace (`flash_trace_io.wgsl`).
pub const FLASH_TRACE_BINDINGS: [Binding; 7] = [
    Binding::Uniform,
    Binding::ReadOnly,
    Binding::ReadOnly,
    Binding::ReadOnly,
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::ReadWrite,
];

/// The longest problem traced: the page plays the trace back step by step, and its size grows with
/// the square of the tokens.
pub const TRACE_MAX_TOKENS: u32 = 64;

/// The most floats a trace may hold (16 MiB), checked before its buffer is made.
pub const TRACE_MAX_FLOATS: u64 = 1 << 22;

/// `flash_attention.wgsl`, traced (loop or unrolled).
pub struct TracedLoop;

impl Kernel for TracedLoop {
    const NAME: &'static str = "flash_attention (traced)";
    const SOURCE: &'static str = FlashAttention::SOURCE;
    const BINDINGS: &'static [Binding] = &FLASH_TRACE_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("flash_attention");
    type Params = AttentionParams;

    fn workgroups(p: &AttentionParams) -> Option<u64> {
        FlashAttention::workgroups(p)
    }
}

/// `flash_attention_subgroup.wgsl`, traced.
pub struct TracedSubgroup;

impl Kernel for TracedSubgroup {
    const NAME: &'static str = "flash_attention_subgroup (traced)";
    const SOURCE: &'static str = FlashSubgroup::SOURCE;
    const BINDINGS: &'static [Binding] = &FLASH_TRACE_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::FormOf("flash_attention");
    type Params = AttentionParams;

    fn workgroups(p: &AttentionParams) -> Option<u64> {
        FlashSubgroup::workgroups(p)
    }
}

/// The traced pipelines, built on first use (a page that never traces compiles none).
pub struct FlashTracer {
    looped: Launcher<TracedLoop>,
    subgroup: std::cell::OnceCell<Launcher<TracedSubgroup>>,
}

impl FlashTracer {
    pub fn new(ctx: &GpuContext) -> Self {
        Self {
            looped: Launcher::from_source(ctx, &shader_text::traced(FlashAttention::SOURCE)),
            subgroup: Default::default(),
        }
    }

    /// One traced launch, planned as `flash` would plan the untraced one. `trace` holds
    /// [`trace_floats`] floats, each record's first set to −1 (a step never walked).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        flash: &FlashAttention,
        buffers: &FlashBuffers<'_>,
        trace: &wgpu::Buffer,
        launch: FlashLaunch,
    ) -> Result<(Dispatch, FlashPlan), GpuError> {
        let plan = flash.plan(launch)?;
        let [q, k, v, o, lse] = buffers.bound();
        let bound = [q, k, v, o, lse, trace];
        let dispatch = if plan.form == FlashForm::Subgroup {
            let launcher = self.subgroup.get_or_init(|| {
                let launcher = Launcher::from_source(
                    ctx,
                    &shader_text::for_subgroups(&shader_text::traced(FlashSubgroup::SOURCE)),
                );
                launcher.pipelines().set_unrolled(true);
                launcher
            });
            let pipeline = launcher.pipelines().get_specialised(&ctx.device, &plan.constants, &plan.overrides);
            launcher.dispatch(ctx, pipeline, &plan.params, &bound)?
        } else {
            self.looped.pipelines().set_unrolled(plan.form == FlashForm::Unrolled);
            let pipeline = self.looped.pipelines().get_specialised(&ctx.device, &plan.constants, &plan.overrides);
            self.looped.dispatch(ctx, pipeline, &plan.params, &bound)?
        };
        Ok((dispatch, plan))
    }
}

/// Key steps recorded per row (the shader's `trace_slots`).
fn slots(shape: &AttentionShape, keys_per_step: u32) -> u64 {
    u64::from(shape.n_kv.div_ceil(keys_per_step.max(1)))
}

/// Floats of the trace of `shape` (`d` padded) in steps of `keys_per_step` keys: a record of 4 + d
/// per row and step.
pub fn trace_floats(shape: &AttentionShape, keys_per_step: u32) -> u64 {
    u64::from(shape.h_q) * u64::from(shape.n_q) * slots(shape, keys_per_step) * (4 + u64::from(shape.d))
}

/// The trace read back (`records`, [`trace_floats`] of them, `padded.d` = d rounded up to 4) as
/// each row's walked steps, with the acc's padding columns dropped; the kernel's stand-in for "no
/// visible key yet" (NO_SCORE, −3e38) becomes −∞, as in the twin.
pub fn parse_trace(
    records: &[f32],
    padded: AttentionShape,
    d: u32,
    (rows_per_tile, keys_per_step): (u32, u32),
) -> FlashTrace {
    let slots = slots(&padded, keys_per_step) as usize;
    let record = 4 + padded.d as usize;
    let rows = (0..(padded.h_q * padded.n_q) as usize)
        .map(|row| {
            (0..slots)
                .filter_map(|slot| records.get((row * slots + slot) * record..)?.get(..record))
                .filter(|r| r[0] >= 0.0)
                .map(|r| TraceStep {
                    key0: r[0] as u32,
                    m: if r[1] <= -1e38 { f64::NEG_INFINITY } else { f64::from(r[1]) },
                    l: f64::from(r[2]),
                    alpha: f64::from(r[3]),
                    acc: r[4..4 + d as usize].iter().map(|&a| f64::from(a)).collect(),
                })
                .collect()
        })
        .collect();
    FlashTrace { shape: AttentionShape { d, ..padded }, rows_per_tile, keys_per_step, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_in_row_and_step_order_skipping_steps_never_walked() {
        // 1 head, 2 queries, 3 keys in steps of 2: 2 slots per row, records of 4 + 4 floats (d = 2 padded).
        let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 2, n_kv: 3, d: 4 };
        assert_eq!(trace_floats(&shape, 2), 2 * 2 * 8);
        let mut records = vec![-1.0f32; 32];
        records[..8].copy_from_slice(&[0.0, -3e38, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
        records[16..24].copy_from_slice(&[0.0, 0.5, 1.0, 0.0, 2.0, 3.0, 9.0, 9.0]);
        records[24..32].copy_from_slice(&[2.0, 1.5, 1.25, 0.25, 4.0, 5.0, 9.0, 9.0]);
        let trace = parse_trace(&records, shape, 2, (2, 2));
        assert_eq!(trace.rows[0].len(), 1);
        assert_eq!((trace.rows[0][0].m, trace.rows[0][0].alpha), (f64::NEG_INFINITY, 1.0));
        let row1 = trace.row(0, 1);
        assert_eq!(row1.iter().map(|s| s.key0).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!((row1[1].m, row1[1].l, row1[1].alpha, row1[1].acc.clone()), (1.5, 1.25, 0.25, vec![4.0, 5.0]));
        assert_eq!(trace.shape.d, 2);
    }
}
