//! Import of a Hugging Face `config.json` (Llama 2/3/4, Mistral, Qwen2/3, Gemma 2/3/4, DeepSeek V2/V3,
//! GPT-2, and anything close to them). Works on a `serde_json::Value` and never panics: malformed
//! JSON, wrong types, zeros, negative or huge numbers and heads that do not divide are clear errors;
//! missing optional fields are filled with a stated assumption.
//!
//! Multimodal configs nest the language model under `text_config`; it is read first and the top
//! level is the fallback. The [`ImportReport`] lists every field used (with its value), every
//! assumption and every warning, so the UI can show exactly what the figures rest on.

use std::fmt;

use serde_json::{Map, Value};

use super::config::{AttnGeometry, Biases, CrossLayerSharing, FfnKind, Mla, Model, Moe, NormKind, Positional, limits};
use super::schedule::{LayerKind, Schedule};

/// What the importer read, assumed and doubted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImportReport {
    /// `model_type` (or the first architecture) as written in the file.
    pub model_type: String,
    /// Fields read: (path, value as JSON text).
    pub used: Vec<(String, String)>,
    /// Fields absent (or null) and the value assumed instead.
    pub assumed: Vec<String>,
    /// Values present but ignored or doubtful.
    pub warnings: Vec<String>,
}

/// A model and the report of how it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub model: Model,
    pub report: ImportReport,
}

/// Why a config could not be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportError {
    /// Not JSON at all (the parser's message, with line and column).
    Json(String),
    /// JSON, but not an object.
    NotAnObject,
    /// A required field is absent or null.
    Missing(&'static str),
    /// A field has the wrong type or an impossible value.
    Invalid { field: String, reason: String },
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Json(e) => write!(f, "not valid JSON: {e}"),
            ImportError::NotAnObject => f.write_str("the config must be a JSON object"),
            ImportError::Missing(field) => write!(f, "required field {field} is missing"),
            ImportError::Invalid { field, reason } => write!(f, "{field}: {reason}"),
        }
    }
}

impl std::error::Error for ImportError {}

fn invalid(field: &str, reason: impl Into<String>) -> ImportError {
    ImportError::Invalid { field: field.chars().take(80).collect(), reason: reason.into() }
}

/// Short JSON text of a value for the report (long arrays are abbreviated).
fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 { format!("{}…", s.chars().take(57).collect::<String>()) } else { s }
}

/// A non-negative integer, accepting integral floats such as `4096.0`.
fn as_count(v: &Value) -> Result<u64, String> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    if v.as_i64().is_some_and(|n| n < 0) {
        return Err(format!("{} is negative", show(v)));
    }
    if let Some(f) = v.as_f64() {
        if f < 0.0 {
            return Err(format!("{} is negative", show(v)));
        }
        if f.fract() == 0.0 && f <= 9.0e15 {
            // Integral, non-negative and below 2^53: the conversion is exact.
            return Ok(f as u64);
        }
        return Err(format!("{} is not a whole number in range", show(v)));
    }
    Err(format!("{} is not a number", show(v)))
}

struct Reader<'a> {
    main: &'a Map<String, Value>,
    top: &'a Map<String, Value>,
    nested: bool,
    report: ImportReport,
}

impl<'a> Reader<'a> {
    /// The first of `keys` present and not null, text config first; with its path for the report.
    fn find(&self, keys: &[&str]) -> Option<(String, &'a Value)> {
        for key in keys {
            if let Some(v) = self.main.get(*key).filter(|v| !v.is_null()) {
                let path = if self.nested { format!("text_config.{key}") } else { (*key).to_string() };
                return Some((path, v));
            }
            if self.nested
                && let Some(v) = self.top.get(*key).filter(|v| !v.is_null())
            {
                return Some(((*key).to_string(), v));
            }
        }
        None
    }

    fn note_used(&mut self, path: &str, v: &Value) {
        self.report.used.push((path.to_string(), show(v)));
    }

    /// A required count: absent or invalid is an error.
    fn required(&mut self, keys: &[&str], what: &'static str) -> Result<u64, ImportError> {
        let (path, v) = self.find(keys).ok_or(ImportError::Missing(what))?;
        let n = as_count(v).map_err(|r| invalid(&path, r))?;
        self.note_used(&path, v);
        Ok(n)
    }

