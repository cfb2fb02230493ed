//! Live figures: the numbers a lesson's text names as `{placeholder}`, computed by the model
//! arithmetic for the step's configuration (and the reader's changes), so text and code cannot drift.
//! The explorer's own numbers (one head step by step, the √d scale, how W_O mixes the heads) live in
//! [`explorer`]; how a figure is written, in [`format`].

mod explorer;
mod written;

pub use written::Figure;

use crate::attention::layer_inputs::LayerLayout;
use crate::model::kv_cache::ContextFit;
use crate::model::variants::mha_baseline;
use crate::model::{LayerKind, Model, kv_bytes_per_token, kv_total_bytes, max_context_tokens, model_prefill_flops};
use crate::views::registry::Settings;
use sources::model_window;

use written::{Unit, number, whole};

mod backward;
mod bench;
mod cost;
mod evict;
mod memory;
mod mla_forms;
mod paging;
mod positions;
mod quant;
mod sharing;
mod sources;
mod tiles;
mod trained;
mod trained_variants;

/// Every placeholder a lesson may use: its name, what it means, and its unit.
pub const FIGURES: &[(&str, &str)] = &[
    ("n_layers", "layers of the model"),
    ("n_q_heads", "query heads per layer"),
    ("n_kv_heads", "KV heads per layer (of the non-global layers when they differ)"),
    ("head_dim", "width of one head"),
    ("group_size", "query heads that share one KV head"),
    ("d_model", "width of the residual stream"),
    ("dtype_bytes", "bytes per cached element at the chosen dtype (may be fractional)"),
    ("kv_bytes_per_token", "KV-cache bytes one token adds, all layers"),
    ("kv_total_bytes", "KV-cache bytes at the chosen context"),
    ("ctx_tokens", "the chosen context length"),
    ("mha_kv_bytes_per_token", "bytes per token if every layer were plain MHA (one KV head per query head)"),
    ("kv_saving_factor", "MHA's bytes per token divided by this model's"),
    ("budget_bytes", "the GPU memory budget"),
    ("max_context_tokens", "the longest context whose cache fits the budget"),
    ("global_layers", "layers with global attention"),
    ("windowed_layers", "layers with sliding-window or chunked attention"),
    ("model_window_tokens", "the window of the model's sliding layers"),
    ("prefill_flops", "FLOPs of a prefill of the chosen context, all layers"),
    ("token_count", "tokens in the explorer's text"),
    ("attended_pairs", "query-key pairs the explorer's mask lets through, per head"),
    ("softmax_scale", "1/√d, the factor the scores are multiplied by (d: the head width of the chosen layer)"),
    ("window_tokens", "the explorer's sliding window"),
    ("tile_rows", "(query, head) rows per tile of the tiled kernel on a GPU, for the explorer's head"),
    ("tile_keys", "keys per tile of the tiled kernel on a GPU"),
    ("tile_kv_bytes", "workgroup memory of one K and one V tile on a GPU"),
    ("head_scores_bytes", "one head's whole score matrix in f32, as the naive kernel stores it"),
    ("query_tiles", "tiles of query rows per KV head in the explorer's head"),
    ("key_tile_columns", "tiles of keys across the explorer's head"),
    ("tiles_in_grid", "tiles a mask-blind kernel would visit for the explorer's head"),
    ("tiles_visited", "tiles the tiled kernel visits under the explorer's mask"),
    ("tiles_skipped", "tiles the mask lets the kernel skip without loading them"),
    ("tiles_interior", "visited tiles every row sees whole (no per-element mask test)"),
    ("tiles_edge", "visited tiles the kernel tests element by element (partly masked)"),
    ("page_tokens", "tokens per page of a paged KV cache"),
    ("page_bytes", "bytes of one page's tokens over all layers"),
    ("ctx_pages", "pages a request of the chosen context fills in a layer that keeps every token"),
    ("last_page_free_tokens", "unused token slots in that request's last page"),
    ("paged_waste_bytes", "bytes those unused slots reserve, all layers"),
    ("model_max_tokens", "the model's longest context (max_position_embeddings)"),
    ("contiguous_bytes", "a cache reserved for the longest context, as one contiguous allocation"),
    ("contiguous_waste_bytes", "what that reservation holds beyond the chosen context"),
    ("prompt_tokens", "the decode demo's shared prompt"),
    ("prefix_shared_tokens", "prompt tokens request B reads from A's pages when it arrives"),
    ("prefix_copied_tokens", "prompt tokens B copies when it first writes into the shared, partly filled page"),
    ("prefix_kept_tokens", "prompt tokens that stay shared after that copy (the full pages)"),
    ("prefix_saved_bytes", "bytes the shared prompt pages store once instead of twice"),
    ("window_max_pages", "the most pages a sliding layer holds for one request"),
    ("bench_tokens", "n of the benchmark's case"),
    ("bench_head_dim", "d of the benchmark's case"),
    ("bench_pairs", "query-key pairs one head of the benchmark's case scores"),
    ("bench_mask_fraction", "those pairs as a fraction of all n × n"),
    ("bench_head_flops", "FLOPs of one head of the case: 4·d per pair"),
    ("bench_mha_heads", "query heads of the benchmark's multi-head case"),
    ("bench_gqa_heads", "query heads of the benchmark's grouped-query case"),
    ("bench_kv_heads", "KV heads of both benchmark cases"),
    ("bench_mha_flops", "FLOPs of the multi-head case"),
    ("bench_gqa_flops", "FLOPs of the grouped-query case"),
    ("bench_naive_scores_bytes", "the score matrix the naive kernel stores for the multi-head case"),
    ("weights_bytes", "the model's weights at the budget's weight dtype"),
    ("cache_room_bytes", "what the budget leaves for the cache once the weights are in"),
    ("model_bytes_at_ctx", "weights (when counted) plus the cache at the chosen context"),
    ("mla_latent_dims", "MLA: width of the latent each token caches per layer (kv_lora_rank)"),
    ("mla_rope_dims", "MLA: width of the shared RoPE key each token caches per layer"),
    ("mla_cached_dims", "MLA: numbers each token caches per layer (latent plus RoPE key)"),
    ("mha_cached_dims", "numbers per token per layer plain MHA would cache (K and V of every query head)"),
    ("layer_head_dim", "width of one head in the explorer's layer (a model's global and local layers may differ)"),
    ("key_count", "tokens the explorer's queries read: the `src` text under cross-attention, else the text"),
    ("step_row", "the step-through's last query row, which the step figures read (from 0)"),
    ("step_visible_keys", "keys that row may see under the mask"),
    ("step_top_key", "the key that row gives the largest probability (from 0)"),
    ("step_top_score", "that key's raw score q·k"),
    ("step_top_scaled", "that score times 1/√d"),
    ("step_top_prob", "that key's attention probability"),
    ("row_entropy_scaled", "entropy of that row's probabilities (scores times 1/√d), in bits"),
    ("row_entropy_unscaled", "entropy of the softmax of that row's raw scores (no 1/√d), in bits"),
    ("entropy_max", "the largest entropy that row could have, log2 of its visible keys, in bits"),
    (
        "random_score_spread",
        "√d: the spread of q·k for random q, k with unit-variance entries, at the layer's head width",
    ),
    ("concat_width", "width of the concatenated head outputs that W_O reads: query heads × head width"),
    ("mix_row", "the query token the head-mixing panel reads (`mix`, else the last token; from 0)"),
    ("mix_top_head", "the head that adds the largest vector to that token's attention output"),
    ("mix_top_share", "that head's share of the heads' summed vector norms, in percent"),
    ("chosen_layer", "the chosen layer (counted from 0)"),
    ("layer_kv_heads", "KV heads of the chosen layer (Gemma 4's global layers have their own count)"),
    ("max_positions", "the model's longest context (max_position_embeddings)"),
    ("rope_theta", "RoPE base θ of the chosen layer"),
    ("rotary_dims", "dimensions of each head of the chosen layer that RoPE rotates"),
    ("rotary_fraction", "share of each head of the chosen layer that RoPE rotates (partial_rotary_factor)"),
    ("rotary_pairs", "rotating pairs of dimensions of the chosen layer (half its rotary dims)"),
    ("rope_linear_factor", "the chosen layer's linear RoPE scaling: positions are divided by it (1: none)"),
    ("rope_shortest_wavelength", "tokens per full turn of the chosen layer's fastest rotating pair"),
    ("rope_longest_wavelength", "tokens per full turn of the chosen layer's slowest rotating pair"),
    ("stacked_layers", "layers from the first to the chosen one"),
    (
        "stacked_reach_tokens",
        "how far back information can reach a token through layers 0 to the chosen one (none with a global layer among them)",
    ),
    (
        "all_global_kv_total_bytes",
        "KV-cache bytes at the chosen context if every layer attended globally (each keeping its own KV heads and width)",
    ),
    ("window_saving_factor", "the all-global cache divided by this model's, at the chosen context"),
    ("k_eq_v_layers", "layers whose keys and values are one tensor (K = V)"),
    ("separate_kv_bytes_per_token", "bytes per token if every layer kept K and V as separate tensors"),
    ("separate_kv_total_bytes", "KV-cache bytes at the chosen context with K and V separate in every layer"),
    ("keqv_saved_bytes", "KV-cache bytes at the chosen context that K = V saves"),
    ("kv_sharing_layers", "layers that read another layer's KV cache instead of storing their own"),
    ("kv_storing_layers", "layers that compute and store their own KV cache"),
    ("unshared_kv_bytes_per_token", "bytes per token if every layer stored its own cache"),
    ("unshared_kv_total_bytes", "KV-cache bytes at the chosen context if every layer stored its own cache"),
    ("sharing_saving_factor", "the unshared cache divided by this model's, at the chosen context"),
    ("sequences_at_ctx", "sequences of the chosen context whose caches fit the room the weights leave, at once"),
    ("attn_weights_per_layer", "attention matrix weights (Q, K, V, O) of the chosen layer"),
    ("core_crossover_tokens", "context from which a global causal layer's core costs as much as its projections"),
    ("prefill_projection_flops", "FLOPs of a prefill's Q, K, V, O projections at the chosen context, all layers"),
    ("prefill_core_flops", "FLOPs of a prefill's attention core (QKᵀ and PV) at the chosen context, all layers"),
    ("prefill_bytes", "bytes a prefill moves at least: every weight read once, the cache written once"),
    ("prefill_intensity", "FLOPs per byte of a prefill of the chosen context"),
    ("decode_projection_flops", "FLOPs of one decoded token's projections, all layers"),
    ("decode_core_flops", "FLOPs of one decoded token's attention core at the chosen context, all layers"),
    ("decode_flops_per_token", "FLOPs of one decoded token at the chosen context (projections, core, FFN)"),
    ("decode_weight_bytes", "bytes of the weights one decoded token reads"),
    ("decode_kv_read_bytes", "bytes of KV cache one decoded token reads at the chosen context"),
    (
        "decode_bytes_per_token",
        "bytes one decoded token reads: weights, KV cache and any recurrent state (read and written back)",
    ),
    ("decode_intensity", "FLOPs per byte of one decoded token"),
    ("decode_core_intensity", "FLOPs of the decode attention core per byte of cache it reads"),
    ("all_weight_bytes", "every weight of the model at the chosen dtype: layers, embedding table, output layer, norms"),
    (
        "output_layer_bytes",
        "the output layer (vocabulary × d_model) at the chosen dtype, which every decoded token reads",
    ),
    (
        "outside_layers_weight_bytes",
        "weights the layers' matrices leave out, at the chosen dtype: embedding table, output layer, norms",
    ),
    ("context_fits_times", "the longest context that fits the budget, as a multiple of the model's own context"),
    ("layers_after_last_global", "layers after the last global layer, which the schedule's repeating unit leaves over"),
    ("even_head_share", "each head's share, in percent, if every head of the layer added a vector of the same length"),
    ("trained_best_induction", "the trained model's best induction score, on repeated random sequences after training"),
    ("previous_label_threshold", "the previous-token score a head needs for its label"),
    ("induction_label_threshold", "the induction score a head needs for its label"),
    ("local_label_threshold", "the local score a head needs for its label"),
    ("sink_label_threshold", "the sink score a head needs for its label"),
    ("local_keys", "the most recent keys (the query's own included) a head's local score counts"),
    (
        "trained_induction_heads",
        "heads of the trained model that reached the induction label on repeated random sequences after training",
    ),
    ("quant_bytes_per_token", "cache bytes per token of the trained model at the chosen scheme, scales included"),
    ("quant_full_bytes_per_token", "the trained model's cache bytes per token in f32"),
    ("quant_fixed_bytes", "the chosen scheme's bytes that do not grow with the context"),
    ("quant_vectors_per_token", "K and V vectors one token adds to the trained model's cache, all layers"),
    ("quant_group", "the memory view's group size G"),
    ("quant_recent", "the recent tokens KIVI keeps in full precision"),
    ("quant_saving_factor", "f32 bytes per token divided by the chosen scheme's"),
    ("jacobian_keys", "keys the backward view's row sees"),
    ("jacobian_top_prob", "the backward view's row: its largest probability at the chosen score scale"),
    ("jacobian_top_diagonal", "that key's diagonal entry of the softmax Jacobian, p (1 − p)"),
    ("jacobian_trace", "the trace of the row's softmax Jacobian, 1 − Σ p²"),
    ("jacobian_flat_trace", "the trace of a flat row over the same keys, 1 − 1/n: the largest a row of them has"),
    ("backward_forward_flops", "FLOPs of the explorer's layer's attention forward: Q·Kᵀ and P·V, 4 d a visible pair"),
    ("backward_flops", "FLOPs of its backward by the FlashAttention convention: five products, 2.5 times the forward"),
    ("backward_probs_bytes", "bytes of the explorer's layer's probabilities in f32, were they stored for the backward"),
    ("backward_lse_bytes", "bytes of the log-sum-exp per row the forward keeps instead, in f32"),
    ("mla_key_width", "the MLA view's one shared key in the absorbed form: latent plus RoPE key"),
    ("mla_head_width", "the MLA view's per-head query and key width in the expanded form"),
    ("mla_fold_flops", "FLOPs of folding W_UK into every head's query for one decoded token"),
    ("mla_decode_flops_expanded", "FLOPs of one decoded token, expanded form, at the KV view's context"),
    ("mla_decode_flops_absorbed", "FLOPs of one decoded token, absorbed form, at the KV view's context"),
    ("mla_decode_bytes_expanded", "bytes one decoded token moves, expanded form"),
    ("mla_decode_bytes_absorbed", "bytes one decoded token moves, absorbed form"),
    ("mla_prefill_flops_expanded", "FLOPs of a prefill of the KV view's context, expanded form"),
    ("mla_prefill_flops_absorbed", "FLOPs of a prefill of the KV view's context, absorbed form"),
    ("mla_decode_flops_saving", "a decoded token's expanded FLOPs divided by its absorbed FLOPs"),
    ("mla_prefill_flops_ratio", "a prefill's absorbed FLOPs divided by its expanded FLOPs"),
    ("evict_keep", "K, the tokens each layer's evicting cache keeps"),
    ("evict_sinks", "the first tokens StreamingLLM keeps as attention sinks at K"),
    ("evict_sink_recent", "the recent tokens StreamingLLM keeps beside its sinks at K"),
    ("evict_heavy", "the older tokens H2O keeps by accumulated attention at K"),
    ("evict_heavy_recent", "the recent tokens H2O keeps at K"),
    ("evict_observation", "SnapKV's observation window at K: the latest queries whose attention scores the keys"),
    ("evict_bytes_per_kept_token", "bytes one kept token costs the trained model's cache, all layers, f32"),
    ("evict_bytes_full_cache", "bytes the trained model's attention reads a step once every layer's cache holds K"),
    ("evict_sliding_window", "the window of the trained model's sliding layers"),
    ("variant_loss_mha", "mean held-out loss of the MHA variant trained here, over its seeds, in nats per token"),
    ("variant_loss_gqa", "the same for the GQA variant (the shipped model's layout)"),
    ("variant_loss_mqa", "the same for the MQA variant"),
    ("variant_loss_mla", "the same for the MLA variant"),
    ("variant_spread_mha", "highest minus lowest held-out loss of the MHA variant's seeds"),
    ("variant_spread_gqa", "the same for the GQA variant"),
    ("variant_spread_mqa", "the same for the MQA variant"),
    ("variant_spread_mla", "the same for the MLA variant"),
    ("variant_delta_gqa", "the GQA variant's mean loss minus MHA's"),
    ("variant_delta_mqa", "the MQA variant's mean loss minus MHA's"),
    ("variant_delta_mla", "the MLA variant's mean loss minus MHA's"),
    ("variant_kv_bytes_mha", "KV bytes per token of the MHA variant, f16, all layers"),
    ("variant_kv_bytes_gqa", "the same for the GQA variant"),
    ("variant_kv_bytes_mqa", "the same for the MQA variant"),
    ("variant_kv_bytes_mla", "the same for the MLA variant (its latent and RoPE key)"),
    ("variant_seeds", "seeds each trained variant ran (the fewest, if they differ)"),
    ("variant_steps", "training steps of each variant's run"),
];

