//! Import of a Hugging Face `config.json` (Llama 2/3/4, Mistral, Qwen2/3, Gemma 2/3/3n/4, DeepSeek V2/V3,
//! GPT-2, Falcon, ChatGLM/GLM-4, MPT, BLOOM, GPT-NeoX/Pythia, Phi-1/2/3/4, StarCoder2, Cohere, OLMo 1/2,
//! GPT-OSS, and anything close to them). Works on a `serde_json::Value` and never panics: malformed
//! JSON, wrong types, zeros, negative or huge numbers and heads that do not divide are clear errors;
//! missing optional fields are filled with a stated assumption.
//!
//! Multimodal configs nest the language model under `text_config`; it is read first and the top
//! level is the fallback. The [`ImportReport`] lists every field used (with its value), every
//! assumption, every warning and how an ambiguous file was read (Falcon's `multi_query` beside
//! `num_kv_heads`, say), so the UI can show exactly what the figures rest on.
//!
//! One module per section of a config, read in this order (the report lists fields in it):
//! `family` (model type and the conventions no field states), `attention` (sizes, heads, head
//! dimension, MLA, global geometry) with `kv_heads` (each family's names for the KV head count), `schedule` (layer kinds, KV sharing), `ffn`, `moe`,
//! `embeddings`, `positions`, `block` (biases, norms). State-space and hybrid models (Mamba,
//! Mamba-2, Jamba, Bamba, Granite 4, Nemotron-H, Falcon-H1, Zamba, Zamba2, Qwen3-Next, RWKV-4/6/7,
//! LFM2, RecurrentGemma) go to `hybrid`, which reads each family whole with its mixer's module
//! (`mamba`, `mamba_hybrids`, `zamba`, `gated_deltanet`, `rwkv`, `short_conv`) and refuses the
//! others with the reason rather than read them as all-attention. `json_text` reads the bare
//! `Infinity`/`NaN` some of them hold. `reader` finds and checks fields, `report` holds what an
//! import returns. A new family's field names go in the section that reads them, its
//! unwritten conventions in `family`.

mod attention;
mod block;
mod embeddings;
mod family;
mod ffn;
mod gated_deltanet;
mod hunyuan;
mod hybrid;
mod indexer;
mod indexer_layers;
mod json_text;
mod kv_heads;
mod mamba;
mod mamba_hybrids;
mod mixer_common;
mod moe;
mod nas;
mod positions;
mod reader;
mod report;
mod rwkv;
mod samba;
mod schedule;
mod short_conv;
mod stack;
mod unread;
mod zamba;

use serde_json::Value;

pub use report::{ImportError, ImportReport, Imported};

use attention::Attention;
use block::Block;
use embeddings::Embeddings;
use family::Family;
use ffn::Ffn;
use positions::Positions;
use reader::Reader;
use report::invalid;
use schedule::Layout;

use crate::model::config::{Model, Moe};

/// Parse a `config.json`'s text, reading Python's bare `Infinity`, `-Infinity` and `NaN` (which
/// some state-space configs hold, and which JSON lacks) as `null`.
pub fn parse_config_json(json: &str) -> Result<Value, ImportError> {
    serde_json::from_str(&json_text::non_finite_as_null(json)).map_err(|e| ImportError::Json(e.to_string()))
}

/// Import from JSON text.
pub fn import_hf_config(json: &str) -> Result<Imported, ImportError> {
    import_hf_value(&parse_config_json(json)?)
}