    /// An optional count: absent gives `None`; invalid is an error (a present but wrong value is
    /// never silently replaced).
    fn count(&mut self, keys: &[&str]) -> Result<Option<u64>, ImportError> {
        let Some((path, v)) = self.find(keys) else {
            return Ok(None);
        };
        let n = as_count(v).map_err(|r| invalid(&path, r))?;
        self.note_used(&path, v);
        Ok(Some(n))
    }

    fn boolean(&mut self, key: &str) -> Option<bool> {
        let (path, v) = self.find(&[key])?;
        match v.as_bool() {
            Some(b) => {
                self.note_used(&path, v);
                Some(b)
            }
            None => {
                self.report.warnings.push(format!("{path} = {} is not true/false; ignored", show(v)));
                None
            }
        }
    }

    fn float(&mut self, key: &str) -> Option<f64> {
        let (path, v) = self.find(&[key])?;
        match v.as_f64() {
            Some(f) => {
                self.note_used(&path, v);
                Some(f)
            }
            None => {
                self.report.warnings.push(format!("{path} = {} is not a number; ignored", show(v)));
                None
            }
        }
    }

    fn text(&mut self, key: &str) -> Option<String> {
        let (path, v) = self.find(&[key])?;
        let s = v.as_str()?.chars().take(80).collect::<String>();
        self.note_used(&path, v);
        Some(s)
    }

    fn assume(&mut self, what: impl Into<String>) {
        self.report.assumed.push(what.into());
    }
}

fn to_u32(field: &str, v: u64) -> Result<u32, ImportError> {
    u32::try_from(v).map_err(|_| invalid(field, format!("{v} is far too large")))
}

fn positive(field: &str, v: u64, max: u64) -> Result<u64, ImportError> {
    if v == 0 {
        return Err(invalid(field, "must be at least 1"));
    }
    if v > max {
        return Err(invalid(field, format!("{v} is larger than the supported {max}")));
    }
    Ok(v)
}

/// Import from JSON text.
pub fn import_hf_config(json: &str) -> Result<Imported, ImportError> {
    let value: Value = serde_json::from_str(json).map_err(|e| ImportError::Json(e.to_string()))?;
    import_hf_value(&value)
}