/// Figures about attention heads, their geometry or their cost: none applies to a model without a
/// softmax attention layer.
const NEEDS_ATTENTION: &[&str] = &[
    "n_q_heads",
    "n_kv_heads",
    "head_dim",
    "group_size",
    "mha_kv_bytes_per_token",
    "kv_saving_factor",
    "softmax_scale",
    "random_score_spread",
    "concat_width",
    "layer_kv_heads",
    "layer_head_dim",
    "mha_cached_dims",
    "mla_latent_dims",
    "mla_rope_dims",
    "mla_cached_dims",
    "rope_theta",
    "rotary_dims",
    "rotary_fraction",
    "rotary_pairs",
    "rope_linear_factor",
    "rope_shortest_wavelength",
    "rope_longest_wavelength",
    "attn_weights_per_layer",
    "core_crossover_tokens",
    "decode_core_intensity",
    "even_head_share",
    "jacobian_keys",
    "jacobian_top_prob",
    "jacobian_top_diagonal",
    "jacobian_trace",
    "jacobian_flat_trace",
    "backward_forward_flops",
    "backward_flops",
    "backward_probs_bytes",
    "backward_lse_bytes",
];

/// Whether `name` is a known placeholder.
pub fn is_known(name: &str) -> bool {
    FIGURES.iter().any(|(n, _)| *n == name)
}

