//! A user's checkpoint streamed into GPU buffers: after a [`WeightPlan`] has checked the files'
//! headers against config.json, every buffer is sized and checked against the adapter's limits
//! and the job limit before one is made, then each tensor is read a chunk at a time (at most
//! [`CHUNK_BYTES`] in the page's memory) and written to its place: f32 and bf16 matrices as they
//! are, f16 and bf16 vectors through `widen` on the GPU.

use std::future::Future;
use std::ops::Range;

use crate::gpu::launch::Dispatch;
use crate::gpu::lm_weights::{
    LayerBuffers, LmGeometry, LmWeights, Matrix, OutputNormBuffers, check_rotations, check_weight_sizes,
};
use crate::gpu::widen::Half;
use crate::gpu::{GpuContext, GpuError, Kernels};
use crate::lm::LmError;
use crate::lm::safetensors::{Header, TensorDType};
use crate::lm::weight_plan::{LayerSlot, Slot, WeightFormat, WeightPiece, WeightPlan};
use crate::model::limits;
use crate::model::units::{format_bytes, format_thousands};

/// Bytes read and written at a time: a multiple of 4, so 16-bit chunks hold whole u32 words.
pub const CHUNK_BYTES: u64 = 4 << 20;

/// All the weight files' headers together: real ones are a few hundred KB each.
const MAX_HEADERS_BYTES: u64 = 64 << 20;

/// Chunks queued before waiting for the GPU, so uploads do not pile up in memory.
const CHUNKS_IN_FLIGHT: usize = 8;

/// Byte ranges of the checkpoint's weight files (by shard index): the dropped files in the page,
/// files or bytes natively.
pub trait WeightSource {
    /// How many weight files there are.
    fn shards(&self) -> usize;
    /// The length of weight file `shard` in bytes.
    fn file_len(&self, shard: usize) -> u64;
    fn read(&self, shard: usize, range: Range<u64>) -> impl Future<Output = Result<Vec<u8>, String>>;
}

/// Bytes held in memory (tests, and files already read).
impl WeightSource for [&[u8]] {
    fn shards(&self) -> usize {
        self.len()
    }

    fn file_len(&self, shard: usize) -> u64 {
        self.get(shard).map_or(0, |f| f.len() as u64)
    }

    fn read(&self, shard: usize, range: Range<u64>) -> impl Future<Output = Result<Vec<u8>, String>> {
        let bytes = self
            .get(shard)
            .and_then(|file| file.get(usize::try_from(range.start).ok()?..usize::try_from(range.end).ok()?))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| format!("weight file {shard} has no bytes {range:?}"));
        std::future::ready(bytes)
    }
}

/// Reads every weight file's header (8 bytes, then the JSON they size) and plans the load of
/// `config_json` from them: nothing else of the files is read.
pub async fn plan(config_json: &str, source: &(impl WeightSource + ?Sized)) -> Result<WeightPlan, LmError> {
    let mut headers = Vec::new();
    let mut header_bytes = 0u64;
    for shard in 0..source.shards() {
        let file_len = source.file_len(shard);
        let first8 = source.read(shard, 0..8.min(file_len)).await.map_err(LmError)?;
        let first8: [u8; 8] = first8.try_into().map_err(|_| LmError("a weight file is shorter than 8 bytes".into()))?;
        let json_len = Header::json_len(first8, file_len)?;
        header_bytes += json_len;
        if header_bytes > MAX_HEADERS_BYTES {
            return Err(LmError(format!(
                "the weight files' headers come to more than {} MiB: not a checkpoint this page reads",
                MAX_HEADERS_BYTES >> 20
            )));
        }
        let json = source.read(shard, 8..8 + json_len).await.map_err(LmError)?;
        headers.push(Header::parse(&json, file_len)?);
    }
    WeightPlan::new(config_json, &headers)
}

/// Refuses `plan` before anything is made when a kernel cannot take its geometry or rotation, or
/// its buffers (and the staging chunk) exceed the binding limit or the job limit.
pub fn check(ctx: &GpuContext, plan: &WeightPlan) -> Result<LmGeometry, GpuError> {
    let geometry = LmGeometry::of_model(plan.model())?;
    let m = plan.model();
    check_rotations(&geometry, m.schedule.layers().iter().map(|&kind| m.positional_for(kind)))?;
    check_weight_sizes(ctx, plan.gpu_buffers(), CHUNK_BYTES)
        .map_err(|e| GpuError::LimitExceeded(too_large(ctx, plan, e)))?;
    Ok(geometry)
}