/// Import from a parsed JSON value.
pub fn import_hf_value(value: &Value) -> Result<Imported, ImportError> {
    let top = value.as_object().ok_or(ImportError::NotAnObject)?;
    let (main, nested) = match top.get("text_config") {
        Some(Value::Object(t)) => (t, true),
        Some(Value::Null) | None => (top, false),
        Some(other) => {
            return Err(invalid("text_config", format!("{} is not an object", show(other))));
        }
    };
    let mut r = Reader { main, top, nested, report: ImportReport::default() };

    // Family, from model_type (text config first) or the architecture name.
    let model_type = r
        .text("model_type")
        .or_else(|| top.get("architectures").and_then(|a| a.get(0)).and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    r.report.model_type.clone_from(&model_type);
    let family = model_type.to_ascii_lowercase();
    let is_gpt2 = family.starts_with("gpt2") || r.find(&["n_embd"]).is_some();
    let is_gemma = family.starts_with("gemma");
    let is_llama4 = family.starts_with("llama4");

    // Sizes.
    let layers = positive(
        "num_hidden_layers",
        r.required(&["num_hidden_layers", "n_layer", "num_layers"], "num_hidden_layers")?,
        limits::MAX_LAYERS.into(),
    )?;
    let layers = to_u32("num_hidden_layers", layers)?;
    let d = positive(
        "hidden_size",
        r.required(&["hidden_size", "n_embd", "d_model"], "hidden_size")?,
        limits::MAX_D_MODEL,
    )?;
    let heads = to_u32(
        "num_attention_heads",
        positive(
            "num_attention_heads",
            r.required(&["num_attention_heads", "n_head"], "num_attention_heads")?,
            limits::MAX_HEADS.into(),
        )?,
    )?;
    let kv = match r.count(&["num_key_value_heads"])? {
        Some(n) => to_u32("num_key_value_heads", positive("num_key_value_heads", n, limits::MAX_HEADS.into())?)?,
        None if r.boolean("multi_query") == Some(true) => 1,
        None => {
            r.assume(format!("num_key_value_heads: absent, so {heads} (one per query head, MHA)"));
            heads
        }
    };

    // MLA (DeepSeek) before head_dim: it supplies the V head size.
    let mla = match r.count(&["kv_lora_rank"])? {
        None => None,
        Some(rank) => {
            let rank = to_u32("kv_lora_rank", positive("kv_lora_rank", rank, limits::MAX_RANK.into())?)?;
            let dim = |r: &mut Reader<'_>, key: &str, default: u32| -> Result<u32, ImportError> {
                match r.count(&[key])? {
                    Some(v) => to_u32(key, v),
                    None => {
                        r.assume(format!("{key}: absent, so {default}"));
                        Ok(default)
                    }
                }
            };
            let rope = dim(&mut r, "qk_rope_head_dim", 64)?;
            let nope = dim(&mut r, "qk_nope_head_dim", 128)?;
            let v = dim(&mut r, "v_head_dim", 128)?;
            let q_lora = match r.count(&["q_lora_rank"])? {
                Some(q) => Some(to_u32("q_lora_rank", positive("q_lora_rank", q, limits::MAX_RANK.into())?)?),
                None => {
                    r.assume("q_lora_rank: absent or null, so queries are projected directly");
                    None
                }
            };
            Some(Mla {
                kv_lora_rank: rank,
                qk_rope_head_dim: rope,
                q_lora_rank: q_lora,
                qk_nope_head_dim: nope,
                v_head_dim: v,
            })
        }
    };
    if mla.is_none() && heads % kv != 0 {
        return Err(invalid(
            "num_key_value_heads",
            format!("{heads} query heads cannot be split evenly over {kv} KV heads"),
        ));
    }
    let head_dim = match r.count(&["head_dim"])? {
        Some(h) => to_u32("head_dim", positive("head_dim", h, limits::MAX_HEAD_DIM.into())?)?,
        None => match mla {
            Some(m) => m.v_head_dim,
            None => {
                if d % u64::from(heads) != 0 {
                    return Err(invalid(
                        "hidden_size",
                        format!("{d} is not divisible by {heads} heads and no head_dim is given"),
                    ));
                }
                let hd = to_u32("head_dim", d / u64::from(heads))?;
                r.assume(format!("head_dim: absent, so hidden_size / heads = {hd}"));
                hd
            }
        },
    };
    if mla.is_none() && u64::from(heads) * u64::from(head_dim) != d {
        r.report.warnings.push(format!(
            "heads * head_dim = {} differs from hidden_size {d} (allowed; Q/O are not square)",
            u64::from(heads) * u64::from(head_dim)
        ));
    }

    // Gemma 4: global layers' geometry; K=V applies to global layers only, with their own KV heads.
    let k_eq_v = r.boolean("attention_k_eq_v").unwrap_or(false);
    let global_hd = r.count(&["global_head_dim"])?;
    let global_kv = r.count(&["num_global_key_value_heads"])?;
    let global_attn = if global_hd.is_some() || k_eq_v {
        let g_kv = match (k_eq_v, global_kv) {
            (true, Some(n)) => to_u32(
                "num_global_key_value_heads",
                positive("num_global_key_value_heads", n, limits::MAX_HEADS.into())?,
            )?,
            (false, Some(_)) => {
                r.report.warnings.push("num_global_key_value_heads is only used with attention_k_eq_v; ignored".into());
                kv
            }
            (_, None) => kv,
        };
        if heads % g_kv != 0 {
            return Err(invalid(
                "num_global_key_value_heads",
                format!("{heads} query heads cannot be split evenly over {g_kv}"),
            ));
        }
        let g_hd = match global_hd {
            Some(h) => to_u32("global_head_dim", positive("global_head_dim", h, limits::MAX_HEAD_DIM.into())?)?,
            None => head_dim,
        };
        Some(AttnGeometry { n_kv_heads: g_kv, head_dim: g_hd, k_eq_v })
    } else {
        None
    };

    // Layer schedule.
    let window = match r.count(&["sliding_window"])? {
        Some(w) => Some(positive("sliding_window", w, limits::MAX_WINDOW_TOKENS)?),
        None => None,
    };
    let chunk = match r.count(&["attention_chunk_size"])? {
        Some(c) => Some(positive("attention_chunk_size", c, limits::MAX_WINDOW_TOKENS)?),
        None => None,
    };
    let mut global_nope = false;
    let schedule = read_schedule(&mut r, &family, layers, window, chunk, is_llama4, &mut global_nope)?;

    // Cross-layer sharing (Gemma 4 E2B/E4B).
    let cross_layer = match r.count(&["num_kv_shared_layers"])? {
        None | Some(0) => CrossLayerSharing::None,
        Some(n) if n >= u64::from(layers) => {
            return Err(invalid(
                "num_kv_shared_layers",
                format!("{n} shared layers leave none of the {layers} to compute a cache"),
            ));
        }
        Some(n) => CrossLayerSharing::ReuseLast { shared_layers: to_u32("num_kv_shared_layers", n)? },
    };

    // FFN.
    let act = r
        .text("hidden_activation")
        .or_else(|| r.text("hidden_act"))
        .or_else(|| r.text("activation_function"))
        .unwrap_or_default();
    let ffn_kind = if is_gpt2 || act.contains("relu") {
        FfnKind::Mlp
    } else if act.contains("gelu") {
        FfnKind::GeGlu
    } else if act.is_empty() && is_gemma {
        r.assume("activation: absent, so Gemma's GELU-gated (3-matrix) FFN");
        FfnKind::GeGlu
    } else {
        if act.is_empty() {
            r.assume("activation: absent, so a SwiGLU (3-matrix) FFN");
        }
        FfnKind::SwiGlu
    };
    let ffn_size = match r.count(&["intermediate_size_mlp", "intermediate_size", "n_inner", "ffn_dim"])? {
        Some(f) => f,
        None => {
            r.assume(format!("intermediate_size: absent, so 4 * hidden_size = {}", 4 * d));
            4 * d
        }
    };
    let moe = read_moe(&mut r, is_llama4)?;

    // Embeddings and positions.
    let vocab = match r.count(&["vocab_size", "n_vocab"])? {
        Some(v) => v,
        None => {
            r.assume("vocab_size: absent, so 32000");
            32_000
        }
    };
    let tie = match r.boolean("tie_word_embeddings") {
        Some(b) => b,
        None => {
            let t = is_gpt2 || is_gemma;
            r.assume(format!(
                "tie_word_embeddings: absent, so {t} (the {} default)",
                if t { "GPT-2/Gemma" } else { "Llama" }
            ));
            t
        }
    };
    let max_pos = match r.count(&["max_position_embeddings", "n_positions", "max_seq_len"])? {
        Some(p) => p,
        None => {
            r.assume("max_position_embeddings: absent, so 4096");
            4096
        }
    };
    let (positional, mut global_positional) = read_positions(&mut r, is_gpt2, max_pos)?;
    if global_nope {
        global_positional = Some(Positional::NoPe);
    }

    let attention_bias = r.boolean("attention_bias").unwrap_or(false);
    let biases = Biases {
        qkv: is_gpt2 || attention_bias || family.starts_with("qwen2"),
        o: is_gpt2 || attention_bias,
        ffn: is_gpt2 || r.boolean("mlp_bias").unwrap_or(false),
    };
    let per_layer_input_dim = r.count(&["hidden_size_per_layer_input"])?.unwrap_or(0);

    let name = top
        .get("_name_or_path")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(|s| s.chars().take(80).collect())
        .unwrap_or_else(|| if model_type.is_empty() { "Imported model".to_string() } else { model_type.clone() });
    let model = Model {
        id: "imported".into(),
        name,
        d_model: d,
        n_q_heads: heads,
        attn: AttnGeometry { n_kv_heads: kv, head_dim, k_eq_v: false },
        global_attn,
        mla,
        schedule,
        cross_layer,
        ffn_kind,
        ffn_size,
        moe,
        vocab_size: vocab,
        tie_embeddings: tie,
        positional,
        global_positional,
        biases,
        norm: if is_gpt2 { NormKind::LayerNorm } else { NormKind::RmsNorm },
        norms_per_layer: if is_gemma && !family.starts_with("gemma_") && family != "gemma" { 4 } else { 2 },
        qk_norm: family.starts_with("qwen3") || family.starts_with("gemma3") || family.starts_with("gemma4"),
        per_layer_input_dim,
        max_position_embeddings: max_pos,
    };
    model.validate().map_err(|e| invalid("config", e.to_string()))?;
    Ok(Imported { model, report: r.report })
}

