//! The compare view's bars: each variant's whole cache at the chosen context and dtype, exact bytes
//! and the ratio to MHA, on one linear scale; and the listed variants the model cannot take, with why.
//! A hybrid's recurrent state is the same in every variant (they change attention layers only): each
//! bar carries it beside the cache, and a note says so; a model without attention has no variant.

use super::CompareParams;
use crate::model::kv_cache::state_bytes;
use crate::model::units::{bytes_text, count_of, format_bytes, format_thousands};
use crate::model::{Model, Variant, VariantFigures, apply_variant, compare_variants};
use crate::views::describe::variant_label;
use crate::views::kv::KvParams;

/// One variant's bar. `variant_id`, `kv_total_bytes`, `kv_bytes_per_token` and `ratio_to_mha` go
/// into data attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct BarRow {
    pub variant_id: String,
    pub kv_total_bytes: u128,
    pub kv_bytes_per_token: u128,
    pub ratio_to_mha: f64,
    /// The recurrent state per sequence, the same in every variant (0 for a transformer).
    pub state_bytes: u128,
    pub label: String,
    /// Of the longest bar.
    pub fraction: f64,
    /// The real model's bar stands out.
    pub class: &'static str,
    pub bytes_text: String,
    /// ` · 0.2500 × MHA · 131,072 B per token`.
    pub detail: String,
}

/// The bars, and the variants not shown (`None`: all shown).
#[derive(Clone, Debug, PartialEq)]
pub struct Bars {
    pub rows: Vec<BarRow>,
    pub skipped: Option<String>,
    /// What the variants do not touch: a hybrid's state, or a model with no attention at all.
    pub state_note: Option<String>,
}

/// A hybrid: the variants leave the state alone. No attention: no variant applies.
pub fn state_note(base: &Model) -> Option<String> {
    let state = state_bytes(base).ok()?;
    let kept = base.n_layers() - base.attention_layers();
    if kept == 0 && state == 0 {
        return None;
    }
    let state = format_bytes(state);
    Some(if kept == 0 {
        // Falcon-H1's shape: the mixers run beside attention in the same layers.
        format!(
            "Every variant changes only the attention of the {}; the recurrent mixers beside it keep the \
             same state of {state} per sequence in every row, at any context.",
            count_of(base.n_layers().into(), "layer")
        )
    } else if base.has_attention() {
        format!(
            "Every variant changes only the {}; the other {} stay as they are, with the same recurrent state of \
             {state} per sequence in every row, at any context.",
            count_of(base.attention_layers().into(), "attention layer"),
            count_of(kept.into(), "layer")
        )
    } else {
        format!(
            "No layer of this model runs softmax attention, so it has no KV cache and the variants do not apply: \
             there are no keys and values to group, compress, window or share. Each sequence keeps only a \
             constant recurrent state of {state}."
        )
    })
}

/// `KV cache at 131,072 tokens, FP16`.
pub fn bars_heading(kv: &KvParams) -> String {
    format!("KV cache at {} tokens, {}", format_thousands(kv.ctx_tokens.into()), kv.dtype.label())
}

/// Each chosen variant's figures at the link's context and dtype, or why there are none.
pub fn variant_figures(base: &Model, params: &CompareParams, kv: &KvParams) -> Result<Vec<VariantFigures>, String> {
    compare_variants(base, &params.chosen(base), kv.ctx_tokens, kv.dtype).map_err(|e| e.to_string())
}

pub fn bars(base: &Model, params: &CompareParams, kv: &KvParams) -> Result<Bars, String> {
    let figures = variant_figures(base, params, kv)?;
    let longest_bytes = figures.iter().map(|r| r.kv_total_bytes).max().unwrap_or(1).max(1);
    // Without attention every variant but the model itself is refused for the same reason, which
    // the state note gives once.
    let skipped = if base.has_attention() { skipped(base, params) } else { Vec::new() };
    Ok(Bars {
        rows: figures.iter().map(|r| bar_row(base, r, longest_bytes)).collect(),
        skipped: (!skipped.is_empty()).then(|| skipped.join("; ")),
        state_note: state_note(base),
    })
}

fn bar_row(base: &Model, r: &VariantFigures, longest_bytes: u128) -> BarRow {
    let ratio =
        if r.variant == Variant::Mha { "the baseline".to_string() } else { format!("{:.4} × MHA", r.ratio_to_mha) };
    let state =
        if r.state_bytes > 0 { format!(" · + {} of state", format_bytes(r.state_bytes)) } else { String::new() };
    BarRow {
        variant_id: r.variant.to_string(),
        kv_total_bytes: r.kv_total_bytes,
        kv_bytes_per_token: r.kv_bytes_per_token,
        ratio_to_mha: r.ratio_to_mha,
        state_bytes: r.state_bytes,
        label: variant_label(r.variant, base),
        fraction: r.kv_total_bytes as f64 / longest_bytes as f64,
        class: if r.variant == Variant::AsPublished { "published" } else { "variant" },
        bytes_text: bytes_text(r.kv_total_bytes),
        detail: format!(" · {ratio} · {} B per token{state}", format_thousands(r.kv_bytes_per_token)),
    }
}

