//! The configuration of a transformer language model, as far as memory and compute arithmetic
//! needs it: attention geometry (per layer type where a model has two), MLA, K=V and cross-layer
//! sharing, the layer schedule, the FFN (dense or MoE), embeddings and positions.
//!
//! Fields are public so presets, the importer and the URL decoder can build models directly;
//! [`Model::validate`] checks the limits that keep every figure in range (see [`bounds`]).

use std::fmt;

use super::schedule::{LayerKind, Schedule, StateMixer};

/// Bounds on every size field. With them no product in this module can overflow `u128`, so the
/// arithmetic can stay simple; they are far above any published model.
pub mod bounds {
    pub const MAX_LAYERS: u32 = 4096;
    pub const MAX_D_MODEL: u64 = 1 << 20;
    pub const MAX_HEADS: u32 = 1 << 14;
    /// The widest head a config may declare (the arithmetic's bound; the GPU kernels take at most
    /// `model::limits::KERNEL_MAX_HEAD_DIM`, and wider heads run on the CPU).
    pub const MAX_CONFIG_HEAD_DIM: u32 = 1 << 14;
    pub const MAX_RANK: u32 = 1 << 20;
    pub const MAX_FFN: u64 = 1 << 24;
    pub const MAX_VOCAB: u64 = 1 << 24;
    pub const MAX_EXPERTS: u32 = 1 << 14;
    pub const MAX_WINDOW_TOKENS: u64 = 1 << 40;
    pub const MAX_POSITIONS: u64 = 1 << 40;
    /// Largest linear RoPE scaling factor (published ones are at most a few dozen).
    pub const MAX_ROPE_FACTOR: f64 = 1e6;
    /// Largest recurrent state of one layer, in elements (Mamba 2.8B holds about 10^5; RWKV-7's widest
    /// about 10^7).
    pub const MAX_STATE_ELEMENTS: u64 = 1 << 40;
    /// Largest parameter count of one layer's recurrent mixer.
    pub const MAX_MIXER_PARAMS: u64 = 1 << 40;
}

/// K/V geometry of the layers of one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttnGeometry {
    /// KV heads: equal to the query heads for MHA, fewer for GQA, 1 for MQA.
    pub n_kv_heads: u32,
    /// Per-head dimension of Q, K and V (explicit: need not equal d_model / heads).
    pub head_dim: u32,
    /// One tensor serves as both K and V (Gemma 4 12B global layers): no V projection, half the cache.
    pub k_eq_v: bool,
}

/// Multi-head latent attention (DeepSeek V2/V3). The cache holds one latent of `kv_lora_rank`
/// plus one shared RoPE key of `qk_rope_head_dim` per token per layer, whatever the head count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mla {
    pub kv_lora_rank: u32,
    pub qk_rope_head_dim: u32,
    /// Query down-projection rank; `None` means Q is projected directly from the hidden state.
    pub q_lora_rank: Option<u32>,
    pub qk_nope_head_dim: u32,
    pub v_head_dim: u32,
    /// DeepSeek V3.2's lightning indexer: one key of this width per token, cached beside the latent
    /// in the layers that run the indexer (`index_head_dim`); `None` without an indexer.
    pub index_head_dim: Option<u32>,
    /// Which layers run the indexer and keep its key, by transformers' `GlmMoeDsaConfig` rule: layer
    /// `i` does when `max(i + 1 - index_skip_topk_offset, 0)` is a multiple of `index_topk_freq`, and
    /// layer 0 always (GLM-5.2: 4 and 3, 21 of 78 layers); the others reuse the last such layer's
    /// top-k. 1 (with offset 0): every layer, as DeepSeek V3.2.
    pub index_topk_freq: u32,
    pub index_skip_topk_offset: u32,
}

impl Mla {
    /// DeepSeek V2 and V3's latent attention sizes (no indexer).
    pub const DEEPSEEK: Mla = Mla {
        kv_lora_rank: 512,
        qk_rope_head_dim: 64,
        q_lora_rank: Some(1536),
        qk_nope_head_dim: 128,
        v_head_dim: 128,
        index_head_dim: None,
        index_topk_freq: 1,
        index_skip_topk_offset: 0,
    };

