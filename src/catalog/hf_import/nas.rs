//! Llama-Nemotron's NAS-pruned stacks (`block_configs`, transformers' DeciLM): each layer has its own
//! attention (with its own `n_heads_in_group`, none at all: `no_op`, or a plain linear map:
//! `replace_with_linear`) and its own FFN width (`ffn_mult`). Read exactly where the model can hold
//! it: layers without attention keep no cache, and every attention layer has `num_attention_heads /
//! n_heads_in_group` KV heads. A stack whose attention layers differ in that count is refused (the
//! model holds one KV-head count). The per-layer widths are summed into the checkpoint's exact
//! parameter total, which the report sets beside the model's own count.

use serde_json::{Map, Value};

use super::reader::{Reader, as_count, show};
use super::report::{ImportError, invalid};
use crate::model::schedule::{LayerKind, Schedule};

/// What `block_configs` says of the stack.
pub(super) struct NasStack {
    /// KV heads of every attention layer.
    pub kv_heads: u32,
    /// Each layer: global attention, or a feed-forward-only layer (no attention, or a linear map).
    pub schedule: Schedule,
    /// The checkpoint's parameters, block by block.
    pub params: u128,
}

/// The sizes the parameter count needs beside the blocks.
pub(super) struct StackSizes {
    pub d_model: u64,
    pub heads: u32,
    pub head_dim: u32,
    pub layers: u32,
    pub vocab: u64,
    pub tied: bool,
    pub attention_bias: bool,
}

impl StackSizes {
    pub fn of(
        attention: &super::attention::Attention,
        embeddings: &super::embeddings::Embeddings,
        block: &super::block::Block,
    ) -> Self {
        StackSizes {
            d_model: attention.d_model,
            heads: attention.heads,
            head_dim: attention.local.head_dim,
            layers: attention.layers,
            vocab: embeddings.vocab,
            tied: embeddings.tied,
            attention_bias: block.biases.qkv,
        }
    }
}

/// Why the model's parameter count differs from a NAS checkpoint's (said with the difference).
pub(super) const PARAMS_WHY: &str = "its layers have FFNs of their own widths (ffn_mult), and some a linear map in place \
     of attention or FFN, where the model's count has one FFN width and no FFN in a layer without attention";

/// Attention settings of a block the arithmetic does not model: such a block is refused.
const UNMODELLED_ATTENTION: [&str; 5] =
    ["sparsify", "num_sink_tokens", "window_length", "use_prefill_window_in_sink_attention", "llama4"];

/// The stack `block_configs` describes, if the file has one.
pub(super) fn read(r: &mut Reader<'_>, s: &StackSizes) -> Result<Option<NasStack>, ImportError> {
    let Some((path, v)) = r.find(&["block_configs"]) else { return Ok(None) };
    let blocks = v.as_array().ok_or_else(|| invalid(&path, "must be a list of blocks"))?;
    if blocks.len() != s.layers as usize {
        return Err(invalid(&path, format!("lists {} blocks for {} layers", blocks.len(), s.layers)));
    }
    let (d, tied_rows) = (u128::from(s.d_model), if s.tied { 1 } else { 2 });
    let mut params = tied_rows * u128::from(s.vocab) * d + d;
    let (mut kinds, mut groups) = (Vec::new(), Vec::new());
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let block = block.as_object().ok_or_else(|| invalid(&at, "must be an object"))?;
        let attention = sub_block(&at, block, "attention")?;
        let ffn = sub_block(&at, block, "ffn")?;
        let group = attention_group(&at, &attention, s.heads)?;
        params += attention_params(&attention, group, s) + ffn_params(&at, &ffn, s.d_model)?;
        kinds.push(if group.is_some() { LayerKind::Global } else { LayerKind::FeedForward });
        groups.extend(group);
    }
    let Some(&first) = groups.first() else {
        return Err(ImportError::Unsupported(format!("{path}: no block has attention, so there is no cache to show")));
    };
    if let Some(other) = groups.iter().find(|&&g| g != first) {
        return Err(ImportError::Unsupported(format!(
            "{path}: attention layers group {first} and {other} query heads per KV head; the arithmetic holds one \
             KV-head count for every layer, so its cache would be wrong. Not imported."
        )));
    }
    r.note_used(&path, v);
    let attending = groups.len();
    r.read_as(format!(
        "{path}: {attending} of {} layers have attention, each with {} KV heads (n_heads_in_group {first}); the \
         others keep no cache",
        s.layers,
        s.heads / first
    ));
    Ok(Some(NasStack { kv_heads: s.heads / first, schedule: Schedule::from_layers(kinds), params }))
}

