//! The script of the decode animation, as pure data: which layer shapes run on the GPU, how long the
//! two requests run, in which order tokens are appended, and the deterministic K/V/Q values.
//!
//! Request A reads a prompt of [`PROMPT_TOKENS`] tokens and decodes; once it is [`B_JOINS_AFTER`]
//! tokens long, request B arrives with the *same prompt*: it takes A's full prompt pages (prefix
//! caching), recomputes only the prompt's tail in a partly filled page, and then the two decode in
//! turns. Every appended token runs the decode kernel once per layer kind against that request's
//! growing K/V buffer. The values are seeded noise (no trained weights exist here); the shapes,
//! masks and buffer sizes are the model's.

use super::config::Model;
use super::paging::PagedCache;
use super::schedule::LayerKind;

/// Tokens of the shared prompt (2 full pages of 16 and a partial one, so the tail is recomputed).
pub const PROMPT_TOKENS: u64 = 40;
/// Request B arrives when A has this many tokens.
pub const B_JOINS_AFTER: u64 = PROMPT_TOKENS + 48;
/// Shortest run per request.
pub const MIN_RUN_TOKENS: u64 = 256;
/// Longest run per request (a 4,096-token window plus 6 pages, so Mistral's window still recycles).
pub const MAX_RUN_TOKENS: u64 = 4096 + 96;

/// One layer kind as the demo runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoLayer {
    pub kind: LayerKind,
    pub h_q: u32,
    pub h_kv: u32,
    /// The model's cached width per KV head (MLA: latent + RoPE key, as one absorbed "head").
    pub model_dim: u32,
    /// The width the kernel runs: `model_dim`, capped at the kernel's maximum.
    pub run_dim: u32,
    /// K and V are one tensor: the same rows are written to both buffers.
    pub k_eq_v: bool,
}

impl DemoLayer {
    /// Whether the kernel runs a narrower head than the model has.
    pub fn is_narrowed(&self) -> bool {
        self.run_dim < self.model_dim
    }

    /// The softmax scale of the heads the kernel runs: `1 / sqrt(run_dim)`.
    pub fn scale(&self) -> f32 {
        1.0 / (self.run_dim as f32).sqrt()
    }
}

/// One [`DemoLayer`] per layer kind that stores a cache, in schedule order. MLA runs in its absorbed
/// decode form: one shared latent "KV head" of `kv_lora_rank + qk_rope_head_dim` dims read by every
/// query head (K = V).
pub fn demo_layers(model: &Model, max_head_dim: u32) -> Vec<DemoLayer> {
    let stores = model.kv_storing_layers();
    let storing_kinds: Vec<LayerKind> = model
        .schedule
        .counts()
        .into_iter()
        .map(|c| c.kind)
        .filter(|&k| model.schedule.layers().iter().zip(&stores).any(|(&lk, &s)| lk == k && s))
        .collect();
    storing_kinds
        .into_iter()
        .map(|kind| {
            let (h_kv, model_dim, k_eq_v) = match model.mla {
                Some(m) => (1, m.kv_lora_rank + m.qk_rope_head_dim, true),
                None => {
                    let g = model.geometry(kind);
                    (g.n_kv_heads, g.head_dim, g.k_eq_v)
                }
            };
            DemoLayer {
                kind,
                h_q: model.n_q_heads,
                h_kv,
                model_dim,
                run_dim: model_dim.min(max_head_dim).max(1),
                k_eq_v,
            }
        })
        .collect()
}

/// Tokens each request runs to: past the largest window by 6 pages, so recycling shows, within
/// [`MIN_RUN_TOKENS`] ..= [`MAX_RUN_TOKENS`].
pub fn run_tokens(model: &Model) -> u64 {
    let largest = model
        .schedule
        .counts()
        .iter()
        .filter_map(|c| c.kind.window_tokens())
        .filter(|&w| w + 96 <= MAX_RUN_TOKENS)
        .max()
        .unwrap_or(0);
    (largest + 96).clamp(MIN_RUN_TOKENS, MAX_RUN_TOKENS)
}

/// Prompt tokens request B takes over from A when it arrives (A then has [`B_JOINS_AFTER`] tokens):
/// A's full prompt pages, as far as every layer kind still holds them; the same pages the running
/// demo shares.
pub fn shared_prompt_tokens(model: &Model) -> u64 {
    let kinds = demo_layers(model, u32::MAX).into_iter().map(|l| l.kind);
    kinds
        .map(|kind| {
            let mut cache = PagedCache::new(kind);
            let a = cache.add_sequence();
            for _ in 0..B_JOINS_AFTER {
                cache.append(a);
            }
            cache.shareable_tokens(a, PROMPT_TOKENS)
        })
        .min()
        .unwrap_or(0)
}