    /// Whether layer `layer` (0-based) caches an indexer key (never without an indexer). Layer 0 always
    /// does: with no earlier top-k to reuse, transformers runs its indexer even where the rule says shared.
    pub const fn keeps_indexer_key(&self, layer: u32) -> bool {
        self.index_head_dim.is_some()
            && (layer == 0
                || layer
                    .saturating_add(1)
                    .saturating_sub(self.index_skip_topk_offset)
                    .is_multiple_of(self.indexer_step()))
    }

    /// Whether the indexer runs in only some layers (its key is then not in every layer's cache).
    pub const fn indexer_in_some_layers(&self) -> bool {
        self.index_head_dim.is_some() && self.indexer_step() > 1
    }

    const fn indexer_step(&self) -> u32 {
        if self.index_topk_freq == 0 { 1 } else { self.index_topk_freq }
    }
}

/// The feed-forward block. Gated variants have three matrices (gate, up, down), the plain MLP two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FfnKind {
    /// SiLU-gated (Llama, Mistral, Qwen, DeepSeek): 3 matrices.
    SwiGlu,
    /// GELU-gated (Gemma): 3 matrices.
    GeGlu,
    /// Plain two-matrix MLP with GELU or ReLU (GPT-2, the original Transformer).
    Mlp,
}

impl FfnKind {
    pub const fn matrices(self) -> u32 {
        match self {
            FfnKind::SwiGlu | FfnKind::GeGlu => 3,
            FfnKind::Mlp => 2,
        }
    }
}

/// Mixture of experts in the FFN of some layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Moe {
    pub n_routed_experts: u32,
    /// Routed experts each token uses (top-k).
    pub n_active_experts: u32,
    /// Always-on shared experts (each of `expert_ffn_size`).
    pub n_shared_experts: u32,
    pub expert_ffn_size: u64,
    /// The first layers keep a dense FFN (DeepSeek's `first_k_dense_replace`).
    pub first_dense_layers: u32,
    /// After those, every `layer_step`-th layer is MoE (Llama 4 Maverick: 2, i.e. odd layers).
    pub layer_step: u32,
}

impl Moe {
    /// Whether layer `layer` (0-based) has an MoE FFN.
    pub const fn is_moe_layer(&self, layer: u32) -> bool {
        layer >= self.first_dense_layers
            && self.layer_step > 0
            && (layer - self.first_dense_layers + 1).is_multiple_of(self.layer_step)
    }
}

/// How positions enter the model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Positional {
    /// Fixed sinusoids added to the embeddings (original Transformer): no parameters.
    Sinusoidal,
    /// A learned table of `max_positions` vectors (GPT-2).
    Learned { max_positions: u64 },
    /// Rotary embeddings on Q and K ([`crate::attention::rope`] computes the angles).
    Rope {
        theta: f64,
        /// Share of each head's dimensions that rotate, in (0, 1].
        partial_rotary_factor: f64,
        /// Transformers' `proportional` RoPE (Gemma 4's global layers): the rotating pairs keep the
        /// fastest frequencies of a RoPE over the whole head (exponents `2j/d`) and the slower pairs
        /// stand still. Otherwise the rotating dimensions form a RoPE of their own (exponents `2j/r`).
        proportional: bool,
        /// Linear position scaling: positions are divided by it, so every wavelength grows by it (1:
        /// none; Gemma 3's global layers: 8).
        linear_factor: f64,
    },
    /// No positional signal in this layer (Llama 4's global layers).
    NoPe,
    /// ALiBi (BLOOM, MPT, some Falcons): nothing is added to Q or K; each head adds to its scores a
    /// fixed bias proportional to the query-key distance (a per-head slope). No parameters.
    Alibi,
}

impl Positional {
    /// Plain RoPE of base `theta` over every dimension of the head, unscaled.
    pub const fn rope(theta: f64) -> Positional {
        Positional::Rope { theta, partial_rotary_factor: 1.0, proportional: false, linear_factor: 1.0 }
    }
}

