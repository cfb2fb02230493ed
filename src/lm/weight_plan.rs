//! Where every tensor of a user's checkpoint goes on the GPU, planned from `config.json` and the
//! safetensors headers alone, before a byte of weights is read: the model must be one the forward
//! passes run ([`ModelConfig`]), every tensor it needs must be present once with its shape and a
//! dtype the GPU unpacks, and the plan names each tensor's byte range in its file and its place in
//! the GPU buffers (`gpu::lm_weights` streams them there, a chunk at a time).
//!
//! The GPU buffers fuse what one launch reads: Q, K and V rows (and their biases) in one, gate and
//! up in one, QK-norm's two weights in one, as `gpu::lm_forward` expects.

use std::collections::BTreeMap;

use super::LmError;
use super::model_config::ModelConfig;
use super::safetensors::{Header, TensorDType};
use crate::model::Mask;
use crate::model::config::Model;

/// The GPU buffer a tensor is written into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    Embed,
    FinalNorm,
    LmHead,
    Layer(usize, LayerSlot),
}

/// A layer's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LayerSlot {
    InputNorm,
    /// `[q + 2 kv, d]`: Q's rows, then K's, then V's.
    Qkv,
    /// `[q + 2 kv]`, when the projections have biases.
    QkvBias,
    /// `[2, head_dim]`: the query heads' weight, then the key heads'.
    QkNorm,
    O,
    /// Gemma 3's norm on the attention's output.
    AttentionOutNorm,
    /// The norm before the MLP.
    MlpNorm,
    /// Gemma 3's norm on the MLP's output.
    MlpOutNorm,
    /// `[2 ffn, d]`: gate's rows, then up's.
    GateUp,
    Down,
}

/// One tensor's copy: from `file_offset..file_offset + elements * dtype.bytes()` of shard `shard`
/// to elements `dest_offset..dest_offset + elements` of `slot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightPiece {
    pub name: String,
    pub shard: usize,
    pub dtype: TensorDType,
    pub file_offset: u64,
    pub elements: u64,
    pub slot: Slot,
    pub dest_offset: u64,
}

impl WeightPiece {
    pub fn bytes(&self) -> u64 {
        self.elements * self.dtype.bytes() as u64
    }
}

/// How a GPU buffer holds its values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// One f32 each (what f32 and f16 files become, and every vector).
    #[default]
    F32,
    /// bf16 as the file stores it, two to a u32 word: a matrix whose every tensor is bf16, read by
    /// the kernels a vec4 at a time and widened as they read (a shift: exact). Half the memory.
    Bf16,
}

impl WeightFormat {
    /// Bytes per value.
    pub fn bytes(self) -> u64 {
        match self {
            WeightFormat::F32 => 4,
            WeightFormat::Bf16 => 2,
        }
    }
}

/// A checked plan: the model, and every piece in file order.
pub struct WeightPlan {
    pub config: ModelConfig,
    pub pieces: Vec<WeightPiece>,
    /// Values of each GPU buffer.
    pub slots: BTreeMap<Slot, u64>,
    /// How each GPU buffer holds them.
    pub formats: BTreeMap<Slot, WeightFormat>,
}

impl WeightPlan {
    /// Plans the load of the tensors named by `headers` (one per shard, in the order the pieces
    /// refer to) for `config_json`. Tensors the model does not use are ignored; a missing one, one
    /// of the wrong shape or dtype, or one named by two shards is an error naming it.
    pub fn new(config_json: &str, headers: &[Header]) -> Result<WeightPlan, LmError> {
        let config = ModelConfig::read(config_json)?;
        let mut found: BTreeMap<&str, (usize, &Header)> = BTreeMap::new();
        for (shard, header) in headers.iter().enumerate() {
            for name in header.tensors.keys() {
                if found.insert(name, (shard, header)).is_some() {
                    return Err(LmError(format!("tensor {name} is in two of the weight files")));
                }
            }
        }
        let mut pieces = Vec::new();
        for want in expected(&config.model) {
            let (shard, header) = found
                .get(want.name.as_str())
                .copied()
                .ok_or_else(|| LmError(format!("the checkpoint has no tensor {}", want.name)))?;
            let info = &header.tensors[&want.name];
            let shape: Vec<u64> = info.shape.iter().map(|&n| n as u64).collect();
            if shape != want.shape {
                return Err(LmError(format!("tensor {} has shape {shape:?}, expected {:?}", want.name, want.shape)));
            }
            // Equal to a shape the file holds, so the product is the file's own (checked) count.
            let elements = info.elements();
            pieces.push(WeightPiece {
                name: want.name,
                shard,
                dtype: info.dtype,
                file_offset: header.data_start + info.start,
                elements,
                slot: want.slot,
                dest_offset: want.dest_offset,
            });
        }
        pieces.sort_by_key(|p| (p.shard, p.file_offset));
        let slots = slot_floats(&config.model);
        let formats = slots.keys().map(|&slot| (slot, format_of(slot, &pieces))).collect();
        Ok(WeightPlan { config, pieces, slots, formats })
    }

