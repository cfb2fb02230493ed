//! Positions: GPT-2's learned table, or RoPE (theta and partial rotary factor, from
//! `rope_parameters` or the flat fields), with the global layers' own RoPE (Gemma 3/4) or none
//! (Llama 4's NoPE layers).

use serde_json::{Map, Value};

use super::family::Family;
use super::reader::Reader;
use crate::model::config::Positional;

pub(super) struct Positions {
    /// Every layer's scheme, or the non-global layers' when `global` is set.
    pub local: Positional,
    pub global: Option<Positional>,
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family, max_positions: u64, global_nope: bool) -> Positions {
    let (local, global) = if family.is_gpt2() {
        (Positional::Learned { max_positions: max_positions.max(1) }, None)
    } else {
        read_rope_parameters(r).unwrap_or_else(|| read_flat_rope(r))
    };
    Positions { local, global: if global_nope { Some(Positional::NoPe) } else { global } }
}

fn rope(theta: f64, partial_rotary_factor: f64) -> Positional {
    Positional::Rope { theta, partial_rotary_factor }
}

/// Theta and partial rotary factor of one `rope_parameters` object.
fn rope_from(obj: &Map<String, Value>) -> Option<(f64, f64)> {
    let theta = obj.get("rope_theta").and_then(Value::as_f64)?;
    let partial = obj.get("partial_rotary_factor").and_then(Value::as_f64).unwrap_or(1.0);
    Some((theta, partial))
}

/// transformers v5 style: `rope_parameters`, possibly split by layer type (Gemma 4).
fn read_rope_parameters(r: &mut Reader<'_>) -> Option<(Positional, Option<Positional>)> {
    let (path, v) = r.find(&["rope_parameters"])?;
    let obj = v.as_object()?;
    let by_type = |kind: &str| obj.get(kind).and_then(Value::as_object).and_then(rope_from);
    let found = match (by_type("sliding_attention"), by_type("full_attention")) {
        (Some((lt, lp)), Some((gt, gp))) => (rope(lt, lp), Some(rope(gt, gp))),
        (None, Some((gt, gp))) => (rope(gt, gp), None),
        _ => {
            let (theta, partial) = rope_from(obj)?;
            r.note_used(&path, v);
            // A flat partial_rotary_factor beside the object wins over the object's.
            let partial = r.float("partial_rotary_factor").unwrap_or(partial);
            return Some((rope(theta, partial), None));
        }
    };
    r.note_used(&path, v);
    Some(found)
}

/// `rope_theta` and `partial_rotary_factor`; Gemma 3 gives its local layers `rope_local_base_freq`
/// and its global layers `rope_theta`.
fn read_flat_rope(r: &mut Reader<'_>) -> (Positional, Option<Positional>) {
    let partial = r.float("partial_rotary_factor").unwrap_or(1.0);
    let theta = r.float("rope_theta").unwrap_or_else(|| {
        r.assume("rope_theta: absent, so 10000");
        10_000.0
    });
    match r.float("rope_local_base_freq") {
        Some(local) => (rope(local, partial), Some(rope(theta, partial))),
        None => (rope(theta, partial), None),
    }
}
