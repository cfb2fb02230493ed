//! The dense FFN: its kind (gated or plain, from the activation) and its width.

use super::family::Family;
use super::reader::Reader;
use super::report::{ImportError, invalid};
use crate::model::config::FfnKind;

pub(super) struct Ffn {
    pub kind: FfnKind,
    /// Width of the dense FFN (of the dense layers, in an MoE model).
    pub size: u64,
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family, d_model: u64) -> Result<Ffn, ImportError> {
    let kind = read_kind(r, family);
    let named = r.count(&["intermediate_size_mlp", "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"])?;
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
