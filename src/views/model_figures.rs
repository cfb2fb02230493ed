//! What the model picker shows, shared by the KV and compare views: the three contract figures with
//! their formulas (`kv-bytes-per-token`, `kv-total-bytes`, `attn-params-per-layer`), where the chosen
//! model's config values come from (the values themselves: [`crate::views::describe::model_facts`]), and the import of a Hugging Face `config.json` into a link.

use super::kv::KvParams;
use super::model_choice::ModelChoice;
use crate::catalog::presets::preset_info;
use crate::catalog::{ImportReport, import_hf_config};
use crate::model::kv_cache::state_bytes;
use crate::model::units::{bytes_text, format_params, format_thousands, format_tokens};
use crate::model::{
    DType, LayerKind, Model, attn_params, decode_model, encode_model, kv_bytes_per_token, kv_total_bytes,
};
use crate::views::formulas::{attn_params_formula, per_token_formula, state_formula, total_formula};

/// Largest paste or file read (a real config.json is a few KB; this keeps a stray drop harmless).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
/// One-click context lengths.
pub const CTX_CHOICES_TOKENS: [u64; 6] = [4096, 8192, 32_768, 131_072, 1_048_576, 10_485_760];

/// `FP16 (16 bits)`: a dtype as the selects and the dtype matrix name it.
pub fn dtype_text(dtype: DType) -> String {
    format!("{} ({} bits)", dtype.label(), dtype.bits())
}

/// The one-click context lengths and their chips' labels (`8K`, `128K`, `10M`).
pub fn ctx_choices() -> Vec<(u64, String)> {
    CTX_CHOICES_TOKENS.into_iter().map(|n| (n, format_tokens(n))).collect()
}

/// One exact figure: its heading, the integer in `data-value`, the text shown and the arithmetic.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelFigure {
    pub heading: String,
    pub value: String,
    pub text: String,
    pub formula: String,
}

/// The contract figures of the chosen model, context, dtype and layer.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyFigures {
    pub per_token: ModelFigure,
    pub total: ModelFigure,
    pub attn_params: ModelFigure,
    /// `state-bytes`: the recurrent state one sequence keeps (0 for a transformer).
    pub state: ModelFigure,
}

/// The `state-bytes` figure: exact bytes, both units, and what it is (constant per sequence).
fn state_figure(model: &Model) -> ModelFigure {
    let bytes = state_bytes(model).ok();
    let mut f = byte_figure("Recurrent state per sequence".into(), bytes, state_formula(model));
    let recurrent = model.schedule.layers().iter().any(|&k| model.state_mixer(k).is_some());
    if bytes == Some(0) && !recurrent {
        f.text = "0 bytes: no recurrent state (no layer has a recurrent mixer)".into();
    } else {
        f.formula.push_str(": constant per sequence, it does not grow with the context.");
    }
    f
}

/// A byte figure; `None` is a size past `u128`, shown as such rather than wrapped.
fn byte_figure(heading: String, bytes: Option<u128>, formula: String) -> ModelFigure {
    ModelFigure {
        heading,
        value: bytes.map_or_else(|| "overflow".into(), |b| b.to_string()),
        text: bytes.map_or_else(|| "too large to represent".into(), bytes_text),
        formula,
    }
}

pub fn key_figures(model: &Model, kv: &KvParams, layer: u32) -> KeyFigures {
    let kind = model.schedule.kind(layer as usize).unwrap_or(LayerKind::Global);
    let params = attn_params(model, kind);
    let params_total = params.total();
    KeyFigures {
        per_token: byte_figure(
            "KV cache per token".into(),
            kv_bytes_per_token(model, kv.dtype).ok(),
            per_token_formula(model, kv.dtype),
        ),
        total: byte_figure(
            format!("Whole cache at {} tokens, {}", format_thousands(kv.ctx_tokens.into()), kv.dtype.label()),
            kv_total_bytes(model, kv.ctx_tokens, kv.dtype).ok(),
            total_formula(model, kv.ctx_tokens, kv.dtype),
        ),
        attn_params: ModelFigure {
            heading: format!("Attention weights of layer {layer} ({kind})"),
            value: params_total.to_string(),
            text: format!("{} parameters ({})", format_thousands(params_total), format_params(params_total)),
            formula: attn_params_formula(model, kind, &params),
        },
        state: state_figure(model),
    }
}

/// Where the chosen model's values come from.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigSource {
    /// A custom or imported model: the link's `cfg=` code.
    LinkCode(String),
    /// A preset: its name, the config fields it reads (comma-separated) and its notes.
    Preset { name: &'static str, fields: String, notes: &'static str },
    /// Neither (a preset id no longer known): nothing to cite.
    Unknown,
}

pub fn config_source(choice: &ModelChoice) -> ConfigSource {
    match (&choice.cfg, preset_info(&choice.preset)) {
        (Some(code), _) => ConfigSource::LinkCode(code.clone()),
        (None, Some(p)) => ConfigSource::Preset { name: p.display_name, fields: p.fields.join(", "), notes: p.notes },
        (None, None) => ConfigSource::Unknown,
    }
}

/// Reads a pasted or dropped config.json into the link's `cfg=` code, with what was used, assumed
/// and doubted; or says why not.
pub fn import_config(text: &str) -> Result<(String, ImportReport), String> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(format!(
            "that is {} bytes; a config.json is a few KB (at most {MAX_CONFIG_BYTES} bytes here)",
            format_thousands(text.len() as u128)
        ));
    }
    let imported = import_hf_config(text).map_err(|e| e.to_string())?;
    let code = encode_model(&imported.model);
    // The link must read back; an irregular layer list too long for a URL is refused here.
    decode_model(&code).map_err(|e| format!("the model cannot be put in a link ({e})"))?;
    Ok((code, imported.report))
}

