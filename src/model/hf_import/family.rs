//! Which family a config belongs to (its `model_type`, or failing that its architecture name), and
//! the conventions of that family that no field states: norms, biases, QK-norm, tied embeddings.
//! A new family's unwritten conventions belong here; its field names belong to the section that
//! reads them.

use serde_json::Value;

use super::reader::Reader;
use crate::model::config::NormKind;

pub(super) struct Family {
    /// As written in the file; the model's name when the file gives none.
    model_type: String,
    /// Lower-cased, for matching.
    lower: String,
    /// GPT-2 layout (also recognised by its `n_embd` field).
    gpt2: bool,
}

impl Family {
    pub fn read(r: &mut Reader<'_>) -> Family {
        let top = r.top();
        let architecture = || top.get("architectures").and_then(|a| a.get(0)).and_then(Value::as_str);
        let model_type = r.text("model_type").or_else(|| architecture().map(str::to_string)).unwrap_or_default();
        r.report.model_type.clone_from(&model_type);
        let lower = model_type.to_ascii_lowercase();
        let gpt2 = lower.starts_with("gpt2") || r.find(&["n_embd"]).is_some();
        Family { model_type, lower, gpt2 }
    }

    fn is(&self, prefix: &str) -> bool {
        self.lower.starts_with(prefix)
    }

    pub fn is_gpt2(&self) -> bool {
        self.gpt2
    }

    pub fn is_gemma(&self) -> bool {
        self.is("gemma")
    }

    pub fn is_gemma2(&self) -> bool {
        self.is("gemma2")
    }

    pub fn is_llama4(&self) -> bool {
        self.is("llama4")
    }

    pub fn is_qwen(&self) -> bool {
        self.is("qwen")
    }

    /// The model's name: the file's `_name_or_path`, else its `model_type`.
    pub fn model_name(&self, r: &Reader<'_>) -> String {
        r.top()
            .get("_name_or_path")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| s.chars().take(80).collect())
            .unwrap_or_else(|| {
                if self.model_type.is_empty() { "Imported model".to_string() } else { self.model_type.clone() }
            })
    }

    /// Whether embeddings are tied when `tie_word_embeddings` is absent.
    pub fn ties_by_default(&self) -> bool {
        self.gpt2 || self.is_gemma()
    }

    /// Whether Q, K and V carry biases even without `attention_bias` (GPT-2, Qwen2).
    pub fn qkv_bias(&self) -> bool {
        self.gpt2 || self.is("qwen2")
    }

    pub fn norm(&self) -> NormKind {
        if self.gpt2 { NormKind::LayerNorm } else { NormKind::RmsNorm }
    }

    /// Gemma 2 and later add post-norms to the two pre-norms; plain `gemma` (and `gemma_…`) does not.
    pub fn norms_per_layer(&self) -> u32 {
        if self.is_gemma() && !self.is("gemma_") && self.lower != "gemma" { 4 } else { 2 }
    }

    /// Learned RMS norms on Q and K.
    pub fn qk_norm(&self) -> bool {
        self.is("qwen3") || self.is("gemma3") || self.is("gemma4")
    }
}