/// Prompt tokens B reads from A's pages when it arrives, the same in every lane: as many as every
/// lane's books can share ([`PagedCache::fork_shared`]: the whole prompt, its partly filled page
/// included, where each still holds it). What the running demo forks with.
pub fn shareable_on_arrival<'a>(lanes: impl IntoIterator<Item = &'a PagedCache>, from: usize) -> u64 {
    lanes.into_iter().map(|c| c.clone().fork_shared(from, PROMPT_TOKENS).1).min().unwrap_or(0)
}

/// The shared prompt in the demo's pool, computed with the books that drive it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptSharing {
    /// Tokens B reads from A's pages when it arrives (none computed or copied for them).
    pub on_arrival: u64,
    /// Prompt tokens B copies when it first writes into the shared, partly filled page.
    pub copied: u64,
    /// Tokens stored once for both requests after that copy: the prompt's full pages.
    pub kept_shared: u64,
}

/// [`PromptSharing`] of `model`'s demo: every layer kind's books run A to [`B_JOINS_AFTER`], fork
/// B, and let B write its first token.
pub fn prompt_sharing(model: &Model) -> PromptSharing {
    let mut caches: Vec<PagedCache> = demo_layers(model, u32::MAX)
        .into_iter()
        .map(|l| {
            let mut cache = PagedCache::new(l.kind);
            let a = cache.add_sequence();
            for _ in 0..B_JOINS_AFTER {
                cache.append(a);
            }
            cache
        })
        .collect();
    let on_arrival = shareable_on_arrival(&caches, 0);
    let (mut copied, mut kept_shared) = (0, u64::MAX);
    for cache in &mut caches {
        let (b, _) = cache.fork_shared(0, on_arrival);
        if let Ok(write) = cache.write(b) {
            copied = copied.max(if write.copy_from.is_some() { write.slot } else { 0 });
        }
        kept_shared = kept_shared.min(cache.deduplicated_tokens());
    }
    PromptSharing { on_arrival, copied, kept_shared: kept_shared.min(on_arrival) }
}

/// The next thing the animation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Append one token to request A (0) and run the decode kernel.
    AppendA,
    /// Request B arrives sharing A's prompt.
    ForkB,
    /// Append one token to request B (1) and run the decode kernel.
    AppendB,
    Done,
}

/// The action after the requests have `a_tokens` and `b_tokens` (`None`: B has not arrived).
/// A first; B arrives at [`B_JOINS_AFTER`]; then B catches up on its prompt and the two alternate.
pub fn next_action(a_tokens: u64, b_tokens: Option<u64>, run: u64) -> Action {
    match b_tokens {
        None if a_tokens < B_JOINS_AFTER.min(run) => Action::AppendA,
        None => Action::ForkB,
        Some(b) if b < PROMPT_TOKENS => Action::AppendB,
        Some(b) => {
            let a_left = a_tokens < run;
            let b_left = b < run;
            match (a_left, b_left) {
                (false, false) => Action::Done,
                (true, false) => Action::AppendA,
                (false, true) => Action::AppendB,
                // Alternate: whoever is further behind its own start goes next (B started later).
                (true, true) if b + B_JOINS_AFTER - PROMPT_TOKENS <= a_tokens => Action::AppendB,
                (true, true) => Action::AppendA,
            }
        }
    }
}

/// Which stream of values a token of `request` (0 = A, 1 = B) at `position` comes from: the
/// prompt is the same text for both requests, so it is the same stream.
pub fn value_stream(request: u32, position: u64) -> u64 {
    if position < PROMPT_TOKENS { 0 } else { u64::from(request) + 1 }
}

/// What a value is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tensor {
    K = 1,
    V = 2,
    Q = 3,
}

