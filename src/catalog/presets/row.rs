//! The columns of the preset table and how a row becomes a [`Preset`]: the sizes every model has,
//! then the shape it shares with its family (Llama-like, Llama 4, MLA, Gemma's local/global hybrid).

use crate::model::config::{AttnGeometry, Biases, CrossLayerSharing, FfnKind, Mla, Model, Moe, NormKind, Positional};
use crate::model::schedule::{LayerKind, Schedule};

/// A preset: id (URL `model=`), display name, the model, and the config fields it is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub id: &'static str,
    pub display_name: &'static str,
    pub model: Model,
    /// Hugging Face `config.json` fields (or paper quantities) the values come from.
    pub fields: &'static [&'static str],
    /// Simplifications and values we are unsure of.
    pub notes: &'static str,
}

/// One published model.
pub(super) struct Row {
    /// URL `model=` id, also the model's id.
    pub id: &'static str,
    /// Menu label.
    pub display_name: &'static str,
    /// The model's own name.
    pub name: &'static str,
    pub size: Size,
    pub max_positions: u64,
    pub shape: Shape,
    /// Hugging Face `config.json` fields (or paper quantities) the values come from.
    pub fields: &'static [&'static str],
    /// Simplifications and values we are unsure of.
    pub notes: &'static str,
}

/// The sizes every model has.
pub(super) struct Size {
    pub layers: u32,
    pub hidden: u64,
    pub heads: u32,
    /// KV heads of every layer (of the local layers where global layers differ).
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Dense FFN width.
    pub ffn: u64,
    pub vocab: u64,
}

/// What a model shares with its family beyond its sizes.
pub(super) enum Shape {
    /// The original Transformer and GPT-2: LayerNorm, biases on every linear, a two-matrix MLP,
    /// tied embeddings.
    Classic { positional: Positional },
    /// A Llama-style decoder: RMSNorm, SwiGLU, RoPE, untied, no biases; every layer of one kind.
    LlamaLike { rope_theta: f64, layers: LayerKind, qk_norm: bool },
    /// Llama 4: Llama-like, but every 4th layer is global with no positions and the others are
    /// chunked; an MoE FFN.
    Llama4 { rope_theta: f64, chunk_tokens: u64, moe: Moe },
    /// DeepSeek V2/V3: Llama-like with multi-head latent attention and an MoE FFN.
    Mla { rope_theta: f64, mla: Mla, moe: Moe },
    /// Gemma 3/4: sliding local layers between global ones.
    Gemma(Gemma),
}

/// Gemma's local/global hybrid: GeGLU, tied embeddings, four norms per block, QK-norm.
pub(super) struct Gemma {
    /// Sliding layers of `window` tokens before each global layer.
    pub local_per_global: u32,
    pub window: u64,
    /// Gemma 4 makes the last layer global whatever the pattern gives.
    pub last_global: bool,
    pub local_rope_theta: f64,
    pub global_rope: Positional,
    /// Global layers' geometry where it differs from the local one (Gemma 4).
    pub global_attn: Option<AttnGeometry>,
    pub cross_layer: CrossLayerSharing,
    pub per_layer_input_dim: u64,
}

impl Row {
    pub(super) fn preset(&self) -> Preset {
        Preset {
            id: self.id,
            display_name: self.display_name,
            model: self.shape.apply(self.sized_model()),
            fields: self.fields,
            notes: self.notes,
        }
    }

    /// The row's sizes on [`Model::simple`], whose other defaults are already Llama's.
    fn sized_model(&self) -> Model {
        let s = &self.size;
        Model {
            id: self.id.into(),
            name: self.name.into(),
            attn: gqa(s.kv_heads, s.head_dim),
            ffn_size: s.ffn,
            vocab_size: s.vocab,
            max_position_embeddings: self.max_positions,
            ..Model::simple(s.layers, s.hidden, s.heads)
        }
    }
}

impl Shape {
    fn apply(&self, sized: Model) -> Model {
        let layers = sized.n_layers();
        match *self {
            Shape::Classic { positional } => Model {
                ffn_kind: FfnKind::Mlp,
                tie_embeddings: true,
                positional,
                biases: Biases { qkv: true, o: true, ffn: true },
                norm: NormKind::LayerNorm,
                ..sized
            },
            Shape::LlamaLike { rope_theta, layers: kind, qk_norm } => {
                Model { schedule: Schedule::uniform(layers, kind), positional: rope(rope_theta), qk_norm, ..sized }
            }
            Shape::Llama4 { rope_theta, chunk_tokens, moe } => Model {
                schedule: Schedule::periodic(
                    layers,
                    &[(3, LayerKind::Chunked { chunk_tokens }), (1, LayerKind::Global)],
                ),
                positional: rope(rope_theta),
                global_positional: Some(Positional::NoPe),
                moe: Some(moe),
                ..sized
            },
            Shape::Mla { rope_theta, mla, moe } => {
                Model { positional: rope(rope_theta), mla: Some(mla), moe: Some(moe), ..sized }
            }
            Shape::Gemma(ref gemma) => gemma.apply(sized),
        }
    }
}

impl Gemma {
    fn apply(&self, sized: Model) -> Model {
        let unit = [(self.local_per_global, LayerKind::Sliding { window_tokens: self.window }), (1, LayerKind::Global)];
        let layers = sized.n_layers();
        let schedule = if self.last_global {
            Schedule::periodic_last_global(layers, &unit)
        } else {
            Schedule::periodic(layers, &unit)
        };
        Model {
            global_attn: self.global_attn,
            schedule,
            cross_layer: self.cross_layer,
            ffn_kind: FfnKind::GeGlu,
            tie_embeddings: true,
            positional: rope(self.local_rope_theta),
            global_positional: Some(self.global_rope),
            norms_per_layer: 4,
            qk_norm: true,
            per_layer_input_dim: self.per_layer_input_dim,
            ..sized
        }
    }
}

/// Full rotary embeddings of base `theta`.
pub(super) const fn rope(theta: f64) -> Positional {
    Positional::rope(theta)
}

/// `kv` KV heads of `head_dim`, K and V separate.
pub(super) const fn gqa(kv: u32, head_dim: u32) -> AttnGeometry {
    AttnGeometry { n_kv_heads: kv, head_dim, k_eq_v: false }
}
