//! What the MLA view says: the layer it computes, where it ran, what the differences mean, and the
//! cost table's rows.

use super::cost::{Form, Phase, cost};
use super::setup::{MlaSetup, MlaSizes};
use super::{KeyRotation, MlaParams};
use crate::model::units::{format_bytes, format_thousands};
use crate::views::registry::Settings;

/// Below this, a difference between the forms is f32 rounding (both come from sums of a few hundred
/// f32 products); the whole-key rotation moves probabilities by tenths.
pub const ROUNDING_LEVEL: f64 = 1e-5;

/// The layer in one sentence.
pub fn layer_line(setup: &MlaSetup, params: &MlaParams) -> String {
    let s = &setup.sizes;
    format!(
        "{}'s MLA layer: a latent of {} and a RoPE key of {} cached per token; each head's query and key are {} + {} = {} \
         wide and its value {}. {} of its {} query heads are computed here, over {} tokens.",
        setup.model_name,
        s.latent,
        s.rope,
        s.nope,
        s.rope,
        s.qk_width(),
        s.value,
        params.qheads.min(s.heads),
        s.heads,
        params.tokens
    )
}

/// What the weights are.
pub const SYNTHETIC_NOTE: &str = "Synthetic weights: the cached latent, the RoPE key, the queries and each head's \
    up-projections W_UK and W_UV are seeded random values (the link's seed) in the layer's real widths, not \
    DeepSeek's trained weights. Both forms start from the same cache; the projections that make it from the \
    hidden state are the same in both and left out.";

/// Where the forms ran.
pub fn tier_line(on_gpu: bool, engine: &str) -> String {
    if on_gpu {
        format!(
            "Computed on the GPU ({engine}): the up-projections and folds by the matmul kernel, attention by the tiled \
             kernel (the absorbed form's one shared key head is {{w}} wide), probabilities by the row softmax; RoPE \
             turns rows on the CPU."
        )
    } else {
        format!("CPU tier: the kernels' CPU twins computed both forms ({engine}).")
    }
}

/// [`tier_line`] with the absorbed key's width.
pub fn tier_text(on_gpu: bool, engine: &str, sizes: &MlaSizes) -> String {
    tier_line(on_gpu, engine).replace("{w}", &sizes.latent_key_width().to_string())
}

/// What the largest difference between the forms means.
pub fn verdict(rot: KeyRotation, max_prob_diff: f64, rope_width: u32) -> String {
    let at_rounding = max_prob_diff < ROUNDING_LEVEL;
    match (rot, at_rounding) {
        (KeyRotation::Decoupled, true) => format!(
            "The forms agree to rounding (below {ROUNDING_LEVEL:.0e}): q·(W_UK c) = (W_UKᵀ q)·c, so folding W_UK into \
             the query changes where the product is taken, not what it is."
        ),
        (KeyRotation::Decoupled, false) => {
            "The forms differ by more than rounding: this should not happen, and is a bug.".into()
        }
        (KeyRotation::Whole, _) => format!(
            "With the whole key rotated the forms differ by {max_prob_diff:.3} in probability: the expanded score is \
             (R_i q)·(R_j W_UK c) = q·R_(j−i) W_UK c, and the rotation between q and W_UK changes with every key, so \
             no one folded query serves them all. The absorbed form can only leave the latent unrotated. MLA's \
             decoupled RoPE key carries the position in {rope_width} values of its own instead, which the fold never \
             touches, and the forms agree again (rot=decoupled)."
        ),
    }
}

/// One row of the cost table.
#[derive(Clone, Debug, PartialEq)]
pub struct CostRow {
    pub phase: Phase,
    pub form: Form,
    pub flops: u128,
    pub bytes: u128,
    /// What the phase is, in words.
    pub what: String,
    pub flops_text: String,
    pub bytes_text: String,
}

/// Both forms at a prefill of the KV view's context (`ctx`) and at one token decoded against it, at
/// its cache dtype, for every head of the model.
pub fn cost_rows(settings: &Settings, sizes: &MlaSizes) -> Vec<CostRow> {
    let n = settings.kv.ctx_tokens;
    let bits = settings.kv.dtype.bits();
    let mut rows = Vec::new();
    for phase in Phase::ALL {
        for form in Form::ALL {
            let c = cost(sizes, form, phase, n, bits);
            let what = match phase {
                Phase::Prefill => format!("prefill of {} tokens", format_thousands(n.into())),
                Phase::Decode => format!("1 token, {} cached", format_thousands(n.into())),
            };
            rows.push(CostRow {
                phase,
                form,
                flops: c.flops,
                bytes: c.bytes,
                what,
                flops_text: format_thousands(c.flops),
                bytes_text: format_bytes(c.bytes),
            });
        }
    }
    rows
}

/// The cost table's caption.
pub fn cost_caption(settings: &Settings, sizes: &MlaSizes) -> String {
    format!(
        "One layer of all {} heads, values in {} (the KV view's ctx and dtype set both). FLOPs count a multiply and an \
         add as 2; bytes are the latent cache and the up-projections read once, and what each form writes and reads \
         back (expanded: every head's keys and values; absorbed: every head's latent-space query and output).",
        sizes.heads, settings.kv.dtype
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::mla::setup::setup;

    #[test]
    fn the_cost_rows_follow_ctx_and_dtype() {
        let (settings, notices) = Settings::from_query("model=deepseek-v3&ctx=4096&dtype=fp16");
        assert!(notices.is_empty(), "{notices:?}");
        let rows = cost_rows(&settings, &setup(&settings).sizes);
        assert_eq!(rows.len(), 4);
        // The hand-computed figures of `cost`'s tests.
        let decode_absorbed = rows.iter().find(|r| r.phase == Phase::Decode && r.form == Form::Absorbed).unwrap();
        assert_eq!((decode_absorbed.flops, decode_absorbed.bytes), (1_174_405_120, 38_797_312));
        assert_eq!(decode_absorbed.flops_text, "1,174,405,120");
        assert_eq!(rows[0].what, "prefill of 4,096 tokens");
    }

    #[test]
    fn the_verdicts() {
        assert!(verdict(KeyRotation::Decoupled, 3e-8, 64).starts_with("The forms agree"));
        assert!(verdict(KeyRotation::Decoupled, 0.2, 64).contains("bug"));
        assert!(verdict(KeyRotation::Whole, 0.25, 64).contains("differ by 0.250"));
        let (settings, _) = Settings::from_query("model=deepseek-v3&tokens=10&qheads=2");
        let line = layer_line(&setup(&settings), &settings.mla);
        assert!(
            line.contains("128 + 64 = 192") && line.contains("2 of its 128 query heads") && line.contains("10 tokens")
        );
        assert!(tier_text(true, "lavapipe", &setup(&settings).sizes).contains("576 wide"));
    }
}