/// What one layer of a recurrent mixer (a [`StateMixer`]) keeps per sequence, and what it weighs.
///
/// The sizes are those of the reference implementation's cache (which one is the importer's to say):
/// for Mamba, `channels x conv_kernel` inputs of the convolution plus `channels x state_size` of the
/// SSM state; for linear attention, `heads x key_dim x value_dim`. They do not depend on the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StateGeometry {
    /// Elements of the convolution (or token-shift) window kept per layer.
    pub conv_elements: u64,
    /// Elements of the recurrent state proper per layer.
    pub state_elements: u64,
    /// Bytes per element of the window and of the state, as the reference cache stores them (the
    /// model's dtype, or 4 where the reference keeps the state in float32).
    pub conv_bytes: u32,
    pub state_bytes: u32,
    /// Parameters of one such layer's mixer (projections, convolution, decay and skip terms, norms).
    pub params: u64,
}

impl StateGeometry {
    /// Bytes one layer keeps per sequence.
    pub const fn bytes_per_layer(&self) -> u128 {
        self.conv_elements as u128 * self.conv_bytes as u128 + self.state_elements as u128 * self.state_bytes as u128
    }
}

/// The state geometry of each recurrent mixer a model uses (`None` for mixers it has no layer of).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct States {
    pub ssm: Option<StateGeometry>,
    pub linear: Option<StateGeometry>,
    pub conv: Option<StateGeometry>,
    /// A recurrent mixer that every attention layer also runs, so those layers keep a KV cache *and*
    /// a state: Falcon-H1 runs Mamba-2 beside attention in each layer; Zamba's hybrid layers are Mamba
    /// layers that also call the shared attention block.
    pub beside_attention: Option<StateMixer>,
}

impl States {
    pub const fn of(&self, mixer: StateMixer) -> Option<StateGeometry> {
        match mixer {
            StateMixer::Ssm => self.ssm,
            StateMixer::Linear => self.linear,
            StateMixer::Conv => self.conv,
        }
    }

    pub fn set(&mut self, mixer: StateMixer, geometry: Option<StateGeometry>) {
        match mixer {
            StateMixer::Ssm => self.ssm = geometry,
            StateMixer::Linear => self.linear = geometry,
            StateMixer::Conv => self.conv = geometry,
        }
    }
}

/// Layers that reuse another layer's cache store nothing of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrossLayerSharing {
    None,
    /// The last `shared_layers` layers reuse the cache of the last earlier layer of the same kind
    /// (Gemma 4 E4B's `num_kv_shared_layers`).
    ReuseLast {
        shared_layers: u32,
    },
    /// Consecutive groups of `group_size` layers share one cache, computed by the group's first layer
    /// (cross-layer attention). A layer whose kind differs from its group's first layer keeps its own.
    Groups {
        group_size: u32,
    },
}

/// Normalisation layers (for the parameter count only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NormKind {
    /// Scale only: `d` parameters.
    RmsNorm,
    /// Scale and bias: `2d` parameters.
    LayerNorm,
    /// LayerNorm with a scale and no bias (MPT with `no_bias`, Cohere): `d` parameters.
    LayerNormNoBias,
    /// LayerNorm with neither scale nor bias (OLMo 1): no parameters.
    NonParametric,
}

impl NormKind {
    /// Parameters of one norm over `width` features.
    pub const fn params(self, width: u128) -> u128 {
        match self {
            NormKind::RmsNorm | NormKind::LayerNormNoBias => width,
            NormKind::LayerNorm => 2 * width,
            NormKind::NonParametric => 0,
        }
    }
}

/// Which linear layers carry a bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Biases {
    /// Q, K and V projections (GPT-2, Qwen2).
    pub qkv: bool,
    /// Output projection (GPT-2).
    pub o: bool,
    /// FFN matrices (GPT-2); in MoE layers every expert's matrices and the router (GPT-OSS).
    pub ffn: bool,
}