/// Variants listed but impossible for this model (e.g. 5 groups of 32 heads), with why.
fn skipped(base: &Model, params: &CompareParams) -> Vec<String> {
    params
        .chosen(base)
        .into_iter()
        .filter_map(|v| apply_variant(base, v).err().map(|e| format!("{}: {e}", variant_label(v, base))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn llama_bars(variants: Option<Vec<Variant>>) -> Bars {
        let kv = KvParams { ctx_tokens: 131_072, ..Default::default() };
        bars(preset("llama-3-8b").unwrap(), &CompareParams { variants }, &kv).unwrap()
    }

    #[test]
    fn llama_3_8b_at_128k_fp16() {
        let kv = KvParams { ctx_tokens: 131_072, ..Default::default() };
        assert_eq!(bars_heading(&kv), "KV cache at 131,072 tokens, FP16");
        let b = llama_bars(None);
        assert_eq!(b.skipped, None);
        let ids: Vec<&str> = b.rows.iter().map(|r| r.variant_id.as_str()).collect();
        assert_eq!(ids, ["published", "mha", "gqa8", "mqa", "mla512r64", "sw4096", "hybrid5w1024", "kveqv", "xl2"]);
        // MHA: 32 layers × 32 KV heads × 128 × 2 × 2 B = 524,288 B per token; × 131,072 = 68,719,476,736 B.
        let mha = &b.rows[1];
        assert_eq!((mha.kv_total_bytes, mha.kv_bytes_per_token, mha.fraction), (68_719_476_736, 524_288, 1.0));
        assert_eq!(mha.detail, " · the baseline · 524,288 B per token");
        assert_eq!(mha.label, "MHA (32 KV heads, one per query head)");
        // As published = GQA 8: a quarter, 17,179,869,184 B, drawn in its own colour.
        let published = &b.rows[0];
        assert_eq!(
            (published.kv_total_bytes, published.fraction, published.class),
            (17_179_869_184, 0.25, "published")
        );
        assert_eq!(published.detail, " · 0.2500 × MHA · 131,072 B per token");
        assert_eq!(b.rows[2].class, "variant");
    }

    #[test]
    fn impossible_variants_are_named_with_why() {
        // 32 heads cannot form 5 equal groups: two bars, one explanation.
        let b = llama_bars(Some(vec![Variant::Mha, Variant::Gqa { groups: 5 }, Variant::Mqa]));
        assert_eq!(b.rows.len(), 2);
        let skipped = b.skipped.unwrap();
        assert!(skipped.starts_with("GQA, 5 KV heads"), "{skipped}");
        assert!(skipped.contains("cannot form 5 equal groups"), "{skipped}");
    }

    #[test]
    fn a_hybrid_keeps_its_state_in_every_bar() {
        // Jamba's shape: 28 Mamba layers × (32,768 + 262,144) elements × 2 B = 16,515,072 B of state;
        // 4 attention layers of 8 KV heads × 128: as published 4 × 8 × 128 × 2 × 2 B = 16,384 B per
        // token, MHA (32 KV heads) 65,536 B.
        let code = "L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144";
        let base = crate::model::decode_model(code).unwrap();
        let b = bars(&base, &CompareParams::default(), &KvParams { ctx_tokens: 1000, ..Default::default() }).unwrap();
        assert_eq!(b.skipped, None);
        assert!(b.rows.iter().all(|r| r.state_bytes == 16_515_072));
        assert_eq!((b.rows[0].kv_bytes_per_token, b.rows[1].kv_bytes_per_token), (16_384, 65_536));
        assert_eq!(b.rows[1].detail, " · the baseline · 65,536 B per token · + 16.52 MB (15.75 MiB) of state");
        let note = b.state_note.unwrap();
        assert!(note.starts_with("Every variant changes only the 4 attention layers; the other 28 layers"), "{note}");
        assert_eq!(llama_bars(None).state_note, None);
    }

    #[test]
    fn no_variant_applies_without_attention() {
        // 64 Mamba layers × (20,480 + 81,920) elements × 2 B = 13,107,200 B.
        let code = "L64.d2560.h1.kv1.hd1.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048";
        let base = crate::model::decode_model(code).unwrap();
        let b = bars(&base, &CompareParams::default(), &KvParams::default()).unwrap();
        assert_eq!((b.rows.len(), b.skipped.clone()), (1, None));
        assert_eq!(
            (b.rows[0].variant_id.as_str(), b.rows[0].kv_total_bytes, b.rows[0].state_bytes),
            ("published", 0, 13_107_200)
        );
        assert!(b.state_note.unwrap().starts_with("No layer of this model runs softmax attention"));
    }
}
