//! Inputs of every head of one layer of a real model layout, with synthetic (seeded) weights.
//!
//! The layout is the model's: query heads, KV heads, head width, the layer's mask (global causal,
//! sliding window, chunked), K=V where the model shares them, and its positional scheme (sinusoidal or
//! learned positions added to the embeddings, RoPE with the layer's theta and partial rotary fraction,
//! or none; an ALiBi layer adds nothing to Q or K and its score bias is not drawn). The embeddings (width [`D_MODEL`]) and the projections are seeded random numbers, and the
//! first query heads can be designed teaching heads ([`super::teaching_heads`]). The output projection
//! W_O, `[n_q_heads · d, D_MODEL]`, is seeded the same way, one block of `d` rows per query head.

use std::collections::HashMap;
use std::ops::Range;

use super::inputs::{add_sinusoidal_positions, embed, projection};
use super::rope::RopeTable;
use super::teaching_heads::{Designer, TeachingHead};
use crate::model::{LayerKind, Model, Positional};

/// Width of the synthetic embeddings (small: the head width is the model's, projections are seeded).
pub const D_MODEL: usize = 64;

/// Gain on the query projection, so seeded heads show some structure instead of near-uniform rows.
const Q_GAIN: f32 = 2.0;

/// What one layer of a model looks like to attention.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerLayout {
    pub layer: u32,
    pub kind: LayerKind,
    pub n_q_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub k_eq_v: bool,
    pub positional: Positional,
    /// MLA (DeepSeek): shown as its decompressed per-head K/V, one KV head per query head.
    pub mla: bool,
    /// False when the layer reads another layer's cache (cross-layer sharing).
    pub stores_kv: bool,
}

impl LayerLayout {
    pub fn of(model: &Model, layer: u32) -> Self {
        let kind = model.schedule.kind(layer as usize).unwrap_or(LayerKind::Global);
        let geometry = model.geometry(kind);
        let positional = model.positional_for(kind);
        let (n_kv_heads, head_dim, positional) = match model.mla {
            Some(m) => {
                let d = m.qk_nope_head_dim + m.qk_rope_head_dim;
                let fraction = f64::from(m.qk_rope_head_dim) / f64::from(d.max(1));
                let theta = match positional {
                    Positional::Rope { theta, .. } => theta,
                    _ => 10_000.0,
                };
                let rope = Positional::Rope {
                    theta,
                    partial_rotary_factor: fraction,
                    proportional: false,
                    linear_factor: 1.0,
                };
                (model.n_q_heads, d, rope)
            }
            None => (geometry.n_kv_heads, geometry.head_dim, positional),
        };
        Self {
            layer,
            kind,
            n_q_heads: model.n_q_heads,
            n_kv_heads,
            head_dim,
            k_eq_v: geometry.k_eq_v && model.mla.is_none(),
            positional,
            mla: model.mla.is_some(),
            stores_kv: model.stores_kv(layer as usize),
        }
    }

    /// Query heads per KV head.
    pub fn group_size(&self) -> u32 {
        self.n_q_heads / self.n_kv_heads.max(1)
    }

    pub fn kv_head(&self, h: u32) -> u32 {
        h / self.group_size().max(1)
    }
}

/// Stream ids that keep every weight matrix's seed distinct.
const STREAM_Q: u64 = 1;
const STREAM_K: u64 = 2;
const STREAM_V: u64 = 3;
const STREAM_O: u64 = 4;

fn weight_seed(seed: u64, layer: u32, stream: u64, head: u32) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (u64::from(layer) << 40)
        ^ (stream << 32)
        ^ u64::from(head).wrapping_mul(0xD1B5_4A32_D192_ED03)
}

/// One side (queries, or keys and values) of the layer's input: tokens, embeddings, positions.
#[derive(Clone, Debug)]
struct Side {
    tokens: Vec<String>,
    /// With additive positions: `[n, D_MODEL]` per position. Otherwise per distinct token
    /// (`ids[i]` indexes its row), so projections cost the vocabulary, not the length.
    x: Vec<f32>,
    ids: Option<Vec<u32>>,
    /// The layer's RoPE, applied to each piece of rows as it is made (a table for 65,536 positions
    /// took long to build and 32 MB to hold).
    rope: Option<Positional>,
}

