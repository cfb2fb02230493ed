//! What the parameter count needs of a block beyond attention and FFN widths: linear biases, norms,
//! QK-norm and per-layer input embeddings.

use super::family::Family;
use super::reader::Reader;
use super::report::ImportError;
use crate::model::config::{Biases, NormKind};

pub(super) struct Block {
    pub biases: Biases,
    pub norm: NormKind,
    pub norms_per_layer: u32,
    pub qk_norm: bool,
    /// Gemma's per-layer input embeddings (E2B/E4B); 0 when absent.
    pub per_layer_input_dim: u64,
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family) -> Result<Block, ImportError> {
    let attention_bias = r.boolean("attention_bias").unwrap_or(false);
    let biases = Biases {
        qkv: attention_bias || family.qkv_bias(),
        o: family.is_gpt2() || attention_bias,
        ffn: family.is_gpt2() || r.boolean("mlp_bias").unwrap_or(false),
    };
    Ok(Block {
        biases,
        norm: family.norm(),
        norms_per_layer: family.norms_per_layer(),
        qk_norm: family.qk_norm(),
        per_layer_input_dim: r.count(&["hidden_size_per_layer_input"])?.unwrap_or(0),
    })
}