fn read_schedule(
    r: &mut Reader<'_>,
    family: &str,
    layers: u32,
    window: Option<u64>,
    chunk: Option<u64>,
    is_llama4: bool,
    global_nope: &mut bool,
) -> Result<Schedule, ImportError> {
    let n = layers as usize;
    let sliding = |field: &str| -> Result<LayerKind, ImportError> {
        window
            .map(|w| LayerKind::Sliding { window_tokens: w })
            .ok_or_else(|| invalid(field, "sliding layers need sliding_window"))
    };
    if let Some((path, v)) = r.find(&["layer_types"]) {
        let list = v.as_array().ok_or_else(|| invalid(&path, "must be a list of strings"))?;
        if list.is_empty() {
            return Err(invalid(&path, "is empty"));
        }
        let mut kinds = Vec::with_capacity(list.len());
        for item in list {
            let kind = match item.as_str() {
                Some("full_attention" | "global" | "attention") => LayerKind::Global,
                Some("sliding_attention" | "local" | "sliding") => sliding(&path)?,
                Some("chunked_attention") => LayerKind::Chunked {
                    chunk_tokens: chunk.ok_or_else(|| invalid(&path, "chunked layers need attention_chunk_size"))?,
                },
                _ => return Err(invalid(&path, format!("unknown layer type {}", show(item)))),
            };
            kinds.push(kind);
        }
        r.note_used(&path, v);
        if kinds.len() != n {
            r.report.warnings.push(format!(
                "{path} has {} entries for {layers} layers; the list is repeated/truncated to fit",
                kinds.len()
            ));
        }
        if is_llama4 {
            *global_nope = true;
        }
        return Ok(Schedule::from_layers((0..n).map(|i| kinds[i % kinds.len()]).collect()));
    }
    if is_llama4 && let Some(c) = chunk {
        let chunked = LayerKind::Chunked { chunk_tokens: c };
        *global_nope = true;
        // An empty list means "use the default interval", as in transformers.
        let listed = r.find(&["no_rope_layers"]).filter(|(_, v)| v.as_array().is_none_or(|l| !l.is_empty()));
        if let Some((path, v)) = listed {
            let list = v.as_array().ok_or_else(|| invalid(&path, "must be a list of 0/1"))?;
            let mut kinds = Vec::with_capacity(list.len());
            for item in list {
                // 1: the layer uses RoPE and chunked attention; 0: a global NoPE layer.
                kinds.push(match item.as_u64() {
                    Some(1) => chunked,
                    Some(0) => LayerKind::Global,
                    _ => {
                        return Err(invalid(&path, format!("entry {} is not 0 or 1", show(item))));
                    }
                });
            }
            r.note_used(&path, v);
            if kinds.len() != n {
                r.report.warnings.push(format!("{path} has {} entries for {layers} layers", kinds.len()));
            }
            return Ok(Schedule::from_layers((0..n).map(|i| kinds[i % kinds.len()]).collect()));
        }
        let interval = match r.count(&["no_rope_layer_interval"])? {
            Some(i) => {
                to_u32("no_rope_layer_interval", positive("no_rope_layer_interval", i, limits::MAX_LAYERS.into())?)?
            }
            None => {
                r.assume("no_rope_layers: absent, so every 4th layer is a global NoPE layer");
                4
            }
        };
        return Ok(Schedule::periodic(layers, &[(interval - 1, chunked), (1, LayerKind::Global)]));
    }
    if let Some(p) = r.count(&["sliding_window_pattern"])? {
        let p = to_u32("sliding_window_pattern", positive("sliding_window_pattern", p, limits::MAX_LAYERS.into())?)?;
        let sw = sliding("sliding_window_pattern")?;
        return Ok(Schedule::periodic(layers, &[(p - 1, sw), (1, LayerKind::Global)]));
    }
    if family.starts_with("gemma2")
        && let Some(w) = window
    {
        r.assume("layer pattern: Gemma 2 alternates sliding and global layers");
        return Ok(Schedule::periodic(layers, &[(1, LayerKind::Sliding { window_tokens: w }), (1, LayerKind::Global)]));
    }
    if family.starts_with("qwen") {
        if r.boolean("use_sliding_window") != Some(true) {
            if window.is_some() {
                r.report.warnings.push("sliding_window ignored: use_sliding_window is not true".into());
            }
            return Ok(Schedule::uniform(layers, LayerKind::Global));
        }
        let sw = sliding("use_sliding_window")?;
        let from = r.count(&["max_window_layers"])?.unwrap_or(0);
        return Ok(Schedule::from_layers(
            (0..n).map(|i| if (i as u64) >= from { sw } else { LayerKind::Global }).collect(),
        ));
    }
    Ok(match window {
        Some(w) => Schedule::uniform(layers, LayerKind::Sliding { window_tokens: w }),
        None => Schedule::uniform(layers, LayerKind::Global),
    })
}