    /// How `slot`'s buffer holds its values.
    pub fn format(&self, slot: Slot) -> WeightFormat {
        self.formats.get(&slot).copied().unwrap_or_default()
    }

    /// Bytes of each GPU buffer, by name.
    pub fn gpu_buffers(&self) -> Vec<(&'static str, u64)> {
        self.slots.iter().map(|(&slot, &n)| (slot.name(), n.saturating_mul(self.format(slot).bytes()))).collect()
    }

    /// Bytes the GPU holds once loaded.
    pub fn gpu_bytes(&self) -> u64 {
        self.gpu_buffers().iter().fold(0u64, |sum, (_, bytes)| sum.saturating_add(*bytes))
    }

    pub fn model(&self) -> &Model {
        &self.config.model
    }

    pub fn masks(&self) -> &[Mask] {
        &self.config.masks
    }

    /// Bytes read from the files.
    pub fn file_bytes(&self) -> u64 {
        self.pieces.iter().map(WeightPiece::bytes).sum()
    }

    /// Values the GPU holds once loaded: the parameters the model uses.
    pub fn parameters(&self) -> u64 {
        self.slots.values().sum()
    }
}

/// Floats of each GPU buffer `m`'s weights fill: the one account of them, for a checkpoint streamed
/// from files and one uploaded from memory alike.
pub fn slot_floats(m: &Model) -> BTreeMap<Slot, u64> {
    let mut slots = BTreeMap::new();
    for want in expected(m) {
        let floats = want.shape.iter().fold(1u64, |n, &d| n.saturating_mul(d));
        *slots.entry(want.slot).or_insert(0u64) += floats;
    }
    slots
}

/// `slot`'s format: bf16 kept packed for a matrix (what matmul and embed_gather read) whose every
/// piece is bf16 and starts and ends on a whole u32 word, f32 otherwise.
fn format_of(slot: Slot, pieces: &[WeightPiece]) -> WeightFormat {
    let mut mine = pieces.iter().filter(|p| p.slot == slot).peekable();
    let packed = slot.is_matrix()
        && mine.peek().is_some()
        && mine.all(|p| p.dtype == TensorDType::Bf16 && p.dest_offset % 2 == 0 && p.elements % 2 == 0);
    if packed { WeightFormat::Bf16 } else { WeightFormat::F32 }
}

impl Slot {
    /// Whether the buffer is a weight matrix (read by matmul, and embed_gather for the embedding),
    /// not a vector (norms, biases).
    pub fn is_matrix(self) -> bool {
        matches!(
            self,
            Slot::Embed
                | Slot::LmHead
                | Slot::Layer(_, LayerSlot::Qkv | LayerSlot::O | LayerSlot::GateUp | LayerSlot::Down)
        )
    }

    /// The buffer's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Slot::Embed => "embed",
            Slot::FinalNorm => "final norm",
            Slot::LmHead => "lm head",
            Slot::Layer(_, part) => match part {
                LayerSlot::InputNorm => "input norm",
                LayerSlot::Qkv => "qkv",
                LayerSlot::QkvBias => "qkv bias",
                LayerSlot::QkNorm => "qk norm",
                LayerSlot::O => "o",
                LayerSlot::AttentionOutNorm => "attention output norm",
                LayerSlot::MlpNorm => "MLP norm",
                LayerSlot::MlpOutNorm => "MLP output norm",
                LayerSlot::GateUp => "gate_up",
                LayerSlot::Down => "down",
            },
        }
    }
}

/// A tensor the model needs: its name, shape and place.
struct Expected {
    name: String,
    shape: Vec<u64>,
    slot: Slot,
    dest_offset: u64,
}

