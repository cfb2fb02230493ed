//! The KV view's GPU memory budget: the one-click card sizes, and what fits (the longest context,
//! the weights' share, the chosen context's use of the budget) in words and data attributes.

use super::KvParams;
use crate::model::budget::{BUDGET_PRESETS_GB, BudgetFit, budget_fit};
use crate::model::plot::short_tokens_label;
use crate::model::units::{format_bytes, format_thousands, format_tokens};
use crate::model::{ContextFit, DType, Model};

/// A one-click budget: a card's memory in GB and bytes, the card named in its title.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetChoice {
    pub gb: u64,
    pub bytes: u64,
    pub title: &'static str,
    pub text: String,
}

pub fn budget_choices() -> Vec<BudgetChoice> {
    let choice = |(gb, title): (u64, &'static str)| BudgetChoice {
        gb,
        bytes: gb * 1_000_000_000,
        title,
        text: format!("{gb} GB"),
    };
    BUDGET_PRESETS_GB.into_iter().map(choice).collect()
}

/// `counted, in BF16`: an option of the weights select.
pub fn weights_option_text(dtype: DType) -> String {
    format!("counted, in {}", dtype.label())
}

/// The budget arithmetic for the link's parameters; `None` when a size passes `u128`.
pub fn budget_fit_of(model: &Model, kv: &KvParams) -> Option<BudgetFit> {
    budget_fit(model, kv.dtype, kv.ctx_tokens, kv.budget_bytes, kv.weights).ok()
}

/// What fits, as the page says it. `fit_value` is `budget-fit`'s `data-value`: the token count,
/// `none` or `unbounded`.
#[derive(Clone, Debug, PartialEq)]
pub struct FitSummary {
    pub fit_value: String,
    pub headline: String,
    pub kv_room_bytes: u128,
    /// 0 when the weights are not counted.
    pub weights_bytes: u128,
    pub weights_line: String,
    pub at_ctx: String,
    pub ctx_fits: bool,
    pub verdict: &'static str,
    /// `budget-sequences`' `data-value`: sequences of the chosen context that fit at once.
    pub sequences_value: String,
    pub sequences_line: String,
}

/// The summary for `model` and the link's parameters; `None` when a size passes `u128`.
pub fn fit_summary(model: &Model, kv: &KvParams) -> Option<FitSummary> {
    let fit = budget_fit_of(model, kv)?;
    let (fit_value, mut headline) = fit_headline(fit.fit);
    if fit.fit == ContextFit::Unbounded && !model.has_attention() {
        headline = "Any context fits: no layer keeps a KV cache, and the constant state fits.".into();
    }
    // A model with a recurrent state shares the room between the cache and the state.
    let cache = if fit.state_bytes > 0 { "the cache and the state" } else { "the cache" };
    let weights_line = match fit.weights_bytes {
        Some(w) => format!(
            "{} budget − {} weights = {} left for {cache}.",
            format_bytes(fit.budget_bytes),
            format_bytes(w),
            format_bytes(fit.kv_room_bytes)
        ),
        None => format!("The whole {} budget is for {cache} (weights not counted).", format_bytes(fit.budget_bytes)),
    };
    Some(FitSummary {
        fit_value,
        headline,
        kv_room_bytes: fit.kv_room_bytes,
        weights_bytes: fit.weights_bytes.unwrap_or(0),
        weights_line,
        at_ctx: at_ctx_line(&fit, kv),
        ctx_fits: fit.ctx_fits(),
        verdict: if fit.ctx_fits() { "fits" } else { "does not fit" },
        sequences_value: fit.sequences_at_ctx().map_or_else(|| "unbounded".into(), |n| n.to_string()),
        sequences_line: sequences_line(&fit, kv),
    })
}

