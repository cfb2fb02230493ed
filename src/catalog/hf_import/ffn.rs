//! The dense FFN: its kind (gated or plain, from the activation) and its width (one number, or
//! Gemma 3n's list of one width per layer).

use serde_json::Value;

use super::family::Family;
use super::reader::{Reader, as_count, show};
use super::report::{ImportError, invalid};
use crate::model::config::FfnKind;

pub(super) struct Ffn {
    pub kind: FfnKind,
    /// Width of the dense FFN (of the dense layers, in an MoE model).
    pub size: u64,
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family, d_model: u64) -> Result<Ffn, ImportError> {
    let kind = read_kind(r, family);
    let named = read_named_width(r)?;
    let size = match named {
        Some(size) => size,
        // MPT gives the width as a multiple of d_model.
        None => match r.count(&["expansion_ratio"])? {
            Some(ratio) => ratio
                .checked_mul(d_model)
                .ok_or_else(|| invalid("expansion_ratio", format!("{ratio} * {d_model} is far too large")))?,
            None => {
                r.assume(format!("intermediate_size: absent, so 4 * hidden_size = {}", 4 * d_model));
                4 * d_model
            }
        },
    };
    Ok(Ffn { kind, size })
}

const WIDTH_NAMES: [&str; 5] = ["intermediate_size_mlp", "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"];

/// The width a field names: a number, or a list with one width per layer (Gemma 3n).
fn read_named_width(r: &mut Reader<'_>) -> Result<Option<u64>, ImportError> {
    if let Some((path, v)) = r.find(&WIDTH_NAMES)
        && let Some(list) = v.as_array()
    {
        return per_layer_width(r, &path, v, list).map(Some);
    }
    r.count(&WIDTH_NAMES)
}

/// One width for a per-layer list: the model has a single FFN width, so equal entries are exact
/// and unequal ones are counted at the largest, with a warning.
fn per_layer_width(r: &mut Reader<'_>, path: &str, v: &Value, list: &[Value]) -> Result<u64, ImportError> {
    let mut widths = Vec::with_capacity(list.len());
    for item in list {
        let w = as_count(item).map_err(|e| invalid(path, e))?;
        if w == 0 {
            return Err(invalid(path, format!("entry {} is not a width", show(item))));
        }
        widths.push(w);
    }
    let max = widths.iter().copied().max().ok_or_else(|| invalid(path, "is an empty list"))?;
    r.note_used(path, v);
    if widths.iter().all(|&w| w == max) {
        r.read_as(format!("{path} lists one FFN width per layer, all {max}"));
    } else {
        r.warn(format!(
            "{path} lists different FFN widths per layer; one width is modelled, so every layer is counted at the largest, {max}"
        ));
    }
    Ok(max)
}

/// ReLU or a GPT-2-era family: a plain MLP; GELU: GeGLU; otherwise SwiGLU.
fn read_kind(r: &mut Reader<'_>, family: &Family) -> FfnKind {
    let act = r
        .text("hidden_activation")
        .or_else(|| r.text("hidden_act"))
        .or_else(|| r.text("activation_function"))
        .unwrap_or_default();
    if family.plain_mlp() || act.contains("relu") {
        FfnKind::Mlp
    } else if act.contains("gelu") {
        FfnKind::GeGlu
    } else if act.is_empty() && family.is_gemma() {
        r.assume("activation: absent, so Gemma's GELU-gated (3-matrix) FFN");
        FfnKind::GeGlu
    } else {
        if act.is_empty() {
            r.assume("activation: absent, so a SwiGLU (3-matrix) FFN");
        }
        FfnKind::SwiGlu
    }
}
