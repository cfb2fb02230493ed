//! A checkpoint's weights on the GPU ([`LmWeights`]) and the sizes the kernels take them in
//! ([`LmGeometry`]): uploaded from a [`Checkpoint`] held in memory (the shipped model), or streamed
//! from a user's files a chunk at a time after a [`WeightPlan`] has checked them, so the page never
//! holds the whole file: f16 unpacked to f32 on the GPU (`widen`), and bf16 matrices kept as they
//! are (the kernels widen them as they read), vectors widened.

use crate::attention::AttentionShape;
use crate::attention::rope::{Llama3Scaling, RopeTable};
use crate::gpu::rope;
use crate::gpu::{GpuContext, GpuError};
use crate::lm::checkpoint::{Checkpoint, OutputNorms};
use crate::lm::model_config::BlockStyle;
use crate::lm::weight_plan::{WeightFormat, slot_floats};
use crate::model::config::{Model, Positional};
use crate::model::{Mask, limits};

/// The sizes of a model, as the kernels take them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LmGeometry {
    pub d_model: u32,
    pub h_q: u32,
    pub h_kv: u32,
    pub head_dim: u32,
    pub ffn: u32,
    pub vocab: u32,
    pub layers: u32,
}

impl LmGeometry {
    /// The geometry of `ck`, refused when a kernel cannot take it (widths must be multiples of 4,
    /// heads at most the attention kernels' `KERNEL_MAX_HEAD_DIM`).
    pub fn of(ck: &Checkpoint) -> Result<Self, GpuError> {
        Self::of_model(&ck.model)
    }

    /// The geometry of `m` (as [`LmGeometry::of`]).
    pub fn of_model(m: &Model) -> Result<Self, GpuError> {
        let narrow = |v: u64| u32::try_from(v).unwrap_or(0);
        let g = LmGeometry {
            d_model: narrow(m.d_model),
            h_q: m.n_q_heads,
            h_kv: m.attn.n_kv_heads,
            head_dim: m.attn.head_dim,
            ffn: narrow(m.ffn_size),
            vocab: narrow(m.vocab_size),
            layers: m.schedule.layers().len() as u32,
        };
        let widths = [g.d_model, g.head_dim, g.ffn];
        let fits = widths.iter().all(|w| *w > 0 && w.is_multiple_of(4))
            && limits::kernels_take_head_dim(g.head_dim)
            && g.h_kv > 0
            && g.h_q.is_multiple_of(g.h_kv)
            && g.vocab > 0;
        if !fits {
            return Err(GpuError::InvalidInput(format!(
                "the GPU forward pass needs widths that are multiples of 4, heads of at most {} and \
                 query heads in whole groups per KV head ({g:?})",
                limits::KERNEL_MAX_HEAD_DIM
            )));
        }
        Ok(g)
    }

    pub(crate) fn q_width(&self) -> u64 {
        u64::from(self.h_q) * u64::from(self.head_dim)
    }

    pub(crate) fn qkv_width(&self) -> u64 {
        u64::from(self.h_q + 2 * self.h_kv) * u64::from(self.head_dim)
    }

    /// Floats of each activation buffer one pass over `tokens` tokens uses, by name.
    pub(crate) fn activations(&self, tokens: u64) -> [(&'static str, u64); 10] {
        let (d, ffn) = (u64::from(self.d_model), u64::from(self.ffn));
        let kv = u64::from(self.h_kv) * u64::from(self.head_dim);
        [
            ("x", tokens * d),
            ("h", tokens * d),
            ("qkv", tokens * self.qkv_width()),
            ("q", tokens * self.q_width()),
            ("k", tokens * kv),
            ("v", tokens * kv),
            ("o", tokens * self.q_width()),
            ("lse", tokens * u64::from(self.h_q)),
            ("attended", tokens * self.q_width()),
            ("gate_up", tokens * 2 * ffn),
        ]
    }

    /// Flops of one pass: 2 per multiply-add of every matmul, 4 d per attended (query, key) pair of
    /// attention and, with probabilities, 2 d more (the row softmax's Q·Kᵀ again).
    pub fn flops(&self, masks: &[Mask], tokens: u32, logit_rows: u32, probabilities: bool) -> u64 {
        let (t, d, ffn) = (u64::from(tokens), u64::from(self.d_model), u64::from(self.ffn));
        let per_layer_matmuls = 2 * t * (d * self.qkv_width() + self.q_width() * d + d * 2 * ffn + ffn * d);
        let shape = AttentionShape { h_q: self.h_q, h_kv: self.h_kv, n_q: tokens, n_kv: tokens, d: self.head_dim };
        let per_pair = if probabilities { 6 } else { 4 } * u64::from(self.head_dim);
        let attention: u64 = masks.iter().map(|&m| per_pair * shape.attended_pairs(m)).sum();
        let logits = 2 * u64::from(logit_rows) * d * u64::from(self.vocab);
        per_layer_matmuls * u64::from(self.layers) + attention + logits
    }
}

/// A weight matrix on the GPU and how it holds its values (f32, or a bf16 checkpoint's as they are).
pub(crate) struct Matrix {
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) format: WeightFormat,
}