/// The figure `name` for this state and its resolved model; `None` for an unknown name or a figure
/// that does not apply (no sliding layer, sizes past what can be represented).
pub fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    if !model.has_attention() && NEEDS_ATTENTION.contains(&name) {
        // A pure state-space model's head counts and widths are placeholders nothing uses.
        return None;
    }
    let kv = &state.kv;
    let (unit, value): (Unit, u128) = match name {
        "n_layers" => (Unit::Count, model.n_layers().into()),
        "n_q_heads" => (Unit::Count, model.n_q_heads.into()),
        "n_kv_heads" => (Unit::Count, model.attn.n_kv_heads.into()),
        "head_dim" => (Unit::Count, model.attn.head_dim.into()),
        "group_size" => (Unit::Count, (model.n_q_heads / model.attn.n_kv_heads.max(1)).into()),
        "d_model" => (Unit::Count, model.d_model.into()),
        "dtype_bytes" => return Some(number(f64::from(kv.dtype.bits()) / 8.0, Unit::Number)),
        "kv_bytes_per_token" => (Unit::Bytes, kv_bytes_per_token(model, kv.dtype).ok()?),
        "kv_total_bytes" => (Unit::Bytes, kv_total_bytes(model, kv.ctx_tokens, kv.dtype).ok()?),
        "ctx_tokens" => (Unit::Tokens, kv.ctx_tokens.into()),
        "mha_kv_bytes_per_token" => (Unit::Bytes, kv_bytes_per_token(&mha_baseline(model), kv.dtype).ok()?),
        "kv_saving_factor" => {
            let mha = kv_bytes_per_token(&mha_baseline(model), kv.dtype).ok()?;
            let own = kv_bytes_per_token(model, kv.dtype).ok().filter(|&b| b > 0)?;
            return Some(number(mha as f64 / own as f64, Unit::Times));
        }
        "budget_bytes" => (Unit::Bytes, kv.budget_bytes.into()),
        "max_context_tokens" => match max_context_tokens(model, kv.dtype, kv.budget_bytes.into(), kv.weights) {
            ContextFit::Tokens(n) => (Unit::Tokens, n.into()),
            _ => return None,
        },
        "global_layers" => (Unit::Count, count_layers(model, LayerKind::is_global).into()),
        "windowed_layers" => (Unit::Count, count_layers(model, |k| k.window_tokens().is_some()).into()),
        "model_window_tokens" => (Unit::Tokens, model_window(model)?.into()),
        "prefill_flops" => (Unit::Flops, model_prefill_flops(model, kv.ctx_tokens).total()),
        "token_count" => (Unit::Tokens, sources::explorer(state, model)?.n_q().into()),
        "key_count" => (Unit::Tokens, sources::explorer(state, model)?.n_kv().into()),
        "attended_pairs" => {
            let request = sources::explorer(state, model)?;
            match request.kv_tokens {
                // Cross-attention: every query reads every key of the other text.
                Some(_) => (Unit::Count, u128::from(request.n_q()) * u128::from(request.n_kv())),
                None => (Unit::Count, request.mask.attended_pairs(request.n_q().into())),
            }
        }
        "softmax_scale" => {
            let d = LayerLayout::of(model, state.model.layer).head_dim;
            return Some(number(1.0 / f64::from(d.max(1)).sqrt(), Unit::Number));
        }
        "window_tokens" => (Unit::Tokens, state.input.window_tokens().into()),
        "layers_after_last_global" => {
            let layers = model.schedule.layers();
            (Unit::Count, (layers.len() - 1 - layers.iter().rposition(|k| k.is_global())?) as u128)
        }
        "even_head_share" => return Some(number(100.0 / f64::from(model.n_q_heads.max(1)), Unit::Percent)),
        _ => return topic_figure(name, state, model),
    };
    Some(whole(value, unit))
}