impl Side {
    fn new(tokens: Vec<String>, layout: &LayerLayout, seed: u64) -> Self {
        match layout.positional {
            Positional::Sinusoidal | Positional::Learned { .. } => {
                let mut x = embed(&tokens, D_MODEL, seed);
                add_sinusoidal_positions(&mut x, D_MODEL);
                Self { tokens, x, ids: None, rope: None }
            }
            // ALiBi adds nothing to Q or K (its bias acts on the scores, which the kernels do not take).
            Positional::Rope { .. } | Positional::NoPe | Positional::Alibi => {
                let mut index: HashMap<&str, u32> = HashMap::new();
                let mut distinct: Vec<String> = Vec::new();
                let ids = tokens
                    .iter()
                    .map(|t| {
                        *index.entry(t.as_str()).or_insert_with(|| {
                            distinct.push(t.clone());
                            distinct.len() as u32 - 1
                        })
                    })
                    .collect();
                let x = embed(&distinct, D_MODEL, seed);
                let rope = matches!(layout.positional, Positional::Rope { .. }).then_some(layout.positional);
                Self { tokens, x, ids: Some(ids), rope }
            }
        }
    }

    /// A head's projection `x · w`: done at once for the distinct tokens, or left to each piece of
    /// rows when `x` holds every position (projecting 65,536 positions at once held the page).
    fn project(&self, w: Vec<f32>, d: usize) -> Projected {
        match self.ids {
            Some(_) => Projected::Distinct(super::inputs::matmul(&self.x, &w, D_MODEL, d)),
            None => Projected::PerPosition(w),
        }
    }

    /// Rows `range` of a head, `[range, d]`, from its projection, rotated when `rotate` and the layer
    /// uses RoPE.
    fn rows(&self, projected: &Projected, d: usize, rotate: bool, range: Range<usize>) -> Vec<f32> {
        let mut out = match (projected, &self.ids) {
            (Projected::Distinct(rows), Some(ids)) => {
                let mut out = Vec::with_capacity(range.len() * d);
                for &id in &ids[range.clone()] {
                    out.extend_from_slice(&rows[id as usize * d..][..d]);
                }
                out
            }
            (Projected::PerPosition(w), _) => {
                super::inputs::matmul(&self.x[range.start * D_MODEL..range.end * D_MODEL], w, D_MODEL, d)
            }
            (Projected::Distinct(_), None) => unreachable!("a side projects distinct tokens only when it has ids"),
        };
        if rotate && let Some(positional) = self.rope {
            RopeTable::for_positions(range.clone(), d, positional).rotate_rows(&mut out, d, range.start);
        }
        out
    }
}

/// A head's projection of one side ([`Side::project`]).
enum Projected {
    /// `x · w` for each distinct token.
    Distinct(Vec<f32>),
    /// The weights `w`, applied to each piece of positions as it is made.
    PerPosition(Vec<f32>),
}

/// One head's Q, K or V, made a piece of rows at a time ([`HeadRows::rows`]), so a long input can be
/// built between other work.
pub struct HeadRows<'a> {
    inputs: &'a LayerInputs,
    make: MadeBy,
}

enum MadeBy {
    DesignedQueries(TeachingHead),
    DesignedKeys,
    /// Seeded weights: the side's projected rows, laid out and (for Q and K) rotated by position.
    Projection {
        keys: bool,
        projected: Projected,
        rotate: bool,
    },
}