/// `Imported a qwen2 model: 12 fields used. The link now carries it.`
pub fn import_summary(report: &ImportReport) -> String {
    let kind =
        if report.model_type.is_empty() { "a model".to_string() } else { format!("a {} model", report.model_type) };
    format!("Imported {kind}: {} fields used. The link now carries it.", report.used.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn llama_3_8b() -> Model {
        preset("llama-3-8b").unwrap().clone()
    }

    #[test]
    fn bytes_and_dtypes_in_words() {
        assert_eq!(bytes_text(999), "999 bytes");
        // 2^30 bytes: 1.07 GB = 1.00 GiB.
        assert_eq!(bytes_text(1 << 30), "1,073,741,824 bytes = 1.07 GB (1.00 GiB)");
        assert_eq!(dtype_text(DType::Int4), "INT4 (4 bits)");
        let labels: Vec<String> = ctx_choices().into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["4K", "8K", "32K", "128K", "1M", "10M"]);
    }

    #[test]
    fn llama_3_8b_key_figures_at_8k_fp16() {
        let kv = KvParams::default();
        let f = key_figures(&llama_3_8b(), &kv, 0);
        // 32 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 B = 131,072 B per token.
        assert_eq!(f.per_token.heading, "KV cache per token");
        assert_eq!(f.per_token.value, "131072");
        assert_eq!(f.per_token.text, "131,072 bytes = 131.07 KB (128.00 KiB)");
        assert!(f.per_token.formula.ends_with("= 131,072 B per token"), "{}", f.per_token.formula);
        // 131,072 B × 8,192 tokens = 1,073,741,824 B = 1 GiB.
        assert_eq!(f.total.heading, "Whole cache at 8,192 tokens, FP16");
        assert_eq!(f.total.value, "1073741824");
        assert_eq!(f.total.text, "1,073,741,824 bytes = 1.07 GB (1.00 GiB)");
        // Q and O 4096 × 4096 each, K and V 4096 × 1024 each: 41,943,040.
        assert_eq!(f.attn_params.heading, "Attention weights of layer 0 (global)");
        assert_eq!(f.attn_params.value, "41943040");
        assert_eq!(f.attn_params.text, "41,943,040 parameters (41.9 M)");
    }

    #[test]
    fn a_size_past_u128_says_so() {
        let f = byte_figure("h".into(), None, "f".into());
        assert_eq!((f.value.as_str(), f.text.as_str()), ("overflow", "too large to represent"));
    }

    #[test]
    fn config_values_cite_the_preset_or_the_link() {
        let mut choice = ModelChoice::default();
        let ConfigSource::Preset { name, fields, .. } = config_source(&choice) else { panic!("a preset") };
        assert_eq!(name, "Llama 3 8B");
        assert!(fields.starts_with("num_hidden_layers, "), "{fields}");
        choice.cfg = Some(encode_model(&Model::simple(6, 512, 8)));
        assert_eq!(config_source(&choice), ConfigSource::LinkCode(choice.cfg.clone().unwrap()));
        choice = ModelChoice { preset: "gone".into(), ..Default::default() };
        assert_eq!(config_source(&choice), ConfigSource::Unknown);
    }

    #[test]
    fn imports_travel_in_the_link_or_say_why_not() {
        let text = r#"{"model_type": "llama", "num_hidden_layers": 6, "hidden_size": 512, "num_attention_heads": 8}"#;
        let (code, report) = import_config(text).unwrap();
        assert_eq!(decode_model(&code).unwrap().n_layers(), 6);
        assert_eq!(
            import_summary(&report),
            format!("Imported a llama model: {} fields used. The link now carries it.", report.used.len())
        );
        assert!(import_config("{").is_err());
        let huge = " ".repeat(MAX_CONFIG_BYTES + 1);
        assert_eq!(
            import_config(&huge).unwrap_err(),
            "that is 1,048,577 bytes; a config.json is a few KB (at most 1048576 bytes here)"
        );
    }

    #[test]
    fn the_state_figure_of_a_hybrid_and_of_a_transformer() {
        // Jamba's shape: 4 Mamba, 1 attention, 3 Mamba over 32 layers: 28 Mamba layers of 32,768
        // conv and 262,144 state elements at 2 B: 28 × 589,824 = 16,515,072 B.
        let code = "L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144";
        let jamba = decode_model(code).unwrap();
        let f = key_figures(&jamba, &KvParams::default(), 0).state;
        assert_eq!((f.heading.as_str(), f.value.as_str()), ("Recurrent state per sequence", "16515072"));
        assert_eq!(f.text, "16,515,072 bytes = 16.52 MB (15.75 MiB)");
        assert!(f.formula.starts_with("28 ssm layers × (32,768 conv elements × 2 B + 262,144 state elements × 2 B)"));
        assert!(
            f.formula
                .ends_with("= 16,515,072 B per sequence: constant per sequence, it does not grow with the context.")
        );
        let t = key_figures(&llama_3_8b(), &KvParams::default(), 0).state;
        assert_eq!(
            (t.value.as_str(), t.text.as_str()),
            ("0", "0 bytes: no recurrent state (no layer has a recurrent mixer)")
        );
    }
}