/// What does not fit, in the words a user with a checkpoint needs (after "too large for this GPU: "):
/// how much the weights take on the GPU against their files, and the limit they meet.
fn too_large(ctx: &GpuContext, plan: &WeightPlan, refusal: GpuError) -> String {
    let limit = limits::job_limit(Some(ctx.limits.max_buffer_size));
    let gpu_bytes = plan.gpu_bytes();
    let what = format!(
        "its {} parameters take {} on the GPU ({} in its files)",
        format_thousands(plan.parameters().into()),
        format_bytes(gpu_bytes.into()),
        format_bytes(plan.file_bytes().into()),
    );
    match refusal {
        GpuError::LimitExceeded(why) if gpu_bytes <= limit => format!("{what}, and {why}"),
        _ => format!(
            "{what}, more than the {} one job may use here: checkpoints of up to about {} million parameters \
             fit in bf16 (its weight matrices are kept as they are), half that in f16 or f32 (kept as f32)",
            format_bytes(limit.into()),
            limit / 2 / 1_000_000
        ),
    }
}

impl LmWeights {
    /// Streams the plan's tensors from `source` into new buffers, calling `progress(bytes read,
    /// bytes in all)` after each chunk.
    pub async fn stream(
        ctx: &GpuContext,
        kernels: &Kernels,
        plan: &WeightPlan,
        source: &(impl WeightSource + ?Sized),
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<LmWeights, GpuError> {
        Self::stream_in_chunks(ctx, kernels, plan, source, progress, CHUNK_BYTES).await
    }

    /// [`LmWeights::stream`] with chunks of `chunk_bytes` (a multiple of 4, at most [`CHUNK_BYTES`]):
    /// tests cut small tensors into many chunks to check the seams.
    pub async fn stream_in_chunks(
        ctx: &GpuContext,
        kernels: &Kernels,
        plan: &WeightPlan,
        source: &(impl WeightSource + ?Sized),
        progress: &mut dyn FnMut(u64, u64),
        chunk_bytes: u64,
    ) -> Result<LmWeights, GpuError> {
        if chunk_bytes == 0 || !chunk_bytes.is_multiple_of(4) || chunk_bytes > CHUNK_BYTES {
            return Err(GpuError::InvalidInput(format!("chunks of {chunk_bytes} bytes")));
        }
        let geometry = check(ctx, plan)?;
        let buffers: Vec<(Slot, wgpu::Buffer)> = plan
            .slots
            .iter()
            .map(|(&slot, &values)| Ok((slot, ctx.storage_output(slot.name(), values * plan.format(slot).bytes())?)))
            .collect::<Result<_, GpuError>>()?;
        let buffer = |slot: Slot| buffers.iter().find(|(s, _)| *s == slot).map(|(_, b)| b);
        let staging = ctx.storage_output("staging", chunk_bytes)?;
        let (total, mut done, mut queued) = (plan.file_bytes(), 0u64, 0usize);
        for piece in &plan.pieces {
            let dst = buffer(piece.slot).expect("every piece's slot has a buffer");
            for (range, first) in chunks(piece, chunk_bytes) {
                let bytes = source.read(piece.shard, range.clone()).await.map_err(GpuError::InvalidInput)?;
                if bytes.len() as u64 != range.end - range.start {
                    return Err(GpuError::InvalidInput(format!("{}: the file ended early", piece.name)));
                }
                let to =
                    Destination { buffer: dst, format: plan.format(piece.slot), offset: piece.dest_offset + first };
                write_chunk(ctx, kernels, &staging, piece.dtype, bytes, to)?;
                done += range.end - range.start;
                progress(done, total);
                queued += 1;
                if queued.is_multiple_of(CHUNKS_IN_FLIGHT) {
                    ctx.wait_idle().await?;
                }
            }
        }
        ctx.wait_idle().await?;
        ctx.check_job()?;
        let m = plan.model();
        let take = |slot| buffer(slot).cloned();
        let matrix = |slot| Some(Matrix { buffer: take(slot)?, format: plan.format(slot) });
        let layers = plan
            .masks()
            .iter()
            .enumerate()
            .map(|(l, &mask)| {
                let part = |p| take(Slot::Layer(l, p));
                let matrix_part = |p| matrix(Slot::Layer(l, p));
                LayerBuffers {
                    mask,
                    positional: m.positional_for(m.schedule.layers()[l]),
                    input_norm: part(LayerSlot::InputNorm).expect("planned"),
                    qkv: matrix_part(LayerSlot::Qkv).expect("planned"),
                    qkv_bias: part(LayerSlot::QkvBias),
                    qk_norm: part(LayerSlot::QkNorm),
                    o: matrix_part(LayerSlot::O).expect("planned"),
                    mlp_norm: part(LayerSlot::MlpNorm).expect("planned"),
                    output_norms: part(LayerSlot::AttentionOutNorm)
                        .zip(part(LayerSlot::MlpOutNorm))
                        .map(|(attention, mlp)| OutputNormBuffers { attention, mlp }),
                    gate_up: matrix_part(LayerSlot::GateUp).expect("planned"),
                    down: matrix_part(LayerSlot::Down).expect("planned"),
                }
            })
            .collect();
        Ok(LmWeights {
            geometry,
            rms_norm_eps: plan.config.rms_norm_eps,
            style: plan.config.style,
            rope_scaling: plan.config.rope_scaling,
            embed: matrix(Slot::Embed).expect("planned"),
            layers,
            final_norm: take(Slot::FinalNorm).expect("planned"),
            lm_head: matrix(Slot::LmHead),
        })
    }
}

/// A piece's chunks: each file byte range and the index of its first element within the tensor.
fn chunks(piece: &WeightPiece, chunk_bytes: u64) -> impl Iterator<Item = (Range<u64>, u64)> + '_ {
    let width = piece.dtype.bytes() as u64;
    (0..piece.bytes()).step_by(chunk_bytes as usize).map(move |at| {
        let end = (at + chunk_bytes).min(piece.bytes());
        (piece.file_offset + at..piece.file_offset + end, at / width)
    })
}

