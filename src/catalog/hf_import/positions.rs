//! Positions: GPT-2's (and MPT's) learned table, ALiBi (MPT, BLOOM, Falcon with `alibi`), or RoPE
//! (theta, partial rotary factor and scaling, from `rope_parameters`, the flat fields, GPT-NeoX's
//! `rotary_*` or ChatGLM's `rope_ratio`), with the global layers' own RoPE (Gemma 3/4) or none
//! (Llama 4's NoPE layers).
//!
//! Of the RoPE types, `default`, `linear` (positions divided by `factor`: Gemma 3's global layers)
//! and `proportional` (Gemma 4's global layers, see [`crate::attention::rope`]) are modelled; the
//! others (`llama3`, `yarn`, `dynamic`, ...) are read as plain RoPE with a warning.

use serde_json::{Map, Value};

use super::family::Family;
use super::reader::{Reader, show};
use crate::model::config::{Positional, bounds};

pub(super) struct Positions {
    /// Every layer's scheme, or the non-global layers' when `global` is set.
    pub local: Positional,
    pub global: Option<Positional>,
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family, max_positions: u64, global_nope: bool) -> Positions {
    let (local, global) = if family.is_gpt2() {
        (Positional::Learned { max_positions: max_positions.max(1) }, None)
    } else if let Some(alibi) = read_alibi(r, family) {
        (alibi, None)
    } else if family.is_mpt() {
        // MPT without ALiBi learns a position table (`learned_pos_emb`, on by default).
        (Positional::Learned { max_positions: max_positions.max(1) }, None)
    } else if family.is_chatglm() {
        (chatglm_rope(r), None)
    } else {
        read_rope_parameters(r).unwrap_or_else(|| read_flat_rope(r))
    };
    Positions { local, global: if global_nope { Some(Positional::NoPe) } else { global } }
}

/// ALiBi (MPT's `attn_config.alibi`, Falcon's `alibi`, BLOOM always): a bias on the scores by
/// distance, no positions in Q or K, no parameters and nothing in the cache.
fn read_alibi(r: &mut Reader<'_>, family: &Family) -> Option<Positional> {
    let alibi = if family.is_mpt() {
        r.nested_boolean("attn_config", "alibi").unwrap_or_else(|| {
            r.assume("attn_config.alibi: absent, so true (MPT's default)");
            true
        })
    } else if family.is_bloom() {
        r.read_as("BLOOM always uses ALiBi (no field says so)");
        true
    } else {
        r.boolean("alibi") == Some(true)
    };
    alibi.then(|| {
        r.read_as("positions: ALiBi (a linear bias on the scores by query-key distance; nothing added to Q or K)");
        Positional::Alibi
    })
}

/// ChatGLM 2/3 and GLM-4 rotate half of each head (their 2D RoPE layout) with base
/// 10000 * `rope_ratio`.
fn chatglm_rope(r: &mut Reader<'_>) -> Positional {
    let theta = match r.float("rope_ratio") {
        Some(ratio) if ratio > 0.0 => {
            let theta = 10_000.0 * ratio;
            r.read_as(format!("rope_ratio = {ratio}, so RoPE theta = 10000 * {ratio} = {theta}"));
            theta
        }
        _ => {
            r.assume("rope_ratio: absent, so RoPE theta 10000");
            10_000.0
        }
    };
    r.assume("partial rotary factor: ChatGLM rotates half of each head (0.5)");
    Positional::Rope { theta, partial_rotary_factor: 0.5, proportional: false, linear_factor: 1.0 }
}

/// What a `rope_type` (and its `factor`) adds to theta and the partial rotary factor.
#[derive(Clone, Copy)]
struct Scaling {
    proportional: bool,
    linear_factor: f64,
}

const UNSCALED: Scaling = Scaling { proportional: false, linear_factor: 1.0 };

fn rope(theta: f64, partial_rotary_factor: f64, s: Scaling) -> Positional {
    Positional::Rope { theta, partial_rotary_factor, proportional: s.proportional, linear_factor: s.linear_factor }
}

