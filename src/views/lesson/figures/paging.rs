//! Figures of a paged KV cache for the KV view's model, context and dtype: pages of
//! [`PAGE_TOKENS`] tokens, what the last partly filled page and a contiguous reservation leave unused,
//! and what the decode demo's shared prompt saves: computed with the books (`model::paging`) that
//! place every token in the demo's real pool on the GPU.

use super::sources::model_window;
use super::written::{Figure, Unit, whole};
use crate::model::decode_demo::{PROMPT_TOKENS, prompt_sharing};
use crate::model::paging::{PAGE_TOKENS, most_live_pages, pages_for};
use crate::model::{LayerKind, Model, kv_bytes_per_token, kv_total_bytes};
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let (ctx, dtype) = (state.kv.ctx_tokens, state.kv.dtype);
    let per_token = || kv_bytes_per_token(model, dtype).ok();
    let free_slots = pages_for(ctx) * PAGE_TOKENS - ctx;
    let max_tokens = model.max_position_embeddings;
    let (unit, value): (Unit, u128) = match name {
        "page_tokens" => (Unit::Tokens, PAGE_TOKENS.into()),
        "page_bytes" => (Unit::Bytes, per_token()?.checked_mul(PAGE_TOKENS.into())?),
        "ctx_pages" => (Unit::Count, pages_for(ctx).into()),
        "last_page_free_tokens" => (Unit::Tokens, free_slots.into()),
        "paged_waste_bytes" => (Unit::Bytes, per_token()?.checked_mul(free_slots.into())?),
        "model_max_tokens" => (Unit::Tokens, max_tokens.into()),
        "contiguous_bytes" => (Unit::Bytes, kv_total_bytes(model, max_tokens, dtype).ok()?),
        "contiguous_waste_bytes" if ctx <= max_tokens => {
            let reserved = kv_total_bytes(model, max_tokens, dtype).ok()?;
            (Unit::Bytes, reserved - kv_total_bytes(model, ctx, dtype).ok()?)
        }
        "prompt_tokens" => (Unit::Tokens, PROMPT_TOKENS.into()),
        "prefix_shared_tokens" => (Unit::Tokens, prompt_sharing(model).on_arrival.into()),
        "prefix_copied_tokens" => (Unit::Tokens, prompt_sharing(model).copied.into()),
        "prefix_kept_tokens" => (Unit::Tokens, prompt_sharing(model).kept_shared.into()),
        "prefix_saved_bytes" => (Unit::Bytes, per_token()?.checked_mul(prompt_sharing(model).kept_shared.into())?),
        "window_max_pages" => {
            let window_tokens = model_window(model)?;
            (Unit::Count, most_live_pages(LayerKind::Sliding { window_tokens })?.into())
        }
        _ => return None,
    };
    Some(whole(value, unit))
}

#[cfg(test)]
mod tests {
    use super::super::tests::exact;

    #[test]
    fn llama_3_8b_pages_by_hand() {
        // 131,072 B per token (2 x 32 layers x 8 KV heads x 128 x 2 B). 1,000 tokens: 62 full pages of 16
        // and 8 tokens in a 63rd, whose 8 free slots reserve 8 x 131,072 = 1,048,576 B.
        let q = "model=llama-3-8b&ctx=1000&dtype=fp16";
        for (name, value) in [
            ("page_tokens", "16"),
            ("page_bytes", "2097152"),
            ("ctx_pages", "63"),
            ("last_page_free_tokens", "8"),
            ("paged_waste_bytes", "1048576"),
            // Its config's 8,192 positions, reserved whole: 8,192 x 131,072 = 1,073,741,824 B, of which
            // (8,192 - 1,000) x 131,072 = 942,669,824 B are beyond the context.
            ("model_max_tokens", "8192"),
            ("contiguous_bytes", "1073741824"),
            ("contiguous_waste_bytes", "942669824"),
            // The demo's 40-token prompt: B reads all 40 from A's 3 pages, copies the 8 of the partly
            // filled one when it first writes, and the 2 full pages stay shared (32 tokens, 4,194,304 B).
            ("prompt_tokens", "40"),
            ("prefix_shared_tokens", "40"),
            ("prefix_copied_tokens", "8"),
            ("prefix_kept_tokens", "32"),
            ("prefix_saved_bytes", "4194304"),
        ] {
            assert_eq!(exact(name, q), value, "{name}");
        }
        // A whole number of pages wastes nothing.
        assert_eq!(exact("paged_waste_bytes", "model=llama-3-8b&ctx=1024"), "0");
    }

    #[test]
    fn past_the_longest_context_and_windows() {
        let (state, model) = super::super::tests::at("model=llama-3-8b&ctx=10000");
        assert_eq!(super::figure("contiguous_waste_bytes", &state, &model), None, "no reservation is that long");
        // Gemma 3 27B's 1,024-token windows touch at most ceil((1,024 + 15) / 16) = 65 pages.
        assert_eq!(exact("window_max_pages", "model=gemma-3-27b"), "65");
        let (state, model) = super::super::tests::at("model=llama-3-8b");
        assert_eq!(super::figure("window_max_pages", &state, &model), None, "no sliding layer");
    }
}