/// `Room for 59 sequences of 8,192 tokens at once, 1.07 GB (1.00 GiB) of cache each.`; with a
/// recurrent state, `..., 1.07 GB (1.00 GiB) of cache + 16.52 MB (15.75 MiB) of state each.`
fn sequences_line(fit: &BudgetFit, kv: &KvParams) -> String {
    let ctx = format_thousands(kv.ctx_tokens.into());
    let each = if fit.state_bytes > 0 {
        format!("{} of cache + {} of state", format_bytes(fit.kv_at_ctx_bytes), format_bytes(fit.state_bytes))
    } else {
        format!("{} of cache", format_bytes(fit.kv_at_ctx_bytes))
    };
    match fit.sequences_at_ctx() {
        None => format!("A sequence of {ctx} tokens caches nothing here."),
        Some(n) => format!(
            "Room for {} {} of {ctx} tokens at once, {each} each.",
            format_thousands(n),
            if n == 1 { "sequence" } else { "sequences" },
        ),
    }
}

/// (`data-value`, headline) of the longest context that fits.
fn fit_headline(fit: ContextFit) -> (String, String) {
    match fit {
        ContextFit::WeightsDoNotFit => ("none".into(), "The weights alone do not fit: no context fits.".into()),
        ContextFit::Unbounded => {
            ("unbounded".into(), "Any context fits: every attention layer is windowed and the plateau fits.".into())
        }
        ContextFit::Tokens(u64::MAX) => ("unbounded".into(), "Any context a model could use fits.".into()),
        ContextFit::Tokens(n) => (
            n.to_string(),
            format!("Longest context that fits: {} tokens ({})", format_thousands(n.into()), format_tokens_approx(n)),
        ),
    }
}

/// `At 8,192 tokens: 1.07 GB cache of 80.00 GB, 1.3%.`, with the state and the weights added when
/// there are some and they count.
fn at_ctx_line(fit: &BudgetFit, kv: &KvParams) -> String {
    let percent = fit.used_at_ctx_bytes as f64 / kv.budget_bytes as f64 * 100.0;
    let ctx = format_thousands(kv.ctx_tokens.into());
    let mut parts = vec![format!("{} cache", format_bytes(fit.kv_at_ctx_bytes))];
    if fit.state_bytes > 0 {
        parts.push(format!("{} state", format_bytes(fit.state_bytes)));
    }
    if let Some(w) = fit.weights_bytes {
        parts.push(format!("{} weights", format_bytes(w)));
    }
    let used = if parts.len() > 1 { format!(" = {}", format_bytes(fit.used_at_ctx_bytes)) } else { String::new() };
    format!("At {ctx} tokens: {}{used} of {}, {percent:.1}%.", parts.join(" + "), format_bytes(fit.budget_bytes))
}