fn count_layers(model: &Model, keep: impl Fn(LayerKind) -> bool) -> u32 {
    model.schedule.layers().iter().filter(|&&k| keep(k)).count() as u32
}

/// The figures of one topic each, in their own files.
fn topic_figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    explorer::figure(name, state, model)
        .or_else(|| tiles::figure(name, state, model))
        .or_else(|| paging::figure(name, state, model))
        .or_else(|| bench::figure(name, state, model))
        .or_else(|| memory::figure(name, state, model))
        .or_else(|| positions::figure(name, state, model))
        .or_else(|| sharing::figure(name, state, model))
        .or_else(|| cost::figure(name, state, model))
        .or_else(|| quant::figure(name, state))
        .or_else(|| backward::figure(name, state, model))
        .or_else(|| mla_forms::figure(name, state))
        .or_else(|| evict::figure(name, state))
        .or_else(|| trained::figure(name))
        .or_else(|| trained_variants::figure(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn at(query: &str) -> (Settings, Model) {
        let (state, notices) = Settings::from_query(query);
        assert!(notices.is_empty(), "{notices:?}");
        let model = state.resolved_model();
        (state, model)
    }

    pub(super) fn exact(name: &str, query: &str) -> String {
        let (state, model) = at(query);
        figure(name, &state, &model).unwrap_or_else(|| panic!("{name} at {query}")).exact
    }

    pub(super) fn text(name: &str, query: &str) -> String {
        let (state, model) = at(query);
        figure(name, &state, &model).unwrap_or_else(|| panic!("{name} at {query}")).text
    }

    #[test]
    fn llama_3_8b_by_hand() {
        let q = "model=llama-3-8b&ctx=8192&dtype=fp16";
        // 32 layers, 32 query heads over 8 KV heads of 128: 2 (K, V) x 32 x 8 x 128 x 2 bytes = 131,072.
        assert_eq!(exact("kv_bytes_per_token", q), "131072");
        assert_eq!(exact("kv_total_bytes", q), (131_072u64 * 8192).to_string());
        assert_eq!(exact("mha_kv_bytes_per_token", q), (2u64 * 32 * 32 * 128 * 2).to_string());
        assert_eq!(exact("kv_saving_factor", q), "4");
        assert_eq!(exact("group_size", q), "4");
        assert_eq!(exact("dtype_bytes", q), "2");
        assert_eq!(exact("dtype_bytes", "model=llama-3-8b&dtype=int4"), "0.5");
        assert_eq!(exact("softmax_scale", q), "0.0884"); // 1/sqrt(128) = 0.08839
        // Gemma 4 E4B's global layers (layer 5) have heads of 512: 1/sqrt(512) = 0.04419; its local ones 256.
        assert_eq!(exact("softmax_scale", "model=gemma-4-e4b&layer=5"), "0.0442");
        assert_eq!(exact("softmax_scale", "model=gemma-4-e4b&layer=0"), "0.0625");
        assert_eq!(exact("global_layers", q), "32");
        assert_eq!(exact("windowed_layers", q), "0");
        let (state, model) = at(q);
        assert_eq!(figure("model_window_tokens", &state, &model), None, "no sliding layer");
        assert_eq!(
            figure("kv_bytes_per_token", &state, &model).unwrap().text,
            "131,072 bytes = 131.07 KB (128.00 KiB)"
        );
    }

    #[test]
    fn budget_and_longest_context_by_hand() {
        // 24 GB for the cache alone: floor(24e9 / 131072) = 183,105 tokens.
        let q = "model=llama-3-8b&budget=24";
        assert_eq!(exact("budget_bytes", q), "24000000000");
        assert_eq!(exact("max_context_tokens", q), "183105");
    }

    #[test]
    fn gemma_3_layers_and_window() {
        // Gemma 3 27B: 62 layers, every sixth global (10 global, 52 sliding with a 1024-token window).
        let q = "model=gemma-3-27b";
        assert_eq!(exact("n_layers", q), "62");
        assert_eq!(exact("global_layers", q), "10");
        assert_eq!(exact("windowed_layers", q), "52");
        assert_eq!(exact("model_window_tokens", q), "1024");
        // Globals at layers 5, 11, ..., 59 (every sixth); layers 60 and 61 come after the last one.
        assert_eq!(exact("layers_after_last_global", q), "2");
        assert_eq!(exact("layers_after_last_global", "model=llama-3-8b"), "0");
        // Mistral 7B v0.1 has no global layer.
        let (state, model) = at("model=mistral-7b");
        assert_eq!(figure("layers_after_last_global", &state, &model), None);
    }

    #[test]
    fn an_even_share_of_the_heads() {
        // GPT-2 small has 12 heads: 100 / 12 = 8.3333 percent each.
        assert_eq!(exact("even_head_share", "model=gpt2-small"), "8.3333");
        assert_eq!(text("even_head_share", "model=gpt2-small"), "8.3%");
    }

    #[test]
    fn explorer_tokens_and_pairs() {
        // "a b c d e" is five word tokens; causal pairs 1+2+3+4+5 = 15; a window of 2: 1+2+2+2+2 = 9.
        assert_eq!(exact("token_count", "text=a b c d e"), "5");
        assert_eq!(exact("attended_pairs", "text=a b c d e"), "15");
        assert_eq!(exact("attended_pairs", "text=a b c d e&mask=sliding&window=2"), "9");
        assert_eq!(exact("attended_pairs", "text=a b c d e&mask=full"), "25");
        assert_eq!(exact("window_tokens", "mask=sliding&window=2"), "2");
    }

    #[test]
    fn every_listed_figure_is_computed_and_unknown_names_are_not() {
        // Some figures apply only to some models (MLA) or settings (weights in the budget).
        let states = ["model=gemma-3-27b", "model=deepseek-v3&weights=fp8&budget=1000"].map(at);
        for (name, _) in FIGURES.iter() {
            assert!(states.iter().any(|(state, model)| figure(name, state, model).is_some()), "{name}");
        }
        let (state, model) = &states[0];
        let (state, model) = (state.clone(), model.clone());
        assert_eq!(figure("kv_total_bytez", &state, &model), None);
        assert!(!is_known("kv_total_bytez"));
    }

    #[test]
    fn a_hybrid_counts_only_its_attention_layers_and_no_figure_panics() {
        // Jamba-like: 4 global attention layers among 32; the 28 Mamba layers are neither windowed nor
        // sharing a cache.
        let cfg = "cfg=L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144";
        let (state, model) = at(cfg);
        for (name, _) in FIGURES.iter() {
            figure(name, &state, &model);
        }
        assert_eq!(exact("global_layers", cfg), "4");
        assert_eq!(exact("windowed_layers", cfg), "0");
        assert_eq!(exact("kv_sharing_layers", cfg), "0");
        assert_eq!(exact("kv_storing_layers", cfg), "4");
        // Layer 0, a Mamba layer, has no attention weights.
        assert_eq!(exact("attn_weights_per_layer", &format!("{cfg}&layer=0")), "0");
    }

    #[test]
    fn a_model_without_attention_has_no_head_figures() {
        // A pure Mamba's head count, width and crossover would be read off its placeholder geometry.
        let cfg = "cfg=L64.d2560.h1.kv1.hd64.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048";
        let (state, model) = at(cfg);
        for name in NEEDS_ATTENTION {
            assert!(is_known(name), "{name}");
            assert_eq!(figure(name, &state, &model), None, "{name}");
        }
        assert_eq!(exact("n_layers", cfg), "64");
        assert_eq!(exact("kv_bytes_per_token", cfg), "0");
    }
}