/// A whole model. `schedule.len()` is the layer count.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Preset id, or `"custom"` / `"imported"`.
    pub id: String,
    pub name: String,
    pub d_model: u64,
    pub n_q_heads: u32,
    /// Geometry of every layer, or of the non-global layers when `global_attn` is set.
    pub attn: AttnGeometry,
    /// Geometry of global layers when it differs (Gemma 4: 1 KV head of 512 dims, K=V).
    pub global_attn: Option<AttnGeometry>,
    /// When set, every layer uses MLA and `attn` only gives the head count used by the Q path.
    pub mla: Option<Mla>,
    pub schedule: Schedule,
    pub cross_layer: CrossLayerSharing,
    pub ffn_kind: FfnKind,
    /// Hidden size of the dense FFN (for MoE models: of the dense layers).
    pub ffn_size: u64,
    pub moe: Option<Moe>,
    pub vocab_size: u64,
    pub tie_embeddings: bool,
    /// Positional scheme of non-global layers (of all layers when `global_positional` is `None`).
    pub positional: Positional,
    /// Positional scheme of global layers when it differs (Gemma 3/4 theta, Llama 4 NoPE).
    pub global_positional: Option<Positional>,
    pub biases: Biases,
    pub norm: NormKind,
    /// Norm layers per block (2: pre-attention, pre-FFN; Gemma 2/3/4 add post-norms: 4).
    pub norms_per_layer: u32,
    /// Learned RMS norms on Q and K of `head_dim` each (Qwen3, Gemma 3/4).
    pub qk_norm: bool,
    /// The QK-norm weights span the whole projection, one per query (key) feature of every head:
    /// `h d_h + g d_h` per layer instead of `2 d_h` (OLMo 2, Cohere). Only read with `qk_norm`.
    pub qk_norm_per_head: bool,
    /// Attention sinks: one learned logit per query head per attention layer (GPT-OSS).
    pub attn_sinks: bool,
    /// Gemma's per-layer input embeddings (E2B/E4B), width per layer; 0 when absent.
    pub per_layer_input_dim: u64,
    pub max_position_embeddings: u64,
    /// State and parameters of the recurrent layers (`LayerKind::Stateful`); all `None` for a
    /// transformer.
    pub states: States,
}