fn read_moe(r: &mut Reader<'_>, is_llama4: bool) -> Result<Option<Moe>, ImportError> {
    let experts = r.count(&["n_routed_experts", "num_local_experts", "num_experts"])?;
    let Some(experts) = experts.filter(|&e| e > 0) else {
        return Ok(None);
    };
    let experts = to_u32("experts", positive("experts", experts, limits::MAX_EXPERTS.into())?)?;
    let active = to_u32("num_experts_per_tok", r.count(&["num_experts_per_tok"])?.unwrap_or(1))?;
    let shared = match r.count(&["n_shared_experts"])? {
        Some(s) => to_u32("n_shared_experts", s)?,
        None if is_llama4 => 1,
        None => 0,
    };
    let expert_ffn = if is_llama4 {
        r.count(&["intermediate_size"])?
    } else {
        r.count(&["moe_intermediate_size", "intermediate_size"])?
    };
    let expert_ffn = expert_ffn.ok_or(ImportError::Missing("moe_intermediate_size"))?;
    let first_dense = to_u32("first_k_dense_replace", r.count(&["first_k_dense_replace"])?.unwrap_or(0))?;
    let step = to_u32(
        "moe layer step",
        r.count(&["interleave_moe_layer_step", "moe_layer_freq", "decoder_sparse_step"])?.unwrap_or(1),
    )?;
    Ok(Some(Moe {
        n_routed_experts: experts,
        n_active_experts: active,
        n_shared_experts: shared,
        expert_ffn_size: expert_ffn,
        first_dense_layers: first_dense,
        layer_step: step,
    }))
}

