//! Mamba mixers: the selective state-space layer of Mamba (Mamba-1) and Mamba-2, their state as
//! transformers 5.x caches it and their parameters, and the two families made of them alone.
//!
//! The cache keeps, per layer and sequence, a convolution window of `conv_kernel` inputs (not
//! `kernel - 1`: the cache is allocated `(channels, conv_kernel)`) in the model's dtype, and the SSM
//! state in float32 (every scan produces its final state in float32): Mamba-1 `inner x state_size`,
//! Mamba-2 `heads x head_dim x state_size`.

use super::family::Family;
use super::mixer_common::{self as common, Built, dtype_name, size_or_auto, state_geometry, width};
use super::reader::Reader;
use super::report::{ImportError, invalid};
use crate::model::config::{Model, StateGeometry};
use crate::model::schedule::{LayerKind, StateMixer};

/// A Mamba-1 mixer (Mamba, Jamba, Zamba).
pub(super) struct Mamba1 {
    pub d: u64,
    pub inner: u64,
    pub state: u64,
    pub kernel: u64,
    pub dt_rank: u64,
    pub conv_bias: bool,
    pub proj_bias: bool,
    /// Jamba's norms on dt, B and C: `dt_rank + 2 state`.
    pub inner_norms: u64,
}

impl Mamba1 {
    /// `in_proj d x 2I (+2I)`, `conv1d I x K (+I)`, `x_proj I x (R + 2N)`, `dt_proj R x I + I`,
    /// `A_log I x N`, `D I`, `out_proj I x d (+d)`, plus any inner norms.
    pub fn params(&self) -> u128 {
        let w = |n: u64| u128::from(n);
        let (d, i, n, k, r) = (w(self.d), w(self.inner), w(self.state), w(self.kernel), w(self.dt_rank));
        let bias = |on: bool, n: u128| if on { n } else { 0 };
        d * 2 * i
            + bias(self.proj_bias, 2 * i)
            + i * k
            + bias(self.conv_bias, i)
            + i * (r + 2 * n)
            + r * i
            + i
            + i * n
            + i
            + i * d
            + bias(self.proj_bias, d)
            + w(self.inner_norms)
    }

    pub fn geometry(&self, conv_bytes: u32) -> Result<StateGeometry, ImportError> {
        let w = |n: u64| u128::from(n);
        state_geometry(w(self.inner) * w(self.kernel), conv_bytes, w(self.inner) * w(self.state), 4, self.params())
    }
}

/// A Mamba-2 mixer (Mamba-2, Bamba, Granite 4, Nemotron-H, Falcon-H1, Zamba2).
pub(super) struct Mamba2 {
    pub d: u64,
    pub inner: u64,
    pub heads: u64,
    pub head_dim: u64,
    pub groups: u64,
    pub state: u64,
    pub kernel: u64,
    pub conv_bias: bool,
    /// Bias of `in_proj`.
    pub in_bias: bool,
    /// Bias of `out_proj`.
    pub out_bias: bool,
    /// The gated RMSNorm over the inner width (Falcon-H1 only with `mamba_rms_norm`).
    pub gated_norm: bool,
}

impl Mamba2 {
    /// Channels of the convolution: `I + 2 G N`.
    fn conv_dim(&self) -> u128 {
        u128::from(self.inner) + 2 * u128::from(self.groups) * u128::from(self.state)
    }

    /// `in_proj d x (I + conv_dim + heads) (+bias)`, `conv1d conv_dim x K (+conv_dim)`, `dt_bias`,
    /// `A_log`, `D` (heads each), the gated norm `I`, `out_proj I x d (+d)`.
    pub fn params(&self) -> u128 {
        let w = |n: u64| u128::from(n);
        let (d, i, heads) = (w(self.d), w(self.inner), w(self.heads));
        let proj = i + self.conv_dim() + heads;
        let bias = |on: bool, n: u128| if on { n } else { 0 };
        d * proj
            + bias(self.in_bias, proj)
            + self.conv_dim() * w(self.kernel)
            + bias(self.conv_bias, self.conv_dim())
            + 3 * heads
            + bias(self.gated_norm, i)
            + i * d
            + bias(self.out_bias, d)
    }

    pub fn geometry(&self, conv_bytes: u32) -> Result<StateGeometry, ImportError> {
        let w = |n: u64| u128::from(n);
        let state = w(self.heads) * w(self.head_dim) * w(self.state);
        state_geometry(self.conv_dim() * w(self.kernel), conv_bytes, state, 4, self.params())
    }

    /// The inner width must split into the heads.
    pub fn check(&self, field: &str) -> Result<(), ImportError> {
        if u128::from(self.heads) * u128::from(self.head_dim) != u128::from(self.inner) {
            return Err(invalid(
                field,
                format!("{} heads of {} do not make the inner width {}", self.heads, self.head_dim, self.inner),
            ));
        }
        Ok(())
    }
}

