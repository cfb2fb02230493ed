//! Whether the chosen context passes the model's own: the KV and compare views compute a cache for any
//! `ctx`, but a model was trained (and is served) up to its `max_position_embeddings` only, so past it
//! they say so instead of showing the figures as if the model could read that far.

use crate::model::Model;
use crate::model::units::format_thousands;

/// The notice both views show when `ctx_tokens` passes `model`'s context (`data-testid="ctx-past-context"`),
/// `None` within it or when the model states no context (0).
pub fn past_context_notice(model: &Model, ctx_tokens: u64) -> Option<String> {
    let own = model.max_position_embeddings;
    (own > 0 && ctx_tokens > own).then(|| {
        format!(
            "{} tokens is past {}'s context of {} tokens (max_position_embeddings): the figures are the arithmetic \
             of its layout at that length, but the model does not read that far.",
            format_thousands(ctx_tokens.into()),
            model.name,
            format_thousands(own.into())
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    #[test]
    fn past_the_models_context_and_only_past_it() {
        // Llama 3 8B reads 8,192 tokens; Llama 3.1 8B, the same layout, 131,072.
        let llama3 = preset("llama-3-8b").unwrap();
        assert_eq!(past_context_notice(llama3, 8192), None, "its whole context is fine");
        assert_eq!(
            past_context_notice(llama3, 8193).as_deref(),
            Some(
                "8,193 tokens is past Llama 3 8B's context of 8,192 tokens (max_position_embeddings): the figures \
                 are the arithmetic of its layout at that length, but the model does not read that far."
            )
        );
        assert!(past_context_notice(llama3, 131_072).unwrap().starts_with("131,072 tokens is past Llama 3 8B's"));
        assert_eq!(past_context_notice(preset("llama-3.1-8b").unwrap(), 131_072), None);
        assert!(past_context_notice(preset("llama-3.1-8b").unwrap(), 131_073).is_some());
        // A model that states no context is never flagged.
        let mut unknown = llama3.clone();
        unknown.max_position_embeddings = 0;
        assert_eq!(past_context_notice(&unknown, 100_000_000), None);
    }
}