impl HeadRows<'_> {
    /// Rows (tokens) of the head.
    pub fn len(&self) -> usize {
        match self.make {
            MadeBy::DesignedQueries(_) => self.inputs.queries.tokens.len(),
            MadeBy::DesignedKeys => self.inputs.kv_side().tokens.len(),
            MadeBy::Projection { keys, .. } => self.side(keys).tokens.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows `range`, `[range, d]`.
    pub fn rows(&self, range: Range<usize>) -> Vec<f32> {
        let inputs = self.inputs;
        let d = inputs.layout.head_dim as usize;
        match (&self.make, &inputs.designer) {
            (MadeBy::DesignedQueries(kind), Some(des)) => {
                des.queries(*kind, &inputs.queries.tokens[range.clone()], range.start, inputs.kv_tokens().len())
            }
            (MadeBy::DesignedKeys, Some(des)) => des.keys_rows(&inputs.kv_side().tokens, range),
            (MadeBy::Projection { keys, projected, rotate }, _) => self.side(*keys).rows(projected, d, *rotate, range),
            // Designed rows exist only with a designer.
            (_, None) => vec![0.0; range.len() * d],
        }
    }

    /// Every row, `[len, d]`.
    pub fn all(&self) -> Vec<f32> {
        self.rows(0..self.len())
    }

    fn side(&self, keys: bool) -> &Side {
        if keys { self.inputs.kv_side() } else { &self.inputs.queries }
    }
}

/// Everything needed to produce any head's Q, K and V for one layer and one input.
#[derive(Clone, Debug)]
pub struct LayerInputs {
    pub layout: LayerLayout,
    pub seed: u64,
    /// Whether the first query heads are designed teaching heads.
    pub teaching: bool,
    queries: Side,
    /// `None`: self-attention (keys are the queries' tokens).
    keys: Option<Side>,
    designer: Option<Designer>,
}

impl LayerInputs {
    /// Self-attention over `tokens`, or cross-attention when `kv_tokens` is given (queries from
    /// `tokens`, keys and values from `kv_tokens`, each side with its own positions from 0).
    pub fn new(
        layout: LayerLayout,
        tokens: Vec<String>,
        kv_tokens: Option<Vec<String>>,
        seed: u64,
        teaching: bool,
    ) -> Self {
        let d = layout.head_dim as usize;
        let designer =
            (teaching && d >= 8).then(|| Designer::new(d, &tokens, kv_tokens.as_deref().unwrap_or(&tokens), seed));
        let queries = Side::new(tokens, &layout, seed);
        let keys = kv_tokens.map(|t| Side::new(t, &layout, seed));
        Self { layout, seed, teaching, queries, keys, designer }
    }

    pub fn q_tokens(&self) -> &[String] {
        &self.queries.tokens
    }

    pub fn kv_tokens(&self) -> &[String] {
        &self.keys.as_ref().unwrap_or(&self.queries).tokens
    }

    pub fn is_cross(&self) -> bool {
        self.keys.is_some()
    }

    fn kv_side(&self) -> &Side {
        self.keys.as_ref().unwrap_or(&self.queries)
    }

    /// The designed head at query head `h`, if any.
    pub fn teaching_head(&self, h: u32) -> Option<TeachingHead> {
        self.designer.as_ref().and(TeachingHead::for_head(h)).filter(|_| h < self.layout.n_q_heads)
    }

    /// Whether KV head `g` carries the designed key layout (it serves a teaching head).
    fn designed_kv(&self, g: u32) -> bool {
        (0..self.layout.n_q_heads).any(|h| self.layout.kv_head(h) == g && self.teaching_head(h).is_some())
    }

    /// Query head `h`, `[n_q, d]`.
    pub fn q_head(&self, h: u32) -> Vec<f32> {
        self.q_rows(h).all()
    }

    /// Query head `h`, to be made a piece of rows at a time.
    pub fn q_rows(&self, h: u32) -> HeadRows<'_> {
        let make = match self.teaching_head(h) {
            Some(kind) if self.designer.is_some() => MadeBy::DesignedQueries(kind),
            _ => {
                let d = self.layout.head_dim as usize;
                let w: Vec<f32> = projection(D_MODEL, d, weight_seed(self.seed, self.layout.layer, STREAM_Q, h))
                    .iter()
                    .map(|x| x * Q_GAIN)
                    .collect();
                MadeBy::Projection { keys: false, projected: self.queries.project(w, d), rotate: true }
            }
        };
        HeadRows { inputs: self, make }
    }

    /// K of KV head `g`, `[n_kv, d]` (all a heatmap needs).
    pub fn k_head(&self, g: u32) -> Vec<f32> {
        self.k_rows(g).all()
    }

    /// K of KV head `g`, to be made a piece of rows at a time.
    pub fn k_rows(&self, g: u32) -> HeadRows<'_> {
        let make = if self.designer.is_some() && self.designed_kv(g) {
            MadeBy::DesignedKeys
        } else {
            let d = self.layout.head_dim as usize;
            let w = projection(D_MODEL, d, weight_seed(self.seed, self.layout.layer, STREAM_K, g));
            MadeBy::Projection { keys: true, projected: self.kv_side().project(w, d), rotate: true }
        };
        HeadRows { inputs: self, make }
    }

    /// KV head `g`: K and V, `[n_kv, d]` each (V is K where the layer shares them).
    pub fn kv_head(&self, g: u32) -> (Vec<f32>, Vec<f32>) {
        let k = self.k_head(g);
        let v = if self.layout.k_eq_v {
            k.clone()
        } else {
            let d = self.layout.head_dim as usize;
            let w = projection(D_MODEL, d, weight_seed(self.seed, self.layout.layer, STREAM_V, g));
            let make = MadeBy::Projection { keys: true, projected: self.kv_side().project(w, d), rotate: false };
            HeadRows { inputs: self, make }.all()
        };
        (k, v)
    }

    /// Query head `h`'s block of the output projection: rows `h·d .. (h+1)·d` of W_O, `[d, D_MODEL]`.
    /// Seeded random like the other projections (no head is designed to write anything in particular).
    pub fn w_o_block(&self, h: u32) -> Vec<f32> {
        let d = self.layout.head_dim as usize;
        projection(d, D_MODEL, weight_seed(self.seed, self.layout.layer, STREAM_O, h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::model::Mask;

    fn toks(s: &str) -> Vec<String> {
        crate::attention::inputs::word_tokens(s)
    }

    #[test]
    fn layouts_of_real_models() {
        let gemma = preset("gemma-3-27b").unwrap();
        let l0 = LayerLayout::of(gemma, 0);
        assert_eq!((l0.n_q_heads, l0.n_kv_heads, l0.head_dim, l0.group_size()), (32, 16, 128, 2));
        assert_eq!(Mask::of_layer(l0.kind), Some(Mask::Sliding { window_tokens: 1024 }));
        assert_eq!(Mask::of_layer(LayerLayout::of(gemma, 5).kind), Some(Mask::Causal));
        let g4 = LayerLayout::of(preset("gemma-4-12b").unwrap(), 5);
        assert_eq!((g4.n_kv_heads, g4.head_dim, g4.k_eq_v), (1, 512, true));
        assert!(
            matches!(g4.positional, Positional::Rope { partial_rotary_factor, .. } if partial_rotary_factor == 0.25)
        );
        let scout = LayerLayout::of(preset("llama-4-scout").unwrap(), 0);
        assert_eq!(Mask::of_layer(scout.kind), Some(Mask::Chunked { chunk_tokens: 8192 }));
        assert_eq!(LayerLayout::of(preset("llama-4-scout").unwrap(), 3).positional, Positional::NoPe);
        let ds = LayerLayout::of(preset("deepseek-v3").unwrap(), 0);
        assert_eq!((ds.n_q_heads, ds.n_kv_heads, ds.head_dim, ds.mla), (128, 128, 192, true));
        let llama = LayerLayout::of(preset("llama-3-8b").unwrap(), 0);
        assert_eq!((llama.kv_head(0), llama.kv_head(3), llama.kv_head(4), llama.kv_head(31)), (0, 0, 1, 7));
    }

    #[test]
    fn inputs_are_deterministic_and_shaped() {
        let layout = LayerLayout::of(preset("llama-3-8b").unwrap(), 2);
        let a = LayerInputs::new(layout.clone(), toks("the cat sat on the mat"), None, 7, true);
        let b = LayerInputs::new(layout.clone(), toks("the cat sat on the mat"), None, 7, true);
        assert_eq!(a.q_head(9), b.q_head(9));
        assert_eq!(a.q_head(9).len(), 6 * 128);
        let (k, v) = a.kv_head(3);
        assert_eq!((k.len(), v.len()), (6 * 128, 6 * 128));
        assert_ne!(k, v);
        assert_ne!(a.q_head(9), a.q_head(10));
        let c = LayerInputs::new(layout, toks("the cat sat on the mat"), None, 8, true);
        assert_ne!(a.q_head(9), c.q_head(9));
        assert_eq!(a.teaching_head(0), Some(TeachingHead::PreviousToken));
        assert_eq!(a.teaching_head(6), None);
    }

    #[test]
    fn an_alibi_layer_adds_no_position_to_q_or_k() {
        let mut model = Model::simple(2, 256, 4);
        model.positional = Positional::Alibi;
        let alibi = LayerLayout::of(&model, 1);
        model.positional = Positional::NoPe;
        let nope = LayerLayout::of(&model, 1);
        let tokens = toks("a b a");
        let a = LayerInputs::new(alibi.clone(), tokens.clone(), None, 5, false);
        let n = LayerInputs::new(nope, tokens, None, 5, false);
        // Nothing added to Q or K: the same token gives the same row wherever it stands, as with NoPE.
        let q = a.q_head(1);
        assert_eq!(q[..64], q[2 * 64..3 * 64]);
        assert_eq!(q, n.q_head(1));
        assert_eq!(a.kv_head(0), n.kv_head(0));
    }

    #[test]
    fn token_caching_equals_projecting_every_position() {
        // With RoPE the projection is done per distinct token; it must equal the direct computation.
        let layout = LayerLayout::of(preset("llama-3-8b").unwrap(), 0);
        let tokens = toks("a b a c b a");
        let inputs = LayerInputs::new(layout.clone(), tokens.clone(), None, 3, false);
        let d = 128;
        let w: Vec<f32> = projection(D_MODEL, d, weight_seed(3, 0, STREAM_Q, 5)).iter().map(|x| x * Q_GAIN).collect();
        let mut direct = super::super::inputs::matmul(&embed(&tokens, D_MODEL, 3), &w, D_MODEL, d);
        RopeTable::new(6, d, Positional::rope(500_000.0)).rotate_rows(&mut direct, d, 0);
        assert_eq!(inputs.q_head(5), direct);
    }

    #[test]
    fn heads_made_in_pieces_of_rows_equal_heads_made_whole() {
        let text: Vec<String> = (0..200).map(|i| format!("w{}", i % 13)).collect();
        for model in ["llama-3-8b", "gpt2-small", "gemma-4-12b"] {
            let layout = LayerLayout::of(preset(model).unwrap(), 0);
            let inputs = LayerInputs::new(layout, text.clone(), None, 5, true);
            // Head 0 is designed (queries and the keys of its KV head); head 9 and KV head 1 are not.
            for head in [inputs.q_rows(0), inputs.q_rows(9), inputs.k_rows(0), inputs.k_rows(1)] {
                let pieces: Vec<f32> =
                    [0..50, 50..128, 128..199, 199..200].into_iter().flat_map(|r| head.rows(r)).collect();
                assert_eq!(pieces, head.all(), "{model}");
                assert_eq!(head.len(), 200);
            }
        }
    }

    #[test]
    fn k_equals_v_and_cross_attention() {
        let layout = LayerLayout::of(preset("gemma-4-12b").unwrap(), 5);
        let inputs = LayerInputs::new(layout, toks("one two three"), Some(toks("un deux trois quatre")), 1, false);
        let (k, v) = inputs.kv_head(0);
        assert_eq!(k, v);
        assert_eq!(k.len(), 4 * 512);
        assert_eq!(inputs.q_head(0).len(), 3 * 512);
        assert!(inputs.is_cross());
        assert_eq!(inputs.kv_tokens().len(), 4);
    }
}