/// Import from a parsed JSON value.
pub fn import_hf_value(value: &Value) -> Result<Imported, ImportError> {
    let mut r = Reader::new(value)?;
    let family = Family::read(&mut r);
    stack::require_decoder(&r)?;
    let state_family = hybrid::kind(&r, &r.report.model_type)?;
    if r.reads_text_config() {
        let wrapper = r.top_value("model_type").map(reader::show).unwrap_or_else(|| "multimodal".into());
        r.read_as(format!(
            "the language model was read from text_config (the file is a {wrapper} wrapper); \
             fields it lacks are taken from the top level"
        ));
    }
    if let Some(kind) = state_family {
        let model = hybrid::import(&mut r, &family, kind)?;
        unread::finish(&mut r, model.schedule.len())?;
        return Ok(Imported { model, report: r.report });
    }
    let mut attention = attention::read(&mut r, &family)?;
    if family.is_hunyuan() {
        hunyuan::read_attention(&mut r)?;
    }
    let mut layout = schedule::read(&mut r, &family, attention.layers)?;
    let ffn = ffn::read(&mut r, &family, attention.d_model)?;
    let moe = moe::read(&mut r, &family)?;
    let embeddings = embeddings::read(&mut r, &family)?;
    let positions = positions::read(&mut r, &family, embeddings.max_positions, layout.global_nope);
    let block = block::read(&mut r, &family)?;
    let nas = nas::read(&mut r, &nas::StackSizes::of(&attention, &embeddings, &block))?;
    if let Some(stack) = &nas {
        attention.local.n_kv_heads = stack.kv_heads;
        layout.schedule = stack.schedule.clone();
        r.report.assumed.retain(|a| !a.starts_with("num_key_value_heads"));
    }
    let mut sections = Sections { attention, layout, ffn, moe, embeddings, positions, block };
    let uncounted = sections.block.uncounted.take();
    let model = sections.into_model(family.model_name(&r));
    model.validate().map_err(|e| invalid("config", e.to_string()))?;
    if let Some(u) = uncounted {
        let (missing, why) = block::uncounted_params(&model, &u);
        hybrid::report_missing(&mut r, &model, missing, &why);
    }
    if let Some(stack) = nas {
        let missing = i128::try_from(stack.params).unwrap_or(i128::MAX)
            - i128::try_from(crate::model::params::model_params(&model).total()).unwrap_or(i128::MAX);
        hybrid::report_missing(&mut r, &model, missing, nas::PARAMS_WHY);
    }
    indexer::report(&mut r, &model);
    unread::finish(&mut r, model.schedule.len())?;
    Ok(Imported { model, report: r.report })
}

/// Everything read from a config, section by section.
struct Sections {
    attention: Attention,
    layout: Layout,
    ffn: Ffn,
    moe: Option<Moe>,
    embeddings: Embeddings,
    positions: Positions,
    block: Block,
}

impl Sections {
    fn into_model(self, name: String) -> Model {
        let Sections { attention, layout, ffn, moe, embeddings, positions, block } = self;
        Model {
            id: "imported".into(),
            name,
            d_model: attention.d_model,
            n_q_heads: attention.heads,
            attn: attention.local,
            global_attn: attention.global,
            mla: attention.mla,
            schedule: layout.schedule,
            cross_layer: layout.cross_layer,
            ffn_kind: ffn.kind,
            ffn_size: ffn.size,
            moe,
            vocab_size: embeddings.vocab,
            tie_embeddings: embeddings.tied,
            positional: positions.local,
            global_positional: positions.global,
            biases: block.biases,
            norm: block.norm,
            norms_per_layer: block.norms_per_layer,
            qk_norm: block.qk_norm,
            qk_norm_per_head: block.qk_norm_per_head,
            attn_sinks: block.attn_sinks,
            per_layer_input_dim: block.per_layer_input_dim,
            max_position_embeddings: embeddings.max_positions,
            states: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::AttnGeometry;
    use serde_json::json;

    #[test]
    fn minimal_llama() {
        let v = json!({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "rope_theta": 500000.0});
        let imp = import_hf_value(&v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(imp.model.attn, AttnGeometry { n_kv_heads: 8, head_dim: 128, k_eq_v: false });
        assert!(imp.report.used.iter().any(|(k, v)| k == "num_key_value_heads" && v == "8"));
        assert!(imp.report.assumed.iter().any(|a| a.starts_with("head_dim")));
    }

    #[test]
    fn errors_never_panic() {
        let cases: Vec<Value> = vec![
            json!([]),
            json!("x"),
            json!({}),
            json!({"num_hidden_layers": 0, "hidden_size": 64, "num_attention_heads": 4}),
            json!({"num_hidden_layers": -3, "hidden_size": 64, "num_attention_heads": 4}),
            json!({"num_hidden_layers": "32", "hidden_size": 64, "num_attention_heads": 4}),
            json!({"num_hidden_layers": 2.5, "hidden_size": 64, "num_attention_heads": 4}),
            json!({"num_hidden_layers": 1e300, "hidden_size": 64, "num_attention_heads": 4}),
            json!({"num_hidden_layers": 18446744073709551615u64, "hidden_size": 64, "num_attention_heads": 4}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3}),
            json!({"num_hidden_layers": 2, "hidden_size": 66, "num_attention_heads": 4}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "sliding_window": 0}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "layer_types": ["sliding_attention"]}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "layer_types": "full"}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "layer_types": [1, 2]}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "text_config": 5}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_kv_shared_layers": 2}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "kv_lora_rank": 0}),
            json!({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "rope_theta": -1.0}),
        ];
        for c in cases {
            assert!(import_hf_value(&c).is_err(), "{c}");
        }
        assert!(matches!(import_hf_config("{not json"), Err(ImportError::Json(_))));
        assert!(matches!(import_hf_config(&"[".repeat(100_000)), Err(ImportError::Json(_))));
        assert!(import_hf_config("").is_err());
    }
}