/// `n` deterministic values in `[-1, 1)` for one token: a hash of (stream, layer slot, position,
/// tensor, index), so any row can be recomputed later (the CPU check) without storing it.
pub fn token_values(stream: u64, layer_slot: u32, position: u64, tensor: Tensor, n: usize) -> Vec<f32> {
    let base = splitmix(
        stream ^ splitmix(u64::from(layer_slot) << 8 ^ tensor as u64) ^ splitmix(position.wrapping_add(0x51ed)),
    );
    (0..n as u64)
        .map(|i| {
            let bits = splitmix(base ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            // Top 24 bits -> [0, 1) exactly representable in f32, then to [-1, 1).
            ((bits >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn model(id: &str) -> Model {
        preset(id).cloned().unwrap_or_else(|| panic!("{id}"))
    }

    #[test]
    fn layers_per_kind_with_real_geometry() {
        let l = demo_layers(&model("gemma-3-27b"), 256);
        assert_eq!(l.len(), 2);
        assert_eq!((l[0].h_q, l[0].h_kv, l[0].run_dim), (32, 16, 128));
        let g4 = demo_layers(&model("gemma-4-12b"), 256);
        let global = g4.iter().find(|d| d.kind == LayerKind::Global).copied();
        assert!(global.is_some_and(|g| g.model_dim == 512 && g.run_dim == 256 && g.k_eq_v && g.is_narrowed()));
        let ds = demo_layers(&model("deepseek-v3"), 256);
        assert_eq!((ds[0].h_kv, ds[0].model_dim, ds[0].run_dim), (1, 576, 256));
    }

    #[test]
    fn run_length_covers_windows() {
        assert_eq!(run_tokens(&model("llama-3-8b")), MIN_RUN_TOKENS);
        assert_eq!(run_tokens(&model("gemma-3-27b")), 1024 + 96);
        assert_eq!(run_tokens(&model("mistral-7b")), 4096 + 96);
        // Llama 4's 8,192-token chunks are longer than any demo run.
        assert_eq!(run_tokens(&model("llama-4-scout")), MIN_RUN_TOKENS);
    }

    #[test]
    fn the_prompt_pages_b_shares() {
        // 40-token prompt: 2 full pages of 16 = 32 tokens; Gemma's 1,024-token windows still hold them
        // when B arrives at 88 tokens.
        assert_eq!(shared_prompt_tokens(&model("llama-3-8b")), 32);
        assert_eq!(shared_prompt_tokens(&model("gemma-3-27b")), 32);
        // A 64-token window: at 88 tokens A keeps 24..88, and has dropped page 0 (tokens 0..16).
        let small = crate::model::encoding::decode_model("L4.d256.h4.kv2.pat1w64-1g").unwrap();
        assert_eq!(shared_prompt_tokens(&small), 0);
        // With the pool's copy-on-write B reads all 40 prompt tokens from A's 3 pages, copies the 8 in
        // the partly filled third when it first writes, and keeps the 2 full pages shared.
        let llama = PromptSharing { on_arrival: 40, copied: 8, kept_shared: 32 };
        assert_eq!(prompt_sharing(&model("llama-3-8b")), llama);
        assert_eq!(prompt_sharing(&model("gemma-3-27b")), llama);
        // The 64-token window dropped page 0: nothing is shared, nothing copied.
        assert_eq!(prompt_sharing(&small), PromptSharing { on_arrival: 0, copied: 0, kept_shared: 0 });
    }

    #[test]
    fn script_order() {
        let run = 100;
        let (mut a, mut b) = (0u64, None::<u64>);
        let mut forks = 0;
        let mut steps = 0;
        loop {
            match next_action(a, b, run) {
                Action::AppendA => a += 1,
                Action::AppendB => *b.get_or_insert(0) += 1,
                Action::ForkB => {
                    assert_eq!(a, B_JOINS_AFTER);
                    forks += 1;
                    b = Some(32);
                }
                Action::Done => break,
            }
            steps += 1;
            assert!(steps < 1000);
        }
        assert_eq!((a, b, forks), (run, Some(run), 1));
    }

    #[test]
    fn values_are_deterministic_and_shared_for_the_prompt() {
        let x = token_values(value_stream(0, 5), 0, 5, Tensor::K, 8);
        let y = token_values(value_stream(1, 5), 0, 5, Tensor::K, 8);
        assert_eq!(x, y, "the prompt is the same text for both requests");
        let a = token_values(value_stream(0, 50), 0, 50, Tensor::K, 8);
        let b = token_values(value_stream(1, 50), 0, 50, Tensor::K, 8);
        assert_ne!(a, b);
        assert_ne!(token_values(0, 0, 5, Tensor::K, 8), token_values(0, 0, 5, Tensor::V, 8));
        assert!(x.iter().all(|v| (-1.0..1.0).contains(v)));
    }
}
