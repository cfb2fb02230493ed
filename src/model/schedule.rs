//! Layer schedules: what each layer mixes tokens with (global, sliding-window or chunked attention;
//! or, in state-space and hybrid models, a layer that keeps a fixed-size state instead of a KV cache)
//! and their counts. The mask each attention kind applies is [`Mask::of_layer`](super::mask::Mask::of_layer).

use std::fmt;

/// How one layer mixes information across tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayerKind {
    /// Full causal attention over every earlier token.
    Global,
    /// Causal attention over the last `window_tokens` tokens (the query included).
    Sliding { window_tokens: u64 },
    /// Causal attention inside fixed chunks of `chunk_tokens` tokens.
    Chunked { chunk_tokens: u64 },
    /// No softmax attention: a recurrent mixer that carries a state of fixed size from token to token
    /// (its size is the model's [`StateGeometry`](super::config::StateGeometry) for that mixer).
    Stateful(StateMixer),
    /// A layer with a feed-forward block and no token mixer at all (Nemotron-H's MLP layers).
    FeedForward,
}

/// The recurrent mixers of state-space and hybrid models. None keeps a KV cache; each keeps the same
/// number of bytes per sequence whatever the context length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateMixer {
    /// A selective state-space layer or gated linear recurrence (Mamba, Mamba-2, Griffin's RG-LRU): a
    /// short convolution window plus the recurrent state.
    Ssm,
    /// Linear attention (Gated DeltaNet, RWKV): a key-by-value state per head, plus any token shift or
    /// convolution window.
    Linear,
    /// A gated short convolution (LFM2): only the last few inputs.
    Conv,
}

impl StateMixer {
    pub const ALL: [StateMixer; 3] = [StateMixer::Ssm, StateMixer::Linear, StateMixer::Conv];

    pub const fn noun(self) -> &'static str {
        match self {
            StateMixer::Ssm => "ssm",
            StateMixer::Linear => "linear",
            StateMixer::Conv => "conv",
        }
    }

    /// What the layer is, in words, for tables and the layer strip.
    pub const fn description(self) -> &'static str {
        match self {
            StateMixer::Ssm => "state-space layer",
            StateMixer::Linear => "linear-attention layer",
            StateMixer::Conv => "short-convolution layer",
        }
    }
}

impl LayerKind {
    pub const fn is_global(self) -> bool {
        matches!(self, LayerKind::Global)
    }

    /// Whether the layer runs softmax attention and so keeps a KV cache (when it stores its own).
    pub const fn is_attention(self) -> bool {
        matches!(self, LayerKind::Global | LayerKind::Sliding { .. } | LayerKind::Chunked { .. })
    }

    /// The recurrent mixer of a layer that keeps a state instead of a KV cache.
    pub const fn state_mixer(self) -> Option<StateMixer> {
        match self {
            LayerKind::Stateful(m) => Some(m),
            _ => None,
        }
    }

    /// The window of a sliding layer or the chunk of a chunked one: where its cache stops growing.
    pub const fn window_tokens(self) -> Option<u64> {
        match self {
            LayerKind::Sliding { window_tokens: w } | LayerKind::Chunked { chunk_tokens: w } => Some(w),
            _ => None,
        }
    }

