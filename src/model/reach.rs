//! How far back information can travel through a stack of layers: the reach of stacked windows.
//!
//! With the mask conventions of [`super::mask`] (a sliding window `W` lets the query at `q` see keys
//! `q - W + 1 ..= q`), one sliding layer carries information at most `W - 1` positions forward. A
//! token's output of the next layer reads those outputs in turn, so after `L` sliding layers of `W`
//! the output at `q` can depend on inputs back to `q - L(W - 1)`: windows add up. A global layer
//! anywhere in the stack sees every earlier token, so past it the reach is the whole context. A
//! chunked layer reads back only to the start of its chunk, and since every chunked layer cuts at
//! the same boundaries, stacking them adds nothing.
//!
//! The earliest input that can reach the output at `q` of layers `0..L` is `f_0(f_1(...f_{L-1}(q)))`,
//! `f_i(p)` being the earliest key layer `i` shows the query at `p` (each `f` grows with `p`, so the
//! earliest of a range is that of its start). Residual connections carry `q` itself, which is in range.

use super::schedule::LayerKind;

/// How far back information reaches through a stack of layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// A global layer is in the stack: every earlier token.
    Everything,
    /// Exactly this many positions back at most (over every query position).
    Tokens(u64),
    /// At most this many: chunk sizes whose common period is too long to check every phase.
    AtMost(u64),
}

/// The earliest key position the query at `q` sees in a layer of `kind`. A recurrent layer's state
/// folds in every earlier token; a feed-forward-only layer mixes nothing.
fn earliest_visible(kind: LayerKind, q: u64) -> u64 {
    match kind {
        LayerKind::Global | LayerKind::Stateful(_) => 0,
        LayerKind::FeedForward => q,
        LayerKind::Sliding { window_tokens } => q.saturating_sub(window_tokens.max(1) - 1),
        LayerKind::Chunked { chunk_tokens } => q - q % chunk_tokens.max(1),
    }
}

/// The earliest input position that can influence the output at `q` of `layers` (first to last).
pub fn earliest_influence(layers: &[LayerKind], q: u64) -> u64 {
    layers.iter().rev().fold(q, |p, &kind| earliest_visible(kind, p))
}

/// Longest common period of chunk boundaries checked phase by phase (times the layer count).
const MAX_PHASE_STEPS: u64 = 1 << 22;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The farthest back, over every query position, that information travels through `layers`.
pub fn stacked_reach(layers: &[LayerKind]) -> Reach {
    if layers.iter().any(|k| matches!(k, LayerKind::Global | LayerKind::Stateful(_))) {
        return Reach::Everything;
    }
    let (mut windows, mut chunks, mut period) = (0u64, 0u64, Some(1u64));
    for &kind in layers {
        match kind {
            LayerKind::Sliding { window_tokens } => windows = windows.saturating_add(window_tokens.max(1) - 1),
            LayerKind::Chunked { chunk_tokens } => {
                let c = chunk_tokens.max(1);
                chunks = chunks.saturating_add(c - 1);
                period = period.and_then(|p| (p / gcd(p, c)).checked_mul(c));
            }
            LayerKind::Global | LayerKind::Stateful(_) | LayerKind::FeedForward => {}
        }
    }
    if chunks == 0 {
        return Reach::Tokens(windows);
    }
    let bound = windows.saturating_add(chunks);
    let steps = period.and_then(|p| p.checked_mul(layers.len() as u64));
    let (Some(period), Some(true)) = (period, steps.map(|s| s <= MAX_PHASE_STEPS)) else {
        return Reach::AtMost(bound);
    };
    // Far enough from the start that no layer clips at position 0, the reach repeats with the period
    // of the chunk boundaries; nearer the start it can only be shorter.
    let Some(start) = (bound / period + 1).checked_mul(period) else { return Reach::AtMost(bound) };
    let farthest = (start..start + period).map(|q| q - earliest_influence(layers, q)).max().unwrap_or(0);
    Reach::Tokens(farthest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn sw(window_tokens: u64) -> LayerKind {
        LayerKind::Sliding { window_tokens }
    }

    const fn ch(chunk_tokens: u64) -> LayerKind {
        LayerKind::Chunked { chunk_tokens }
    }

    #[test]
    fn stacked_windows_add_up() {
        // One window of 3: the query at 10 sees 8, 9, 10, so 2 back. Four of them: 4 x 2 = 8.
        assert_eq!(earliest_influence(&[sw(3)], 10), 8);
        assert_eq!(earliest_influence(&[sw(3); 4], 10), 2);
        assert_eq!(stacked_reach(&[sw(3); 4]), Reach::Tokens(8));
        // Near the start there is less before the token: the query at 5 reaches position 0.
        assert_eq!(earliest_influence(&[sw(3); 4], 5), 0);
        // Mistral 7B: 32 layers of 4,096: 32 x 4,095 = 131,040.
        assert_eq!(stacked_reach(&[sw(4096); 32]), Reach::Tokens(131_040));
        // Windows of different sizes: (1,024 - 1) + (4 - 1) = 1,026. A window of 1 carries nothing.
        assert_eq!(stacked_reach(&[sw(1024), sw(4), sw(1)]), Reach::Tokens(1026));
        assert_eq!(stacked_reach(&[]), Reach::Tokens(0));
    }

    #[test]
    fn a_global_layer_reaches_everything() {
        // Gemma 3: five sliding layers of 1,024, then a global one.
        let mut gemma = vec![sw(1024); 5];
        assert_eq!(stacked_reach(&gemma), Reach::Tokens(5 * 1023));
        gemma.push(LayerKind::Global);
        assert_eq!(stacked_reach(&gemma), Reach::Everything);
        assert_eq!(earliest_influence(&gemma, 1_000_000), 0);
    }

    #[test]
    fn chunks_do_not_add_up() {
        // Chunks of 4: the query at 7 (last of chunk 4..8) reads back to 4, 3 back; stacking changes nothing.
        assert_eq!(earliest_influence(&[ch(4)], 7), 4);
        assert_eq!(stacked_reach(&[ch(4); 3]), Reach::Tokens(3));
        // A window of 3 below chunks of 4: the query at 7 reads back to 4, whose window reaches 2: 5 back.
        // Chunks below the window: the query at 9 reads 7..=9, and 7's chunk starts at 4: 5 back again.
        assert_eq!(earliest_influence(&[sw(3), ch(4)], 7), 2);
        assert_eq!(earliest_influence(&[ch(4), sw(3)], 9), 4);
        assert_eq!(stacked_reach(&[sw(3), ch(4)]), Reach::Tokens(5));
        assert_eq!(stacked_reach(&[ch(4), sw(3)]), Reach::Tokens(5));
        // Llama 4's three chunked layers between global ones: 8,191.
        assert_eq!(stacked_reach(&[ch(8192); 3]), Reach::Tokens(8191));
    }

    #[test]
    fn chunk_periods_too_long_to_check_give_a_bound() {
        // Chunks of 8,191 and 8,192 repeat only every 67,100,672 positions: bounded by 8,190 + 8,191.
        assert_eq!(stacked_reach(&[ch(8191), ch(8192)]), Reach::AtMost(16_381));
        // Absurd sizes never overflow or panic.
        assert_eq!(stacked_reach(&[sw(u64::MAX), sw(u64::MAX)]), Reach::Tokens(u64::MAX));
        assert!(matches!(stacked_reach(&[ch(u64::MAX), sw(0), ch(0)]), Reach::AtMost(_) | Reach::Tokens(_)));
    }
}