/// `610,351` -> `610k` style; exact binary steps stay exact (`8K`).
pub fn format_tokens_approx(n: u64) -> String {
    let exact = format_tokens(n);
    if exact.ends_with('K') || exact.ends_with('M') { exact } else { short_tokens_label(n as f64) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn summary(id: &str, kv: KvParams) -> FitSummary {
        fit_summary(preset(id).unwrap(), &kv).unwrap()
    }

    #[test]
    fn choices_and_token_counts_in_words() {
        let first = &budget_choices()[0];
        assert_eq!((first.gb, first.bytes, first.text.as_str()), (24, 24_000_000_000, "24 GB"));
        assert_eq!(weights_option_text(DType::Bf16), "counted, in BF16");
        // Axis labels keep 3 significant digits: 610,351 -> 610k.
        assert_eq!((format_tokens_approx(8192), format_tokens_approx(610_351)), ("8K".into(), "610k".into()));
    }

    #[test]
    fn llama_3_8b_in_80_gb_cache_only() {
        // 80 × 10^9 B / 131,072 B per token = 610,351.56 -> 610,351 tokens.
        let s = summary("llama-3-8b", KvParams::default());
        assert_eq!(s.fit_value, "610351");
        assert_eq!(s.headline, "Longest context that fits: 610,351 tokens (610k)");
        assert_eq!((s.kv_room_bytes, s.weights_bytes), (80_000_000_000, 0));
        assert_eq!(s.weights_line, "The whole 80.00 GB (74.51 GiB) budget is for the cache (weights not counted).");
        // 2^30 B of 80 × 10^9 B = 1.34%.
        assert_eq!(s.at_ctx, "At 8,192 tokens: 1.07 GB (1.00 GiB) cache of 80.00 GB (74.51 GiB), 1.3%.");
        assert_eq!((s.ctx_fits, s.verdict), (true, "fits"));
        // 80 × 10^9 B / 2^30 B per sequence of 8,192 tokens = 74.5 -> 74.
        assert_eq!(s.sequences_value, "74");
        assert_eq!(
            s.sequences_line,
            "Room for 74 sequences of 8,192 tokens at once, 1.07 GB (1.00 GiB) of cache each."
        );
    }

    #[test]
    fn weights_take_their_share_first() {
        // 141 GB − 8,030,261,248 params × 2 B = 124,939,477,504 B; / 131,072 = 953,212 tokens.
        let kv = KvParams { budget_bytes: 141_000_000_000, weights: Some(DType::Bf16), ..Default::default() };
        let s = summary("llama-3-8b", kv);
        assert_eq!(
            (s.fit_value.as_str(), s.weights_bytes, s.kv_room_bytes),
            ("953212", 16_060_522_496, 124_939_477_504)
        );
        assert!(s.weights_line.ends_with("left for the cache."), "{}", s.weights_line);
        assert!(s.at_ctx.contains(" weights = "), "{}", s.at_ctx);
        // 1 GB of cache in a 1 GB budget with 16 GB of weights: nothing fits.
        let kv = KvParams { budget_bytes: 1_000_000_000, weights: Some(DType::Bf16), ..Default::default() };
        let s = summary("llama-3-8b", kv);
        assert_eq!((s.fit_value.as_str(), s.verdict), ("none", "does not fit"));
        assert_eq!(s.sequences_line, "Room for 0 sequences of 8,192 tokens at once, 1.07 GB (1.00 GiB) of cache each.");
        assert_eq!(s.headline, "The weights alone do not fit: no context fits.");
    }

    #[test]
    fn an_all_sliding_model_fits_any_context() {
        // Mistral 7B: every layer windowed at 4,096; the plateau 536,870,912 B fits 80 GB.
        let s = summary("mistral-7b", KvParams { ctx_tokens: 32_768, ..Default::default() });
        assert_eq!(s.fit_value, "unbounded");
        assert_eq!(s.headline, "Any context fits: every attention layer is windowed and the plateau fits.");
    }

    #[test]
    fn the_state_counts_once_per_sequence() {
        use crate::model::decode_model;
        // Jamba's shape: 4 attention layers × 8 KV heads × 128 × 2 × 2 B = 16,384 B per token, 28
        // Mamba layers keeping 16,515,072 B per sequence. At 8,192 tokens the cache is 134,217,728 B;
        // a sequence keeps 134,217,728 + 16,515,072 = 150,732,800 B.
        let code = "L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144";
        let m = decode_model(code).unwrap();
        let s = fit_summary(&m, &KvParams::default()).unwrap();
        // 80 × 10^9 / 150,732,800 = 530.74 -> 530 sequences (the cache alone would give 596).
        assert_eq!(s.sequences_value, "530");
        assert_eq!(
            s.sequences_line,
            "Room for 530 sequences of 8,192 tokens at once, 134.22 MB (128.00 MiB) of cache + 16.52 MB (15.75 MiB) of state each."
        );
        // (80 × 10^9 − 16,515,072) / 16,384 = 79,983,484,928 / 16,384 = 4,881,804.5 -> 4,881,804 tokens.
        assert_eq!(s.fit_value, "4881804");
        assert_eq!(
            s.at_ctx,
            "At 8,192 tokens: 134.22 MB (128.00 MiB) cache + 16.52 MB (15.75 MiB) state = 150.73 MB (143.75 MiB) of 80.00 GB (74.51 GiB), 0.2%."
        );
        assert!(s.weights_line.contains("is for the cache and the state"), "{}", s.weights_line);
        // A pure Mamba: no cache, 13,107,200 B of state: 80 × 10^9 / 13,107,200 = 6,103.5 -> 6,103.
        let code = "L64.d2560.h1.kv1.hd1.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048";
        let s = fit_summary(&decode_model(code).unwrap(), &KvParams::default()).unwrap();
        assert_eq!((s.fit_value.as_str(), s.sequences_value.as_str()), ("unbounded", "6103"));
        assert_eq!(s.headline, "Any context fits: no layer keeps a KV cache, and the constant state fits.");
    }
}