/// Why a model cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A field is zero, or above its limit in [`bounds`].
    OutOfRange { field: &'static str, value: u128, min: u128, max: u128 },
    /// Query heads must split evenly into KV groups.
    HeadsNotDivisible { q_heads: u32, kv_heads: u32 },
    /// A sliding window or chunk of zero tokens.
    ZeroWindow { layer: usize },
    /// Sharing would leave a layer with no cache to read.
    BadSharing(String),
    /// Anything else, in words.
    Invalid(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::OutOfRange { field, value, min, max } => {
                write!(f, "{field} = {value} is out of range ({min}..={max})")
            }
            ConfigError::HeadsNotDivisible { q_heads, kv_heads } => {
                write!(f, "{q_heads} query heads cannot be split evenly over {kv_heads} KV heads")
            }
            ConfigError::ZeroWindow { layer } => {
                write!(f, "layer {layer} has a window or chunk of 0 tokens")
            }
            ConfigError::BadSharing(s) | ConfigError::Invalid(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ConfigError {}

fn check(field: &'static str, value: u128, min: u128, max: u128) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(ConfigError::OutOfRange { field, value, min, max });
    }
    Ok(())
}

impl Model {
    pub fn n_layers(&self) -> u32 {
        u32::try_from(self.schedule.len()).unwrap_or(u32::MAX)
    }

    /// The K/V geometry of a layer of the given kind.
    pub fn geometry(&self, kind: LayerKind) -> AttnGeometry {
        match (kind, self.global_attn) {
            (LayerKind::Global, Some(g)) => g,
            _ => self.attn,
        }
    }

    /// The positional scheme of a layer of the given kind.
    pub fn positional_for(&self, kind: LayerKind) -> Positional {
        match (kind, self.global_positional) {
            (LayerKind::Global, Some(p)) => p,
            _ => self.positional,
        }
    }

    /// Whether layer `layer` computes and stores its own K/V (false: it reads another layer's cache,
    /// or has no attention). For every layer at once use [`Model::kv_storing_layers`], which is linear
    /// in the layer count where a loop over this is quadratic.
    pub fn stores_kv(&self, layer: usize) -> bool {
        self.kv_storing_layers().get(layer).copied().unwrap_or(false)
    }

    /// [`Model::stores_kv`] of every layer, in one pass.
    pub fn kv_storing_layers(&self) -> Vec<bool> {
        let layers = self.schedule.layers();
        match self.cross_layer {
            CrossLayerSharing::None => layers.iter().map(|k| k.is_attention()).collect(),
            CrossLayerSharing::ReuseLast { shared_layers } => {
                let first_shared = layers.len().saturating_sub(shared_layers as usize);
                let earlier = &layers[..first_shared];
                // A shared layer needs an earlier non-shared layer of its kind to read from.
                let mut kinds_before: Vec<LayerKind> = Vec::new();
                for k in earlier {
                    if !kinds_before.contains(k) {
                        kinds_before.push(*k);
                    }
                }
                layers
                    .iter()
                    .enumerate()
                    .map(|(l, k)| k.is_attention() && (l < first_shared || !kinds_before.contains(k)))
                    .collect()
            }
            CrossLayerSharing::Groups { group_size } => {
                // Groups of consecutive attention layers: in a hybrid the layers without attention
                // between them neither count nor break a group (in a transformer, index = layer). A
                // layer whose kind differs from its group's first layer keeps its own cache.
                let g = (group_size as usize).max(1);
                let (mut index, mut leader) = (0usize, None::<LayerKind>);
                layers
                    .iter()
                    .map(|&k| {
                        if !k.is_attention() {
                            return false;
                        }
                        let first_of_group = index % g == 0;
                        if first_of_group {
                            leader = Some(k);
                        }
                        index += 1;
                        first_of_group || leader != Some(k)
                    })
                    .collect()
            }
        }
    }

    /// Whether any layer runs softmax attention (a pure state-space model has none: its attention
    /// geometry is unused and never shown).
    pub fn has_attention(&self) -> bool {
        self.schedule.layers().iter().any(|k| k.is_attention())
    }

    /// Layers that run softmax attention.
    pub fn attention_layers(&self) -> u32 {
        self.schedule.layers().iter().filter(|k| k.is_attention()).count() as u32
    }

    /// The recurrent mixer a layer of `kind` runs, if any: its own, or the one beside attention.
    pub fn state_mixer(&self, kind: LayerKind) -> Option<StateMixer> {
        match kind.state_mixer() {
            Some(m) => Some(m),
            None if kind.is_attention() => self.states.beside_attention,
            None => None,
        }
    }

    /// The state geometry of a layer of `kind` (`None` for layers that keep no state).
    pub fn state_geometry(&self, kind: LayerKind) -> Option<StateGeometry> {
        self.state_mixer(kind).and_then(|m| self.states.of(m))
    }

    /// Check every field against [`bounds`] and the structural rules.
    pub fn validate(&self) -> Result<(), ConfigError> {
        use bounds::*;
        check("n_layers", self.schedule.len() as u128, 1, MAX_LAYERS.into())?;
        self.validate_states()?;
        check("d_model", self.d_model.into(), 1, MAX_D_MODEL.into())?;
        check("n_q_heads", self.n_q_heads.into(), 1, MAX_HEADS.into())?;
        for (g, which) in [(Some(self.attn), "attn"), (self.global_attn, "global_attn")] {
            let Some(g) = g else { continue };
            let field = if which == "attn" { "n_kv_heads" } else { "global n_kv_heads" };
            check(field, g.n_kv_heads.into(), 1, MAX_HEADS.into())?;
            let field = if which == "attn" { "head_dim" } else { "global head_dim" };
            check(field, g.head_dim.into(), 1, MAX_CONFIG_HEAD_DIM.into())?;
            if self.mla.is_none() && !self.n_q_heads.is_multiple_of(g.n_kv_heads) {
                return Err(ConfigError::HeadsNotDivisible { q_heads: self.n_q_heads, kv_heads: g.n_kv_heads });
            }
        }
        if let Some(m) = self.mla {
            check("kv_lora_rank", m.kv_lora_rank.into(), 1, MAX_RANK.into())?;
            check("qk_rope_head_dim", m.qk_rope_head_dim.into(), 0, MAX_CONFIG_HEAD_DIM.into())?;
            check("qk_nope_head_dim", m.qk_nope_head_dim.into(), 0, MAX_CONFIG_HEAD_DIM.into())?;
            check("v_head_dim", m.v_head_dim.into(), 1, MAX_CONFIG_HEAD_DIM.into())?;
            if let Some(q) = m.q_lora_rank {
                check("q_lora_rank", q.into(), 1, MAX_RANK.into())?;
            }
            if let Some(i) = m.index_head_dim {
                check("index_head_dim", i.into(), 1, MAX_CONFIG_HEAD_DIM.into())?;
            }
            check("index_topk_freq", m.index_topk_freq.into(), 1, MAX_LAYERS.into())?;
            check("index_skip_topk_offset", m.index_skip_topk_offset.into(), 0, MAX_LAYERS.into())?;
            if m.qk_rope_head_dim + m.qk_nope_head_dim == 0 {
                return Err(ConfigError::Invalid("MLA query/key head dimension is 0".into()));
            }
        }
        for (i, k) in self.schedule.layers().iter().enumerate() {
            match *k {
                LayerKind::Global | LayerKind::Stateful(_) | LayerKind::FeedForward => {}
                LayerKind::Sliding { window_tokens: w } | LayerKind::Chunked { chunk_tokens: w } => {
                    if w == 0 {
                        return Err(ConfigError::ZeroWindow { layer: i });
                    }
                    check("window", w.into(), 1, MAX_WINDOW_TOKENS.into())?;
                }
            }
        }
        match self.cross_layer {
            CrossLayerSharing::None => {}
            CrossLayerSharing::ReuseLast { shared_layers } => {
                if shared_layers >= self.n_layers() {
                    return Err(ConfigError::BadSharing(format!(
                        "{shared_layers} shared layers leave no layer of the {} to compute a cache",
                        self.n_layers()
                    )));
                }
            }
            CrossLayerSharing::Groups { group_size } => {
                check("cross-layer group size", group_size.into(), 1, MAX_LAYERS.into())?
            }
        }
        check("ffn_size", self.ffn_size.into(), 0, MAX_FFN.into())?;
        if let Some(m) = self.moe {
            check("n_routed_experts", m.n_routed_experts.into(), 1, MAX_EXPERTS.into())?;
            check("n_active_experts", m.n_active_experts.into(), 1, m.n_routed_experts.into())?;
            check("n_shared_experts", m.n_shared_experts.into(), 0, MAX_EXPERTS.into())?;
            check("expert_ffn_size", m.expert_ffn_size.into(), 1, MAX_FFN.into())?;
            check("moe layer step", m.layer_step.into(), 1, MAX_LAYERS.into())?;
        }
        check("vocab_size", self.vocab_size.into(), 0, MAX_VOCAB.into())?;
        check("norms_per_layer", self.norms_per_layer.into(), 0, 16)?;
        check("per_layer_input_dim", self.per_layer_input_dim.into(), 0, MAX_D_MODEL.into())?;
        check("max_position_embeddings", self.max_position_embeddings.into(), 0, MAX_POSITIONS.into())?;
        for p in [Some(self.positional), self.global_positional].into_iter().flatten() {
            match p {
                Positional::Rope { theta, partial_rotary_factor, linear_factor, .. } => {
                    if !(theta.is_finite() && theta > 0.0) {
                        return Err(ConfigError::Invalid(format!("rope theta {theta} must be positive")));
                    }
                    if !(linear_factor > 0.0 && linear_factor <= MAX_ROPE_FACTOR) {
                        return Err(ConfigError::Invalid(format!(
                            "rope scaling factor {linear_factor} must be positive and at most {}",
                            MAX_ROPE_FACTOR
                        )));
                    }
                    if !(partial_rotary_factor > 0.0 && partial_rotary_factor <= 1.0) {
                        return Err(ConfigError::Invalid(format!(
                            "partial rotary factor {partial_rotary_factor} must be in (0, 1]"
                        )));
                    }
                }
                Positional::Learned { max_positions } => {
                    check("learned positions", max_positions.into(), 1, MAX_POSITIONS.into())?
                }
                Positional::Sinusoidal | Positional::NoPe | Positional::Alibi => {}
            }
        }
        Ok(())
    }

    /// Every recurrent layer has its mixer's state geometry, within limits; no geometry is left without
    /// a layer (it would count parameters nothing uses).
    fn validate_states(&self) -> Result<(), ConfigError> {
        use bounds::*;
        if self.states.beside_attention.is_some() && !self.has_attention() {
            return Err(ConfigError::Invalid("a mixer beside attention needs an attention layer".into()));
        }
        for mixer in StateMixer::ALL {
            let used = self.schedule.layers().iter().any(|&k| self.state_mixer(k) == Some(mixer));
            match (self.states.of(mixer), used) {
                (None, true) => {
                    return Err(ConfigError::Invalid(format!("{} layers need their state sizes", mixer.noun())));
                }
                (Some(_), false) => {
                    return Err(ConfigError::Invalid(format!(
                        "state sizes are given for {} layers, but the model has none",
                        mixer.noun()
                    )));
                }
                (Some(g), true) => {
                    check("conv state elements", g.conv_elements.into(), 0, MAX_STATE_ELEMENTS.into())?;
                    check("state elements", g.state_elements.into(), 0, MAX_STATE_ELEMENTS.into())?;
                    check("conv state bytes per element", g.conv_bytes.into(), 1, 8)?;
                    check("state bytes per element", g.state_bytes.into(), 1, 8)?;
                    check("mixer parameters", g.params.into(), 0, MAX_MIXER_PARAMS.into())?;
                }
                (None, false) => {}
            }
        }
        Ok(())
    }

    /// A plain decoder with the given sizes and defaults (RMSNorm, SwiGLU, RoPE 10000, all global,
    /// MHA, `head_dim = d_model / heads`): the base the encoder and the tests start from.
    pub fn simple(n_layers: u32, d_model: u64, n_heads: u32) -> Model {
        let head_dim = u32::try_from(d_model / u64::from(n_heads.max(1))).unwrap_or(u32::MAX);
        Model {
            id: "custom".into(),
            name: "Custom model".into(),
            d_model,
            n_q_heads: n_heads,
            attn: AttnGeometry { n_kv_heads: n_heads, head_dim, k_eq_v: false },
            global_attn: None,
            mla: None,
            schedule: Schedule::uniform(n_layers, LayerKind::Global),
            cross_layer: CrossLayerSharing::None,
            ffn_kind: FfnKind::SwiGlu,
            ffn_size: 4 * d_model,
            moe: None,
            vocab_size: 32_000,
            tie_embeddings: false,
            positional: Positional::rope(10_000.0),
            global_positional: None,
            biases: Biases::default(),
            norm: NormKind::RmsNorm,
            norms_per_layer: 2,
            qk_norm: false,
            qk_norm_per_head: false,
            attn_sinks: false,
            per_layer_input_dim: 0,
            max_position_embeddings: 4096,
            states: States::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_model_is_valid() {
        let m = Model::simple(32, 4096, 32);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.attn.head_dim, 128);
        assert_eq!(m.n_layers(), 32);
    }

    #[test]
    fn validation_catches_bad_fields() {
        let mut m = Model::simple(4, 64, 8);
        m.attn.n_kv_heads = 3;
        assert_eq!(m.validate(), Err(ConfigError::HeadsNotDivisible { q_heads: 8, kv_heads: 3 }));
        let mut m = Model::simple(4, 64, 8);
        m.attn.n_kv_heads = 0;
        assert!(matches!(m.validate(), Err(ConfigError::OutOfRange { field: "n_kv_heads", .. })));
        let m = Model::simple(0, 64, 8);
        assert!(matches!(m.validate(), Err(ConfigError::OutOfRange { field: "n_layers", .. })));
        let mut m = Model::simple(4, 64, 8);
        m.schedule = Schedule::uniform(4, LayerKind::Sliding { window_tokens: 0 });
        assert_eq!(m.validate(), Err(ConfigError::ZeroWindow { layer: 0 }));
        let mut m = Model::simple(4, 64, 8);
        m.cross_layer = CrossLayerSharing::ReuseLast { shared_layers: 4 };
        assert!(matches!(m.validate(), Err(ConfigError::BadSharing(_))));
        let mut m = Model::simple(4, 64, 8);
        m.positional = Positional::rope(f64::NAN);
        assert!(m.validate().is_err());
        let mut m = Model::simple(4, 64, 8);
        m.positional =
            Positional::Rope { theta: 1e4, partial_rotary_factor: 0.0, proportional: false, linear_factor: 1.0 };
        assert!(m.validate().is_err());
        for bad in [0.0, -2.0, f64::INFINITY, 1e7] {
            let mut m = Model::simple(4, 64, 8);
            m.positional =
                Positional::Rope { theta: 1e4, partial_rotary_factor: 1.0, proportional: false, linear_factor: bad };
            assert!(m.validate().is_err(), "{bad}");
        }
        let m = Model::simple(4, bounds::MAX_D_MODEL + 1, 8);
        assert!(m.validate().is_err());
        // Error messages are words, not debug dumps.
        assert!(ConfigError::HeadsNotDivisible { q_heads: 8, kv_heads: 3 }.to_string().contains("8 query heads"));
    }

    #[test]
    fn stores_kv_rules() {
        let mut m = Model::simple(6, 64, 8);
        assert!((0..6).all(|l| m.stores_kv(l)));
        assert!(!m.stores_kv(6));
        m.cross_layer = CrossLayerSharing::Groups { group_size: 2 };
        let stores: Vec<bool> = (0..6).map(|l| m.stores_kv(l)).collect();
        assert_eq!(stores, [true, false, true, false, true, false]);
        m.cross_layer = CrossLayerSharing::ReuseLast { shared_layers: 2 };
        let stores: Vec<bool> = (0..6).map(|l| m.stores_kv(l)).collect();
        assert_eq!(stores, [true, true, true, true, false, false]);
        // A shared global layer with no earlier global layer must keep its own cache.
        let sw = LayerKind::Sliding { window_tokens: 4 };
        m.schedule = Schedule::from_layers(vec![sw, sw, sw, sw, sw, LayerKind::Global]);
        assert!(m.stores_kv(5));
        assert!(!m.stores_kv(4));
        // Groups never share across kinds.
        m.cross_layer = CrossLayerSharing::Groups { group_size: 2 };
        m.schedule = Schedule::from_layers(vec![sw, LayerKind::Global, sw, sw, LayerKind::Global, LayerKind::Global]);
        let stores: Vec<bool> = (0..6).map(|l| m.stores_kv(l)).collect();
        assert_eq!(stores, [true, true, true, false, true, false]);
        // In a hybrid, groups count attention layers only: with Mamba layers between them, global
        // layers 1 and 3 form a group (3 reads 1's cache), 5 leads the next.
        let ssm = LayerKind::Stateful(StateMixer::Ssm);
        m.schedule =
            Schedule::from_layers(vec![ssm, LayerKind::Global, ssm, LayerKind::Global, ssm, LayerKind::Global]);
        m.states.ssm =
            Some(StateGeometry { conv_elements: 1, state_elements: 1, conv_bytes: 2, state_bytes: 2, params: 0 });
        let stores: Vec<bool> = (0..6).map(|l| m.stores_kv(l)).collect();
        assert_eq!(stores, [false, true, false, false, false, true]);
    }

    #[test]
    fn moe_layer_selection() {
        let maverick = Moe {
            n_routed_experts: 128,
            n_active_experts: 1,
            n_shared_experts: 1,
            expert_ffn_size: 8192,
            first_dense_layers: 0,
            layer_step: 2,
        };
        let moe_layers: Vec<u32> = (0..6).filter(|&l| maverick.is_moe_layer(l)).collect();
        assert_eq!(moe_layers, [1, 3, 5]);
        // DeepSeek V3: 3 dense layers, then a routed MoE in every layer.
        let v3 = crate::catalog::presets::preset("deepseek-v3").unwrap().moe.unwrap();
        assert_eq!((0..61).filter(|&l| v3.is_moe_layer(l)).count(), 58);
        assert!(!v3.is_moe_layer(2));
    }
}