/// A layer's norms by their transformers names: Llama's two, or Gemma 3's four (the same
/// `post_attention_layernorm` is the MLP's input norm in one and the attention's output norm in
/// the other).
pub fn norm_tensors(m: &Model) -> &'static [(&'static str, LayerSlot)] {
    match m.norms_per_layer {
        4 => &[
            ("input_layernorm", LayerSlot::InputNorm),
            ("post_attention_layernorm", LayerSlot::AttentionOutNorm),
            ("pre_feedforward_layernorm", LayerSlot::MlpNorm),
            ("post_feedforward_layernorm", LayerSlot::MlpOutNorm),
        ],
        _ => &[("input_layernorm", LayerSlot::InputNorm), ("post_attention_layernorm", LayerSlot::MlpNorm)],
    }
}

/// Every tensor `m` needs, by its transformers name (Llama / Mistral / Qwen2 / Qwen3 / Gemma 3 layout).
fn expected(m: &Model) -> Vec<Expected> {
    // u64 throughout: a config alone could make these products pass wasm32's usize.
    let (d, vocab, ffn) = (m.d_model, m.vocab_size, m.ffn_size);
    let hd = u64::from(m.attn.head_dim);
    let (q, kv) = (u64::from(m.n_q_heads).saturating_mul(hd), u64::from(m.attn.n_kv_heads).saturating_mul(hd));
    let mut out = Vec::new();
    let mut put = |name: String, shape: Vec<u64>, slot: Slot, dest_offset: u64| {
        out.push(Expected { name, shape, slot, dest_offset });
    };
    put("model.embed_tokens.weight".into(), vec![vocab, d], Slot::Embed, 0);
    for l in 0..m.schedule.layers().len() {
        let name = |part: &str| format!("model.layers.{l}.{part}");
        let at = |slot| Slot::Layer(l, slot);
        for (part, slot) in norm_tensors(m) {
            put(name(&format!("{part}.weight")), vec![d], at(*slot), 0);
        }
        for (part, rows, row0) in [("q_proj", q, 0), ("k_proj", kv, q), ("v_proj", kv, q.saturating_add(kv))] {
            put(name(&format!("self_attn.{part}.weight")), vec![rows, d], at(LayerSlot::Qkv), row0.saturating_mul(d));
            if m.biases.qkv {
                put(name(&format!("self_attn.{part}.bias")), vec![rows], at(LayerSlot::QkvBias), row0);
            }
        }
        if m.qk_norm {
            put(name("self_attn.q_norm.weight"), vec![hd], at(LayerSlot::QkNorm), 0);
            put(name("self_attn.k_norm.weight"), vec![hd], at(LayerSlot::QkNorm), hd);
        }
        put(name("self_attn.o_proj.weight"), vec![d, q], at(LayerSlot::O), 0);
        put(name("mlp.gate_proj.weight"), vec![ffn, d], at(LayerSlot::GateUp), 0);
        put(name("mlp.up_proj.weight"), vec![ffn, d], at(LayerSlot::GateUp), ffn.saturating_mul(d));
        put(name("mlp.down_proj.weight"), vec![d, ffn], at(LayerSlot::Down), 0);
    }
    put("model.norm.weight".into(), vec![d], Slot::FinalNorm, 0);
    if !m.tie_embeddings {
        put("lm_head.weight".into(), vec![vocab, d], Slot::LmHead, 0);
    }
    out
}

/// The shard each tensor is in, from a sharded checkpoint's `model.safetensors.index.json`
/// (`{"weight_map": {"tensor": "model-00001-of-00002.safetensors", ...}}`): the shard files it
/// names, in order of first mention sorted by name, so the files can be asked for by name.
pub fn index_shards(index_json: &str) -> Result<Vec<String>, LmError> {
    let bad = |why: &str| LmError(format!("model.safetensors.index.json: {why}"));
    let index: serde_json::Value = serde_json::from_str(index_json).map_err(|e| bad(&e.to_string()))?;
    let map = index.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| bad("no weight_map object"))?;
    let mut files: Vec<String> = Vec::new();
    for file in map.values() {
        let file = file.as_str().ok_or_else(|| bad("a weight_map entry is not a file name"))?;
        if !files.iter().any(|f| f == file) {
            files.push(file.to_string());
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
#[path = "weight_plan_tests.rs"]
mod tests;