/// One of a block's two parts, as an object with `no_op`, `replace_with_linear` and its sizes.
fn sub_block(at: &str, block: &Map<String, Value>, part: &str) -> Result<Part, ImportError> {
    let obj = match block.get(part) {
        Some(Value::Object(o)) => o.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(other) => return Err(invalid(&format!("{at}.{part}"), format!("{} is not an object", show(other)))),
    };
    let flag = |key: &str| obj.get(key).and_then(Value::as_bool).unwrap_or(false);
    let kind = if flag("no_op") {
        PartKind::None
    } else if flag("replace_with_linear") {
        PartKind::Linear
    } else {
        PartKind::Full
    };
    Ok(Part { path: format!("{at}.{part}"), kind, obj })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PartKind {
    None,
    Linear,
    Full,
}

struct Part {
    path: String,
    kind: PartKind,
    obj: Map<String, Value>,
}

/// Query heads per KV head of a full attention block (`None`: no attention, or a linear map).
fn attention_group(at: &str, attention: &Part, heads: u32) -> Result<Option<u32>, ImportError> {
    if attention.kind != PartKind::Full {
        return Ok(None);
    }
    if let Some(key) = UNMODELLED_ATTENTION.iter().find(|k| attention.obj.get(**k).is_some_and(is_set)) {
        return Err(ImportError::Unsupported(format!(
            "{}.{key} = {}: this block's attention is not plain causal attention, which the arithmetic does not \
             model. Not imported.",
            attention.path,
            show(&attention.obj[*key])
        )));
    }
    let field = format!("{at}.attention.n_heads_in_group");
    let v = attention.obj.get("n_heads_in_group").ok_or_else(|| invalid(&field, "is missing"))?;
    let group = as_count(v).map_err(|e| invalid(&field, e))?;
    match u32::try_from(group) {
        Ok(g) if g >= 1 && heads.is_multiple_of(g) => Ok(Some(g)),
        _ => Err(invalid(&field, format!("{group} does not divide the {heads} query heads"))),
    }
}

fn is_set(v: &Value) -> bool {
    !matches!(v, Value::Null | Value::Bool(false))
}

/// Parameters of a block's attention: Q, K, V and O (with their biases) and the norm before it; a
/// linear map and its norm; or nothing.
fn attention_params(attention: &Part, group: Option<u32>, s: &StackSizes) -> u128 {
    let d = u128::from(s.d_model);
    let q = u128::from(s.heads) * u128::from(s.head_dim);
    match (attention.kind, group) {
        (PartKind::Full, Some(g)) => {
            let kv = u128::from(s.heads / g) * u128::from(s.head_dim);
            let biases = if s.attention_bias { q + 2 * kv + d } else { 0 };
            2 * d * q + 2 * d * kv + biases + d
        }
        (PartKind::Linear, _) => d * d + d,
        _ => 0,
    }
}

/// Parameters of a block's FFN: gate, up and down at the width `ffn_mult` gives, and its norm; a
/// linear map and its norm; or nothing.
fn ffn_params(at: &str, ffn: &Part, d_model: u64) -> Result<u128, ImportError> {
    let d = u128::from(d_model);
    Ok(match ffn.kind {
        PartKind::None => 0,
        PartKind::Linear => d * d + d,
        PartKind::Full => {
            let field = format!("{at}.ffn.ffn_mult");
            let mult = ffn.obj.get("ffn_mult").and_then(Value::as_f64).ok_or_else(|| invalid(&field, "is missing"))?;
            if !(mult > 0.0 && mult <= 64.0) {
                return Err(invalid(&field, format!("{mult} is not a usable width multiplier")));
            }
            3 * d * u128::from(ffn_width(mult, d_model)) + d
        }
    })
}

/// DeciLM's FFN width: `int(2 * ffn_mult * hidden / 3)`, rounded up to a multiple of 256.
pub(super) fn ffn_width(ffn_mult: f64, d_model: u64) -> u64 {
    let raw = (2.0 * ffn_mult * d_model as f64 / 3.0) as u64;
    raw.div_ceil(256) * 256
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{ImportError, import_hf_value};
    use super::ffn_width;
    use crate::model::dtype::DType;
    use crate::model::kv_cache::kv_bytes_per_token;
    use crate::model::params::model_params;
    use crate::model::schedule::LayerKind;

    fn nemotron(blocks: Value) -> Value {
        json!({"model_type": "nemotron-nas", "architectures": ["DeciLMForCausalLM"], "num_hidden_layers": 3,
               "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": null, "intermediate_size": null,
               "vocab_size": 1000, "tie_word_embeddings": false, "attention_bias": false, "block_configs": blocks})
    }

    #[test]
    fn widths_follow_decilm_by_hand() {
        // int(2 * 2.0 * 256 / 3) = 341 -> 512; int(2 * 1.0 * 256 / 3) = 170 -> 256; 5.25 at 8192: 28672.
        assert_eq!((ffn_width(2.0, 256), ffn_width(1.0, 256), ffn_width(5.25, 8192)), (512, 256, 28_672));
    }

    #[test]
    fn a_nas_stack_is_read_block_by_block() {
        let v = nemotron(json!([
            {"attention": {"n_heads_in_group": 2, "no_op": false}, "ffn": {"ffn_mult": 2.0}},
            {"attention": {"n_heads_in_group": null, "no_op": true}, "ffn": {"ffn_mult": 1.0}},
            {"attention": {"replace_with_linear": true}, "ffn": {"no_op": true}},
        ]));
        let imported = import_hf_value(&v).unwrap_or_else(|e| panic!("{e}"));
        let m = &imported.model;
        assert_eq!(m.schedule.layers(), [LayerKind::Global, LayerKind::FeedForward, LayerKind::FeedForward]);
        assert_eq!(m.attn.n_kv_heads, 2);
        // One attention layer: 2 (K, V) x 2 KV heads x 64 dims x 2 bytes.
        assert_eq!(kv_bytes_per_token(m, DType::Fp16), Ok(512));
        // The checkpoint by hand: layer 0 = Q, O 256x256 each + K, V 256x128 each + norm 256 (196,864)
        // + FFN 3 x 256 x 512 + norm 256 (393,472); layer 1 = FFN 3 x 256 x 256 + 256 (196,864);
        // layer 2 = linear 256 x 256 + 256 (65,792); embeddings and head 2 x 1000 x 256 + final norm 256
        // (512,256): 1,365,248.
        let counted = model_params(m).total();
        let reading = imported.report.readings.iter().find(|r| r.starts_with("The parameter total is")).unwrap();
        let word = if counted < 1_365_248 { "under" } else { "over" };
        assert!(reading.contains(&format!("{word} the checkpoint's 1,365,248 by")), "{reading}");
        assert!(
            imported.report.readings.iter().any(|r| r.contains("1 of 3 layers have attention, each with 2 KV heads"))
        );
        assert!(!imported.report.assumed.iter().any(|a| a.starts_with("num_key_value_heads")));
    }

    #[test]
    fn a_stack_whose_layers_group_heads_differently_is_refused() {
        let v = nemotron(json!([
            {"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 2.0}},
            {"attention": {"n_heads_in_group": 4}, "ffn": {"ffn_mult": 2.0}},
            {"attention": {"no_op": true}, "ffn": {"ffn_mult": 1.0}},
        ]));
        let Err(ImportError::Unsupported(why)) = import_hf_value(&v) else { panic!("imported") };
        assert!(why.contains("group 2 and 4 query heads per KV head"), "{why}");
    }

    #[test]
    fn malformed_or_unmodelled_blocks_are_refused_with_their_place() {
        let cases = [
            (json!([{"attention": {"n_heads_in_group": 3}}, {}, {}]), "block_configs[0].attention.n_heads_in_group"),
            (json!([{"attention": {"n_heads_in_group": 2}, "ffn": {}}, {}, {}]), "block_configs[0].ffn.ffn_mult"),
            (
                json!([{"attention": {"n_heads_in_group": 2, "window_length": 4096}, "ffn": {"ffn_mult": 1.0}}, {}, {}]),
                "block_configs[0].attention.window_length = 4096",
            ),
            (json!([{"attention": {"no_op": true}, "ffn": {"no_op": true}}]), "lists 1 blocks for 3 layers"),
            (json!("blocks"), "must be a list of blocks"),
        ];
        for (blocks, expected) in cases {
            let err = import_hf_value(&nemotron(blocks)).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }
}
