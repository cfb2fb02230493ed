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
        let architectures = r.top_value("architectures");
        let architecture = || architectures.and_then(|a| a.get(0)).and_then(Value::as_str);
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

    /// Gemma 3n (`gemma3n`, `gemma3n_text`): AltUp and LAuReL around a Gemma 3 block.
    pub fn is_gemma3n(&self) -> bool {
        self.is("gemma3n")
    }

    /// GPT-OSS: attention sinks, and biases on its experts and router.
    pub fn is_gpt_oss(&self) -> bool {
        self.is("gpt_oss")
    }

    pub fn is_llama4(&self) -> bool {
        self.is("llama4")
    }

    pub fn is_qwen(&self) -> bool {
        self.is("qwen")
    }

    /// Falcon, including the older `RefinedWeb` (40B) and `RefinedWebModel` (7B) files.
    pub fn is_falcon(&self) -> bool {
        self.is("falcon") || self.is("refinedweb")
    }

    /// The older Falcon 40B file: always the new decoder architecture, with no field saying so.
    pub fn is_refined_web_40b(&self) -> bool {
        self.lower == "refinedweb"
    }

    /// ChatGLM 2/3 and the GLM-4 files written for its code (not transformers' own `glm`).
    pub fn is_chatglm(&self) -> bool {
        self.is("chatglm")
    }

    /// Tencent's Hunyuan MoE files written for the vendor's code (Hunyuan-A13B).
    pub fn is_hunyuan(&self) -> bool {
        self.lower == "hunyuan"
    }

    pub fn is_cohere(&self) -> bool {
        self.is("cohere")
    }

    pub fn is_bloom(&self) -> bool {
        self.is("bloom")
    }

    pub fn is_mpt(&self) -> bool {
        self.is("mpt")
    }

    /// Phi-1 and Phi-2 (`phi`), not Phi-3/4 (`phi3`), which are Llama-like.
    fn is_phi_1_2(&self) -> bool {
        self.lower == "phi"
    }

    /// GPT-2-era layouts: a two-matrix MLP (no gate) whatever the activation.
    pub fn plain_mlp(&self) -> bool {
        self.gpt2
            || self.is_falcon()
            || self.is_mpt()
            || self.is_phi_1_2()
            || ["gpt_neox", "starcoder2", "bloom", "gpt_bigcode"].iter().any(|p| self.is(p))
    }

    /// Biases on every linear layer, with no field to say so (GPT-2, GPT-NeoX, Phi-1/2, BLOOM).
    pub fn biases_everywhere(&self) -> bool {
        self.gpt2 || self.is("gpt_neox") || self.is_phi_1_2() || self.is_bloom()
    }

    /// The model's name: the file's `_name_or_path`, else its `model_type`.
    pub fn model_name(&self, r: &Reader<'_>) -> String {
        r.top_value("_name_or_path")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| s.chars().take(80).collect())
            .unwrap_or_else(|| {
                if self.model_type.is_empty() { "Imported model".to_string() } else { self.model_type.clone() }
            })
    }

    /// Whether embeddings are tied when `tie_word_embeddings` is absent (the family's config class
    /// default: `Starcoder2Config` and `SmolLM3Config` tie, as `PretrainedConfig` did before it named
    /// the field).
    pub fn ties_by_default(&self) -> bool {
        // Falcon-H1 and the state-space families state theirs in their config classes.
        let state_space_tied = ["mamba", "zamba", "zamba2", "lfm2", "recurrent_gemma"].contains(&self.lower.as_str());
        if self.is("falcon_h1") {
            return false;
        }
        self.gpt2
            || self.is_gemma()
            || self.is_cohere()
            || self.is("smollm3")
            || self.is_falcon()
            || self.is_mpt()
            || self.is_bloom()
            || self.is("starcoder2")
            || state_space_tied
    }

    /// The context length when the file states none: Falcon's config class says 2048; BLOOM's
    /// states none (ALiBi needs no table) and the models were trained on 2048-token sequences.
    pub fn default_max_positions(&self) -> u64 {
        if self.is_falcon() || self.is_bloom() { 2048 } else { 4096 }
    }

    /// Whether Q, K and V carry biases even without `attention_bias` (GPT-2, Qwen2).
    pub fn qkv_bias(&self) -> bool {
        self.gpt2 || self.is("qwen2")
    }

    /// LayerNorm for the GPT-2-era families; without its bias for MPT (transformers drops it from
    /// every norm, whatever `no_bias` says) and Cohere (`CohereLayerNorm` has a weight only); without
    /// any parameter for OLMo 1 (`OlmoLayerNorm`); RMSNorm for the Llama-like ones (ChatGLM states
    /// which in its `rmsnorm` field, read in `block`).
    pub fn norm(&self) -> NormKind {
        if self.is_mpt() || self.is_cohere() {
            NormKind::LayerNormNoBias
        } else if self.lower == "olmo" {
            NormKind::NonParametric
        } else if self.plain_mlp() {
            NormKind::LayerNorm
        } else {
            NormKind::RmsNorm
        }
    }

    /// Gemma 2 and later add post-norms to the two pre-norms; plain `gemma` (and `gemma_…`) does not.
    /// Phi-1/2 and Cohere run attention and FFN in parallel from one norm. (Falcon states its
    /// layout in fields, read in `block`.)
    pub fn norms_per_layer(&self) -> u32 {
        if self.is_gemma() && !self.is("gemma_") && self.lower != "gemma" {
            4
        } else if self.is_phi_1_2() || self.is_cohere() {
            1
        } else {
            2
        }
    }

    /// Learned norms on Q and K (Cohere and Phi say so in fields, read in `block`).
    pub fn qk_norm(&self) -> bool {
        self.is("qwen3") || self.is("gemma3") || self.is("gemma4") || self.is("olmo2")
    }

    /// QK-norm weights over the whole projection rather than one head's width: OLMo 2 normalises
    /// `q_proj`'s and `k_proj`'s outputs whole; Cohere's norm has a weight per head and dimension.
    pub fn qk_norm_per_head(&self) -> bool {
        self.is("olmo2") || self.is_cohere()
    }
}