impl Matrix {
    fn f32(ctx: &GpuContext, name: &str, values: &[f32]) -> Result<Self, GpuError> {
        Ok(Self { buffer: ctx.storage_from(name, values)?, format: WeightFormat::F32 })
    }
}

/// One layer's weights on the GPU; Q/K/V and gate/up stacked so each pair is one matmul.
pub(crate) struct LayerBuffers {
    pub(crate) mask: Mask,
    pub(crate) positional: Positional,
    pub(crate) input_norm: wgpu::Buffer,
    /// `[(h_q + 2 h_kv) d, d_model]` and its bias.
    pub(crate) qkv: Matrix,
    pub(crate) qkv_bias: Option<wgpu::Buffer>,
    pub(crate) o: Matrix,
    pub(crate) mlp_norm: wgpu::Buffer,
    /// Gemma 3's norms on the attention's and the MLP's outputs.
    pub(crate) output_norms: Option<OutputNormBuffers>,
    /// QK-norm's weights `[2, head_dim]` (query heads', then key heads'), when the layer has it.
    pub(crate) qk_norm: Option<wgpu::Buffer>,
    /// `[2 ffn, d_model]`: gate's rows, then up's.
    pub(crate) gate_up: Matrix,
    pub(crate) down: Matrix,
}

/// Gemma 3's norms on a block's outputs (`lm::checkpoint::OutputNorms`).
pub(crate) struct OutputNormBuffers {
    pub(crate) attention: wgpu::Buffer,
    pub(crate) mlp: wgpu::Buffer,
}

/// A checkpoint's weights on the GPU, uploaded once and used by every pass.
pub struct LmWeights {
    pub geometry: LmGeometry,
    pub rms_norm_eps: f32,
    pub style: BlockStyle,
    /// Llama 3.1's rotary scaling, on every layer.
    pub(crate) rope_scaling: Option<Llama3Scaling>,
    pub(crate) embed: Matrix,
    pub(crate) layers: Vec<LayerBuffers>,
    pub(crate) final_norm: wgpu::Buffer,
    /// `None`: tied to the embedding.
    pub(crate) lm_head: Option<Matrix>,
}

impl LmWeights {
    /// Uploads `ck` after checking its geometry, its total bytes against the job limit and each
    /// tensor against the binding limit.
    pub fn upload(ctx: &GpuContext, ck: &Checkpoint) -> Result<Self, GpuError> {
        let geometry = LmGeometry::of(ck)?;
        check_rotations(&geometry, ck.layers.iter().map(|l| l.positional))?;
        check_weight_sizes(ctx, f32_buffers(&ck.model), 0)?;
        let layers = ck.layers.iter().map(|l| upload_layer(ctx, l)).collect::<Result<_, _>>()?;
        Ok(Self {
            geometry,
            rms_norm_eps: ck.rms_norm_eps,
            style: ck.style,
            rope_scaling: ck.rope_scaling,
            embed: Matrix::f32(ctx, "embed", &ck.embed)?,
            layers,
            final_norm: ctx.storage_from("final norm", &ck.final_norm)?,
            lm_head: ck.lm_head.as_deref().map(|w| Matrix::f32(ctx, "lm head", w)).transpose()?,
        })
    }

    /// Each layer's mask.
    pub fn masks(&self) -> Vec<Mask> {
        self.layers.iter().map(|l| l.mask).collect()
    }
}