/// Runtimes that keep one input fewer of a convolution window than transformers: vLLM's state shapes
/// (`MambaStateShapeCalculator`: Mamba, Gated DeltaNet, short convolutions) and TensorRT-LLM's Mamba
/// (`conv_kernel - 1` columns).
pub(super) const VLLM_AND_TENSORRT_LLM: &str = "vLLM and TensorRT-LLM keep";
pub(super) const VLLM: &str = "vLLM keeps";

/// What `runtimes` keep of a `kernel`-input convolution window, said after a reading that counts all
/// of it: `kernel − 1` inputs, the newest being in hand when the convolution runs.
pub(super) fn one_input_fewer_elsewhere(runtimes: &str, kernel: u64) -> String {
    format!(" ({runtimes} {} inputs of the window, one fewer: the newest is in hand)", kernel.saturating_sub(1))
}

/// The reading every Mamba import carries: where its state sizes come from.
pub(super) fn state_reading(r: &mut Reader<'_>, kernel: u64, conv_bytes: u32) {
    r.read_as(format!(
        "Recurrent state as transformers 5.x caches it: a {kernel}-input convolution window in {} and the SSM \
         state in float32, per layer per sequence{}",
        dtype_name(conv_bytes),
        one_input_fewer_elsewhere(VLLM_AND_TENSORRT_LLM, kernel)
    ));
}

/// Mamba (`mamba`): every layer one RMSNorm and a Mamba-1 mixer, no attention, no FFN.
pub(super) fn mamba(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let (layers, d) = common::sizes(r)?;
    let m = common::start(r, family, layers, d)?;
    let expand = width(r, &["expand"], 2)?;
    let inner = d * expand;
    if let Some(i) = r.count(&["intermediate_size"])?
        && i != inner
    {
        r.warn(format!("intermediate_size {i} is ignored: Mamba always uses expand * hidden_size = {inner}"));
    }
    let mixer = Mamba1 {
        d,
        inner,
        state: width(r, &["state_size"], 16)?,
        kernel: width(r, &["conv_kernel"], 4)?,
        dt_rank: size_or_auto(r, "time_step_rank", d.div_ceil(16), "ceil(hidden_size / 16)")?,
        conv_bias: r.boolean("use_conv_bias").unwrap_or(true),
        proj_bias: r.boolean("use_bias").unwrap_or(false),
        inner_norms: 0,
    };
    let conv_bytes = common::dtype_bytes(r);
    let geometry = mixer.geometry(conv_bytes)?;
    Ok(only_mixers(r, m, geometry, mixer.kernel, conv_bytes, "Mamba"))
}

/// Mamba-2 (`mamba2`): every layer one RMSNorm and a Mamba-2 mixer.
pub(super) fn mamba2(r: &mut Reader<'_>, family: &Family) -> Result<Built, ImportError> {
    let (layers, d) = common::sizes(r)?;
    let m = common::start(r, family, layers, d)?;
    let expand = width(r, &["expand"], 2)?;
    let bias = r.boolean("use_bias").unwrap_or(false);
    let mixer = Mamba2 {
        d,
        inner: expand * d,
        heads: width(r, &["num_heads"], 128)?,
        head_dim: width(r, &["head_dim"], 64)?,
        groups: width(r, &["n_groups"], 8)?,
        state: width(r, &["state_size"], 128)?,
        kernel: width(r, &["conv_kernel"], 4)?,
        conv_bias: r.boolean("use_conv_bias").unwrap_or(true),
        in_bias: bias,
        out_bias: bias,
        gated_norm: true,
    };
    mixer.check("num_heads")?;
    let conv_bytes = common::dtype_bytes(r);
    let geometry = mixer.geometry(conv_bytes)?;
    Ok(only_mixers(r, m, geometry, mixer.kernel, conv_bytes, "Mamba-2"))
}

/// A model of `name` mixers alone: every layer one RMSNorm and the mixer, no attention, no FFN.
fn only_mixers(
    r: &mut Reader<'_>,
    mut m: Model,
    geometry: StateGeometry,
    kernel: u64,
    conv_bytes: u32,
    name: &str,
) -> Built {
    m.schedule = common::schedule(vec![LayerKind::Stateful(StateMixer::Ssm); m.n_layers() as usize]);
    m.states.ssm = Some(geometry);
    m.norms_per_layer = 1;
    state_reading(r, kernel, conv_bytes);
    r.read_as(format!("Every layer is a {name} mixer after one RMSNorm: no attention and no feed-forward block"));
    Built::exact(m)
}