    /// Short noun for summaries and `data-kind`: "global", "sliding", "chunked", "ssm", "linear",
    /// "conv", "ffn".
    pub const fn noun(self) -> &'static str {
        match self {
            LayerKind::Global => "global",
            LayerKind::Sliding { .. } => "sliding",
            LayerKind::Chunked { .. } => "chunked",
            LayerKind::Stateful(m) => m.noun(),
            LayerKind::FeedForward => "ffn",
        }
    }

    /// Tokens a layer of this kind keeps cached after `n_tokens` tokens: the memory it must hold.
    ///
    /// Global: `n`. Sliding `W`: `min(n, W)`. Chunked `C`: `min(n, C)` — the buffer of one full chunk,
    /// which is what the layer holds at its peak (just before a chunk boundary) and what a runtime
    /// reserves. The tokens actually live at `n` are given by [`LayerKind::live_tokens`].
    /// Layers without attention cache no tokens (their state is counted apart, by size).
    pub const fn cached_tokens(self, n_tokens: u64) -> u64 {
        match self {
            LayerKind::Global => n_tokens,
            LayerKind::Sliding { window_tokens } => min_u64(n_tokens, window_tokens),
            LayerKind::Chunked { chunk_tokens } => min_u64(n_tokens, chunk_tokens),
            LayerKind::Stateful(_) | LayerKind::FeedForward => 0,
        }
    }

    /// Tokens whose K/V the *last* of `n_tokens` processed tokens attended to: for chunked layers the
    /// tokens of its chunk so far, `n - C * floor((n - 1) / C)` (in `1..=C`; it drops back to 1 when a
    /// new chunk starts), which draws the sawtooth of a chunked cache. Same as
    /// [`LayerKind::cached_tokens`] for global and sliding layers.
    pub const fn live_tokens(self, n_tokens: u64) -> u64 {
        match self {
            LayerKind::Chunked { chunk_tokens } if n_tokens > 0 && chunk_tokens > 0 => {
                n_tokens - chunk_tokens * ((n_tokens - 1) / chunk_tokens)
            }
            _ => self.cached_tokens(n_tokens),
        }
    }
}

const fn min_u64(a: u64, b: u64) -> u64 {
    if a < b { a } else { b }
}

impl fmt::Display for LayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayerKind::Global => f.write_str("global"),
            LayerKind::Sliding { window_tokens } => write!(f, "sliding({window_tokens})"),
            LayerKind::Chunked { chunk_tokens } => write!(f, "chunked({chunk_tokens})"),
            LayerKind::Stateful(m) => f.write_str(m.noun()),
            LayerKind::FeedForward => f.write_str("ffn"),
        }
    }
}

/// The kind of every layer, in order. Its length is the model's layer count.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schedule {
    layers: Vec<LayerKind>,
    /// Whether any layer is [`LayerKind::FeedForward`], kept beside the list because the FFN count
    /// asks it for every layer.
    has_feed_forward_layers: bool,
}

/// One row of [`Schedule::counts`]: a layer kind and how many layers have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindCount {
    pub kind: LayerKind,
    pub layers: u32,
}

impl Schedule {
    pub fn from_layers(layers: Vec<LayerKind>) -> Self {
        let has_feed_forward_layers = layers.contains(&LayerKind::FeedForward);
        Schedule { layers, has_feed_forward_layers }
    }

    /// `n_layers` layers, all of one kind (Llama: all global; Mistral 7B: all sliding 4096).
    pub fn uniform(n_layers: u32, kind: LayerKind) -> Self {
        Schedule::from_layers(vec![kind; n_layers as usize])
    }

    /// A repeating unit of `(count, kind)` runs, cycled to fill `n_layers` (a trailing partial unit
    /// keeps its first layers). Gemma 3: `[(5, sliding 1024), (1, global)]`.
    pub fn periodic(n_layers: u32, unit: &[(u32, LayerKind)]) -> Self {
        // Never longer than the model: a unit longer than `n_layers` is simply truncated.
        let flat: Vec<LayerKind> = unit
            .iter()
            .flat_map(|&(count, kind)| std::iter::repeat_n(kind, count as usize))
            .take(n_layers as usize)
            .collect();
        if flat.is_empty() {
            return Schedule::uniform(n_layers, LayerKind::Global);
        }
        Schedule::from_layers((0..n_layers as usize).map(|i| flat[i % flat.len()]).collect())
    }

    /// Same as [`Schedule::periodic`] but the last layer is forced to be global (Gemma 4 does this so
    /// the final layer always sees the whole context).
    pub fn periodic_last_global(n_layers: u32, unit: &[(u32, LayerKind)]) -> Self {
        let mut layers = Schedule::periodic(n_layers, unit).layers;
        if let Some(last) = layers.last_mut() {
            *last = LayerKind::Global;
        }
        Schedule::from_layers(layers)
    }