/// Refuses rotary positions the GPU's rope cannot apply a vec4 at a time (the CPU pass takes them).
pub(crate) fn check_rotations(g: &LmGeometry, positionals: impl Iterator<Item = Positional>) -> Result<(), GpuError> {
    for positional in positionals {
        let table = RopeTable::new(1, g.head_dim as usize, positional);
        rope::check_rotation((table.rotary_dims / 2) as u32, table.offset() as u32)?;
    }
    Ok(())
}

/// The model's weight buffers (name, bytes) and `extra` bytes of staging, each checked against the
/// binding limit and all against the job limit.
pub(crate) fn check_weight_sizes(ctx: &GpuContext, mut buffers: Vec<(&str, u64)>, extra: u64) -> Result<(), GpuError> {
    if extra > 0 {
        buffers.push(("staging", extra));
    }
    check_bytes(ctx, "the model's weights", &buffers)
}

/// The buffers (name, bytes) of `m`'s weights held as f32 (see `lm::weight_plan::slot_floats`).
fn f32_buffers(m: &Model) -> Vec<(&'static str, u64)> {
    slot_floats(m).into_iter().map(|(slot, floats)| (slot.name(), floats.saturating_mul(4))).collect()
}

/// Refuses `buffers` (name, floats) when one exceeds the binding limit or all exceed the job limit.
pub(crate) fn check_sizes(ctx: &GpuContext, what: &str, buffers: &[(&str, u64)]) -> Result<(), GpuError> {
    let bytes: Vec<(&str, u64)> = buffers.iter().map(|&(name, floats)| (name, floats.saturating_mul(4))).collect();
    check_bytes(ctx, what, &bytes)
}

/// Refuses `buffers` (name, bytes) when one exceeds the binding limit or all exceed the job limit.
fn check_bytes(ctx: &GpuContext, what: &str, buffers: &[(&str, u64)]) -> Result<(), GpuError> {
    let total = buffers.iter().fold(0u64, |sum, &(_, bytes)| sum.saturating_add(bytes));
    limits::check_job_bytes(total, limits::job_limit(Some(ctx.limits.max_buffer_size)))
        .map_err(|over| GpuError::LimitExceeded(format!("{what} {over}")))?;
    for &(name, bytes) in buffers {
        ctx.check_binding_size(name, bytes)?;
    }
    Ok(())
}

fn upload_layer(ctx: &GpuContext, l: &crate::lm::checkpoint::LayerWeights) -> Result<LayerBuffers, GpuError> {
    let stacked = |parts: &[&[f32]]| parts.concat();
    let qkv_bias = match (&l.q.bias, &l.k.bias, &l.v.bias) {
        (None, None, None) => None,
        (q, k, v) => {
            // A projection without a bias adds zeros.
            let or_zeros = |b: &Option<Vec<f32>>, n: usize| b.clone().unwrap_or_else(|| vec![0.0; n]);
            let bias = stacked(&[&or_zeros(q, l.q.outputs), &or_zeros(k, l.k.outputs), &or_zeros(v, l.v.outputs)]);
            Some(ctx.storage_from("qkv bias", &bias)?)
        }
    };
    Ok(LayerBuffers {
        mask: l.mask,
        positional: l.positional,
        input_norm: ctx.storage_from("input norm", &l.input_norm)?,
        qkv: Matrix::f32(ctx, "qkv", &stacked(&[&l.q.weight, &l.k.weight, &l.v.weight]))?,
        qkv_bias,
        qk_norm: l.qk_norm.as_ref().map(|n| ctx.storage_from("qk norm", &stacked(&[&n.q, &n.k]))).transpose()?,
        o: Matrix::f32(ctx, "o", &l.o.weight)?,
        mlp_norm: ctx.storage_from("MLP norm", &l.mlp_norm)?,
        output_norms: l.output_norms.as_ref().map(|n| upload_output_norms(ctx, n)).transpose()?,
        gate_up: Matrix::f32(ctx, "gate_up", &stacked(&[&l.gate.weight, &l.up.weight]))?,
        down: Matrix::f32(ctx, "down", &l.down.weight)?,
    })
}

fn upload_output_norms(ctx: &GpuContext, n: &OutputNorms) -> Result<OutputNormBuffers, GpuError> {
    Ok(OutputNormBuffers {
        attention: ctx.storage_from("attention output norm", &n.attention)?,
        mlp: ctx.storage_from("MLP output norm", &n.mlp)?,
    })
}