/// The scaling an object with `rope_type` (or the older `type`) and `factor` asks for.
fn scaling_of(r: &mut Reader<'_>, path: &str, obj: &Map<String, Value>) -> Scaling {
    let kind = r.member(path, obj, "rope_type").or_else(|| r.member(path, obj, "type"));
    let kind = kind.and_then(Value::as_str).unwrap_or("default");
    let factor = match r.member(path, obj, "factor") {
        None | Some(Value::Null) => 1.0,
        Some(v) => match v.as_f64() {
            Some(f) if f > 0.0 && f <= bounds::MAX_ROPE_FACTOR => f,
            _ => {
                r.warn(format!("{path}.factor = {} is not a usable scaling factor; ignored", show(v)));
                1.0
            }
        },
    };
    match kind {
        "default" => UNSCALED,
        "linear" => Scaling { proportional: false, linear_factor: factor },
        "proportional" => Scaling { proportional: true, linear_factor: factor },
        other => {
            let other: String = other.chars().take(40).collect();
            r.warn(format!("{path}: RoPE type \"{other}\" is not modelled; its layers are drawn with plain RoPE"));
            UNSCALED
        }
    }
}

/// Theta, partial rotary factor and scaling of one `rope_parameters` object.
fn rope_from(r: &mut Reader<'_>, path: &str, obj: &Map<String, Value>) -> Option<(f64, f64, Scaling)> {
    let theta = r.member(path, obj, "rope_theta").and_then(Value::as_f64)?;
    let partial = r.member(path, obj, "partial_rotary_factor").and_then(Value::as_f64).unwrap_or(1.0);
    Some((theta, partial, scaling_of(r, path, obj)))
}

/// transformers v5 style: `rope_parameters`, possibly split by layer type (Gemma 4).
fn read_rope_parameters(r: &mut Reader<'_>) -> Option<(Positional, Option<Positional>)> {
    let (path, v) = r.find(&["rope_parameters"])?;
    let obj = v.as_object()?;
    let by_type = |r: &mut Reader<'_>, kind: &str| {
        let inner = r.member(&path, obj, kind).and_then(Value::as_object)?;
        rope_from(r, &format!("{path}.{kind}"), inner).map(|(t, p, s)| rope(t, p, s))
    };
    let found = match (by_type(r, "sliding_attention"), by_type(r, "full_attention")) {
        (Some(local), Some(global)) => (local, Some(global)),
        (None, Some(global)) => (global, None),
        _ => {
            let (theta, partial, scaling) = rope_from(r, &path, obj)?;
            r.note_used(&path, v);
            // A flat partial_rotary_factor beside the object wins over the object's.
            let partial = r.float("partial_rotary_factor").unwrap_or(partial);
            return Some((rope(theta, partial, scaling), None));
        }
    };
    r.note_used(&path, v);
    Some(found)
}

/// `rope_theta`, `partial_rotary_factor` and `rope_scaling` (or GPT-NeoX's names); Gemma 3 gives its local layers
/// `rope_local_base_freq` and its global layers `rope_theta` with the scaling.
fn read_flat_rope(r: &mut Reader<'_>) -> (Positional, Option<Positional>) {
    // GPT-NeoX and Pythia name them `rotary_pct` and `rotary_emb_base`.
    let partial = r.float("partial_rotary_factor").or_else(|| r.float("rotary_pct")).unwrap_or(1.0);
    let theta = r.float("rope_theta").or_else(|| r.float("rotary_emb_base")).unwrap_or_else(|| {
        r.assume("rope_theta: absent, so 10000");
        10_000.0
    });
    let scaling = match r.find(&["rope_scaling"]) {
        Some((path, v)) => match v.as_object() {
            Some(obj) => {
                r.note_used(&path, v);
                scaling_of(r, &path, obj)
            }
            None => {
                r.warn(format!("{path} = {} is not an object; ignored", show(v)));
                UNSCALED
            }
        },
        None => UNSCALED,
    };
    match r.float("rope_local_base_freq") {
        Some(local) => (rope(local, partial, UNSCALED), Some(rope(theta, partial, scaling))),
        None => (rope(theta, partial, scaling), None),
    }
}