    /// Whether any layer is a feed-forward-only layer (then the FFNs live there only).
    pub fn has_feed_forward_layers(&self) -> bool {
        self.has_feed_forward_layers
    }

    pub fn layers(&self) -> &[LayerKind] {
        &self.layers
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    pub fn kind(&self, layer: usize) -> Option<LayerKind> {
        self.layers.get(layer).copied()
    }

    /// Layer counts per distinct kind, in order of first appearance.
    pub fn counts(&self) -> Vec<KindCount> {
        let mut out: Vec<KindCount> = Vec::new();
        for &kind in &self.layers {
            match out.iter_mut().find(|c| c.kind == kind) {
                Some(c) => c.layers += 1,
                None => out.push(KindCount { kind, layers: 1 }),
            }
        }
        out
    }

    /// Smallest `p` with `layers[i] == layers[i % p]` for every `i` (the repeating unit).
    ///
    /// Linear time: `n` minus the longest proper border of the whole list (a prefix that is also a
    /// suffix), from the KMP prefix function. Trying each `p` in turn is quadratic, and the summary
    /// and the link code ask for the period on every redraw of a model of up to 4,096 layers.
    pub fn period(&self) -> usize {
        let layers = &self.layers;
        let Some(last) = layers.len().checked_sub(1) else { return 0 };
        // border[i]: length of the longest proper border of layers[..=i].
        let mut border = vec![0usize; layers.len()];
        for i in 1..layers.len() {
            let mut k = border[i - 1];
            while k > 0 && layers[i] != layers[k] {
                k = border[k - 1];
            }
            if layers[i] == layers[k] {
                k += 1;
            }
            border[i] = k;
        }
        layers.len() - border[last]
    }

    /// The repeating unit as `(count, kind)` runs; `Schedule::periodic(len, &unit)` rebuilds `self`.
    pub fn unit_runs(&self) -> Vec<(u32, LayerKind)> {
        runs(&self.layers[..self.period()])
    }

    /// A short description: "5 sliding : 1 global" (one repeating unit), "all global",
    /// "all sliding", "3 chunked : 1 global". Kinds that occur in several runs of the unit are
    /// summed, so the text stays short for any schedule.
    /// A schedule with no unit that repeats at least twice (Nemotron-H's 52-letter pattern) is
    /// summarised by its whole counts, which a one-period ratio would misstate.
    pub fn summary(&self) -> String {
        let period = self.period();
        let unit = if period * 2 > self.layers.len() { &self.layers[..] } else { &self.layers[..period] };
        let mut per_noun: Vec<(&'static str, u32)> = Vec::new();
        for k in unit {
            match per_noun.iter_mut().find(|(n, _)| *n == k.noun()) {
                Some((_, c)) => *c += 1,
                None => per_noun.push((k.noun(), 1)),
            }
        }
        match per_noun.as_slice() {
            [] => "no layers".to_string(),
            [(noun, _)] => format!("all {noun}"),
            parts => parts.iter().map(|(noun, c)| format!("{c} {noun}")).collect::<Vec<_>>().join(" : "),
        }
    }
}

fn runs(layers: &[LayerKind]) -> Vec<(u32, LayerKind)> {
    let mut out: Vec<(u32, LayerKind)> = Vec::new();
    for &k in layers {
        match out.last_mut() {
            Some((c, last)) if *last == k => *c += 1,
            _ => out.push((1, k)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SW1024: LayerKind = LayerKind::Sliding { window_tokens: 1024 };
    const CH8192: LayerKind = LayerKind::Chunked { chunk_tokens: 8192 };

    #[test]
    fn cached_and_live_tokens() {
        assert_eq!(LayerKind::Global.cached_tokens(131_072), 131_072);
        assert_eq!(SW1024.cached_tokens(100), 100);
        assert_eq!(SW1024.cached_tokens(131_072), 1024);
        assert_eq!(CH8192.cached_tokens(131_072), 8192);
        assert_eq!(CH8192.cached_tokens(5), 5);
        // live tokens of a chunked layer: 8192 at a boundary, 1 just after it.
        assert_eq!(CH8192.live_tokens(8192), 8192);
        assert_eq!(CH8192.live_tokens(8193), 1);
        assert_eq!(CH8192.live_tokens(10_000), 10_000 - 8192);
        assert_eq!(CH8192.live_tokens(0), 0);
        assert_eq!(SW1024.live_tokens(5000), 1024);
        // live <= cached always
        for n in 0..30_000u64 {
            assert!(CH8192.live_tokens(n) <= CH8192.cached_tokens(n));
        }
    }

    #[test]
    fn gemma3_like_schedule() {
        let s = Schedule::periodic(62, &[(5, SW1024), (1, LayerKind::Global)]);
        assert_eq!(s.len(), 62);
        // globals at 5, 11, ..., 59: floor(62 / 6) = 10
        assert_eq!(
            s.counts(),
            vec![KindCount { kind: SW1024, layers: 52 }, KindCount { kind: LayerKind::Global, layers: 10 }]
        );
        assert_eq!(s.summary(), "5 sliding : 1 global");
        assert_eq!(s.period(), 6);
        assert_eq!(Schedule::periodic(62, &s.unit_runs()), s);
        assert_eq!(s.kind(5), Some(LayerKind::Global));
        assert_eq!(s.kind(61), Some(SW1024));
        assert_eq!(s.kind(62), None);
    }

    #[test]
    fn summaries() {
        assert_eq!(Schedule::uniform(32, LayerKind::Global).summary(), "all global");
        assert_eq!(Schedule::uniform(32, LayerKind::Sliding { window_tokens: 4096 }).summary(), "all sliding");
        assert_eq!(Schedule::periodic(48, &[(3, CH8192), (1, LayerKind::Global)]).summary(), "3 chunked : 1 global");
        assert_eq!(Schedule::uniform(0, LayerKind::Global).summary(), "no layers");
        // A forced last global breaks the period; the summary still counts each kind.
        let s = Schedule::periodic_last_global(10, &[(5, SW1024), (1, LayerKind::Global)]);
        assert_eq!(s.kind(9), Some(LayerKind::Global));
        assert_eq!(s.summary(), "8 sliding : 2 global");
        assert_eq!(Schedule::from_layers(s.layers().to_vec()), s);
        // Bamba: attention at 9, 18, 27 of 32, Mamba elsewhere. The shortest repeating unit is the
        // first 28 layers (25 Mamba, 3 attention), which would misstate the 29 : 3 of the whole.
        let ssm = LayerKind::Stateful(StateMixer::Ssm);
        let bamba: Vec<LayerKind> =
            (0..32).map(|l| if [9, 18, 27].contains(&l) { LayerKind::Global } else { ssm }).collect();
        assert_eq!(Schedule::from_layers(bamba).summary(), "29 ssm : 3 global");
    }

    #[test]
    fn periods_by_hand_and_of_the_longest_schedules() {
        let (g, w) = (LayerKind::Global, SW1024);
        let period = |layers: &[LayerKind]| Schedule::from_layers(layers.to_vec()).period();
        assert_eq!(period(&[]), 0);
        assert_eq!(period(&[g]), 1);
        // A partial last unit still repeats: w w g w w has period 3.
        assert_eq!(period(&[w, w, g, w, w]), 3);
        assert_eq!(period(&[w, g, w, w, g, w]), 3);
        assert_eq!(period(&[w, w, w, g]), 4);
        assert_eq!(period(&[g, w, g, g, w, g, w]), 5);
        // 4,095 sliding layers and a last global one (the quadratic worst case): no shorter unit.
        let mut layers = vec![w; 4095];
        layers.push(g);
        assert_eq!(period(&layers), 4096);
        assert_eq!(Schedule::periodic(4096, &[(2, w), (1, CH8192)]).period(), 3);
    }

    #[test]
    fn periodic_with_empty_unit_is_global() {
        assert_eq!(Schedule::periodic(3, &[]), Schedule::uniform(3, LayerKind::Global));
        assert_eq!(Schedule::periodic(3, &[(0, SW1024)]), Schedule::uniform(3, LayerKind::Global));
    }
}