/// Where a chunk goes: a buffer, how it holds values, and the element the chunk's first goes to.
struct Destination<'a> {
    buffer: &'a wgpu::Buffer,
    format: WeightFormat,
    offset: u64,
}

/// Writes one chunk's values to their destination: f32 and bf16 kept packed straight in, other
/// 16-bit values through `staging` and `widen`.
fn write_chunk(
    ctx: &GpuContext,
    kernels: &Kernels,
    staging: &wgpu::Buffer,
    dtype: TensorDType,
    mut bytes: Vec<u8>,
    to: Destination<'_>,
) -> Result<(), GpuError> {
    let (dst, dst_offset) = (to.buffer, to.offset);
    if to.format == WeightFormat::Bf16 && dtype != TensorDType::Bf16 {
        // The plan packs a buffer only when all its pieces are bf16.
        return Err(GpuError::InvalidInput(format!("{dtype:?} values into a bf16 buffer")));
    }
    let half = match (dtype, to.format) {
        (TensorDType::F32, _) => {
            ctx.queue.write_buffer(dst, dst_offset * 4, &bytes);
            return Ok(());
        }
        // The plan packs only whole words of bf16 pieces: an even offset and byte count.
        (TensorDType::Bf16, WeightFormat::Bf16) => {
            ctx.queue.write_buffer(dst, dst_offset * 2, &bytes);
            return Ok(());
        }
        (TensorDType::F16, _) => Half::F16,
        (TensorDType::Bf16, _) => Half::Bf16,
    };
    let count = (bytes.len() / 2) as u32;
    bytes.resize(bytes.len().next_multiple_of(4), 0); // queue writes are whole words
    ctx.queue.write_buffer(staging, 0, &bytes);
    let offset = u32::try_from(dst_offset).map_err(|_| GpuError::LimitExceeded("a tensor past 2^32 floats".into()))?;
    let dispatch = kernels.widen.prepare(ctx, staging, dst, (count, offset), half)?;
    Dispatch::submit_all(ctx, &[&dispatch]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_a_piece_in_whole_words() {
        let piece = |dtype, elements| WeightPiece {
            name: "t".into(),
            shard: 0,
            dtype,
            file_offset: 1000,
            elements,
            slot: Slot::Embed,
            dest_offset: 0,
        };
        // 3 M bf16 values = 6 MiB: a 4 MiB chunk (2 Mi values) and a 2 MiB one.
        let got: Vec<_> = chunks(&piece(TensorDType::Bf16, 3 << 20), CHUNK_BYTES).collect();
        assert_eq!(got, [(1000..1000 + (4 << 20), 0), (1000 + (4 << 20)..1000 + (6 << 20), 2 << 20)]);
        // 5 f16 values: one chunk of 10 bytes (padded to 12 when written).
        assert_eq!(chunks(&piece(TensorDType::F16, 5), CHUNK_BYTES).collect::<Vec<_>>(), [(1000..1010, 0)]);
        // f32 chunks start at whole elements: 1 Mi values per 4 MiB.
        let f32_chunks: Vec<_> = chunks(&piece(TensorDType::F32, (1 << 20) + 1), CHUNK_BYTES).map(|c| c.1).collect();
        assert_eq!(f32_chunks, [0, 1 << 20]);
    }
}
