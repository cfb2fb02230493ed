//! Whether a config describes a decoder: the only kind of model that caches keys and values while
//! it generates, and so the only kind the importer reads. Encoder-only models (BERT and its kin)
//! process their whole input at once and cache nothing; encoder-decoder models (T5, BART, Whisper)
//! keep two caches per decoder layer, self-attention over the generated tokens and cross-attention
//! over the encoder's input, which the model arithmetic does not describe. Both are refused with the
//! reason rather than imported as if they were decoder stacks.

use super::reader::Reader;
use super::report::ImportError;

/// `model_type`s of encoder-only families (hyphens and underscores alike).
const ENCODER_ONLY: &[&str] = &[
    "bert",
    "roberta",
    "xlm_roberta",
    "xlm_roberta_xl",
    "distilbert",
    "deberta",
    "deberta_v2",
    "electra",
    "albert",
    "camembert",
    "modernbert",
    "mpnet",
    "ernie",
    "nomic_bert",
    "megatron_bert",
    "mobilebert",
    "squeezebert",
    "convbert",
    "funnel",
    "longformer",
    "big_bird",
    "roformer",
    "rembert",
    "luke",
    "esm",
    "data2vec_text",
    "xmod",
    "ibert",
    "nezha",
    "layoutlm",
    "layoutlmv2",
    "layoutlmv3",
    "canine",
];

/// `model_type`s of encoder-decoder families.
const ENCODER_DECODER: &[&str] = &[
    "t5",
    "mt5",
    "umt5",
    "longt5",
    "switch_transformers",
    "bart",
    "mbart",
    "marian",
    "pegasus",
    "pegasus_x",
    "fsmt",
    "whisper",
    "m2m_100",
    "nllb_moe",
    "led",
    "blenderbot",
    "blenderbot_small",
    "prophetnet",
    "plbart",
    "bigbird_pegasus",
    "speech_to_text",
    "encoder_decoder",
    "seamless_m4t",
    "seamless_m4t_v2",
];

/// An error when the config is not a decoder's.
pub(super) fn require_decoder(r: &Reader<'_>) -> Result<(), ImportError> {
    let model_type = r.report.model_type.to_ascii_lowercase().replace('-', "_");
    let flag = |key: &str| r.top_value(key).and_then(serde_json::Value::as_bool);
    if flag("is_encoder_decoder") == Some(true) || ENCODER_DECODER.contains(&model_type.as_str()) {
        return Err(ImportError::Unsupported(format!(
            "This is an encoder-decoder model ({}): while it generates, each decoder layer caches K/V for the \
             tokens produced so far and, separately, cross-attention K/V over the encoder's whole input. The \
             importer reads decoder-only models, whose one cache per layer it sizes exactly, so it does not \
             import this file as if it were one. (The 2017 Transformer preset shows its decoder's \
             self-attention cache alone, and says so.)",
            describe(&model_type)
        )));
    }
    if ENCODER_ONLY.contains(&model_type.as_str()) && flag("is_decoder") != Some(true) {
        return Err(ImportError::Unsupported(format!(
            "This is an encoder-only model ({}): every token attends to every other in both directions and the \
             whole input is processed in one pass, so nothing is cached between tokens and there is no KV cache \
             to size. The memory figures here are for decoders, which generate one token at a time.",
            describe(&model_type)
        )));
    }
    Ok(())
}

/// How the file says what it is: its model type, or (with none) its `is_encoder_decoder` flag, the
/// only other way to reach a refusal.
fn describe(model_type: &str) -> String {
    if model_type.is_empty() { "is_encoder_decoder: true".into() } else { format!("model_type {model_type}") }
}