fn rope_from(obj: &Map<String, Value>) -> Option<(f64, f64)> {
    let theta = obj.get("rope_theta").and_then(Value::as_f64)?;
    let partial = obj.get("partial_rotary_factor").and_then(Value::as_f64).unwrap_or(1.0);
    Some((theta, partial))
}

fn read_positions(
    r: &mut Reader<'_>,
    is_gpt2: bool,
    max_pos: u64,
) -> Result<(Positional, Option<Positional>), ImportError> {
    if is_gpt2 {
        return Ok((Positional::Learned { max_positions: max_pos.max(1) }, None));
    }
    let rope = |t: f64, p: f64| Positional::Rope { theta: t, partial_rotary_factor: p };
    // transformers v5 style: rope_parameters, possibly split by layer type (Gemma 4).
    if let Some((path, v)) = r.find(&["rope_parameters"])
        && let Some(obj) = v.as_object()
    {
        let by_type = (
            obj.get("sliding_attention").and_then(Value::as_object).and_then(rope_from),
            obj.get("full_attention").and_then(Value::as_object).and_then(rope_from),
        );
        match by_type {
            (Some((lt, lp)), Some((gt, gp))) => {
                r.note_used(&path, v);
                return Ok((rope(lt, lp), Some(rope(gt, gp))));
            }
            (None, Some((gt, gp))) => {
                r.note_used(&path, v);
                return Ok((rope(gt, gp), None));
            }
            _ => {}
        }
        if let Some((t, p)) = rope_from(obj) {
            r.note_used(&path, v);
            let p = r.float("partial_rotary_factor").unwrap_or(p);
            return Ok((rope(t, p), None));
        }
    }
    let partial = r.float("partial_rotary_factor").unwrap_or(1.0);
    let theta = match r.float("rope_theta") {
        Some(t) => t,
        None => {
            r.assume("rope_theta: absent, so 10000");
            10_000.0
        }
    };
    // Gemma 3: local layers use rope_local_base_freq, global layers rope_theta.
    if let Some(local) = r.float("rope_local_base_freq") {
        return Ok((rope(local, partial), Some(rope(theta, partial))));
    }
    Ok((rope(theta, partial), None))
}

#[cfg(test)]
mod tests {
    use super::*;
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
