//! Figures of the MLA view's two forms, for its layer (the chosen model's MLA, else DeepSeek-V3's):
//! the widths each form attends over and each form's FLOPs and bytes at the KV view's context and
//! dtype, as the view's cost table counts them.

use super::written::{Figure, Unit, number, whole};
use crate::views::mla::cost::{Form, Phase, cost};
use crate::views::mla::setup::setup;
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings) -> Option<Figure> {
    let sizes = setup(state).sizes;
    let (ctx, bits) = (state.kv.ctx_tokens, state.kv.dtype.bits());
    let of = |form, phase| cost(&sizes, form, phase, ctx, bits);
    let ratio = |a: u128, b: u128| Some(number(a as f64 / b.max(1) as f64, Unit::Times));
    let (unit, value) = match name {
        "mla_key_width" => (Unit::Count, sizes.latent_key_width().into()),
        "mla_head_width" => (Unit::Count, sizes.qk_width().into()),
        "mla_fold_flops" => {
            (Unit::Flops, 2 * u128::from(sizes.heads) * u128::from(sizes.nope) * u128::from(sizes.latent))
        }
        "mla_decode_flops_expanded" => (Unit::Flops, of(Form::Expanded, Phase::Decode).flops),
        "mla_decode_flops_absorbed" => (Unit::Flops, of(Form::Absorbed, Phase::Decode).flops),
        "mla_decode_bytes_expanded" => (Unit::Bytes, of(Form::Expanded, Phase::Decode).bytes),
        "mla_decode_bytes_absorbed" => (Unit::Bytes, of(Form::Absorbed, Phase::Decode).bytes),
        "mla_prefill_flops_expanded" => (Unit::Flops, of(Form::Expanded, Phase::Prefill).flops),
        "mla_prefill_flops_absorbed" => (Unit::Flops, of(Form::Absorbed, Phase::Prefill).flops),
        "mla_decode_flops_saving" => {
            return ratio(of(Form::Expanded, Phase::Decode).flops, of(Form::Absorbed, Phase::Decode).flops);
        }
        "mla_prefill_flops_ratio" => {
            return ratio(of(Form::Absorbed, Phase::Prefill).flops, of(Form::Expanded, Phase::Prefill).flops);
        }
        _ => return None,
    };
    Some(whole(value, unit))
}

#[cfg(test)]
mod tests {
    use super::super::tests::at;
    use super::*;

    fn exact(name: &str, query: &str) -> String {
        figure(name, &at(query).0).unwrap_or_else(|| panic!("{name} at {query}")).exact
    }

    #[test]
    fn deepseek_v3s_two_forms_by_hand() {
        let q = "model=deepseek-v3&ctx=4096&dtype=fp16";
        assert_eq!(exact("mla_key_width", q), "576");
        assert_eq!(exact("mla_head_width", q), "192");
        // 2 · 128 heads · 128 · 512 = 16,777,216.
        assert_eq!(exact("mla_fold_flops", q), "16777216");
        // The cost module's hand-computed figures at 4,096 tokens in 16 bits.
        assert_eq!(exact("mla_decode_flops_expanded", q), "137774497792");
        assert_eq!(exact("mla_decode_flops_absorbed", q), "1174405120");
        assert_eq!(exact("mla_decode_bytes_expanded", q), "575143936");
        assert_eq!(exact("mla_decode_bytes_absorbed", q), "38797312");
        // 137,774,497,792 / 1,174,405,120 = 117.31...; 2,474,471,587,840 / 824,801,492,992 = 3.0000...
        assert_eq!(exact("mla_decode_flops_saving", q), "117.3143");
        assert_eq!(exact("mla_prefill_flops_ratio", q), "3.0001");
        assert_eq!(figure("quant_group", &at(q).0), None);
    }
}
